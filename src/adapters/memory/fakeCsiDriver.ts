/**
 * An in-process, stateful CSI Node service in the spirit of csi-driver-host-path, for tests and
 * the simulator. It really mounts: stage mounts a fake device (`/dev/fake/<volumeId>`) on the
 * staging path and publish bind-mounts the staging path onto the target, through a
 * {@link MemoryMounter}, so the mount table kubelet's code reads back is what a real driver leaves.
 *
 * The CSI spec (spec.md, Node service) is the contract: every call is idempotent; NodeUnstageVolume is
 * refused while the volume is still published; a SINGLE_NODE_SINGLE_WRITER volume is published at
 * one target at a time (a second target is FAILED_PRECONDITION); NodePublishVolume needs the volume staged at the
 * given staging path when the driver has STAGE_UNSTAGE_VOLUME, unless it is an inline ephemeral
 * volume (volume context csi.storage.k8s.io/ephemeral=true), which is never staged.
 *
 * Block volumes: stage mounts the fake device on the staging directory; publish creates the
 * target FILE and bind-mounts the device node `/dev/fake/<volumeId>` (a file the driver creates)
 * onto it — the kernel, and the MemoryMounter, refuse to bind a directory onto a file.
 *
 * Node reboot: the driver's state lives in this object and survives (like hostpath's state file);
 * the mounts are the MemoryMounter's business. After `mounter.reboot()`, a repeated stage or
 * publish finds its mount gone and mounts again. {@link FakeCsiDriver.reboot} only fails the calls
 * that were hanging (the process that served them is gone).
 *
 * Decisions (argument checks, idempotency, strict/lenient NodeUnstageVolume, per-volume ABORTED,
 * faults) come from the shared CSI node state machine (src/csi/nodeStateMachine.ts), the same one
 * `nodevol mock-driver` uses; this class only performs the mounts.
 *
 * Time comes from the injected Clock only (injected delays sleep on it).
 */
import * as posix from 'node:path/posix';

import { errorCode, errorMessage, type FileSystem } from '../../ports/fs.js';
import type { Clock } from '../../ports/clock.js';
import type { MemoryMounter } from './memoryMounter.js';
import {
  CsiNodeState,
  VolumeLocks,
  decidePublish,
  decideSingleWriter,
  decideStage,
  decideUnpublish,
  decideUnstage,
  type CsiAccessKind,
  type CsiDecision,
  type CsiNodeMode,
  type NodeRules,
  type NodeStateSnapshot,
} from '../../csi/nodeStateMachine.js';
import { CsiFaultBook, type CsiFault, type CsiFaultHandle } from '../../csi/faults.js';
import {
  CsiCallError,
  GrpcStatus,
  type CsiMethod,
  type CsiNodeClient,
  type GrpcStatusName,
  type NodeCapability,
  type NodePublishVolumeRequest,
  type NodeStageVolumeRequest,
  type NodeUnpublishVolumeRequest,
  type NodeUnstageVolumeRequest,
  type VolumeCapability,
} from '../../ports/csi.js';

export interface FakeCsiDriverOptions {
  readonly name: string;
  /** Default ['STAGE_UNSTAGE_VOLUME']. */
  readonly capabilities?: readonly NodeCapability[];
  readonly fs: FileSystem;
  readonly mounter: MemoryMounter;
  readonly clock: Clock;
  /**
   * The code NodeUnstageVolume answers while the volume is still published (strict mode). Default
   * FAILED_PRECONDITION; csi-driver-host-path answers INTERNAL ("volume … is still published").
   */
  readonly stillPublishedCode?: number;
  /** strict (default): NodeUnstageVolume refused while published; lenient: accepted. */
  readonly mode?: CsiNodeMode;
  /**
   * Per-volume locks: a call for a volume with a call in flight (held by a delay or hang too)
   * answers ABORTED, as csi-lib-utils drivers do. Default false for the unit-test harness, whose
   * scripted stories release hung calls explicitly; the simulator turns it on.
   */
  readonly volumeLocks?: boolean;
}

