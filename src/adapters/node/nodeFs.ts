/**
 * The FileSystem port over node:fs. Errors keep Node's errno `code`; reads are bounded; the
 * final path component is opened with O_NOFOLLOW when asked.
 *
 * Names that are not UTF-8 are neither dropped nor mangled: each byte that does not decode is
 * carried in the path string as the lone surrogate U+DC00+byte ("surrogateescape", as Python
 * does) and turned back into that byte when the path is handed to the kernel, so a directory
 * named with such bytes can be walked; escapeUndecodable (ports/fs.ts) renders it as `\xNN` for
 * messages.
 */
import { close, constants, fstat, fsync, open, promises as fsp, read, write, type Dirent, type Stats } from 'node:fs';
import { promisify } from 'node:util';
import type { DirEntry, FileStat, FileSystem, FileType, WriteFileOptions } from '../../ports/fs.js';
import { FsError } from '../../ports/fs.js';

const UNDECODABLE = /[\uDC80-\uDCFF]/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A path for node:fs: the string itself, or its bytes when it carries undecodable bytes. */
export function fsPath(p: string): string | Buffer {
  if (!UNDECODABLE.test(p)) return p;
  const parts: Buffer[] = [];
  for (const ch of p) {
    const cp = ch.codePointAt(0) ?? 0;
    parts.push(cp >= 0xdc80 && cp <= 0xdcff ? Buffer.of(cp - 0xdc00) : Buffer.from(ch, 'utf8'));
  }
  return Buffer.concat(parts);
}

/** Bytes from the kernel as a path string: UTF-8, each undecodable byte as U+DC00+byte. */
export function decodeFsName(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    let out = '';
    let i = 0;
    while (i < bytes.length) {
      const lead = bytes[i] ?? 0;
      const len = lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
      if (len > 0 && i + len <= bytes.length) {
        try {
          out += utf8.decode(bytes.subarray(i, i + len));
          i += len;
          continue;
        } catch {
          // not a valid sequence: escape the lead byte below
        }
      }
      out += String.fromCharCode(0xdc00 + lead);
      i += 1;
    }
    return out;
  }
}

export class NodeFileSystem implements FileSystem {
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
    await fsp.mkdir(fsPath(path), options);
  }

  async writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    const fd = await openFd(fsPath(path), 'w', options?.mode ?? 0o644);
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

  rename(from: string, to: string): Promise<void> {
    return fsp.rename(fsPath(from), fsPath(to));
  }

  async fsyncDir(path: string): Promise<void> {
    const fd = await openFd(fsPath(path), constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await fsyncFd(fd);
    } finally {
      await closeFd(fd);
    }
  }

  rmdir(path: string): Promise<void> {
    return fsp.rmdir(fsPath(path));
  }

  unlink(path: string): Promise<void> {
    return fsp.unlink(fsPath(path));
  }

  symlink(target: string, path: string): Promise<void> {
    return fsp.symlink(fsPath(target), fsPath(path));
  }

  readlink(path: string): Promise<string> {
    return fsp.readlink(fsPath(path), { encoding: 'buffer' }).then(decodeFsName);
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
