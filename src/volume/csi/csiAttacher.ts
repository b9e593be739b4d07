/**
 * CSI MountDevice / UnmountDevice (csi_attacher.go): the global
 * vol_data.json (with KEP-6058's specVolID and volumeLifecycleMode, written whatever the gate)
 * and NodeStageVolume / NodeUnstageVolume at <driver>/<sha256(handle)>/globalmount.
 */
import * as path from 'node:path/posix';
import { errorMessage } from '../../ports/fs.js';
import type { DeviceMounter, DeviceUnmounter, MounterArgs } from '../plugins.js';
import { specName, type Spec } from '../spec.js';
import { TransientOperationFailure, UncertainProgressError } from '../util/errors.js';
import type { VolumeHost } from '../volumeHost.js';
import { upstreamCsiHooks, type CsiHooks } from './csiHooks.js';
import { stageOrPublish } from './stageOrPublish.js';
import {
  assertConfined,
  clientFor,
  csiLog,
  getCredentialsFromSecret,
  getPublishContext,
  makeDeviceMountPath,
  mkdirAll,
  mountCapability,
  removeMountDir,
  removeMountDirLogged,
  supportsStageUnstage,
  volumeMountGroupFor,
} from './csiUtil.js';
import { isVolumeDataNotFound, loadVolumeData, saveVolumeData, VOL_DATA_FILE_NAME, volDataKey } from './volumeData.js';

export class CsiAttacher implements DeviceMounter, DeviceUnmounter {
  /** `hooks`: nodevol's (csiHooks.ts), kubelet's by default. */
  constructor(
    private readonly host: VolumeHost,
    private readonly hooks: CsiHooks = upstreamCsiHooks,
  ) {}

  getDeviceMountPath(spec: Spec): string {
    return makeDeviceMountPath(this.host, spec);
  }

  async mountDevice(spec: Spec, _devicePath: string, deviceMountPath: string, args: MounterArgs): Promise<void> {
    if (deviceMountPath === '') throw new Error(csiLog('attacher.MountDevice failed, deviceMountPath is empty'));
    // The hook's claim on the volume dir, for the whole call (none without the hook: no await).
    const claim = this.hooks.beginMountDevice?.(path.dirname(deviceMountPath));
    const release = claim === undefined || typeof claim === 'function' ? claim : await claim;
    try {
      await this.mountDeviceBody(spec, deviceMountPath, args);
    } finally {
      release?.();
    }
  }

