/**
 * The pod-local fallback (KEP-6058 Design Details item 5; findGlobalMountDataFromPodMount in
 * the PR's csi_util.go): when a pod volume's
 * own vol_data.json cannot be read, find the global mount it is bind mounted from and read the
 * global vol_data.json instead.
 *
 * The pairing comes from the mount table, never from names: NodePublishVolume bind mounts the
 * staging path onto <pod volume dir>/mount, so the pod mount's references include
 * <volume dir>/globalmount. A driver that publishes some other way leaves no reference, and the
 * fallback declines rather than guessing.
 */
import * as path from 'node:path/posix';
import { errorMessage } from '../../ports/fs.js';
import { GLOBAL_MOUNT_DIR_NAME, POD_MOUNT_DIR_NAME } from '../../layout/layout.js';
import { getReliableMountRefs } from '../../mount/mountRefs.js';
import type { VolumeHost } from '../volumeHost.js';
import { loadVolumeData, VOL_DATA_FILE_NAME, volDataKey, type VolumeData } from './volumeData.js';

export interface GlobalMountData {
  /** The directory holding globalmount/ and the global vol_data.json. */
  readonly dataDir: string;
  readonly data: VolumeData;
}

export class NoGlobalMountError extends Error {
  override readonly name = 'NoGlobalMountError';
}

/**
 * findGlobalMountDataFromPodMount: accepts a mount reference of `<podVolumeDir>/mount` only when
 * it is named globalmount, lies under the root dir, and the vol_data.json beside it names both a
 * driver and a volume handle. Other references are logged at V(4) and skipped.
 */
export async function findGlobalMountDataFromPodMount(host: VolumeHost, podVolumeDir: string): Promise<GlobalMountData> {
  const mountPath = path.join(podVolumeDir, POD_MOUNT_DIR_NAME);
  const refs = await getReliableMountRefs(host.fs, () => host.mounter.readMountTable(), host.clock, mountPath);
  const log = host.logger.v(4);
  const rejected: string[] = [];
  for (const ref of refs) {
    if (path.basename(ref) !== GLOBAL_MOUNT_DIR_NAME) {
      log.info('Mount reference is not a global mount, skipping', { mountPath, reference: ref });
      rejected.push(`${ref} (not a globalmount)`);
      continue;
    }
    const dataDir = path.dirname(ref);
    if (!dataDir.startsWith(`${host.realRootDir}/`)) {
      log.info('Mount reference is outside the root dir, skipping', { mountPath, reference: ref });
      rejected.push(`${ref} (outside the root dir)`);
      continue;
    }
    let data: VolumeData;
    try {
      data = await loadVolumeData(host.fs, path.join(dataDir, VOL_DATA_FILE_NAME), { rootDir: host.realRootDir, rootDirIsReal: true });
    } catch (err) {
      log.info('Global mount reference has no readable volume data, skipping', { mountPath, reference: ref, err: errorMessage(err) });
      rejected.push(`${ref} (${errorMessage(err)})`);
      continue;
    }
    if ((data[volDataKey.driverName] ?? '') === '' || (data[volDataKey.volHandle] ?? '') === '') {
      log.info('Global mount reference names no driver or volume handle, skipping', { mountPath, reference: ref });
      rejected.push(`${ref} (no driverName or volumeHandle)`);
      continue;
    }
    return { dataDir, data };
  }
  const tail = rejected.length === 0 ? '' : `; references checked: ${rejected.join(', ')}`;
  throw new NoGlobalMountError(`no global mount is bind mounted at ${mountPath}${tail}`);
}
