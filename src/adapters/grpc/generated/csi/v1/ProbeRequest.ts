// Original file: proto/csi/v1/csi.proto


export interface ProbeRequest {
}

export interface ProbeRequest__Output {
}
