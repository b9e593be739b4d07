/**
 * The FileSystem port over node:fs. Errors keep Node's errno `code`; reads are bounded; the
 * final path component is opened with O_NOFOLLOW when asked. Names that are not UTF-8 travel as
 * described in fsNames.ts.
 *
 * Confinement: a NodeFileSystem made with `confineChangesTo` (the agent: its root dir and
 * cluster dir; recover: the root dir; the mock driver: its state dir and allowed roots) makes
 * every change - mkdir, writeFile, rename, rmdir, unlink, symlink - beneath those roots through
 * directory descriptors (beneath.ts): no symlink below a root is ever followed, so no change can
 * be sent out of the tree by a directory swapped for a symlink, even mid-operation; a change to a
 * path outside every root is refused with EPERM (or, with `elsewhere: 'by-path'`, made by path as
 * an unconfined NodeFileSystem does). Reads are never confined: they follow symlinks as the
 * port's contract says, and the callers that must not leave a root check with realpath.
 */
import { close, constants, fstat, fsync, ftruncate, open, promises as fsp, read, write, type Dirent, type Stats } from 'node:fs';
import { promisify } from 'node:util';
import * as posix from 'node:path/posix';
import type { DirEntry, FileStat, FileSystem, FileType, RemoveTreeOptions, WriteFileOptions } from '../../ports/fs.js';
import { FsError } from '../../ports/fs.js';
import { Beneath, type Located } from './beneath.js';
import { decodeFsName, fsPath } from './fsNames.js';

export { decodeFsName, fsPath } from './fsNames.js';

export interface NodeFileSystemOptions {
  /**
   * Directories - real paths, with no symlink in them - beneath which every change is made
   * through directory descriptors and never follows a symlink (beneath.ts).
   */
  readonly confineChangesTo?: readonly string[];
  /**
   * A change to a path outside every root: refused with EPERM (the default), or made by path.
   * Only the mock driver without `--allowed-root` uses 'by-path' (it trusts the CO's paths).
   */
  readonly elsewhere?: 'refuse' | 'by-path';
}

export class NodeFileSystem implements FileSystem {
  readonly #beneath: Beneath | undefined;
  readonly #refuseElsewhere: boolean;
  /** For descriptor-relative removals outside any root (an unconfined file system). */
  #anywhere: Beneath | undefined;

  constructor(options: NodeFileSystemOptions = {}) {
    const roots = options.confineChangesTo ?? [];
    this.#beneath = roots.length === 0 ? undefined : new Beneath(roots);
    this.#refuseElsewhere = this.#beneath !== undefined && options.elsewhere !== 'by-path';
  }

  /** The roots changes are confined to (empty: unconfined). */
  get confinedTo(): readonly string[] {
    return this.#beneath?.roots ?? [];
  }

  /**
   * Where a change to `path` is made: beneath a root (its location), by path (undefined), or
   * refused (throws EPERM naming the roots).
   */
  #confine(path: string, syscall: string): Located | undefined {
    const beneath = this.#beneath;
    if (beneath === undefined) return undefined;
    const loc = beneath.locate(path);
    if (loc !== undefined) return loc;
    if (!this.#refuseElsewhere) return undefined;
    throw new FsError('EPERM', path, syscall, `${syscall} ${path}: outside the directories this process may change (${beneath.roots.join(', ')}); refused`);
  }

  async readdir(path: string): Promise<DirEntry[]> {
    const entries = await fsp.readdir(fsPath(path), { withFileTypes: true, encoding: 'buffer' });
    return entries.map((e) => ({ name: decodeFsName(e.name), type: direntType(e) }));
  }

  async lstat(path: string): Promise<FileStat> {
    return toStat(await fsp.lstat(fsPath(path)));
  }

  async stat(path: string): Promise<FileStat> {
    return toStat(await fsp.stat(fsPath(path)));
  }

  async realpath(path: string): Promise<string> {
    return decodeFsName(await fsp.realpath(fsPath(path), { encoding: 'buffer' }));
  }

