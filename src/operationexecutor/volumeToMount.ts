/**
 * One (volume, pod) pair to make real, as the reconciler hands it to the operation executor
 * (kubelet operationexecutor.VolumeToMount); the desired state of world produces them.
 */
import type { Pod } from '../api/core.js';
import type { UniquePodName, UniqueVolumeName } from '../layout/names.js';
import type { Spec } from '../volume/spec.js';

export interface PodToMount {
  readonly podName: UniquePodName;
  readonly pod: Pod;
  readonly spec: Spec;
  /** pod.spec.volumes[i].name */
  readonly outerVolumeSpecName: string;
  readonly seLinuxMountContext: string;
}

/** One (volume, pod) pair the reconciler must make real (kubelet VolumeToMount). */
export interface VolumeToMount extends PodToMount {
  readonly volumeName: UniqueVolumeName;
  readonly pluginName: string;
  readonly pluginIsAttachable: boolean;
  readonly pluginIsDeviceMountable: boolean;
  /** Set once node.status.volumesInUse has been written with this volume. */
  readonly reportedInUse: boolean;
}
