/**
 * The CSI volume plugin (pkg/volume/csi/csi_plugin.go), reading side: naming, spec
 * reconstruction from pod-local, block and global vol_data.json files, device mount paths and
 * the KEP-6058 global listing. The writing side (MountDevice, SetUp, ...) builds on this.
 */
import { joinName } from '../../layout/joinName.js';
import * as path from 'node:path/posix';
import { CSIGlobalMountReconstruction, CSIListGlobalVolumesWithoutStagingDir } from '../../features/features.js';
import { errorMessage, isNotExist } from '../../ports/fs.js';
import { BLOCK_DATA_DIR_NAME, GLOBAL_MOUNT_DIR_NAME } from '../../layout/layout.js';
import { CSI_PLUGIN_NAME, csiVolumeName, escapeQualifiedName, isSha256Hex, makeEphemeralVolumeHandle } from '../../layout/names.js';
import { getMountRefs } from '../../mount/mountRefs.js';
import type {
  AttachableVolumePlugin,
  BlockVolumeMapper,
  BlockVolumePlugin,
  BlockVolumeUnmapper,
  ConstructOptions,
  DeviceMounter,
  DeviceUnmounter,
  GlobalVolume,
  GlobalVolumeListerPlugin,
  PodRef,
  ReconstructedVolume,
  VolumeDataSource,
  VolumeMounter,
  VolumeUnmounter,
} from '../plugins.js';
import { constructInlineSpec, constructPVSourceSpec, specName, type Spec, type VolumeLifecycleMode } from '../spec.js';
import { CsiAttacher } from './csiAttacher.js';
import { upstreamCsiHooks, type CsiHooks } from './csiHooks.js';
import { CsiSpecError, makeDeviceMountPath, persistentSource } from './csiUtil.js';
import { CsiBlockUnmapper, newCsiBlockMapper } from './csiBlock.js';
import { CsiMounter, CsiUnmounter } from './csiMounter.js';
import type { VolumeHost } from '../volumeHost.js';
import { findGlobalMountDataFromPodMount } from './globalMountFallback.js';
import { listCsiGlobalVolumes, type GlobalVolumeListing, type SkippedGlobalDir } from './globalVolumes.js';
import { resolvesInsideRoot } from '../../layout/confinement.js';
import { findInterruptedVolumeDataWrite, loadVolumeData, VOL_DATA_FILE_NAME, VOL_DATA_TEMP_FILE_NAME, volDataKey, type VolumeData } from './volumeData.js';
import { VolumeDirClaims } from './volumeDirClaims.js';

export { CsiSpecError };

/** What a try to remove a leftover volume directory did: `kept` means it is no leftover (any more). */
type LeftoverRemoval = 'removed' | 'kept' | 'failed';

export class CsiPlugin implements GlobalVolumeListerPlugin, BlockVolumePlugin, AttachableVolumePlugin {
  readonly attachable = true;
  readonly deviceMountable = true;
  readonly blockVolume = true;
  readonly globalVolumeLister = true;

  /**
   * `hooks`: nodevol's (csiHooks.ts), passed to every attacher, mounter and mapper the plugin
   * builds; kubelet's by default.
   */
  constructor(
    private readonly host: VolumeHost,
    readonly hooks: CsiHooks = upstreamCsiHooks,
  ) {}

  getPluginName(): string {
    return CSI_PLUGIN_NAME;
  }

  /** A PV with a CSI source, or an inline volume with a CSI source. */
  canSupport(spec: Spec): boolean {
    return spec.kind === 'persistent' ? spec.persistentVolume.csi !== undefined : spec.volume.csi !== undefined;
  }

  /** "<driver>^<handle>"; PV only. Like kubelet, empty fields are not checked here. */
  getVolumeName(spec: Spec): string {
    const src = persistentSource(spec, false);
    return csiVolumeName(src.driver, src.volumeHandle);
  }

  /** Inline ephemeral volumes never get a global mount. */
  canDeviceMount(spec: Spec): boolean {
    return getVolumeLifecycleMode(spec) === 'Persistent';
  }