  /**
   * Opens non-blocking (a FIFO or a tty cannot stall the open), then fstat on the open file and
   * refuses anything that is not a regular file, naming what it is: a FIFO, socket or device
   * could block a read forever or be endless. The read is bounded in bytes (EFBIG) and in time
   * (ETIMEDOUT after {@link READ_TIMEOUT_MS}: a hung network or FUSE file system).
   */
  async readFile(path: string, maxBytes: number, options?: { readonly noFollow?: boolean; readonly timeoutMs?: number }): Promise<Uint8Array> {
    const timeoutMs = options?.timeoutMs ?? READ_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    const work = readBounded(path, maxBytes, options?.noFollow === true);
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new FsError('ETIMEDOUT', path, 'read', `${path}: read did not finish within ${timeoutMs} ms; abandoned`)), timeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([work, deadline]);
    } finally {
      clearTimeout(timer);
      work.catch(() => undefined);
    }
  }

  async mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<void> {
    const loc = this.#confine(path, 'mkdir');
    if (loc === undefined) {
      await fsp.mkdir(fsPath(path), options);
      return;
    }
    if (loc.name === '') {
      // The root itself: it is there (a recursive mkdir succeeds) or it is made by path.
      await fsp.mkdir(fsPath(loc.root), options);
      return;
    }
    await this.#requireBeneath().mkdir(path, loc, options);
  }

  async writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    const mode = options?.mode ?? 0o644;
    const loc = this.#confine(path, 'open');
    const fd = loc === undefined ? await openFd(fsPath(path), 'w', mode) : await this.#requireBeneath().openForWrite(path, this.#notRoot(loc, path, 'open'), mode);
    try {
      for (let off = 0; off < data.length; ) {
        const { bytesWritten } = await writeFd(fd, data, off, data.length - off, null);
        off += bytesWritten;
      }
      if (options?.fsync === true) await fsyncFd(fd);
    } finally {
      await closeFd(fd);
    }
  }

  /**
   * Sets the size of the regular file `path` (ftruncate: a grown part is sparse, the rest
   * kept), or with `create` makes it anew (empty, then sized: all sparse) with `mode`; then
   * fsyncs it. Confined like writeFile.
   * Not part of the port: the mock driver's block backing files on a real node.
   */
  async resizeFile(path: string, sizeBytes: number, options: { readonly create: boolean; readonly mode: number }): Promise<void> {
    const loc = this.#confine(path, 'open');
    const flags = options.create ? constants.O_CREAT | constants.O_TRUNC : 0;
    const fd =
      loc === undefined
        ? await openFd(fsPath(path), constants.O_WRONLY | constants.O_NOFOLLOW | flags, options.mode)
        : await this.#requireBeneath().openForWrite(path, this.#notRoot(loc, path, 'open'), options.mode, flags);
    try {
      await ftruncateFd(fd, sizeBytes);
      await fsyncFd(fd);
    } finally {
      await closeFd(fd);
    }
  }

  async rename(from: string, to: string): Promise<void> {
    const fromLoc = this.#confine(from, 'rename');
    const toLoc = this.#confine(to, 'rename');
    if (fromLoc === undefined && toLoc === undefined) return fsp.rename(fsPath(from), fsPath(to));
    if (fromLoc === undefined || toLoc === undefined) {
      throw new FsError('EXDEV', from, 'rename', `rename ${from} -> ${to}: one side is beneath a confined root and the other is not; refused`);
    }
    return this.#requireBeneath().rename(from, this.#notRoot(fromLoc, from, 'rename'), to, this.#notRoot(toLoc, to, 'rename'));
  }

  async fsyncDir(path: string): Promise<void> {
    const fd = await openFd(fsPath(path), constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await fsyncFd(fd);
    } finally {
      await closeFd(fd);
    }
  }

  async rmdir(path: string): Promise<void> {
    const loc = this.#confine(path, 'rmdir');
    if (loc === undefined) return fsp.rmdir(fsPath(path));
    return this.#requireBeneath().rmdir(path, this.#notRoot(loc, path, 'rmdir'));
  }

  async unlink(path: string): Promise<void> {
    const loc = this.#confine(path, 'unlink');
    if (loc === undefined) return fsp.unlink(fsPath(path));
    return this.#requireBeneath().unlink(path, this.#notRoot(loc, path, 'unlink'));
  }

  async symlink(target: string, path: string): Promise<void> {
    const loc = this.#confine(path, 'symlink');
    if (loc === undefined) return fsp.symlink(fsPath(target), fsPath(path));
    return this.#requireBeneath().symlink(target, path, this.#notRoot(loc, path, 'symlink'));
  }

  /**
   * The port's descriptor-relative tree removal (beneath.ts): beneath a root when confined; an
   * unconfined file system starts from the real path of `path`'s parent directory.
   */
  async removeTree(path: string, options: RemoveTreeOptions): Promise<void> {
    const loc = this.#confine(path, 'remove');
    if (loc !== undefined) return this.#requireBeneath().removeTree(path, this.#notRoot(loc, path, 'remove'), options);
    const parent = await fsp.realpath(fsPath(posix.dirname(path)), { encoding: 'buffer' }).then(decodeFsName);
    const name = posix.basename(path);
    if (name === '' || name === '.' || name === '..') throw new FsError('EINVAL', path, 'remove', `remove ${path}: not a removable name`);
    return (this.#anywhere ??= new Beneath([])).removeTree(path, { root: parent, parents: [], name }, options);
  }

  readlink(path: string): Promise<string> {
    return fsp.readlink(fsPath(path), { encoding: 'buffer' }).then(decodeFsName);
  }

  #requireBeneath(): Beneath {
    if (this.#beneath === undefined) throw new Error('NodeFileSystem: not confined');
    return this.#beneath;
  }

  /** A root itself is never removed, replaced or written as a file. */
  #notRoot(loc: Located, path: string, syscall: string): Located {
    if (loc.name === '') throw new FsError('EPERM', path, syscall, `${syscall} ${path}: it is a confinement root itself; refused`);
    return loc;
  }
}

