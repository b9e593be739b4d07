/**
 * Gate CSIListGlobalVolumesWithoutStagingDir (docs/feature-gates.md): KEP-6058's global listing
 * also registers a volume directory whose vol_data.json is readable but whose staging directory is
 * missing (a teardown cut short after the staging dir's rmdir; a block staging dir lost with a
 * power cut), or that holds only nodevol's complete vol_data.json.tmp (a MountDevice cut short
 * before its rename: the write is finished first), so that it is unstaged (idempotently) and
 * cleaned; a leftover volume directory that names no volume is removed (skippedGlobalDirs.ts),
 * also one a teardown left in this life (its last rmdir failed; UnmountDevice's retry finds no
 * vol_data.json and, as kubelet, returns success).
 *
 * Hooks: the CSI plugin's ListGlobalVolumes, for each directory it skipped (globalDirSkipped);
 * csi_block.go TearDownDevice, NodeUnstageVolume also when the staging path is gone
 * (unstageWhenStagingPathGone); csi_attacher.go UnmountDevice when vol_data.json is gone, the
 * empty volume dir a failed last rmdir of removeMountDir left (volumeDataMissingAtUnmountDevice);
 * csi_attacher.go MountDevice, a claim on the volume dir for the
 * whole call, so that a removal of a leftover never overlaps it (beginMountDevice,
 * volumeDirClaims.ts); and the node's housekeeping, the removals that failed, retried.
 */
import { CSIListGlobalVolumesWithoutStagingDir } from '../../features/features.js';
import type { NodevolGate } from '../nodevolGate.js';
import { SkippedGlobalDirs } from './skippedGlobalDirs.js';
import { VolumeDirClaims } from './volumeDirClaims.js';

export const listGlobalVolumesWithoutStagingDir: NodevolGate = {
  name: CSIListGlobalVolumesWithoutStagingDir,
  proofScenarios: ['kep-story-1', 'leftover-dir-read-only', 'interrupted-write-root-dir-full'],
  doc: 'csilistglobalvolumeswithoutstagingdir',
  create: (host) => {
    // One life's claims and leftovers: a crash ends them with the life.
    const claims = new VolumeDirClaims();
    const skipped = new SkippedGlobalDirs(host, claims);
    return {
      csi: {
        globalDirSkipped: (dir) => skipped.volumeWithoutStagingDir(dir),
        beginMountDevice: (volumeDir) => claims.claimForMountDevice(volumeDir),
        // A staging dir lost with a power cut does not mean the driver unstaged; NodeUnstageVolume
        // is idempotent, so it is sent all the same.
        unstageWhenStagingPathGone: true,
        // A teardown whose last rmdir failed leaves the empty volume dir: removed as the listing's.
        volumeDataMissingAtUnmountDevice: (volumeDir) => skipped.volumeDataMissingAtUnmountDevice(volumeDir),
      },
      housekeeping: () => skipped.removeLeftoverGlobalDirs(),
    };
  },
};
