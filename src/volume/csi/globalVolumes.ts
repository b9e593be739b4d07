/**
 * CSI ListGlobalVolumes (KEP-6058 Design Details item 3; csi_global_volumes.go of
 * kubernetes PR #138454, with the block walk of its latest revision): the staged
 * volumes under the CSI plugin directory, found without any pod directory.
 *
 * Two fixed-depth walks, never following a symlink and never descending into a mount:
 * - filesystem: plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/{globalmount,vol_data.json};
 * - raw block:  plugins/kubernetes.io/csi/volumeDevices/<escaped spec>/data/vol_data.json, staged
 *   while volumeDevices/staging/<spec> exists.
 * A directory that cannot be described is skipped with a reason; it never hides the others.
 */
import * as path from 'node:path/posix';
import { errorCode, errorMessage, isNotExist, type DirEntry } from '../../ports/fs.js';
import {
  BLOCK_DATA_DIR_NAME,
  BLOCK_PUBLISH_DIR_NAME,
  BLOCK_STAGING_DIR_NAME,
  GLOBAL_MOUNT_DIR_NAME,
  LEGACY_PV_DIR_NAME,
} from '../../layout/layout.js';
import { joinName } from '../../layout/joinName.js';
import { escapeQualifiedName, isSafePathComponent, isSha256Hex } from '../../layout/names.js';
import type { GlobalVolume } from '../plugins.js';
import { constructPVSourceSpec } from '../spec.js';
import { type PersistentVolumeMode } from '../../api/core.js';
import type { VolumeHost } from '../volumeHost.js';
import { rootEscapeReason } from '../../layout/confinement.js';
import { findInterruptedVolumeDataWrite, loadVolumeData, VOL_DATA_FILE_NAME, volDataKey, type VolumeData } from './volumeData.js';

/** Why a directory under the CSI plugin dir is not reported as a global volume. */
export type GlobalDirSkipReason =
  | 'no-globalmount'
  | 'unreadable-vol-data'
  | 'missing-driver-or-handle'
  | 'name-mismatch'
  | 'not-staged'
  | 'no-spec-vol-id'
  | 'legacy-layout'
  | 'unreadable-dir'
  | 'symlink'
  | 'interrupted-write';

export interface SkippedGlobalDir {
  readonly path: string;
  readonly reason: GlobalDirSkipReason;
  readonly detail: string;
  readonly volumeMode: PersistentVolumeMode;
  /** Identity from the directory's vol_data.json where it could be read. */
  readonly driver?: string;
  readonly volumeHandle?: string;
  readonly specVolID?: string;
}

export interface ListedGlobalVolume extends GlobalVolume {
  /** The directory that was described (the volume dir, or the block per-volume dir). */
  readonly volumeDir: string;
  /** Whether the vol_data.json carried specVolID (files from before KEP-6058 do not). */
  readonly hasSpecVolID: boolean;
}

export interface GlobalVolumeListing {
  readonly volumes: readonly ListedGlobalVolume[];
  readonly skipped: readonly SkippedGlobalDir[];
}

export class GlobalListingError extends Error {
  override readonly name = 'GlobalListingError';
}

/**
 * Walks both layouts. Rejects only when the CSI plugin directory itself exists but cannot be
 * read; a missing plugin directory is an empty listing.
 */
