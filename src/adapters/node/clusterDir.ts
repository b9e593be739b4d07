/**
 * The ClusterView port over a directory, for `nodevol agent --cluster-dir DIR --node-name NAME`:
 *
 *   DIR/manifests/*.yaml|*.yml   Pod, PersistentVolumeClaim, PersistentVolume and CSIDriver
 *                                objects in standard Kubernetes YAML, several per file ("---").
 *   DIR/node-status.json         {"volumesAttached": [{"name", "devicePath"}], "volumesInUse": [...]}
 *   DIR/.nodevol-last-good/      written by nodevol: a copy of the last good bytes of each
 *                                manifest file (see "Partial views" below).
 *
 * Each call lists the manifests directory and stats every file; a file is read and parsed
 * (clusterManifests.ts) only when its identity (device, inode, size, mtime, ctime) changed since
 * the last read, so an unchanged cluster dir costs one readdir and one stat per file per pass.
 * node-status.json is cached the same way. Files are merged in name order; when two objects of
 * one kind share a name (or two pods a UID) the first wins and the other is reported.
 *
 * Partial views never delete. A file that cannot be read or parsed cleanly, or that is not read
 * because a limit was hit, keeps its LAST GOOD contents: the objects of its latest clean parse.
 * Those are persisted (atomically and durably) in DIR/.nodevol-last-good/<file name>, so a
 * restart keeps them too. A file is a deletion only when the listing of the manifests directory
 * succeeded (readdir is all or nothing) and no longer names it; its last good copy is then
 * forgotten, in memory and on disk, so a later broken file of the same name never resurrects
 * the deleted pod, and the store never holds more than one copy per listed file (bounded by
 * maxFiles x maxFileBytes). When the store does not exist yet (first start, or deleted), nothing
 * tells which unreadable file held a running pod: listPods then rejects until every file reads
 * cleanly once (an unreachable API server: the engine unmounts nothing).
 *
 * Problems are reported through {@link ClusterDirView.problems} (the latest pass) and, once per
 * new problem, the Logger; the message names the file, the 0-based index of the YAML document,
 * its line and the field path (e.g. `spec.volumes[0].name`). The manifests directory itself
 * being unreadable is NOT skipped: every call rejects, as with an unreachable API server.
 *
 * node-status.json must be a regular file in DIR: a symlink is refused (reads and writes stay
 * inside the cluster dir), as is a FIFO or device (the FileSystem port refuses non-regular
 * files). A missing, unreadable or invalid file makes every call reject. setVolumesInUse
 * rewrites only volumesInUse, keeping every other field (read-modify-write), atomically
 * (writeFileAtomic: `node-status.json.<pid>.tmp` in DIR, fsync, rename, fsync of DIR). Writes from one view are serialised; a concurrent
 * writer in another process can still lose an update (there is no file lock).
 */
import * as posix from 'node:path/posix';
import { resolve as resolvePath } from 'node:path';

import type {
  AttachedVolume,
  CSIDriverInfo,
  NodeStatus,
  PersistentVolumeClaim,
  Pod,
  SecretData,
  ServiceAccountTokenRequest,
  TokenRequestStatus,
  VolumeAttachmentInfo,
} from '../../api/core.js';
import { getAttachmentName } from '../../layout/names.js';
import type { ClusterView } from '../../ports/cluster.js';
import { mapConcurrently } from '../../ports/concurrency.js';
import { errorCode, errorMessage, type FileSystem } from '../../ports/fs.js';
import { discardLogger, type Logger } from '../../ports/logger.js';
import type { PersistentVolume } from '../../api/core.js';
import { parseManifestFile, type ManifestProblem, type ParsedFile } from './clusterManifests.js';
import { ClusterDirWatcher } from './clusterDirWatcher.js';
import { identityOf, NodeStatusFile } from './clusterNodeStatus.js';
import { isManifestName, LastGoodStore, READ_CONCURRENCY } from './clusterLastGood.js';
import { SnapshotBuilder, type Snapshot } from './clusterSnapshot.js';
import { NodeFileSystem } from './nodeFs.js';

export { derivedPodUID, formatFieldPath, type ManifestProblem } from './clusterManifests.js';

