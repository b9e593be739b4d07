/**
 * nodevol's mock CSI driver: a real csi.v1 server on a unix socket, in the spirit of
 * csi-driver-host-path, for node e2e tests. It shares the in-memory fake's semantics
 * (src/adapters/memory/fakeCsiDriver.ts): the spec's argument checks in the same order, idempotent
 * calls, NodeUnstageVolume refused with FAILED_PRECONDITION while the volume is published, block
 * volumes bound as files; and it really mounts, through the Mounter port (bind mounts with
 * mount(8) for the CLI, the MemoryMounter in unit tests).
 *
 * Storage: CreateVolume makes `<state-dir>/volumes/<id>/` (mount access) or a sparse file
 * `<state-dir>/volumes/<id>.img` of the capacity (block access). NodeStageVolume bind-mounts the
 * directory on the staging path, or the file on `<staging>/dev` (a file it creates);
 * NodePublishVolume creates the target (a directory, or a file for block) and bind-mounts the
 * staged path on it, read-only when asked. "Is it mounted" asks the kernel about that one path
 * (mountPoint.ts: its mnt_id against its parent's), never the whole mount table, so a call costs
 * the same with 10 or 10,000 volumes on the node.
 * An inline ephemeral volume (NodePublishVolume with volume context
 * csi.storage.k8s.io/ephemeral=true, no staging path) is created by its first publish under the
 * id kubelet sends, its backing directory bind-mounted on the target, and deleted by its last
 * unpublish, as in csi-driver-host-path.
 *
 * State (src/mockdriver/state.ts: one durable record file per volume, written before the call
 * answers) survives restarts; mounts do not survive a reboot, and the
 * driver copes: a NodeStage/NodePublish whose record is there but whose mount is not mounts
 * again; a NodeUnstage/NodeUnpublish whose mount is gone just clears the record (and removes the
 * target). A volume still recorded as published after a reboot keeps NodeUnstageVolume refused,
 * as hostpath does, until NodeUnpublishVolume is called for its targets.
 *
 * Decisions (argument checks, idempotency, strict/lenient NodeUnstageVolume, per-volume ABORTED)
 * come from the shared CSI node state machine (src/csi/nodeStateMachine.ts), the same one the
 * in-process fake uses; this file performs the mounts, the storage and the persistence.
 *
 * Concurrency: one call at a time per volume id. A call for a volume that has a call in flight
 * (including one a delay or hang fault holds) answers ABORTED at once, as drivers built on
 * csi-lib-utils' VolumeLocks do ("an operation with the given volume ID … already exists"); it
 * consumes no fault rule and is journaled. Calls for other volumes proceed concurrently (their
 * mounts, checks and record writes are independent).
 *
 * Faults (faults.ts) apply when a call arrives, after the ABORTED check: exit (the process exits
 * with {@link EXIT_FAULT_CODE}), hang (held until the driver stops, then UNAVAILABLE), delay,
 * then code. A delayed call still does its work after the delay even if its client gave up.
 */
import { existsSync, readFileSync, promises as fsp } from 'node:fs';
import * as posix from 'node:path/posix';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';

import { errorCode, errorMessage, FsError, pathExists, type FileSystem } from '../ports/fs.js';
import type { Clock } from '../ports/clock.js';
import { discardLogger, type Logger } from '../ports/logger.js';
import { NodeFileSystem } from '../adapters/node/nodeFs.js';
import { NodeMounter } from '../adapters/node/nodeMounter.js';
import { escapeMountPath } from '../mount/mountInfo.js';
import type { Mounter } from '../ports/mounter.js';
import { unixSocketPath } from '../adapters/grpc/endpoint.js';
import { CsiStatusError, startCsiServer, type CsiServer, type ControllerHandlers, type IdentityHandlers, type NodeHandlers } from '../adapters/grpc/server.js';
import type * as wire from '../adapters/grpc/messages.js';
import type { MessageInit } from '../adapters/grpc/messages.js';
import { GrpcStatus, grpcStatusName } from '../ports/csi.js';
import { checkCoPath, checkVolumeId, normalizeAllowedRoots } from './confine.js';
import {
  CsiNodeState,
  VolumeLocks,
  decidePublish,
  decideStage,
  decideUnpublish,
  decideUnstage,
  type CsiDecision,
  type CsiNodeMode,
  type CsiRefusal,
  type NodeRules,
  type NodeVolumeView,
} from '../csi/nodeStateMachine.js';
import { describeCsiFault, type CsiFault } from '../csi/faults.js';
import { MockFaultBook, type MockRpcMethod } from './faults.js';
import { mockVolumeId } from './volumeId.js';
import { MockJournal, redactSecrets, type JournalError, type JournalLine } from './journal.js';
import { isMountPointByMountId, MountIdUnavailableError } from './mountPoint.js';
import { MockStateStore, type MockVolumeKind, type MockVolumeRecord } from './state.js';

/** What NodeGetCapabilities reports. */
export const MOCK_NODE_CAPABILITIES = ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION', 'EXPAND_VOLUME'] as const satisfies readonly wire.NodeCapabilityName[];
/** What ControllerGetCapabilities reports. */
export const MOCK_CONTROLLER_CAPABILITIES = [
  'CREATE_DELETE_VOLUME',
  'PUBLISH_UNPUBLISH_VOLUME',
  'LIST_VOLUMES',
  'LIST_VOLUMES_PUBLISHED_NODES',
] as const satisfies readonly wire.ControllerCapabilityName[];

/** The exit code of a process an exit fault ends. */
export const EXIT_FAULT_CODE = 3;
/** Capacity of a volume created without a capacity range: 1 MiB. */
export const DEFAULT_CAPACITY_BYTES = 1024 * 1024;
/** The largest capacity the mock provisions or expands to: 1 TiB (its storage is a sparse file or a directory). */
export const MAX_CAPACITY_BYTES = 2 ** 40;
/** How many directory entries NodeGetVolumeStats looks at to count used bytes. */
const MAX_USAGE_ENTRIES = 10_000;
/** How many times an unmount that finds its target busy is tried, and the backoff step between tries. */
const BUSY_UNMOUNT_ATTEMPTS = 5;
const BUSY_UNMOUNT_BACKOFF_MS = 50;
/** How many stacked mounts an unmount loop takes off one path at most. */
const MAX_STACKED_UNMOUNTS = 8;
/** The volume context key kubelet sets on the NodePublishVolume of an inline ephemeral volume. */
export const EPHEMERAL_CONTEXT_KEY = 'csi.storage.k8s.io/ephemeral';

