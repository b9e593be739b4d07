/**
 * What operations tell the actual state of world, owned by the operation executor as in kubelet
 * (operationexecutor.ActualStateOfWorldMounterUpdater / AttacherUpdater, MarkVolumeOpts): the
 * operations write through these narrow interfaces and volumemanager/cache implements them, so
 * the executor never imports the cache.
 */
import type { UniquePodName, UniqueVolumeName } from '../layout/names.js';
import type { Spec } from '../volume/spec.js';
import type { Attachability, DeviceMountState, VolumeMountState } from './states.js';

/** What a mount operation tells the ASW about one pod's mount (kubelet MarkVolumeOpts). */
export interface MarkVolumeOpts {
  readonly podName: UniquePodName;
  readonly podUID: string;
  readonly volumeName: UniqueVolumeName;
  /**
   * undefined only for the cleanup of a volume that failed reconstruction (kubelet passes a nil
   * spec); a new record then takes the volume's spec.
   */
  readonly volumeSpec: Spec | undefined;
  /** Name of the volume in the pod spec (pod.spec.volumes[i].name); '' when unknown. */
  readonly outerVolumeSpecName: string;
  /** The inner spec name: the PV name or the pod volume name. */
  readonly innerVolumeSpecName: string;
  readonly pluginName: string;
  readonly volumeMountState: VolumeMountState;
  readonly seLinuxMountContext: string;
}

/** A volume attached to the node, as a value (kubelet AttachedVolume). */
export interface AttachedVolume {
  readonly volumeName: UniqueVolumeName;
  readonly volumeSpec: Spec;
  readonly pluginName: string;
  readonly pluginIsAttachable: boolean;
  readonly attachability: Attachability;
  readonly deviceMountState: DeviceMountState;
  readonly devicePath: string;
  readonly deviceMountPath: string;
  readonly seLinuxMountContext: string | undefined;
}

/** One pod's mount of a volume, as a value (kubelet MountedVolume). */
export interface MountedVolume {
  readonly podName: UniquePodName;
  readonly podUID: string;
  readonly volumeName: UniqueVolumeName;
  readonly innerVolumeSpecName: string;
  readonly outerVolumeSpecName: string;
  readonly pluginName: string;
  readonly volumeSpec: Spec;
  readonly volumeMountState: VolumeMountState;
  readonly seLinuxMountContext: string;
  readonly deviceMountPath: string;
}

/** What an unmount needs: a MountedVolume whose spec is undefined for a failed reconstruction's cleanup. */
export type UnmountTarget = Pick<
  MountedVolume,
  'podName' | 'podUID' | 'volumeName' | 'innerVolumeSpecName' | 'outerVolumeSpecName' | 'pluginName'
> & { readonly volumeSpec: Spec | undefined };

/** The narrow updater a mount/unmount operation receives. */
export interface ActualStateOfWorldMounterUpdater {
  markVolumeAsMounted(opts: MarkVolumeOpts): void;
  markVolumeMountAsUncertain(opts: MarkVolumeOpts): void;
  markVolumeAsUnmounted(podName: UniquePodName, volumeName: UniqueVolumeName): void;
  markDeviceAsMounted(volumeName: UniqueVolumeName, devicePath: string, deviceMountPath: string, seLinuxMountContext: string): void;
  markDeviceAsUncertain(volumeName: UniqueVolumeName, devicePath: string, deviceMountPath: string, seLinuxMountContext: string): void;
  markDeviceAsUnmounted(volumeName: UniqueVolumeName): void;
  getDeviceMountState(volumeName: UniqueVolumeName): DeviceMountState;
  getVolumeMountState(volumeName: UniqueVolumeName, podName: UniquePodName): VolumeMountState;
  isVolumeReconstructed(volumeName: UniqueVolumeName, podName: UniquePodName): boolean;
  isVolumeDeviceReconstructed(volumeName: UniqueVolumeName): boolean;
  /** Whether a pod other than `podName` has the volume mounted or possibly mounted (ReadWriteOncePod). */
  isVolumeMountedElsewhere(volumeName: UniqueVolumeName, podName: UniquePodName): boolean;
}

/** The narrow updater an attach/verify operation receives. */
export interface ActualStateOfWorldAttacherUpdater {
  markVolumeAsAttached(volumeName: UniqueVolumeName, spec: Spec, pluginName: string, devicePath: string, attachable: boolean): void;
  markVolumeAsDetached(volumeName: UniqueVolumeName): void;
}
