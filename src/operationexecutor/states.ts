/**
 * The state names of kubelet's volume manager (operationexecutor constants), as string-literal
 * unions so that every switch over them is checked for exhaustiveness.
 */
export type Attachability = 'True' | 'False' | 'Uncertain';
export type DeviceMountState = 'DeviceGloballyMounted' | 'DeviceMountUncertain' | 'DeviceNotMounted';
export type VolumeMountState = 'VolumeMounted' | 'VolumeMountUncertain' | 'VolumeNotMounted';
