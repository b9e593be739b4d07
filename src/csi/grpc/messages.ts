/**
 * The csi.v1 messages of proto/csi/v1/csi.proto as @grpc/proto-loader hands them over with
 * nodevol's loader options (keepCase: false, longs: Number, enums: String, defaults: true,
 * oneofs: true):
 *
 * - field names are camelCase;
 * - scalars, repeated fields and maps are always present (default '', 0, false, [], {});
 * - an unset message field is `null`;
 * - a oneof member is present only when it is the one set, and a virtual property named after
 *   the oneof (`accessType`, `type`) says which one it is;
 * - int64 fields are JS numbers;
 * - enums are their value names, or the bare number for a value this proto does not list
 *   (a newer driver), hence `Name | number`.
 *
 * These "decoded" shapes are what a client receives as a response and what a server handler
 * receives as a request. What a sender builds is the looser {@link MessageInit} of the same type.
 */
import type { AccessMode as EngineAccessMode, NodeCapability as EngineNodeCapability } from '../../host/csi.js';

/** map<string, string> */
export type WireStringMap = Readonly<Record<string, string>>;

/** A message with no fields. */
export type EmptyMessage = Readonly<Record<string, never>>;

/** An enum as decoded: its value name, or the number when the value is unknown to our proto. */
export type WireEnum<Name extends string> = Name | number;

/**
 * A message as a sender may build it: every field optional, `null` meaning unset, oneof
 * discriminators ignored, nested messages loosened the same way. Enum fields take the value name
 * (or number).
 */
export type MessageInit<T> = T extends WireStringMap
  ? T
  : { readonly [K in keyof T]?: FieldInit<T[K]> | null };

type FieldInit<V> = V extends string | number | boolean
  ? V
  : V extends readonly (infer E)[]
    ? readonly FieldInit<E>[]
    : V extends null
      ? never
      : MessageInit<V>;

// ------------------------------------------------------------------------------ google.protobuf

export interface BoolValue {
  readonly value: boolean;
}

// ------------------------------------------------------------------------------ shared types

/** The same names as the engine's AccessMode (src/host/csi.ts): one list of the spec's values. */
export type AccessModeName = EngineAccessMode;

export interface AccessMode {
  readonly mode: WireEnum<AccessModeName>;
}

export type BlockVolume = EmptyMessage;

export interface MountVolume {
  readonly fsType: string;
  readonly mountFlags: readonly string[];
  readonly volumeMountGroup: string;
}

export interface VolumeCapability {
  /** Set when accessType === 'block'. */
  readonly block?: BlockVolume;
  /** Set when accessType === 'mount'. */
  readonly mount?: MountVolume;
  /** The oneof access_type: which member is set (absent when neither). */
  readonly accessType?: 'block' | 'mount';
  readonly accessMode: AccessMode | null;
}

export interface CapacityRange {
  readonly requiredBytes: number;
  readonly limitBytes: number;
}

export interface Topology {
  readonly segments: WireStringMap;
}

export interface TopologyRequirement {
  readonly requisite: readonly Topology[];
  readonly preferred: readonly Topology[];
}

export interface SnapshotSource {
  readonly snapshotId: string;
}

export interface VolumeSource {
  readonly volumeId: string;
}

export interface VolumeContentSource {
  readonly snapshot?: SnapshotSource;
  readonly volume?: VolumeSource;
  readonly type?: 'snapshot' | 'volume';
}

export interface Volume {
  readonly capacityBytes: number;
  readonly volumeId: string;
  readonly volumeContext: WireStringMap;
  readonly contentSource: VolumeContentSource | null;
  readonly accessibleTopology: readonly Topology[];
}

// ------------------------------------------------------------------------------ Identity

export type GetPluginInfoRequest = EmptyMessage;

export interface GetPluginInfoResponse {
  readonly name: string;
  readonly vendorVersion: string;
  readonly manifest: WireStringMap;
}

export type GetPluginCapabilitiesRequest = EmptyMessage;

export type PluginServiceTypeName = 'UNKNOWN' | 'CONTROLLER_SERVICE' | 'VOLUME_ACCESSIBILITY_CONSTRAINTS' | 'GROUP_CONTROLLER_SERVICE';
export type VolumeExpansionTypeName = 'UNKNOWN' | 'ONLINE' | 'OFFLINE';

export interface PluginCapabilityService {
  readonly type: WireEnum<PluginServiceTypeName>;
}

export interface PluginCapabilityVolumeExpansion {
  readonly type: WireEnum<VolumeExpansionTypeName>;
}

export interface PluginCapability {
  readonly service?: PluginCapabilityService;
  readonly volumeExpansion?: PluginCapabilityVolumeExpansion;
  readonly type?: 'service' | 'volumeExpansion';
}

export interface GetPluginCapabilitiesResponse {
  readonly capabilities: readonly PluginCapability[];
}

export type ProbeRequest = EmptyMessage;

export interface ProbeResponse {
  /** null: the plugin did not say; the caller then assumes ready. */
  readonly ready: BoolValue | null;
}

// ------------------------------------------------------------------------------ Controller

export interface CreateVolumeRequest {
  readonly name: string;
  readonly capacityRange: CapacityRange | null;
  readonly volumeCapabilities: readonly VolumeCapability[];
  readonly parameters: WireStringMap;
  readonly secrets: WireStringMap;
  readonly volumeContentSource: VolumeContentSource | null;
  readonly accessibilityRequirements: TopologyRequirement | null;
}