/** The driver's view of one volume. */
export interface FakeVolumeState {
  readonly stagedAt?: string;
  readonly publishedAt: Set<string>;
  readonly block: boolean;
}

export type FakeCsiRequest =
  | NodeStageVolumeRequest
  | NodeUnstageVolumeRequest
  | NodePublishVolumeRequest
  | NodeUnpublishVolumeRequest
  | Readonly<Record<string, never>>;

export type FakeCsiOutcome = 'OK' | GrpcStatusName;

/** One finished call. Recorded when it completes; `seq` is the order of arrival. */
export interface FakeCsiCall {
  readonly seq: number;
  readonly method: CsiMethod;
  /** '' for NodeGetCapabilities. */
  readonly volumeId: string;
  /** A shallow copy of the request as received. */
  readonly request: FakeCsiRequest;
  readonly outcome: FakeCsiOutcome;
  /** The error details ('' on success). */
  readonly details: string;
  /** Clock time when the call arrived. */
  readonly atMs: number;
  /** Clock time when it completed. */
  readonly endMs: number;
}

/** A fault: a rule of the one fault model (src/csi/faults.ts). */
export type FakeCsiFault = CsiFault;

export type FakeCsiFaultHandle = CsiFaultHandle;

/** What the driver does with one call that arrived, observable by a simulator. */
export interface FakeCsiCallObserver {
  /** The call arrived at the driver (after the ABORTED check passed or not). */
  arrived?(seq: number, method: CsiMethod, volumeId: string, request: FakeCsiRequest): void;
  /** The call finished at the driver (its effect landed or it failed). */
  finished?(call: FakeCsiCall): void;
}

interface Hung {
  readonly method: CsiMethod;
  readonly release: () => void;
  readonly fail: (err: Error) => void;
}

/** A call at the driver: what ends it when the driver process goes away. */
interface Running {
  readonly method: CsiMethod;
  readonly abort: (err: CsiCallError) => void;
}

/** Where the fake device of a volume lives (source of its device mounts; a file for block binds). */
export function fakeDevicePath(volumeId: string): string {
  return `/dev/fake/${volumeId}`;
}

function statusName(code: number | undefined): GrpcStatusName {
  for (const [name, value] of Object.entries(GrpcStatus)) {
    if (value === code) return name as GrpcStatusName;
  }
  return 'UNKNOWN';
}

function fail(method: CsiMethod, code: number, details: string): CsiCallError {
  return new CsiCallError(method, code, details);
}

function accessOf(cap: VolumeCapability | undefined): CsiAccessKind | undefined {
  if (cap === undefined) return undefined;
  if (cap.mount !== undefined && cap.block !== undefined) return undefined;
  if (cap.block !== undefined) return 'block';
  return cap.mount !== undefined ? 'mount' : undefined;
}

/** Throws the refusal of a decision; returns whether the call repeats a recorded one. */
function goAhead(method: CsiMethod, d: CsiDecision): boolean {
  if (!d.ok) throw fail(method, d.code, d.details);
  return d.repeat;
}

export class FakeCsiDriver implements CsiNodeClient {
  readonly name: string;
  readonly #capabilities: readonly NodeCapability[];
  readonly #fs: FileSystem;
  readonly #mounter: MemoryMounter;
  readonly #clock: Clock;
  readonly #rules: NodeRules;
  readonly #state = new CsiNodeState();
  readonly #locks = new VolumeLocks();
  readonly #useLocks: boolean;
  readonly #faults = new CsiFaultBook();
  #hung: Hung[] = [];
  /** Every call at the driver: a restart of its process fails them all at once. */
  readonly #running = new Set<Running>();
  /** Bumped when the driver process restarts (reboot, exit fault): work of an earlier process never lands. */
  #epoch = 0;
  /** Called when an exit fault ends the driver process (the simulator restarts it). */
  onExit: (() => void) | undefined;
  #seq = 0;
  #lastTakenFault: FakeCsiFault | undefined;
  /** Every finished call, in order of completion. */
  readonly calls: FakeCsiCall[] = [];
  /** Optional observer (the simulator's trace). */
  observer: FakeCsiCallObserver | undefined;

