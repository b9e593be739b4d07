/**
 * Between the engine's CSI types (src/ports/csi.ts) and the csi.v1 wire messages
 * (messages.ts). The client maps outgoing Node requests with the `toWire*` functions; a server
 * that fronts an engine-typed driver (the in-process fake, later the mock driver) maps incoming
 * requests back with the `fromWire*` ones.
 */
import type {
  AccessMode,
  NodeCapability,
  NodePublishVolumeRequest,
  NodeStageVolumeRequest,
  NodeUnpublishVolumeRequest,
  NodeUnstageVolumeRequest,
  VolumeCapability,
} from '../../ports/csi.js';
import type * as wire from './messages.js';
import type { MessageInit } from './messages.js';

const ACCESS_MODES: ReadonlySet<string> = new Set<AccessMode>([
  'UNKNOWN',
  'SINGLE_NODE_WRITER',
  'SINGLE_NODE_READER_ONLY',
  'MULTI_NODE_READER_ONLY',
  'MULTI_NODE_SINGLE_WRITER',
  'MULTI_NODE_MULTI_WRITER',
  'SINGLE_NODE_SINGLE_WRITER',
  'SINGLE_NODE_MULTI_WRITER',
]);

const NODE_CAPABILITIES: ReadonlySet<string> = new Set<NodeCapability>([
  'UNKNOWN',
  'STAGE_UNSTAGE_VOLUME',
  'GET_VOLUME_STATS',
  'EXPAND_VOLUME',
  'VOLUME_CONDITION',
  'SINGLE_NODE_MULTI_WRITER',
  'VOLUME_MOUNT_GROUP',
]);

function isAccessMode(v: unknown): v is AccessMode {
  return typeof v === 'string' && ACCESS_MODES.has(v);
}

function isNodeCapability(v: unknown): v is NodeCapability {
  return typeof v === 'string' && NODE_CAPABILITIES.has(v);
}

/** A capability that cannot be put on the wire (both access types: the oneof holds one). */
export class UnencodableCapabilityError extends Error {
  override readonly name = 'UnencodableCapabilityError';
}


/** Fails the build when the engine's enums and the proto's drift apart (messages.ts). */
export const ENGINE_ENUMS_MATCH_PROTO: wire.EngineEnumsMatchProto = true;

// ------------------------------------------------------------------------------ proto3 defaults

/*
 * protobufjs writes every field it is given, defaults included; Go's encoder (kubelet, the
 * drivers) leaves proto3 scalars at their default off the wire. The helpers below leave them
 * out, so nodevol's requests are byte-for-byte what kubelet sends. Message fields that are set
 * (even when empty) stay: presence is meaningful for them (the access_type oneof, access_mode).
 */

/** A string field: left out when ''. */
export function wireString(s: string): string | undefined {
  return s === '' ? undefined : s;
}

/** A bool field: left out when false. */
export function wireBool(b: boolean): true | undefined {
  return b ? true : undefined;
}

/** A map<string, string> field: a copy, left out when empty. */
export function wireMap(m: Readonly<Record<string, string>> | undefined): Record<string, string> | undefined {
  return m === undefined || Object.keys(m).length === 0 ? undefined : { ...m };
}

/** A repeated string field: a copy, left out when empty. */
function wireList(l: readonly string[]): string[] | undefined {
  return l.length === 0 ? undefined : [...l];
}

// ------------------------------------------------------------------------------ VolumeCapability

export function toWireVolumeCapability(cap: VolumeCapability): MessageInit<wire.VolumeCapability> {
  if (cap.mount !== undefined && cap.block !== undefined) {
    throw new UnencodableCapabilityError('volume capability has both mount and block access types');
  }
  const accessMode = { mode: cap.accessMode.mode === 'UNKNOWN' ? undefined : cap.accessMode.mode };
  if (cap.mount !== undefined) {
    return {
      mount: {
        fsType: wireString(cap.mount.fsType),
        mountFlags: wireList(cap.mount.mountFlags),
        volumeMountGroup: wireString(cap.mount.volumeMountGroup),
      },
      accessMode,
    };
  }
  if (cap.block !== undefined) return { block: {}, accessMode };
  // Neither: sent as is; the driver answers INVALID_ARGUMENT.
  return { accessMode };
}

/**
 * The engine's view of a received capability. An unset capability or access mode becomes
 * mode UNKNOWN with no access type (what a driver rejects as "capability missing"); an access
 * mode this proto does not know becomes UNKNOWN.
 */