export async function listCsiGlobalVolumes(host: VolumeHost): Promise<GlobalVolumeListing> {
  const volumes: ListedGlobalVolume[] = [];
  const skipped: SkippedGlobalDir[] = [];
  const log = host.logger.v(4);
  const skip = (s: SkippedGlobalDir): void => {
    skipped.push(s);
    if (log.enabled(4)) log.info('Skipping a CSI global directory', { path: s.path, reason: s.reason, detail: s.detail });
  };

  const pluginDir = host.layout.csiPluginDir();
  const blockDir = host.layout.csiBlockDir();
  let drivers: DirEntry[];
  try {
    // The walk below follows no symlink, but the plugin dir is reached by path: it, or one of its
    // ancestors, may be a symlink leading out of the root dir. Then nothing below it is read.
    await host.fs.lstat(pluginDir);
  } catch (err) {
    if (isNotExist(err)) return { volumes, skipped };
    throw new GlobalListingError(`failed to read the CSI plugin directory ${pluginDir}: ${errorMessage(err)}`);
  }
  const escape = await rootEscapeReason(host.fs, pluginDir, host.realRootDir);
  if (escape !== undefined) {
    skip({ path: pluginDir, reason: 'symlink', detail: escape, volumeMode: 'Filesystem' });
    return { volumes, skipped };
  }
  try {
    drivers = sortByName(await host.fs.readdir(pluginDir));
  } catch (err) {
    if (isNotExist(err)) return { volumes, skipped };
    throw new GlobalListingError(`failed to read the CSI plugin directory ${pluginDir}: ${errorMessage(err)}`);
  }
  for (const driver of drivers) {
    const driverDir = joinName(pluginDir, driver.name);
    // The block subtree is a sibling of the driver directories; excluded by full path.
    if (driverDir === blockDir) continue;
    if (driver.type === 'symlink') {
      skip({ path: driverDir, reason: 'symlink', detail: 'driver directory is a symlink; not followed', volumeMode: 'Filesystem' });
      continue;
    }
    if (driver.type !== 'directory') continue;
    let children: DirEntry[];
    try {
      children = sortByName(await host.fs.readdir(driverDir));
    } catch (err) {
      skip({ path: driverDir, reason: 'unreadable-dir', detail: errorMessage(err), volumeMode: 'Filesystem' });
      continue;
    }
    for (const child of children) {
      const volDir = joinName(driverDir, child.name);
      if (child.type === 'symlink') {
        skip({ path: volDir, reason: 'symlink', detail: 'volume directory is a symlink; not followed', volumeMode: 'Filesystem' });
        continue;
      }
      if (child.type !== 'directory') continue;
      const result = await describeFilesystemVolume(host, driver.name, volDir, true);
      if ('reason' in result) skip(result);
      else volumes.push(result);
    }
  }

  await listBlockVolumes(host, blockDir, volumes, skip);
  return { volumes, skipped };
}

