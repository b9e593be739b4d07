/**
 * What gate CSIListGlobalVolumesWithoutStagingDir does with the directories KEP-6058's global
 * listing skipped (index.ts), for one life of a node: the volumes it lists after all, and the
 * leftover volume directories it removes, now or, when that fails, at a later housekeeping pass.
 */
import * as path from 'node:path/posix';
import { errorMessage, isNotExist } from '../../ports/fs.js';
import { BLOCK_DATA_DIR_NAME, GLOBAL_MOUNT_DIR_NAME } from '../../layout/layout.js';
import { isSha256Hex } from '../../layout/names.js';
import type { SkippedGlobalDir } from '../../volume/csi/globalVolumes.js';
import { findInterruptedVolumeDataWrite, loadVolumeData, VOL_DATA_FILE_NAME, VOL_DATA_TEMP_FILE_NAME, volDataKey, type VolumeData } from '../../volume/csi/volumeData.js';
import type { GlobalVolume } from '../../volume/plugins.js';
import { constructPVSourceSpec } from '../../volume/spec.js';
import type { VolumeHost } from '../../volume/volumeHost.js';
import type { VolumeDirClaims } from './volumeDirClaims.js';

/** What a try to remove a leftover volume directory did: `kept` means it is no leftover (any more). */
type LeftoverRemoval = 'removed' | 'kept' | 'failed';

export class SkippedGlobalDirs {
  /**
   * Leftover volume directories whose removal failed (EROFS, ENOSPC, EBUSY …) or had to wait for a
   * MountDevice working there: retried by {@link removeLeftoverGlobalDirs} until removed or no
   * longer leftovers. In memory only: a restart lists them again.
   */
  readonly #leftoverDirs = new Set<string>();

  /** `claims`: shared with this life's MountDevice calls: a removal never overlaps one in the same dir. */
  constructor(
    private readonly host: VolumeHost,
    private readonly claims: VolumeDirClaims,
  ) {}

  /**
   * The last step of removeMountDir, for a teardown cut short just before it: a volume directory
   * with nothing in it (no globalmount, no vol_data.json) names no volume and is removed. rmdir
   * cannot remove anything else; a mount point is left alone.
   */
  private async removeEmptyVolumeDir(dir: string): Promise<LeftoverRemoval> {
    if (!isSha256Hex(path.basename(dir))) return 'kept';
    try {
      if ((await this.host.fs.readdir(dir)).length > 0) return 'kept';
      if (!(await this.host.mounter.isLikelyNotMountPoint(dir))) return 'kept';
      await this.host.fs.rmdir(dir);
      this.host.logger.v(2).info('Removed an empty global volume directory left by an interrupted UnmountDevice', { path: dir });
      return 'removed';
    } catch (err) {
      if (isNotExist(err)) return 'removed';
      this.host.logger.v(4).info('Could not remove an empty global volume directory', { path: dir, err: errorMessage(err) });
      return 'failed';
    }
  }

  private async removeLeftover(dir: string, check: (dir: string) => Promise<LeftoverRemoval>): Promise<void> {
    const release = this.claims.tryClaimForRemoval(dir);
    if (release === undefined) {
      // A MountDevice works there: no leftover while it does; the next pass looks again.
      this.#leftoverDirs.add(dir);
      return;
    }
    let removal: LeftoverRemoval;
    try {
      removal = await check(dir);
    } finally {
      release();
    }
    if (removal === 'failed') this.#leftoverDirs.add(dir);
    else this.#leftoverDirs.delete(dir);
  }

  /**
   * UnmountDevice found no vol_data.json: a former UnmountDevice of this volume got through
   * NodeUnstageVolume and removeMountDir's removal of `globalmount` and vol_data.json, and its
   * last rmdir, of the volume directory, failed (EROFS, EBUSY …). kubelet's retry returns success
   * and nothing else removes the directory while this life lasts (the listing, which removes such
   * a directory, runs at start only), and it is left for good: the empty-dir rule, now, or at the
   * housekeeping passes until it works.
   */
  async volumeDataMissingAtUnmountDevice(dir: string): Promise<void> {
    await this.removeLeftover(dir, (d) => this.removeEmptyVolumeDir(d));
  }

