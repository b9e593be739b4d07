// Original file: proto/csi/v1/csi.proto


/**
 * Whether a volume is usable; `message` says why not.
 */
export interface VolumeCondition {
  'abnormal'?: (boolean);
  'message'?: (string);
}

/**
 * Whether a volume is usable; `message` says why not.
 */
export interface VolumeCondition__Output {
  'abnormal': (boolean);
  'message': (string);
}
