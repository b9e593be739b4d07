// Original file: proto/csi/v1/csi.proto


export interface _csi_v1_VolumeContentSource_SnapshotSource {
  'snapshotId'?: (string);
}

export interface _csi_v1_VolumeContentSource_SnapshotSource__Output {
  'snapshotId': (string);
}

export interface _csi_v1_VolumeContentSource_VolumeSource {
  'volumeId'?: (string);
}

export interface _csi_v1_VolumeContentSource_VolumeSource__Output {
  'volumeId': (string);
}

export interface VolumeContentSource {
  'snapshot'?: (_csi_v1_VolumeContentSource_SnapshotSource | null);
  'volume'?: (_csi_v1_VolumeContentSource_VolumeSource | null);
  'type'?: "snapshot"|"volume";
}

export interface VolumeContentSource__Output {
  'snapshot'?: (_csi_v1_VolumeContentSource_SnapshotSource__Output | null);
  'volume'?: (_csi_v1_VolumeContentSource_VolumeSource__Output | null);
  'type'?: "snapshot"|"volume";
}
