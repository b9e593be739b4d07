/**
 * An in-process, stateful CSI Node service in the spirit of csi-driver-host-path, for tests and
 * the simulator. It really mounts: stage mounts a fake device (`/dev/fake/<volumeId>`) on the
 * staging path and publish bind-mounts the staging path onto the target, through a
 * {@link MemoryMounter}, so the mount table kubelet's code reads back is what a real driver leaves.
 *
 * The CSI spec is the contract (field notes §4.4): every call is idempotent; NodeUnstageVolume is
 * refused while the volume is still published; NodePublishVolume needs the volume staged at the
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
 * Time comes from the injected Clock only (injected delays sleep on it).
 */
import * as posix from 'node:path/posix';

import { errorCode, errorMessage, type FileSystem } from '../../host/fs.js';
import type { Clock } from '../../host/clock.js';
import type { MemoryMounter } from '../../adapters/memory/memoryMounter.js';
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
} from '../types.js';

export interface FakeCsiDriverOptions {
  readonly name: string;
  /** Default ['STAGE_UNSTAGE_VOLUME']. */
  readonly capabilities?: readonly NodeCapability[];
  readonly fs: FileSystem;
  readonly mounter: MemoryMounter;
  readonly clock: Clock;
  /**
   * The code NodeUnstageVolume answers while the volume is still published. Default
   * FAILED_PRECONDITION; csi-driver-host-path answers INTERNAL (field notes §4.3).
   */
  readonly stillPublishedCode?: number;
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

export interface FakeCsiFault {
  readonly method: CsiMethod;
  /** Only calls for this volume (any volume when absent). */
  readonly volumeId?: string;
  /** gRPC status to fail with. */
  readonly code?: number;
  /** How many matching calls it applies to (default Infinity). */
  readonly times?: number;
  /** Sleep this long on the driver's Clock before anything else happens. */
  readonly delayMs?: number;
  /** Do not answer until {@link FakeCsiDriver.releaseHangs} (then carry on normally). */
  readonly hang?: boolean;
  /** With `code`: perform the real effect first, then fail ("done on the driver, unknown to kubelet"). */
  readonly afterEffect?: boolean;
}

export interface FakeCsiFaultHandle {
  /** Stops the fault from applying to further calls. */
  remove(): void;
  /** Matching calls it will still apply to. */
  remaining(): number;
}

interface ActiveFault {
  readonly spec: FakeCsiFault;
  remaining: number;
}

interface MutableVolume {
  stagedAt: string | undefined;
  readonly publishedAt: Set<string>;
  block: boolean;
}

interface Hung {
  readonly method: CsiMethod;
  readonly release: () => void;
  readonly fail: (err: Error) => void;
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

export class FakeCsiDriver implements CsiNodeClient {
  readonly name: string;
  readonly #capabilities: readonly NodeCapability[];
  readonly #fs: FileSystem;
  readonly #mounter: MemoryMounter;
  readonly #clock: Clock;
  readonly #stillPublishedCode: number;
  readonly #volumes = new Map<string, MutableVolume>();
  readonly #faults: ActiveFault[] = [];
  #hung: Hung[] = [];
  #seq = 0;
  /** Effects run one at a time (hostpath holds one lock for every call). */
  #lock: Promise<unknown> = Promise.resolve();
  /** Every finished call, in order of completion. */
  readonly calls: FakeCsiCall[] = [];

  constructor(options: FakeCsiDriverOptions) {
    this.name = options.name;
    this.#capabilities = [...(options.capabilities ?? ['STAGE_UNSTAGE_VOLUME'])];
    this.#fs = options.fs;
    this.#mounter = options.mounter;
    this.#clock = options.clock;
    this.#stillPublishedCode = options.stillPublishedCode ?? GrpcStatus.FAILED_PRECONDITION;
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
    const v = this.#volumes.get(volumeId);
    return v === undefined ? undefined : FakeCsiDriver.#copy(v);
  }

