/**
 * The FileSystem port over node:fs. Errors keep Node's errno `code`; reads are bounded; the
 * final path component is opened with O_NOFOLLOW when asked.
 */
import { constants, promises as fsp, type Dirent, type Stats } from 'node:fs';
import type { DirEntry, FileStat, FileSystem, FileType, WriteFileOptions } from '../../host/fs.js';
import { FsError } from '../../host/fs.js';

export class NodeFileSystem implements FileSystem {
  async readdir(path: string): Promise<DirEntry[]> {
    const entries = await fsp.readdir(path, { withFileTypes: true });
    return entries.map((e) => ({ name: e.name, type: direntType(e) }));
  }

  async lstat(path: string): Promise<FileStat> {
    return toStat(await fsp.lstat(path));
  }

  async stat(path: string): Promise<FileStat> {
    return toStat(await fsp.stat(path));
  }

  realpath(path: string): Promise<string> {
    return fsp.realpath(path);
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
    await fsp.mkdir(path, options);
  }

  async writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    const handle = await fsp.open(path, 'w', options?.mode ?? 0o644);
    try {
      await handle.writeFile(data);
      if (options?.fsync === true) await handle.sync();
    } finally {
      await handle.close();
    }
  }

  rename(from: string, to: string): Promise<void> {
    return fsp.rename(from, to);
  }

  async fsyncDir(path: string): Promise<void> {
    const handle = await fsp.open(path, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  rmdir(path: string): Promise<void> {
    return fsp.rmdir(path);
  }

  unlink(path: string): Promise<void> {
    return fsp.unlink(path);
  }

  symlink(target: string, path: string): Promise<void> {
    return fsp.symlink(target, path);
  }

  readlink(path: string): Promise<string> {
    return fsp.readlink(path);
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

async function readBounded(path: string, maxBytes: number, noFollow: boolean): Promise<Uint8Array> {
  const flags = constants.O_RDONLY | constants.O_NONBLOCK | (noFollow ? constants.O_NOFOLLOW : 0);
  const handle = await fsp.open(path, flags);
  try {
    const st = await handle.stat();
    const kind = specialFileKind(st);
    if (kind !== undefined) {
      const code = st.isDirectory() ? 'EISDIR' : 'EFTYPE';
      throw new FsError(code, path, 'open', `${path} is ${kind}, not a regular file; refusing to read it`);
    }
    if (st.size > maxBytes) throw tooLarge(path, maxBytes, st.size);
    if (st.size > 0) {
      // One read of its size (+1 to notice growth); a short read is its end.
      const buf = Buffer.allocUnsafe(st.size + 1);
      const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
      if (bytesRead <= st.size) return buf.subarray(0, bytesRead);
    }
    // /proc files report size 0, and a file that grew: read in chunks up to the bound.
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(64 * 1024, maxBytes + 1 - total));
      const { bytesRead } = await handle.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      chunks.push(buf.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes) throw tooLarge(path, maxBytes, total);
    }
    return Buffer.concat(chunks, total);
  } finally {
    await handle.close();
  }
}

function tooLarge(path: string, maxBytes: number, size: number): FsError {
  return new FsError('EFBIG', path, 'read', `${path} is larger than the ${maxBytes}-byte limit (${size} bytes or more)`);
}

function direntType(e: Dirent): FileType {
  if (e.isDirectory()) return 'directory';
  if (e.isFile()) return 'file';
  if (e.isSymbolicLink()) return 'symlink';
  return 'other';
}

function toStat(st: Stats): FileStat {
  const type: FileType = st.isDirectory() ? 'directory' : st.isFile() ? 'file' : st.isSymbolicLink() ? 'symlink' : 'other';
  return { type, size: st.size, mode: st.mode & 0o7777, dev: st.dev, ino: st.ino, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
}