export const MANIFESTS_DIR_NAME = 'manifests';
export const NODE_STATUS_FILE_NAME = 'node-status.json';
/** Where the last good copy of each manifest file is kept, inside the cluster dir. */
export const LAST_GOOD_DIR_NAME = '.nodevol-last-good';

export interface ClusterDirLimits {
  /** Largest manifest (and node-status.json) read, in bytes; default 3 MiB. */
  readonly maxFileBytes?: number;
  /** Most manifest files read per pass, in name order; default 10,000. */
  readonly maxFiles?: number;
  /** Most YAML documents read per pass over all files; default 50,000. */
  readonly maxDocuments?: number;
  /** Most alias expansions per document (YAML "billion laughs" guard); default 100. */
  readonly maxAliasCount?: number;
}

/**
 * Sized for a 1,000-pod node with a file per object (a pod, its PVC and PV: 3,000 files) with
 * room to spare; Kubernetes objects are at most ~1.5 MiB (etcd's request limit).
 */
export const DEFAULT_CLUSTER_DIR_LIMITS: Required<ClusterDirLimits> = {
  maxFileBytes: 3 * 1024 * 1024,
  maxFiles: 10_000,
  maxDocuments: 50_000,
  maxAliasCount: 100,
};

export interface ClusterDirOptions {
  /** The cluster directory (made absolute against the working directory). */
  readonly dir: string;
  /** This node's name: pods with spec.nodeName equal to it are bound here. */
  readonly nodeName: string;
  /** Default NodeFileSystem. */
  readonly fs?: FileSystem;
  readonly logger?: Logger;
  readonly limits?: ClusterDirLimits;
  /**
   * Watch manifests/, the cluster dir (node-status.json) and the target of each symlinked
   * manifest (inotify), and answer from the latest pass while nothing changed, with a full pass
   * (a stat of every manifest, node-status.json) at least every {@link FULL_PASS_INTERVAL_MS} as a
   * safety net. Off by default; the agent turns it on.
   */
  readonly watch?: boolean;
  /**
   * Monotonic milliseconds for the full-pass interval; default performance.now (never the wall
   * clock: stepped back by an hour, it would hold the safety-net pass off for that hour).
   */
  readonly now?: () => number;
}

/** With `watch`, the longest a pass is skipped for want of an event. */
export const FULL_PASS_INTERVAL_MS = 20_000;


/** The latest read of one manifest file. */
interface CachedRead {
  /** Identity of the file when it was read; undefined when the adapter has none (never reused). */
  readonly identity: string | undefined;
  /** What it parsed to, or why it could not be read. */
  readonly result: { readonly parsed: ParsedFile } | { readonly readError: string };
  /** The bytes of a clean parse not yet remembered as last good (it was over a limit). */
  unsaved?: Uint8Array | undefined;
}


/** The driver and handle of a CSI unique volume name (kubernetes.io/csi/<driver>^<handle>). */
function csiVolumeSourceOf(uniqueName: string): { driver: string; volumeHandle: string } | undefined {
  const m = /^kubernetes\.io\/csi\/([^^]+)\^(.+)$/s.exec(uniqueName);
  return m === null ? undefined : { driver: m[1] ?? '', volumeHandle: m[2] ?? '' };
}

