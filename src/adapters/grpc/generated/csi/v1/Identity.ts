// Original file: proto/csi/v1/csi.proto

import type { MethodDefinition } from '@grpc/proto-loader'
import type { GetPluginCapabilitiesRequest as _csi_v1_GetPluginCapabilitiesRequest, GetPluginCapabilitiesRequest__Output as _csi_v1_GetPluginCapabilitiesRequest__Output } from '../../csi/v1/GetPluginCapabilitiesRequest.js';
import type { GetPluginCapabilitiesResponse as _csi_v1_GetPluginCapabilitiesResponse, GetPluginCapabilitiesResponse__Output as _csi_v1_GetPluginCapabilitiesResponse__Output } from '../../csi/v1/GetPluginCapabilitiesResponse.js';
import type { GetPluginInfoRequest as _csi_v1_GetPluginInfoRequest, GetPluginInfoRequest__Output as _csi_v1_GetPluginInfoRequest__Output } from '../../csi/v1/GetPluginInfoRequest.js';
import type { GetPluginInfoResponse as _csi_v1_GetPluginInfoResponse, GetPluginInfoResponse__Output as _csi_v1_GetPluginInfoResponse__Output } from '../../csi/v1/GetPluginInfoResponse.js';
import type { ProbeRequest as _csi_v1_ProbeRequest, ProbeRequest__Output as _csi_v1_ProbeRequest__Output } from '../../csi/v1/ProbeRequest.js';
import type { ProbeResponse as _csi_v1_ProbeResponse, ProbeResponse__Output as _csi_v1_ProbeResponse__Output } from '../../csi/v1/ProbeResponse.js';

export interface IdentityDefinition {
  GetPluginCapabilities: MethodDefinition<_csi_v1_GetPluginCapabilitiesRequest, _csi_v1_GetPluginCapabilitiesResponse, _csi_v1_GetPluginCapabilitiesRequest__Output, _csi_v1_GetPluginCapabilitiesResponse__Output>
  GetPluginInfo: MethodDefinition<_csi_v1_GetPluginInfoRequest, _csi_v1_GetPluginInfoResponse, _csi_v1_GetPluginInfoRequest__Output, _csi_v1_GetPluginInfoResponse__Output>
  Probe: MethodDefinition<_csi_v1_ProbeRequest, _csi_v1_ProbeResponse, _csi_v1_ProbeRequest__Output, _csi_v1_ProbeResponse__Output>
}
