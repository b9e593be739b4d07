/**
 * Changes beneath a root directory that no symlink and no race can send elsewhere.
 *
 * Node has no openat(2) or unlinkat(2), and a change made by full path re-resolves every
 * component at the moment of the call: a directory swapped for a symlink (rename, or an atomic
 * RENAME_EXCHANGE) between a listing and an unlink sends the unlink wherever the symlink points.
 * Here a change is made relative to a directory *descriptor* instead:
 *
 * 1. the root is opened (O_DIRECTORY | O_NOFOLLOW);
 * 2. each component of the parent path is opened relative to the descriptor of the one before,
 *    with O_DIRECTORY | O_NOFOLLOW, so a symlink anywhere below the root fails the walk (the
 *    symlink is named in the error) instead of being followed;
 * 3. the change (unlink, rmdir, mkdir, create, rename, symlink) names the final component
 *    relative to the parent's descriptor.
 *
 * The relative naming goes through the process's own `/proc/self/fd/<fd>/<name>`: the kernel
 * resolves `/proc/self/fd/<fd>` as a "magic link" to the very directory the descriptor holds,
 * without looking up any name, and then looks up `<name>` (one component, no slash) in it. That
 * is openat(fd, name) and unlinkat(fd, name) exactly, so every change lands in a directory that
 * was reached from the root through real directories only, whatever is renamed meanwhile; the
 * final component itself is never followed (unlink/rmdir/rename/symlink act on the name; a file
 * is created with O_NOFOLLOW). Linux only: where `/proc/self/fd` is missing, every confined
 * change is refused (ENOTSUP) rather than made by path.
 *
 * What it does not do: it does not stop a writer that can rename directories *inside* the root
 * from moving a directory into the path being changed (such a writer could delete it anyway),
 * and it trusts the root's own ancestors (they are root-owned, outside the tree).
 */
import { close, constants, existsSync, fstat, lstat, mkdir, open, readFileSync, readdir, rename, rmdir, symlink, unlink, type Dirent, type Stats } from 'node:fs';
import * as posix from 'node:path/posix';
import { promisify } from 'node:util';

import { FsError, errorCode, removeTreeErrors, type RemoveTreeOptions } from '../../ports/fs.js';
import { decodeFsName, fsPath } from './fsNames.js';
import { parseMountId } from './mountId.js';

const openFd = promisify(open);
const closeFd = promisify(close);
const lstatP = promisify(lstat);
const mkdirP = promisify(mkdir);
const renameP = promisify(rename);
const rmdirP = promisify(rmdir);
const symlinkP = promisify(symlink);
const unlinkP = promisify(unlink);
const fstatP = promisify(fstat);
const readdirP = (p: string): Promise<Dirent<Buffer>[]> =>
  new Promise((resolve, reject) => readdir(p, { withFileTypes: true, encoding: 'buffer' }, (err, entries) => (err === null ? resolve(entries) : reject(err))));

/** How every directory on the way is opened: a directory, never through a symlink. */
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const PROC_FD = '/proc/self/fd';
const PROC_FDINFO = '/proc/self/fdinfo';

/** Where a path lies under one of the roots: the root, the parent components below it, the last name. */
export interface Located {
  readonly root: string;
  /** Components from the root to the parent of `name`, each one name. */
  readonly parents: readonly string[];
  /** The final component; '' when the path is the root itself. */
  readonly name: string;
}

/**
 * `name` (one component: a path string, or the raw bytes of a listed name) in the directory open
 * as `fd`, as a path the kernel resolves from that very directory.
 */
export function at(fd: number, name: string | Buffer): string | Buffer {
  if (typeof name === 'string') return fsPath(`${PROC_FD}/${fd}/${name}`);
  return Buffer.concat([Buffer.from(`${PROC_FD}/${fd}/`), name]);
}

/**
 * The identity of the mount a descriptor lies on: the kernel's mount id (/proc/self/fdinfo, read
 * from memory) where reported, else the device number. Two directories on different mounts - a
 * bind mount of the same filesystem included - differ.
 */
async function mountOf(fd: number): Promise<string> {
  let id: number | undefined;
  try {
    id = parseMountId(readFileSync(`${PROC_FDINFO}/${fd}`, 'latin1'));
  } catch {
    id = undefined;
  }
  return id !== undefined ? `mnt:${id}` : `dev:${(await fstatP(fd)).dev}`;
}