export function fromWireVolumeCapability(cap: wire.VolumeCapability | null): VolumeCapability {
  const rawMode = cap?.accessMode?.mode;
  const accessMode = { mode: isAccessMode(rawMode) ? rawMode : 'UNKNOWN' } as const;
  const mount = cap?.mount ?? undefined;
  if (mount !== undefined) {
    return { mount: { fsType: mount.fsType, mountFlags: [...mount.mountFlags], volumeMountGroup: mount.volumeMountGroup }, accessMode };
  }
  if (cap?.block !== undefined && cap.block !== null) return { block: {}, accessMode };
  return { accessMode };
}

// ------------------------------------------------------------------------------ Node requests

export function toWireNodeStageRequest(req: NodeStageVolumeRequest): MessageInit<wire.NodeStageVolumeRequest> {
  return {
    volumeId: wireString(req.volumeId),
    publishContext: wireMap(req.publishContext),
    stagingTargetPath: wireString(req.stagingTargetPath),
    volumeCapability: toWireVolumeCapability(req.volumeCapability),
    secrets: wireMap(req.secrets),
    volumeContext: wireMap(req.volumeContext),
  };
}

export function fromWireNodeStageRequest(req: wire.NodeStageVolumeRequest): NodeStageVolumeRequest {
  return {
    volumeId: req.volumeId,
    publishContext: { ...req.publishContext },
    stagingTargetPath: req.stagingTargetPath,
    volumeCapability: fromWireVolumeCapability(req.volumeCapability),
    secrets: { ...req.secrets },
    volumeContext: { ...req.volumeContext },
  };
}

export function toWireNodeUnstageRequest(req: NodeUnstageVolumeRequest): MessageInit<wire.NodeUnstageVolumeRequest> {
  return { volumeId: wireString(req.volumeId), stagingTargetPath: wireString(req.stagingTargetPath) };
}

export function fromWireNodeUnstageRequest(req: wire.NodeUnstageVolumeRequest): NodeUnstageVolumeRequest {
  return { volumeId: req.volumeId, stagingTargetPath: req.stagingTargetPath };
}

export function toWireNodePublishRequest(req: NodePublishVolumeRequest): MessageInit<wire.NodePublishVolumeRequest> {
  return {
    volumeId: wireString(req.volumeId),
    publishContext: wireMap(req.publishContext),
    stagingTargetPath: wireString(req.stagingTargetPath),
    targetPath: wireString(req.targetPath),
    volumeCapability: toWireVolumeCapability(req.volumeCapability),
    readonly: wireBool(req.readonly),
    secrets: wireMap(req.secrets),
    volumeContext: wireMap(req.volumeContext),
  };
}

export function fromWireNodePublishRequest(req: wire.NodePublishVolumeRequest): NodePublishVolumeRequest {
  return {
    volumeId: req.volumeId,
    publishContext: { ...req.publishContext },
    stagingTargetPath: req.stagingTargetPath,
    targetPath: req.targetPath,
    volumeCapability: fromWireVolumeCapability(req.volumeCapability),
    readonly: req.readonly,
    secrets: { ...req.secrets },
    volumeContext: { ...req.volumeContext },
  };
}

export function toWireNodeUnpublishRequest(req: NodeUnpublishVolumeRequest): MessageInit<wire.NodeUnpublishVolumeRequest> {
  return { volumeId: wireString(req.volumeId), targetPath: wireString(req.targetPath) };
}

export function fromWireNodeUnpublishRequest(req: wire.NodeUnpublishVolumeRequest): NodeUnpublishVolumeRequest {
  return { volumeId: req.volumeId, targetPath: req.targetPath };
}

// ------------------------------------------------------------------------------ capabilities

/**
 * The node capabilities a driver reported, in order, without duplicates. Entries that are not
 * an RPC capability, and RPC types this proto does not know (a newer driver), are dropped, as
 * kubelet ignores what it does not understand.
 */
export function nodeCapabilitiesFromWire(res: wire.NodeGetCapabilitiesResponse): NodeCapability[] {
  const out: NodeCapability[] = [];
  for (const cap of res.capabilities) {
    const t = cap.rpc?.type;
    if (isNodeCapability(t) && !out.includes(t)) out.push(t);
  }
  return out;
}

export function nodeCapabilitiesToWire(caps: readonly NodeCapability[]): MessageInit<wire.NodeGetCapabilitiesResponse> {
  return { capabilities: caps.map((type) => ({ rpc: { type } })) };
}
