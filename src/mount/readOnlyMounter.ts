/**
 * A Mounter that only reads: mount checks and snapshots come from a loader, and mount/unmount
 * are refused. `nodevol audit` runs the CSI plugin with it, which is how the audit proves it can
 * never change the node's mounts.
 */
import type { FileSystem } from '../ports/fs.js';
import type { Mounter, MountTable } from '../ports/mounter.js';

export class ReadOnlyMounterError extends Error {
  override readonly name = 'ReadOnlyMounterError';
}

export class ReadOnlyMounter implements Mounter {
  constructor(
    private readonly fs: FileSystem,
    private readonly load: () => Promise<MountTable>,
  ) {}

  async isLikelyNotMountPoint(path: string): Promise<boolean> {
    await this.fs.stat(path);
    return !(await this.load()).isMountPoint(path);
  }

  mount(source: string, target: string): Promise<void> {
    return Promise.reject(new ReadOnlyMounterError(`refusing to mount ${source} on ${target}: read-only`));
  }

  unmount(target: string): Promise<void> {
    return Promise.reject(new ReadOnlyMounterError(`refusing to unmount ${target}: read-only`));
  }

  readMountTable(): Promise<MountTable> {
    return this.load();
  }
}
