/**
 * The CSI Node service as the engine sees it: typed requests and responses mirroring the
 * csi.v1 messages (camelCase, as a proto loader with keepCase: false produces them), gRPC status
 * codes, and kubelet's final/uncertain classification of errors. The gRPC client and the
 * in-process fake driver both implement {@link CsiNodeClient}.
 */

/** gRPC status codes (grpc/status.proto). */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type GrpcStatusName = keyof typeof GrpcStatus;
export type GrpcStatusCode = (typeof GrpcStatus)[GrpcStatusName];

export function grpcStatusName(code: number): string {
  for (const [name, value] of Object.entries(GrpcStatus)) if (value === code) return name;
  return `CODE_${code}`;
}

/** NodeServiceCapability.RPC.Type */
export type NodeCapability =
  | 'UNKNOWN'
  | 'STAGE_UNSTAGE_VOLUME'
  | 'GET_VOLUME_STATS'
  | 'EXPAND_VOLUME'
  | 'VOLUME_CONDITION'
  | 'SINGLE_NODE_MULTI_WRITER'
  | 'VOLUME_MOUNT_GROUP';

/** VolumeCapability.AccessMode.Mode */
export type AccessMode =
  | 'UNKNOWN'
  | 'SINGLE_NODE_WRITER'
  | 'SINGLE_NODE_READER_ONLY'
  | 'MULTI_NODE_READER_ONLY'
  | 'MULTI_NODE_SINGLE_WRITER'
  | 'MULTI_NODE_MULTI_WRITER'
  | 'SINGLE_NODE_SINGLE_WRITER'
  | 'SINGLE_NODE_MULTI_WRITER';

export interface VolumeCapability {
  /** Exactly one of mount / block. */
  readonly mount?: { readonly fsType: string; readonly mountFlags: readonly string[]; readonly volumeMountGroup: string };
  readonly block?: Record<string, never>;
  readonly accessMode: { readonly mode: AccessMode };
}

export type StringMap = Readonly<Record<string, string>>;

export interface NodeStageVolumeRequest {
  readonly volumeId: string;
  readonly publishContext: StringMap;
  readonly stagingTargetPath: string;
  readonly volumeCapability: VolumeCapability;
  readonly secrets: StringMap;
  readonly volumeContext: StringMap;
}

export interface NodeUnstageVolumeRequest {
  readonly volumeId: string;
  readonly stagingTargetPath: string;
}

export interface NodePublishVolumeRequest {
  readonly volumeId: string;
  readonly publishContext: StringMap;
  /** Empty when the driver has no STAGE_UNSTAGE_VOLUME. */
  readonly stagingTargetPath: string;
  readonly targetPath: string;
  readonly volumeCapability: VolumeCapability;
  readonly readonly: boolean;
  readonly secrets: StringMap;
  readonly volumeContext: StringMap;
}

export interface NodeUnpublishVolumeRequest {
  readonly volumeId: string;
  readonly targetPath: string;
}

/** The Node service calls kubelet makes. Every method rejects with a {@link CsiCallError}. */
export interface CsiNodeClient {
  nodeGetCapabilities(): Promise<readonly NodeCapability[]>;
  nodeStageVolume(req: NodeStageVolumeRequest): Promise<void>;
  nodeUnstageVolume(req: NodeUnstageVolumeRequest): Promise<void>;
  nodePublishVolume(req: NodePublishVolumeRequest): Promise<void>;
  nodeUnpublishVolume(req: NodeUnpublishVolumeRequest): Promise<void>;
}

/** Registered CSI drivers by name (kubelet's csiDrivers store). */
export interface CsiDriverRegistry {
  /** undefined when the driver is not registered on this node. */
  client(driverName: string): CsiNodeClient | undefined;
}

export type CsiMethod = 'NodeGetCapabilities' | 'NodeStageVolume' | 'NodeUnstageVolume' | 'NodePublishVolume' | 'NodeUnpublishVolume';

/** Every csi.v1 RPC nodevol calls or serves (the gRPC client also speaks Identity and Controller). */
export type CsiRpcMethod =
  | CsiMethod
  | 'NodeGetInfo'
  | 'GetPluginInfo'
  | 'GetPluginCapabilities'
  | 'Probe'
  | 'CreateVolume'
  | 'DeleteVolume'
  | 'ControllerPublishVolume'
  | 'ControllerUnpublishVolume'
  | 'ValidateVolumeCapabilities'
  | 'ListVolumes'
  | 'ControllerGetCapabilities'
  | 'NodeGetVolumeStats'
  | 'NodeExpandVolume';

/** The RPCs of each CSI service that nodevol's client and mock driver speak (proto/csi/v1/csi.proto). */
export const CSI_RPCS_BY_SERVICE = {
  Identity: ['GetPluginInfo', 'GetPluginCapabilities', 'Probe'],
  Controller: [
    'CreateVolume',
    'DeleteVolume',
    'ControllerPublishVolume',
    'ControllerUnpublishVolume',
    'ValidateVolumeCapabilities',
    'ListVolumes',
    'ControllerGetCapabilities',
  ],
  Node: [
    'NodeStageVolume',
    'NodeUnstageVolume',
    'NodePublishVolume',
    'NodeUnpublishVolume',
    'NodeGetVolumeStats',
    'NodeExpandVolume',
    'NodeGetCapabilities',
    'NodeGetInfo',
  ],
} as const satisfies Record<'Identity' | 'Controller' | 'Node', readonly CsiRpcMethod[]>;

/**
 * A failed CSI call. `code` is the gRPC status; undefined when the call failed without an answer
 * (a closed client, a request that could not be encoded): {@link isFinalCsiError} counts that as
 * uncertain, as kubelet does.
 */
export class CsiCallError extends Error {
  override readonly name = 'CsiCallError';
  constructor(
    readonly method: CsiRpcMethod,
    readonly code: number | undefined,
    readonly details: string,
  ) {
    super(`rpc error: code = ${code === undefined ? 'Unknown' : grpcStatusName(code)} desc = ${details}`);
  }
}

/**
 * kubelet's csi isFinalError (csi_client.go): a gRPC error with Canceled, DeadlineExceeded,
 * Unavailable, ResourceExhausted or Aborted means the operation may still be in progress on the
 * driver (uncertain); any other code is final. An error without a gRPC status (no answer, a
 * closed client, anything that is not a CsiCallError) is uncertain too: kubelet cannot know
 * whether an earlier call for the volume is still in progress, so it stays on the safe side.
 */
export function isFinalCsiError(err: unknown): boolean {
  if (!(err instanceof CsiCallError) || err.code === undefined) return false;
  switch (err.code) {
    case GrpcStatus.CANCELLED:
    case GrpcStatus.DEADLINE_EXCEEDED:
    case GrpcStatus.UNAVAILABLE:
    case GrpcStatus.RESOURCE_EXHAUSTED:
    case GrpcStatus.ABORTED:
      return false;
    default:
      return true;
  }
}

/** A registry with no driver: every lookup is "not registered". */
export const noCsiDrivers: CsiDriverRegistry = { client: () => undefined };