  constructor(options: FakeCsiDriverOptions) {
    this.name = options.name;
    this.#capabilities = [...(options.capabilities ?? ['STAGE_UNSTAGE_VOLUME'])];
    this.#fs = options.fs;
    this.#mounter = options.mounter;
    this.#clock = options.clock;
    this.#useLocks = options.volumeLocks ?? false;
    this.#rules = {
      mode: options.mode ?? 'strict',
      stageUnstage: this.#capabilities.includes('STAGE_UNSTAGE_VOLUME'),
      stillPublishedCode: options.stillPublishedCode ?? GrpcStatus.FAILED_PRECONDITION,
    };
  }

  get mode(): CsiNodeMode {
    return this.#rules.mode;
  }

  // ---------------------------------------------------------------- CsiNodeClient

  nodeGetCapabilities(): Promise<readonly NodeCapability[]> {
    return this.#call('NodeGetCapabilities', '', {}, () => Promise.resolve([...this.#capabilities]));
  }

  nodeStageVolume(req: NodeStageVolumeRequest): Promise<void> {
    return this.#call('NodeStageVolume', req.volumeId, { ...req }, () => this.#stage(req));
  }

  nodeUnstageVolume(req: NodeUnstageVolumeRequest): Promise<void> {
    return this.#call('NodeUnstageVolume', req.volumeId, { ...req }, () => this.#unstage(req));
  }

  nodePublishVolume(req: NodePublishVolumeRequest): Promise<void> {
    return this.#call('NodePublishVolume', req.volumeId, { ...req }, () => this.#publish(req));
  }

  nodeUnpublishVolume(req: NodeUnpublishVolumeRequest): Promise<void> {
    return this.#call('NodeUnpublishVolume', req.volumeId, { ...req }, () => this.#unpublish(req));
  }

  // ---------------------------------------------------------------- state and call log

  /** A copy of the driver's state for one volume; undefined when neither staged nor published. */
  volume(volumeId: string): FakeVolumeState | undefined {
    const v = this.#state.view(volumeId);
    if (v === undefined) return undefined;
    const base = { publishedAt: new Set(v.publishedAt), block: this.#state.isBlock(volumeId) };
    return v.stagedAt === undefined ? base : { stagedAt: v.stagedAt, ...base };
  }

  /** Copies of every known volume's state. */
  volumes(): Map<string, FakeVolumeState> {
    const out = new Map<string, FakeVolumeState>();
    for (const id of this.#state.ids()) {
      const v = this.volume(id);
      if (v !== undefined) out.set(id, v);
    }
    return out;
  }

  /** The driver's persisted state (what survives a restart of its process). */
  snapshot(): NodeStateSnapshot {
    return this.#state.snapshot();
  }

  /** Replaces the driver's state with a snapshot. */
  restore(s: NodeStateSnapshot): void {
    this.#state.restore(s);
  }

  /** Whether a call for this volume is in flight at the driver. */
  isBusy(volumeId: string): boolean {
    return this.#locks.isBusy(volumeId);
  }

  callsOf(method: CsiMethod): FakeCsiCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** The methods of the finished calls, in order of completion. */
  methods(): string[] {
    return this.calls.map((c) => c.method);
  }

  // ---------------------------------------------------------------- fault injection

  /** Adds a fault; the first active fault (in order of injection) matching a call applies to it. */
  inject(fault: FakeCsiFault): FakeCsiFaultHandle {
    return this.#faults.add(fault);
  }

  /** Removes every fault not yet used up, but a `hang: forever` rule (a driver that never answers those calls). */
  clearFaults(): void {
    this.#faults.clear((rule) => rule.forever === true);
  }

  /**
   * The fault rule the last call to arrive took; undefined when it took none (or was refused as
   * busy, which takes no rule). A call takes its rule synchronously as it is made, so a caller
   * reads this right after making the call to learn whether a fault applies to it.
   */
  get lastTakenFault(): FakeCsiFault | undefined {
    return this.#lastTakenFault;
  }

  /** Lets every hanging call carry on; returns how many there were. */
  releaseHangs(): number {
    const hung = this.#hung;
    this.#hung = [];
    for (const h of hung) h.release();
    return hung.length;
  }

  /** How many calls are hanging. */
  hangingCalls(): number {
    return this.#hung.length;
  }

  /**
   * The driver process restarts with the node. State survives (it lives in this object); calls
   * that were hanging fail with UNAVAILABLE without their effect, and no volume stays busy.
   * Mounts are the MemoryMounter's.
   */
  reboot(): void {
    this.#restartProcess('driver restarted');
  }

  /**
   * The driver process is gone and a new one serves: calls at it fail with UNAVAILABLE (the
   * connection broke) and none of their effects lands afterwards; no volume stays busy.
   */
  #restartProcess(why: string): void {
    this.#epoch++;
    this.#hung = [];
    const running = [...this.#running];
    this.#running.clear();
    for (const r of running) r.abort(fail(r.method, GrpcStatus.UNAVAILABLE, why));
    this.#locks.clear();
  }

  // ---------------------------------------------------------------- call pipeline

  #call<T>(method: CsiMethod, volumeId: string, request: FakeCsiRequest, effect: () => Promise<T>): Promise<T> {
    const seq = ++this.#seq;
    this.#lastTakenFault = undefined;
    const atMs = this.#clock.nowMs();
    let recorded = false;
    const record = (outcome: FakeCsiOutcome, details: string): void => {
      if (recorded) return;
      recorded = true;
      const call: FakeCsiCall = { seq, method, volumeId, request, outcome, details, atMs, endMs: this.#clock.nowMs() };
      this.calls.push(call);
      this.observer?.finished?.(call);
    };
    this.observer?.arrived?.(seq, method, volumeId, request);
    const busy = this.#useLocks ? this.#locks.acquire(volumeId) : undefined;
    if (busy !== undefined) {
      record('ABORTED', busy.details);
      return Promise.reject(fail(method, busy.code, busy.details));
    }
    const fault = this.#faults.take(method, volumeId);
    this.#lastTakenFault = fault;
    if (fault?.exit === true) {
      // The process dies as the call arrives: this call and every other one at it are lost.
      const err = fail(method, GrpcStatus.UNAVAILABLE, 'the driver process exited');
      record('UNAVAILABLE', err.details);
      this.#restartProcess('the driver process exited');
      this.onExit?.();
      return Promise.reject(err);
    }
    const epoch = this.#epoch;
    let running: Running | undefined;
    const aborted = new Promise<never>((_resolve, reject) => {
      running = {
        method,
        abort: (err) => {
          record('UNAVAILABLE', err.details);
          reject(err);
        },
      };
    });
    aborted.catch(() => undefined);
    if (running !== undefined) this.#running.add(running);
    const work = Promise.race([this.#run(method, fault, effect, record, epoch), aborted]).finally(() => {
      if (running !== undefined) this.#running.delete(running);
      if (this.#useLocks && this.#epoch === epoch) this.#locks.release(volumeId);
    });
    const timeout = fault?.clientTimeoutMs;
    if (timeout === undefined) return work;
    // The client gives up; the driver carries on with `work`.
    work.catch(() => undefined);
    return this.#clock.sleep(timeout).then(() => {
      throw fail(method, GrpcStatus.DEADLINE_EXCEEDED, `context deadline exceeded after ${timeout} ms`);
    });
  }

  async #run<T>(
    method: CsiMethod,
    fault: FakeCsiFault | undefined,
    effect: () => Promise<T>,
    record: (outcome: FakeCsiOutcome, details: string) => void,
    epoch: number,
  ): Promise<T> {
    // Work held across a restart of the driver process never lands.
    const stillServed = (): void => {
      if (this.#epoch !== epoch) throw fail(method, GrpcStatus.UNAVAILABLE, 'driver restarted');
    };
    try {
      if (fault?.hang === true) {
        await new Promise<void>((resolve, reject) => this.#hung.push({ method, release: resolve, fail: reject }));
        stillServed();
      }
      if (fault?.delayMs !== undefined && fault.delayMs > 0) {
        await this.#clock.sleep(fault.delayMs);
        stillServed();
      }
      const code = fault?.code !== undefined && fault.code !== GrpcStatus.OK ? fault.code : undefined;
      if (code !== undefined && fault?.afterEffect !== true) throw fail(method, code, `injected ${statusName(code)}`);
      let result: T;
      try {
        result = await effect();
      } catch (err) {
        if (code === undefined) throw err;
        throw fail(method, code, `injected ${statusName(code)} after the effect failed: ${errorMessage(err)}`);
      }
      if (code !== undefined) throw fail(method, code, `injected ${statusName(code)} after the effect`);
      record('OK', '');
      return result;
    } catch (err) {
      const error = err instanceof CsiCallError ? err : fail(method, GrpcStatus.INTERNAL, errorMessage(err));
      record(statusName(error.code), error.details);
      throw error;
    }
  }

  // ---------------------------------------------------------------- the Node service

  #unimplementedWithoutStaging(): { code: number; details: string } | undefined {
    return this.#rules.stageUnstage ? undefined : { code: GrpcStatus.UNIMPLEMENTED, details: `driver ${this.name} has no STAGE_UNSTAGE_VOLUME` };
  }

  async #stage(req: NodeStageVolumeRequest): Promise<void> {
    const m: CsiMethod = 'NodeStageVolume';
    const access = accessOf(req.volumeCapability);
    const repeat = goAhead(
      m,
      decideStage(this.#state.view(req.volumeId), { volumeId: req.volumeId, stagingTargetPath: req.stagingTargetPath, access }, () =>
        this.#unimplementedWithoutStaging(),
      ),
    );
    await this.#requireDirectory(m, req.stagingTargetPath, 'staging target path');
    if (repeat && (await this.#isMountPoint(req.stagingTargetPath))) return;
    const block = access === 'block';
    if (block) await this.#ensureDeviceFile(req.volumeId);
    await this.#mounter.mount(fakeDevicePath(req.volumeId), req.stagingTargetPath, FakeCsiDriver.#fsType(req.volumeCapability), req.volumeCapability.mount?.mountFlags ?? []);
    this.#state.recordStaged(req.volumeId, req.stagingTargetPath, block);
  }

  async #unstage(req: NodeUnstageVolumeRequest): Promise<void> {
    const m: CsiMethod = 'NodeUnstageVolume';
    const notStagedThere = goAhead(m, decideUnstage(this.#state.view(req.volumeId), req, this.#rules));
    if (notStagedThere) return;
    try {
      await this.#mounter.unmount(req.stagingTargetPath);
    } catch (err) {
      const code = errorCode(err);
      if (code !== 'EINVAL' && code !== 'ENOENT') throw err;
    }
    this.#state.recordUnstaged(req.volumeId);
  }

  async #publish(req: NodePublishVolumeRequest): Promise<void> {
    const m: CsiMethod = 'NodePublishVolume';
    const access = accessOf(req.volumeCapability);
    // Like csi-driver-host-path, an inline ephemeral volume is published without staging: kubelet
    // never stages it and sends no staging path (csi_mounter.go SetUpAt, csi_plugin.go
    // skipAttach for the Ephemeral lifecycle mode).
    const ephemeral = req.volumeContext['csi.storage.k8s.io/ephemeral'] === 'true';
    const repeat = goAhead(
      m,
      decidePublish(
        this.#state.view(req.volumeId),
        { volumeId: req.volumeId, targetPath: req.targetPath, stagingTargetPath: req.stagingTargetPath, access, ephemeral },
        this.#rules,
      ),
    );
    // SINGLE_NODE_SINGLE_WRITER: one target at a time (the same decision as nodevol mock-driver's).
    const singleWriter = decideSingleWriter(this.#state.view(req.volumeId), { volumeId: req.volumeId, targetPath: req.targetPath, accessMode: req.volumeCapability.accessMode.mode });
    if (singleWriter !== undefined) throw fail(m, singleWriter.code, singleWriter.details);
    if (repeat && (await this.#isMountPoint(req.targetPath))) return;
    const staged = this.#rules.stageUnstage && !ephemeral;
    const block = access === 'block';
    await this.#createTarget(m, req.targetPath, block);
    const options = [...(req.readonly ? ['ro'] : []), ...(req.volumeCapability.mount?.mountFlags ?? [])];
    if (block) {
      await this.#ensureDeviceFile(req.volumeId);
      await this.#mounter.mount(fakeDevicePath(req.volumeId), req.targetPath, '', ['bind', ...options]);
    } else if (staged) {
      await this.#mounter.mount(req.stagingTargetPath, req.targetPath, '', ['bind', ...options]);
    } else {
      await this.#mounter.mount(fakeDevicePath(req.volumeId), req.targetPath, FakeCsiDriver.#fsType(req.volumeCapability), options);
    }
    this.#state.recordPublished(req.volumeId, req.targetPath, block);
  }

  async #unpublish(req: NodeUnpublishVolumeRequest): Promise<void> {
    const m: CsiMethod = 'NodeUnpublishVolume';
    goAhead(m, decideUnpublish(this.#state.view(req.volumeId), req));
    if (await this.#isMountPoint(req.targetPath)) await this.#mounter.unmount(req.targetPath);
    try {
      const st = await this.#fs.lstat(req.targetPath);
      if (st.type === 'directory') await this.#fs.rmdir(req.targetPath);
      else await this.#fs.unlink(req.targetPath);
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw err;
    }
    this.#state.recordUnpublished(req.volumeId, req.targetPath);
  }

  // ---------------------------------------------------------------- helpers

  static #fsType(cap: VolumeCapability): string {
    const t = cap.mount?.fsType ?? '';
    return t === '' ? 'ext4' : t;
  }

  /** Whether `path` is a mount point; false when it cannot be stat'ed. */
  async #isMountPoint(path: string): Promise<boolean> {
    try {
      return !(await this.#mounter.isLikelyNotMountPoint(path));
    } catch {
      return false;
    }
  }

  async #requireDirectory(method: CsiMethod, path: string, what: string): Promise<void> {
    let type: string;
    try {
      type = (await this.#fs.stat(path)).type;
    } catch (err) {
      throw fail(method, GrpcStatus.INTERNAL, `${what} ${path} is not accessible: ${errorMessage(err)}`);
    }
    if (type !== 'directory') throw fail(method, GrpcStatus.INTERNAL, `${what} ${path} is not a directory`);
  }

  /** mkdir the target (its parent must exist), or create an empty file for a block volume. */
  async #createTarget(method: CsiMethod, target: string, block: boolean): Promise<void> {
    let type: string | undefined;
    try {
      type = (await this.#fs.lstat(target)).type;
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw err;
    }
    if (type === undefined) {
      try {
        if (block) await this.#fs.writeFile(target, new Uint8Array(0), { mode: 0o640 });
        else await this.#fs.mkdir(target, { recursive: false, mode: 0o750 });
      } catch (err) {
        throw fail(method, GrpcStatus.INTERNAL, `cannot create target path ${target}: ${errorMessage(err)}`);
      }
      return;
    }
    const want = block ? 'file' : 'directory';
    if (type !== want) throw fail(method, GrpcStatus.INTERNAL, `target path ${target} exists and is a ${type}, not a ${want}`);
  }

  async #ensureDeviceFile(volumeId: string): Promise<void> {
    const device = fakeDevicePath(volumeId);
    await this.#fs.mkdir(posix.dirname(device), { recursive: true, mode: 0o755 });
    try {
      await this.#fs.lstat(device);
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw err;
      await this.#fs.writeFile(device, new Uint8Array(0), { mode: 0o660 });
    }
  }
}
