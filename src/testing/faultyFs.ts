/** Test helper: a FileSystem that delegates to another and fails chosen calls on chosen paths. */
import { FsError, type DirEntry, type FileStat, type FileSystem, type WriteFileOptions } from '../host/fs.js';

type Method = keyof FileSystem;

export class FaultyFs implements FileSystem {
  private readonly faults: { method: Method | '*'; path: string; code: string }[] = [];
  /** Every call made, in order: `${method} ${path}`. */
  readonly calls: string[] = [];

  constructor(private readonly inner: FileSystem) {}

  /** Makes `method` (or every method, '*') fail with errno `code` on exactly `path`. */
  failOn(method: Method | '*', path: string, code: string): this {
    this.faults.push({ method, path, code });
    return this;
  }

  private check(method: Method, path: string): void {
    this.calls.push(`${method} ${path}`);
    const f = this.faults.find((x) => (x.method === method || x.method === '*') && x.path === path);
    if (f !== undefined) throw new FsError(f.code, path, method);
  }

  readdir(path: string): Promise<DirEntry[]> {
    this.check('readdir', path);
    return this.inner.readdir(path);
  }
  lstat(path: string): Promise<FileStat> {
    this.check('lstat', path);
    return this.inner.lstat(path);
  }
  stat(path: string): Promise<FileStat> {
    this.check('stat', path);
    return this.inner.stat(path);
  }
  realpath(path: string): Promise<string> {
    this.check('realpath', path);
    return this.inner.realpath(path);
  }
  readFile(path: string, maxBytes: number, options?: { readonly noFollow?: boolean }): Promise<Uint8Array> {
    this.check('readFile', path);
    return this.inner.readFile(path, maxBytes, options);
  }
  mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<void> {
    this.check('mkdir', path);
    return this.inner.mkdir(path, options);
  }
  writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    this.check('writeFile', path);
    return this.inner.writeFile(path, data, options);
  }
  rename(from: string, to: string): Promise<void> {
    this.check('rename', from);
    return this.inner.rename(from, to);
  }
  fsyncDir(path: string): Promise<void> {
    this.check('fsyncDir', path);
    return this.inner.fsyncDir(path);
  }
  rmdir(path: string): Promise<void> {
    this.check('rmdir', path);
    return this.inner.rmdir(path);
  }
  unlink(path: string): Promise<void> {
    this.check('unlink', path);
    return this.inner.unlink(path);
  }
  symlink(target: string, path: string): Promise<void> {
    this.check('symlink', path);
    return this.inner.symlink(target, path);
  }
  readlink(path: string): Promise<string> {
    this.check('readlink', path);
    return this.inner.readlink(path);
  }
}
