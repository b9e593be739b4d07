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
 * actual_state_of_world.go IsVolumeMountedElsewhere). The housekeeping loop forgets a directory
 * once it is gone.
 */
import { CSIReadWriteOncePodWaitsForUnreconstructedMounts } from '../../features/features.js';
import { isNotExist } from '../../ports/fs.js';
import { specName } from '../../volume/spec.js';
import type { VolumeHost } from '../../volume/volumeHost.js';
import type { PodVolume } from '../../volumemanager/reconciler/podVolumes.js';
import type { NodevolGate } from '../nodevolGate.js';

export const readWriteOncePodWaitsForUnreconstructedMounts: NodevolGate = {
  name: CSIReadWriteOncePodWaitsForUnreconstructedMounts,
  proofScenarios: ['rwop-pod-replaced-unreconstructed'],
  doc: 'csireadwriteoncepodwaitsforunreconstructedmounts',
  create: (host) => {
    // The pod volume dirs that failed reconstruction and are still there: in memory, for this
    // life of the node (the next life walks the pod dirs again).
    const unreconstructed = new Map<string, PodVolume>();
    return {
      reconstruct: {
        podVolumesFailedReconstruction: (failed) => {
          for (const volume of failed) unreconstructed.set(volume.volumePath, volume);
        },
      },
      operationGenerator: {
        volumeMountedElsewhere: (vtm, asw) => {
          if (asw.isVolumeMountedElsewhere(vtm.volumeName, vtm.podName)) return true;
          const name = specName(vtm.spec);
          for (const volume of unreconstructed.values()) {
            if (volume.podName === vtm.podName || volume.volumeSpecName !== name) continue;
            host.logger.v(2).info('A pod volume dir that could not be reconstructed still holds the ReadWriteOncePod volume', {
              volumeName: vtm.volumeName,
              podName: vtm.podName,
              otherPodName: volume.podName,
              volumePath: volume.volumePath,
            });
            return true;
          }
          return false;
        },
      },
      housekeeping: () => forgetRemoved(host, unreconstructed),
    };
  },
};

/** Forgets the recorded directories that are gone (their TearDown succeeded, or they were removed). */
async function forgetRemoved(host: VolumeHost, unreconstructed: Map<string, PodVolume>): Promise<void> {
  for (const [path, volume] of [...unreconstructed]) {
    try {
      await host.fs.lstat(path);
    } catch (err) {
      // Any other error: it may still be there, so it still counts.
      if (!isNotExist(err)) continue;
      unreconstructed.delete(path);
      host.logger.v(2).info('A pod volume dir that could not be reconstructed is gone; it no longer holds its volume', { podName: volume.podName, volumeSpecName: volume.volumeSpecName });
    }
  }
}
