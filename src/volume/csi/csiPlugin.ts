/**
 * The CSI volume plugin (pkg/volume/csi/csi_plugin.go), reading side: naming, spec
 * reconstruction from pod-local, block and global vol_data.json files, device mount paths and
 * the KEP-6058 global listing. The writing side (MountDevice, SetUp, ...) builds on this.
 */
import { joinName } from '../../layout/joinName.js';
import * as path from 'node:path/posix';
import { CSIGlobalMountReconstruction } from '../../features/features.js';
import { errorMessage } from '../../ports/fs.js';
import { CSI_PLUGIN_NAME, csiVolumeName, escapeQualifiedName, makeEphemeralVolumeHandle } from '../../layout/names.js';
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
import { listCsiGlobalVolumes, type GlobalVolumeListing } from './globalVolumes.js';
import { resolvesInsideRoot } from '../../layout/confinement.js';
import { loadVolumeData, VOL_DATA_FILE_NAME, volDataKey, type VolumeData } from './volumeData.js';

export { CsiSpecError };

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
    return Promise.resolve(new CsiMounter(this.host, { driverName, volumeHandle, specName: specName(spec), podUID: pod.uid, lifecycle }, spec, pod, this.hooks));
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

  /** Inline volumes never attach; a PV attaches unless its CSIDriver says attachRequired: false. */
  async canAttach(spec: Spec): Promise<boolean> {
    if (spec.kind === 'inline') return false;
    const src = persistentSource(spec, false);
    const driver = await this.host.cluster.getCSIDriver(src.driver);
    return driver?.attachRequired ?? true;
  }

  newDeviceMounter(): DeviceMounter {
    return new CsiAttacher(this.host, this.hooks);
  }

  newDeviceUnmounter(): DeviceUnmounter {
    return new CsiAttacher(this.host, this.hooks);
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
    const globalDirSkipped = this.hooks.globalDirSkipped;
    if (globalDirSkipped !== undefined) {
      for (const skipped of listing.skipped) {
        const recovered = await globalDirSkipped(skipped);
        if (recovered !== undefined) volumes.push(recovered);
      }
    }
    return volumes;
  }

  /** The listing with every skipped directory and its reason (what `nodevol audit` reports). */
  listGlobalVolumesDetailed(): Promise<GlobalVolumeListing> {
    return listCsiGlobalVolumes(this.host);
  }
}

/**
 * A PV's CSI driver and handle, or an inline volume's driver with the handle derived from the pod.
 * Neither is checked for being empty: csi_plugin.go NewMounter takes them as they are, and a PV
 * naming no driver or handle fails later, where kubelet's does (the API server refuses such a PV).
 */
export function driverAndHandle(spec: Spec, podUID: string): { driverName: string; volumeHandle: string } {
  if (spec.kind === 'persistent') {
    const src = persistentSource(spec, false);
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
