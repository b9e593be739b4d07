/**
 * MapBlockVolume / UnmapBlockVolume (pkg/volume/util/volumepathhandler, reduced): after
 * NodePublishVolume, the published device is bind mounted at <global map path>/<podUID> and
 * linked from the pod's volumeDevices directory. nodevol takes no loop-device lock (kubelet's
 * fd lock only keeps a device from being detached while open).
 */
import * as path from 'node:path/posix';
import { errorMessage, isNotExist } from '../../ports/fs.js';
import { assertPathConfined } from './pathConfinement.js';
import type { VolumeHost } from '../volumeHost.js';

export async function mapBlockVolume(
  host: VolumeHost,
  publishPath: string,
  globalMapPath: string,
  podDeviceMapPath: { dir: string; name: string },
  podUID: string,
): Promise<void> {
  const { fs, mounter } = host;
  await fs.mkdir(globalMapPath, { recursive: true, mode: 0o750 });
  const linkTarget = path.join(globalMapPath, podUID);
  try {
    await fs.lstat(linkTarget);
  } catch (err) {
    if (!isNotExist(err)) throw err;
    await fs.writeFile(linkTarget, new Uint8Array(), { mode: 0o640 });
  }
  if (await mounter.isLikelyNotMountPoint(linkTarget)) await mounter.mount(publishPath, linkTarget, '', ['bind']);
  await fs.mkdir(podDeviceMapPath.dir, { recursive: true, mode: 0o750 });
  const link = path.join(podDeviceMapPath.dir, podDeviceMapPath.name);
  try {
    await fs.unlink(link);
  } catch (err) {
    if (!isNotExist(err)) throw err;
  }
  await fs.symlink(publishPath, link);
}

export async function unmapBlockVolume(
  host: VolumeHost,
  globalMapPath: string,
  podDeviceMapPath: { dir: string; name: string },
  podUID: string,
): Promise<void> {
  const { fs, mounter } = host;
  const link = path.join(podDeviceMapPath.dir, podDeviceMapPath.name);
  try {
    await fs.unlink(link);
  } catch (err) {
    if (!isNotExist(err)) throw new Error(`failed to remove block device link ${link}: ${errorMessage(err)}`);
  }
  const bindPath = path.join(globalMapPath, podUID);
  let mounted: boolean;
  try {
    mounted = !(await mounter.isLikelyNotMountPoint(bindPath));
  } catch (err) {
    if (isNotExist(err)) return;
    throw err;
  }
  if (mounted) {
    await assertPathConfined(host, bindPath, 'umount');
    await mounter.unmount(bindPath);
  }
  try {
    await fs.unlink(bindPath);
  } catch (err) {
    if (!isNotExist(err)) throw err;
  }
}
