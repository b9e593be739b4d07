/**
 * The ONE CSI Node state machine both hand-written drivers share: the in-process fake
 * (src/adapters/memory/fakeCsiDriver.ts, used by unit tests and the simulator) and `nodevol mock-driver`
 * (src/mockdriver/nodeServer.ts, a real gRPC process). It holds no I/O: each driver asks it for a
 * decision (refuse with a gRPC code, or go ahead, telling whether the call is a repeat of one
 * already recorded), performs the mounts through its own ports, then records the outcome here.
 *
 * What it decides, in the order the CSI spec's argument checks come (spec.md, Node service):
 *  - NodeStageVolume: volume id, staging path, capability; a volume staged at ANOTHER path is
 *    FAILED_PRECONDITION; the same path is an idempotent repeat.
 *  - NodeUnstageVolume: volume id, staging path; while a target is still published, *strict*
 *    mode refuses (csi-driver-host-path answers this way) and *lenient* mode accepts, so that the
 *    simulator's invariants, not the driver, catch a wrong order.
 *  - NodePublishVolume: volume id, target, capability, staging path (when the driver stages and
 *    the volume is not an inline ephemeral one); a volume not staged at that path is
 *    FAILED_PRECONDITION.
 *    A SINGLE_NODE_SINGLE_WRITER volume already published at another target is
 *    FAILED_PRECONDITION ({@link decideSingleWriter}).
 *  - NodeUnpublishVolume: volume id, target.
 *
 * Concurrency ({@link VolumeLocks}): one call per volume id at a time; a second call for a busy
 * volume answers ABORTED at once, as drivers built on csi-lib-utils' VolumeLocks do.
 *
 * Faults are the one fault model of src/csi/faults.ts (rules matched by its CsiFaultBook):
 * error with a code N times (before or after the effect), delay, hang, exit, and "time out at the
 * client but keep running at the driver".
 *
 * {@link CsiNodeState} is the per-volume record (staged path, published targets, access kind) with
 * snapshot/restore, so the simulator can copy a driver's state between runs.
 */
import { GrpcStatus } from '../ports/csi.js';

export type CsiNodeMode = 'strict' | 'lenient';
export type CsiAccessKind = 'mount' | 'block';

/** A refusal: the gRPC code and details the driver answers with. */
export interface CsiRefusal {
  readonly code: number;
  readonly details: string;
}

/** Go ahead; `repeat` when the state already records exactly this (the driver only re-checks its mount). */
export interface CsiGoAhead {
  readonly repeat: boolean;
}

export type CsiDecision = ({ readonly ok: true } & CsiGoAhead) | ({ readonly ok: false } & CsiRefusal);

/** The driver's view of one volume on this node. */
export interface NodeVolumeView {
  readonly stagedAt: string | undefined;
  readonly publishedAt: ReadonlySet<string>;
}

export interface StageQuestion {
  readonly volumeId: string;
  readonly stagingTargetPath: string;
  /** undefined when the request carries no usable capability. */
  readonly access: CsiAccessKind | undefined;
}

export interface UnstageQuestion {
  readonly volumeId: string;
  readonly stagingTargetPath: string;
}

export interface PublishQuestion {
  readonly volumeId: string;
  readonly targetPath: string;
  readonly stagingTargetPath: string;
  readonly access: CsiAccessKind | undefined;
  /** Volume context csi.storage.k8s.io/ephemeral=true: never staged. */
  readonly ephemeral: boolean;
}

export interface UnpublishQuestion {
  readonly volumeId: string;
  readonly targetPath: string;
}

export interface NodeRules {
  readonly mode: CsiNodeMode;
  /** The driver has STAGE_UNSTAGE_VOLUME. */
  readonly stageUnstage: boolean;
  /** Code of a strict refusal of NodeUnstageVolume while published (default FAILED_PRECONDITION). */
  readonly stillPublishedCode?: number;
}

const refuse = (code: number, details: string): CsiDecision => ({ ok: false, code, details });
const goAhead = (repeat: boolean): CsiDecision => ({ ok: true, repeat });

/**
 * Extra checks a driver adds after the argument checks (the mock: NOT_FOUND for an unknown
 * volume, INVALID_ARGUMENT for the wrong access kind; the fake: UNIMPLEMENTED without staging).
 */