export interface MockDriverOptions {
  /** unix:///abs/path.sock; its directory is created when missing. */
  readonly endpoint: string;
  /** NodeGetInfo's node_id. */
  readonly nodeId: string;
  /** GetPluginInfo's name. */
  readonly driverName: string;
  /** Absolute directory for the volume records (`state/`) and the volumes' backing storage; created when missing. */
  readonly stateDir: string;
  /** YAML/JSON fault rules, re-read when the file changes (always a real file). */
  readonly faultsFile?: string;
  /** JSON-lines call journal (always a real file). */
  readonly journalFile?: string;
  /** Where the state and storage live and where staging/target paths are created. Default: node:fs. */
  readonly fs?: FileSystem;
  /** Default: a NodeMounter (mount/umount, /proc/self/mountinfo) over `fs`. */
  readonly mounter?: Mounter;
  readonly logger?: Logger;
  /**
   * What an exit fault calls. Default process.exit. When it returns (in-process tests), the call
   * that triggered it is never answered, as if the process were gone, until {@link MockDriver.stop}.
   */
  readonly exit?: (code: number) => void;
  /** GetPluginInfo's vendor_version. Default: nodevol's package version. */
  readonly vendorVersion?: string;
  /**
   * Creates the block backing file of `sizeBytes`. Default: a sparse file (truncate) with node:fs
   * when `fs` is not given; otherwise a zero-filled file written through `fs`.
   */
  readonly allocateFile?: (filePath: string, sizeBytes: number) => Promise<void>;
  /**
   * Grows an existing block backing file to `sizeBytes` (NodeExpandVolume), keeping its data.
   * Default: truncate with node:fs when `fs` is not given; otherwise zeros appended through `fs`.
   */
  readonly growFile?: (filePath: string, sizeBytes: number) => Promise<void>;
  /** How long stop() lets running calls finish. Default 5000 ms. */
  readonly shutdownGraceMs?: number;
  /**
   * Staging and target paths must lie strictly below one of these, with no symlink component
   * below it (confine.ts). Empty or absent: only "/" and system directories are refused.
   */
  readonly allowedRoots?: readonly string[];
  /** strict (default): NodeUnstageVolume refused while published, like csi-driver-host-path; lenient: accepted. */
  readonly mode?: CsiNodeMode;
  /**
   * NodeGetCapabilities also reports SINGLE_NODE_MULTI_WRITER, as csi-driver-host-path does: kubelet
   * then sends SINGLE_NODE_MULTI_WRITER (ReadWriteOnce) and SINGLE_NODE_SINGLE_WRITER
   * (ReadWriteOncePod) instead of SINGLE_NODE_WRITER. Default false.
   */
  readonly singleNodeMultiWriter?: boolean;
  /**
   * The clock delay and clientTimeoutMs faults sleep on and call durations are measured with.
   * Default: the real clock (performance.now, setTimeout). Tests inject a FakeClock.
   */
  readonly clock?: Clock;
  /** Called with every journal line as it is produced (with or without a journal file): tests wait on it. */
  readonly onJournalLine?: (line: JournalLine) => void;
}

export interface MockDriver {
  /** unix:///abs/path.sock, normalized. */
  readonly endpoint: string;
  readonly socketPath: string;
  /** `<state-dir>/state`: one `<volume-id>.json` record per volume (state.ts). */
  readonly stateDir: string;
  /** Copies of every volume's record, sorted by id. */
  volumes(): MockVolumeRecord[];
  volume(volumeId: string): MockVolumeRecord | undefined;
  /**
   * Fails every held call (hang, delay, exit) with UNAVAILABLE, closes the server (removing the
   * socket) and flushes the journal. Idempotent.
   */
  stop(): Promise<void>;
}

export { mockVolumeId } from './volumeId.js';

/** Backing storage of a volume: the directory (mount access) and the file (block access). */
export function mockBackingPaths(stateDir: string, volumeId: string): { readonly dir: string; readonly file: string } {
  const volumes = posix.join(stateDir, 'volumes');
  return { dir: posix.join(volumes, volumeId), file: posix.join(volumes, `${volumeId}.img`) };
}

/** Where NodeStageVolume binds a block volume's file: `<staging>/dev`. */
export function mockBlockDevicePath(stagingTargetPath: string): string {
  return posix.join(stagingTargetPath, 'dev');
}

/** The real clock: monotonic milliseconds, setTimeout sleeps. */
const monotonicClock: Clock = {
  nowMs: () => performance.now(),
  // Unref'd: a delay held past stop() must not keep the process alive.
  sleep: (ms) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()),
};

let cachedVersion: string | undefined;

