/**
 * The FileSystem port over an in-memory `memfs` Volume, for tests and the simulator.
 *
 * memfs is used as storage only: every path is resolved here, component by component, following
 * symlinks the way the kernel does (physical "..", relative link targets, at most 40 hops then
 * ELOOP, a trailing "/" demanding a directory). The memfs calls then only ever see symlink-free
 * paths. This avoids memfs' own resolution quirks (lexical "..", relative targets containing "..")
 * and lets the adapter give the errno codes Linux gives where memfs differs:
 *  - unlink of a directory: EISDIR (memfs: EPERM);
 *  - rename of a directory over a non-empty directory: ENOTEMPTY, over a file: ENOTDIR; of a
 *    file over a directory: EISDIR; of a directory into itself: EINVAL (memfs allows all four);
 *  - recursive mkdir over an existing file: EEXIST (memfs: success);
 *  - rmdir of a directory emptied after a rename replaced a file in it: success (memfs: ENOTEMPTY);
 *  - a mount point (see {@link MemFs.setBusyCheck}) cannot be removed or renamed: EBUSY.
 *
 * All operations are synchronous on the Volume and resolve on a later microtask, so each one is
 * atomic. Not modelled: permissions and the umask (modes are stored as given; new files default
 * to 0644), device numbers (`dev` is always 0), durability (fsyncs are only recorded in
 * {@link MemFs.syncLog}), and mounts hiding directory content.
 */
import * as posix from 'node:path/posix';

import { Volume } from 'memfs';

import { FsError, errorCode, quietFsError, withoutStackTrace, type DirEntry, type FileStat, type FileSystem, type FileType, type WriteFileOptions } from '../../ports/fs.js';

const MAX_SYMLINK_HOPS = 40;
const DEFAULT_FILE_MODE = 0o644;

/** A path resolved to its symlink-free location; `type` undefined when nothing is there (yet). */
interface Resolved {
  readonly path: string;
  readonly type: FileType | undefined;
}

export interface StatsLike {
  isDirectory(): boolean;
  isFile(): boolean;
  isSymbolicLink(): boolean;
  readonly mode: number;
  readonly size: number;
  readonly ino: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
}

function typeOf(st: StatsLike): FileType {
  if (st.isDirectory()) return 'directory';
  if (st.isFile()) return 'file';
  if (st.isSymbolicLink()) return 'symlink';
  return 'other';
}

/**
 * Whether `p` is absolute and already what posix.normalize makes of it, less a trailing "/":
 * no empty, "." or ".." component. Most paths are, and need no normalising.
 */
export function isCleanAbsolute(p: string): boolean {
  if (p === '/') return true;
  return p.startsWith('/') && !p.endsWith('/') && !p.includes('//') && !p.includes('/./') && !p.includes('/../') && !p.endsWith('/.') && !p.endsWith('/..');
}