/**
 * The roots, normalized: absolute, no trailing slash, never "/" itself (which would confine
 * nothing). `what` names them in errors. A confinement root must also have no symlink in it (a
 * realpath): that is the caller's to ensure.
 */
export function normalizeRoots(roots: readonly string[], what = 'confinement root'): string[] {
  return roots.map((r) => {
    if (!posix.isAbsolute(r)) throw new Error(`${what} ${JSON.stringify(r)} must be an absolute path`);
    const n = posix.normalize(r).replace(/\/+$/, '');
    if (n === '') throw new Error(`${what} "/" would admit every path; name the directory`);
    return n;
  });
}

/** The root `p` lies in (the deepest, when roots nest) and its components below it; undefined outside every root. */
export function locate(roots: readonly string[], p: string): Located | undefined {
  if (!posix.isAbsolute(p)) return undefined;
  const n = posix.normalize(p).replace(/(.)\/+$/, '$1');
  let best: string | undefined;
  for (const r of roots) {
    if ((n === r || n.startsWith(`${r}/`)) && (best === undefined || r.length > best.length)) best = r;
  }
  if (best === undefined) return undefined;
  if (n === best) return { root: best, parents: [], name: '' };
  const parts = n.slice(best.length + 1).split('/');
  const name = parts.pop() ?? '';
  return { root: best, parents: parts, name };
}

