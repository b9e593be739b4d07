/**
 * nodevol's mock CSI driver (`nodevol mock-driver`): a real csi.v1 server on a unix socket, in
 * the spirit of csi-driver-host-path, for node e2e tests. It shares the in-memory fake's
 * semantics (src/adapters/memory/fakeCsiDriver.ts): the spec's argument checks in the same order,
 * idempotent calls, NodeUnstageVolume refused with FAILED_PRECONDITION while the volume is
 * published, block volumes bound as files; and it really mounts, through the Mounter port (bind
 * mounts with mount(8) for the CLI, the MemoryMounter in unit tests).
 *
 * This module starts and stops it, and wires its parts:
 *
 * - identityServer.ts, controllerServer.ts, nodeServer.ts: the three CSI services;
 * - callPipeline.ts: what every call goes through (volume locks, fault rules, journal, logs);
 * - volumes.ts: the volumes the servers share, persisted per volume (state.ts) before a call
 *   answers, so that they survive restarts; mounts do not survive a reboot, and the node server
 *   copes;
 * - storage.ts: the mounts and the backing storage on the node;
 * - faults.ts, journal.ts, confine.ts: the fault rules file, the call journal, path confinement.
 */
import { promises as fsp } from 'node:fs';
import * as posix from 'node:path/posix';

import type { FileSystem } from '../ports/fs.js';
import type { Clock } from '../ports/clock.js';
import { discardLogger, type Logger } from '../ports/logger.js';
import type { Mounter } from '../ports/mounter.js';
import { NodeFileSystem } from '../adapters/node/nodeFs.js';
import { NodeMounter } from '../adapters/node/nodeMounter.js';
import { unixSocketPath } from '../adapters/grpc/endpoint.js';
import { startCsiServer, type CsiServer } from '../adapters/grpc/server.js';
import type { CsiNodeMode } from '../csi/nodeStateMachine.js';
import { MockCallPipeline } from './callPipeline.js';
import { normalizeAllowedRoots } from './confine.js';
import { MockControllerServer } from './controllerServer.js';
import { MockFaultBook } from './faults.js';
import { MockIdentityServer } from './identityServer.js';
import { MockJournal, type JournalLine } from './journal.js';
import { MockNodeServer } from './nodeServer.js';
import { MockStateStore, type MockVolumeRecord } from './state.js';
import { MockStorage } from './storage.js';
import { MockVolumes } from './volumes.js';

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

/** The real clock: monotonic milliseconds, setTimeout sleeps. */
const monotonicClock: Clock = {
  nowMs: () => performance.now(),
  wallMs: () => Date.now(),
  // Unref'd: a delay held past stop() must not keep the process alive.
  sleep: (ms) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()),
};

/**
 * The real file system, changes confined to the state dir (created here, then taken by its real
 * path) and the allowed roots; without allowed roots, paths elsewhere are the CO's and are
 * changed by path (confine.ts refuses only system dirs then).
 */
async function confinedNodeFileSystem(options: MockDriverOptions): Promise<MockDriverOptions & { readonly fs: NodeFileSystem }> {
  await fsp.mkdir(options.stateDir, { recursive: true, mode: 0o755 });
  const stateDir = await fsp.realpath(options.stateDir);
  const allowed = normalizeAllowedRoots(options.allowedRoots ?? []);
  const fs = new NodeFileSystem({ confineChangesTo: [stateDir, ...allowed], elsewhere: allowed.length > 0 ? 'refuse' : 'by-path' });
  return { ...options, stateDir, fs };
}

/** Starts the driver: loads the volume records (migrating a legacy state.json), serves on the endpoint. */
export async function startMockDriver(options: MockDriverOptions): Promise<MockDriver> {
  if (options.nodeId === '') throw new Error('the mock driver needs a node id');
  if (options.driverName === '') throw new Error('the mock driver needs a driver name');
  if (!posix.isAbsolute(options.stateDir)) throw new Error(`the state dir must be an absolute path, got ${JSON.stringify(options.stateDir)}`);
  // Its own deletions (backing storage, records, target paths) stay beneath its state dir and
  // the allowed roots, through directory descriptors (adapters/node/beneath.ts).
  let driver: MockDriverImpl;
  if (options.fs === undefined) {
    const confined = await confinedNodeFileSystem(options);
    driver = new MockDriverImpl(confined, confined.fs);
  } else {
    driver = new MockDriverImpl({ ...options, fs: options.fs }, undefined);
  }
  await driver.start();
  return driver;
}

