// Original file: proto/csi/v1/csi.proto

import type { VolumeCapability as _csi_v1_VolumeCapability, VolumeCapability__Output as _csi_v1_VolumeCapability__Output } from '../../csi/v1/VolumeCapability.js';

export interface ValidateVolumeCapabilitiesRequest {
  'volumeId'?: (string);
  'volumeContext'?: ({[key: string]: string});
  'volumeCapabilities'?: (_csi_v1_VolumeCapability)[];
  'parameters'?: ({[key: string]: string});
  'secrets'?: ({[key: string]: string});
}

export interface ValidateVolumeCapabilitiesRequest__Output {
  'volumeId': (string);
  'volumeContext': ({[key: string]: string});
  'volumeCapabilities': (_csi_v1_VolumeCapability__Output)[];
  'parameters': ({[key: string]: string});
  'secrets': ({[key: string]: string});
}