export interface CreateVolumeResponse {
  readonly volume: Volume | null;
}

export interface DeleteVolumeRequest {
  readonly volumeId: string;
  readonly secrets: WireStringMap;
}

export type DeleteVolumeResponse = EmptyMessage;

export interface ControllerPublishVolumeRequest {
  readonly volumeId: string;
  readonly nodeId: string;
  readonly volumeCapability: VolumeCapability | null;
  readonly readonly: boolean;
  readonly secrets: WireStringMap;
  readonly volumeContext: WireStringMap;
}

export interface ControllerPublishVolumeResponse {
  readonly publishContext: WireStringMap;
}

export interface ControllerUnpublishVolumeRequest {
  readonly volumeId: string;
  readonly nodeId: string;
  readonly secrets: WireStringMap;
}

export type ControllerUnpublishVolumeResponse = EmptyMessage;

export type ControllerGetCapabilitiesRequest = EmptyMessage;

export type ControllerCapabilityName =
  | 'UNKNOWN'
  | 'CREATE_DELETE_VOLUME'
  | 'PUBLISH_UNPUBLISH_VOLUME'
  | 'LIST_VOLUMES'
  | 'GET_CAPACITY'
  | 'CREATE_DELETE_SNAPSHOT'
  | 'LIST_SNAPSHOTS'
  | 'CLONE_VOLUME'
  | 'PUBLISH_READONLY'
  | 'EXPAND_VOLUME'
  | 'LIST_VOLUMES_PUBLISHED_NODES'
  | 'VOLUME_CONDITION'
  | 'GET_VOLUME'
  | 'SINGLE_NODE_MULTI_WRITER';

export interface ControllerServiceCapabilityRpc {
  readonly type: WireEnum<ControllerCapabilityName>;
}

export interface ControllerServiceCapability {
  readonly rpc?: ControllerServiceCapabilityRpc;
  readonly type?: 'rpc';
}

export interface ControllerGetCapabilitiesResponse {
  readonly capabilities: readonly ControllerServiceCapability[];
}

// ------------------------------------------------------------------------------ Node

export interface NodeStageVolumeRequest {
  readonly volumeId: string;
  readonly publishContext: WireStringMap;
  readonly stagingTargetPath: string;
  readonly volumeCapability: VolumeCapability | null;
  readonly secrets: WireStringMap;
  readonly volumeContext: WireStringMap;
}

export type NodeStageVolumeResponse = EmptyMessage;

export interface NodeUnstageVolumeRequest {
  readonly volumeId: string;
  readonly stagingTargetPath: string;
}

export type NodeUnstageVolumeResponse = EmptyMessage;

export interface NodePublishVolumeRequest {
  readonly volumeId: string;
  readonly publishContext: WireStringMap;
  readonly stagingTargetPath: string;
  readonly targetPath: string;
  readonly volumeCapability: VolumeCapability | null;
  readonly readonly: boolean;
  readonly secrets: WireStringMap;
  readonly volumeContext: WireStringMap;
}

export type NodePublishVolumeResponse = EmptyMessage;

export interface NodeUnpublishVolumeRequest {
  readonly volumeId: string;
  readonly targetPath: string;
}

export type NodeUnpublishVolumeResponse = EmptyMessage;

export type NodeGetCapabilitiesRequest = EmptyMessage;

/** The same names as the engine's NodeCapability (src/host/csi.ts): one list of the spec's values. */
export type NodeCapabilityName = EngineNodeCapability;

export interface NodeServiceCapabilityRpc {
  readonly type: WireEnum<NodeCapabilityName>;
}

export interface NodeServiceCapability {
  readonly rpc?: NodeServiceCapabilityRpc;
  readonly type?: 'rpc';
}

export interface NodeGetCapabilitiesResponse {
  readonly capabilities: readonly NodeServiceCapability[];
}

export type NodeGetInfoRequest = EmptyMessage;

export interface NodeGetInfoResponse {
  readonly nodeId: string;
  readonly maxVolumesPerNode: number;
  readonly accessibleTopology: Topology | null;
}

// ------------------------------------------------------------------------------ services

/** Request and response types of each RPC, by service. */
export interface IdentityRpcs {
  GetPluginInfo: [GetPluginInfoRequest, GetPluginInfoResponse];
  GetPluginCapabilities: [GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse];
  Probe: [ProbeRequest, ProbeResponse];
}

export interface ControllerRpcs {
  CreateVolume: [CreateVolumeRequest, CreateVolumeResponse];
  DeleteVolume: [DeleteVolumeRequest, DeleteVolumeResponse];
  ControllerPublishVolume: [ControllerPublishVolumeRequest, ControllerPublishVolumeResponse];
  ControllerUnpublishVolume: [ControllerUnpublishVolumeRequest, ControllerUnpublishVolumeResponse];
  ControllerGetCapabilities: [ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse];
}

export interface NodeRpcs {
  NodeStageVolume: [NodeStageVolumeRequest, NodeStageVolumeResponse];
  NodeUnstageVolume: [NodeUnstageVolumeRequest, NodeUnstageVolumeResponse];
  NodePublishVolume: [NodePublishVolumeRequest, NodePublishVolumeResponse];
  NodeUnpublishVolume: [NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse];
  NodeGetCapabilities: [NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse];
  NodeGetInfo: [NodeGetInfoRequest, NodeGetInfoResponse];
}