function cleanPath(p: string): string {
  if (isCleanAbsolute(p)) return p;
  const n = posix.normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

function childPath(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

/**
 * lstat of a real path in the volume; undefined when nothing is there. memfs builds (and drops) an
 * Error for a missing path even when told not to throw: with no stack trace to capture, that
 * costs a few percent of a simulator run less (most lookups of the engine are of missing paths).
 */
export function lstatQuietly(vol: Volume, realPath: string): StatsLike | undefined {
  return withoutStackTrace(() => vol.lstatSync(realPath, { throwIfNoEntry: false }));
}

export class MemFs implements FileSystem {
  readonly #vol: Volume;
  #busy: ((path: string) => boolean) | undefined;
  /** Every fsync, in order: "fsync <path>" (writeFile with fsync) and "fsyncDir <path>". */
  readonly syncLog: string[] = [];

  /**
   * Where the symlinks are (real paths): a path none of them is a prefix of resolves to itself,
   * with no walk component by component (the fast path of #resolve). Kept by symlink, unlink and
   * rename; {@link rescanSymlinks} rebuilds it after the volume was changed behind our back.
   */
  readonly #symlinks = new Set<string>();
  /**
   * What is at a real path (null: nothing), as looked up since the last change there: paths are
   * looked up far more often than changed (every operation resolves its path). Every change made
   * through this adapter forgets what it touched; {@link forgetCachedLookups} forgets everything.
   */
  readonly #stats = new Map<string, FileStat | null>();
  /** The names in a directory (real path), as read since the last change in it. */
  readonly #listings = new Map<string, string[]>();

  constructor(volume?: Volume) {
    this.#vol = volume ?? new Volume();
    if (volume !== undefined) this.rescanSymlinks();
  }

  /** Forgets every cached lookup: call after the volume was changed other than through this adapter. */
  forgetCachedLookups(): void {
    this.#stats.clear();
    this.#listings.clear();
  }

  /** Rebuilds the record of where the symlinks are, for a volume changed other than through this adapter. */
  rescanSymlinks(): void {
    this.forgetCachedLookups();
    this.#symlinks.clear();
    const walk = (dir: string): void => {
      for (const name of this.#names(dir)) {
        const p = childPath(dir, name);
        const type = this.#lstatType(p);
        if (type === 'symlink') this.#symlinks.add(p);
        else if (type === 'directory') walk(p);
      }
    };
    walk('/');
  }

  /** An empty filesystem holding only "/". */
  static create(): MemFs {
    return new MemFs();
  }

  /**
   * Installs the kernel's "mount point is busy" rule: rmdir, unlink and rename of a path for
   * which `check(realPath)` is true reject with EBUSY. The MemoryMounter installs itself here.
   * Pass undefined to remove the rule.
   */
  setBusyCheck(check: ((path: string) => boolean) | undefined): void {
    this.#busy = check;
  }

  // ---------------------------------------------------------------- FileSystem

  readdir(path: string): Promise<DirEntry[]> {
    return this.#run('scandir', path, () => {
      const r = this.#existing(path, true, 'scandir');
      if (r.type !== 'directory') throw quietFsError('ENOTDIR', path, 'scandir');
      return this.#names(r.path).map((name) => ({ name, type: this.#lstatType(childPath(r.path, name)) ?? 'other' }));
    });
  }

  lstat(path: string): Promise<FileStat> {
    return this.#run('lstat', path, () => this.#statOf(this.#existing(path, false, 'lstat').path));
  }

  stat(path: string): Promise<FileStat> {
    return this.#run('stat', path, () => this.#statOf(this.#existing(path, true, 'stat').path));
  }

  realpath(path: string): Promise<string> {
    return this.#run('realpath', path, () => this.#existing(path, true, 'realpath').path);
  }

  readFile(path: string, maxBytes: number, options?: { readonly noFollow?: boolean }): Promise<Uint8Array> {
    return this.#run('open', path, () => {
      const noFollow = options?.noFollow === true;
      const r = this.#existing(path, !noFollow, 'open');
      if (r.type === 'symlink') throw quietFsError('ELOOP', path, 'open', `open ${path}: ELOOP (O_NOFOLLOW on a symlink)`);
      if (r.type === 'directory') throw quietFsError('EISDIR', path, 'read');
      const size = this.#vol.lstatSync(r.path).size;
      if (size > maxBytes) {
        throw quietFsError('EFBIG', path, 'read', `${path} is larger than the ${maxBytes}-byte limit (${size} bytes or more)`);
      }
      const data = this.#vol.readFileSync(r.path);
      return typeof data === 'string' ? new TextEncoder().encode(data) : new Uint8Array(data);
    });
  }

  mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<void> {
    return this.#run('mkdir', path, () => {
      if (options.recursive) this.#mkdirAll(path, options.mode);
      else this.#mkdirOne(path, options.mode);
    });
  }

  writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    return this.#run('open', path, () => {
      this.#write(path, data, options?.mode ?? DEFAULT_FILE_MODE);
      if (options?.fsync === true) this.syncLog.push(`fsync ${path}`);
    });
  }

  rename(from: string, to: string): Promise<void> {
    return this.#run('rename', from, () => {
      const src = this.#existing(from, false, 'rename');
      const dst = this.#resolve(to, false, 'rename');
      if (src.path === dst.path) return;
      if (src.path === '/' || this.#isBusy(src.path) || this.#isBusy(dst.path)) {
        throw quietFsError('EBUSY', from, 'rename', `rename ${from} -> ${to}: EBUSY`);
      }
      if (dst.path.startsWith(`${src.path}/`)) {
        throw quietFsError('EINVAL', from, 'rename', `rename ${from} -> ${to}: EINVAL (a directory cannot move into itself)`);
      }
      if (dst.type !== undefined) {
        if (src.type === 'directory') {
          if (dst.type !== 'directory') throw quietFsError('ENOTDIR', to, 'rename');
          if (this.#names(dst.path).length > 0) throw quietFsError('ENOTEMPTY', to, 'rename');
          this.#vol.rmdirSync(dst.path);
          this.#changedAt(dst.path, true);
        } else if (dst.type === 'directory') {
          throw quietFsError('EISDIR', to, 'rename');
        } else {
          // memfs' renameSync over an existing file leaves the parent's child count one too high,
          // so a later rmdir of the emptied parent fails with ENOTEMPTY; replace it explicitly.
          this.#vol.unlinkSync(dst.path);
          this.#changedAt(dst.path);
        }
      }
      this.#vol.renameSync(src.path, dst.path);
      this.#changedAt(src.path, true);
      this.#changedAt(dst.path, true);
      this.#symlinks.delete(dst.path);
      for (const link of [...this.#symlinks]) {
        if (link === src.path || link.startsWith(`${src.path}/`)) {
          this.#symlinks.delete(link);
          this.#symlinks.add(dst.path + link.slice(src.path.length));
        }
      }
    });
  }

  fsyncDir(path: string): Promise<void> {
    return this.#run('fsync', path, () => {
      const r = this.#existing(path, true, 'open');
      if (r.type !== 'directory') throw quietFsError('ENOTDIR', path, 'open');
      this.syncLog.push(`fsyncDir ${path}`);
    });
  }

  rmdir(path: string): Promise<void> {
    return this.#run('rmdir', path, () => {
      const r = this.#existing(path, false, 'rmdir');
      if (r.type !== 'directory') throw quietFsError('ENOTDIR', path, 'rmdir');
      if (r.path === '/' || this.#isBusy(r.path)) throw quietFsError('EBUSY', path, 'rmdir');
      if (this.#names(r.path).length > 0) throw quietFsError('ENOTEMPTY', path, 'rmdir');
      this.#vol.rmdirSync(r.path);
      this.#changedAt(r.path, true);
    });
  }

  unlink(path: string): Promise<void> {
    return this.#run('unlink', path, () => {
      const r = this.#existing(path, false, 'unlink');
      if (r.type === 'directory') throw quietFsError('EISDIR', path, 'unlink');
      if (this.#isBusy(r.path)) throw quietFsError('EBUSY', path, 'unlink');
      this.#vol.unlinkSync(r.path);
      this.#changedAt(r.path);
      this.#symlinks.delete(r.path);
    });
  }

  symlink(target: string, path: string): Promise<void> {
    return this.#run('symlink', path, () => {
      const r = this.#resolve(path, false, 'symlink');
      if (r.type !== undefined) throw quietFsError('EEXIST', path, 'symlink');
      this.#vol.symlinkSync(target, r.path);
      this.#changedAt(r.path);
      this.#symlinks.add(r.path);
    });
  }

  readlink(path: string): Promise<string> {
    return this.#run('readlink', path, () => {
      const r = this.#existing(path, false, 'readlink');
      if (r.type !== 'symlink') throw quietFsError('EINVAL', path, 'readlink');
      return String(this.#vol.readlinkSync(r.path));
    });
  }

  // ---------------------------------------------------------------- test helpers

  /**
   * Every path below `root` (not `root` itself), sorted, directories with a trailing "/".
   * Symlinks below `root` are listed, not followed. An absent root gives [].
   */
  tree(root: string): string[] {
    let start: Resolved;
    try {
      start = this.#resolve(root, true, 'scandir');
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return [];
      throw err;
    }
    if (start.type !== 'directory') return [];
    const base = cleanPath(root);
    const out: string[] = [];
    const walk = (realDir: string, shownDir: string): void => {
      for (const name of this.#names(realDir)) {
        const real = childPath(realDir, name);
        const shown = childPath(shownDir, name);
        if (this.#lstatType(real) === 'directory') {
          out.push(`${shown}/`);
          walk(real, shown);
        } else {
          out.push(shown);
        }
      }
    };
    walk(start.path, base);
    return out.sort();
  }

  /** What is at `path` (lstat: a symlink is not followed), synchronously; undefined when nothing is. */
  typeSync(path: string): FileType | undefined {
    try {
      return this.#resolve(path, false, 'lstat').type;
    } catch {
      return undefined;
    }
  }

  /**
   * lstat of a real (symlink-free) path, synchronously, from the adapter's record of lookups;
   * undefined when nothing is there.
   */
  lstatRealSync(realPath: string): FileStat | undefined {
    return this.#lookup(realPath);
  }

  /** The names in directory `path`, synchronously; undefined when it is not a directory. */
  namesSync(path: string): string[] | undefined {
    try {
      const r = this.#resolve(path, true, 'scandir');
      return r.type === 'directory' ? this.#names(r.path) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Test setup: writes `data` at `path`, creating missing parent directories (0755). */
  writeRaw(path: string, data: string | Uint8Array): void {
    this.#wrapSync('open', path, () => {
      this.#mkdirAll(posix.dirname(cleanPath(path)), 0o755);
      this.#write(path, typeof data === 'string' ? new TextEncoder().encode(data) : data, DEFAULT_FILE_MODE);
    });
  }

  // ---------------------------------------------------------------- internals

  #isBusy(realPath: string): boolean {
    return this.#busy?.(realPath) ?? false;
  }

  #names(realDir: string): string[] {
    const cached = this.#listings.get(realDir);
    if (cached !== undefined) return [...cached];
    const names = this.#vol.readdirSync(realDir).map((n) => (typeof n === 'string' ? n : Buffer.isBuffer(n) ? n.toString('utf8') : String(n.name)));
    this.#listings.set(realDir, names);
    return [...names];
  }

  /** lstat of a real path, remembered until a change there; undefined when nothing is there. */
  #lookup(realPath: string): FileStat | undefined {
    const cached = this.#stats.get(realPath);
    if (cached !== undefined) return cached ?? undefined;
    if (this.#knownMissing(realPath)) {
      this.#stats.set(realPath, null);
      return undefined;
    }
    const st = lstatQuietly(this.#vol, realPath);
    const stat: FileStat | undefined =
      st === undefined ? undefined : { type: typeOf(st), size: st.size, mode: st.mode & 0o7777, dev: 0, ino: st.ino, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
    this.#stats.set(realPath, stat ?? null);
    return stat;
  }

  /**
   * Whether the record of lookups and listings already says nothing is at a real path: its
   * directory is remembered missing, or the directory's remembered listing lacks its name. Both
   * are forgotten with every change there, as the path's own lookup is. Most of the engine's
   * lookups are of missing paths, and memfs builds an error for each one it walks to.
   */
  #knownMissing(realPath: string): boolean {
    const slash = realPath.lastIndexOf('/');
    if (slash < 0 || realPath.length === 1) return false;
    const parent = slash === 0 ? '/' : realPath.slice(0, slash);
    if (this.#stats.get(parent) === null) return true;
    const names = this.#listings.get(parent);
    return names !== undefined && !names.includes(realPath.slice(slash + 1));
  }

  #lstatType(realPath: string): FileType | undefined {
    return this.#lookup(realPath)?.type;
  }

  /** Told the real path of every change made through this adapter (what lies below it may have changed too). */
  onChange: ((realPath: string) => void) | undefined;

  /** A change at `realPath` (and, for a directory renamed or replaced, below it). */
  #changedAt(realPath: string, subtree = false): void {
    this.onChange?.(realPath);
    // The path, its directory's listing and times, and (replaced or renamed) what was below it.
    const parent = posix.dirname(realPath);
    this.#stats.delete(realPath);
    this.#stats.delete(parent);
    this.#listings.delete(realPath);
    this.#listings.delete(parent);
    if (!subtree) return;
    const prefix = `${realPath}/`;
    for (const key of this.#stats.keys()) if (key.startsWith(prefix)) this.#stats.delete(key);
    for (const key of this.#listings.keys()) if (key.startsWith(prefix)) this.#listings.delete(key);
  }

  #statOf(realPath: string): FileStat {
    const st = this.#lookup(realPath);
    if (st === undefined) throw quietFsError('ENOENT', realPath, 'lstat');
    return st;
  }

  #write(path: string, data: Uint8Array, mode: number): void {
    const r = this.#resolve(path, true, 'open');
    if (r.type === 'directory') throw quietFsError('EISDIR', path, 'open');
    this.#vol.writeFileSync(r.path, Buffer.from(data), { mode });
    this.#changedAt(r.path);
  }

  #mkdirOne(path: string, mode: number): void {
    const r = this.#resolve(path, false, 'mkdir');
    if (r.type !== undefined) throw quietFsError('EEXIST', path, 'mkdir');
    this.#vol.mkdirSync(r.path, { mode });
    this.#changedAt(r.path);
  }

  /** mkdir -p, as Node's recursive mkdir: the path is made absolute lexically first. */
  #mkdirAll(path: string, mode: number): void {
    this.#requireAbsolute(path, 'mkdir');
    const parts = cleanPath(path).split('/').filter((c) => c !== '');
    for (let i = 1; i <= parts.length; i++) {
      const prefix = `/${parts.slice(0, i).join('/')}`;
      const r = this.#resolve(prefix, true, 'mkdir');
      if (r.type === undefined) {
        this.#vol.mkdirSync(r.path, { mode });
        this.#changedAt(r.path);
      }
      else if (r.type !== 'directory') throw quietFsError(i === parts.length ? 'EEXIST' : 'ENOTDIR', path, 'mkdir');
    }
  }

  #requireAbsolute(path: string, syscall: string): void {
    if (!path.startsWith('/')) throw quietFsError('EINVAL', path, syscall, `MemFs needs absolute paths: ${path}`);
  }

  #existing(path: string, followLast: boolean, syscall: string): Resolved {
    const r = this.#resolve(path, followLast, syscall);
    if (r.type === undefined) throw quietFsError('ENOENT', path, syscall);
    return r;
  }

  /**
   * Walks `path` from "/", following every symlink on the way and the final one when
   * `followLast` (or when the path ends with "/"). A missing final component is not an error
   * (type undefined); a missing or non-directory intermediate one is (ENOENT / ENOTDIR).
   */
  #resolve(path: string, followLast: boolean, syscall: string): Resolved {
    this.#requireAbsolute(path, syscall);
    const trailingSlash = path.length > 1 && path.endsWith('/');
    const follow = followLast || trailingSlash;
    const direct = this.#resolveDirect(path, trailingSlash, syscall);
    if (direct !== undefined) return direct;
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
      const next = childPath(current, component);
      const type = this.#lstatType(next);
      const isLast = remaining.length === 0;
      if (type === undefined) {
        if (isLast) return { path: next, type: undefined };
        throw quietFsError('ENOENT', path, syscall);
      }
      if (type === 'symlink' && (!isLast || follow)) {
        if (++hops > MAX_SYMLINK_HOPS) throw quietFsError('ELOOP', path, syscall);
        const target = String(this.#vol.readlinkSync(next));
        if (target.startsWith('/')) current = '/';
        remaining = [...target.split('/').filter((c) => c !== ''), ...remaining];
        continue;
      }
      if (!isLast && type !== 'directory') throw quietFsError('ENOTDIR', path, syscall);
      current = next;
    }
    const type = this.#lstatType(current);
    if (trailingSlash && type !== undefined && type !== 'directory') throw quietFsError('ENOTDIR', path, syscall);
    return { path: current, type };
  }

  /**
   * The fast path of #resolve: a path with no "." or ".." component that no symlink lies on
   * resolves to itself. Its type takes one lookup; a missing last component one more, of the
   * parent, for the errors the walk would give (ENOENT for a missing directory on the way,
   * ENOTDIR for a file on the way). Undefined when the walk is needed.
   */
  #resolveDirect(path: string, trailingSlash: boolean, syscall: string): Resolved | undefined {
    const clean = trailingSlash ? path.slice(0, -1) : path;
    if (clean.includes('//') || clean.includes('/./') || clean.includes('/../') || clean.endsWith('/.') || clean.endsWith('/..')) return undefined;
    // clean is the link or below it (no string built per link: this runs for every path resolved).
    for (const link of this.#symlinks) if (clean.startsWith(link) && (clean.length === link.length || clean.charCodeAt(link.length) === 0x2f)) return undefined;
    if (clean === '') return { path: '/', type: 'directory' };
    const type = this.#lstatType(clean);
    if (type === undefined) {
      const parent = clean.slice(0, clean.lastIndexOf('/')) || '/';
      const parentType = this.#lstatType(parent);
      if (parentType === undefined) throw quietFsError('ENOENT', path, syscall);
      if (parentType !== 'directory') throw quietFsError('ENOTDIR', path, syscall);
    } else if (trailingSlash && type !== 'directory') {
      throw quietFsError('ENOTDIR', path, syscall);
    }
    return { path: clean, type };
  }

  #wrapSync<T>(syscall: string, path: string, body: () => T): T {
    try {
      return body();
    } catch (err) {
      if (err instanceof FsError) throw err;
      const code = errorCode(err);
      if (code !== undefined) throw quietFsError(code, path, syscall);
      throw err;
    }
  }

  #run<T>(syscall: string, path: string, body: () => T): Promise<T> {
    try {
      return Promise.resolve(this.#wrapSync(syscall, path, body));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }
}
