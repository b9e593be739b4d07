/**
 * The mock driver's Node service, as csi-driver-host-path's node server, really mounting:
 *
 * - NodeStageVolume bind-mounts the volume's backing directory on the staging path, or its file
 *   on `<staging>/dev` (a file it creates); NodePublishVolume creates the target (a directory, or
 *   a file for block) and bind-mounts the staged path on it, read-only when asked.
 * - An inline ephemeral volume (NodePublishVolume with volume context
 *   csi.storage.k8s.io/ephemeral=true, no staging path) is created by its first publish under the
 *   id kubelet sends, its backing directory bind-mounted on the target, and deleted by its last
 *   unpublish.
 * - Mounts do not survive a reboot, and the server copes: a NodeStage/NodePublish whose record is
 *   there but whose mount is not mounts again; a NodeUnstage/NodeUnpublish whose mount is gone
 *   just clears the record (and removes the target). A volume still recorded as published after a
 *   reboot keeps NodeUnstageVolume refused (strict mode), until its targets are unpublished.
 * - NodeGetVolumeStats (capacity, bytes used, the volume condition) and NodeExpandVolume.
 *
 * Decisions (argument checks, idempotency, strict/lenient NodeUnstageVolume) come from the shared
 * CSI node state machine (src/csi/nodeStateMachine.ts), the same one the in-process fake uses;
 * this server performs the mounts and the storage (storage.ts) and persists each change
 * (volumes.ts) before it answers.
 */
import { errorCode, errorMessage } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import { GrpcStatus } from '../ports/csi.js';
import type { NodeHandlers } from '../adapters/grpc/server.js';
import type * as wire from '../adapters/grpc/messages.js';
import type { MessageInit } from '../adapters/grpc/messages.js';
import { decidePublish, decideSingleWriter, decideStage, decideUnpublish, decideUnstage, type NodeRules } from '../csi/nodeStateMachine.js';
import type { Dispatch } from './callPipeline.js';
import { checkCoPath, checkVolumeId } from './confine.js';
import type { MockVolumeKind } from './state.js';
import { accessKind, accessKindOrUndefined, decided, internal, invalid, status } from './status.js';
import type { MockStorage } from './storage.js';
import { DEFAULT_CAPACITY_BYTES, MAX_CAPACITY_BYTES, mockBackingPaths, mockBlockDevicePath, type MockVolumes, type VolumeState } from './volumes.js';

/** What NodeGetCapabilities reports. */
export const MOCK_NODE_CAPABILITIES = ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION', 'EXPAND_VOLUME'] as const satisfies readonly wire.NodeCapabilityName[];
/** The volume context key kubelet sets on the NodePublishVolume of an inline ephemeral volume. */
export const EPHEMERAL_CONTEXT_KEY = 'csi.storage.k8s.io/ephemeral';

export interface MockNodeServerOptions {
  /** NodeGetInfo's node_id. */
  readonly nodeId: string;
  readonly stateDir: string;
  readonly volumes: MockVolumes;
  readonly storage: MockStorage;
  readonly logger: Logger;
  /** Staging and target paths must lie below one of these (confine.ts; normalized). */
  readonly allowedRoots: readonly string[];
  readonly rules: NodeRules;
  /** NodeGetCapabilities also reports SINGLE_NODE_MULTI_WRITER. */
  readonly singleNodeMultiWriter: boolean;
}

export class MockNodeServer {
  readonly #o: MockNodeServerOptions;
  readonly #volumes: MockVolumes;
  readonly #storage: MockStorage;

  constructor(options: MockNodeServerOptions) {
    this.#o = options;
    this.#volumes = options.volumes;
    this.#storage = options.storage;
  }

