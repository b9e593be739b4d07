// Original file: proto/csi/v1/csi.proto

import type { VolumeCapability as _csi_v1_VolumeCapability, VolumeCapability__Output as _csi_v1_VolumeCapability__Output } from '../../csi/v1/VolumeCapability.js';

export interface ControllerPublishVolumeRequest {
  'volumeId'?: (string);
  'nodeId'?: (string);
  'volumeCapability'?: (_csi_v1_VolumeCapability | null);
  'readonly'?: (boolean);
  'secrets'?: ({[key: string]: string});
  'volumeContext'?: ({[key: string]: string});
}

export interface ControllerPublishVolumeRequest__Output {
  'volumeId': (string);
  'nodeId': (string);
  'volumeCapability': (_csi_v1_VolumeCapability__Output | null);
  'readonly': (boolean);
  'secrets': ({[key: string]: string});
  'volumeContext': ({[key: string]: string});
}
