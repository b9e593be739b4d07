// Original file: proto/csi/v1/csi.proto


export interface NodeGetCapabilitiesRequest {
}

export interface NodeGetCapabilitiesRequest__Output {
}