  /**
   * Each retry takes the broadest of the checks: an empty directory, or one holding only an
   * empty, unmounted `globalmount` and/or the complete temp file of an interrupted vol_data.json
   * write (an empty directory is the first one's rmdir failed half-way).
   */
  async removeLeftoverGlobalDirs(): Promise<void> {
    for (const dir of [...this.#leftoverDirs]) await this.removeLeftover(dir, (d) => this.removeVolumeDirBeforeItsRecord(d));
  }

  /**
   * A MountDevice cut short before its record was in place leaves a volume directory holding an
   * empty, unmounted `globalmount` (cut between its mkdir and the write of vol_data.json), the
   * temp file of that write (cut before its rename, whose completion failed at the listing), or
   * both. The record is written, renamed and synced before NodeStageVolume is sent, so no stage
   * was asked for there, and the directory names no volume that could be unstaged: all of it is
   * removed (unlink of our temp file, then rmdir, so nothing else can go). The temp file must be
   * a complete write naming this very directory; anything else in either directory, or a mount,
   * and it stays.
   */
  private async removeVolumeDirBeforeItsRecord(dir: string): Promise<LeftoverRemoval> {
    if (!isSha256Hex(path.basename(dir))) return 'kept';
    const { fs, mounter, logger } = this.host;
    const staging = path.join(dir, GLOBAL_MOUNT_DIR_NAME);
    try {
      const names = (await fs.readdir(dir)).map((e) => e.name);
      // Nothing left (the staging dir went before a failed rmdir of the volume dir, or the
      // listing found it empty): the empty-dir rule.
      if (names.length === 0) return await this.removeEmptyVolumeDir(dir);
      if (names.some((n) => n !== GLOBAL_MOUNT_DIR_NAME && n !== VOL_DATA_TEMP_FILE_NAME)) return 'kept';
      const hasTemp = names.includes(VOL_DATA_TEMP_FILE_NAME);
      const hasStaging = names.includes(GLOBAL_MOUNT_DIR_NAME);
      let tempPath: string | undefined;
      if (hasTemp) {
        const write = await this.completeInterruptedWrite(dir);
        if (write === undefined) return 'kept';
        tempPath = write.tempPath;
      }
      if (hasStaging) {
        if ((await fs.lstat(staging)).type !== 'directory') return 'kept';
        if ((await fs.readdir(staging)).length > 0) return 'kept';
        if (!(await mounter.isLikelyNotMountPoint(staging))) return 'kept';
      }
      if (tempPath !== undefined) await fs.unlink(tempPath);
      if (hasStaging) await fs.rmdir(staging);
      await fs.rmdir(dir);
      logger.v(2).info(
        'Removed a global volume directory left by an interrupted MountDevice: no volume data file, so nothing was staged there',
        { path: dir, ...(hasStaging ? { stagingDir: 'empty' } : {}), ...(tempPath === undefined ? {} : { tempFile: 'complete, never renamed' }) },
      );
      return 'removed';
    } catch (err) {
      if (isNotExist(err)) return 'removed';
      logger.v(4).info('Could not remove a global volume directory left by an interrupted MountDevice', { path: dir, err: errorMessage(err) });
      return 'failed';
    }
  }

  /**
   * A directory skipped only because its staging
   * directory is missing, whose vol_data.json names a driver, a handle and (block) the spec, and
   * lies exactly where MountDevice / SetUpDevice would have put it. UnmountDevice then sends an
   * idempotent NodeUnstageVolume and removes what is left; MountDevice recreates the directory.
   */
  async volumeWithoutStagingDir(skipped: SkippedGlobalDir): Promise<GlobalVolume | undefined> {
    const { layout } = this.host;
    if (skipped.reason === 'no-globalmount') {
      const { driver, volumeHandle } = skipped;
      if (driver === undefined && volumeHandle === undefined) {
        await this.removeLeftover(skipped.path, (d) => this.removeEmptyVolumeDir(d));
        return undefined;
      }
      if (driver === undefined || volumeHandle === undefined) return undefined;
      const deviceMountPath = path.join(skipped.path, GLOBAL_MOUNT_DIR_NAME);
      if (layout.csiDeviceMountPath(driver, volumeHandle) !== deviceMountPath) return undefined;
      try {
        await this.host.fs.lstat(deviceMountPath);
        return undefined; // there after all (a symlink, or a race): not this rule's case
      } catch (err) {
        if (!isNotExist(err)) return undefined;
      }
      this.host.logger.v(2).info('Global volume directory without its staging directory is listed so that it is unstaged', { path: skipped.path });
      return { spec: constructPVSourceSpec(skipped.specVolID ?? volumeHandle, driver, volumeHandle), seLinuxMountContext: '', deviceMountPath, volumeMode: 'Filesystem' };
    }
    if (skipped.reason === 'interrupted-write' && skipped.volumeMode === 'Filesystem') return this.volumeFromInterruptedWrite(skipped);
    if (skipped.reason === 'unreadable-vol-data' && skipped.volumeMode === 'Filesystem') {
      await this.removeLeftover(skipped.path, (d) => this.removeVolumeDirBeforeItsRecord(d));
      return undefined;
    }
    if (skipped.reason === 'not-staged' && skipped.volumeMode === 'Block') {
      const dataPath = path.join(skipped.path, BLOCK_DATA_DIR_NAME, VOL_DATA_FILE_NAME);
      let data: VolumeData;
      try {
        data = await loadVolumeData(this.host.fs, dataPath, { rootDir: this.host.realRootDir, rootDirIsReal: true });
      } catch {
        return undefined;
      }
      const driver = data[volDataKey.driverName] ?? '';
      const handle = data[volDataKey.volHandle] ?? '';
      const specVolID = data[volDataKey.specVolID] ?? '';
      if (driver === '' || handle === '' || specVolID === '' || layout.csiBlockVolumeDir(specVolID) !== skipped.path) return undefined;
      this.host.logger.v(2).info('Block volume directory without its staging directory is listed so that it is unstaged', { path: skipped.path });
      return { spec: constructPVSourceSpec(specVolID, driver, handle, 'Block'), seLinuxMountContext: '', deviceMountPath: layout.csiGlobalMapPath(specVolID), volumeMode: 'Block' };
    }
    return undefined;
  }

  /**
   * The temp file of an interrupted vol_data.json write in `dir` when it is a complete write
   * naming a driver and a handle whose volume directory `dir` is; undefined for anything else.
   */
  private async completeInterruptedWrite(dir: string): Promise<{ tempPath: string; data: VolumeData; driver: string; handle: string } | undefined> {
    const found = await findInterruptedVolumeDataWrite(this.host.fs, dir);
    const data = found?.data;
    const driver = data?.[volDataKey.driverName] ?? '';
    const handle = data?.[volDataKey.volHandle] ?? '';
    if (found === undefined || data === undefined || driver === '' || handle === '') return undefined;
    if (this.host.layout.csiDeviceMountPath(driver, handle) !== path.join(dir, GLOBAL_MOUNT_DIR_NAME)) return undefined;
    return { tempPath: found.tempPath, data, driver, handle };
  }

  /**
   * A volume directory holding only nodevol's temp
   * file of its vol_data.json (MountDevice's atomic write cut short before its rename; kubelet
   * never has one). When the temp file is a complete write naming a driver and a handle whose
   * directory this is, the write is finished - renamed onto vol_data.json and the directory
   * fsynced, what the writer was about to do - and the volume is listed like any other, so that
   * UnmountDevice sends an (idempotent) NodeUnstageVolume and removes the directory, or a pod
   * that wants it stages it. When the rename fails (a full or read-only root dir), nothing was
   * staged from that record, so the directory is removed instead (retried by housekeeping); a
   * failed fsync of the directory after the rename is only logged. A partial temp file, or one
   * naming another directory, is left alone.
   */
  private async volumeFromInterruptedWrite(skipped: SkippedGlobalDir): Promise<GlobalVolume | undefined> {
    const { host } = this;
    const found = await this.completeInterruptedWrite(skipped.path);
    if (found === undefined) return undefined;
    const { driver, handle } = found;
    const deviceMountPath = path.join(skipped.path, GLOBAL_MOUNT_DIR_NAME);
    const file = path.join(skipped.path, VOL_DATA_FILE_NAME);
    try {
      await host.fs.rename(found.tempPath, file);
    } catch (err) {
      // The write cannot be finished now (a full or read-only root dir). It was never renamed,
      // so nothing was staged from it: the directory is removed instead, now or, when that
      // fails too, by a later housekeeping pass.
      host.logger.v(2).info('Could not finish an interrupted write of a global vol_data.json; the volume dir is removed instead', { path: found.tempPath, err: errorMessage(err) });
      await this.removeLeftover(skipped.path, (d) => this.removeVolumeDirBeforeItsRecord(d));
      return undefined;
    }
    try {
      await host.fs.fsyncDir(skipped.path);
    } catch (err) {
      // The record is in place; should a power cut lose the rename, the next life finds the
      // temp file again. Listed either way, so that UnmountDevice removes it.
      host.logger.v(2).info('Could not sync the volume dir after finishing an interrupted write', { path: skipped.path, err: errorMessage(err) });
    }
    host.logger.v(2).info('Finished an interrupted write of a global vol_data.json; the volume is listed so that it is unstaged', { path: file });
    const specVolID = found.data[volDataKey.specVolID] ?? '';
    return {
      spec: constructPVSourceSpec(specVolID !== '' ? specVolID : handle, driver, handle),
      seLinuxMountContext: found.data[volDataKey.seLinuxMountContext] ?? '',
      deviceMountPath,
      volumeMode: 'Filesystem',
    };
  }
}
