// Original file: proto/csi/v1/csi.proto


export interface Topology {
  'segments'?: ({[key: string]: string});
}

export interface Topology__Output {
  'segments': ({[key: string]: string});
}
