/**
 * The FileSystem port: the only way engine code (layout, volume plugins, volume manager,
 * audit) touches files. Real and in-memory adapters live in src/adapters; engine folders are
 * forbidden by lint from importing node:fs.
 *
 * Contract for every method: paths are absolute POSIX paths; failures reject with an
 * {@link FsError} whose `code` is the errno name (ENOENT, ENOTDIR, EACCES, ELOOP, ...), so
 * callers can branch on the kind of failure the way kubelet branches on os.IsNotExist.
 */

export type FileType = 'file' | 'directory' | 'symlink' | 'other';

export interface DirEntry {
  readonly name: string;
  /** Type of the entry itself; a symlink is reported as 'symlink', never followed. */
  readonly type: FileType;
}

export interface FileStat {
  readonly type: FileType;
  readonly size: number;
  /** Permission bits (mode & 0o7777). */
  readonly mode: number;
  /** Device id (st_dev); 0 where the adapter cannot tell. */
  readonly dev: number;
  /** Inode number, where the adapter has one: with the times below, a file's identity. */
  readonly ino?: number;
  /** Last modification (mtime) and status change (ctime), epoch ms with fractions, where known. */
  readonly mtimeMs?: number;
  readonly ctimeMs?: number;
}

export interface WriteFileOptions {
  /** Permission bits for a newly created file (masked by the umask where the adapter has one). */
  readonly mode?: number;
  /** fsync the file before the promise resolves. */
  readonly fsync?: boolean;
}

export interface FileSystem {
  /** Entries of a directory, in no particular order (callers sort). */
  readdir(path: string): Promise<DirEntry[]>;
  /** Stat without following a final symlink. */
  lstat(path: string): Promise<FileStat>;
  /** Stat following symlinks. */
  stat(path: string): Promise<FileStat>;
  /** Canonical path with every symlink resolved; rejects with ELOOP on a loop. */
  realpath(path: string): Promise<string>;
  /**
   * Reads a whole file, refusing one larger than `maxBytes`: rejects with code EFBIG.
   * Follows symlinks unless `noFollow` is set, in which case a symlink as the final component
   * rejects with ELOOP (O_NOFOLLOW); callers that must not leave a root check with realpath.
   */
  readFile(path: string, maxBytes: number, options?: { readonly noFollow?: boolean }): Promise<Uint8Array>;
  mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<void>;
  writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  /** fsync a directory so that a rename inside it is durable. */
  fsyncDir(path: string): Promise<void>;
  /** Removes an empty directory (rmdir semantics). */
  rmdir(path: string): Promise<void>;
  /** Removes a file or symlink. */
  unlink(path: string): Promise<void>;
  /** Creates a symlink at `path` pointing to `target`. */
  symlink(target: string, path: string): Promise<void>;
  /** The target of the symlink at `path`. */
  readlink(path: string): Promise<string>;
  /**
   * Optional: removes `path` and everything below it, never following a symlink and never
   * descending into a mount point, holding one directory descriptor per directory and making
   * every removal relative to it, so nothing outside the tree it started in can be removed
   * whatever is renamed meanwhile (adapters/node). Callers go through
   * {@link removeTreeOneFilesystem}, which walks by path over the other methods where an adapter
   * has no such primitive (the in-memory ones and the simulator's, where nothing races).
   */
  removeTree?(path: string, options: RemoveTreeOptions): Promise<void>;
}

export interface RemoveTreeOptions {
  /** Only directories may be removed: a file, symlink or other entry anywhere fails it, named. */
  readonly directoriesOnly: boolean;
  /** A directory deeper than this many levels below `path` fails it. */
  readonly maxDepth: number;
}

/** The errors of a tree removal, worded alike by every implementation. */
export const removeTreeErrors = {
  notADirectory: (p: string): Error => new Error(`cannot delete ${p}: not a directory`),
  mountPoint: (p: string): Error => new Error(`cannot delete directory ${p}: it is a mount point`),
  tooDeep: (p: string, maxDepth: number): Error => new Error(`${p}: deeper than ${maxDepth} levels; not removed`),
};

