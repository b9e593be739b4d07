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

  async readFile(path: string, maxBytes: number, options?: { readonly noFollow?: boolean }): Promise<Uint8Array> {
    const flags = constants.O_RDONLY | (options?.noFollow === true ? constants.O_NOFOLLOW : 0);
    const handle = await fsp.open(path, flags);
    try {
      const st = await handle.stat();
      if (st.size > maxBytes) throw tooLarge(path, maxBytes, st.size);
      if (st.isFile() && st.size > 0) {
        // A regular file: one read of its size (+1 to notice growth); a short read is its end.
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

export function tooLarge(path: string, maxBytes: number, size: number): FsError {
  return new FsError('EFBIG', path, 'read', `${path} is larger than the ${maxBytes}-byte limit (${size} bytes or more)`);
}

export function direntType(e: Dirent): FileType {
  if (e.isDirectory()) return 'directory';
  if (e.isFile()) return 'file';
  if (e.isSymbolicLink()) return 'symlink';
  return 'other';
}

export function toStat(st: Stats): FileStat {
  const type: FileType = st.isDirectory() ? 'directory' : st.isFile() ? 'file' : st.isSymbolicLink() ? 'symlink' : 'other';
  return { type, size: st.size, mode: st.mode & 0o7777, dev: st.dev };
}
