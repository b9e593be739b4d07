// Original file: proto/csi/v1/csi.proto


export interface GetPluginInfoResponse {
  'name'?: (string);
  'vendorVersion'?: (string);
  'manifest'?: ({[key: string]: string});
}

export interface GetPluginInfoResponse__Output {
  'name': (string);
  'vendorVersion': (string);
  'manifest': ({[key: string]: string});
}