/** Rewrites a node:fs error on a `/proc/self/fd` path into one naming the caller's path. */
function renamed(err: unknown, p: string, syscall: string): FsError {
  const code = errorCode(err) ?? 'EIO';
  const detail = err instanceof Error ? err.message.replace(/^[A-Z0-9]+: /, '').replace(/, \w+ '.*$/s, '') : String(err);
  return new FsError(code, p, syscall, `${code}: ${detail}, ${syscall} '${p}'`);
}

/**
 * Descriptor-relative changes beneath a set of roots. One instance per process is enough: it
 * holds no descriptor between calls (each walk opens and closes its own, at most two at a time).
 */
export class Beneath {
  readonly roots: readonly string[];
  readonly #available: boolean;

  constructor(roots: readonly string[]) {
    this.roots = normalizeRoots(roots);
    this.#available = existsSync(PROC_FD);
  }

  locate(p: string): Located | undefined {
    return locate(this.roots, p);
  }

  /**
   * Runs `fn` with the descriptor of the directory holding `loc.name`, reached from the root
   * through real directories only; `create` makes missing directories on the way (mode).
   */
  async inParent<T>(p: string, loc: Located, syscall: string, fn: (dirFd: number) => Promise<T>, create?: { readonly mode: number }): Promise<T> {
    if (!this.#available) {
      throw new FsError('ENOTSUP', p, syscall, `${syscall} ${p}: changes beneath ${loc.root} need ${PROC_FD} (Linux procfs); refusing to make them by path`);
    }
    let fd: number;
    try {
      fd = await openFd(fsPath(loc.root), DIR_FLAGS);
    } catch (err) {
      if (create !== undefined && errorCode(err) === 'ENOENT') {
        await mkdirP(fsPath(loc.root), { recursive: true, mode: create.mode });
        fd = await openFd(fsPath(loc.root), DIR_FLAGS).catch((e: unknown) => Promise.reject(renamed(e, loc.root, syscall)));
      } else {
        throw rootError(err, p, loc.root, syscall);
      }
    }
    let cur = loc.root;
    try {
      for (const part of loc.parents) {
        cur = `${cur}/${part}`;
        const next = await this.#openChild(fd, part, cur, p, syscall, create);
        await closeFd(fd);
        fd = next;
      }
      return await fn(fd);
    } finally {
      await closeFd(fd).catch(() => undefined);
    }
  }

  /**
   * Opens the directory `p` itself, reached from the root through real directories only (made
   * with `create.mode` where missing); the caller owns (and closes) the descriptor.
   */
  openDir(p: string, loc: Located, create?: { readonly mode: number }): Promise<number> {
    return this.inParent(
      p,
      loc,
      'open',
      (fd) => (loc.name === '' ? openFd(fsPath(loc.root), DIR_FLAGS) : this.#openChild(fd, loc.name, p, p, 'open', create)),
      create,
    );
  }

  /** Opens directory `name` of the directory `dirFd` without following a symlink; explains a refusal. */
  async #openChild(dirFd: number, name: string, childPath: string, p: string, syscall: string, create: { readonly mode: number } | undefined): Promise<number> {
    try {
      return await openFd(at(dirFd, name), DIR_FLAGS);
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ENOENT' && create !== undefined) {
        try {
          await mkdirP(at(dirFd, name), { mode: create.mode });
        } catch (mkErr) {
          if (errorCode(mkErr) !== 'EEXIST') throw renamed(mkErr, childPath, 'mkdir');
        }
        return this.#openChild(dirFd, name, childPath, p, syscall, undefined);
      }
      if (code === 'ENOTDIR' || code === 'ELOOP') {
        const st: Stats | undefined = await lstatP(at(dirFd, name)).catch(() => undefined);
        if (st?.isSymbolicLink() === true) {
          throw new FsError('ELOOP', p, syscall, `${syscall} ${p}: ${childPath} is a symlink; refusing to follow it below ${this.#rootOf(p)}`);
        }
        throw new FsError('ENOTDIR', p, syscall, `ENOTDIR: not a directory, ${syscall} '${p}' (${childPath} is not a directory)`);
      }
      throw renamed(err, p, syscall);
    }
  }

  #rootOf(p: string): string {
    return this.locate(p)?.root ?? '/';
  }

  /** unlink(2) of the final component of `p`, relative to its parent's descriptor. */
  unlink(p: string, loc: Located): Promise<void> {
    return this.inParent(p, loc, 'unlink', (fd) => unlinkP(at(fd, loc.name)).catch((err: unknown) => Promise.reject(renamed(err, p, 'unlink'))));
  }

  /**
   * Removes the final component of `p` only when `test` accepts what is there (lstat, never
   * followed): the check and the unlink name the same entry of the same directory. Resolves
   * false when nothing is there or `test` declines.
   */
  unlinkIf(p: string, loc: Located, test: (st: Stats) => boolean | Promise<boolean>): Promise<boolean> {
    return this.inParent(p, loc, 'unlink', async (fd) => {
      let st: Stats;
      try {
        st = await lstatP(at(fd, loc.name));
      } catch (err) {
        if (errorCode(err) === 'ENOENT') return false;
        throw renamed(err, p, 'lstat');
      }
      if (!(await test(st))) return false;
      try {
        await unlinkP(at(fd, loc.name));
      } catch (err) {
        if (errorCode(err) === 'ENOENT') return false;
        throw renamed(err, p, 'unlink');
      }
      return true;
    });
  }

  /**
   * Removes `p` and everything below it (the FileSystem port's removeTree): the entry is looked at
   * through its parent's descriptor, a directory is opened (O_NOFOLLOW) and emptied through its own
   * descriptor, one entry at a time, then removed from its parent. A directory on another mount
   * than its parent (compared on the open descriptors, so no rename can fool it) is refused; an
   * entry that turns out to be a symlink is unlinked, never followed. So every removal is of an
   * entry of a directory reached from `p` through real directories of one mount: nothing outside
   * the tree that `p` named when the walk reached it. The first error ends it, as by path.
   */
  removeTree(p: string, loc: Located, options: RemoveTreeOptions): Promise<void> {
    return this.inParent(p, loc, 'remove', async (parentFd) => {
      await this.#removeEntry(parentFd, await mountOf(parentFd), loc.name, p, undefined, 0, options);
    });
  }

  /** Removes entry `name` of the directory `dirFd` (on mount `dirMount`); `listed`: its type as listed, if it was. */
  async #removeEntry(dirFd: number, dirMount: string, name: string | Buffer, p: string, listed: 'directory' | 'other' | undefined, depth: number, options: RemoveTreeOptions): Promise<void> {
    let kind = listed;
    if (kind === undefined) {
      const st = await lstatP(at(dirFd, name)).catch((err: unknown) => Promise.reject(renamed(err, p, 'lstat')));
      kind = st.isDirectory() ? 'directory' : 'other';
    }
    let fd: number | undefined;
    if (kind === 'directory') {
      try {
        fd = await openFd(at(dirFd, name), DIR_FLAGS);
      } catch (err) {
        // Swapped for a symlink (or a file) since it was listed: it is removed as what it is now.
        if (errorCode(err) !== 'ENOTDIR' && errorCode(err) !== 'ELOOP') throw renamed(err, p, 'open');
      }
    }
    if (fd === undefined) {
      if (options.directoriesOnly) throw removeTreeErrors.notADirectory(p);
      await unlinkP(at(dirFd, name)).catch((err: unknown) => Promise.reject(renamed(err, p, 'unlink')));
      return;
    }
    try {
      if (depth > options.maxDepth) throw removeTreeErrors.tooDeep(p, options.maxDepth);
      const mount = await mountOf(fd);
      if (mount !== dirMount) throw removeTreeErrors.mountPoint(p);
      const entries = await readdirP(`${PROC_FD}/${fd}`).catch((err: unknown) => Promise.reject(renamed(err, p, 'scandir')));
      for (const e of entries) {
        await this.#removeEntry(fd, mount, e.name, `${p}/${decodeFsName(e.name)}`, e.isDirectory() ? 'directory' : 'other', depth + 1, options);
      }
    } finally {
      await closeFd(fd).catch(() => undefined);
    }
    await rmdirP(at(dirFd, name)).catch((err: unknown) => Promise.reject(renamed(err, p, 'rmdir')));
  }

  /** rmdir(2) of the final component of `p`, relative to its parent's descriptor. */
  rmdir(p: string, loc: Located): Promise<void> {
    return this.inParent(p, loc, 'rmdir', (fd) => rmdirP(at(fd, loc.name)).catch((err: unknown) => Promise.reject(renamed(err, p, 'rmdir'))));
  }

  /** symlink(2) named by the final component of `p`, relative to its parent's descriptor. */
  symlink(target: string, p: string, loc: Located): Promise<void> {
    return this.inParent(p, loc, 'symlink', (fd) => symlinkP(fsPath(target), at(fd, loc.name)).catch((err: unknown) => Promise.reject(renamed(err, p, 'symlink'))));
  }

  /** mkdir of `p`: with `recursive`, every missing directory from the root down, none through a symlink. */
  async mkdir(p: string, loc: Located, options: { readonly recursive: boolean; readonly mode: number }): Promise<void> {
    const create = options.recursive ? { mode: options.mode } : undefined;
    await this.inParent(
      p,
      loc,
      'mkdir',
      async (fd) => {
        try {
          await mkdirP(at(fd, loc.name), { mode: options.mode });
        } catch (err) {
          if (!(options.recursive && errorCode(err) === 'EEXIST')) throw renamed(err, p, 'mkdir');
          // Recursive mkdir of an existing path succeeds only for a real directory.
          const st = await lstatP(at(fd, loc.name));
          if (st.isSymbolicLink()) throw new FsError('ELOOP', p, 'mkdir', `mkdir ${p}: it is a symlink; refusing to follow it below ${loc.root}`);
          if (!st.isDirectory()) throw new FsError('EEXIST', p, 'mkdir', `EEXIST: file already exists, mkdir '${p}'`);
        }
      },
      create,
    );
  }

  /**
   * Opens the file `p` for writing, never through a symlink (by default creating or truncating
   * it; `flags` replaces O_CREAT | O_TRUNC); the caller closes the descriptor.
   */
  openForWrite(p: string, loc: Located, mode: number, flags: number = constants.O_CREAT | constants.O_TRUNC): Promise<number> {
    return this.inParent(p, loc, 'open', (fd) =>
      openFd(at(fd, loc.name), constants.O_WRONLY | constants.O_NOFOLLOW | flags, mode).catch((err: unknown) => {
        if (errorCode(err) === 'ELOOP') throw new FsError('ELOOP', p, 'open', `open ${p}: it is a symlink; refusing to write through it`);
        throw renamed(err, p, 'open');
      }),
    );
  }

  /** rename(2) between two located paths, each relative to its own parent's descriptor; errors name both. */
  rename(from: string, fromLoc: Located, to: string, toLoc: Located): Promise<void> {
    const both = (err: unknown): FsError => {
      const e = err instanceof FsError ? err : renamed(err, from, 'rename');
      return new FsError(e.code, from, 'rename', `${e.message} (rename '${from}' -> '${to}')`);
    };
    return this.inParent(from, fromLoc, 'rename', (fromFd) =>
      this.inParent(to, toLoc, 'rename', (toFd) => renameP(at(fromFd, fromLoc.name), at(toFd, toLoc.name)).catch((err: unknown) => Promise.reject(renamed(err, from, 'rename')))),
    ).catch((err: unknown) => Promise.reject(both(err)));
  }
}

function rootError(err: unknown, p: string, root: string, syscall: string): FsError {
  const code = errorCode(err);
  if (code === 'ENOTDIR' || code === 'ELOOP') return new FsError('ELOOP', p, syscall, `${syscall} ${p}: the root ${root} is not a directory or is a symlink; refusing to change anything below it`);
  return renamed(err, p, syscall);
}
