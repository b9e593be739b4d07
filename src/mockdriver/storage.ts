/**
 * What the mock driver does on the node: bind mounts and unmounts through the Mounter port,
 * staging and target paths made and removed through the FileSystem port, the backing storage of
 * a volume allocated, grown, measured and removed. "Is it mounted" asks the kernel about that
 * one path when it can (mountPoint.ts: its mnt_id against its parent's), never the whole mount
 * table, so a call costs the same with 10 or 10,000 volumes on the node.
 *
 * Every failure is an INTERNAL status naming the path, except where a caller says otherwise.
 */
import * as posix from 'node:path/posix';

import { errorCode, errorMessage, pathExists, removeTreeOneFilesystem, type FileSystem } from '../ports/fs.js';
import type { Clock } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import type { Mounter } from '../ports/mounter.js';
import { escapeMountPath } from '../mount/mountInfo.js';
import { isMountPointByMountId, MountIdUnavailableError } from './mountPoint.js';
import type { MockVolumeKind } from './state.js';
import { internal } from './status.js';

/** How many directory entries NodeGetVolumeStats looks at to count used bytes. */
const MAX_USAGE_ENTRIES = 10_000;
/** How deep a volume's backing tree may be removed (a workload's directories, far below this). */
const MAX_BACKING_DEPTH = 64;
/** How many times an unmount that finds its target busy is tried, and the backoff step between tries. */
const BUSY_UNMOUNT_ATTEMPTS = 5;
const BUSY_UNMOUNT_BACKOFF_MS = 50;
/** How many stacked mounts an unmount loop takes off one path at most. */
const MAX_STACKED_UNMOUNTS = 8;

export interface MockStorageOptions {
  readonly fs: FileSystem;
  readonly mounter: Mounter;
  readonly logger: Logger;
  /** The clock the busy-unmount backoff sleeps on. */
  readonly clock: Clock;
  /** Ask the kernel about one path (mnt_id) instead of the Mounter port: the real kernel and file system only. */
  readonly targetedMountCheck: boolean;
  /** Creates the block backing file of a size. */
  readonly allocate: (filePath: string, sizeBytes: number) => Promise<void>;
  /** Grows an existing block backing file to a size, keeping its data. */
  readonly grow: (filePath: string, sizeBytes: number) => Promise<void>;
}

export class MockStorage {
  readonly #o: MockStorageOptions;
  /** Mount-point checks by mnt_id of the path vs its parent, not by reading the mount table. */
  #targetedMountCheck: boolean;

  constructor(options: MockStorageOptions) {
    this.#o = options;
    this.#targetedMountCheck = options.targetedMountCheck;
  }

  get fs(): FileSystem {
    return this.#o.fs;
  }

  allocate(filePath: string, sizeBytes: number): Promise<void> {
    return this.#o.allocate(filePath, sizeBytes);
  }

  grow(filePath: string, sizeBytes: number): Promise<void> {
    return this.#o.grow(filePath, sizeBytes);
  }