  /**
   * MountDevice itself; mountDevice() above only brackets it with the beginMountDevice hook. Two
   * async layers, as they were when the claim was always taken: the simulator's interleavings
   * depend on the number of microtask turns (see csiHooks.ts).
   */
  private async mountDeviceBody(spec: Spec, deviceMountPath: string, args: MounterArgs): Promise<void> {
    const { host } = this;
    if (spec.kind !== 'persistent' || spec.persistentVolume.csi === undefined) {
      throw new Error(csiLog('attacher.MountDevice failed to get CSIPersistentVolumeSource'));
    }
    const csi = spec.persistentVolume.csi;
    if (csi.volumeHandle === '') throw new Error(csiLog('attacher.MountDevice failed: volume handle is empty'));
    const client = clientFor(host, csi.driver);
    let stageUnstage: boolean;
    try {
      stageUnstage = await supportsStageUnstage(client);
    } catch (err) {
      throw new Error(csiLog(`attacher.MountDevice failed to check STAGE_UNSTAGE_VOLUME: ${errorMessage(err)}`));
    }

    // The publish context (the VolumeAttachment's attachmentMetadata) and the stage secrets (only
    // when the driver stages): a failure to read them is transient, the API error as it is.
    let publishContext: Record<string, string>;
    try {
      publishContext = await getPublishContext(host, csi.volumeHandle, csi.driver);
    } catch (err) {
      throw new TransientOperationFailure(errorMessage(err));
    }
    let secrets: Record<string, string> = {};
    const secretRef = csi.nodeStageSecretRef;
    if (secretRef !== undefined && stageUnstage) {
      try {
        secrets = await getCredentialsFromSecret(host, secretRef);
      } catch (err) {
        throw new TransientOperationFailure(`fetching NodeStageSecretRef ${secretRef.namespace}/${secretRef.name} failed: ${errorMessage(err)}`);
      }
    }

    // Before anything in the volume dir changes: a failure after this point may remove the dir.
    if (stageUnstage && this.hooks.beforeNodeStageVolume !== undefined) {
      await this.hooks.beforeNodeStageVolume(host, client, { volumeHandle: csi.volumeHandle, stagingPath: deviceMountPath, dataDir: path.dirname(deviceMountPath), caller: 'attacher.MountDevice' });
    }
    const dataDir = path.dirname(deviceMountPath);
    await mkdirAll(host, deviceMountPath);
    // KEP-6058 item 1: specVolID and volumeLifecycleMode, unconditionally.
    const data: Record<string, string> = {
      [volDataKey.driverName]: csi.driver,
      [volDataKey.volHandle]: csi.volumeHandle,
      [volDataKey.specVolID]: specName(spec),
      [volDataKey.volumeLifecycleMode]: 'Persistent',
    };
    if (args.seLinuxLabel !== undefined && args.seLinuxLabel !== '') data[volDataKey.seLinuxMountContext] = args.seLinuxLabel;
    try {
      // csi_util.go saveVolumeData: any failure is MountDevice's final error, whatever the file
      // already holds (kubelet truncates and rewrites it), and NodeStageVolume is not sent.
      await saveVolumeData(host.fs, dataDir, data);
    } catch (err) {
      const message = csiLog(`failed to save volume info data: ${errorMessage(err)}`);
      const decision = this.hooks.onFinishedError?.({ operation: 'MountDevice', step: 'saveVolumeData', path: deviceMountPath, args }) ?? 'cleanup';
      if (decision === 'uncertain') throw new UncertainProgressError(message);
      if (decision === 'cleanup' && !(await this.cleanupMountDir(deviceMountPath)) && this.hooks.afterFailedCleanup !== undefined) {
        if ((await this.hooks.afterFailedCleanup({ operation: 'MountDevice', step: 'saveVolumeData', path: deviceMountPath, args, dataDir })) === 'uncertain') throw new UncertainProgressError(message);
      }
      throw new Error(message);
    }
    if (!stageUnstage) {
      // klog.Infof in kubelet: V(0).
      host.logger.info(csiLog('attacher.MountDevice STAGE_UNSTAGE_VOLUME capability not set. Skipping MountDevice...'));
      return;
    }
    // A failure to ask returns a transient error, but kubelet's deferred cleanup looks at the raw
    // error of NodeSupportsVolumeMountGroup (the function's local err, a finished error) and runs
    // removeMountDir: the staging dir, vol_data.json and the volume dir go unless the staging dir
    // is a mount point, whether or not this call made them. The onFinishedError hook may keep them.
    let volumeMountGroup: string;
    try {
      volumeMountGroup = await volumeMountGroupFor(client, args.fsGroup, 'attacher.MountDevice');
    } catch (err) {
      const decision = this.hooks.onFinishedError?.({ operation: 'MountDevice', step: 'NodeGetCapabilities', path: deviceMountPath, args }) ?? 'cleanup';
      if (decision === 'cleanup' && !(await this.cleanupMountDir(deviceMountPath)) && this.hooks.afterFailedCleanup !== undefined) {
        if ((await this.hooks.afterFailedCleanup({ operation: 'MountDevice', step: 'NodeGetCapabilities', path: deviceMountPath, args, dataDir })) === 'uncertain') throw new UncertainProgressError(errorMessage(err));
      }
      throw err;
    }
    // A final error: the deferred removeMountDir of the staging path.
    await stageOrPublish(host, this.hooks, client, {
      caller: 'attacher.MountDevice',
      spec,
      path: deviceMountPath,
      workShown: { caller: 'attacher.MountDevice' },
      removal: { operation: 'MountDevice', step: 'NodeStageVolume', args, dataDir, remove: () => this.cleanupMountDir(deviceMountPath) },
      accessModeFailure: 'handled',
      send: (accessMode) =>
        client.nodeStageVolume({
          volumeId: csi.volumeHandle,
          publishContext,
          stagingTargetPath: deviceMountPath,
          volumeCapability: mountCapability(spec, csi.fsType ?? '', volumeMountGroup, accessMode),
          secrets,
          volumeContext: csi.volumeAttributes ?? {},
        }),
    });
    host.logger.v(4).info(csiLog('attacher.MountDevice successfully requested NodeStageVolume'), { deviceMountPath });
  }