async function describeFilesystemVolume(
  host: VolumeHost,
  driverDirName: string,
  volDir: string,
  parentsVerified: boolean,
): Promise<ListedGlobalVolume | SkippedGlobalDir> {
  const volumeMode: PersistentVolumeMode = 'Filesystem';
  const dirName = path.basename(volDir);
  const legacy = driverDirName === LEGACY_PV_DIR_NAME && !isSha256Hex(dirName);
  const globalMount = joinName(volDir, GLOBAL_MOUNT_DIR_NAME);

  // volDir was reached by readdir without following symlinks, from a plugin dir inside the root.
  // The globalmount check and the data read are independent: issue both at once.
  const [data, globalMountCheck] = await Promise.all([
    tryLoad(host, joinName(volDir, VOL_DATA_FILE_NAME), parentsVerified),
    host.fs.lstat(globalMount).then(
      (st) => ({ ok: true as const, type: st.type }),
      (err: unknown) => ({ ok: false as const, err }),
    ),
  ]);
  // No vol_data.json but nodevol's temp file of it: MountDevice's atomic write cut short before
  // its rename (kubelet killed, or a power cut). Named for what it is, with what the temp file
  // says when it is a complete write (the audit reports it; the CSI plugin's globalDirSkipped
  // hook may list it after all).
  const interrupted = data.ok || legacy ? undefined : await findInterruptedVolumeDataWrite(host.fs, volDir);
  const identity = data.ok ? identityOf(data.value) : interrupted?.data !== undefined ? identityOf(interrupted.data) : {};
  if (interrupted !== undefined) {
    const what = interrupted.data === undefined ? 'a partial write' : `naming driver ${JSON.stringify(identity.driver ?? '')}, handle ${JSON.stringify(identity.volumeHandle ?? '')}`;
    return {
      path: volDir,
      reason: 'interrupted-write',
      detail: `no ${VOL_DATA_FILE_NAME}, only ${interrupted.tempPath} (${what}): MountDevice's atomic write was cut short before its rename`,
      volumeMode,
      ...identity,
    };
  }
  if (legacy) {
    return {
      path: volDir,
      reason: 'legacy-layout',
      detail: `pre-1.24 staging directory plugins/kubernetes.io/csi/pv/${dirName}; kubelet >= 1.24 computes another path and never unstages it`,
      volumeMode,
      ...identity,
    };
  }

  if (!globalMountCheck.ok) {
    const err = globalMountCheck.err;
    const detail = isNotExist(err) ? `${globalMount} does not exist (not staged, or MountDevice did not get that far)` : errorMessage(err);
    return { path: volDir, reason: 'no-globalmount', detail, volumeMode, ...identity };
  }
  if (globalMountCheck.type === 'symlink') {
    return { path: volDir, reason: 'no-globalmount', detail: `${globalMount} is a symlink; not followed`, volumeMode, ...identity };
  }

  if (!data.ok) return { path: volDir, reason: 'unreadable-vol-data', detail: data.error, volumeMode };
  const driver = data.value[volDataKey.driverName] ?? '';
  const handle = data.value[volDataKey.volHandle] ?? '';
  if (driver === '' || handle === '') {
    return {
      path: volDir,
      reason: 'missing-driver-or-handle',
      detail: `${path.join(volDir, VOL_DATA_FILE_NAME)}: field ${driver === '' ? volDataKey.driverName : volDataKey.volHandle} is missing or empty`,
      volumeMode,
      ...identity,
    };
  }
  // UnmountDevice recomputes the path from the spec: report a directory only if it is the one
  // MountDevice would have staged this handle under, or the unstage would hit another path.
  const expected = host.layout.csiDeviceMountPath(driver, handle);
  if (expected !== globalMount) {
    const detail =
      driver !== driverDirName
        ? `vol_data.json names driver ${JSON.stringify(driver)} but lies under driver directory ${JSON.stringify(driverDirName)}`
        : `directory name is not sha256(${JSON.stringify(handle)}) = ${path.basename(path.dirname(expected))}`;
    return { path: volDir, reason: 'name-mismatch', detail, volumeMode, ...identity };
  }
  const specVolID = data.value[volDataKey.specVolID] ?? '';
  return {
    spec: constructPVSourceSpec(specVolID !== '' ? specVolID : handle, driver, handle),
    seLinuxMountContext: data.value[volDataKey.seLinuxMountContext] ?? '',
    deviceMountPath: globalMount,
    volumeMode,
    volumeDir: volDir,
    hasSpecVolID: specVolID !== '',
  };
}

