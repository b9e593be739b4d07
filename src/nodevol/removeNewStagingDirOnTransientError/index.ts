/**
 * Gate CSIRemoveNewStagingDirOnTransientError (docs/feature-gates.md): a MountDevice that made the
 * volume directory (it was not there) and then fails transiently before NodeStageVolume (the
 * NodeGetCapabilities call for VOLUME_MOUNT_GROUP) removes what it made: no NodeStageVolume was
 * sent, so nothing can be staged there. Otherwise the directory and its vol_data.json stay, and
 * the device is not in the actual state: when the pod goes before a retry, no operation removes
 * them (and with KEP-6058 the next start lists, and reports in use, a volume never staged here).
 *
 * Hook: csi_attacher.go MountDevice, whether the volume dir exists before MkdirAll of the staging
 * path, and after a failed VOLUME_MOUNT_GROUP check.
 */
import { CSIRemoveNewStagingDirOnTransientError } from '../../features/features.js';
import { pathExists } from '../../ports/fs.js';
import { csiLog } from '../../volume/csi/csiUtil.js';
import type { NodevolGate } from '../nodevolGate.js';

export const removeNewStagingDirOnTransientError: NodevolGate = {
  name: CSIRemoveNewStagingDirOnTransientError,
  proofScenarios: ['mount-group-check-fails'],
  doc: 'csiremovenewstagingdirontransienterror',
  create: () => ({
    csi: {
      newVolumeDir: {
        exists: pathExists,
        afterTransientError: (host, deviceMountPath, removeMountDir) => {
          host.logger.v(2).info(csiLog('attacher.MountDevice removes the volume dir it made: the transient failure came before NodeStageVolume'), { deviceMountPath });
          return removeMountDir();
        },
      },
    },
  }),
};
