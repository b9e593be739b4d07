/**
 * An indexed mount-table snapshot and kubelet's mount reference queries:
 * GetMountRefs / SearchMountPoints (reference §11.2), HasMountRefs (§4.3 step 3) and
 * GetReliableMountRefs (§11.4).
 *
 * Matching is done on the verbatim (escaped) mountinfo text, as kubelet does: a path containing
 * a space is written by the kernel as "\040" and so never equals the plain path.
 */
import * as posix from 'node:path/posix';

import { errorCode, type FileSystem } from '../host/fs.js';
import {
  escapeMountPath,
  parseMountInfo,
  unescapeMountPath,
  type MountInfoEntry,
  type MountInfoProblem,
  type ParseMountInfoOptions,
  type ParsedMountInfo,
} from './mountInfo.js';
import { InconsistentReadError, readMountInfoText, type MountInfoSource } from './mountTable.js';

/** Go's filepath.Clean for slash paths: no "//", "." or resolvable "..", no trailing "/". */
function cleanPath(p: string): string {
  // Fast path: an absolute path with no "//", "/./", "/../", trailing "/" or "." segments is clean.
  if (p.length > 1 && p.charCodeAt(0) === 47 && !p.endsWith('/') && !p.includes('//') && !/\/\.\.?(?:\/|$)/.test(p)) return p;
  const n = posix.normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

/** Number of "/" in a path: its depth, for ordering ancestors before descendants. */
function depthOf(p: string): number {
  let n = 0;
  for (let i = 0; i < p.length; i++) if (p.charCodeAt(i) === 47) n++;
  return p === '/' ? 0 : n;
}

/** The parent of a clean absolute path ("/" for "/x"); "/" for "/". */
function parentOf(p: string): string {
  const i = p.lastIndexOf('/');
  return i <= 0 ? '/' : p.slice(0, i);
}

/** Go's filepath.Join: empty elements ignored, "" when all are empty, otherwise cleaned. */
function joinPath(a: string, b: string): string {
  const parts = [a, b].filter((s) => s !== '');
  return parts.length === 0 ? '' : cleanPath(parts.join('/'));
}

function deviceRootKey(major: number, minor: number, root: string): string {
  return `${major}:${minor}:${root}`;
}

/** The suffix the kernel appends to the mount point of a mount whose directory was deleted. */
const DELETED_SUFFIX = '\\040(deleted)';

/** One parsed mount table, indexed for path and device lookups. Immutable. */
export class MountTableSnapshot {
  readonly entries: readonly MountInfoEntry[];
  readonly problems: readonly MountInfoProblem[];
  /** Cleaned (still escaped) mount point -> indices into `entries`, ascending. */
  readonly #byMountPoint = new Map<string, number[]>();
  /** major:minor:root -> entries, in file order. */
  readonly #byDeviceRoot = new Map<string, MountInfoEntry[]>();
  /** [cleaned mount point, entry index], sorted by mount point then index: prefix range queries. */
  readonly #sortedMountPoints: [string, number][] = [];
  /**
   * Cleaned mount point -> the highest entry index among the entries mounted at it or at any of
   * its ancestors: the answer of findMountFor for every path whose nearest mounted ancestor (or
   * itself) is this mount point. Lets a look-up stop at the first mounted ancestor.
   */
  readonly #lastAtOrAbove = new Map<string, number>();

  static parse(text: string, options?: ParseMountInfoOptions): MountTableSnapshot {
    return new MountTableSnapshot(parseMountInfo(text, options));
  }

  constructor(parsed: ParsedMountInfo) {
    this.entries = parsed.entries;
    this.problems = parsed.problems;
    this.entries.forEach((entry, index) => {
      const mp = cleanPath(entry.mountPoint);
      const atPoint = this.#byMountPoint.get(mp);
      if (atPoint === undefined) this.#byMountPoint.set(mp, [index]);
      else atPoint.push(index);
      this.#sortedMountPoints.push([mp, index]);
      const key = deviceRootKey(entry.major, entry.minor, entry.root);
      const sameRoot = this.#byDeviceRoot.get(key);
      if (sameRoot === undefined) this.#byDeviceRoot.set(key, [entry]);
      else sameRoot.push(entry);
    });
    this.#sortedMountPoints.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
    // Shallow mount points first, so each one's nearest mounted ancestor is already resolved.
    const points = [...this.#byMountPoint.keys()].sort((a, b) => depthOf(a) - depthOf(b));
    for (const mp of points) {
      const own = this.#byMountPoint.get(mp);
      let best = own?.[own.length - 1] ?? -1;
      if (mp !== '/') {
        let current = parentOf(mp);
        for (;;) {
          const above = this.#lastAtOrAbove.get(current);
          if (above !== undefined) {
            if (above > best) best = above;
            break;
          }
          if (current === '/') break;
          current = parentOf(current);
        }
      }
      this.#lastAtOrAbove.set(mp, best);
    }
  }

  /**
   * SearchMountPoints' first step: the LAST entry (highest index) whose mount point equals
   * `path` or is an ancestor of it (compared after cleaning both, like Go's filepath.Rel);
   * undefined if none. Looks up each ancestor of `path` in a map: O(depth of path).
   */
  findMountFor(path: string): MountInfoEntry | undefined {
    let current = cleanPath(path);
    for (;;) {
      const best = this.#lastAtOrAbove.get(current);
      if (best !== undefined) return this.entries[best];
      if (current === '/') return undefined;
      current = parentOf(current);
    }
  }

  /**
   * kubelet SearchMountPoints: the mount points (verbatim) of every OTHER entry (different id)
   * with the same major:minor whose root equals rootPath, in file order. rootPath is the
   * containing entry's root joined with what is left of `path` once the entry's mount point is
   * trimmed from its front. Throws when no entry contains `path`.
   */
  searchMountPoints(path: string): string[] {
    const entry = this.findMountFor(path);
    const rest = entry !== undefined && path.startsWith(entry.mountPoint) ? path.slice(entry.mountPoint.length) : path;
    const rootPath = entry === undefined ? '' : joinPath(entry.root, rest);
    if (entry === undefined || rootPath === '') {
      throw new Error(`failed to get root path and major:minor for ${path}`);
    }
    const sameRoot = this.#byDeviceRoot.get(deviceRootKey(entry.major, entry.minor, rootPath)) ?? [];
    return sameRoot.filter((e) => e.id !== entry.id).map((e) => e.mountPoint);
  }

  /**
   * Whether some entry's mount point equals `path` escaped the way the kernel escapes it (so a
   * path with spaces matches). Like kubelet's /proc/mounts check, a mount point carrying the
   * kernel's "\040(deleted)" suffix also matches. For display; kubelet's GetMountRefs does not use it.
   */
  isMountPoint(path: string): boolean {
    const escaped = escapeMountPath(cleanPath(path));
    return this.#byMountPoint.has(escaped) || this.#byMountPoint.has(escaped + DELETED_SUFFIX);
  }

  /** Mount points (decoded for display) of the entries at or below `path`, one per entry, in file order. */
  mountsUnder(path: string): string[] {
    const escaped = escapeMountPath(cleanPath(path));
    const prefix = escaped.endsWith('/') ? escaped : `${escaped}/`;
    const sorted = this.#sortedMountPoints;
    // Binary search for the first mount point >= escaped; every match lies in one run after it.
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((sorted[mid]?.[0] ?? '') < escaped) lo = mid + 1;
      else hi = mid;
    }
    const indices: number[] = [];
    for (let i = lo; i < sorted.length; i++) {
      const [mp, index] = sorted[i] ?? ['', 0];
      if (mp === escaped || mp.startsWith(prefix)) indices.push(index);
      else if (mp > prefix) break;
    }
    return indices.sort((a, b) => a - b).map((i) => unescapeMountPath(this.entries[i]?.mountPoint ?? ''));
  }
}

/** Reads the source (consistently when the kernel needs it) and parses it into a snapshot. */
export async function readMountTableSnapshot(
  source: MountInfoSource,
  options?: { readonly strict?: boolean },
): Promise<MountTableSnapshot> {
  const text = await readMountInfoText(source);
  return MountTableSnapshot.parse(text, { strict: options?.strict ?? true, source: source.name });
}

/**
 * Error codes mount-utils calls a "corrupted mount" (IsCorruptedMnt). EAGAIN is listed beside
 * EWOULDBLOCK because they are the same errno on Linux and Node reports it as EAGAIN.
 */
const CORRUPTED_MOUNT_CODES: ReadonlySet<string> = new Set([
  'ENOTCONN',
  'ESTALE',
  'EIO',
  'EACCES',
  'EHOSTDOWN',
  'EWOULDBLOCK',
  'EAGAIN',
  'ENODEV',
]);

/** mount-utils IsCorruptedMnt: the error says the path sits on a broken mount. */
export function isCorruptedMount(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && CORRUPTED_MOUNT_CODES.has(code);
}

/**
 * GetMountRefs' checks before the table is consulted. Returns the symlink-resolved path to
 * search for, or undefined when kubelet answers "no references" without looking:
 *  - the path does not exist (ENOENT);
 *  - the path is on a corrupted mount ({@link isCorruptedMount}): kubelet warns and treats it
 *    as unmounted;
 *  - any other stat failure (ENOTDIR, ELOOP, ...): mount-utils' PathExists reports such a path
 *    as not existing, so GetMountRefs returns an empty list for it too.
 * A thrown value without an errno code is not a filesystem answer and is rethrown; realpath
 * failures are rethrown (kubelet returns the EvalSymlinks error).
 */
async function resolveRefTarget(fs: FileSystem, path: string): Promise<string | undefined> {
  try {
    await fs.stat(path);
  } catch (err) {
    if (errorCode(err) === undefined) throw err;
    return undefined;
  }
  return fs.realpath(path);
}

/**
 * kubelet GetMountRefs over one snapshot: the other mount points of the filesystem subtree
 * mounted (or bind-mounted) at `path`. Paths are matched verbatim (no unescaping).
 */
export async function getMountRefs(fs: FileSystem, snapshot: MountTableSnapshot, path: string): Promise<string[]> {
  const target = await resolveRefTarget(fs, path);
  if (target === undefined) return [];
  return snapshot.searchMountPoints(target);
}

const PLUGINS_MARKER = '/plugins/kubernetes.io/';

/**
 * HasMountRefs: let p be the suffix of mountPath starting at "/plugins/kubernetes.io/" (the
 * whole path if absent); true iff some ref does NOT contain p. Refs that contain p are the same
 * directory seen through another mount namespace's view (e.g. a containerized kubelet's
 * rootfs), so only the others, such as pod bind mounts, count.
 */
export function hasMountRefs(mountPath: string, refs: readonly string[]): boolean {
  const at = mountPath.indexOf(PLUGINS_MARKER);
  const p = at >= 0 ? mountPath.slice(at) : mountPath;
  return refs.some((ref) => !ref.includes(p));
}

/** The clock GetReliableMountRefs waits on. */
export interface SleepClock {
  nowMs(): number;
  sleep(ms: number): Promise<void>;
}

/** GetReliableMountRefs polls every 10 ms ... */
export const RELIABLE_MOUNT_REFS_INTERVAL_MS = 10;
/** ... for up to one minute. */
export const RELIABLE_MOUNT_REFS_TIMEOUT_MS = 60_000;

/**
 * kubelet GetReliableMountRefs: GetMountRefs, retried every 10 ms while reading the table fails
 * with {@link InconsistentReadError}; after 60 s of clock time the last such error is rethrown.
 * Any other error is rethrown at once. Each attempt does what GetMountRefs does, in its order:
 * stat, realpath, then `load()` (read + parse a fresh snapshot) and search.
 */
export async function getReliableMountRefs(
  fs: FileSystem,
  load: () => Promise<MountTableSnapshot>,
  clock: SleepClock,
  path: string,
): Promise<string[]> {
  const start = clock.nowMs();
  for (;;) {
    try {
      const target = await resolveRefTarget(fs, path);
      if (target === undefined) return [];
      const snapshot = await load();
      return snapshot.searchMountPoints(target);
    } catch (err) {
      if (!(err instanceof InconsistentReadError)) throw err;
      if (clock.nowMs() - start >= RELIABLE_MOUNT_REFS_TIMEOUT_MS) throw err;
    }
    await clock.sleep(RELIABLE_MOUNT_REFS_INTERVAL_MS);
  }
}
