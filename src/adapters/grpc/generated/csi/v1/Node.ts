// Original file: proto/csi/v1/csi.proto

import type { MethodDefinition } from '@grpc/proto-loader'
import type { NodeExpandVolumeRequest as _csi_v1_NodeExpandVolumeRequest, NodeExpandVolumeRequest__Output as _csi_v1_NodeExpandVolumeRequest__Output } from '../../csi/v1/NodeExpandVolumeRequest.js';
import type { NodeExpandVolumeResponse as _csi_v1_NodeExpandVolumeResponse, NodeExpandVolumeResponse__Output as _csi_v1_NodeExpandVolumeResponse__Output } from '../../csi/v1/NodeExpandVolumeResponse.js';
import type { NodeGetCapabilitiesRequest as _csi_v1_NodeGetCapabilitiesRequest, NodeGetCapabilitiesRequest__Output as _csi_v1_NodeGetCapabilitiesRequest__Output } from '../../csi/v1/NodeGetCapabilitiesRequest.js';
import type { NodeGetCapabilitiesResponse as _csi_v1_NodeGetCapabilitiesResponse, NodeGetCapabilitiesResponse__Output as _csi_v1_NodeGetCapabilitiesResponse__Output } from '../../csi/v1/NodeGetCapabilitiesResponse.js';
import type { NodeGetInfoRequest as _csi_v1_NodeGetInfoRequest, NodeGetInfoRequest__Output as _csi_v1_NodeGetInfoRequest__Output } from '../../csi/v1/NodeGetInfoRequest.js';
import type { NodeGetInfoResponse as _csi_v1_NodeGetInfoResponse, NodeGetInfoResponse__Output as _csi_v1_NodeGetInfoResponse__Output } from '../../csi/v1/NodeGetInfoResponse.js';
import type { NodeGetVolumeStatsRequest as _csi_v1_NodeGetVolumeStatsRequest, NodeGetVolumeStatsRequest__Output as _csi_v1_NodeGetVolumeStatsRequest__Output } from '../../csi/v1/NodeGetVolumeStatsRequest.js';
import type { NodeGetVolumeStatsResponse as _csi_v1_NodeGetVolumeStatsResponse, NodeGetVolumeStatsResponse__Output as _csi_v1_NodeGetVolumeStatsResponse__Output } from '../../csi/v1/NodeGetVolumeStatsResponse.js';
import type { NodePublishVolumeRequest as _csi_v1_NodePublishVolumeRequest, NodePublishVolumeRequest__Output as _csi_v1_NodePublishVolumeRequest__Output } from '../../csi/v1/NodePublishVolumeRequest.js';
import type { NodePublishVolumeResponse as _csi_v1_NodePublishVolumeResponse, NodePublishVolumeResponse__Output as _csi_v1_NodePublishVolumeResponse__Output } from '../../csi/v1/NodePublishVolumeResponse.js';
import type { NodeStageVolumeRequest as _csi_v1_NodeStageVolumeRequest, NodeStageVolumeRequest__Output as _csi_v1_NodeStageVolumeRequest__Output } from '../../csi/v1/NodeStageVolumeRequest.js';
import type { NodeStageVolumeResponse as _csi_v1_NodeStageVolumeResponse, NodeStageVolumeResponse__Output as _csi_v1_NodeStageVolumeResponse__Output } from '../../csi/v1/NodeStageVolumeResponse.js';
import type { NodeUnpublishVolumeRequest as _csi_v1_NodeUnpublishVolumeRequest, NodeUnpublishVolumeRequest__Output as _csi_v1_NodeUnpublishVolumeRequest__Output } from '../../csi/v1/NodeUnpublishVolumeRequest.js';
import type { NodeUnpublishVolumeResponse as _csi_v1_NodeUnpublishVolumeResponse, NodeUnpublishVolumeResponse__Output as _csi_v1_NodeUnpublishVolumeResponse__Output } from '../../csi/v1/NodeUnpublishVolumeResponse.js';
import type { NodeUnstageVolumeRequest as _csi_v1_NodeUnstageVolumeRequest, NodeUnstageVolumeRequest__Output as _csi_v1_NodeUnstageVolumeRequest__Output } from '../../csi/v1/NodeUnstageVolumeRequest.js';
import type { NodeUnstageVolumeResponse as _csi_v1_NodeUnstageVolumeResponse, NodeUnstageVolumeResponse__Output as _csi_v1_NodeUnstageVolumeResponse__Output } from '../../csi/v1/NodeUnstageVolumeResponse.js';

export interface NodeDefinition {
  NodeExpandVolume: MethodDefinition<_csi_v1_NodeExpandVolumeRequest, _csi_v1_NodeExpandVolumeResponse, _csi_v1_NodeExpandVolumeRequest__Output, _csi_v1_NodeExpandVolumeResponse__Output>
  NodeGetCapabilities: MethodDefinition<_csi_v1_NodeGetCapabilitiesRequest, _csi_v1_NodeGetCapabilitiesResponse, _csi_v1_NodeGetCapabilitiesRequest__Output, _csi_v1_NodeGetCapabilitiesResponse__Output>
  NodeGetInfo: MethodDefinition<_csi_v1_NodeGetInfoRequest, _csi_v1_NodeGetInfoResponse, _csi_v1_NodeGetInfoRequest__Output, _csi_v1_NodeGetInfoResponse__Output>
  NodeGetVolumeStats: MethodDefinition<_csi_v1_NodeGetVolumeStatsRequest, _csi_v1_NodeGetVolumeStatsResponse, _csi_v1_NodeGetVolumeStatsRequest__Output, _csi_v1_NodeGetVolumeStatsResponse__Output>
  NodePublishVolume: MethodDefinition<_csi_v1_NodePublishVolumeRequest, _csi_v1_NodePublishVolumeResponse, _csi_v1_NodePublishVolumeRequest__Output, _csi_v1_NodePublishVolumeResponse__Output>
  NodeStageVolume: MethodDefinition<_csi_v1_NodeStageVolumeRequest, _csi_v1_NodeStageVolumeResponse, _csi_v1_NodeStageVolumeRequest__Output, _csi_v1_NodeStageVolumeResponse__Output>
  NodeUnpublishVolume: MethodDefinition<_csi_v1_NodeUnpublishVolumeRequest, _csi_v1_NodeUnpublishVolumeResponse, _csi_v1_NodeUnpublishVolumeRequest__Output, _csi_v1_NodeUnpublishVolumeResponse__Output>
  NodeUnstageVolume: MethodDefinition<_csi_v1_NodeUnstageVolumeRequest, _csi_v1_NodeUnstageVolumeResponse, _csi_v1_NodeUnstageVolumeRequest__Output, _csi_v1_NodeUnstageVolumeResponse__Output>
}
