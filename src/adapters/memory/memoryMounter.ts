/**
 * The Mounter port over an in-memory mount table, for tests and the simulator.
 *
 * The table is an ordered list of entries shaped like /proc/self/mountinfo lines. It starts with
 * the root filesystem ("/", 8:1, root "/"). `readMountTable()` renders the list as mountinfo text
 * (mount points escaped the way the kernel escapes them) and parses it back strictly, so code
 * under test sees exactly what it would read from the kernel.
 *
 * Kernel behaviour modelled:
 *  - mount and umount resolve their paths through the FileSystem (symlinks followed), so the
 *    table holds canonical paths; a missing path rejects with ENOENT;
 *  - a bind mount gets the major:minor of the mount holding its source and
 *    root = that mount's root joined with the source's path inside it (what SearchMountPoints
 *    inverts); a directory cannot be bound onto a file or the reverse (ENOTDIR);
 *  - a device mount gets the device's major:minor (259:N, one N per distinct source device, kept
 *    across reboots) and root "/", and needs a directory target (ENOTDIR);
 *  - umount removes the most recent mount at the path (stacked mounts come off one at a time);
 *    a path that is not a mount point rejects with EINVAL;
 *  - when the FileSystem is a {@link MemFs}, a mount point cannot be removed or renamed (EBUSY).
 * Not modelled: mount propagation, mount namespaces, a mount hiding the directory's content.
 */
import * as posix from 'node:path/posix';

import { FsError, type FileSystem } from '../../ports/fs.js';
import { escapeMountPath } from '../../mount/mountInfo.js';
import { MountTableSnapshot } from '../../mount/mountRefs.js';
import type { Mounter, MountInfoEntry } from '../../ports/mounter.js';
import { isCleanAbsolute, MemFs } from './memFs.js';

/**
 * One mount, as /proc/self/mountinfo describes it: the ids, device, type and source of a
 * {@link MountInfoEntry}, but paths unescaped and the options given to mount() (the table
 * rendered from these escapes the paths and splits the options as the kernel does).
 */
export interface MemoryMountEntry extends Pick<MountInfoEntry, 'id' | 'parentId' | 'major' | 'minor' | 'fsType' | 'source'> {
  /** Root of the mount inside its filesystem, unescaped. */
  readonly root: string;
  /** Canonical mount point, unescaped. */
  readonly mountPoint: string;
  /** The options passed to mount(), "bind" included. */
  readonly options: readonly string[];
}

export interface MemoryMounterOptions {
  /**
   * When the FileSystem is a MemFs, make it refuse (EBUSY) to remove or rename a mount point,
   * as the kernel does. Default true.
   */
  readonly busyMountPoints?: boolean;
}

const ROOT_ENTRY: MemoryMountEntry = {
  id: 22,
  parentId: 1,
  major: 8,
  minor: 1,
  root: '/',
  mountPoint: '/',
  fsType: 'ext4',
  source: '/dev/sda1',
  options: [],
};

const DEVICE_MAJOR = 259;
const FIRST_MOUNT_ID = 600;
/** Per-mount flags that show up in mountinfo's fifth field. */
const PER_MOUNT_FLAGS: ReadonlySet<string> = new Set(['nosuid', 'nodev', 'noexec', 'noatime', 'nodiratime', 'relatime']);