  /** csi_attacher.go MountDevice's deferred removeMountDir: whether it succeeded (its failure is only logged). */
  private cleanupMountDir(deviceMountPath: string): Promise<boolean> {
    return removeMountDirLogged(this.host, deviceMountPath, 'attacher.MountDevice failed to remove mount dir after error', { deviceMountPath });
  }

  async unmountDevice(deviceMountPath: string): Promise<void> {
    const { host } = this;
    const dataDir = path.dirname(deviceMountPath);
    let data;
    try {
      data = await loadVolumeData(host.fs, path.join(dataDir, VOL_DATA_FILE_NAME), { rootDir: host.realRootDir, rootDirIsReal: true });
    } catch (err) {
      if (isVolumeDataNotFound(err)) {
        host.logger
          .v(4)
          .info(csiLog('attacher.UnmountDevice skipped because volume data file does not exist'), { path: path.join(dataDir, VOL_DATA_FILE_NAME) });
        if (this.hooks.volumeDataMissingAtUnmountDevice !== undefined) await this.hooks.volumeDataMissingAtUnmountDevice(dataDir);
        return;
      }
      throw new Error(csiLog(`attacher.UnmountDevice failed to get driver and volume name from device mount path: ${errorMessage(err)}`));
    }
    const driverName = data[volDataKey.driverName] ?? '';
    const volumeHandle = data[volDataKey.volHandle] ?? '';
    const client = clientFor(host, driverName);
    let stageUnstage: boolean;
    try {
      stageUnstage = await supportsStageUnstage(client);
    } catch (err) {
      throw new Error(csiLog(`attacher.UnmountDevice failed to check whether STAGE_UNSTAGE_VOLUME set: ${errorMessage(err)}`));
    }
    if (!stageUnstage) {
      host.logger.info(csiLog('attacher.UnmountDevice STAGE_UNSTAGE_VOLUME capability not set. Skipping UnmountDevice...'));
      await removeMountDir(host, deviceMountPath);
      return;
    }
    await assertConfined(host, deviceMountPath, 'NodeUnstageVolume');
    const record = this.hooks.nodeUnstageVolumeRecord;
    if (record !== undefined) await record.started(host, dataDir, 'attacher.UnmountDevice');
    try {
      await client.nodeUnstageVolume({ volumeId: volumeHandle, stagingTargetPath: deviceMountPath });
    } catch (err) {
      throw new Error(csiLog(`attacher.UnmountDevice failed: ${errorMessage(err)}`));
    }
    if (record !== undefined) await record.ended(host, dataDir);
    try {
      await removeMountDir(host, deviceMountPath);
    } catch (err) {
      throw new Error(csiLog(`attacher.UnmountDevice failed to clean up global mount ${deviceMountPath}: ${errorMessage(err)}`));
    }
    host.logger.v(4).info(csiLog('attacher.UnmountDevice successfully requested NodeUnStageVolume'), { deviceMountPath });
  }
}
