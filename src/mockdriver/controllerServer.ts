/**
 * The mock driver's Controller service, as csi-driver-host-path's controller server: CreateVolume
 * makes the backing storage (`<state-dir>/volumes/<id>/` for mount access, a sparse file
 * `<state-dir>/volumes/<id>.img` of the capacity for block access) under the id
 * {@link mockVolumeId} gives the name; DeleteVolume removes it, refused while the node still has
 * it staged or published; Controller(Un)PublishVolume record the node it is attached to (the
 * mock serves one node); ValidateVolumeCapabilities and ListVolumes (paged by index) read.
 */
import { errorMessage } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import { GrpcStatus } from '../ports/csi.js';
import type { ControllerHandlers } from '../adapters/grpc/server.js';
import type * as wire from '../adapters/grpc/messages.js';
import type { MessageInit } from '../adapters/grpc/messages.js';
import type { Dispatch } from './callPipeline.js';
import { checkVolumeId } from './confine.js';
import type { MockVolumeKind } from './state.js';
import { accessKind, internal, invalid, status } from './status.js';
import type { MockStorage } from './storage.js';
import { mockVolumeId } from './volumeId.js';
import { DEFAULT_CAPACITY_BYTES, MAX_CAPACITY_BYTES, mockBackingPaths, type MockVolumes } from './volumes.js';

/** What ControllerGetCapabilities reports. */
export const MOCK_CONTROLLER_CAPABILITIES = [
  'CREATE_DELETE_VOLUME',
  'PUBLISH_UNPUBLISH_VOLUME',
  'LIST_VOLUMES',
  'LIST_VOLUMES_PUBLISHED_NODES',
] as const satisfies readonly wire.ControllerCapabilityName[];

export interface MockControllerServerOptions {
  /** The one node this driver serves (ControllerPublishVolume refuses others). */
  readonly nodeId: string;
  readonly stateDir: string;
  readonly volumes: MockVolumes;
  readonly storage: MockStorage;
  readonly logger: Logger;
}

export class MockControllerServer {
  readonly #o: MockControllerServerOptions;

  constructor(options: MockControllerServerOptions) {
    this.#o = options;
  }

