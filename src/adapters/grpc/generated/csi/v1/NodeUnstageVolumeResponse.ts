// Original file: proto/csi/v1/csi.proto


export interface NodeUnstageVolumeResponse {
}

export interface NodeUnstageVolumeResponse__Output {
}