  /** Copies of every known volume's state. */
  volumes(): Map<string, FakeVolumeState> {
    return new Map([...this.#volumes].map(([id, v]) => [id, FakeCsiDriver.#copy(v)]));
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
    const active: ActiveFault = { spec: { ...fault }, remaining: fault.times ?? Infinity };
    if (active.remaining > 0) this.#faults.push(active);
    return {
      remove: () => {
        const i = this.#faults.indexOf(active);
        if (i >= 0) this.#faults.splice(i, 1);
      },
      remaining: () => (this.#faults.includes(active) ? active.remaining : 0),
    };
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
   * that were hanging fail with UNAVAILABLE without their effect. Mounts are the MemoryMounter's.
   */
  reboot(): void {
    const hung = this.#hung;
    this.#hung = [];
    for (const h of hung) h.fail(fail(h.method, GrpcStatus.UNAVAILABLE, 'driver restarted'));
  }

  // ---------------------------------------------------------------- call pipeline

  async #call<T>(method: CsiMethod, volumeId: string, request: FakeCsiRequest, effect: () => Promise<T>): Promise<T> {
    const seq = ++this.#seq;
    const atMs = this.#clock.nowMs();
    const record = (outcome: FakeCsiOutcome, details: string): void => {
      this.calls.push({ seq, method, volumeId, request, outcome, details, atMs, endMs: this.#clock.nowMs() });
    };
    const fault = this.#take(method, volumeId);
    try {
      if (fault?.hang === true) {
        await new Promise<void>((resolve, reject) => this.#hung.push({ method, release: resolve, fail: reject }));
      }
      if (fault?.delayMs !== undefined && fault.delayMs > 0) await this.#clock.sleep(fault.delayMs);
      const code = fault?.code !== undefined && fault.code !== GrpcStatus.OK ? fault.code : undefined;
      if (code !== undefined && fault?.afterEffect !== true) throw fail(method, code, `injected ${statusName(code)}`);
      let result: T;
      try {
        result = await this.#exclusive(effect);
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

  #take(method: CsiMethod, volumeId: string): FakeCsiFault | undefined {
    const i = this.#faults.findIndex(
      (f) => f.spec.method === method && (f.spec.volumeId === undefined || f.spec.volumeId === volumeId),
    );
    const active = this.#faults[i];
    if (active === undefined) return undefined;
    active.remaining -= 1;
    if (active.remaining <= 0) this.#faults.splice(i, 1);
    return active.spec;
  }

  #exclusive<T>(body: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(body, body);
    this.#lock = run.catch(() => undefined);
    return run;
  }

  // ---------------------------------------------------------------- the Node service

  #hasStageUnstage(): boolean {
    return this.#capabilities.includes('STAGE_UNSTAGE_VOLUME');
  }

  async #stage(req: NodeStageVolumeRequest): Promise<void> {
    const m: CsiMethod = 'NodeStageVolume';
    if (req.volumeId === '') throw fail(m, GrpcStatus.INVALID_ARGUMENT, 'volume ID missing in request');
    if (req.stagingTargetPath === '') throw fail(m, GrpcStatus.INVALID_ARGUMENT, 'staging target path missing in request');
    const cap = FakeCsiDriver.#capability(m, req.volumeCapability);
    if (!this.#hasStageUnstage()) throw fail(m, GrpcStatus.UNIMPLEMENTED, `driver ${this.name} has no STAGE_UNSTAGE_VOLUME`);
    const existing = this.#volumes.get(req.volumeId);
    if (existing?.stagedAt !== undefined && existing.stagedAt !== req.stagingTargetPath) {
      throw fail(m, GrpcStatus.FAILED_PRECONDITION, `volume ${req.volumeId} is already staged at ${existing.stagedAt}`);
    }
    await this.#requireDirectory(m, req.stagingTargetPath, 'staging target path');
    const block = cap.block !== undefined;
    if (existing?.stagedAt === req.stagingTargetPath && (await this.#isMountPoint(req.stagingTargetPath))) return;
    if (block) await this.#ensureDeviceFile(req.volumeId);
    await this.#mounter.mount(
      fakeDevicePath(req.volumeId),
      req.stagingTargetPath,
      FakeCsiDriver.#fsType(cap),
      cap.mount?.mountFlags ?? [],
    );
    const vol = this.#volumeFor(req.volumeId);
    vol.stagedAt = req.stagingTargetPath;
    vol.block = block;
  }

  async #unstage(req: NodeUnstageVolumeRequest): Promise<void> {
    const m: CsiMethod = 'NodeUnstageVolume';
    if (req.volumeId === '') throw fail(m, GrpcStatus.INVALID_ARGUMENT, 'volume ID missing in request');
    if (req.stagingTargetPath === '') throw fail(m, GrpcStatus.INVALID_ARGUMENT, 'staging target path missing in request');
    const vol = this.#volumes.get(req.volumeId);
    if (vol !== undefined && vol.publishedAt.size > 0) {
      throw fail(m, this.#stillPublishedCode, `volume ${req.volumeId} is still published at ${[...vol.publishedAt].sort().join(', ')}`);
    }
    if (vol?.stagedAt !== req.stagingTargetPath) return;
    try {
      await this.#mounter.unmount(req.stagingTargetPath);
    } catch (err) {
      const code = errorCode(err);
      if (code !== 'EINVAL' && code !== 'ENOENT') throw err;
    }
    vol.stagedAt = undefined;
    this.#forgetIfIdle(req.volumeId);
  }

  async #publish(req: NodePublishVolumeRequest): Promise<void> {
    const m: CsiMethod = 'NodePublishVolume';
    if (req.volumeId === '') throw fail(m, GrpcStatus.INVALID_ARGUMENT, 'volume ID missing in request');
    if (req.targetPath === '') throw fail(m, GrpcStatus.INVALID_ARGUMENT, 'target path missing in request');
    const cap = FakeCsiDriver.#capability(m, req.volumeCapability);
    // Like csi-driver-host-path, an inline ephemeral volume is published without staging: kubelet
    // never stages it and sends no staging path (reference §1.4, §3.3).
    const ephemeral = req.volumeContext['csi.storage.k8s.io/ephemeral'] === 'true';
    const staged = this.#hasStageUnstage() && !ephemeral;
    if (staged && req.stagingTargetPath === '') {
      throw fail(m, GrpcStatus.INVALID_ARGUMENT, 'staging target path missing in request');
    }
    const existing = this.#volumes.get(req.volumeId);
    if (staged && existing?.stagedAt !== req.stagingTargetPath) {
      throw fail(m, GrpcStatus.FAILED_PRECONDITION, `volume ${req.volumeId} is not staged at ${req.stagingTargetPath}`);
    }
    if (existing?.publishedAt.has(req.targetPath) === true && (await this.#isMountPoint(req.targetPath))) return;

    const block = cap.block !== undefined;
    await this.#createTarget(m, req.targetPath, block);
    const options = [...(req.readonly ? ['ro'] : []), ...(cap.mount?.mountFlags ?? [])];
    if (block) {
      await this.#ensureDeviceFile(req.volumeId);
      await this.#mounter.mount(fakeDevicePath(req.volumeId), req.targetPath, '', ['bind', ...options]);
    } else if (staged) {
      await this.#mounter.mount(req.stagingTargetPath, req.targetPath, '', ['bind', ...options]);
    } else {
      await this.#mounter.mount(fakeDevicePath(req.volumeId), req.targetPath, FakeCsiDriver.#fsType(cap), options);
    }
    const vol = this.#volumeFor(req.volumeId);
    vol.publishedAt.add(req.targetPath);
    vol.block = block;
  }

  async #unpublish(req: NodeUnpublishVolumeRequest): Promise<void> {
    const m: CsiMethod = 'NodeUnpublishVolume';
    if (req.volumeId === '') throw fail(m, GrpcStatus.INVALID_ARGUMENT, 'volume ID missing in request');
    if (req.targetPath === '') throw fail(m, GrpcStatus.INVALID_ARGUMENT, 'target path missing in request');
    if (await this.#isMountPoint(req.targetPath)) await this.#mounter.unmount(req.targetPath);
    try {
      const st = await this.#fs.lstat(req.targetPath);
      if (st.type === 'directory') await this.#fs.rmdir(req.targetPath);
      else await this.#fs.unlink(req.targetPath);
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw err;
    }
    const vol = this.#volumes.get(req.volumeId);
    if (vol !== undefined) {
      vol.publishedAt.delete(req.targetPath);
      this.#forgetIfIdle(req.volumeId);
    }
  }

  // ---------------------------------------------------------------- helpers

  static #capability(method: CsiMethod, cap: VolumeCapability | undefined): VolumeCapability {
    if (cap === undefined || (cap.mount === undefined && cap.block === undefined)) {
      throw fail(method, GrpcStatus.INVALID_ARGUMENT, 'volume capability missing in request');
    }
    if (cap.mount !== undefined && cap.block !== undefined) {
      throw fail(method, GrpcStatus.INVALID_ARGUMENT, 'volume capability has both mount and block access types');
    }
    return cap;
  }

  static #fsType(cap: VolumeCapability): string {
    const t = cap.mount?.fsType ?? '';
    return t === '' ? 'ext4' : t;
  }

  static #copy(v: MutableVolume): FakeVolumeState {
    const base = { publishedAt: new Set(v.publishedAt), block: v.block };
    return v.stagedAt === undefined ? base : { stagedAt: v.stagedAt, ...base };
  }

  #volumeFor(volumeId: string): MutableVolume {
    let vol = this.#volumes.get(volumeId);
    if (vol === undefined) {
      vol = { stagedAt: undefined, publishedAt: new Set(), block: false };
      this.#volumes.set(volumeId, vol);
    }
    return vol;
  }

  #forgetIfIdle(volumeId: string): void {
    const vol = this.#volumes.get(volumeId);
    if (vol !== undefined && vol.stagedAt === undefined && vol.publishedAt.size === 0) this.#volumes.delete(volumeId);
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
