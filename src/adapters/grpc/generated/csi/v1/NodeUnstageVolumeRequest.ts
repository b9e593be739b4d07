// Original file: proto/csi/v1/csi.proto


export interface NodeUnstageVolumeRequest {
  'volumeId'?: (string);
  'stagingTargetPath'?: (string);
}

export interface NodeUnstageVolumeRequest__Output {
  'volumeId': (string);
  'stagingTargetPath': (string);
}