class MockDriverImpl implements MockDriver {
  readonly #options: MockDriverOptions;
  readonly #fs: FileSystem;
  readonly #logger: Logger;
  readonly #store: MockStateStore;
  readonly #faults: MockFaultBook;
  readonly #journal: MockJournal;
  readonly #volumes: MockVolumes;
  readonly #pipeline: MockCallPipeline;
  readonly #identity: MockIdentityServer;
  readonly #controller: MockControllerServer;
  readonly #node: MockNodeServer;
  /** Fires at stop(): fails held calls. */
  readonly #stopping = new AbortController();
  #server: CsiServer | undefined;
  #stopped: Promise<void> | undefined;

  /** `real`: the real file system startMockDriver made (`options.fs` itself), undefined when a test gave its own. */
  constructor(options: MockDriverOptions & { readonly fs: FileSystem }, real: NodeFileSystem | undefined) {
    this.#options = options;
    const fs = options.fs;
    this.#fs = fs;
    const logger = options.logger ?? discardLogger;
    this.#logger = logger;
    const mounter = options.mounter ?? new NodeMounter({ fs, logger });
    const clock = options.clock ?? monotonicClock;
    const storage = new MockStorage({
      fs,
      mounter,
      logger,
      clock,
      // The real kernel and the real file system: ask about the one path (mountPoint.ts).
      targetedMountCheck: options.mounter === undefined && real !== undefined,
      allocate:
        options.allocateFile ??
        (real !== undefined
          ? (filePath, size) => real.resizeFile(filePath, size, { create: true, mode: 0o600 })
          : (filePath, size) => fs.writeFile(filePath, new Uint8Array(size), { mode: 0o600, fsync: true })),
      grow:
        options.growFile ??
        (real !== undefined
          ? (filePath, size) => real.resizeFile(filePath, size, { create: false, mode: 0o600 })
          : async (filePath, size) => {
              const old = await fs.readFile(filePath, size);
              const grown = new Uint8Array(size);
              grown.set(old.subarray(0, Math.min(old.length, size)));
              await fs.writeFile(filePath, grown, { mode: 0o600, fsync: true });
            }),
    });
    this.#store = new MockStateStore(fs, options.stateDir);
    this.#volumes = new MockVolumes(this.#store);
    this.#faults = new MockFaultBook(options.faultsFile, logger, { fs, file: posix.join(options.stateDir, 'fault-counters.json') });
    this.#journal = new MockJournal(options.journalFile, logger, options.onJournalLine);
    this.#pipeline = new MockCallPipeline({
      clock,
      logger,
      faults: this.#faults,
      journal: this.#journal,
      exit: options.exit ?? ((code) => process.exit(code)),
      stopping: this.#stopping.signal,
    });
    this.#identity = new MockIdentityServer({ driverName: options.driverName, ...(options.vendorVersion === undefined ? {} : { vendorVersion: options.vendorVersion }) });
    this.#controller = new MockControllerServer({ nodeId: options.nodeId, stateDir: options.stateDir, volumes: this.#volumes, storage, logger });
    this.#node = new MockNodeServer({
      nodeId: options.nodeId,
      stateDir: options.stateDir,
      volumes: this.#volumes,
      storage,
      logger,
      allowedRoots: normalizeAllowedRoots(options.allowedRoots ?? []),
      rules: { mode: options.mode ?? 'strict', stageUnstage: true },
      singleNodeMultiWriter: options.singleNodeMultiWriter === true,
    });
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
    return this.#volumes.records();
  }

  volume(volumeId: string): MockVolumeRecord | undefined {
    return this.#volumes.record(volumeId);
  }

  async start(): Promise<void> {
    unixSocketPath(this.#options.endpoint);
    await this.#fs.mkdir(posix.join(this.#options.stateDir, 'volumes'), { recursive: true, mode: 0o755 });
    await this.#volumes.load();
    await this.#faults.refresh();
    const dispatch = this.#pipeline.dispatch;
    // The socket is always a real file, whatever `fs` is.
    await fsp.mkdir(posix.dirname(unixSocketPath(this.#options.endpoint)), { recursive: true, mode: 0o755 });
    const serverOptions = this.#options.shutdownGraceMs === undefined ? {} : { shutdownGraceMs: this.#options.shutdownGraceMs };
    this.#server = await startCsiServer(
      this.#options.endpoint,
      { identity: this.#identity.handlers(dispatch), node: this.#node.handlers(dispatch), controller: this.#controller.handlers(dispatch) },
      serverOptions,
    );
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
}
