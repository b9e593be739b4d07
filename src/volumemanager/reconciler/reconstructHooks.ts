/**
 * The points of reconstruction (reconstruct.go, reconstruct_common.go) where nodevol may decide
 * differently from kubelet. The implementations are in src/nodevol/ (see
 * volume/csi/csiHooks.ts for the rules every hook follows).
 */
import type { PersistentVolumeMode } from '../../api/core.js';
import type { UniquePodName, UniqueVolumeName } from '../../layout/names.js';
import type { Spec } from '../../volume/spec.js';
import type { ActualStateOfWorld } from '../cache/actualStateOfWorld.js';
import type { DesiredStateOfWorld } from '../cache/desiredStateOfWorld.js';
import type { PodVolume } from './podVolumes.js';

/** A volume the KEP-6058 global listing registered in this reconstruction pass. */
export interface RegisteredGlobalVolume {
  readonly volumeName: UniqueVolumeName;
  readonly pluginName: string;
  readonly spec: Spec;
  readonly volumeMode: PersistentVolumeMode;
  readonly seLinuxMountContext: string;
}

/** What reconstructVolumes knows once the pod directories were walked (or their walk failed). */
export interface PodVolumesWalked {
  /** The candidates that failed reconstruction (kubelet's volumesFailedReconstruction). */
  readonly failed: readonly PodVolume[];
  /** What the global listing registered, in its order. */
  readonly registered: readonly RegisteredGlobalVolume[];
  /** What the walk reconstructed, by volume (not yet in the actual state: updateStates runs after). */
  readonly fromPodDirs: ReadonlyMap<UniqueVolumeName, readonly { readonly volume: { readonly podName: UniquePodName } }[]>;
  readonly asw: ActualStateOfWorld;
}

/** What cleanOrphanVolumes works with. */
export interface OrphanVolumeCleanup {
  /** The candidates that failed reconstruction and are still to clean up. */
  readonly failed: readonly PodVolume[];
  readonly dsw: Pick<DesiredStateOfWorld, 'volumeExistsWithSpecName'>;
  readonly asw: Pick<ActualStateOfWorld, 'volumeExistsWithSpecName'>;
  readonly isOperationPending: (volumeName: string, podName: string) => boolean;
  /** kubelet's cleanupMounts of one candidate: resolves to what starting its UnmountVolume threw, or undefined. */
  readonly cleanupMounts: (volume: PodVolume) => Promise<unknown>;
}

export interface ReconstructHooks {
  /**
   * reconstructVolumes, after the pod directories were walked (or their walk failed), before
   * updateStates: the candidates left for cleanOrphanVolumes. REQUIRED: the pass awaits it there
   * (kubelet's default, {@link upstreamReconstructHooks}, keeps them all at once).
   */
  readonly afterPodVolumesWalked: (walked: PodVolumesWalked) => Promise<readonly PodVolume[]>;
  /**
   * reconstructVolumes, once the pod directories were walked: every candidate that failed
   * reconstruction (kubelet's volumesFailedReconstruction, as the walk left it, before
   * afterPodVolumesWalked). Absent: kubelet keeps them for cleanOrphanVolumes only.
   */
  readonly podVolumesFailedReconstruction?: (failed: readonly PodVolume[]) => void;
  /** cleanOrphanVolumes, instead of kubelet's one pass: the candidates to keep for the next. Absent: kubelet's. */
  readonly cleanOrphanVolumes?: (cleanup: OrphanVolumeCleanup) => Promise<readonly PodVolume[]>;
}

/** Kubelet's reconstruction: every failed candidate stays for cleanOrphanVolumes (a settled promise: one turn). */
export const upstreamReconstructHooks: ReconstructHooks = {
  afterPodVolumesWalked: ({ failed }) => Promise.resolve(failed),
};
