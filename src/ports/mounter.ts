/**
 * The Mounter port (k8s.io/mount-utils Interface, reduced): the mount-point check kubelet's CSI
 * plugin uses in removeMountDir, the bind mounts of the raw-block path, and fresh snapshots of
 * the mount table. The real adapter runs mount/umount with argument arrays and reads
 * /proc/self/mountinfo; the in-memory adapter keeps a table the fake CSI driver writes to.
 *
 * The mount table is handed out as the {@link MountTable} interface below: its implementation
 * (the indexed snapshot, mount/mountRefs.ts) and the mountinfo parser (mount/mountInfo.ts) sit
 * one layer up and implement these types.
 */

/** One line of /proc/self/mountinfo (proc(5)), as kubelet's parser reads it. */
export interface MountInfoEntry {
  readonly id: number;
  readonly parentId: number;
  readonly major: number;
  readonly minor: number;
  /** Root of the mount inside its filesystem; verbatim, octal escapes (\040 etc.) kept. */
  readonly root: string;
  /** Mount point; verbatim, octal escapes kept. */
  readonly mountPoint: string;
  readonly mountOptions: readonly string[];
  readonly optionalFields: readonly string[];
  readonly fsType: string;
  readonly source: string;
  readonly superOptions: readonly string[];
  /** 1-based line number in the parsed text. */
  readonly line: number;
}

/** A line the parser rejected (only collected when parsing with `strict: false`). */
export interface MountInfoProblem {
  readonly line: number;
  readonly text: string;
  readonly error: string;
}

/** Where mountinfo text comes from (live /proc/self/mountinfo or a captured file). */
export interface MountInfoSource {
  /** File name, used in error messages. */
  readonly name: string;
  read(): Promise<string>;
  /**
   * The running kernel's release (uname -r) when `read` reads a live kernel file; undefined for
   * a captured file, which cannot change between reads.
   */
  readonly kernelRelease?: string | undefined;
}

/**
 * One parsed, immutable mount table and the look-ups kubelet makes on it. Paths given to the
 * queries are plain; mount points and roots in the entries stay escaped as the kernel wrote them.
 */
export interface MountTable {
  readonly entries: readonly MountInfoEntry[];
  /** Lines a lenient parse skipped (empty for a strict parse). */
  readonly problems: readonly MountInfoProblem[];
  /**
   * SearchMountPoints' first step: the last entry whose mount point equals `path` or is an
   * ancestor of it; undefined if none.
   */
  findMountFor(path: string): MountInfoEntry | undefined;
  /**
   * kubelet SearchMountPoints: the mount points (verbatim) of every other entry of the same
   * device and root as the one containing `path`, in file order. Throws when no entry contains `path`.
   */
  searchMountPoints(path: string): string[];
  /** Whether `path` (escaped as the kernel escapes it) is a mount point. For display. */
  isMountPoint(path: string): boolean;
  /** Mount points (decoded for display) of the entries at or below `path`, in file order. */
  mountsUnder(path: string): string[];
}

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
  readMountTable(): Promise<MountTable>;
}
