/**
 * The mock driver's volumes, as its servers share them: what the controller knows of each volume
 * (its name, capacity, access type, the nodes it is attached to, whether an ephemeral publish
 * made it) and, in the shared CSI node state machine's record (src/csi/nodeStateMachine.ts),
 * where the node staged and published it. {@link MockVolumes.persist} makes one volume's record
 * durable (state.ts: one file per volume) before the call that changed it answers.
 *
 * Also where a volume's backing storage lives: `<state-dir>/volumes/<id>/` (mount access) or
 * `<state-dir>/volumes/<id>.img` (block access), bound on `<staging>/dev` when staged.
 */
import * as posix from 'node:path/posix';

import { errorMessage } from '../ports/fs.js';
import { GrpcStatus } from '../ports/csi.js';
import { CsiNodeState, type CsiRefusal, type NodeVolumeView } from '../csi/nodeStateMachine.js';
import type { MockStateStore, MockVolumeKind, MockVolumeRecord } from './state.js';
import { internal, status } from './status.js';

/** Capacity of a volume created without a capacity range: 1 MiB. */
export const DEFAULT_CAPACITY_BYTES = 1024 * 1024;
/** The largest capacity the mock provisions or expands to: 1 TiB (its storage is a sparse file or a directory). */
export const MAX_CAPACITY_BYTES = 2 ** 40;

/** Backing storage of a volume: the directory (mount access) and the file (block access). */
export function mockBackingPaths(stateDir: string, volumeId: string): { readonly dir: string; readonly file: string } {
  const volumes = posix.join(stateDir, 'volumes');
  return { dir: posix.join(volumes, volumeId), file: posix.join(volumes, `${volumeId}.img`) };
}

/** Where NodeStageVolume binds a block volume's file: `<staging>/dev`. */
export function mockBlockDevicePath(stagingTargetPath: string): string {
  return posix.join(stagingTargetPath, 'dev');
}

/**
 * What the controller side knows of a volume (its storage, its attachments). Where the node
 * staged and published it lives in the shared {@link CsiNodeState}.
 */
export interface VolumeState {
  readonly id: string;
  readonly name: string;
  /** Grows with NodeExpandVolume. */
  capacity: number;
  readonly kind: MockVolumeKind;
  readonly attachedNodes: Set<string>;
  /** Created by an ephemeral NodePublishVolume; deleted by its last NodeUnpublishVolume. */
  readonly ephemeral: boolean;
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

export class MockVolumes {
  readonly #volumes = new Map<string, VolumeState>();
  /** Where each volume is staged and published: the shared CSI node state machine's record. */
  readonly node = new CsiNodeState();

  constructor(private readonly store: MockStateStore) {}

  /** Loads the records (migrating a legacy state.json) into the book and the node state. */
  async load(): Promise<void> {
    const records = await this.store.load();
    for (const r of records) this.#volumes.set(r.id, fromRecord(r));
    this.node.restore({
      volumes: records.filter((r) => r.stagedAt !== undefined || r.publishedAt.length > 0).map((r) => ({ volumeId: r.id, publishedAt: r.publishedAt, block: r.kind === 'block', ...(r.stagedAt === undefined ? {} : { stagedAt: r.stagedAt }) })),
    });
  }

  get size(): number {
    return this.#volumes.size;
  }

  get(volumeId: string): VolumeState | undefined {
    return this.#volumes.get(volumeId);
  }

  set(vol: VolumeState): void {
    this.#volumes.set(vol.id, vol);
  }

  delete(volumeId: string): void {
    this.#volumes.delete(volumeId);
  }

  /** The volume ids, sorted. */
  ids(): string[] {
    return [...this.#volumes.keys()].sort();
  }

  /** Copies of every volume's record, sorted by id. */
  records(): MockVolumeRecord[] {
    return [...this.#volumes.values()].map((v) => toRecord(v, this.node.view(v.id))).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  record(volumeId: string): MockVolumeRecord | undefined {
    const v = this.#volumes.get(volumeId);
    return v === undefined ? undefined : toRecord(v, this.node.view(volumeId));
  }

  /** The volume, or NOT_FOUND. */
  require(volumeId: string): VolumeState {
    const vol = this.#volumes.get(volumeId);
    if (vol === undefined) throw status(GrpcStatus.NOT_FOUND, `volume ${volumeId} not found`);
    return vol;
  }

  /** The mock's own checks after the arguments: the volume exists (NOT_FOUND) with this access kind. */
  check(volumeId: string, kind: MockVolumeKind | undefined): CsiRefusal | undefined {
    const vol = this.#volumes.get(volumeId);
    if (vol === undefined) return { code: GrpcStatus.NOT_FOUND, details: `volume ${volumeId} not found` };
    if (kind !== undefined && vol.kind !== kind) {
      return { code: GrpcStatus.INVALID_ARGUMENT, details: `volume ${vol.id} was created for ${vol.kind} access, not ${kind}` };
    }
    return undefined;
  }

  isPublishedAt(volumeId: string, target: string): boolean {
    return this.node.view(volumeId)?.publishedAt.has(target) === true;
  }

  /** Makes one volume's current record (or its absence) durable before the call answers. */
  async persist(volumeId: string): Promise<void> {
    try {
      await this.store.save(volumeId, () => this.record(volumeId));
    } catch (err) {
      throw internal(`cannot save the state of volume ${volumeId} in ${this.store.dir}: ${errorMessage(err)}`);
    }
  }
}