/** How long one readFile may take before it is abandoned with ETIMEDOUT. */
export const READ_TIMEOUT_MS = 10_000;

/** A one-word description of a file type that is not a regular file, for error messages. */
export function specialFileKind(st: Stats): string | undefined {
  if (st.isFile()) return undefined;
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isDirectory()) return 'a directory';
  if (st.isSymbolicLink()) return 'a symlink';
  return 'not a regular file';
}

// File descriptors through the callback API: fs/promises' FileHandle costs about half again the
// CPU of the same open/fstat/read/close (an object with a finalizer per file, a promise-backed
// request per call): 1,000 small reads took 28-49 ms CPU through FileHandles, 23-31 ms so.
const openFd = promisify(open);
const fstatFd = promisify(fstat);
const readFd = promisify(read);
const writeFd = promisify(write);
const fsyncFd = promisify(fsync);
const ftruncateFd = promisify(ftruncate);
const closeFd = promisify(close);

async function readBounded(path: string, maxBytes: number, noFollow: boolean): Promise<Uint8Array> {
  const flags = constants.O_RDONLY | constants.O_NONBLOCK | (noFollow ? constants.O_NOFOLLOW : 0);
  const fd = await openFd(fsPath(path), flags);
  try {
    const st = await fstatFd(fd);
    assertReadable(path, st, maxBytes);
    if (st.size > 0) {
      // One read of its size (+1 to notice growth); a short read is its end.
      const buf = Buffer.allocUnsafe(st.size + 1);
      const { bytesRead } = await readFd(fd, buf, 0, buf.length, 0);
      if (bytesRead <= st.size) return buf.subarray(0, bytesRead);
    }
    // /proc files report size 0, and a file that grew: read in chunks up to the bound.
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(64 * 1024, maxBytes + 1 - total));
      const { bytesRead } = await readFd(fd, buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      chunks.push(buf.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes) throw tooLarge(path, maxBytes, total);
    }
    return Buffer.concat(chunks, total);
  } finally {
    await closeFd(fd);
  }
}

/**
 * The checks every bounded read makes on the file it opened (non-blocking, so that a FIFO never
 * waits for a writer): a regular file, at most `maxBytes` long.
 */
export function assertReadable(path: string, st: Stats, maxBytes: number): void {
  const kind = specialFileKind(st);
  if (kind !== undefined) {
    const code = st.isDirectory() ? 'EISDIR' : 'EFTYPE';
    throw new FsError(code, path, 'open', `${path} is ${kind}, not a regular file; refusing to read it`);
  }
  if (st.size > maxBytes) throw tooLarge(path, maxBytes, st.size);
}

export function tooLarge(path: string, maxBytes: number, size: number): FsError {
  return new FsError('EFBIG', path, 'read', `${path} is larger than the ${maxBytes}-byte limit (${size} bytes or more)`);
}

export function direntType(e: Dirent<Buffer> | Dirent): FileType {
  if (e.isDirectory()) return 'directory';
  if (e.isFile()) return 'file';
  if (e.isSymbolicLink()) return 'symlink';
  return 'other';
}

export function toStat(st: Stats): FileStat {
  const type: FileType = st.isDirectory() ? 'directory' : st.isFile() ? 'file' : st.isSymbolicLink() ? 'symlink' : 'other';
  return { type, size: st.size, mode: st.mode & 0o7777, dev: st.dev, ino: st.ino, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
}
