// Original file: proto/csi/v1/csi.proto

import type { MethodDefinition } from '@grpc/proto-loader'
import type { ControllerGetCapabilitiesRequest as _csi_v1_ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesRequest__Output as _csi_v1_ControllerGetCapabilitiesRequest__Output } from '../../csi/v1/ControllerGetCapabilitiesRequest.js';
import type { ControllerGetCapabilitiesResponse as _csi_v1_ControllerGetCapabilitiesResponse, ControllerGetCapabilitiesResponse__Output as _csi_v1_ControllerGetCapabilitiesResponse__Output } from '../../csi/v1/ControllerGetCapabilitiesResponse.js';
import type { ControllerPublishVolumeRequest as _csi_v1_ControllerPublishVolumeRequest, ControllerPublishVolumeRequest__Output as _csi_v1_ControllerPublishVolumeRequest__Output } from '../../csi/v1/ControllerPublishVolumeRequest.js';
import type { ControllerPublishVolumeResponse as _csi_v1_ControllerPublishVolumeResponse, ControllerPublishVolumeResponse__Output as _csi_v1_ControllerPublishVolumeResponse__Output } from '../../csi/v1/ControllerPublishVolumeResponse.js';
import type { ControllerUnpublishVolumeRequest as _csi_v1_ControllerUnpublishVolumeRequest, ControllerUnpublishVolumeRequest__Output as _csi_v1_ControllerUnpublishVolumeRequest__Output } from '../../csi/v1/ControllerUnpublishVolumeRequest.js';
import type { ControllerUnpublishVolumeResponse as _csi_v1_ControllerUnpublishVolumeResponse, ControllerUnpublishVolumeResponse__Output as _csi_v1_ControllerUnpublishVolumeResponse__Output } from '../../csi/v1/ControllerUnpublishVolumeResponse.js';
import type { CreateVolumeRequest as _csi_v1_CreateVolumeRequest, CreateVolumeRequest__Output as _csi_v1_CreateVolumeRequest__Output } from '../../csi/v1/CreateVolumeRequest.js';
import type { CreateVolumeResponse as _csi_v1_CreateVolumeResponse, CreateVolumeResponse__Output as _csi_v1_CreateVolumeResponse__Output } from '../../csi/v1/CreateVolumeResponse.js';
import type { DeleteVolumeRequest as _csi_v1_DeleteVolumeRequest, DeleteVolumeRequest__Output as _csi_v1_DeleteVolumeRequest__Output } from '../../csi/v1/DeleteVolumeRequest.js';
import type { DeleteVolumeResponse as _csi_v1_DeleteVolumeResponse, DeleteVolumeResponse__Output as _csi_v1_DeleteVolumeResponse__Output } from '../../csi/v1/DeleteVolumeResponse.js';
import type { ListVolumesRequest as _csi_v1_ListVolumesRequest, ListVolumesRequest__Output as _csi_v1_ListVolumesRequest__Output } from '../../csi/v1/ListVolumesRequest.js';
import type { ListVolumesResponse as _csi_v1_ListVolumesResponse, ListVolumesResponse__Output as _csi_v1_ListVolumesResponse__Output } from '../../csi/v1/ListVolumesResponse.js';
import type { ValidateVolumeCapabilitiesRequest as _csi_v1_ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesRequest__Output as _csi_v1_ValidateVolumeCapabilitiesRequest__Output } from '../../csi/v1/ValidateVolumeCapabilitiesRequest.js';
import type { ValidateVolumeCapabilitiesResponse as _csi_v1_ValidateVolumeCapabilitiesResponse, ValidateVolumeCapabilitiesResponse__Output as _csi_v1_ValidateVolumeCapabilitiesResponse__Output } from '../../csi/v1/ValidateVolumeCapabilitiesResponse.js';

export interface ControllerDefinition {
  ControllerGetCapabilities: MethodDefinition<_csi_v1_ControllerGetCapabilitiesRequest, _csi_v1_ControllerGetCapabilitiesResponse, _csi_v1_ControllerGetCapabilitiesRequest__Output, _csi_v1_ControllerGetCapabilitiesResponse__Output>
  ControllerPublishVolume: MethodDefinition<_csi_v1_ControllerPublishVolumeRequest, _csi_v1_ControllerPublishVolumeResponse, _csi_v1_ControllerPublishVolumeRequest__Output, _csi_v1_ControllerPublishVolumeResponse__Output>
  ControllerUnpublishVolume: MethodDefinition<_csi_v1_ControllerUnpublishVolumeRequest, _csi_v1_ControllerUnpublishVolumeResponse, _csi_v1_ControllerUnpublishVolumeRequest__Output, _csi_v1_ControllerUnpublishVolumeResponse__Output>
  CreateVolume: MethodDefinition<_csi_v1_CreateVolumeRequest, _csi_v1_CreateVolumeResponse, _csi_v1_CreateVolumeRequest__Output, _csi_v1_CreateVolumeResponse__Output>
  DeleteVolume: MethodDefinition<_csi_v1_DeleteVolumeRequest, _csi_v1_DeleteVolumeResponse, _csi_v1_DeleteVolumeRequest__Output, _csi_v1_DeleteVolumeResponse__Output>
  ListVolumes: MethodDefinition<_csi_v1_ListVolumesRequest, _csi_v1_ListVolumesResponse, _csi_v1_ListVolumesRequest__Output, _csi_v1_ListVolumesResponse__Output>
  ValidateVolumeCapabilities: MethodDefinition<_csi_v1_ValidateVolumeCapabilitiesRequest, _csi_v1_ValidateVolumeCapabilitiesResponse, _csi_v1_ValidateVolumeCapabilitiesRequest__Output, _csi_v1_ValidateVolumeCapabilitiesResponse__Output>
}