  /** makeDeviceMountPath: <plugins>/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount */
  getDeviceMountPath(spec: Spec): string {
    return makeDeviceMountPath(this.host, spec);
  }

  async getDeviceMountRefs(deviceMountPath: string): Promise<string[]> {
    return getMountRefs(this.host.fs, await this.host.mounter.readMountTable(), deviceMountPath);
  }

  /** GetGlobalMapPath: volumeDevices/<escaped spec>/dev */
  getGlobalMapPath(spec: Spec): string {
    return this.host.layout.csiGlobalMapPath(spec.kind === 'persistent' ? spec.persistentVolume.name : spec.volume.name);
  }

  /**
   * ConstructVolumeSpec from the pod volume directory `volumePath` named `volumeName`. Loads the
   * pod-local vol_data.json; with CSIGlobalMountReconstruction on and that load failing, retries
   * through the global mount the pod mount is bind mounted from (KEP-6058's pod-local
   * fallback, globalMountFallback.ts).
   */
  async constructVolumeSpec(volumeName: string, volumePath: string, options?: ConstructOptions): Promise<ReconstructedVolume> {
    const loaded = await this.loadPodVolumeData(volumeName, volumePath, 'constructVolumeSpec', options?.parentsVerified === true);
    const { data, specVolID } = loaded;
    const driver = data[volDataKey.driverName] ?? '';
    const handle = data[volDataKey.volHandle] ?? '';
    const mode: VolumeLifecycleMode = data[volDataKey.volumeLifecycleMode] === 'Ephemeral' ? 'Ephemeral' : 'Persistent';
    const spec = mode === 'Ephemeral' ? constructInlineSpec(specVolID, driver) : constructPVSourceSpec(specVolID, driver, handle);
    return { spec, seLinuxMountContext: data[volDataKey.seLinuxMountContext] ?? '', dataSource: loaded.dataSource };
  }

  /**
   * The pod-local vol_data.json of a pod volume directory, or with the gate on and that failing,
   * the global one the pod mount is bind mounted from. A recovered specVolID naming another
   * volume is refused; an empty one takes the directory name (what SetUpAt stored).
   */
  private async loadPodVolumeData(
    volumeName: string,
    volumePath: string,
    caller: 'constructVolumeSpec' | 'newUnmounter',
    walkVerified = false,
  ): Promise<{ data: VolumeData; specVolID: string; dataSource: VolumeDataSource }> {
    const dataPath = joinName(volumePath, VOL_DATA_FILE_NAME);
    try {
      // The pod volume directory, or any ancestor, may be a symlink leading out of the root dir.
      const parentsVerified = walkVerified || (await resolvesInsideRoot(this.host.fs, volumePath, this.host.realRootDir));
      const data = await loadVolumeData(this.host.fs, dataPath, { rootDir: this.host.realRootDir, rootDirIsReal: true, parentsVerified });
      return { data, specVolID: data[volDataKey.specVolID] ?? '', dataSource: 'pod-local' };
    } catch (err) {
      const original =
        caller === 'constructVolumeSpec'
          ? `plugin.ConstructVolumeSpec failed loading volume data using [${dataPath}]: ${errorMessage(err)}`
          : `unmounter failed to load volume data file [${path.join(volumePath, 'mount')}]: ${errorMessage(err)}`;
      if (!this.host.features.enabled(CSIGlobalMountReconstruction)) throw new CsiSpecError(original);
      let recovered;
      try {
        recovered = await findGlobalMountDataFromPodMount(this.host, volumePath);
      } catch (fallbackErr) {
        throw new CsiSpecError(`${original}; fallback to the global mount failed: ${errorMessage(fallbackErr)}`);
      }
      let specVolID = recovered.data[volDataKey.specVolID] ?? '';
      if (specVolID === '') {
        // A global file from before KEP-6058: the pod directory name is what SetUpAt stored.
        specVolID = volumeName;
      } else if (escapeQualifiedName(specVolID) !== volumeName) {
        throw new CsiSpecError(
          `${original}; global mount ${recovered.dataDir} holds volume data for ${JSON.stringify(specVolID)}, not ${JSON.stringify(volumeName)}: refusing it`,
        );
      }
      this.host.logger
        .v(2)
        .info(
          caller === 'constructVolumeSpec'
            ? 'plugin.ConstructVolumeSpec recovered vol_data from global mount'
            : 'unmounter recovered vol_data from global mount',
          { volumeName, volumePath, globalMountDir: recovered.dataDir },
        );
      return { data: recovered.data, specVolID, dataSource: 'global-fallback' };
    }
  }

