/**
 * A tiny in-memory {@link FileSystem} for unit tests: a tree of directories, files and symlinks
 * with per-path injected errors. Path resolution follows symlinks component by component (up to
 * 40 hops, then ELOOP), like the kernel. Only the read-side methods (readdir, lstat, stat,
 * realpath) work; everything else rejects with ENOSYS. Files have no content.
 */
import * as posix from 'node:path/posix';

import { FsError, type DirEntry, type FileStat, type FileSystem } from '../host/fs.js';

export type FakeEntryType = 'file' | 'directory' | 'symlink';

export interface FakeEntry {
  readonly type: FakeEntryType;
  /** For a symlink: its target, absolute or relative to the link's directory. */
  readonly symlinkTarget?: string;
}

/** The FileSystem methods a failure can be limited to. */
export type FakeFsOp = 'readdir' | 'lstat' | 'stat' | 'realpath';

const MAX_SYMLINK_HOPS = 40;

export class FakeFs implements FileSystem {
  readonly #entries = new Map<string, FakeEntry>([['/', { type: 'directory' }]]);
  readonly #failures = new Map<string, { code: string; ops: ReadonlySet<FakeFsOp> | undefined }>();
  /** Every call made, in order, as "op path". */
  readonly calls: string[] = [];

  constructor(entries?: Iterable<readonly [string, FakeEntry]>) {
    if (entries !== undefined) for (const [p, e] of entries) this.add(p, e);
  }

  /** Adds an entry, creating missing parent directories. Replaces an existing entry. */
  add(path: string, entry: FakeEntry): this {
    const p = FakeFs.#normalize(path);
    if (entry.type === 'symlink' && entry.symlinkTarget === undefined) {
      throw new Error(`FakeFs: symlink ${p} needs a symlinkTarget`);
    }
    const parent = posix.dirname(p);
    if (parent !== p && !this.#entries.has(parent)) this.add(parent, { type: 'directory' });
    this.#entries.set(p, entry);
    return this;
  }

  addDir(path: string): this {
    return this.add(path, { type: 'directory' });
  }

  addFile(path: string): this {
    return this.add(path, { type: 'file' });
  }

  addSymlink(path: string, target: string): this {
    return this.add(path, { type: 'symlink', symlinkTarget: target });
  }

  /**
   * Makes calls on exactly `path` (as passed, after normalising) reject with `code`; only the
   * listed operations if `ops` is given, otherwise all of them.
   */
  failOn(path: string, code: string, ops?: readonly FakeFsOp[]): this {
    this.#failures.set(FakeFs.#normalize(path), { code, ops: ops === undefined ? undefined : new Set(ops) });
    return this;
  }

  clearFailure(path: string): this {
    this.#failures.delete(FakeFs.#normalize(path));
    return this;
  }

  /** How many calls of `op` were made. */
  callCount(op: string): number {
    return this.calls.filter((c) => c.startsWith(`${op} `)).length;
  }

  readdir(path: string): Promise<DirEntry[]> {
    return this.#run('readdir', path, () => {
      const dir = this.#resolve(path, true, 'scandir');
      const entry = this.#entries.get(dir);
      if (entry?.type !== 'directory') throw new FsError('ENOTDIR', path, 'scandir');
      const out: DirEntry[] = [];
      for (const [p, e] of this.#entries) {
        if (p !== dir && posix.dirname(p) === dir) out.push({ name: posix.basename(p), type: e.type });
      }
      return out;
    });
  }

  lstat(path: string): Promise<FileStat> {
    return this.#run('lstat', path, () => this.#statOf(this.#resolve(path, false, 'lstat')));
  }

  stat(path: string): Promise<FileStat> {
    return this.#run('stat', path, () => this.#statOf(this.#resolve(path, true, 'stat')));
  }

  realpath(path: string): Promise<string> {
    return this.#run('realpath', path, () => this.#resolve(path, true, 'realpath'));
  }

  readFile(path: string): Promise<Uint8Array> {
    return this.#unsupported('open', path);
  }

  mkdir(path: string): Promise<void> {
    return this.#unsupported('mkdir', path);
  }

  writeFile(path: string): Promise<void> {
    return this.#unsupported('open', path);
  }

  rename(from: string): Promise<void> {
    return this.#unsupported('rename', from);
  }

  fsyncDir(path: string): Promise<void> {
    return this.#unsupported('fsync', path);
  }

  rmdir(path: string): Promise<void> {
    return this.#unsupported('rmdir', path);
  }

  unlink(path: string): Promise<void> {
    return this.#unsupported('unlink', path);
  }

  symlink(_target: string, path: string): Promise<void> {
    return this.#unsupported('symlink', path);
  }

  readlink(path: string): Promise<string> {
    return this.#unsupported('readlink', path);
  }

  static #normalize(path: string): string {
    const n = posix.normalize(path);
    return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
  }

  #unsupported(syscall: string, path: string): Promise<never> {
    this.calls.push(`${syscall} ${path}`);
    return Promise.reject(new FsError('ENOSYS', path, syscall, `FakeFs does not implement ${syscall}`));
  }

  #run<T>(op: FakeFsOp, path: string, body: () => T): Promise<T> {
    this.calls.push(`${op} ${path}`);
    const failure = this.#failures.get(FakeFs.#normalize(path));
    if (failure !== undefined && (failure.ops === undefined || failure.ops.has(op))) {
      return Promise.reject(new FsError(failure.code, path, op));
    }
    try {
      return Promise.resolve(body());
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  #statOf(resolved: string): FileStat {
    const entry = this.#entries.get(resolved);
    const type = entry?.type ?? 'other';
    return { type, size: 0, mode: type === 'directory' ? 0o755 : 0o644, dev: 0 };
  }

  /** Walks `path` from the root, following symlinks (the last one only if `followLast`). */
  #resolve(path: string, followLast: boolean, syscall: string): string {
    if (!path.startsWith('/')) throw new FsError('EINVAL', path, syscall, `FakeFs needs absolute paths: ${path}`);
    let remaining = path.split('/').filter((c) => c !== '');
    let current = '/';
    let hops = 0;
    while (remaining.length > 0) {
      const [component, ...rest] = remaining as [string, ...string[]];
      remaining = rest;
      if (component === '.') continue;
      if (component === '..') {
        current = posix.dirname(current);
        continue;
      }
      const next = current === '/' ? `/${component}` : `${current}/${component}`;
      const entry = this.#entries.get(next);
      if (entry === undefined) throw new FsError('ENOENT', path, syscall);
      const isLast = remaining.length === 0;
      if (entry.type === 'symlink' && (!isLast || followLast)) {
        hops++;
        if (hops > MAX_SYMLINK_HOPS) throw new FsError('ELOOP', path, syscall);
        const target = entry.symlinkTarget ?? '';
        if (target.startsWith('/')) current = '/';
        remaining = [...target.split('/').filter((c) => c !== ''), ...remaining];
        continue;
      }
      if (!isLast && entry.type !== 'directory') throw new FsError('ENOTDIR', path, syscall);
      current = next;
    }
    return current;
  }
}