export type ExtraCheck = () => CsiRefusal | undefined;

export function decideStage(view: NodeVolumeView | undefined, q: StageQuestion, extra?: ExtraCheck): CsiDecision {
  if (q.volumeId === '') return refuse(GrpcStatus.INVALID_ARGUMENT, 'volume ID missing in request');
  if (q.stagingTargetPath === '') return refuse(GrpcStatus.INVALID_ARGUMENT, 'staging target path missing in request');
  if (q.access === undefined) return refuse(GrpcStatus.INVALID_ARGUMENT, 'volume capability missing in request');
  const more = extra?.();
  if (more !== undefined) return { ok: false, ...more };
  if (view?.stagedAt !== undefined && view.stagedAt !== q.stagingTargetPath) {
    return refuse(GrpcStatus.FAILED_PRECONDITION, `volume ${q.volumeId} is already staged at ${view.stagedAt}`);
  }
  return goAhead(view?.stagedAt === q.stagingTargetPath);
}

export function decideUnstage(view: NodeVolumeView | undefined, q: UnstageQuestion, rules: NodeRules, extra?: ExtraCheck): CsiDecision {
  if (q.volumeId === '') return refuse(GrpcStatus.INVALID_ARGUMENT, 'volume ID missing in request');
  if (q.stagingTargetPath === '') return refuse(GrpcStatus.INVALID_ARGUMENT, 'staging target path missing in request');
  const more = extra?.();
  if (more !== undefined) return { ok: false, ...more };
  if (rules.mode === 'strict' && view !== undefined && view.publishedAt.size > 0) {
    return refuse(
      rules.stillPublishedCode ?? GrpcStatus.FAILED_PRECONDITION,
      `volume ${q.volumeId} is still published at ${[...view.publishedAt].sort().join(', ')}`,
    );
  }
  // Not staged at that path: nothing to do, success (idempotent).
  return goAhead(view?.stagedAt !== q.stagingTargetPath);
}

export function decidePublish(view: NodeVolumeView | undefined, q: PublishQuestion, rules: NodeRules, extra?: ExtraCheck): CsiDecision {
  if (q.volumeId === '') return refuse(GrpcStatus.INVALID_ARGUMENT, 'volume ID missing in request');
  if (q.targetPath === '') return refuse(GrpcStatus.INVALID_ARGUMENT, 'target path missing in request');
  if (q.access === undefined) return refuse(GrpcStatus.INVALID_ARGUMENT, 'volume capability missing in request');
  const staged = rules.stageUnstage && !q.ephemeral;
  if (staged && q.stagingTargetPath === '') return refuse(GrpcStatus.INVALID_ARGUMENT, 'staging target path missing in request');
  const more = extra?.();
  if (more !== undefined) return { ok: false, ...more };
  if (staged && view?.stagedAt !== q.stagingTargetPath) {
    return refuse(GrpcStatus.FAILED_PRECONDITION, `volume ${q.volumeId} is not staged at ${q.stagingTargetPath}`);
  }
  return goAhead(view?.publishedAt.has(q.targetPath) === true);
}

/**
 * The CSI spec's SINGLE_NODE_SINGLE_WRITER (spec.md, VolumeCapability.AccessMode: "can only be
 * published once as read/write at a single workload on a single node"): a publish of such a
 * volume to a target other than the one(s) it is published at is refused FAILED_PRECONDITION, as
 * csi-driver-host-path refuses it. The same target again is an idempotent repeat, not refused.
 * undefined: no objection (any other access mode, or nothing else published).
 */
export function decideSingleWriter(view: NodeVolumeView | undefined, q: { readonly volumeId: string; readonly targetPath: string; readonly accessMode: string | number | undefined }): CsiRefusal | undefined {
  if (q.accessMode !== 'SINGLE_NODE_SINGLE_WRITER') return undefined;
  const other = [...(view?.publishedAt ?? [])].sort().find((t) => t !== q.targetPath);
  if (other === undefined) return undefined;
  return { code: GrpcStatus.FAILED_PRECONDITION, details: `volume ${q.volumeId} with SINGLE_NODE_SINGLE_WRITER access is already published at ${other}` };
}