/**
 * kubelet's RemoveAllOneFilesystem (pkg/util/removeall), and with `directoriesOnly` its
 * RemoveDirsOneFilesystem: removes `path` (a file or symlink is unlinked, never followed) and,
 * for a directory, everything below it, refusing to descend into a mount point; the first error
 * ends it. Through the adapter's descriptor-relative {@link FileSystem.removeTree} when it has
 * one; otherwise by path (kubelet's own way), asking `isLikelyNotMountPoint` before descending
 * into each directory.
 */
export async function removeTreeOneFilesystem(
  fs: FileSystem,
  isLikelyNotMountPoint: (path: string) => Promise<boolean>,
  path: string,
  options: RemoveTreeOptions,
): Promise<void> {
  if (fs.removeTree !== undefined) return fs.removeTree(path, options);
  const remove = async (p: string, type: FileType, depth: number): Promise<void> => {
    if (type !== 'directory') {
      if (options.directoriesOnly) throw removeTreeErrors.notADirectory(p);
      await fs.unlink(p);
      return;
    }
    if (depth > options.maxDepth) throw removeTreeErrors.tooDeep(p, options.maxDepth);
    if (!(await isLikelyNotMountPoint(p))) throw removeTreeErrors.mountPoint(p);
    for (const child of await fs.readdir(p)) await remove(`${p}/${child.name}`, child.type, depth + 1);
    await fs.rmdir(p);
  };
  await remove(path, (await fs.lstat(path)).type, 0);
}

/** `fs` with some of its methods replaced; every other call goes to `fs` itself. */
export function overrideFileSystem(fs: FileSystem, overrides: Partial<FileSystem>): FileSystem {
  const removeTree = overrides.removeTree ?? fs.removeTree?.bind(fs);
  return {
    readdir: overrides.readdir ?? ((p) => fs.readdir(p)),
    lstat: overrides.lstat ?? ((p) => fs.lstat(p)),
    stat: overrides.stat ?? ((p) => fs.stat(p)),
    realpath: overrides.realpath ?? ((p) => fs.realpath(p)),
    readFile: overrides.readFile ?? ((p, maxBytes, options) => fs.readFile(p, maxBytes, options)),
    mkdir: overrides.mkdir ?? ((p, options) => fs.mkdir(p, options)),
    writeFile: overrides.writeFile ?? ((p, data, options) => fs.writeFile(p, data, options)),
    rename: overrides.rename ?? ((from, to) => fs.rename(from, to)),
    fsyncDir: overrides.fsyncDir ?? ((p) => fs.fsyncDir(p)),
    rmdir: overrides.rmdir ?? ((p) => fs.rmdir(p)),
    unlink: overrides.unlink ?? ((p) => fs.unlink(p)),
    symlink: overrides.symlink ?? ((target, p) => fs.symlink(target, p)),
    readlink: overrides.readlink ?? ((p) => fs.readlink(p)),
    ...(removeTree === undefined ? {} : { removeTree }),
  };
}

/** An error from a FileSystem port, carrying the errno name and the path it concerns. */
export class FsError extends Error {
  override readonly name = 'FsError';
  constructor(
    readonly code: string,
    readonly path: string,
    readonly syscall: string,
    message?: string,
  ) {
    super(message ?? `${syscall} ${path}: ${code}`);
  }
}

/**
 * An {@link FsError} without a stack trace, for an in-memory filesystem: it fails paths by the
 * thousand (an ENOENT looked for on purpose, a refusal retried every pass) and the stack would
 * tell nothing its message does not, while capturing it is most of the error's cost.
 */
export function quietFsError(code: string, path: string, syscall: string, message?: string): FsError {
  return withoutStackTrace(() => new FsError(code, path, syscall, message));
}

/**
 * What `make` returns, with no stack trace captured by the errors it builds (their `stack` is
 * only "<name>: <message>"): for expected failures, made over and over and classified or logged
 * by their message alone, where capturing the stack is most of an error's cost.
 */