  exists(p: string): Promise<boolean> {
    return pathExists(this.#o.fs, p);
  }

  async requireDirectory(p: string, what: string): Promise<void> {
    let type: string;
    try {
      type = (await this.#o.fs.stat(p)).type;
    } catch (err) {
      throw internal(`${what} ${p} is not accessible: ${errorMessage(err)}`);
    }
    if (type !== 'directory') throw internal(`${what} ${p} is not a directory`);
  }

  /** Creates a target directory (mount) or empty file (block); its parent must exist. */
  async createTarget(target: string, kind: MockVolumeKind): Promise<void> {
    let type: string | undefined;
    try {
      type = (await this.#o.fs.lstat(target)).type;
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw internal(`cannot inspect ${target}: ${errorMessage(err)}`);
    }
    const want = kind === 'block' ? 'file' : 'directory';
    if (type === undefined) {
      try {
        if (kind === 'block') await this.#o.fs.writeFile(target, new Uint8Array(0), { mode: 0o640 });
        else await this.#o.fs.mkdir(target, { recursive: false, mode: 0o750 });
      } catch (err) {
        throw internal(`cannot create ${target}: ${errorMessage(err)}`);
      }
      return;
    }
    if (type !== want) throw internal(`${target} exists and is a ${type}, not a ${want}`);
  }

  async isMountPoint(p: string): Promise<boolean> {
    try {
      if (this.#targetedMountCheck) {
        try {
          return await isMountPointByMountId(p);
        } catch (err) {
          if (!(err instanceof MountIdUnavailableError)) throw err;
          this.#o.logger.warning('The kernel reports no mnt_id; reading the mount table for every check instead', { path: p });
          this.#targetedMountCheck = false;
        }
      }
      return !(await this.#o.mounter.isLikelyNotMountPoint(p));
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return false;
      throw internal(`cannot tell whether ${p} is a mount point: ${errorMessage(err)}`);
    }
  }

  async mount(source: string, target: string, extra: readonly string[]): Promise<void> {
    try {
      await this.#o.mounter.mount(source, target, '', ['bind', ...extra]);
    } catch (err) {
      throw internal(`cannot bind-mount ${source} on ${target}: ${errorMessage(err)}`);
    }
    this.#o.logger.v(2).info('Mounted', { source, target, options: ['bind', ...extra].join(',') });
  }

  /** A `-o bind,ro` that left the mount writable (old mount(8)) is remounted read-only. */
  async ensureReadOnly(source: string, target: string): Promise<void> {
    try {
      const real = escapeMountPath(await this.#o.fs.realpath(target));
      const table = await this.#o.mounter.readMountTable();
      const entry = table.entries.findLast((e) => e.mountPoint === real);
      if (entry === undefined || entry.mountOptions.includes('ro')) return;
      await this.#o.mounter.mount(source, target, '', ['remount', 'bind', 'ro']);
    } catch (err) {
      throw internal(`cannot make ${target} read-only: ${errorMessage(err)}`);
    }
  }

  /** Unmounts `p` until it is no longer a mount point (stacked mounts included). */
  async unmountAll(p: string): Promise<void> {
    for (let i = 0; i < MAX_STACKED_UNMOUNTS && (await this.isMountPoint(p)); i++) {
      for (let attempt = 1; ; attempt++) {
        try {
          await this.#o.mounter.unmount(p);
          break;
        } catch (err) {
          if (errorCode(err) === 'EINVAL' || errorCode(err) === 'ENOENT') return;
          // The mount-point check opens the path for an instant; a mount(8) forked for another
          // volume at that instant holds a copy of that descriptor until it execs. That busy is
          // ours and short: retry a few times before failing.
          if (errorCode(err) !== 'EBUSY' || attempt >= BUSY_UNMOUNT_ATTEMPTS) throw internal(`cannot unmount ${p}: ${errorMessage(err)}`);
          this.#o.logger.v(2).info('Target busy; retrying the unmount', { target: p, attempt });
          await this.#o.clock.sleep(BUSY_UNMOUNT_BACKOFF_MS * attempt);
        }
      }
      this.#o.logger.v(2).info('Unmounted', { target: p });
    }
    if (await this.isMountPoint(p)) throw internal(`${p} is still a mount point after ${MAX_STACKED_UNMOUNTS} unmounts`);
  }

  /** Removes a file; one already gone is fine (other errors are thrown as they are). */
  async removeFile(p: string): Promise<void> {
    try {
      await this.#o.fs.unlink(p);
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw err;
    }
  }

  /**
   * rm -r of a volume's backing storage: never follows a symlink, never descends into a mount
   * point, and on the real file system holds one descriptor per directory so that nothing outside
   * the tree is removed whatever is renamed meanwhile (removeTreeOneFilesystem). A path already
   * gone is fine.
   */
  async removeTree(p: string): Promise<void> {
    try {
      await removeTreeOneFilesystem(this.#o.fs, async (dir) => !(await this.isMountPoint(dir)), p, { directoriesOnly: false, maxDepth: MAX_BACKING_DEPTH });
    } catch (err) {
      if (errorCode(err) !== 'ENOENT' || (await pathExists(this.#o.fs, p))) throw err;
    }
  }

  /** Bytes of the regular files under `dir`, looking at no more than MAX_USAGE_ENTRIES entries. */
  async usedBytes(dir: string): Promise<number> {
    let total = 0;
    let seen = 0;
    const stack = [dir];
    for (let d = stack.pop(); d !== undefined && seen < MAX_USAGE_ENTRIES; d = stack.pop()) {
      let entries;
      try {
        entries = await this.#o.fs.readdir(d);
      } catch {
        continue;
      }
      for (const e of entries) {
        if (++seen > MAX_USAGE_ENTRIES) break;
        const p = posix.join(d, e.name);
        if (e.type === 'directory') stack.push(p);
        else if (e.type === 'file') total += await this.#o.fs.lstat(p).then((st) => st.size, () => 0);
      }
    }
    return total;
  }
}
