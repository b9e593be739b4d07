// Original file: proto/csi/v1/csi.proto


export interface NodeGetVolumeStatsRequest {
  'volumeId'?: (string);
  /**
   * Where the volume is staged or published.
   */
  'volumePath'?: (string);
  'stagingTargetPath'?: (string);
}

export interface NodeGetVolumeStatsRequest__Output {
  'volumeId': (string);
  /**
   * Where the volume is staged or published.
   */
  'volumePath': (string);
  'stagingTargetPath': (string);
}
