/**
 * The Mounter port (k8s.io/mount-utils Interface, reduced): the mount-point check kubelet's CSI
 * plugin uses in removeMountDir, the bind mounts of the raw-block path, and fresh snapshots of
 * the mount table. The real adapter runs mount/umount with argument arrays and reads
 * /proc/self/mountinfo; the in-memory adapter keeps a table the fake CSI driver writes to.
 */
import type { MountTableSnapshot } from '../mount/mountRefs.js';

export interface Mounter {
  /**
   * IsLikelyNotMountPoint: false when `path` is a mount point (bind mounts included). Rejects
   * with an FsError (ENOENT when the path does not exist).
   */
  isLikelyNotMountPoint(path: string): Promise<boolean>;
  /** mount -t fsType -o options source target ("bind" in options for a bind mount). */
  mount(source: string, target: string, fsType: string, options: readonly string[]): Promise<void>;
  /** umount target; rejects when target is not mounted. */
  unmount(target: string): Promise<void>;
  /** A fresh, strictly parsed snapshot of the mount table. */
  readMountTable(): Promise<MountTableSnapshot>;
}
