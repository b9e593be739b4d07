/**
 * MapBlockVolume / UnmapBlockVolume (pkg/volume/util/volumepathhandler, reduced): after
 * NodePublishVolume, the published device is bind mounted at <global map path>/<podUID> and
 * linked from the pod's volumeDevices directory. nodevol takes no loop-device lock (kubelet's
 * fd lock only keeps a device from being detached while open).
 */
import * as path from 'node:path/posix';
import { errorMessage, isNotExist, removeTreeOneFilesystem } from '../../ports/fs.js';
import { assertPathConfined, assertPathUnderRoot } from './pathConfinement.js';
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
    // The bind target: an empty file made with mode 0750, as volume_path_handler.go mapBindMountDevice makes it.
    await fs.writeFile(linkTarget, new Uint8Array(), { mode: 0o750 });
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

/**
 * GetDeviceBindMountRefs (volumepathhandler, volume_path_handler_linux.go): the entries of the
 * global map path that are pods' bind mounts of the device, as `<globalMapPath>/<podUID>` paths;
 * none when the directory is not there (SetUpDevice never got that far). kubelet counts the
 * entries whose file mode is a device; nodevol's FileSystem port has no device type ('other'
 * covers it) and a driver that publishes a regular file (the in-memory and mock drivers) makes
 * the bind mount over a regular file, so an entry also counts when it is a mount point. That is
 * stricter than kubelet only for such drivers, and only ever refuses an unmap.
 */
export async function getDeviceBindMountRefs(host: VolumeHost, globalMapPath: string): Promise<string[]> {
  let entries;
  try {
    entries = await host.fs.readdir(globalMapPath);
  } catch (err) {
    if (isNotExist(err)) return [];
    throw err;
  }
  const refs: string[] = [];
  for (const e of entries) {
    const p = path.join(globalMapPath, e.name);
    if (e.type === 'other' || !(await host.mounter.isLikelyNotMountPoint(p))) refs.push(p);
  }
  return refs;
}

const MAX_MAP_PATH_DEPTH = 2;

/**
 * RemoveMapPath (volumepathhandler): removes the global map path and what is left in it (kubelet:
 * a remove-all; gone already is fine). nodevol first proves nothing below it is mounted, and
 * removes through removeTreeOneFilesystem (never into a mount point, never along a symlink).
 */
export async function removeMapPath(host: VolumeHost, globalMapPath: string): Promise<void> {
  assertPathUnderRoot(host, globalMapPath);
  const mounts = (await host.mounter.readMountTable()).mountsUnder(globalMapPath);
  if (mounts.length > 0) throw new Error(`refusing to remove ${globalMapPath}: still mounted at ${mounts.join(', ')}`);
  try {
    await removeTreeOneFilesystem(host.fs, (p) => host.mounter.isLikelyNotMountPoint(p), globalMapPath, { directoriesOnly: false, maxDepth: MAX_MAP_PATH_DEPTH });
  } catch (err) {
    if (!isNotExist(err)) throw err;
  }
}
