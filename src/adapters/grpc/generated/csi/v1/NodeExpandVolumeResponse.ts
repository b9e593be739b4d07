// Original file: proto/csi/v1/csi.proto

import type { Long } from '@grpc/proto-loader';

export interface NodeExpandVolumeResponse {
  'capacityBytes'?: (number | string | Long);
}

export interface NodeExpandVolumeResponse__Output {
  'capacityBytes': (number);
}