function cleanPath(p: string): string {
  if (isCleanAbsolute(p)) return p;
  const n = posix.normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

/** Whether `path` is `base` or lies below it (both clean). */
function isWithin(path: string, base: string): boolean {
  return base === '/' || path === base || path.startsWith(`${base}/`);
}

export class MemoryMounter implements Mounter {
  readonly #fs: FileSystem;
  #entries: MemoryMountEntry[] = [ROOT_ENTRY];
  /**
   * The table readMountTable parsed last, until a mount, unmount or reboot changes the entries.
   * A snapshot is immutable, so callers may share it; sharing also keeps its look-up indexes
   * (the engine reads the table for every device's mount refs, mostly with no change between).
   */
  #snapshot: MountTableSnapshot | undefined;
  #nextId = FIRST_MOUNT_ID;
  readonly #minorBySource = new Map<string, number>();
  readonly #unmountFailures = new Map<string, string>();
  /**
   * Successful operations, in order: "mount <source> <target>", "unmount <target>" (arguments
   * as passed) and "reboot". Failed calls are not logged.
   */
  readonly actions: string[] = [];

  constructor(fs: FileSystem, options: MemoryMounterOptions = {}) {
    this.#fs = fs;
    if (fs instanceof MemFs && (options.busyMountPoints ?? true)) fs.setBusyCheck((p) => this.isMounted(p));
  }

  async mount(source: string, target: string, fsType: string, options: readonly string[]): Promise<void> {
    const targetStat = await this.#fs.stat(target);
    const mountPoint = await this.#fs.realpath(target);
    const parent = this.#containing(mountPoint);
    let entry: Omit<MemoryMountEntry, 'id' | 'parentId'>;
    if (options.includes('bind')) {
      const sourceStat = await this.#fs.stat(source);
      if ((sourceStat.type === 'directory') !== (targetStat.type === 'directory')) {
        throw new FsError('ENOTDIR', target, 'mount', `mount --bind ${source} ${target}: ENOTDIR (directory and non-directory)`);
      }
      const realSource = await this.#fs.realpath(source);
      const from = this.#containing(realSource);
      const rest = realSource.slice(from.mountPoint === '/' ? 0 : from.mountPoint.length);
      entry = {
        major: from.major,
        minor: from.minor,
        root: cleanPath(posix.join(from.root, rest === '' ? '/' : rest)),
        mountPoint,
        fsType: from.fsType,
        source: from.source,
        options: [...options],
      };
    } else {
      if (targetStat.type !== 'directory') {
        throw new FsError('ENOTDIR', target, 'mount', `mount ${source} ${target}: ENOTDIR (target is not a directory)`);
      }
      entry = { major: DEVICE_MAJOR, minor: this.#minorFor(source), root: '/', mountPoint, fsType, source, options: [...options] };
    }
    this.#entries.push({ id: this.#nextId++, parentId: parent.id, ...entry });
    this.#snapshot = undefined;
    this.actions.push(`mount ${source} ${target}`);
  }

  async unmount(target: string): Promise<void> {
    const mountPoint = await this.#fs.realpath(target);
    const injected = this.#unmountFailures.get(mountPoint) ?? this.#unmountFailures.get(cleanPath(target));
    if (injected !== undefined) {
      this.#unmountFailures.delete(mountPoint);
      this.#unmountFailures.delete(cleanPath(target));
      throw new FsError(injected, target, 'umount', `umount ${target}: ${injected} (injected)`);
    }
    const index = this.#entries.findLastIndex((e) => e.mountPoint === mountPoint);
    if (index <= 0) throw new FsError('EINVAL', target, 'umount', `umount ${target}: not mounted`);
    this.#entries.splice(index, 1);
    this.#snapshot = undefined;
    this.actions.push(`unmount ${target}`);
  }

  async isLikelyNotMountPoint(path: string): Promise<boolean> {
    await this.#fs.stat(path);
    const real = await this.#fs.realpath(path);
    return !this.#entries.some((e) => e.mountPoint === real);
  }

  readMountTable(): Promise<MountTableSnapshot> {
    try {
      this.#snapshot ??= MountTableSnapshot.parse(this.render(), { strict: true, source: 'memory-mountinfo' });
      return Promise.resolve(this.#snapshot);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  // ---------------------------------------------------------------- test helpers

  /** The table as /proc/self/mountinfo text. */
  render(): string {
    const lines = this.#entries.map((e) => {
      const perMount = [e.options.includes('ro') ? 'ro' : 'rw', ...e.options.filter((o) => PER_MOUNT_FLAGS.has(o))];
      if (!perMount.some((o) => o.endsWith('atime'))) perMount.push('relatime');
      const peerGroup = e.major === ROOT_ENTRY.major && e.minor === ROOT_ENTRY.minor ? 1 : 100 + e.minor;
      return [
        e.id,
        e.parentId,
        `${e.major}:${e.minor}`,
        escapeMountPath(e.root),
        escapeMountPath(e.mountPoint),
        perMount.join(','),
        `shared:${peerGroup}`,
        '-',
        e.fsType === '' ? 'none' : escapeMountPath(e.fsType),
        e.source === '' ? 'none' : escapeMountPath(e.source),
        'rw',
      ].join(' ');
    });
    return `${lines.join('\n')}\n`;
  }

  /** Copies of the entries, in table order (the root entry first). */
  entries(): readonly MemoryMountEntry[] {
    return this.#entries.map((e) => ({ ...e, options: [...e.options] }));
  }

  /** Whether some entry is mounted exactly at `path` (compared after lexical cleaning, no symlinks). */
  isMounted(path: string): boolean {
    const p = cleanPath(path);
    return this.#entries.some((e) => e.mountPoint === p);
  }

  /** A node reboot: every mount but "/" is gone; pending injected failures too. */
  reboot(): void {
    this.#entries = [ROOT_ENTRY];
    this.#snapshot = undefined;
    this.#unmountFailures.clear();
    this.actions.push('reboot');
  }

  /** The next unmount of `target` rejects with an FsError carrying `code`, and unmounts nothing. */
  failNextUnmount(target: string, code: string): void {
    this.#unmountFailures.set(cleanPath(target), code);
  }

  // ---------------------------------------------------------------- internals

  /** The last entry whose mount point is `path` or an ancestor of it (the root entry at least). */
  #containing(path: string): MemoryMountEntry {
    for (let i = this.#entries.length - 1; i >= 0; i--) {
      const e = this.#entries[i];
      if (e !== undefined && isWithin(path, e.mountPoint)) return e;
    }
    return ROOT_ENTRY;
  }

  #minorFor(source: string): number {
    let minor = this.#minorBySource.get(source);
    if (minor === undefined) {
      minor = this.#minorBySource.size + 1;
      this.#minorBySource.set(source, minor);
    }
    return minor;
  }
}