  async newMounter(spec: Spec, pod: PodRef): Promise<VolumeMounter> {
    const lifecycle = getVolumeLifecycleMode(spec);
    const { driverName, volumeHandle } = driverAndHandle(spec, pod.uid);
    return Promise.resolve(new CsiMounter(this.host, { driverName, volumeHandle, specName: specName(spec), podUID: pod.uid, lifecycle }, spec, pod));
  }

  /**
   * NewUnmounter: reads the pod-local vol_data.json for the driver and handle. With the gate on
   * it falls back to the global mount (KEP-6058 item 7): without that, the unmount of a pod whose
   * file is lost is never generated and its global mount leaks.
   */
  async newUnmounter(specVolName: string, podUID: string): Promise<VolumeUnmounter> {
    const volumePath = this.host.layout.csiPodVolumeDir(podUID, specVolName);
    const { data } = await this.loadPodVolumeData(escapeQualifiedName(specVolName), volumePath, 'newUnmounter');
    return new CsiUnmounter(this.host, {
      driverName: data[volDataKey.driverName] ?? '',
      volumeHandle: data[volDataKey.volHandle] ?? '',
      specName: specVolName,
      podUID,
    });
  }

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

  /**
   * Leftover volume directories whose removal failed (EROFS, ENOSPC, EBUSY …) or had to wait for a
   * MountDevice working there: retried by {@link removeLeftoverGlobalDirs} until removed or no
   * longer leftovers. In memory only: a restart lists them again.
   */
  readonly #leftoverDirs = new Set<string>();
  /** Shared with this plugin's MountDevice calls: a removal never overlaps one in the same dir. */
  readonly #claims = new VolumeDirClaims();

