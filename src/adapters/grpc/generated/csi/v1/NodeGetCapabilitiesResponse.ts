// Original file: proto/csi/v1/csi.proto

import type { NodeServiceCapability as _csi_v1_NodeServiceCapability, NodeServiceCapability__Output as _csi_v1_NodeServiceCapability__Output } from '../../csi/v1/NodeServiceCapability.js';

export interface NodeGetCapabilitiesResponse {
  'capabilities'?: (_csi_v1_NodeServiceCapability)[];
}

export interface NodeGetCapabilitiesResponse__Output {
  'capabilities': (_csi_v1_NodeServiceCapability__Output)[];
}
