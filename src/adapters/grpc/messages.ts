/**
 * The csi.v1 messages as nodevol's gRPC code sees them: ALIASES of the types
 * @grpc/proto-loader's proto-loader-gen-types generates from proto/csi/v1/csi.proto into
 * ./generated/ (`npm run gen:proto`; test/unit/adapters/generatedWire.test.ts fails when they are out
 * of date). Nothing here describes a message by hand.
 *
 * The loader options (loader.ts: keepCase false, longs Number, enums String, defaults, oneofs)
 * and the generator's options are the same, so a generated `…__Output` type is exactly what a
 * client receives as a response and a server handler receives as a request: camelCase fields,
 * scalars/repeated/maps always present, an unset message field `null`, a oneof member present
 * only when set with a virtual discriminator (`accessType`, `type`), int64 as numbers, enums as
 * value names (one the proto does not list decodes as its number at run time, which the generated
 * types do not show: code reading an enum checks the name, as convert.ts does). Those decoded
 * shapes carry the plain names below. What a sender builds is the
 * looser {@link MessageInit} of the same type. The engine's own types stay in src/ports/csi.ts;
 * convert.ts converts at the boundary.
 */

import type { CapacityRange__Output as GenCapacityRange } from './generated/csi/v1/CapacityRange.js';
import type { ControllerGetCapabilitiesRequest__Output as GenControllerGetCapabilitiesRequest } from './generated/csi/v1/ControllerGetCapabilitiesRequest.js';
import type { ControllerGetCapabilitiesResponse__Output as GenControllerGetCapabilitiesResponse } from './generated/csi/v1/ControllerGetCapabilitiesResponse.js';
import type { ControllerPublishVolumeRequest__Output as GenControllerPublishVolumeRequest } from './generated/csi/v1/ControllerPublishVolumeRequest.js';
import type { ControllerPublishVolumeResponse__Output as GenControllerPublishVolumeResponse } from './generated/csi/v1/ControllerPublishVolumeResponse.js';
import type { ControllerServiceCapability__Output as GenControllerServiceCapability, _csi_v1_ControllerServiceCapability_RPC__Output as GenControllerServiceCapabilityRpc, _csi_v1_ControllerServiceCapability_RPC_Type as GenControllerCapabilityNameValues } from './generated/csi/v1/ControllerServiceCapability.js';
import type { ControllerUnpublishVolumeRequest__Output as GenControllerUnpublishVolumeRequest } from './generated/csi/v1/ControllerUnpublishVolumeRequest.js';
import type { ControllerUnpublishVolumeResponse__Output as GenControllerUnpublishVolumeResponse } from './generated/csi/v1/ControllerUnpublishVolumeResponse.js';
import type { CreateVolumeRequest__Output as GenCreateVolumeRequest } from './generated/csi/v1/CreateVolumeRequest.js';
import type { CreateVolumeResponse__Output as GenCreateVolumeResponse } from './generated/csi/v1/CreateVolumeResponse.js';
import type { DeleteVolumeRequest__Output as GenDeleteVolumeRequest } from './generated/csi/v1/DeleteVolumeRequest.js';
import type { DeleteVolumeResponse__Output as GenDeleteVolumeResponse } from './generated/csi/v1/DeleteVolumeResponse.js';
import type { GetPluginCapabilitiesRequest__Output as GenGetPluginCapabilitiesRequest } from './generated/csi/v1/GetPluginCapabilitiesRequest.js';
import type { GetPluginCapabilitiesResponse__Output as GenGetPluginCapabilitiesResponse } from './generated/csi/v1/GetPluginCapabilitiesResponse.js';
import type { GetPluginInfoRequest__Output as GenGetPluginInfoRequest } from './generated/csi/v1/GetPluginInfoRequest.js';
import type { GetPluginInfoResponse__Output as GenGetPluginInfoResponse } from './generated/csi/v1/GetPluginInfoResponse.js';
import type { ListVolumesRequest__Output as GenListVolumesRequest } from './generated/csi/v1/ListVolumesRequest.js';
import type { ListVolumesResponse__Output as GenListVolumesResponse, _csi_v1_ListVolumesResponse_Entry__Output as GenListVolumesEntry, _csi_v1_ListVolumesResponse_VolumeStatus__Output as GenListVolumesVolumeStatus } from './generated/csi/v1/ListVolumesResponse.js';
import type { NodeExpandVolumeRequest__Output as GenNodeExpandVolumeRequest } from './generated/csi/v1/NodeExpandVolumeRequest.js';
import type { NodeExpandVolumeResponse__Output as GenNodeExpandVolumeResponse } from './generated/csi/v1/NodeExpandVolumeResponse.js';
import type { NodeGetCapabilitiesRequest__Output as GenNodeGetCapabilitiesRequest } from './generated/csi/v1/NodeGetCapabilitiesRequest.js';
import type { NodeGetCapabilitiesResponse__Output as GenNodeGetCapabilitiesResponse } from './generated/csi/v1/NodeGetCapabilitiesResponse.js';
import type { NodeGetInfoRequest__Output as GenNodeGetInfoRequest } from './generated/csi/v1/NodeGetInfoRequest.js';
import type { NodeGetInfoResponse__Output as GenNodeGetInfoResponse } from './generated/csi/v1/NodeGetInfoResponse.js';
import type { NodeGetVolumeStatsRequest__Output as GenNodeGetVolumeStatsRequest } from './generated/csi/v1/NodeGetVolumeStatsRequest.js';
import type { NodeGetVolumeStatsResponse__Output as GenNodeGetVolumeStatsResponse } from './generated/csi/v1/NodeGetVolumeStatsResponse.js';
import type { NodePublishVolumeRequest__Output as GenNodePublishVolumeRequest } from './generated/csi/v1/NodePublishVolumeRequest.js';
import type { NodePublishVolumeResponse__Output as GenNodePublishVolumeResponse } from './generated/csi/v1/NodePublishVolumeResponse.js';
import type { NodeServiceCapability__Output as GenNodeServiceCapability, _csi_v1_NodeServiceCapability_RPC__Output as GenNodeServiceCapabilityRpc, _csi_v1_NodeServiceCapability_RPC_Type as GenNodeCapabilityNameValues } from './generated/csi/v1/NodeServiceCapability.js';
import type { NodeStageVolumeRequest__Output as GenNodeStageVolumeRequest } from './generated/csi/v1/NodeStageVolumeRequest.js';
import type { NodeStageVolumeResponse__Output as GenNodeStageVolumeResponse } from './generated/csi/v1/NodeStageVolumeResponse.js';
import type { NodeUnpublishVolumeRequest__Output as GenNodeUnpublishVolumeRequest } from './generated/csi/v1/NodeUnpublishVolumeRequest.js';
import type { NodeUnpublishVolumeResponse__Output as GenNodeUnpublishVolumeResponse } from './generated/csi/v1/NodeUnpublishVolumeResponse.js';
import type { NodeUnstageVolumeRequest__Output as GenNodeUnstageVolumeRequest } from './generated/csi/v1/NodeUnstageVolumeRequest.js';
import type { NodeUnstageVolumeResponse__Output as GenNodeUnstageVolumeResponse } from './generated/csi/v1/NodeUnstageVolumeResponse.js';
import type { PluginCapability__Output as GenPluginCapability, _csi_v1_PluginCapability_Service__Output as GenPluginCapabilityService, _csi_v1_PluginCapability_VolumeExpansion__Output as GenPluginCapabilityVolumeExpansion, _csi_v1_PluginCapability_Service_Type as GenPluginServiceTypeNameValues, _csi_v1_PluginCapability_VolumeExpansion_Type as GenVolumeExpansionTypeNameValues } from './generated/csi/v1/PluginCapability.js';
import type { ProbeRequest__Output as GenProbeRequest } from './generated/csi/v1/ProbeRequest.js';
import type { ProbeResponse__Output as GenProbeResponse } from './generated/csi/v1/ProbeResponse.js';
import type { Topology__Output as GenTopology } from './generated/csi/v1/Topology.js';
import type { TopologyRequirement__Output as GenTopologyRequirement } from './generated/csi/v1/TopologyRequirement.js';
import type { ValidateVolumeCapabilitiesRequest__Output as GenValidateVolumeCapabilitiesRequest } from './generated/csi/v1/ValidateVolumeCapabilitiesRequest.js';
import type { ValidateVolumeCapabilitiesResponse__Output as GenValidateVolumeCapabilitiesResponse, _csi_v1_ValidateVolumeCapabilitiesResponse_Confirmed__Output as GenValidateVolumeCapabilitiesConfirmed } from './generated/csi/v1/ValidateVolumeCapabilitiesResponse.js';
import type { Volume__Output as GenVolume } from './generated/csi/v1/Volume.js';
import type { VolumeCapability__Output as GenVolumeCapability, _csi_v1_VolumeCapability_AccessMode__Output as GenAccessMode, _csi_v1_VolumeCapability_BlockVolume__Output as GenBlockVolume, _csi_v1_VolumeCapability_MountVolume__Output as GenMountVolume, _csi_v1_VolumeCapability_AccessMode_Mode as GenAccessModeNameValues } from './generated/csi/v1/VolumeCapability.js';
import type { VolumeCondition__Output as GenVolumeCondition } from './generated/csi/v1/VolumeCondition.js';
import type { VolumeContentSource__Output as GenVolumeContentSource, _csi_v1_VolumeContentSource_SnapshotSource__Output as GenSnapshotSource, _csi_v1_VolumeContentSource_VolumeSource__Output as GenVolumeSource } from './generated/csi/v1/VolumeContentSource.js';
import type { VolumeUsage__Output as GenVolumeUsage, _csi_v1_VolumeUsage_Unit as GenVolumeUsageUnitNameValues } from './generated/csi/v1/VolumeUsage.js';
import type { BoolValue__Output as GenBoolValue } from './generated/google/protobuf/BoolValue.js';
import type { AccessMode as EngineAccessMode, NodeCapability as EngineNodeCapability } from '../../ports/csi.js';

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