export function withoutStackTrace<T>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * An Error without a stack trace ("Error: <message>" only), for an expected failure that is
 * classified or logged by its message alone and made over and over (an unreachable API server
 * in the simulator, a claim not bound yet): capturing the stack is most of its cost.
 */
export function quietError(message: string): Error {
  return withoutStackTrace(() => new Error(message));
}

/** Whether `err` says that the path does not exist (kubelet's os.IsNotExist). */
export function isNotExist(err: unknown): boolean {
  return errorCode(err) === 'ENOENT';
}

/** Whether something (of any type, a dangling symlink included) is at `p`; errors other than ENOENT reject. */
export async function pathExists(fs: FileSystem, p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch (err) {
    if (isNotExist(err)) return false;
    throw err;
  }
}

/** The errno name of an error from a FileSystem port (or from node:fs), if any. */
export function errorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = err.code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** A short human-readable description of any thrown value. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * A path string for messages and reports: each byte of a name that is not UTF-8 (carried by the
 * FileSystem adapters as the lone surrogate U+DC00+byte) written as `\xNN`, never dropped.
 */
export function escapeUndecodable(p: string): string {
  return p.replace(/[\uDC80-\uDCFF]/g, (c) => `\\x${(c.charCodeAt(0) - 0xdc00).toString(16).padStart(2, '0')}`);
}

export interface AtomicWriteOptions {
  /** Permission bits of the new file (masked by the umask where the adapter has one). */
  readonly mode: number;
  /**
   * Names this writer in the temp file, for a file that several PROCESSES may replace (e.g. a
   * pid): each then writes its own temp file. Writers inside one process need none: writes to one
   * path through one FileSystem are serialised here.
   */
  readonly writerId?: string;
}

/** The temp file {@link writeFileAtomic} writes before renaming: `<path>.tmp` or `<path>.<writerId>.tmp`. */
export function atomicTempPath(path: string, writerId?: string): string {
  return writerId === undefined ? `${path}.tmp` : `${path}.${writerId}.tmp`;
}

/** Writes in flight per FileSystem and target path; each waits for the one before it. */
const atomicWrites = new WeakMap<FileSystem, Map<string, Promise<void>>>();

/**
 * Replaces the file at `path` atomically and durably, through the port: writes the temp file
 * {@link atomicTempPath} (same directory, so the rename cannot cross filesystems) with fsync,
 * renames it over `path`, then fsyncs the directory so that the rename survives a crash. A
 * reader sees the old bytes or the new ones, never a mix; after a crash, at worst a stale temp
 * file is left, which the next write of the same path overwrites. On a failure before the
 * rename the temp file is removed (best effort) and the original error rethrown. The temp name is
 * deterministic (no clock, no randomness), so simulated runs replay byte for byte. The directory
 * must exist.
 */
export function writeFileAtomic(fs: FileSystem, path: string, data: Uint8Array, options: AtomicWriteOptions): Promise<void> {
  let inFlight = atomicWrites.get(fs);
  if (inFlight === undefined) {
    inFlight = new Map();
    atomicWrites.set(fs, inFlight);
  }
  const writes = inFlight;
  const previous = writes.get(path) ?? Promise.resolve();
  const write = previous.then(() => replaceFile(fs, path, data, options), () => replaceFile(fs, path, data, options));
  const settled = write.then(() => undefined, () => undefined);
  writes.set(path, settled);
  void settled.then(() => {
    if (writes.get(path) === settled) writes.delete(path);
  });
  return write;
}

async function replaceFile(fs: FileSystem, path: string, data: Uint8Array, options: AtomicWriteOptions): Promise<void> {
  const temp = atomicTempPath(path, options.writerId);
  try {
    await fs.writeFile(temp, data, { mode: options.mode, fsync: true });
    await fs.rename(temp, path);
  } catch (err) {
    // The temp file may exist, fully or partly written: remove it, keep the original error.
    await fs.unlink(temp).catch(() => undefined);
    throw err;
  }
  await fs.fsyncDir(parentDir(path));
}

/** The directory holding `path` (an absolute POSIX path). */
function parentDir(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}
