/**
 * The unstage marker of gate CSIUnstageCompletesBeforeRestage (kubernetes#121357), for the
 * filesystem path (csi_attacher.go: MountDevice / UnmountDevice) and the raw block path
 * (csi_block.go: SetUpDevice / TearDownDevice) alike: an empty file beside the volume's
 * vol_data.json, present from before NodeUnstageVolume is sent until it returned OK (its name,
 * UNSTAGE_MARKER_FILE_NAME, is in volume/csi/csiUtil.ts, whose removeMountDir removes it with
 * the volume dir). A stage that finds it sends NodeUnstageVolume
 * again first: a driver serialises calls per volume (ABORTED while the old one runs), so its OK
 * proves the old unstage has ended; anything else is a transient failure and no NodeStageVolume
 * is sent. Kubelet has no such file.
 */
import * as path from 'node:path/posix';

import { errorMessage, isNotExist } from '../../ports/fs.js';
import type { CsiNodeClient } from '../../ports/csi.js';
import { assertConfined, CsiPathError, csiLog, UNSTAGE_MARKER_FILE_NAME } from '../../volume/csi/csiUtil.js';
import { TransientOperationFailure } from '../../volume/util/errors.js';
import type { VolumeHost } from '../../volume/volumeHost.js';

/**
 * Records that an unstage starts: the marker in `dataDir` (empty, fsynced, its directory fsynced).
 * One already there as a regular file (an earlier attempt) is kept; anything else there is refused
 * rather than written through (a write would follow a symlink out of the root dir).
 */
export async function recordUnstageStarted(host: VolumeHost, dataDir: string, caller: string): Promise<void> {
  const marker = path.join(dataDir, UNSTAGE_MARKER_FILE_NAME);
  let existing: string | undefined;
  try {
    existing = (await host.fs.lstat(marker)).type;
  } catch (err) {
    if (!isNotExist(err)) throw new Error(csiLog(`${caller} failed to check ${marker}: ${errorMessage(err)}`));
  }
  if (existing === 'file') return;
  if (existing !== undefined) throw new CsiPathError(csiLog(`${caller} refuses to record the unstage at ${marker}: it is a ${existing}, not a regular file`));
  try {
    await host.fs.writeFile(marker, new Uint8Array(), { mode: 0o644, fsync: true });
    await host.fs.fsyncDir(dataDir);
  } catch (err) {
    throw new Error(csiLog(`${caller} failed to record the unstage at ${marker}: ${errorMessage(err)}`));
  }
}

/** Records that the unstage returned OK: the marker goes (durably). */
export async function recordUnstageEnded(host: VolumeHost, dataDir: string): Promise<void> {
  const marker = path.join(dataDir, UNSTAGE_MARKER_FILE_NAME);
  try {
    await host.fs.unlink(marker);
    await host.fs.fsyncDir(dataDir);
  } catch (err) {
    if (isNotExist(err)) return;
    throw new TransientOperationFailure(csiLog(`failed to remove the unstage marker ${marker}: ${errorMessage(err)}`));
  }
}

/**
 * Before a stage into `stagingPath`: when an unstage of this volume was started and never seen to
 * return OK (its marker is in `dataDir`, whichever life wrote it), sends NodeUnstageVolume again
 * and waits for its OK; otherwise does nothing.
 */
export async function finishInterruptedUnstage(
  host: VolumeHost,
  client: CsiNodeClient,
  o: { readonly volumeHandle: string; readonly stagingPath: string; readonly dataDir: string; readonly caller: string },
): Promise<void> {
  const marker = path.join(o.dataDir, UNSTAGE_MARKER_FILE_NAME);
  await assertConfined(host, marker, 'NodeStageVolume');
  try {
    await host.fs.lstat(marker);
  } catch (err) {
    if (isNotExist(err)) return;
    throw new TransientOperationFailure(csiLog(`${o.caller} failed to check for an unfinished NodeUnstageVolume at ${marker}: ${errorMessage(err)}`));
  }
  host.logger.v(2).info(csiLog(`${o.caller} found an unfinished NodeUnstageVolume; unstaging before staging again`), { stagingPath: o.stagingPath });
  try {
    await client.nodeUnstageVolume({ volumeId: o.volumeHandle, stagingTargetPath: o.stagingPath });
  } catch (err) {
    throw new TransientOperationFailure(csiLog(`${o.caller} failed: NodeUnstageVolume of an earlier unstage did not return OK, not staging yet: ${errorMessage(err)}`));
  }
  await recordUnstageEnded(host, o.dataDir);
}
