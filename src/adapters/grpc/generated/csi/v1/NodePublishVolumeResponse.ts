// Original file: proto/csi/v1/csi.proto


export interface NodePublishVolumeResponse {
}

export interface NodePublishVolumeResponse__Output {
}
