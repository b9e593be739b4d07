// Original file: proto/csi/v1/csi.proto

import type { CapacityRange as _csi_v1_CapacityRange, CapacityRange__Output as _csi_v1_CapacityRange__Output } from '../../csi/v1/CapacityRange.js';
import type { VolumeCapability as _csi_v1_VolumeCapability, VolumeCapability__Output as _csi_v1_VolumeCapability__Output } from '../../csi/v1/VolumeCapability.js';

export interface NodeExpandVolumeRequest {
  'volumeId'?: (string);
  'volumePath'?: (string);
  'capacityRange'?: (_csi_v1_CapacityRange | null);
  'stagingTargetPath'?: (string);
  'volumeCapability'?: (_csi_v1_VolumeCapability | null);
  'secrets'?: ({[key: string]: string});
}

export interface NodeExpandVolumeRequest__Output {
  'volumeId': (string);
  'volumePath': (string);
  'capacityRange': (_csi_v1_CapacityRange__Output | null);
  'stagingTargetPath': (string);
  'volumeCapability': (_csi_v1_VolumeCapability__Output | null);
  'secrets': ({[key: string]: string});
}
