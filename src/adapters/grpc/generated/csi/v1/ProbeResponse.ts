// Original file: proto/csi/v1/csi.proto

import type { BoolValue as _google_protobuf_BoolValue, BoolValue__Output as _google_protobuf_BoolValue__Output } from '../../google/protobuf/BoolValue.js';

export interface ProbeResponse {
  /**
   * Unset means "ready" to the caller; a wrapper so that false and unset differ.
   */
  'ready'?: (_google_protobuf_BoolValue | null);
}

export interface ProbeResponse__Output {
  /**
   * Unset means "ready" to the caller; a wrapper so that false and unset differ.
   */
  'ready': (_google_protobuf_BoolValue__Output | null);
}