export function decideUnpublish(view: NodeVolumeView | undefined, q: UnpublishQuestion, extra?: ExtraCheck): CsiDecision {
  if (q.volumeId === '') return refuse(GrpcStatus.INVALID_ARGUMENT, 'volume ID missing in request');
  if (q.targetPath === '') return refuse(GrpcStatus.INVALID_ARGUMENT, 'target path missing in request');
  const more = extra?.();
  if (more !== undefined) return { ok: false, ...more };
  return goAhead(view?.publishedAt.has(q.targetPath) !== true);
}

/** Per-volume locks: a call for a volume with a call in flight answers ABORTED. */
export class VolumeLocks {
  readonly #busy = new Set<string>();

  /** Takes the lock, or returns the ABORTED refusal when the volume is busy. '' (no volume) never locks. */
  acquire(volumeId: string): CsiRefusal | undefined {
    if (volumeId === '') return undefined;
    if (this.#busy.has(volumeId)) {
      return { code: GrpcStatus.ABORTED, details: `an operation with the given volume ID ${volumeId} already exists` };
    }
    this.#busy.add(volumeId);
    return undefined;
  }

  release(volumeId: string): void {
    this.#busy.delete(volumeId);
  }

  isBusy(volumeId: string): boolean {
    return this.#busy.has(volumeId);
  }

  /** The driver process is gone: nothing is in flight any more. */
  clear(): void {
    this.#busy.clear();
  }
}

/** A persisted copy of a driver's node state (sorted, plain data). */
export interface NodeStateSnapshot {
  readonly volumes: readonly {
    readonly volumeId: string;
    readonly stagedAt?: string;
    readonly publishedAt: readonly string[];
    readonly block: boolean;
  }[];
}

interface MutableVolume {
  stagedAt: string | undefined;
  readonly publishedAt: Set<string>;
  block: boolean;
}

/** The per-volume record of what is staged and published, with snapshot/restore. */
export class CsiNodeState {
  readonly #volumes = new Map<string, MutableVolume>();

  view(volumeId: string): NodeVolumeView | undefined {
    return this.#volumes.get(volumeId);
  }

  ids(): string[] {
    return [...this.#volumes.keys()].sort();
  }

  recordStaged(volumeId: string, stagingTargetPath: string, block: boolean): void {
    const v = this.#volumeFor(volumeId);
    v.stagedAt = stagingTargetPath;
    v.block = block;
  }

  recordUnstaged(volumeId: string): void {
    const v = this.#volumes.get(volumeId);
    if (v === undefined) return;
    v.stagedAt = undefined;
    this.#forgetIfIdle(volumeId);
  }

  recordPublished(volumeId: string, targetPath: string, block: boolean): void {
    const v = this.#volumeFor(volumeId);
    v.publishedAt.add(targetPath);
    v.block = block;
  }

  recordUnpublished(volumeId: string, targetPath: string): void {
    const v = this.#volumes.get(volumeId);
    if (v === undefined) return;
    v.publishedAt.delete(targetPath);
    this.#forgetIfIdle(volumeId);
  }

  isBlock(volumeId: string): boolean {
    return this.#volumes.get(volumeId)?.block === true;
  }

  snapshot(): NodeStateSnapshot {
    return {
      volumes: this.ids().map((volumeId) => {
        const v = this.#volumes.get(volumeId);
        const publishedAt = v === undefined ? [] : [...v.publishedAt].sort();
        const base = { volumeId, publishedAt, block: v?.block === true };
        return v?.stagedAt === undefined ? base : { ...base, stagedAt: v.stagedAt };
      }),
    };
  }

  restore(s: NodeStateSnapshot): void {
    this.#volumes.clear();
    for (const v of s.volumes) {
      this.#volumes.set(v.volumeId, { stagedAt: v.stagedAt, publishedAt: new Set(v.publishedAt), block: v.block });
    }
  }

  #volumeFor(volumeId: string): MutableVolume {
    let v = this.#volumes.get(volumeId);
    if (v === undefined) {
      v = { stagedAt: undefined, publishedAt: new Set(), block: false };
      this.#volumes.set(volumeId, v);
    }
    return v;
  }

  #forgetIfIdle(volumeId: string): void {
    const v = this.#volumes.get(volumeId);
    if (v !== undefined && v.stagedAt === undefined && v.publishedAt.size === 0) this.#volumes.delete(volumeId);
  }
}