type FieldInit<V> = V extends string
  ? string extends V
    ? V
    : V | number // an enum: its value names, or the number (a value our proto does not list)
  : V extends number | boolean
    ? V
  : V extends readonly (infer E)[]
    ? readonly FieldInit<E>[]
    : V extends null
      ? never
      : MessageInit<V>;

/** A generated message with no fields is {@link EmptyMessage} (the generator writes an empty interface). */
type Fielded<T> = keyof T extends never ? EmptyMessage : T;

/** The value names of a generated string enum (`Name | number` in the generator's input type). */
type EnumNames<T> = Extract<T, string>;

// ------------------------------------------------------------------------------ enums (value names)

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/**
 * `true` only while the engine's enums (src/ports/csi.ts AccessMode, NodeCapability) list exactly
 * the proto's values; convert.ts assigns `true` to it, so a drift fails the build.
 */
export type EngineEnumsMatchProto = [Same<AccessModeName, EngineAccessMode>, Same<NodeCapabilityName, EngineNodeCapability>] extends [true, true] ? true : never;

export type AccessModeName = EnumNames<GenAccessModeNameValues>;
export type PluginServiceTypeName = EnumNames<GenPluginServiceTypeNameValues>;
export type VolumeExpansionTypeName = EnumNames<GenVolumeExpansionTypeNameValues>;
export type ControllerCapabilityName = EnumNames<GenControllerCapabilityNameValues>;
export type NodeCapabilityName = EnumNames<GenNodeCapabilityNameValues>;
export type VolumeUsageUnitName = EnumNames<GenVolumeUsageUnitNameValues>;

