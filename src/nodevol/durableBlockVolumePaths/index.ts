/**
 * Gate CSIDurableBlockVolumePaths (docs/feature-gates.md): a raw block volume's staging dir and
 * publish target are made durable before NodeStageVolume / NodePublishVolume, so that a power cut
 * cannot leave the driver with a volume staged or published of which nothing is on disk
 * (kubelet's plain mkdir may be lost while the driver's state is not).
 *
 * Hooks: csi_block.go SetUpDevice right after MkdirAll of the staging path (its parent dir is
 * fsynced), and MapPodDevice before NodePublishVolume (the target is created and fsynced).
 */
import * as path from 'node:path/posix';
import { CSIDurableBlockVolumePaths } from '../../features/features.js';
import { isNotExist } from '../../ports/fs.js';
import type { VolumeHost } from '../../volume/volumeHost.js';
import type { NodevolGate } from '../nodevolGate.js';

export const durableBlockVolumePaths: NodevolGate = {
  name: CSIDurableBlockVolumePaths,
  proofScenarios: ['raw-block'],
  doc: 'csidurableblockvolumepaths',
  create: () => ({
    csi: {
      // The staging dir survives a power cut before the driver stages into it.
      stagingPathCreated: (host, stagingPath) => host.fs.fsyncDir(path.dirname(stagingPath)),
      publishPathParentCreated: createDurableTarget,
    },
  }),
};

/**
 * The publish target (an empty file the driver bind mounts the device onto; CSI lets the CO
 * create it) exists durably before NodePublishVolume, so that after a power cut the target is
 * still on disk to be unpublished (gate CSIUnpublishBeforeUnstageAfterReconstruction pairs it
 * with its volume).
 */
async function createDurableTarget(host: VolumeHost, publishPath: string): Promise<void> {
  try {
    await host.fs.lstat(publishPath);
  } catch (err) {
    if (!isNotExist(err)) throw err;
    await host.fs.writeFile(publishPath, new Uint8Array(0), { mode: 0o640, fsync: true });
  }
  await host.fs.fsyncDir(path.dirname(publishPath));
}
