/**
 * The points of the operation generator (operation_generator.go) where nodevol may decide
 * differently from kubelet. Absent: kubelet's decision. Every hook is synchronous, as the
 * decision it replaces; the implementations are in src/nodevol/ (see csiHooks.ts for the rules
 * every hook follows).
 */
import type { UniquePodName, UniqueVolumeName } from '../layout/names.js';
import type { MounterArgs, VolumePlugin, VolumeUnmounter } from '../volume/plugins.js';
import type { ActualStateOfWorldMounterUpdater, UnmountTarget } from './actualStateOfWorldUpdater.js';
import type { VolumeToMount } from './volumeToMount.js';

export interface OperationGeneratorHooks {
  /**
   * GenerateMountVolumeFunc / GenerateMapVolumeFunc: the args of MountDevice and SetUpDevice
   * (`device`) and of SetUp (`volume`), from kubelet's, computed where kubelet builds them.
   */
  readonly mounterArgs?: (step: 'device' | 'volume', vtm: VolumeToMount, asw: ActualStateOfWorldMounterUpdater, args: MounterArgs) => MounterArgs;
  /** markDeviceErrorState: whether an uncertain device stays uncertain after a finished-operation error. Absent: IsVolumeDeviceReconstructed. */
  readonly deviceStaysUncertain?: (asw: ActualStateOfWorldMounterUpdater, volumeName: UniqueVolumeName) => boolean;
  /** markVolumeErrorState: the same for one pod's mount. Absent: IsVolumeReconstructed. */
  readonly volumeMountStaysUncertain?: (asw: ActualStateOfWorldMounterUpdater, volumeName: UniqueVolumeName, podName: UniquePodName) => boolean;
  /**
   * GenerateMountVolumeFunc / GenerateMapVolumeFunc, the ReadWriteOncePod check of a PV whose only
   * access mode is ReadWriteOncePod: whether a pod other than vtm's has the volume (possibly)
   * mounted. Absent: kubelet's answer, the actual state's IsVolumeMountedElsewhere. A boolean is
   * used at once (no turn, as kubelet's synchronous check); a promise, only when the answer needs
   * the file system, is awaited.
   */
  readonly volumeMountedElsewhere?: (vtm: VolumeToMount, asw: ActualStateOfWorldMounterUpdater) => boolean | Promise<boolean>;
  /** GenerateUnmountVolumeFunc, when NewUnmounter failed with `err`: an unmounter after all, or undefined for kubelet's error. */
  readonly unmounterAfterNewUnmounterError?: (plugin: VolumePlugin, target: UnmountTarget, err: unknown) => VolumeUnmounter | undefined;
}
