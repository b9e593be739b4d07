/**
 * An indexed mount-table snapshot and kubelet's mount reference queries:
 * GetMountRefs / SearchMountPoints (mount-utils mount_linux.go), HasMountRefs (pkg/volume/util:
 * UnmountDevice is refused while a reference outside /plugins/kubernetes.io/ remains) and
 * GetReliableMountRefs (GetMountRefs retried every 10 ms for up to a minute on a torn read).
 *
 * Matching is done on the verbatim (escaped) mountinfo text, as kubelet does: a path containing
 * a space is written by the kernel as "\040" and so never equals the plain path.
 */
import * as posix from 'node:path/posix';

import type { Clock } from '../ports/clock.js';
import { errorCode, type FileSystem } from '../ports/fs.js';
import type { MountTable } from '../ports/mounter.js';
import {
  escapeMountPath,
  parseMountInfo,
  ScannedMountInfo,
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
  // ("/." also rejects a harmless "/.name": such a path merely takes the slow path.)
  if (p.length > 1 && p.charCodeAt(0) === 47 && p.charCodeAt(p.length - 1) !== 47 && !p.includes('//') && !p.includes('/.')) return p;
  const n = posix.normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
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

/** One number for a device: minor numbers are below 2^20 on Linux; larger ones still map uniquely below 2^53. */
function deviceKey(major: number, minor: number): number {
  return major * 2 ** 32 + minor;
}

/** mountsUnder answers from per-parent scans for at most this many parents, each holding at most this many mounts. */
const MAX_UNDER_PARENTS = 16;
const MAX_UNDER_BUCKET = 512;

/** Bound on the look-up memo of one snapshot (it is cleared, not grown, beyond this). */
const MAX_REMEMBERED_PATHS = 100_000;

/** The suffix the kernel appends to the mount point of a mount whose directory was deleted. */
const DELETED_SUFFIX = '\\040(deleted)';

/**
 * One parsed mount table, indexed for path and device lookups. Immutable. The implementation of
 * the Mounter port's {@link MountTable}: the engine sees only the interface.
 *
 * Each index is built on the first query that needs it, not at parse time: a caller that asks
 * only isMountPoint never pays for the device index or the sorted list, and a parse whose
 * snapshot is never queried costs the parse alone.
 */
export class MountTableSnapshot implements MountTable {
  readonly problems: readonly MountInfoProblem[];
  /** The entries, or the scanned table that builds them when asked (see {@link MountTableSnapshot.scan}). */
  readonly #table: readonly MountInfoEntry[] | ScannedMountInfo;
  /** How many entries. */
  readonly #count: number;
  /** Cleaned (still escaped) mount point -> the highest index of an entry mounted there. */
  #lastAtMountPoint: Map<string, number> | undefined;
  /**
   * Device (major, minor) -> the index of its entry, or of its entries in file order. Most
   * devices have one entry: a number, not a list (a node has thousands of them).
   */
  #byDevice: Map<number, number | number[]> | undefined;
  /** Cleaned mount points, by entry index (built with the first index that needs them). */
  #cleaned: string[] | undefined;
  /** mountsUnder without the sorted list: parent dir -> [cleaned mount point, index] at or below it. */
  readonly #under = new Map<string, [string, number][]>();
  /**
   * Path -> the highest index of an entry mounted at it or at one of its ancestors (-1: none),
   * for every path a look-up has walked through: later look-ups stop at the first known ancestor.
   */
  #highestAtOrAbove = new Map<string, number>();
  /**
   * `<cleaned mount point>\0<entry index, zero-padded>` of every entry, sorted: by mount point,
   * then index (NUL sorts below every path character). Plain strings, so the sort is the
   * engine's native string sort rather than a comparator call per comparison.
   */
  #sortedMountPoints: string[] | undefined;

  static parse(text: string, options?: ParseMountInfoOptions): MountTableSnapshot {
    return new MountTableSnapshot(parseMountInfo(text, options));
  }

  /**
   * The same snapshot as {@link MountTableSnapshot.parse} (same answers, same errors and
   * problems), whose entries are built only as queries need them: the indexes read each line's
   * mount point and device numbers only. For a one-shot reader of a large table (the audit).
   */
  static scan(text: string, options?: ParseMountInfoOptions): MountTableSnapshot {
    return new MountTableSnapshot(ScannedMountInfo.scan(text, options));
  }

  constructor(parsed: ParsedMountInfo | ScannedMountInfo) {
    if (parsed instanceof ScannedMountInfo) {
      this.#table = parsed;
      this.#count = parsed.count;
    } else {
      this.#table = parsed.entries;
      this.#count = parsed.entries.length;
    }
    this.problems = parsed.problems;
  }

  /** Every entry, in file order (a scanned table builds them all on first use). */
  get entries(): readonly MountInfoEntry[] {
    const t = this.#table;
    return t instanceof ScannedMountInfo ? t.entries() : t;
  }

  /** The i-th entry. */
  #entry(i: number): MountInfoEntry | undefined {
    const t = this.#table;
    return t instanceof ScannedMountInfo ? t.entry(i) : t[i];
  }

  /** The i-th entry's mount point (verbatim), without building a scanned entry. */
  #mountPointOf(i: number): string {
    const t = this.#table;
    return t instanceof ScannedMountInfo ? t.mountPoint(i) : (t[i]?.mountPoint ?? '');
  }

  /** Whether some entry's mount point (verbatim) starts with `prefix`. */
  hasMountPointStartingWith(prefix: string): boolean {
    for (let i = 0; i < this.#count; i++) if (this.#mountPointOf(i).startsWith(prefix)) return true;
    return false;
  }

  get #cleanedMountPoints(): string[] {
    if (this.#cleaned === undefined) {
      const cleaned = new Array<string>(this.#count);
      for (let i = 0; i < this.#count; i++) cleaned[i] = cleanPath(this.#mountPointOf(i));
      this.#cleaned = cleaned;
    }
    return this.#cleaned;
  }

  get #mountPoints(): Map<string, number> {
    if (this.#lastAtMountPoint === undefined) {
      const index = new Map<string, number>();
      const cleaned = this.#cleanedMountPoints;
      // Ascending: a later entry at the same mount point overwrites, so each value is the highest.
      for (let i = 0; i < cleaned.length; i++) index.set(cleaned[i] ?? '', i);
      this.#lastAtMountPoint = index;
    }
    return this.#lastAtMountPoint;
  }

  get #devices(): Map<number, number | number[]> {
    if (this.#byDevice === undefined) {
      const index = new Map<number, number | number[]>();
      const t = this.#table;
      const scanned = t instanceof ScannedMountInfo ? t : undefined;
      for (let i = 0; i < this.#count; i++) {
        let dev: number;
        if (scanned !== undefined) dev = deviceKey(scanned.major(i), scanned.minor(i));
        else {
          const entry = this.#entry(i);
          if (entry === undefined) continue;
          dev = deviceKey(entry.major, entry.minor);
        }
        const seen = index.get(dev);
        if (seen === undefined) index.set(dev, i);
        else if (typeof seen === 'number') index.set(dev, [seen, i]);
        else seen.push(i);
      }
      this.#byDevice = index;
    }
    return this.#byDevice;
  }

  get #sorted(): string[] {
    if (this.#sortedMountPoints === undefined) {
      const width = String(this.#count).length;
      const sorted = this.#cleanedMountPoints.map((mp, index) => `${mp}\u0000${String(index).padStart(width, '0')}`);
      sorted.sort();
      this.#sortedMountPoints = sorted;
    }
    return this.#sortedMountPoints;
  }

  /**
   * mountsUnder's answer from the entries at or below the parent of `escaped` (one linear scan
   * per parent, remembered): sibling queries - the staging dirs of a node's block volumes, the
   * pod dirs under pods/ - share one scan, and no sort is needed. Undefined when that would not
   * pay (too many distinct parents, or a parent holding too many mounts): the sorted list then.
   */
  #underViaParent(escaped: string, prefix: string): number[] | undefined {
    const parent = parentOf(escaped);
    let bucket = this.#under.get(parent);
    if (bucket === undefined) {
      if (this.#under.size >= MAX_UNDER_PARENTS) return undefined;
      const parentPrefix = parent === '/' ? '/' : `${parent}/`;
      const cleaned = this.#cleanedMountPoints;
      bucket = [];
      for (let i = 0; i < cleaned.length; i++) {
        const mp = cleaned[i] ?? '';
        if (mp === parent || mp.startsWith(parentPrefix)) {
          bucket.push([mp, i]);
          if (bucket.length > MAX_UNDER_BUCKET) return undefined;
        }
      }
      this.#under.set(parent, bucket);
    }
    const indices: number[] = [];
    // The bucket is in file order, so the answer is too.
    for (const [mp, i] of bucket) if (mp === escaped || mp.startsWith(prefix)) indices.push(i);
    return indices;
  }

  /**
   * SearchMountPoints' first step: the LAST entry (highest index) whose mount point equals
   * `path` or is an ancestor of it (compared after cleaning both, like Go's filepath.Rel);
   * undefined if none. Looks up `path` and each of its ancestors in a map: O(depth of path).
   */
  findMountFor(path: string): MountInfoEntry | undefined {
    const best = this.#highestIndexAtOrAbove(cleanPath(path));
    return best < 0 ? undefined : this.#entry(best);
  }

  /** See #highestAtOrAbove: walks up to the first path already answered, then fills in the walk. */
  #highestIndexAtOrAbove(cleaned: string): number {
    const memo = this.#highestAtOrAbove;
    const known = memo.get(cleaned);
    if (known !== undefined) return known;
    if (memo.size > MAX_REMEMBERED_PATHS) memo.clear();
    const mountPoints = this.#mountPoints;
    const walked: string[] = [];
    let above = -1;
    for (let current = cleaned; ; current = parentOf(current)) {
      const answer = memo.get(current);
      if (answer !== undefined) {
        above = answer;
        break;
      }
      walked.push(current);
      if (current === '/') break;
    }
    for (let i = walked.length - 1; i >= 0; i--) {
      const p = walked[i] ?? '/';
      const own = mountPoints.get(p);
      if (own !== undefined && own > above) above = own;
      memo.set(p, above);
    }
    return above;
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
    const onDevice = this.#devices.get(deviceKey(entry.major, entry.minor)) ?? [];
    const out: string[] = [];
    for (const i of typeof onDevice === 'number' ? [onDevice] : onDevice) {
      const e = this.#entry(i);
      if (e !== undefined && e.root === rootPath && e.id !== entry.id) out.push(e.mountPoint);
    }
    return out;
  }

  /**
   * Whether some entry's mount point equals `path` escaped the way the kernel escapes it (so a
   * path with spaces matches). Like kubelet's /proc/mounts check, a mount point carrying the
   * kernel's "\040(deleted)" suffix also matches. For display; kubelet's GetMountRefs does not use it.
   */
  isMountPoint(path: string): boolean {
    const escaped = escapeMountPath(cleanPath(path));
    const index = this.#mountPoints;
    return index.has(escaped) || index.has(escaped + DELETED_SUFFIX);
  }

  /** Mount points (decoded for display) of the entries at or below `path`, one per entry, in file order. */
  mountsUnder(path: string): string[] {
    const escaped = escapeMountPath(cleanPath(path));
    const prefix = escaped.endsWith('/') ? escaped : `${escaped}/`;
    const viaParent = this.#sortedMountPoints === undefined ? this.#underViaParent(escaped, prefix) : undefined;
    if (viaParent !== undefined) return viaParent.map((i) => unescapeMountPath(this.#mountPointOf(i)));
    const sorted = this.#sorted;
    // Binary search for the first key >= escaped; every match lies in one run after it.
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((sorted[mid] ?? '') < escaped) lo = mid + 1;
      else hi = mid;
    }
    const indices: number[] = [];
    for (let i = lo; i < sorted.length; i++) {
      const key = sorted[i] ?? '';
      const nul = key.lastIndexOf('\u0000');
      const mp = key.slice(0, nul);
      if (mp === escaped || mp.startsWith(prefix)) indices.push(Number(key.slice(nul + 1)));
      else if (mp > prefix) break;
    }
    return indices.sort((a, b) => a - b).map((i) => unescapeMountPath(this.#mountPointOf(i)));
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
export async function getMountRefs(fs: FileSystem, snapshot: MountTable, path: string): Promise<string[]> {
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

/** GetReliableMountRefs polls every 10 ms ... */
export const RELIABLE_MOUNT_REFS_INTERVAL_MS = 10;
/** ... for up to one minute. */
export const RELIABLE_MOUNT_REFS_TIMEOUT_MS = 60_000;

/**
 * kubelet GetReliableMountRefs: GetMountRefs, retried every 10 ms while reading the table fails
 * with {@link InconsistentReadError}; after 60 s of the Clock port's time (never a timer of its
 * own) the last such error is rethrown.
 * Any other error is rethrown at once. Each attempt does what GetMountRefs does, in its order:
 * stat, realpath, then `load()` (read + parse a fresh snapshot) and search.
 */
export async function getReliableMountRefs(
  fs: FileSystem,
  load: () => Promise<MountTable>,
  clock: Clock,
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
