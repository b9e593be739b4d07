/**
 * After a final error whose cleanup failed (gate CSIKeepUncertainMountOnFinalError): kubelet's
 * removal after a final MountDevice / SetUp / SetUpDevice error (csi_attacher.go MountDevice's and
 * csi_mounter.go SetUpAt's deferred removeMountDir, csi_util.go; csi_block.go
 * stageVolumeForBlock's cleanupOrphanDeviceFiles) only logs its own failure, and the operation
 * generator marks the device or pod mount not mounted. When the volume's vol_data.json is still
 * there, nothing will ever remove it: no state of world holds the volume, so no TearDown /
 * UnmountDevice runs, and kubelet's orphan sweep (kubelet_volumes.go
 * removeOrphanedPodVolumeDirs) only rmdirs. Uncertain instead: the reconciler tears it down (one
 * idempotent NodeUnpublishVolume / NodeUnstageVolume, then the removal again, retried with
 * backoff) once no pod wants it.
 */
import * as path from 'node:path/posix';
import { errorMessage, isNotExist } from '../../ports/fs.js';
import type { FailedCleanupDecision, FailedCleanupSite } from '../../volume/csi/csiHooks.js';
import { csiLog } from '../../volume/csi/csiUtil.js';
import { VOL_DATA_FILE_NAME } from '../../volume/csi/volumeData.js';
import type { VolumeHost } from '../../volume/volumeHost.js';

/**
 * `uncertain` when the record the removal would have deleted is still a file; `forget`
 * (kubelet's) when it is gone (the removal got past it: only directories are left, which the
 * orphan sweep or the next removal rmdirs) or cannot be looked at: a teardown needs that record
 * to build its unmounter, and without it the unmount would fail for ever.
 */
export async function uncertainIfRecordLeft(host: VolumeHost, site: FailedCleanupSite): Promise<FailedCleanupDecision> {
  const record = path.join(site.dataDir, VOL_DATA_FILE_NAME);
  try {
    if ((await host.fs.lstat(record)).type !== 'file') return 'forget';
  } catch (err) {
    if (!isNotExist(err)) host.logger.v(2).info(csiLog(`${site.operation} cleanup failed and its volume data cannot be looked at: the error stands`), { path: record, err: errorMessage(err) });
    return 'forget';
  }
  host.logger.info(csiLog(`${site.operation} failed and so did its cleanup: uncertain, torn down when no pod wants it`), { path: site.path, data: record });
  return 'uncertain';
}
