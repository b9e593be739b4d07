/**
 * Gate CSIUnstageCompletesBeforeRestage (kubernetes#121357; docs/feature-gates.md): before
 * NodeUnstageVolume the volume dir is durably marked (unstageMarker.ts) until it returns OK;
 * before NodeStageVolume of a marked volume NodeUnstageVolume is sent again and the stage goes on
 * only once that returned OK, so that a stage never overtakes an unstage still running at the
 * driver (a timed-out one, or one a restart or reboot forgot).
 *
 * Hooks: csi_attacher.go MountDevice and csi_block.go SetUpDevice before NodeStageVolume
 * (beforeNodeStageVolume); UnmountDevice and TearDownDevice around NodeUnstageVolume
 * (nodeUnstageVolumeRecord).
 */
import { CSIUnstageCompletesBeforeRestage } from '../../features/features.js';
import { isNotExist } from '../../ports/fs.js';
import type { VolumeHost } from '../../volume/volumeHost.js';
import type { NodevolGate } from '../nodevolGate.js';
import { finishInterruptedUnstage, recordUnstageEnded, recordUnstageStarted } from './unstageMarker.js';

export const unstageCompletesBeforeRestage: NodevolGate = {
  name: CSIUnstageCompletesBeforeRestage,
  proofScenarios: ['rewanted-during-unstage', 'block-restaged-during-unstage'],
  doc: 'csiunstagecompletesbeforerestage',
  create: () => ({
    csi: {
      beforeNodeStageVolume: finishInterruptedUnstage,
      nodeUnstageVolumeRecord: { dataDirExists: isDirectory, started: recordUnstageStarted, ended: recordUnstageEnded },
    },
  }),
};

/** Whether `p` is a directory; a missing one is not. */
async function isDirectory(host: VolumeHost, p: string): Promise<boolean> {
  try {
    return (await host.fs.lstat(p)).type === 'directory';
  } catch (err) {
    if (isNotExist(err)) return false;
    throw err;
  }
}
