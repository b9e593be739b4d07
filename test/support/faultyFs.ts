/**
 * Test helper: a FileSystem that delegates to another and fails chosen calls on chosen paths.
 * Like every FileSystem port it never throws synchronously: an injected failure is a rejected
 * promise carrying an FsError, exactly what the real adapters hand back, so callers' handling
 * (`ignoreNotExist(fs.unlink(...))`, `.catch(...)`) sees it the same way.
 */
import { FsError, type DirEntry, type FileStat, type FileSystem, type WriteFileOptions } from '../../src/ports/fs.js';

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

  /** Records the call, then rejects with the injected fault or runs the inner call. */
  private call<T>(method: Method, path: string, run: () => Promise<T>): Promise<T> {
    this.calls.push(`${method} ${path}`);
    const f = this.faults.find((x) => (x.method === method || x.method === '*') && x.path === path);
    if (f !== undefined) return Promise.reject(new FsError(f.code, path, method));
    return run();
  }

  readdir(path: string): Promise<DirEntry[]> {
    return this.call('readdir', path, () => this.inner.readdir(path));
  }
  lstat(path: string): Promise<FileStat> {
    return this.call('lstat', path, () => this.inner.lstat(path));
  }
  stat(path: string): Promise<FileStat> {
    return this.call('stat', path, () => this.inner.stat(path));
  }
  realpath(path: string): Promise<string> {
    return this.call('realpath', path, () => this.inner.realpath(path));
  }
  readFile(path: string, maxBytes: number, options?: { readonly noFollow?: boolean }): Promise<Uint8Array> {
    return this.call('readFile', path, () => this.inner.readFile(path, maxBytes, options));
  }
  mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<void> {
    return this.call('mkdir', path, () => this.inner.mkdir(path, options));
  }
  writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    return this.call('writeFile', path, () => this.inner.writeFile(path, data, options));
  }
  rename(from: string, to: string): Promise<void> {
    return this.call('rename', from, () => this.inner.rename(from, to));
  }
  fsyncDir(path: string): Promise<void> {
    return this.call('fsyncDir', path, () => this.inner.fsyncDir(path));
  }
  rmdir(path: string): Promise<void> {
    return this.call('rmdir', path, () => this.inner.rmdir(path));
  }
  unlink(path: string): Promise<void> {
    return this.call('unlink', path, () => this.inner.unlink(path));
  }
  symlink(target: string, path: string): Promise<void> {
    return this.call('symlink', path, () => this.inner.symlink(target, path));
  }
  readlink(path: string): Promise<string> {
    return this.call('readlink', path, () => this.inner.readlink(path));
  }
}