  private async removeLeftover(dir: string, check: (dir: string) => Promise<LeftoverRemoval>): Promise<void> {
    const release = this.#claims.tryClaimForRemoval(dir);
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
   * Each retry takes the broadest of the checks: an empty directory, or one holding only an
   * empty, unmounted `globalmount` and/or the complete temp file of an interrupted vol_data.json
   * write (an empty directory is the first one's rmdir failed half-way).
   */
  async removeLeftoverGlobalDirs(): Promise<void> {
    if (!this.host.features.enabled(CSIListGlobalVolumesWithoutStagingDir)) return;
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

  /** Inline volumes never attach; a PV attaches unless its CSIDriver says attachRequired: false. */
  async canAttach(spec: Spec): Promise<boolean> {
    if (spec.kind === 'inline') return false;
    const src = persistentSource(spec, false);
    const driver = await this.host.cluster.getCSIDriver(src.driver);
    return driver?.attachRequired ?? true;
  }

  newDeviceMounter(): DeviceMounter {
    return new CsiAttacher(this.host, this.#claims, this.hooks);
  }

  newDeviceUnmounter(): DeviceUnmounter {
    return new CsiAttacher(this.host, this.#claims, this.hooks);
  }

  newBlockVolumeMapper(spec: Spec, pod: PodRef): Promise<BlockVolumeMapper> {
    return newCsiBlockMapper(this.host, spec, pod, this.hooks);
  }

  /** NewBlockVolumeUnmapper: driver and handle from the block data file of the spec name. */
  async newBlockVolumeUnmapper(specVolName: string, podUID: string): Promise<BlockVolumeUnmapper> {
    const dataPath = path.join(this.host.layout.csiBlockDataDir(specVolName), VOL_DATA_FILE_NAME);
    let data: VolumeData;
    try {
      data = await loadVolumeData(this.host.fs, dataPath, { rootDir: this.host.realRootDir, rootDirIsReal: true });
    } catch (err) {
      throw new CsiSpecError(`unmapper failed to load volume data file [${dataPath}]: ${errorMessage(err)}`);
    }
    return new CsiBlockUnmapper(
      this.host,
      {
        driverName: data[volDataKey.driverName] ?? '',
        volumeHandle: data[volDataKey.volHandle] ?? '',
        specName: specVolName,
        podUID,
      },
      this.hooks,
    );
  }

  /** ConstructBlockVolumeSpec: reads volumeDevices/<escaped specVolName>/data/vol_data.json; mapPath is only logged. */
  async constructBlockVolumeSpec(podUID: string, specVolName: string, mapPath: string): Promise<Spec> {
    const dataPath = path.join(this.host.layout.csiBlockDataDir(specVolName), VOL_DATA_FILE_NAME);
    let data: VolumeData;
    try {
      data = await loadVolumeData(this.host.fs, dataPath, { rootDir: this.host.realRootDir, rootDirIsReal: true });
    } catch (err) {
      throw new CsiSpecError(`failed to load block volume data for ${specVolName} (pod ${podUID}, map path ${mapPath}): ${errorMessage(err)}`);
    }
    return constructPVSourceSpec(
      data[volDataKey.specVolID] ?? '',
      data[volDataKey.driverName] ?? '',
      data[volDataKey.volHandle] ?? '',
      'Block',
    );
  }

  async listGlobalVolumes(): Promise<GlobalVolume[]> {
    const listing = await this.listGlobalVolumesDetailed();
    const volumes: GlobalVolume[] = listing.volumes.map(({ spec, seLinuxMountContext, deviceMountPath, volumeMode }) => ({
      spec,
      seLinuxMountContext,
      deviceMountPath,
      volumeMode,
    }));
    if (this.host.features.enabled(CSIListGlobalVolumesWithoutStagingDir)) {
      for (const skipped of listing.skipped) {
        const recovered = await this.volumeWithoutStagingDir(skipped);
        if (recovered !== undefined) volumes.push(recovered);
      }
    }
    return volumes;
  }

  /**
   * Gate CSIListGlobalVolumesWithoutStagingDir: a directory skipped only because its staging
   * directory is missing, whose vol_data.json names a driver, a handle and (block) the spec, and
   * lies exactly where MountDevice / SetUpDevice would have put it. UnmountDevice then sends an
   * idempotent NodeUnstageVolume and removes what is left; MountDevice recreates the directory.
   */
  private async volumeWithoutStagingDir(skipped: SkippedGlobalDir): Promise<GlobalVolume | undefined> {
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
   * Gate CSIListGlobalVolumesWithoutStagingDir: a volume directory holding only nodevol's temp
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

  /** The listing with every skipped directory and its reason (what `nodevol audit` reports). */
  listGlobalVolumesDetailed(): Promise<GlobalVolumeListing> {
    return listCsiGlobalVolumes(this.host);
  }
}

/** A PV's CSI driver and handle, or an inline volume's driver with the handle derived from the pod. */
export function driverAndHandle(spec: Spec, podUID: string): { driverName: string; volumeHandle: string } {
  if (spec.kind === 'persistent') {
    const src = persistentSource(spec, true);
    return { driverName: src.driver, volumeHandle: src.volumeHandle };
  }
  const name = specName(spec);
  if (spec.volume.csi === undefined) throw new CsiSpecError(`volume ${JSON.stringify(name)} has no CSI source`);
  return { driverName: spec.volume.csi.driver, volumeHandle: makeEphemeralVolumeHandle(podUID, name) };
}

/** getVolumeLifecycleMode: inline CSI source ⇒ Ephemeral, else Persistent. */
export function getVolumeLifecycleMode(spec: Spec): VolumeLifecycleMode {
  return spec.kind === 'inline' ? 'Ephemeral' : 'Persistent';
}
