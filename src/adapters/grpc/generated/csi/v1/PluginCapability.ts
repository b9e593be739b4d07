// Original file: proto/csi/v1/csi.proto


export interface _csi_v1_PluginCapability_Service {
  'type'?: (_csi_v1_PluginCapability_Service_Type);
}

export interface _csi_v1_PluginCapability_Service__Output {
  'type': (_csi_v1_PluginCapability_Service_Type__Output);
}

// Original file: proto/csi/v1/csi.proto

export const _csi_v1_PluginCapability_Service_Type = {
  UNKNOWN: 'UNKNOWN',
  CONTROLLER_SERVICE: 'CONTROLLER_SERVICE',
  VOLUME_ACCESSIBILITY_CONSTRAINTS: 'VOLUME_ACCESSIBILITY_CONSTRAINTS',
  GROUP_CONTROLLER_SERVICE: 'GROUP_CONTROLLER_SERVICE',
} as const;

export type _csi_v1_PluginCapability_Service_Type =
  | 'UNKNOWN'
  | 0
  | 'CONTROLLER_SERVICE'
  | 1
  | 'VOLUME_ACCESSIBILITY_CONSTRAINTS'
  | 2
  | 'GROUP_CONTROLLER_SERVICE'
  | 3

export type _csi_v1_PluginCapability_Service_Type__Output = typeof _csi_v1_PluginCapability_Service_Type[keyof typeof _csi_v1_PluginCapability_Service_Type]

// Original file: proto/csi/v1/csi.proto

export const _csi_v1_PluginCapability_VolumeExpansion_Type = {
  UNKNOWN: 'UNKNOWN',
  ONLINE: 'ONLINE',
  OFFLINE: 'OFFLINE',
} as const;

export type _csi_v1_PluginCapability_VolumeExpansion_Type =
  | 'UNKNOWN'
  | 0
  | 'ONLINE'
  | 1
  | 'OFFLINE'
  | 2

export type _csi_v1_PluginCapability_VolumeExpansion_Type__Output = typeof _csi_v1_PluginCapability_VolumeExpansion_Type[keyof typeof _csi_v1_PluginCapability_VolumeExpansion_Type]

export interface _csi_v1_PluginCapability_VolumeExpansion {
  'type'?: (_csi_v1_PluginCapability_VolumeExpansion_Type);
}

export interface _csi_v1_PluginCapability_VolumeExpansion__Output {
  'type': (_csi_v1_PluginCapability_VolumeExpansion_Type__Output);
}

export interface PluginCapability {
  'service'?: (_csi_v1_PluginCapability_Service | null);
  'volumeExpansion'?: (_csi_v1_PluginCapability_VolumeExpansion | null);
  'type'?: "service"|"volumeExpansion";
}

export interface PluginCapability__Output {
  'service'?: (_csi_v1_PluginCapability_Service__Output | null);
  'volumeExpansion'?: (_csi_v1_PluginCapability_VolumeExpansion__Output | null);
  'type'?: "service"|"volumeExpansion";
}
