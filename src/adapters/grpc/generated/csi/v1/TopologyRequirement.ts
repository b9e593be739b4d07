// Original file: proto/csi/v1/csi.proto

import type { Topology as _csi_v1_Topology, Topology__Output as _csi_v1_Topology__Output } from '../../csi/v1/Topology.js';

export interface TopologyRequirement {
  'requisite'?: (_csi_v1_Topology)[];
  'preferred'?: (_csi_v1_Topology)[];
}

export interface TopologyRequirement__Output {
  'requisite': (_csi_v1_Topology__Output)[];
  'preferred': (_csi_v1_Topology__Output)[];
}