/** nodevol's version from the package.json above this module ('0.0.0' when none is found). */
export function packageVersion(): string {
  if (cachedVersion !== undefined) return cachedVersion;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(dir, 'package.json');
    if (existsSync(candidate)) {
      try {
        const pkg = JSON.parse(readFileSync(candidate, 'utf8')) as { name?: unknown; version?: unknown };
        if (pkg.name === 'nodevol' && typeof pkg.version === 'string') {
          cachedVersion = pkg.version;
          return cachedVersion;
        }
      } catch {
        // not ours; keep walking up
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  cachedVersion = '0.0.0';
  return cachedVersion;
}

/** Starts the driver: loads the volume records (migrating a legacy state.json), serves on the endpoint. */
export async function startMockDriver(options: MockDriverOptions): Promise<MockDriver> {
  if (options.nodeId === '') throw new Error('the mock driver needs a node id');
  if (options.driverName === '') throw new Error('the mock driver needs a driver name');
  if (!posix.isAbsolute(options.stateDir)) throw new Error(`the state dir must be an absolute path, got ${JSON.stringify(options.stateDir)}`);
  const driver = new MockDriverImpl(options);
  await driver.start();
  return driver;
}

/**
 * What the controller side knows of a volume (its storage, its attachments). Where the node
 * staged and published it lives in the shared {@link CsiNodeState}.
 */
interface VolumeState {
  readonly id: string;
  readonly name: string;
  /** Grows with NodeExpandVolume. */
  capacity: number;
  readonly kind: MockVolumeKind;
  readonly attachedNodes: Set<string>;
  /** Created by an ephemeral NodePublishVolume; deleted by its last NodeUnpublishVolume. */
  readonly ephemeral: boolean;
}

function status(code: number, details: string): CsiStatusError {
  return new CsiStatusError(code, details);
}

function invalid(details: string): CsiStatusError {
  return status(GrpcStatus.INVALID_ARGUMENT, details);
}

function internal(details: string): CsiStatusError {
  return status(GrpcStatus.INTERNAL, details);
}

function toRecord(v: VolumeState, node: NodeVolumeView | undefined): MockVolumeRecord {
  const base = { id: v.id, name: v.name, capacity: v.capacity, kind: v.kind };
  const rest = {
    publishedAt: node === undefined ? [] : [...node.publishedAt].sort(),
    attachedNodes: [...v.attachedNodes].sort(),
    ...(v.ephemeral ? { ephemeral: true as const } : {}),
  };
  return node?.stagedAt === undefined ? { ...base, ...rest } : { ...base, stagedAt: node.stagedAt, ...rest };
}

function fromRecord(r: MockVolumeRecord): VolumeState {
  return { id: r.id, name: r.name, capacity: r.capacity, kind: r.kind, attachedNodes: new Set(r.attachedNodes), ephemeral: r.ephemeral === true };
}

/** The access type a request's capability asks for; INVALID_ARGUMENT when it names none. */
function accessKind(cap: wire.VolumeCapability | null, what = 'volume capability'): MockVolumeKind {
  if (cap === null || (cap.mount === undefined && cap.block === undefined)) throw invalid(`${what} missing in request`);
  return cap.block !== undefined ? 'block' : 'mount';
}

/** Throws a decision's refusal as a gRPC status; returns whether the call repeats a recorded one. */
function decided(d: CsiDecision): boolean {
  if (!d.ok) throw status(d.code, d.details);
  return d.repeat;
}

/** The access type a request's capability asks for; undefined when it names none. */
function accessKindOrUndefined(cap: wire.VolumeCapability | null): MockVolumeKind | undefined {
  if (cap === null || (cap.mount === undefined && cap.block === undefined)) return undefined;
  return cap.block !== undefined ? 'block' : 'mount';
}

function statusError(err: unknown): CsiStatusError {
  if (err instanceof CsiStatusError) return err;
  return internal(errorMessage(err));
}

async function sparseFile(filePath: string, sizeBytes: number): Promise<void> {
  const handle = await fsp.open(filePath, 'w', 0o600);
  try {
    await handle.truncate(sizeBytes);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

class MockDriverImpl implements MockDriver {
  readonly #options: MockDriverOptions;
  readonly #fs: FileSystem;
  readonly #mounter: Mounter;
  readonly #logger: Logger;
  readonly #exit: (code: number) => void;
  readonly #allocate: (filePath: string, sizeBytes: number) => Promise<void>;
  readonly #grow: (filePath: string, sizeBytes: number) => Promise<void>;
  readonly #store: MockStateStore;
  readonly #faults: MockFaultBook;
  readonly #journal: MockJournal;
  readonly #volumes = new Map<string, VolumeState>();
  /** Where each volume is staged and published: the shared CSI node state machine's record. */
  readonly #node = new CsiNodeState();
  readonly #allowedRoots: readonly string[];
  /** Volume ids with a call in flight. */
  readonly #busy = new VolumeLocks();
  readonly #rules: NodeRules;
  /** Fires at stop(): fails held calls. */
  readonly #stopping = new AbortController();
  readonly #clock: Clock;
  /** Mount-point checks by mnt_id of the path vs its parent, not by reading the mount table. */
  #targetedMountCheck: boolean;
  #server: CsiServer | undefined;
  #seq = 0;
  #stopped: Promise<void> | undefined;

  constructor(options: MockDriverOptions) {
    this.#options = options;
    this.#allowedRoots = normalizeAllowedRoots(options.allowedRoots ?? []);
    const fs = options.fs ?? new NodeFileSystem();
    this.#fs = fs;
    this.#logger = options.logger ?? discardLogger;
    this.#mounter = options.mounter ?? new NodeMounter({ fs, logger: this.#logger });
    // The real kernel and the real file system: ask about the one path (mountPoint.ts).
    this.#targetedMountCheck = options.mounter === undefined && options.fs === undefined;
    this.#exit = options.exit ?? ((code) => process.exit(code));
    this.#allocate =
      options.allocateFile ??
      (options.fs === undefined ? sparseFile : (filePath, size) => fs.writeFile(filePath, new Uint8Array(size), { mode: 0o600, fsync: true }));
    this.#grow =
      options.growFile ??
      (options.fs === undefined
        ? async (filePath, size) => {
            await fsp.truncate(filePath, size);
          }
        : async (filePath, size) => {
            const old = await fs.readFile(filePath, size);
            const grown = new Uint8Array(size);
            grown.set(old.subarray(0, Math.min(old.length, size)));
            await fs.writeFile(filePath, grown, { mode: 0o600, fsync: true });
          });
    this.#store = new MockStateStore(fs, options.stateDir);
    this.#rules = { mode: options.mode ?? 'strict', stageUnstage: true };
    this.#clock = options.clock ?? monotonicClock;
    this.#faults = new MockFaultBook(options.faultsFile, this.#logger, { fs: this.#fs, file: posix.join(options.stateDir, 'fault-counters.json') });
    this.#journal = new MockJournal(options.journalFile, this.#logger, options.onJournalLine);
  }

  get endpoint(): string {
    return this.#requireServer().endpoint;
  }

  get socketPath(): string {
    return this.#requireServer().socketPath;
  }

  get stateDir(): string {
    return this.#store.dir;
  }

  volumes(): MockVolumeRecord[] {
    return [...this.#volumes.values()].map((v) => toRecord(v, this.#node.view(v.id))).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  volume(volumeId: string): MockVolumeRecord | undefined {
    const v = this.#volumes.get(volumeId);
    return v === undefined ? undefined : toRecord(v, this.#node.view(volumeId));
  }

  async start(): Promise<void> {
    unixSocketPath(this.#options.endpoint);
    await this.#fs.mkdir(posix.join(this.#options.stateDir, 'volumes'), { recursive: true, mode: 0o755 });
    const records = await this.#store.load();
    for (const r of records) this.#volumes.set(r.id, fromRecord(r));
    this.#node.restore({
      volumes: records.filter((r) => r.stagedAt !== undefined || r.publishedAt.length > 0).map((r) => ({ volumeId: r.id, publishedAt: r.publishedAt, block: r.kind === 'block', ...(r.stagedAt === undefined ? {} : { stagedAt: r.stagedAt }) })),
    });
    await this.#faults.refresh();
    const identity: IdentityHandlers = {
      getPluginInfo: (req) => this.#dispatch('GetPluginInfo', req, '', () => this.#getPluginInfo()),
      getPluginCapabilities: (req) =>
        this.#dispatch('GetPluginCapabilities', req, '', () =>
          Promise.resolve({ capabilities: [{ service: { type: 'CONTROLLER_SERVICE' } }, { volumeExpansion: { type: 'ONLINE' } }] }),
        ),
      probe: (req) => this.#dispatch('Probe', req, '', () => Promise.resolve({ ready: { value: true } })),
    };
    const node: NodeHandlers = {
      nodeStageVolume: (req) => this.#dispatch('NodeStageVolume', req, req.volumeId, () => this.#stage(req)),
      nodeUnstageVolume: (req) => this.#dispatch('NodeUnstageVolume', req, req.volumeId, () => this.#unstage(req)),
      nodePublishVolume: (req) => this.#dispatch('NodePublishVolume', req, req.volumeId, () => this.#publish(req)),
      nodeUnpublishVolume: (req) => this.#dispatch('NodeUnpublishVolume', req, req.volumeId, () => this.#unpublish(req)),
      nodeGetCapabilities: (req) =>
        this.#dispatch('NodeGetCapabilities', req, '', () =>
          Promise.resolve({
            capabilities: [...MOCK_NODE_CAPABILITIES, ...(this.#options.singleNodeMultiWriter === true ? (['SINGLE_NODE_MULTI_WRITER'] as const) : [])].map((type) => ({ rpc: { type } })),
          }),
        ),
      // Stats read the volume without changing it: no volume lock (kubelet polls them while it stages and publishes).
      nodeGetVolumeStats: (req) => this.#dispatch('NodeGetVolumeStats', req, req.volumeId, () => this.#volumeStats(req), { lock: false }),
      nodeExpandVolume: (req) => this.#dispatch('NodeExpandVolume', req, req.volumeId, () => this.#nodeExpand(req)),
      nodeGetInfo: (req) => this.#dispatch('NodeGetInfo', req, '', () => Promise.resolve({ nodeId: this.#options.nodeId })),
    };
    const controller: ControllerHandlers = {
      createVolume: (req) => this.#dispatch('CreateVolume', req, req.name === '' ? '' : mockVolumeId(req.name), () => this.#createVolume(req)),
      deleteVolume: (req) => this.#dispatch('DeleteVolume', req, req.volumeId, () => this.#deleteVolume(req)),
      controllerPublishVolume: (req) => this.#dispatch('ControllerPublishVolume', req, req.volumeId, () => this.#controllerPublish(req)),
      controllerUnpublishVolume: (req) => this.#dispatch('ControllerUnpublishVolume', req, req.volumeId, () => this.#controllerUnpublish(req)),
      controllerGetCapabilities: (req) =>
        this.#dispatch('ControllerGetCapabilities', req, '', () =>
          Promise.resolve({ capabilities: MOCK_CONTROLLER_CAPABILITIES.map((type) => ({ rpc: { type } })) }),
        ),
      validateVolumeCapabilities: (req) =>
        this.#dispatch('ValidateVolumeCapabilities', req, req.volumeId, () => this.#validateVolumeCapabilities(req), { lock: false }),
      listVolumes: (req) => this.#dispatch('ListVolumes', req, '', () => this.#listVolumes(req)),
    };
    // The socket is always a real file, whatever `fs` is.
    await fsp.mkdir(posix.dirname(unixSocketPath(this.#options.endpoint)), { recursive: true, mode: 0o755 });
    const serverOptions = this.#options.shutdownGraceMs === undefined ? {} : { shutdownGraceMs: this.#options.shutdownGraceMs };
    this.#server = await startCsiServer(this.#options.endpoint, { identity, node, controller }, serverOptions);
    // Only the owner and its group may call the driver (connecting needs write permission).
    await fsp.chmod(this.#server.socketPath, 0o660);
    this.#logger.info('Mock CSI driver serving', {
      endpoint: this.#server.endpoint,
      driverName: this.#options.driverName,
      nodeId: this.#options.nodeId,
      stateDir: this.#options.stateDir,
      volumes: this.#volumes.size,
      faults: this.#options.faultsFile ?? '',
      journal: this.#options.journalFile ?? '',
    });
  }

  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopping.abort();
      await this.#server?.close();
      await this.#journal.flush();
      this.#logger.info('Mock CSI driver stopped', { endpoint: this.#server?.endpoint ?? this.#options.endpoint });
    })();
    return this.#stopped;
  }

  #requireServer(): CsiServer {
    if (this.#server === undefined) throw new Error('the mock driver is not started');
    return this.#server;
  }

  // ---------------------------------------------------------------- the call pipeline

  async #dispatch<T extends object>(
    method: MockRpcMethod,
    request: object,
    volumeId: string,
    effect: () => Promise<T>,
    options: { readonly lock?: boolean } = {},
  ): Promise<T> {
    const lockId = options.lock === false ? '' : volumeId;
    const seq = ++this.#seq;
    const started = this.#clock.nowMs();
    const log = this.#logger.v(4);
    if (log.enabled(4)) log.info('GRPC call', { seq, method, volumeId, request: redactSecrets(request) });

    const complete = async (response: T | null, error: CsiStatusError | null): Promise<void> => {
      const durationMs = Math.round((this.#clock.nowMs() - started) * 1000) / 1000;
      const journalError: JournalError | null =
        error === null ? null : { code: error.code, name: grpcStatusName(error.code), message: error.details };
      await this.#journal.write({
        time: new Date().toISOString(),
        seq,
        method,
        volumeId,
        request: redactSecrets(request),
        response,
        error: journalError,
        durationMs,
      });
      if (error === null) {
        this.#logger.v(3).info('GRPC response', { seq, method, volumeId, durationMs });
      } else if (error.code === GrpcStatus.INTERNAL || error.code === GrpcStatus.UNKNOWN) {
        this.#logger.error(error.details, 'GRPC error', { seq, method, volumeId, code: grpcStatusName(error.code), durationMs });
      } else {
        this.#logger.v(2).info('GRPC error', { seq, method, volumeId, code: grpcStatusName(error.code), err: error.details, durationMs });
      }
    };

    if (this.#stopping.signal.aborted) {
      const err = status(GrpcStatus.UNAVAILABLE, 'the mock driver is stopping');
      await complete(null, err);
      throw err;
    }
    const busy = this.#busy.acquire(lockId);
    if (busy !== undefined) {
      const err = status(busy.code, busy.details);
      await complete(null, err);
      throw err;
    }
    let rule: CsiFault | undefined;
    try {
      await this.#faults.refresh();
      rule = this.#faults.take(method, volumeId);
      // The rule's counter is on disk before the call goes on: a driver killed or exiting now
      // does not apply it again once it is back.
      if (rule !== undefined) await this.#faults.saved();
    } catch (err) {
      this.#busy.release(lockId);
      throw err;
    }
    if (rule !== undefined) this.#logger.info('Injecting a fault', { seq, method, volumeId, fault: describeCsiFault(rule) });
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.#busy.release(lockId);
    };
    const work = (async (): Promise<T> => {
      try {
        if (rule?.exit === true) {
          await this.#journal.write({ time: new Date().toISOString(), seq, method, volumeId, phase: 'exit', fault: 'exit' });
          this.#logger.warning('Exiting on an injected fault', { seq, method, volumeId, exitCode: EXIT_FAULT_CODE });
          this.#exit(EXIT_FAULT_CODE);
          // In-process, exit returns: the call stays unanswered, as if the process were gone.
          await this.#heldUntilStop();
        }
        let response: T;
        try {
          response = await this.#faulted(seq, method, volumeId, rule, effect);
        } catch (err) {
          const error = statusError(err);
          release();
          await complete(null, error);
          throw error;
        }
        // The work is done (and durable): the volume is free before the journal line says so.
        release();
        await complete(response, null);
        return response;
      } finally {
        release();
      }
    })();
    const clientTimeoutMs = rule?.clientTimeoutMs;
    if (clientTimeoutMs === undefined) return work;
    // The client gives up; the driver carries on with `work` (the volume stays busy until it is done).
    work.catch(() => undefined);
    await this.#sleep(clientTimeoutMs);
    await this.#journal.write({ time: new Date().toISOString(), seq, method, volumeId, phase: 'timedOut', fault: 'clientTimeout' });
    throw status(GrpcStatus.DEADLINE_EXCEEDED, `context deadline exceeded after ${clientTimeoutMs} ms (the driver carries on)`);
  }

  /** Applies hang, delay and code of a rule around the effect. */
  async #faulted<T>(seq: number, method: MockRpcMethod, volumeId: string, rule: CsiFault | undefined, effect: () => Promise<T>): Promise<T> {
    if (rule?.hang === true) {
      await this.#journal.write({ time: new Date().toISOString(), seq, method, volumeId, phase: 'held', fault: 'hang' });
      await this.#heldUntilStop();
    }
    if (rule?.delayMs !== undefined && rule.delayMs > 0) {
      // The sleep starts before the "held" line is produced, so whoever sees the line can move the clock.
      const sleeping = this.#sleep(rule.delayMs);
      sleeping.catch(() => undefined);
      await this.#journal.write({ time: new Date().toISOString(), seq, method, volumeId, phase: 'held', fault: 'delay' });
      await sleeping;
    }
    const code = rule?.code;
    if (code === undefined) return effect();
    const name = grpcStatusName(code);
    if (rule?.afterEffect !== true) throw status(code, `injected ${name}`);
    try {
      await effect();
    } catch (err) {
      throw status(code, `injected ${name} after the effect failed: ${errorMessage(err)}`);
    }
    throw status(code, `injected ${name} after the effect`);
  }

  /** Never resolves; rejects with UNAVAILABLE when the driver stops. */
  #heldUntilStop(): Promise<never> {
    return new Promise<never>((_resolve, reject) => {
      const fail = (): void => reject(status(GrpcStatus.UNAVAILABLE, 'the mock driver stopped while the call was held'));
      if (this.#stopping.signal.aborted) fail();
      else this.#stopping.signal.addEventListener('abort', fail, { once: true });
    });
  }

  /** Waits `ms` on the driver's clock; rejects with UNAVAILABLE when the driver stops first. */
  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const signal = this.#stopping.signal;
      const onAbort = (): void => reject(status(GrpcStatus.UNAVAILABLE, 'the mock driver stopped while the call was delayed'));
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
      void this.#clock.sleep(ms).then(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  /** Makes one volume's current record (or its absence) durable before the call answers. */
  async #persist(volumeId: string): Promise<void> {
    try {
      await this.#store.save(volumeId, () => {
        const v = this.#volumes.get(volumeId);
        return v === undefined ? undefined : toRecord(v, this.#node.view(volumeId));
      });
    } catch (err) {
      throw internal(`cannot save the state of volume ${volumeId} in ${this.#store.dir}: ${errorMessage(err)}`);
    }
  }

  // ---------------------------------------------------------------- Identity

  #getPluginInfo(): Promise<MessageInit<wire.GetPluginInfoResponse>> {
    return Promise.resolve({ name: this.#options.driverName, vendorVersion: this.#options.vendorVersion ?? packageVersion() });
  }

  // ---------------------------------------------------------------- Controller

  async #createVolume(req: wire.CreateVolumeRequest): Promise<MessageInit<wire.CreateVolumeResponse>> {
    if (req.name === '') throw invalid('volume name missing in request');
    if (req.volumeCapabilities.length === 0) throw invalid('volume capabilities missing in request');
    const kinds = new Set(req.volumeCapabilities.map((c) => accessKind(c, 'access type of a volume capability')));
    if (kinds.size > 1) throw invalid('volume capabilities ask for both block and mount access types');
    const kind: MockVolumeKind = kinds.has('block') ? 'block' : 'mount';
    if (req.volumeContentSource !== null) throw invalid('volume content sources (snapshots, clones) are not supported');
    const required = req.capacityRange?.requiredBytes ?? 0;
    const limit = req.capacityRange?.limitBytes ?? 0;
    if (required < 0 || limit < 0) throw invalid('capacity range must not be negative');
    if (limit > 0 && required > limit) throw status(GrpcStatus.OUT_OF_RANGE, `required bytes ${required} exceed limit bytes ${limit}`);
    const capacity = required > 0 ? required : limit > 0 ? Math.min(limit, DEFAULT_CAPACITY_BYTES) : DEFAULT_CAPACITY_BYTES;
    if (!Number.isSafeInteger(capacity) || capacity > MAX_CAPACITY_BYTES) {
      throw status(GrpcStatus.OUT_OF_RANGE, `capacity ${capacity} exceeds the mock's maximum ${MAX_CAPACITY_BYTES}`);
    }

    const id = mockVolumeId(req.name);
    const existing = this.#volumes.get(id);
    if (existing !== undefined) {
      if (existing.name !== req.name) throw internal(`volume id ${id} of ${req.name} collides with the volume named ${existing.name}`);
      if (existing.kind !== kind) throw status(GrpcStatus.ALREADY_EXISTS, `volume ${req.name} exists with ${existing.kind} access`);
      if (existing.capacity < required || (limit > 0 && existing.capacity > limit)) {
        throw status(GrpcStatus.ALREADY_EXISTS, `volume ${req.name} exists with capacity ${existing.capacity}, incompatible with the request`);
      }
      return { volume: { volumeId: id, capacityBytes: existing.capacity, volumeContext: {} } };
    }
    const backing = mockBackingPaths(this.#options.stateDir, id);
    try {
      if (kind === 'mount') {
        await this.#fs.mkdir(backing.dir, { recursive: true, mode: 0o777 });
      } else if (!(await this.#exists(backing.file))) {
        await this.#allocate(backing.file, capacity);
      }
    } catch (err) {
      throw internal(`cannot create the backing storage of volume ${id}: ${errorMessage(err)}`);
    }
    this.#volumes.set(id, { id, name: req.name, capacity, kind, attachedNodes: new Set(), ephemeral: false });
    await this.#persist(id);
    this.#logger.v(1).info('Created volume', { volumeId: id, name: req.name, kind, capacity });
    return { volume: { volumeId: id, capacityBytes: capacity, volumeContext: {} } };
  }

  async #deleteVolume(req: wire.DeleteVolumeRequest): Promise<MessageInit<wire.DeleteVolumeResponse>> {
    if (req.volumeId === '') throw invalid('volume ID missing in request');
    checkVolumeId(req.volumeId);
    const vol = this.#volumes.get(req.volumeId);
    if (vol === undefined) return {};
    const node = this.#node.view(vol.id);
    if (node !== undefined) {
      const where = [...(node.stagedAt === undefined ? [] : [`staged at ${node.stagedAt}`]), ...[...node.publishedAt].sort().map((t) => `published at ${t}`)];
      throw status(GrpcStatus.FAILED_PRECONDITION, `volume ${req.volumeId} is still ${where.join(', ')}`);
    }
    const backing = mockBackingPaths(this.#options.stateDir, vol.id);
    try {
      if (vol.kind === 'mount') await this.#removeTree(backing.dir);
      else await this.#removeFile(backing.file);
    } catch (err) {
      throw internal(`cannot remove the backing storage of volume ${vol.id}: ${errorMessage(err)}`);
    }
    this.#volumes.delete(vol.id);
    await this.#persist(vol.id);
    this.#logger.v(1).info('Deleted volume', { volumeId: vol.id, name: vol.name });
    return {};
  }

  async #controllerPublish(req: wire.ControllerPublishVolumeRequest): Promise<MessageInit<wire.ControllerPublishVolumeResponse>> {
    if (req.volumeId === '') throw invalid('volume ID missing in request');
    if (req.nodeId === '') throw invalid('node ID missing in request');
    accessKind(req.volumeCapability);
    const vol = this.#requireVolume(req.volumeId);
    // The mock serves one node: any other node id is one it does not know.
    if (req.nodeId !== this.#options.nodeId) throw status(GrpcStatus.NOT_FOUND, `node ${req.nodeId} not found (this driver serves ${this.#options.nodeId})`);
    if (!vol.attachedNodes.has(req.nodeId)) {
      vol.attachedNodes.add(req.nodeId);
      await this.#persist(vol.id);
    }
    return { publishContext: {} };
  }

  async #controllerUnpublish(req: wire.ControllerUnpublishVolumeRequest): Promise<MessageInit<wire.ControllerUnpublishVolumeResponse>> {
    if (req.volumeId === '') throw invalid('volume ID missing in request');
    // A volume that is gone is unpublished from every node: OK, as the spec recommends.
    const vol = this.#volumes.get(req.volumeId);
    if (vol === undefined) return {};
    const before = vol.attachedNodes.size;
    if (req.nodeId === '') vol.attachedNodes.clear();
    else vol.attachedNodes.delete(req.nodeId);
    if (vol.attachedNodes.size !== before) await this.#persist(vol.id);
    return {};
  }

  /**
   * ValidateVolumeCapabilities: confirmed (echoing what was asked) when every capability has the
   * volume's access type and a known access mode; otherwise no `confirmed` and a message.
   */
  #validateVolumeCapabilities(req: wire.ValidateVolumeCapabilitiesRequest): Promise<MessageInit<wire.ValidateVolumeCapabilitiesResponse>> {
    if (req.volumeId === '') throw invalid('volume ID missing in request');
    if (req.volumeCapabilities.length === 0) throw invalid('volume capabilities missing in request');
    checkVolumeId(req.volumeId);
    const kinds = req.volumeCapabilities.map((c) => accessKind(c, 'access type of a volume capability'));
    const vol = this.#requireVolume(req.volumeId);
    const wrongKind = kinds.find((k) => k !== vol.kind);
    if (wrongKind !== undefined) return Promise.resolve({ message: `volume ${vol.id} supports ${vol.kind} access, not ${wrongKind}` });
    const badMode = req.volumeCapabilities.find((c) => c.accessMode === null || c.accessMode.mode === 'UNKNOWN' || typeof c.accessMode.mode === 'number');
    if (badMode !== undefined) return Promise.resolve({ message: `access mode ${badMode.accessMode?.mode ?? 'missing'} is not supported` });
    return Promise.resolve({
      confirmed: { volumeContext: req.volumeContext, volumeCapabilities: req.volumeCapabilities, parameters: req.parameters },
    });
  }

  /** ListVolumes: pages over the volumes sorted by id; the token is the index of the next entry. */
  #listVolumes(req: wire.ListVolumesRequest): Promise<MessageInit<wire.ListVolumesResponse>> {
    if (req.maxEntries < 0) throw invalid(`max_entries must not be negative, got ${req.maxEntries}`);
    const ids = [...this.#volumes.keys()].sort();
    let start = 0;
    if (req.startingToken !== '') {
      start = /^(0|[1-9][0-9]{0,9})$/.test(req.startingToken) ? Number(req.startingToken) : -1;
      if (start < 0 || start > ids.length) throw status(GrpcStatus.ABORTED, `invalid starting_token ${JSON.stringify(req.startingToken)}`);
    }
    const end = req.maxEntries > 0 ? Math.min(ids.length, start + req.maxEntries) : ids.length;
    const entries = ids.slice(start, end).flatMap((id) => {
      const v = this.#volumes.get(id);
      if (v === undefined) return [];
      return [{ volume: { volumeId: v.id, capacityBytes: v.capacity, volumeContext: {} }, status: { publishedNodeIds: [...v.attachedNodes].sort() } }];
    });
    return Promise.resolve({ entries, nextToken: end < ids.length ? String(end) : '' });
  }

  // ---------------------------------------------------------------- Node

  async #stage(req: wire.NodeStageVolumeRequest): Promise<MessageInit<wire.NodeStageVolumeResponse>> {
    if (req.volumeId !== '') checkVolumeId(req.volumeId);
    const kind = accessKindOrUndefined(req.volumeCapability);
    decided(
      decideStage(this.#node.view(req.volumeId), { volumeId: req.volumeId, stagingTargetPath: req.stagingTargetPath, access: kind }, () =>
        this.#checkVolume(req.volumeId, kind),
      ),
    );
    await checkCoPath(this.#fs, req.stagingTargetPath, 'staging target path', this.#allowedRoots);
    const vol = this.#requireVolume(req.volumeId);
    const staging = req.stagingTargetPath;
    await this.#requireDirectory(staging, 'staging target path');
    const backing = mockBackingPaths(this.#options.stateDir, vol.id);
    if (kind === 'mount') {
      if (!(await this.#isMountPoint(staging))) await this.#mount(backing.dir, staging, []);
      else if (this.#node.view(vol.id)?.stagedAt === undefined) this.#logger.warning('Staging path is already a mount point; taking it as this volume', { volumeId: vol.id, staging });
    } else {
      const device = mockBlockDevicePath(staging);
      await this.#createTarget(device, 'block');
      if (!(await this.#isMountPoint(device))) await this.#mount(backing.file, device, []);
    }
    if (this.#node.view(vol.id)?.stagedAt !== staging) {
      this.#node.recordStaged(vol.id, staging, kind === 'block');
      await this.#persist(vol.id);
    }
    return {};
  }

  async #unstage(req: wire.NodeUnstageVolumeRequest): Promise<MessageInit<wire.NodeUnstageVolumeResponse>> {
    if (req.volumeId !== '') checkVolumeId(req.volumeId);
    const notStagedThere = decided(decideUnstage(this.#node.view(req.volumeId), req, this.#rules, () => this.#checkVolume(req.volumeId, undefined)));
    await checkCoPath(this.#fs, req.stagingTargetPath, 'staging target path', this.#allowedRoots);
    const vol = this.#requireVolume(req.volumeId);
    const staging = req.stagingTargetPath;
    if (notStagedThere) return {};
    if (vol.kind === 'mount') {
      await this.#unmountAll(staging);
    } else {
      const device = mockBlockDevicePath(staging);
      await this.#unmountAll(device);
      await this.#removeFile(device).catch((err: unknown) => {
        throw internal(`cannot remove ${device}: ${errorMessage(err)}`);
      });
    }
    this.#node.recordUnstaged(vol.id);
    await this.#persist(vol.id);
    return {};
  }

  async #publish(req: wire.NodePublishVolumeRequest): Promise<MessageInit<wire.NodePublishVolumeResponse>> {
    if (req.volumeId !== '') checkVolumeId(req.volumeId);
    const kindOrUndefined = accessKindOrUndefined(req.volumeCapability);
    if (req.targetPath !== '') await checkCoPath(this.#fs, req.targetPath, 'target path', this.#allowedRoots);
    if (req.stagingTargetPath !== '') await checkCoPath(this.#fs, req.stagingTargetPath, 'staging target path', this.#allowedRoots);
    // An inline ephemeral volume is never staged: kubelet sends no staging path (csi-driver-host-path).
    const ephemeral = req.volumeContext[EPHEMERAL_CONTEXT_KEY] === 'true';
    const question = {
      volumeId: req.volumeId,
      targetPath: req.targetPath,
      stagingTargetPath: req.stagingTargetPath,
      access: kindOrUndefined,
      ephemeral,
    };
    if (ephemeral) {
      decided(decidePublish(undefined, question, this.#rules));
      return this.#publishEphemeral(req, accessKind(req.volumeCapability));
    }
    decided(decidePublish(this.#node.view(req.volumeId), question, this.#rules, () => this.#checkVolume(req.volumeId, kindOrUndefined)));
    const kind = accessKind(req.volumeCapability);
    const vol = this.#requireVolume(req.volumeId);
    const staging = req.stagingTargetPath;
    const target = req.targetPath;
    const source = kind === 'mount' ? staging : mockBlockDevicePath(staging);
    if (!(await this.#isMountPoint(source))) {
      throw status(GrpcStatus.FAILED_PRECONDITION, `volume ${vol.id} is recorded as staged at ${staging} but ${source} is not mounted; stage it again`);
    }
    if (req.volumeCapability?.accessMode?.mode === 'SINGLE_NODE_SINGLE_WRITER') {
      const other = [...(this.#node.view(vol.id)?.publishedAt ?? [])].find((t) => t !== target);
      if (other !== undefined) {
        throw status(GrpcStatus.FAILED_PRECONDITION, `volume ${vol.id} with SINGLE_NODE_SINGLE_WRITER access is already published at ${other}`);
      }
    }
    if (!(await this.#isMountPoint(target))) {
      await this.#createTarget(target, kind);
      await this.#mount(source, target, req.readonly ? ['ro'] : []);
      if (req.readonly) await this.#ensureReadOnly(source, target);
    } else if (!this.#isPublishedAt(vol.id, target)) {
      this.#logger.warning('Target path is already a mount point; taking it as this volume', { volumeId: vol.id, target });
    }
    if (!this.#isPublishedAt(vol.id, target)) {
      this.#node.recordPublished(vol.id, target, kind === 'block');
      await this.#persist(vol.id);
    }
    return {};
  }

  async #unpublish(req: wire.NodeUnpublishVolumeRequest): Promise<MessageInit<wire.NodeUnpublishVolumeResponse>> {
    if (req.volumeId !== '') checkVolumeId(req.volumeId);
    decided(decideUnpublish(this.#node.view(req.volumeId), req, () => this.#checkVolume(req.volumeId, undefined)));
    await checkCoPath(this.#fs, req.targetPath, 'target path', this.#allowedRoots);
    const vol = this.#requireVolume(req.volumeId);
    const target = req.targetPath;
    // Only a target this volume was published at is unmounted and removed: any other path is not ours.
    if (!this.#isPublishedAt(vol.id, target)) return {};
    await this.#unmountAll(target);
    try {
      const st = await this.#fs.lstat(target);
      if (st.type === 'directory') await this.#fs.rmdir(target);
      else await this.#fs.unlink(target);
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw internal(`cannot remove target path ${target}: ${errorMessage(err)}`);
    }
    this.#node.recordUnpublished(vol.id, target);
    // Like csi-driver-host-path, the last unpublish of an ephemeral volume deletes it.
    if (vol.ephemeral && this.#node.view(vol.id) === undefined) await this.#deleteEphemeral(vol);
    await this.#persist(vol.id);
    return {};
  }

  /** The volume a Node stats/expand call names, and whether `volumePath` is where it is staged or published. */
  #volumeAt(volumeId: string, volumePath: string): { vol: VolumeState; staged: boolean } {
    if (volumeId === '') throw invalid('volume ID missing in request');
    if (volumePath === '') throw invalid('volume path missing in request');
    checkVolumeId(volumeId);
    const vol = this.#requireVolume(volumeId);
    const view = this.#node.view(volumeId);
    const staged = view?.stagedAt === volumePath;
    if (!staged && view?.publishedAt.has(volumePath) !== true) {
      throw status(GrpcStatus.NOT_FOUND, `volume ${volumeId} is neither staged nor published at ${volumePath}`);
    }
    return { vol, staged };
  }

  /**
   * NodeGetVolumeStats: the volume's nominal capacity in bytes (used: what its backing storage
   * holds, counted up to a bound), and its condition: abnormal when the path is no longer a mount
   * point (a reboot took the mount away).
   */
  async #volumeStats(req: wire.NodeGetVolumeStatsRequest): Promise<MessageInit<wire.NodeGetVolumeStatsResponse>> {
    const { vol, staged } = this.#volumeAt(req.volumeId, req.volumePath);
    await checkCoPath(this.#fs, req.volumePath, 'volume path', this.#allowedRoots);
    const mountPoint = vol.kind === 'block' && staged ? mockBlockDevicePath(req.volumePath) : req.volumePath;
    const mounted = await this.#isMountPoint(mountPoint);
    const volumeCondition = mounted
      ? { abnormal: false, message: `volume ${vol.id} is mounted at ${mountPoint}` }
      : { abnormal: true, message: `volume ${vol.id} is recorded at ${req.volumePath} but ${mountPoint} is not mounted; stage or publish it again` };
    if (vol.kind === 'block') return { usage: [{ unit: 'BYTES', total: vol.capacity }], volumeCondition };
    const used = Math.min(vol.capacity, await this.#usedBytes(mockBackingPaths(this.#options.stateDir, vol.id).dir));
    return { usage: [{ unit: 'BYTES', total: vol.capacity, used, available: vol.capacity - used }], volumeCondition };
  }

  /** Bytes of the regular files under `dir`, looking at no more than MAX_USAGE_ENTRIES entries. */
  async #usedBytes(dir: string): Promise<number> {
    let total = 0;
    let seen = 0;
    const stack = [dir];
    for (let d = stack.pop(); d !== undefined && seen < MAX_USAGE_ENTRIES; d = stack.pop()) {
      let entries;
      try {
        entries = await this.#fs.readdir(d);
      } catch {
        continue;
      }
      for (const e of entries) {
        if (++seen > MAX_USAGE_ENTRIES) break;
        const p = posix.join(d, e.name);
        if (e.type === 'directory') stack.push(p);
        else if (e.type === 'file') total += await this.#fs.lstat(p).then((st) => st.size, () => 0);
      }
    }
    return total;
  }

  /**
   * NodeExpandVolume: the volume grows to the required bytes (never shrinks); a block volume's
   * backing file grows with it. OUT_OF_RANGE for a range it cannot meet.
   */
  async #nodeExpand(req: wire.NodeExpandVolumeRequest): Promise<MessageInit<wire.NodeExpandVolumeResponse>> {
    const { vol } = this.#volumeAt(req.volumeId, req.volumePath);
    const kind = accessKindOrUndefined(req.volumeCapability);
    if (kind !== undefined && kind !== vol.kind) throw invalid(`volume ${vol.id} was created for ${vol.kind} access, not ${kind}`);
    const required = req.capacityRange?.requiredBytes ?? 0;
    const limit = req.capacityRange?.limitBytes ?? 0;
    if (required < 0 || limit < 0) throw invalid('capacity range must not be negative');
    if (limit > 0 && required > limit) throw status(GrpcStatus.OUT_OF_RANGE, `required bytes ${required} exceed limit bytes ${limit}`);
    if (limit > 0 && vol.capacity > limit) throw status(GrpcStatus.OUT_OF_RANGE, `volume ${vol.id} already has ${vol.capacity} bytes, more than the limit ${limit}; it cannot shrink`);
    if (required > MAX_CAPACITY_BYTES) throw status(GrpcStatus.OUT_OF_RANGE, `required bytes ${required} exceed the mock's maximum ${MAX_CAPACITY_BYTES}`);
    if (required <= vol.capacity) return { capacityBytes: vol.capacity };
    if (vol.kind === 'block') {
      try {
        await this.#grow(mockBackingPaths(this.#options.stateDir, vol.id).file, required);
      } catch (err) {
        throw internal(`cannot grow the backing file of volume ${vol.id}: ${errorMessage(err)}`);
      }
    }
    vol.capacity = required;
    await this.#persist(vol.id);
    this.#logger.v(1).info('Expanded volume', { volumeId: vol.id, capacity: required });
    return { capacityBytes: required };
  }

  /**
   * NodePublishVolume of an inline ephemeral volume (csi-driver-host-path): the volume is created
   * on the first publish under the id kubelet chose (name `ephemeral-<id>`, a backing directory),
   * and its backing directory is bind-mounted on the target; no staging.
   */
  async #publishEphemeral(req: wire.NodePublishVolumeRequest, kind: MockVolumeKind): Promise<MessageInit<wire.NodePublishVolumeResponse>> {
    if (kind !== 'mount') throw invalid(`ephemeral volume ${req.volumeId}: only mount access is supported`);
    const target = req.targetPath;
    let vol = this.#volumes.get(req.volumeId);
    if (vol !== undefined && !vol.ephemeral) {
      throw status(GrpcStatus.FAILED_PRECONDITION, `volume ${vol.id} exists and is not an ephemeral volume`);
    }
    const backing = mockBackingPaths(this.#options.stateDir, req.volumeId);
    if (vol === undefined) {
      try {
        await this.#fs.mkdir(backing.dir, { recursive: true, mode: 0o777 });
      } catch (err) {
        throw internal(`cannot create the backing storage of ephemeral volume ${req.volumeId}: ${errorMessage(err)}`);
      }
      vol = {
        id: req.volumeId,
        name: `ephemeral-${req.volumeId}`,
        capacity: DEFAULT_CAPACITY_BYTES,
        kind: 'mount',
        attachedNodes: new Set(),
        ephemeral: true,
      };
      this.#volumes.set(vol.id, vol);
      await this.#persist(vol.id);
      this.#logger.v(1).info('Created ephemeral volume', { volumeId: vol.id });
    }
    if (!(await this.#isMountPoint(target))) {
      await this.#createTarget(target, 'mount');
      await this.#mount(backing.dir, target, req.readonly ? ['ro'] : []);
      if (req.readonly) await this.#ensureReadOnly(backing.dir, target);
    }
    if (!this.#isPublishedAt(vol.id, target)) {
      this.#node.recordPublished(vol.id, target, false);
      await this.#persist(vol.id);
    }
    return {};
  }

  /** Removes an unpublished ephemeral volume's backing directory and forgets it. */
  async #deleteEphemeral(vol: VolumeState): Promise<void> {
    try {
      await this.#removeTree(mockBackingPaths(this.#options.stateDir, vol.id).dir);
    } catch (err) {
      throw internal(`cannot remove the backing storage of ephemeral volume ${vol.id}: ${errorMessage(err)}`);
    }
    this.#volumes.delete(vol.id);
    this.#logger.v(1).info('Deleted ephemeral volume', { volumeId: vol.id });
  }

  // ---------------------------------------------------------------- helpers

  #isPublishedAt(volumeId: string, target: string): boolean {
    return this.#node.view(volumeId)?.publishedAt.has(target) === true;
  }

  #requireVolume(volumeId: string): VolumeState {
    const vol = this.#volumes.get(volumeId);
    if (vol === undefined) throw status(GrpcStatus.NOT_FOUND, `volume ${volumeId} not found`);
    return vol;
  }

  /** The mock's own checks after the arguments: the volume exists (NOT_FOUND) with this access kind. */
  #checkVolume(volumeId: string, kind: MockVolumeKind | undefined): CsiRefusal | undefined {
    const vol = this.#volumes.get(volumeId);
    if (vol === undefined) return { code: GrpcStatus.NOT_FOUND, details: `volume ${volumeId} not found` };
    if (kind !== undefined && vol.kind !== kind) {
      return { code: GrpcStatus.INVALID_ARGUMENT, details: `volume ${vol.id} was created for ${vol.kind} access, not ${kind}` };
    }
    return undefined;
  }

  #exists(p: string): Promise<boolean> {
    return pathExists(this.#fs, p);
  }

  async #requireDirectory(p: string, what: string): Promise<void> {
    let type: string;
    try {
      type = (await this.#fs.stat(p)).type;
    } catch (err) {
      throw internal(`${what} ${p} is not accessible: ${errorMessage(err)}`);
    }
    if (type !== 'directory') throw internal(`${what} ${p} is not a directory`);
  }

  /** Creates a target directory (mount) or empty file (block); its parent must exist. */
  async #createTarget(target: string, kind: MockVolumeKind): Promise<void> {
    let type: string | undefined;
    try {
      type = (await this.#fs.lstat(target)).type;
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw internal(`cannot inspect ${target}: ${errorMessage(err)}`);
    }
    const want = kind === 'block' ? 'file' : 'directory';
    if (type === undefined) {
      try {
        if (kind === 'block') await this.#fs.writeFile(target, new Uint8Array(0), { mode: 0o640 });
        else await this.#fs.mkdir(target, { recursive: false, mode: 0o750 });
      } catch (err) {
        throw internal(`cannot create ${target}: ${errorMessage(err)}`);
      }
      return;
    }
    if (type !== want) throw internal(`${target} exists and is a ${type}, not a ${want}`);
  }

  async #isMountPoint(p: string): Promise<boolean> {
    try {
      if (this.#targetedMountCheck) {
        try {
          return await isMountPointByMountId(p);
        } catch (err) {
          if (!(err instanceof MountIdUnavailableError)) throw err;
          this.#logger.warning('The kernel reports no mnt_id; reading the mount table for every check instead', { path: p });
          this.#targetedMountCheck = false;
        }
      }
      return !(await this.#mounter.isLikelyNotMountPoint(p));
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return false;
      throw internal(`cannot tell whether ${p} is a mount point: ${errorMessage(err)}`);
    }
  }

  async #mount(source: string, target: string, extra: readonly string[]): Promise<void> {
    try {
      await this.#mounter.mount(source, target, '', ['bind', ...extra]);
    } catch (err) {
      throw internal(`cannot bind-mount ${source} on ${target}: ${errorMessage(err)}`);
    }
    this.#logger.v(2).info('Mounted', { source, target, options: ['bind', ...extra].join(',') });
  }

  /** A `-o bind,ro` that left the mount writable (old mount(8)) is remounted read-only. */
  async #ensureReadOnly(source: string, target: string): Promise<void> {
    try {
      const real = escapeMountPath(await this.#fs.realpath(target));
      const table = await this.#mounter.readMountTable();
      const entry = table.entries.findLast((e) => e.mountPoint === real);
      if (entry === undefined || entry.mountOptions.includes('ro')) return;
      await this.#mounter.mount(source, target, '', ['remount', 'bind', 'ro']);
    } catch (err) {
      throw internal(`cannot make ${target} read-only: ${errorMessage(err)}`);
    }
  }

  /** Unmounts `p` until it is no longer a mount point (stacked mounts included). */
  async #unmountAll(p: string): Promise<void> {
    for (let i = 0; i < MAX_STACKED_UNMOUNTS && (await this.#isMountPoint(p)); i++) {
      for (let attempt = 1; ; attempt++) {
        try {
          await this.#mounter.unmount(p);
          break;
        } catch (err) {
          if (errorCode(err) === 'EINVAL' || errorCode(err) === 'ENOENT') return;
          // The mount-point check opens the path for an instant; a mount(8) forked for another
          // volume at that instant holds a copy of that descriptor until it execs. That busy is
          // ours and short: retry a few times before failing.
          if (errorCode(err) !== 'EBUSY' || attempt >= BUSY_UNMOUNT_ATTEMPTS) throw internal(`cannot unmount ${p}: ${errorMessage(err)}`);
          this.#logger.v(2).info('Target busy; retrying the unmount', { target: p, attempt });
          await this.#clock.sleep(BUSY_UNMOUNT_BACKOFF_MS * attempt);
        }
      }
      this.#logger.v(2).info('Unmounted', { target: p });
    }
    if (await this.#isMountPoint(p)) throw internal(`${p} is still a mount point after ${MAX_STACKED_UNMOUNTS} unmounts`);
  }

  async #removeFile(p: string): Promise<void> {
    try {
      await this.#fs.unlink(p);
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw err;
    }
  }

  /** rm -r without following symlinks; refuses to descend into a mount point. */
  async #removeTree(p: string): Promise<void> {
    let type: string;
    try {
      type = (await this.#fs.lstat(p)).type;
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return;
      throw err;
    }
    if (type !== 'directory') {
      await this.#fs.unlink(p);
      return;
    }
    if (await this.#isMountPoint(p)) throw new FsError('EBUSY', p, 'rmdir', `${p} is a mount point`);
    for (const entry of await this.#fs.readdir(p)) await this.#removeTree(posix.join(p, entry.name));
    await this.#fs.rmdir(p);
  }
}