  handlers(dispatch: Dispatch): NodeHandlers {
    return {
      nodeStageVolume: (req) => dispatch('NodeStageVolume', req, req.volumeId, () => this.#stage(req)),
      nodeUnstageVolume: (req) => dispatch('NodeUnstageVolume', req, req.volumeId, () => this.#unstage(req)),
      nodePublishVolume: (req) => dispatch('NodePublishVolume', req, req.volumeId, () => this.#publish(req)),
      nodeUnpublishVolume: (req) => dispatch('NodeUnpublishVolume', req, req.volumeId, () => this.#unpublish(req)),
      nodeGetCapabilities: (req) =>
        dispatch('NodeGetCapabilities', req, '', () =>
          Promise.resolve({
            capabilities: [...MOCK_NODE_CAPABILITIES, ...(this.#o.singleNodeMultiWriter ? (['SINGLE_NODE_MULTI_WRITER'] as const) : [])].map((type) => ({ rpc: { type } })),
          }),
        ),
      // Stats read the volume without changing it: no volume lock (kubelet polls them while it stages and publishes).
      nodeGetVolumeStats: (req) => dispatch('NodeGetVolumeStats', req, req.volumeId, () => this.#volumeStats(req), { lock: false }),
      nodeExpandVolume: (req) => dispatch('NodeExpandVolume', req, req.volumeId, () => this.#nodeExpand(req)),
      nodeGetInfo: (req) => dispatch('NodeGetInfo', req, '', () => Promise.resolve({ nodeId: this.#o.nodeId })),
    };
  }

  async #stage(req: wire.NodeStageVolumeRequest): Promise<MessageInit<wire.NodeStageVolumeResponse>> {
    if (req.volumeId !== '') checkVolumeId(req.volumeId);
    const kind = accessKindOrUndefined(req.volumeCapability);
    const node = this.#volumes.node;
    decided(
      decideStage(node.view(req.volumeId), { volumeId: req.volumeId, stagingTargetPath: req.stagingTargetPath, access: kind }, () =>
        this.#volumes.check(req.volumeId, kind),
      ),
    );
    await checkCoPath(this.#storage.fs, req.stagingTargetPath, 'staging target path', this.#o.allowedRoots);
    const vol = this.#volumes.require(req.volumeId);
    const staging = req.stagingTargetPath;
    await this.#storage.requireDirectory(staging, 'staging target path');
    const backing = mockBackingPaths(this.#o.stateDir, vol.id);
    if (kind === 'mount') {
      if (!(await this.#storage.isMountPoint(staging))) await this.#storage.mount(backing.dir, staging, []);
      else if (node.view(vol.id)?.stagedAt === undefined) this.#o.logger.warning('Staging path is already a mount point; taking it as this volume', { volumeId: vol.id, staging });
    } else {
      const device = mockBlockDevicePath(staging);
      await this.#storage.createTarget(device, 'block');
      if (!(await this.#storage.isMountPoint(device))) await this.#storage.mount(backing.file, device, []);
    }
    if (node.view(vol.id)?.stagedAt !== staging) {
      node.recordStaged(vol.id, staging, kind === 'block');
      await this.#volumes.persist(vol.id);
    }
    return {};
  }

  async #unstage(req: wire.NodeUnstageVolumeRequest): Promise<MessageInit<wire.NodeUnstageVolumeResponse>> {
    if (req.volumeId !== '') checkVolumeId(req.volumeId);
    const notStagedThere = decided(decideUnstage(this.#volumes.node.view(req.volumeId), req, this.#o.rules, () => this.#volumes.check(req.volumeId, undefined)));
    await checkCoPath(this.#storage.fs, req.stagingTargetPath, 'staging target path', this.#o.allowedRoots);
    const vol = this.#volumes.require(req.volumeId);
    const staging = req.stagingTargetPath;
    if (notStagedThere) return {};
    if (vol.kind === 'mount') {
      await this.#storage.unmountAll(staging);
    } else {
      const device = mockBlockDevicePath(staging);
      await this.#storage.unmountAll(device);
      await this.#storage.removeFile(device).catch((err: unknown) => {
        throw internal(`cannot remove ${device}: ${errorMessage(err)}`);
      });
    }
    this.#volumes.node.recordUnstaged(vol.id);
    await this.#volumes.persist(vol.id);
    return {};
  }

  async #publish(req: wire.NodePublishVolumeRequest): Promise<MessageInit<wire.NodePublishVolumeResponse>> {
    if (req.volumeId !== '') checkVolumeId(req.volumeId);
    const kindOrUndefined = accessKindOrUndefined(req.volumeCapability);
    if (req.targetPath !== '') await checkCoPath(this.#storage.fs, req.targetPath, 'target path', this.#o.allowedRoots);
    if (req.stagingTargetPath !== '') await checkCoPath(this.#storage.fs, req.stagingTargetPath, 'staging target path', this.#o.allowedRoots);
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
      decided(decidePublish(undefined, question, this.#o.rules));
      return this.#publishEphemeral(req, accessKind(req.volumeCapability));
    }
    decided(decidePublish(this.#volumes.node.view(req.volumeId), question, this.#o.rules, () => this.#volumes.check(req.volumeId, kindOrUndefined)));
    const kind = accessKind(req.volumeCapability);
    const vol = this.#volumes.require(req.volumeId);
    const staging = req.stagingTargetPath;
    const target = req.targetPath;
    const source = kind === 'mount' ? staging : mockBlockDevicePath(staging);
    if (!(await this.#storage.isMountPoint(source))) {
      throw status(GrpcStatus.FAILED_PRECONDITION, `volume ${vol.id} is recorded as staged at ${staging} but ${source} is not mounted; stage it again`);
    }
    const singleWriter = decideSingleWriter(this.#volumes.node.view(vol.id), { volumeId: vol.id, targetPath: target, accessMode: req.volumeCapability?.accessMode?.mode });
    if (singleWriter !== undefined) throw status(singleWriter.code, singleWriter.details);
    if (!(await this.#storage.isMountPoint(target))) {
      await this.#storage.createTarget(target, kind);
      await this.#storage.mount(source, target, req.readonly ? ['ro'] : []);
      if (req.readonly) await this.#storage.ensureReadOnly(source, target);
    } else if (!this.#volumes.isPublishedAt(vol.id, target)) {
      this.#o.logger.warning('Target path is already a mount point; taking it as this volume', { volumeId: vol.id, target });
    }
    if (!this.#volumes.isPublishedAt(vol.id, target)) {
      this.#volumes.node.recordPublished(vol.id, target, kind === 'block');
      await this.#volumes.persist(vol.id);
    }
    return {};
  }

  async #unpublish(req: wire.NodeUnpublishVolumeRequest): Promise<MessageInit<wire.NodeUnpublishVolumeResponse>> {
    if (req.volumeId !== '') checkVolumeId(req.volumeId);
    decided(decideUnpublish(this.#volumes.node.view(req.volumeId), req, () => this.#volumes.check(req.volumeId, undefined)));
    await checkCoPath(this.#storage.fs, req.targetPath, 'target path', this.#o.allowedRoots);
    const vol = this.#volumes.require(req.volumeId);
    const target = req.targetPath;
    // Only a target this volume was published at is unmounted and removed: any other path is not ours.
    if (!this.#volumes.isPublishedAt(vol.id, target)) return {};
    await this.#storage.unmountAll(target);
    const fs = this.#storage.fs;
    try {
      const st = await fs.lstat(target);
      if (st.type === 'directory') await fs.rmdir(target);
      else await fs.unlink(target);
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') throw internal(`cannot remove target path ${target}: ${errorMessage(err)}`);
    }
    this.#volumes.node.recordUnpublished(vol.id, target);
    // Like csi-driver-host-path, the last unpublish of an ephemeral volume deletes it.
    if (vol.ephemeral && this.#volumes.node.view(vol.id) === undefined) await this.#deleteEphemeral(vol);
    await this.#volumes.persist(vol.id);
    return {};
  }

  /** The volume a Node stats/expand call names, and whether `volumePath` is where it is staged or published. */
  #volumeAt(volumeId: string, volumePath: string): { vol: VolumeState; staged: boolean } {
    if (volumeId === '') throw invalid('volume ID missing in request');
    if (volumePath === '') throw invalid('volume path missing in request');
    checkVolumeId(volumeId);
    const vol = this.#volumes.require(volumeId);
    const view = this.#volumes.node.view(volumeId);
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
    await checkCoPath(this.#storage.fs, req.volumePath, 'volume path', this.#o.allowedRoots);
    const mountPoint = vol.kind === 'block' && staged ? mockBlockDevicePath(req.volumePath) : req.volumePath;
    const mounted = await this.#storage.isMountPoint(mountPoint);
    const volumeCondition = mounted
      ? { abnormal: false, message: `volume ${vol.id} is mounted at ${mountPoint}` }
      : { abnormal: true, message: `volume ${vol.id} is recorded at ${req.volumePath} but ${mountPoint} is not mounted; stage or publish it again` };
    if (vol.kind === 'block') return { usage: [{ unit: 'BYTES', total: vol.capacity }], volumeCondition };
    const used = Math.min(vol.capacity, await this.#storage.usedBytes(mockBackingPaths(this.#o.stateDir, vol.id).dir));
    return { usage: [{ unit: 'BYTES', total: vol.capacity, used, available: vol.capacity - used }], volumeCondition };
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
        await this.#storage.grow(mockBackingPaths(this.#o.stateDir, vol.id).file, required);
      } catch (err) {
        throw internal(`cannot grow the backing file of volume ${vol.id}: ${errorMessage(err)}`);
      }
    }
    vol.capacity = required;
    await this.#volumes.persist(vol.id);
    this.#o.logger.v(1).info('Expanded volume', { volumeId: vol.id, capacity: required });
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
    const backing = mockBackingPaths(this.#o.stateDir, req.volumeId);
    if (vol === undefined) {
      try {
        await this.#storage.fs.mkdir(backing.dir, { recursive: true, mode: 0o777 });
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
      this.#volumes.set(vol);
      await this.#volumes.persist(vol.id);
      this.#o.logger.v(1).info('Created ephemeral volume', { volumeId: vol.id });
    }
    if (!(await this.#storage.isMountPoint(target))) {
      await this.#storage.createTarget(target, 'mount');
      await this.#storage.mount(backing.dir, target, req.readonly ? ['ro'] : []);
      if (req.readonly) await this.#storage.ensureReadOnly(backing.dir, target);
    }
    if (!this.#volumes.isPublishedAt(vol.id, target)) {
      this.#volumes.node.recordPublished(vol.id, target, false);
      await this.#volumes.persist(vol.id);
    }
    return {};
  }

  /** Removes an unpublished ephemeral volume's backing directory and forgets it. */
  async #deleteEphemeral(vol: VolumeState): Promise<void> {
    try {
      await this.#storage.removeTree(mockBackingPaths(this.#o.stateDir, vol.id).dir);
    } catch (err) {
      throw internal(`cannot remove the backing storage of ephemeral volume ${vol.id}: ${errorMessage(err)}`);
    }
    this.#volumes.delete(vol.id);
    this.#o.logger.v(1).info('Deleted ephemeral volume', { volumeId: vol.id });
  }
}