async function listBlockVolumes(
  host: VolumeHost,
  blockDir: string,
  volumes: ListedGlobalVolume[],
  skip: (s: SkippedGlobalDir) => void,
): Promise<void> {
  const volumeMode: PersistentVolumeMode = 'Block';
  let entries: DirEntry[];
  try {
    entries = sortByName(await host.fs.readdir(blockDir));
  } catch (err) {
    // Never an error for the caller: the filesystem results stand on their own.
    if (!isNotExist(err)) skip({ path: blockDir, reason: 'unreadable-dir', detail: errorMessage(err), volumeMode });
    return;
  }
  // What is staged: one listing of staging/ instead of a stat per volume. A staging dir that is
  // not a real directory stages nothing (it is never followed).
  const stagingDir = path.join(blockDir, BLOCK_STAGING_DIR_NAME);
  let staged = new Set<string>();
  let stagingProblem: string | undefined;
  const stagingEntry = entries.find((e) => e.name === BLOCK_STAGING_DIR_NAME);
  if (stagingEntry?.type === 'directory') {
    try {
      staged = new Set((await host.fs.readdir(stagingDir)).map((e) => e.name));
    } catch (err) {
      stagingProblem = errorMessage(err);
    }
  } else if (stagingEntry !== undefined) {
    // kubelet (csi_global_volumes.go, listGlobalBlockVolumes) stats staging/<name> and so would
    // follow a symlinked staging/ out of the root dir; nodevol does not, and says why rather than
    // "does not exist".
    stagingProblem = stagingEntry.type === 'symlink' ? `${stagingDir} is a symlink; not followed` : `${stagingDir} is not a directory`;
  }
  for (const entry of entries) {
    if (entry.name === BLOCK_STAGING_DIR_NAME || entry.name === BLOCK_PUBLISH_DIR_NAME) continue;
    const volDir = joinName(blockDir, entry.name);
    if (entry.type === 'symlink') {
      skip({ path: volDir, reason: 'symlink', detail: 'block volume directory is a symlink; not followed', volumeMode });
      continue;
    }
    if (entry.type !== 'directory') continue;

    const stagingPath = path.join(blockDir, BLOCK_STAGING_DIR_NAME, entry.name);
    const dataPath = path.join(volDir, BLOCK_DATA_DIR_NAME, VOL_DATA_FILE_NAME);
    if (!staged.has(entry.name)) {
      const detail = stagingProblem ?? `${stagingPath} does not exist (unstaged, cleanup unfinished)`;
      skip({ path: volDir, reason: 'not-staged', detail, volumeMode });
      continue;
    }
    // data/ was not walked: resolve the whole path.
    const data = await tryLoad(host, dataPath, false);
    if (!data.ok) {
      skip({ path: volDir, reason: 'unreadable-vol-data', detail: data.error, volumeMode });
      continue;
    }
    const identity = identityOf(data.value);
    const driver = data.value[volDataKey.driverName] ?? '';
    const handle = data.value[volDataKey.volHandle] ?? '';
    if (driver === '' || handle === '') {
      const field = driver === '' ? volDataKey.driverName : volDataKey.volHandle;
      skip({ path: volDir, reason: 'missing-driver-or-handle', detail: `${dataPath}: field ${field} is missing or empty`, volumeMode, ...identity });
      continue;
    }
    const specVolID = data.value[volDataKey.specVolID] ?? '';
    if (specVolID === '') {
      // Every block teardown path is built from the spec name: refuse rather than guess.
      skip({ path: volDir, reason: 'no-spec-vol-id', detail: `${dataPath}: field specVolID is missing or empty`, volumeMode, ...identity });
      continue;
    }
    if (!isSafePathComponent(specVolID) || host.layout.csiBlockVolumeDir(specVolID) !== volDir) {
      const detail = !isSafePathComponent(specVolID)
        ? `${dataPath}: field specVolID ${JSON.stringify(specVolID)} is not a single path component`
        : `${dataPath}: field specVolID ${JSON.stringify(specVolID)} names directory ${escapeQualifiedName(specVolID)}, not ${entry.name}`;
      skip({ path: volDir, reason: 'name-mismatch', detail, volumeMode, ...identity });
      continue;
    }
    volumes.push({
      spec: constructPVSourceSpec(specVolID, driver, handle, 'Block'),
      seLinuxMountContext: '',
      deviceMountPath: host.layout.csiGlobalMapPath(specVolID),
      volumeMode,
      volumeDir: volDir,
      hasSpecVolID: true,
    });
  }
}

type LoadResult = { ok: true; value: VolumeData } | { ok: false; error: string };

async function tryLoad(host: VolumeHost, file: string, parentsVerified: boolean): Promise<LoadResult> {
  try {
    return { ok: true, value: await loadVolumeData(host.fs, file, { rootDir: host.realRootDir, rootDirIsReal: true, parentsVerified }) };
  } catch (err) {
    return { ok: false, error: errorCode(err) === undefined ? errorMessage(err) : `${file}: ${errorMessage(err)}` };
  }
}

function identityOf(data: VolumeData): { driver?: string; volumeHandle?: string; specVolID?: string } {
  const out: { driver?: string; volumeHandle?: string; specVolID?: string } = {};
  const driver = data[volDataKey.driverName];
  const handle = data[volDataKey.volHandle];
  const specVolID = data[volDataKey.specVolID];
  if (driver !== undefined && driver !== '') out.driver = driver;
  if (handle !== undefined && handle !== '') out.volumeHandle = handle;
  if (specVolID !== undefined && specVolID !== '') out.specVolID = specVolID;
  return out;
}

function sortByName(entries: DirEntry[]): DirEntry[] {
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