// ------------------------------------------------------------------------------ messages (decoded shapes)

export type BoolValue = Fielded<GenBoolValue>;
export type AccessMode = Fielded<GenAccessMode>;
export type BlockVolume = Fielded<GenBlockVolume>;
export type MountVolume = Fielded<GenMountVolume>;
export type SnapshotSource = Fielded<GenSnapshotSource>;
export type VolumeSource = Fielded<GenVolumeSource>;
export type PluginCapabilityService = Fielded<GenPluginCapabilityService>;
export type PluginCapabilityVolumeExpansion = Fielded<GenPluginCapabilityVolumeExpansion>;
export type ControllerServiceCapabilityRpc = Fielded<GenControllerServiceCapabilityRpc>;
export type NodeServiceCapabilityRpc = Fielded<GenNodeServiceCapabilityRpc>;
export type ValidateVolumeCapabilitiesConfirmed = Fielded<GenValidateVolumeCapabilitiesConfirmed>;
export type ListVolumesEntry = Fielded<GenListVolumesEntry>;
export type ListVolumesVolumeStatus = Fielded<GenListVolumesVolumeStatus>;
export type CapacityRange = Fielded<GenCapacityRange>;
export type ControllerGetCapabilitiesRequest = Fielded<GenControllerGetCapabilitiesRequest>;
export type ControllerGetCapabilitiesResponse = Fielded<GenControllerGetCapabilitiesResponse>;
export type ControllerPublishVolumeRequest = Fielded<GenControllerPublishVolumeRequest>;
export type ControllerPublishVolumeResponse = Fielded<GenControllerPublishVolumeResponse>;
export type ControllerServiceCapability = Fielded<GenControllerServiceCapability>;
export type ControllerUnpublishVolumeRequest = Fielded<GenControllerUnpublishVolumeRequest>;
export type ControllerUnpublishVolumeResponse = Fielded<GenControllerUnpublishVolumeResponse>;
export type CreateVolumeRequest = Fielded<GenCreateVolumeRequest>;
export type CreateVolumeResponse = Fielded<GenCreateVolumeResponse>;
export type DeleteVolumeRequest = Fielded<GenDeleteVolumeRequest>;
export type DeleteVolumeResponse = Fielded<GenDeleteVolumeResponse>;
export type GetPluginCapabilitiesRequest = Fielded<GenGetPluginCapabilitiesRequest>;
export type GetPluginCapabilitiesResponse = Fielded<GenGetPluginCapabilitiesResponse>;
export type GetPluginInfoRequest = Fielded<GenGetPluginInfoRequest>;
export type GetPluginInfoResponse = Fielded<GenGetPluginInfoResponse>;
export type ListVolumesRequest = Fielded<GenListVolumesRequest>;
export type ListVolumesResponse = Fielded<GenListVolumesResponse>;
export type NodeExpandVolumeRequest = Fielded<GenNodeExpandVolumeRequest>;
export type NodeExpandVolumeResponse = Fielded<GenNodeExpandVolumeResponse>;
export type NodeGetCapabilitiesRequest = Fielded<GenNodeGetCapabilitiesRequest>;
export type NodeGetCapabilitiesResponse = Fielded<GenNodeGetCapabilitiesResponse>;
export type NodeGetInfoRequest = Fielded<GenNodeGetInfoRequest>;
export type NodeGetInfoResponse = Fielded<GenNodeGetInfoResponse>;
export type NodeGetVolumeStatsRequest = Fielded<GenNodeGetVolumeStatsRequest>;
export type NodeGetVolumeStatsResponse = Fielded<GenNodeGetVolumeStatsResponse>;
export type NodePublishVolumeRequest = Fielded<GenNodePublishVolumeRequest>;
export type NodePublishVolumeResponse = Fielded<GenNodePublishVolumeResponse>;
export type NodeServiceCapability = Fielded<GenNodeServiceCapability>;
export type NodeStageVolumeRequest = Fielded<GenNodeStageVolumeRequest>;
export type NodeStageVolumeResponse = Fielded<GenNodeStageVolumeResponse>;
export type NodeUnpublishVolumeRequest = Fielded<GenNodeUnpublishVolumeRequest>;
export type NodeUnpublishVolumeResponse = Fielded<GenNodeUnpublishVolumeResponse>;
export type NodeUnstageVolumeRequest = Fielded<GenNodeUnstageVolumeRequest>;
export type NodeUnstageVolumeResponse = Fielded<GenNodeUnstageVolumeResponse>;
export type PluginCapability = Fielded<GenPluginCapability>;
export type ProbeRequest = Fielded<GenProbeRequest>;
export type ProbeResponse = Fielded<GenProbeResponse>;
export type Topology = Fielded<GenTopology>;
export type TopologyRequirement = Fielded<GenTopologyRequirement>;
export type ValidateVolumeCapabilitiesRequest = Fielded<GenValidateVolumeCapabilitiesRequest>;
export type ValidateVolumeCapabilitiesResponse = Fielded<GenValidateVolumeCapabilitiesResponse>;
export type Volume = Fielded<GenVolume>;
export type VolumeCapability = Fielded<GenVolumeCapability>;
export type VolumeCondition = Fielded<GenVolumeCondition>;
export type VolumeContentSource = Fielded<GenVolumeContentSource>;
export type VolumeUsage = Fielded<GenVolumeUsage>;

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
  ValidateVolumeCapabilities: [ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse];
  ListVolumes: [ListVolumesRequest, ListVolumesResponse];
  ControllerGetCapabilities: [ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse];
}

export interface NodeRpcs {
  NodeStageVolume: [NodeStageVolumeRequest, NodeStageVolumeResponse];
  NodeUnstageVolume: [NodeUnstageVolumeRequest, NodeUnstageVolumeResponse];
  NodePublishVolume: [NodePublishVolumeRequest, NodePublishVolumeResponse];
  NodeUnpublishVolume: [NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse];
  NodeGetVolumeStats: [NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse];
  NodeExpandVolume: [NodeExpandVolumeRequest, NodeExpandVolumeResponse];
  NodeGetCapabilities: [NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse];
  NodeGetInfo: [NodeGetInfoRequest, NodeGetInfoResponse];
}