function sameList<T>(a: readonly T[], b: readonly T[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function byName(a: string, c: string): number {
  return a < c ? -1 : a > c ? 1 : 0;
}

export class ClusterDirView implements ClusterView {
  readonly dir: string;
  readonly nodeName: string;
  readonly #fs: FileSystem;
  readonly #logger: Logger;
  readonly #limits: Required<ClusterDirLimits>;
  #problems: readonly ManifestProblem[] = [];
  /** Messages of the problems already logged (those of the latest pass). */
  #logged = new Set<string>();
  /** The manifests as of the latest listPods (undefined before the first). */
  #latest: Snapshot | undefined;
  /** Bumped each time listPods takes a snapshot other than #latest. */
  #version = 0;
  /** The latest read of each listed manifest file, by file name. */
  readonly #reads = new Map<string, CachedRead>();
  /** The last good contents of each listed manifest file (clusterLastGood.ts). */
  readonly #store: LastGoodStore;
  /** The watches of manifests/, the cluster dir and symlinked manifests (clusterDirWatcher.ts). */
  readonly #watches: ClusterDirWatcher;
  /** node-status.json (clusterNodeStatus.ts). */
  readonly #status: NodeStatusFile;
  readonly #now: () => number;
  /** The names and reads of the latest full pass, when it found no problem: an identical pass keeps its snapshot. */
  #lastPass: { readonly names: readonly string[]; readonly reads: readonly (CachedRead | undefined)[]; readonly snap: Snapshot } | undefined;
  /** The pods bound to this node in #latest. */
  #boundPods: { readonly snap: Snapshot; readonly pods: readonly Pod[] } | undefined;
  #lastFullPassMs = Number.NEGATIVE_INFINITY;
  /** The latest pass completed (did not reject): its snapshot may be reused. */
  #reusable = false;
  /** The pass in flight, if any: passes run one at a time. */
  #passing: Promise<Snapshot> | undefined;
  /** The snapshot of the latest pass that completed (what #latest becomes once its caller takes it). */
  #passSnap: Snapshot | undefined;

  constructor(options: ClusterDirOptions) {
    if (options.nodeName === '') throw new Error('cluster dir: the node name must not be empty');
    this.dir = resolvePath(options.dir);
    this.nodeName = options.nodeName;
    this.#fs = options.fs ?? new NodeFileSystem();
    this.#logger = options.logger ?? discardLogger;
    this.#limits = { ...DEFAULT_CLUSTER_DIR_LIMITS, ...options.limits };
    this.#now = options.now ?? (() => performance.now());
    this.#watches = new ClusterDirWatcher({ dir: this.dir, manifestsDir: this.manifestsDir, manifestsDirName: MANIFESTS_DIR_NAME, logger: this.#logger, enabled: options.watch === true });
    this.#status = new NodeStatusFile({
      dir: this.dir,
      name: NODE_STATUS_FILE_NAME,
      fs: this.#fs,
      watcher: this.#watches,
      maxFileBytes: this.#limits.maxFileBytes,
      checkIntervalMs: FULL_PASS_INTERVAL_MS,
      now: this.#now,
    });
    this.#store = new LastGoodStore({
      fs: this.#fs,
      logger: this.#logger,
      clusterDir: this.dir,
      manifestsDir: this.manifestsDir,
      storeDir: this.lastGoodDir,
      maxFileBytes: this.#limits.maxFileBytes,
      maxAliasCount: this.#limits.maxAliasCount,
    });
  }

  /** Stops watching (a no-op without `watch`). */
  close(): void {
    this.#watches.close();
  }

  /** Calls `listener` on every event of the watches (`watch` only): a source may have changed. */
  onChange(listener: () => void): void {
    this.#watches.onChange(listener);
  }

  /**
   * Whether every change is signalled through onChange right now: manifests/, the cluster dir and
   * every symlinked manifest's target are watched. False before the first pass starts them.
   */
  signalsEveryChange(): boolean {
    return this.#watches.signalsEveryChange();
  }

  get manifestsDir(): string {
    return posix.join(this.dir, MANIFESTS_DIR_NAME);
  }

  get nodeStatusFile(): string {
    return this.#status.file;
  }

  get lastGoodDir(): string {
    return posix.join(this.dir, LAST_GOOD_DIR_NAME);
  }

  /** The problems found by the latest read of the manifests (empty before the first). */
  problems(): readonly ManifestProblem[] {
    return this.#problems;
  }

  /**
   * The pods bound to this node, from the manifests as they are now (unchanged files from the
   * cache). The cluster dir stands for the API server as a whole: while node-status.json cannot
   * be read, this rejects too, so that an unreachable API server never looks like a node whose
   * pods are all gone.
   */
  async listPods(): Promise<readonly Pod[]> {
    await this.#status.read();
    const snap = await this.#read();
    if (snap !== this.#latest) this.#version++;
    this.#latest = snap;
    if (this.#boundPods?.snap !== snap) this.#boundPods = { snap, pods: snap.pods.filter((p) => p.nodeName === this.nodeName) };
    return this.#boundPods.pods;
  }

  // The getters below answer from the snapshot of the latest listPods (an informer cache): the
  // populator lists pods and then resolves their volumes against that same view.

  /** Changes whenever listPods took a new snapshot (the getters answer from the latest). */
  objectsVersion(): number {
    return this.#version;
  }

  async getPersistentVolumeClaim(namespace: string, name: string): Promise<PersistentVolumeClaim | undefined> {
    return (await this.#snapshot()).pvcs.get(`${namespace}/${name}`);
  }

  async getPersistentVolume(name: string): Promise<PersistentVolume | undefined> {
    return (await this.#snapshot()).pvs.get(name);
  }

  async getCSIDriver(name: string): Promise<CSIDriverInfo | undefined> {
    return (await this.#snapshot()).drivers.get(name);
  }

  /**
   * A VolumeAttachment manifest of that name; without one, the attachment the attach/detach
   * controller would have made for a volume node-status.json lists in volumesAttached (attached,
   * no attachmentMetadata): the cluster dir plays that controller through volumesAttached.
   */
  async getVolumeAttachment(name: string): Promise<VolumeAttachmentInfo | undefined> {
    const va = (await this.#snapshot()).volumeAttachments.get(name);
    if (va !== undefined) return va;
    const { status } = await this.#status.read();
    for (const v of status.volumesAttached) {
      const source = csiVolumeSourceOf(v.name);
      if (source !== undefined && getAttachmentName(source.volumeHandle, source.driver, this.nodeName) === name) return { name, attached: true, attachmentMetadata: {} };
    }
    return undefined;
  }

  /** A Secret manifest's data (decoded); never logged. */
  async getSecret(namespace: string, name: string): Promise<SecretData | undefined> {
    return (await this.#snapshot()).secrets.get(`${namespace}/${name}`);
  }

  async #snapshot(): Promise<Snapshot> {
    if (this.#latest !== undefined) return this.#latest;
    await this.#status.read();
    this.#latest = await this.#read();
    this.#version++;
    return this.#latest;
  }

  async getNodeStatus(): Promise<NodeStatus> {
    const { status } = await this.#status.read();
    return {
      volumesAttached: status.volumesAttached.map((v): AttachedVolume => ({ name: v.name, devicePath: v.devicePath })),
      volumesInUse: [...status.volumesInUse],
    };
  }

  /**
   * A cluster dir is no API server: it cannot issue service account tokens. SetUp of a volume whose
   * CSIDriver lists tokenRequests fails with this error (a transient failure, retried with
   * backoff), as kubelet's does when its TokenRequest fails.
   */
  requestServiceAccountToken(request: ServiceAccountTokenRequest): Promise<TokenRequestStatus> {
    const audience = request.audiences.length === 0 ? 'the API server\'s audiences' : `audience ${JSON.stringify(request.audiences[0])}`;
    return Promise.reject(
      new Error(
        `cluster dir: cannot issue a token for service account ${request.namespace}/${request.serviceAccountName} (${audience}) for pod ${request.namespace}/${request.boundPod.name}: ` +
          'a cluster dir has no API server to issue service account tokens (TokenRequest); drivers whose CSIDriver lists tokenRequests need one',
      ),
    );
  }

  /** Replaces volumesInUse in node-status.json, keeping every other field; atomic. */
  setVolumesInUse(names: readonly string[]): Promise<void> {
    return this.#status.setVolumesInUse(names);
  }

  // ---------------------------------------------------------------- manifests

  async #read(): Promise<Snapshot> {
    // One pass at a time (the populator and the orphaned pod dir cleanup both list pods): a
    // caller arriving during a pass waits for it and then reads as any caller does, so it gets
    // that pass's snapshot when no change was signalled since it began, else a pass of its own.
    // Two passes at once would read and parse every changed file twice and race to save the
    // same last good copies.
    while (this.#passing !== undefined) await this.#passing.catch(() => undefined);
    this.#watches.startWatchingManifests();
    const now = this.#now();
    const changed = this.#watches.takeManifestsChange();
    if (this.#watches.watchingManifests && !changed && this.#reusable && this.#passSnap !== undefined && now - this.#lastFullPassMs < FULL_PASS_INTERVAL_MS) {
      return this.#passSnap;
    }
    this.#reusable = false;
    this.#lastFullPassMs = now;
    const pass = this.#fullPass();
    this.#passing = pass;
    try {
      const snap = await pass;
      this.#passSnap = snap;
      this.#reusable = true;
      return snap;
    } finally {
      this.#passing = undefined;
    }
  }

  async #fullPass(): Promise<Snapshot> {
    const dir = this.manifestsDir;
    let names: string[];
    try {
      const entries = (await this.#fs.readdir(dir)).filter((e) => (e.type === 'file' || e.type === 'symlink') && isManifestName(e.name));
      names = entries.map((e) => e.name).sort(byName);
      this.#watches.watchLinks(entries.filter((e) => e.type === 'symlink').map((e) => e.name));
    } catch (err) {
      throw new Error(`cluster dir: cannot list the manifests in ${dir}: ${errorMessage(err)}`, { cause: err });
    }
    if (!this.#store.loaded) await this.#store.load();
    // The listing is complete (readdir is all or nothing): what it no longer names is deleted.
    const listed = new Set(names);
    for (const name of [...this.#reads.keys()]) if (!listed.has(name)) this.#reads.delete(name);
    for (const name of this.#store.names()) if (!listed.has(name)) await this.#store.forget(name);

    const b = new SnapshotBuilder();
    /** Files read cleanly whose bytes are not yet the last good copy. */
    const toRemember: [string, CachedRead][] = [];
    /** Files neither read cleanly nor covered by a last good copy. */
    const uncovered: string[] = [];
    const { maxFiles, maxDocuments } = this.#limits;
    if (names.length > maxFiles) {
      b.problems.push({
        file: dir,
        message: `${dir}: ${names.length} manifest files, more than the limit of ${maxFiles}; files from ${names[maxFiles] ?? ''} on (in name order) are not read and keep their last good contents`,
      });
    }
    // Stat (and read what changed) with bounded concurrency; merge in name order below.
    const reads = await mapConcurrently(names.slice(0, maxFiles), READ_CONCURRENCY, (name) => this.#readManifest(name, posix.join(dir, name)));
    // Nothing changed since a pass without problems (same files, each read from the cache): the
    // same snapshot, so objectsVersion stays and the populator has nothing to do.
    const last = this.#lastPass;
    this.#lastPass = undefined;
    if (last !== undefined && last.snap === this.#passSnap && sameList(last.names, names) && sameList(last.reads, reads) && reads.every((r) => r?.unsaved === undefined)) {
      this.#lastPass = last;
      return last.snap;
    }
    for (const [i, name] of names.entries()) {
      const file = posix.join(dir, name);
      if (i >= maxFiles) {
        await this.#useLastGood(b, name, file, `not read: the limit of ${maxFiles} manifest files was reached`, [], uncovered);
        continue;
      }
      const read = reads[i];
      if (read === undefined) continue; // removed since the listing: a deletion
      if ('readError' in read.result) {
        await this.#useLastGood(b, name, file, read.result.readError, [], uncovered);
        continue;
      }
      const parsed = read.result.parsed;
      const clean = parsed.problems.length === 0;
      const candidate = clean ? parsed : (await this.#store.of(name))?.parsed;
      if (candidate !== undefined && b.documents + candidate.documents > maxDocuments) {
        await this.#useLastGood(b, name, file, `not read: the limit of ${maxDocuments} YAML documents was reached`, [], uncovered, true);
        continue;
      }
      if (clean) {
        b.add(file, parsed);
        if (read.unsaved !== undefined) toRemember.push([name, read]);
      } else await this.#useLastGood(b, name, file, 'it has problems', parsed.problems, uncovered);
    }
    // The new clean files become last good, READ_CONCURRENCY at a time: one by one, each a
    // durable write (two fsyncs), 1,000 new manifests held the snapshot back ~0.6 s.
    await mapConcurrently(toRemember, READ_CONCURRENCY, async ([name, read]) => {
      if (read.unsaved === undefined || !('parsed' in read.result)) return;
      await this.#store.remember(name, read.result.parsed, read.unsaved);
      read.unsaved = undefined;
    });
    const snap = b.build();
    this.#report(snap.problems);
    if (uncovered.length > 0 && !this.#store.trusted) {
      throw new Error(
        `cluster dir: the view is incomplete and there is no last good copy to stand in (${this.lastGoodDir} did not exist at start): ` +
          `${uncovered.length} manifest file(s) could not be read cleanly, first ${uncovered[0] ?? ''}; nothing is mounted or unmounted until every file reads cleanly once`,
      );
    }
    if (!this.#store.trusted) await this.#store.create();
    if (snap.problems.length === 0 && uncovered.length === 0) this.#lastPass = { names, reads, snap };
    return snap;
  }

  /**
   * Adds the last good contents of a file that was not read cleanly, with a problem saying so;
   * without any, the file is skipped (and listed in `uncovered`).
   */
  async #useLastGood(b: SnapshotBuilder, name: string, file: string, why: string, problems: readonly ManifestProblem[], uncovered: string[], overBudget = false): Promise<void> {
    const lastGood = await this.#store.of(name);
    b.problems.push(...problems);
    if (lastGood !== undefined && !overBudget) {
      b.problems.push({ file, message: `${file}: ${why}; using its last good contents until it is fixed` });
      b.add(file, lastGood.parsed);
      return;
    }
    if (lastGood !== undefined) {
      // Over the document budget: its last good contents still count, or its pods would vanish.
      b.problems.push({ file, message: `${file}: ${why}; using its last good contents` });
      b.add(file, lastGood.parsed);
      return;
    }
    uncovered.push(file);
    if (problems.length === 0) b.problems.push({ file, message: `${file}: ${why}; file skipped` });
    else if (problems.some((p) => p.document !== undefined)) {
      // Objects with problems were skipped; the rest of the file is used (it never was good).
      const parsed = this.#reads.get(name)?.result;
      if (parsed !== undefined && 'parsed' in parsed) b.add(file, parsed.parsed);
    }
  }

  /** The file's parse, from the cache when its identity did not change; undefined when it is gone. */
  async #readManifest(name: string, file: string): Promise<CachedRead | undefined> {
    let identity: string | undefined;
    try {
      identity = identityOf(await this.#fs.stat(file));
    } catch (err) {
      if (errorCode(err) === 'ENOENT' && !(await this.#exists(file))) {
        this.#reads.delete(name);
        await this.#store.forget(name);
        return undefined;
      }
      identity = undefined; // a dangling or looping symlink, EACCES...: read below reports it
    }
    const cached = this.#reads.get(name);
    if (cached !== undefined && identity !== undefined && cached.identity === identity) return cached;
    let bytes: Uint8Array;
    try {
      bytes = await this.#fs.readFile(file, this.#limits.maxFileBytes);
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ENOENT' && !(await this.#exists(file))) {
        this.#reads.delete(name);
        await this.#store.forget(name);
        return undefined;
      }
      const readError = code === 'EFBIG' ? `refused: larger than the limit of ${this.#limits.maxFileBytes} bytes` : `cannot read: ${errorMessage(err)}`;
      const read: CachedRead = { identity, result: { readError } };
      this.#reads.set(name, read);
      return read;
    }
    const parsed = parseManifestFile(file, bytes, this.#limits.maxAliasCount);
    const read: CachedRead = { identity, result: { parsed }, ...(parsed.problems.length === 0 ? { unsaved: bytes } : {}) };
    this.#reads.set(name, read);
    return read;
  }

  /** Whether the directory entry itself is there (a dangling symlink is; a removed file is not). */
  async #exists(file: string): Promise<boolean> {
    try {
      await this.#fs.lstat(file);
      return true;
    } catch (err) {
      return errorCode(err) !== 'ENOENT';
    }
  }

  #report(problems: readonly ManifestProblem[]): void {
    this.#problems = problems;
    const current = new Set(problems.map((p) => p.message));
    for (const p of problems) {
      if (this.#logged.has(p.message)) continue;
      this.#logger.error(new Error(p.message), 'Skipping a cluster manifest', {
        file: p.file,
        ...(p.document !== undefined ? { document: p.document } : {}),
        ...(p.line !== undefined ? { line: p.line } : {}),
        ...(p.field !== undefined ? { field: p.field } : {}),
      });
    }
    for (const m of this.#logged) if (!current.has(m)) this.#logger.v(2).info('Cluster manifest problem resolved', { problem: m });
    this.#logged = current;
  }
}