  handlers(dispatch: Dispatch): ControllerHandlers {
    return {
      createVolume: (req) => dispatch('CreateVolume', req, req.name === '' ? '' : mockVolumeId(req.name), () => this.#createVolume(req)),
      deleteVolume: (req) => dispatch('DeleteVolume', req, req.volumeId, () => this.#deleteVolume(req)),
      controllerPublishVolume: (req) => dispatch('ControllerPublishVolume', req, req.volumeId, () => this.#controllerPublish(req)),
      controllerUnpublishVolume: (req) => dispatch('ControllerUnpublishVolume', req, req.volumeId, () => this.#controllerUnpublish(req)),
      controllerGetCapabilities: (req) =>
        dispatch('ControllerGetCapabilities', req, '', () => Promise.resolve({ capabilities: MOCK_CONTROLLER_CAPABILITIES.map((type) => ({ rpc: { type } })) })),
      validateVolumeCapabilities: (req) => dispatch('ValidateVolumeCapabilities', req, req.volumeId, () => this.#validateVolumeCapabilities(req), { lock: false }),
      listVolumes: (req) => dispatch('ListVolumes', req, '', () => this.#listVolumes(req)),
    };
  }

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

    const volumes = this.#o.volumes;
    const id = mockVolumeId(req.name);
    const existing = volumes.get(id);
    if (existing !== undefined) {
      if (existing.name !== req.name) throw internal(`volume id ${id} of ${req.name} collides with the volume named ${existing.name}`);
      if (existing.kind !== kind) throw status(GrpcStatus.ALREADY_EXISTS, `volume ${req.name} exists with ${existing.kind} access`);
      if (existing.capacity < required || (limit > 0 && existing.capacity > limit)) {
        throw status(GrpcStatus.ALREADY_EXISTS, `volume ${req.name} exists with capacity ${existing.capacity}, incompatible with the request`);
      }
      return { volume: { volumeId: id, capacityBytes: existing.capacity, volumeContext: {} } };
    }
    const backing = mockBackingPaths(this.#o.stateDir, id);
    try {
      if (kind === 'mount') {
        await this.#o.storage.fs.mkdir(backing.dir, { recursive: true, mode: 0o777 });
      } else if (!(await this.#o.storage.exists(backing.file))) {
        await this.#o.storage.allocate(backing.file, capacity);
      }
    } catch (err) {
      throw internal(`cannot create the backing storage of volume ${id}: ${errorMessage(err)}`);
    }
    volumes.set({ id, name: req.name, capacity, kind, attachedNodes: new Set(), ephemeral: false });
    await volumes.persist(id);
    this.#o.logger.v(1).info('Created volume', { volumeId: id, name: req.name, kind, capacity });
    return { volume: { volumeId: id, capacityBytes: capacity, volumeContext: {} } };
  }

  async #deleteVolume(req: wire.DeleteVolumeRequest): Promise<MessageInit<wire.DeleteVolumeResponse>> {
    if (req.volumeId === '') throw invalid('volume ID missing in request');
    checkVolumeId(req.volumeId);
    const volumes = this.#o.volumes;
    const vol = volumes.get(req.volumeId);
    if (vol === undefined) return {};
    const node = volumes.node.view(vol.id);
    if (node !== undefined) {
      const where = [...(node.stagedAt === undefined ? [] : [`staged at ${node.stagedAt}`]), ...[...node.publishedAt].sort().map((t) => `published at ${t}`)];
      throw status(GrpcStatus.FAILED_PRECONDITION, `volume ${req.volumeId} is still ${where.join(', ')}`);
    }
    const backing = mockBackingPaths(this.#o.stateDir, vol.id);
    try {
      if (vol.kind === 'mount') await this.#o.storage.removeTree(backing.dir);
      else await this.#o.storage.removeFile(backing.file);
    } catch (err) {
      throw internal(`cannot remove the backing storage of volume ${vol.id}: ${errorMessage(err)}`);
    }
    volumes.delete(vol.id);
    await volumes.persist(vol.id);
    this.#o.logger.v(1).info('Deleted volume', { volumeId: vol.id, name: vol.name });
    return {};
  }

  async #controllerPublish(req: wire.ControllerPublishVolumeRequest): Promise<MessageInit<wire.ControllerPublishVolumeResponse>> {
    if (req.volumeId === '') throw invalid('volume ID missing in request');
    if (req.nodeId === '') throw invalid('node ID missing in request');
    accessKind(req.volumeCapability);
    const vol = this.#o.volumes.require(req.volumeId);
    // The mock serves one node: any other node id is one it does not know.
    if (req.nodeId !== this.#o.nodeId) throw status(GrpcStatus.NOT_FOUND, `node ${req.nodeId} not found (this driver serves ${this.#o.nodeId})`);
    if (!vol.attachedNodes.has(req.nodeId)) {
      vol.attachedNodes.add(req.nodeId);
      await this.#o.volumes.persist(vol.id);
    }
    return { publishContext: {} };
  }

  async #controllerUnpublish(req: wire.ControllerUnpublishVolumeRequest): Promise<MessageInit<wire.ControllerUnpublishVolumeResponse>> {
    if (req.volumeId === '') throw invalid('volume ID missing in request');
    // A volume that is gone is unpublished from every node: OK, as the spec recommends.
    const vol = this.#o.volumes.get(req.volumeId);
    if (vol === undefined) return {};
    const before = vol.attachedNodes.size;
    if (req.nodeId === '') vol.attachedNodes.clear();
    else vol.attachedNodes.delete(req.nodeId);
    if (vol.attachedNodes.size !== before) await this.#o.volumes.persist(vol.id);
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
    const vol = this.#o.volumes.require(req.volumeId);
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
    const ids = this.#o.volumes.ids();
    let start = 0;
    if (req.startingToken !== '') {
      start = /^(0|[1-9][0-9]{0,9})$/.test(req.startingToken) ? Number(req.startingToken) : -1;
      if (start < 0 || start > ids.length) throw status(GrpcStatus.ABORTED, `invalid starting_token ${JSON.stringify(req.startingToken)}`);
    }
    const end = req.maxEntries > 0 ? Math.min(ids.length, start + req.maxEntries) : ids.length;
    const entries = ids.slice(start, end).flatMap((id) => {
      const v = this.#o.volumes.get(id);
      if (v === undefined) return [];
      return [{ volume: { volumeId: v.id, capacityBytes: v.capacity, volumeContext: {} }, status: { publishedNodeIds: [...v.attachedNodes].sort() } }];
    });
    return Promise.resolve({ entries, nextToken: end < ids.length ? String(end) : '' });
  }
}
