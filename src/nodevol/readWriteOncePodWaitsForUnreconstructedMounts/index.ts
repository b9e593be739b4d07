/**
 * Gate CSIReadWriteOncePodWaitsForUnreconstructedMounts (docs/feature-gates.md): a pod volume
 * directory that failed reconstruction (its vol_data.json unreadable at start, no global mount to
 * fall back to) is in no state of the world, so kubelet's ReadWriteOncePod check cannot see it: a
 * new pod of the same ReadWriteOncePod volume is published while the old pod's target may still
 * be. With the gate, such a directory of another pod, carrying the volume's spec name (its PV
 * name), counts as "mounted elsewhere" until it is gone: the new pod's mount fails with kubelet's
 * ReadWriteOncePod error and is retried with backoff until the cleanup (CSIRetryReconstructionCleanup
 * retries it) has unpublished the target and removed the directory.
 *
 * The rule is "the pod volume directory is still there", not "the target is still a mount point":
 * kubelet's CSI TearDown removes the directory only after NodeUnpublishVolume returned OK, so a
 * directory that is gone is a target the driver no longer publishes; a target that is not (or no
 * longer) a mount point says nothing about the driver (a driver need not publish by mounting, and a
 * restart in the middle of a TearDown leaves the directory with the publication undecided).
 *
 * Hooks: reconstruct.go reconstructVolumes, the volumesFailedReconstruction it found
 * (podVolumesFailedReconstruction); operation_generator.go GenerateMountVolumeFunc /
 * GenerateMapVolumeFunc, the ReadWriteOncePod check (volumeMountedElsewhere, over
 * actual_state_of_world.go IsVolumeMountedElsewhere): each check of a volume with such a
 * directory recorded looks whether it is still there, and forgets one that is gone.
 */
import { CSIReadWriteOncePodWaitsForUnreconstructedMounts } from '../../features/features.js';
import { isNotExist } from '../../ports/fs.js';
import { specName } from '../../volume/spec.js';
import type { VolumeHost } from '../../volume/volumeHost.js';
import type { PodVolume } from '../../volumemanager/reconciler/podVolumes.js';
import type { NodevolGate } from '../nodevolGate.js';
import type { VolumeToMount } from '../../operationexecutor/volumeToMount.js';

export const readWriteOncePodWaitsForUnreconstructedMounts: NodevolGate = {
  name: CSIReadWriteOncePodWaitsForUnreconstructedMounts,
  proofScenarios: ['rwop-pod-replaced-unreconstructed'],
  doc: 'csireadwriteoncepodwaitsforunreconstructedmounts',
  create: (host) => {
    // The pod volume dirs that failed reconstruction and were not seen gone yet: in memory, for
    // this life of the node (the next life walks the pod dirs again).
    const unreconstructed = new Map<string, PodVolume>();
    return {
      reconstruct: {
        podVolumesFailedReconstruction: (failed) => {
          for (const volume of failed) unreconstructed.set(volume.volumePath, volume);
        },
      },
      operationGenerator: {
        // Kubelet's answer first, synchronously; the file system is asked (a promise) only when
        // another pod's dir of this PV is recorded, so every other check costs no turn.
        volumeMountedElsewhere: (vtm, asw) => {
          if (asw.isVolumeMountedElsewhere(vtm.volumeName, vtm.podName)) return true;
          const name = specName(vtm.spec);
          const others = [...unreconstructed.values()].filter((v) => v.podName !== vtm.podName && v.volumeSpecName === name);
          return others.length === 0 ? false : anyStillThere(host, unreconstructed, others, vtm);
        },
      },
    };
  },
};

/**
 * Whether one of `others` (recorded dirs of another pod, same PV) is still there; one that is gone
 * (its TearDown succeeded, or it was removed) is forgotten. One that cannot be looked at counts.
 */
async function anyStillThere(host: VolumeHost, unreconstructed: Map<string, PodVolume>, others: readonly PodVolume[], vtm: VolumeToMount): Promise<boolean> {
  const { fs, logger } = host;
  for (const volume of others) {
    try {
      await fs.lstat(volume.volumePath);
    } catch (err) {
      if (isNotExist(err)) {
        unreconstructed.delete(volume.volumePath);
        logger.v(2).info('A pod volume dir that could not be reconstructed is gone; it no longer holds its volume', { podName: volume.podName, volumeSpecName: volume.volumeSpecName });
        continue;
      }
    }
    logger.v(2).info('A pod volume dir that could not be reconstructed still holds the ReadWriteOncePod volume', {
      volumeName: vtm.volumeName,
      podName: vtm.podName,
      otherPodName: volume.podName,
      volumePath: volume.volumePath,
    });
    return true;
  }
  return false;
}
