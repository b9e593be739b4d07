// Original file: proto/csi/v1/csi.proto

import type { Volume as _csi_v1_Volume, Volume__Output as _csi_v1_Volume__Output } from '../../csi/v1/Volume.js';

export interface CreateVolumeResponse {
  'volume'?: (_csi_v1_Volume | null);
}

export interface CreateVolumeResponse__Output {
  'volume': (_csi_v1_Volume__Output | null);
}
