// Original file: proto/csi/v1/csi.proto

import type { Topology as _csi_v1_Topology, Topology__Output as _csi_v1_Topology__Output } from '../../csi/v1/Topology.js';
import type { Long } from '@grpc/proto-loader';

export interface NodeGetInfoResponse {
  'nodeId'?: (string);
  'maxVolumesPerNode'?: (number | string | Long);
  'accessibleTopology'?: (_csi_v1_Topology | null);
}

export interface NodeGetInfoResponse__Output {
  'nodeId': (string);
  'maxVolumesPerNode': (number);
  'accessibleTopology': (_csi_v1_Topology__Output | null);
}
