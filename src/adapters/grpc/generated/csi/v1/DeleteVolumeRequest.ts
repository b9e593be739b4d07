// Original file: proto/csi/v1/csi.proto


export interface DeleteVolumeRequest {
  'volumeId'?: (string);
  'secrets'?: ({[key: string]: string});
}

export interface DeleteVolumeRequest__Output {
  'volumeId': (string);
  'secrets': ({[key: string]: string});
}
