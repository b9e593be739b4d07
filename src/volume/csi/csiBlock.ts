/**
 * CSI raw block volumes (csi_block.go): the block vol_data.json,
 * NodeStageVolume at volumeDevices/staging/<spec>, NodePublishVolume at
 * volumeDevices/publish/<spec>/<podUID>, and their teardown.
 */
import * as path from 'node:path/posix';
import type { CsiNodeClient } from '../../ports/csi.js';
import { errorMessage, isNotExist } from '../../ports/fs.js';
import { getAttachmentName } from '../../layout/names.js';
import type { BlockVolumeMapper, BlockVolumeUnmapper, MounterArgs, PodRef } from '../plugins.js';
import { specName, type Spec } from '../spec.js';
import type { VolumeHost } from '../volumeHost.js';
import { upstreamCsiHooks, type CsiHooks } from './csiHooks.js';
import {
  assertConfined,
  attachmentMetadata,
  assertUnderRoot,
  blockCapability,
  clientFor,
  csiLog,
  getCredentialsFromSecret,
  mkdirAll,
  podInfoAttrs,
  podInfoEnabled,
  skipAttach,
  supportsStageUnstage,
} from './csiUtil.js';
import { TransientOperationFailure, UncertainProgressError } from '../util/errors.js';
import { stageOrPublish } from './stageOrPublish.js';
import { saveVolumeData, volDataKey } from './volumeData.js';

export interface BlockIdentity {
  readonly driverName: string;
  readonly volumeHandle: string;
  readonly specName: string;
  readonly podUID: string;
}

/**
 * NewBlockVolumeMapper writes the block data file every time a mapper is built (reconstruction
 * included), as kubelet does.
 */
export async function newCsiBlockMapper(host: VolumeHost, spec: Spec, pod: PodRef, hooks: CsiHooks = upstreamCsiHooks): Promise<CsiBlockMapper> {
  if (spec.kind !== 'persistent' || spec.persistentVolume.csi === undefined) {
    throw new Error(csiLog('block volume mapper requires a CSI PersistentVolume'));
  }
  const csi = spec.persistentVolume.csi;
  const id: BlockIdentity = { driverName: csi.driver, volumeHandle: csi.volumeHandle, specName: specName(spec), podUID: pod.uid };
  const dataDir = host.layout.csiBlockDataDir(id.specName);
  await mkdirAll(host, dataDir);
  await saveVolumeData(host.fs, dataDir, {
    [volDataKey.specVolID]: id.specName,
    [volDataKey.volHandle]: id.volumeHandle,
    [volDataKey.driverName]: id.driverName,
    [volDataKey.nodeName]: host.nodeName,
    [volDataKey.attachmentID]: getAttachmentName(id.volumeHandle, id.driverName, host.nodeName),
  });
  return new CsiBlockMapper(host, id, spec, pod, hooks);
}

export class CsiBlockMapper implements BlockVolumeMapper {
  constructor(
    private readonly host: VolumeHost,
    private readonly id: BlockIdentity,
    private readonly spec: Spec,
    private readonly pod: PodRef,
    private readonly hooks: CsiHooks = upstreamCsiHooks,
  ) {}

  getGlobalMapPath(): string {
    return this.host.layout.csiGlobalMapPath(this.id.specName);
  }

  getPodDeviceMapPath(): { dir: string; name: string } {
    return this.host.layout.csiPodDeviceMapPath(this.id.podUID, this.id.specName);
  }

  /**
   * SetUpDevice / stageVolumeForBlock, in kubelet's order: the VolumeAttachment (unless the
   * CSIDriver says attachRequired: false), the STAGE_UNSTAGE_VOLUME check, the stage secrets,
   * the staging dir, then NodeStageVolume (which first maps the access mode).
   */
  async setUpDevice(args: MounterArgs = {}): Promise<string> {
    const { host, id } = this;
    const publishContext = await this.publishContext('SetupDevice');
    const client = clientFor(host, id.driverName);
    // From here on, as in kubelet's stageVolumeForBlock, a final error runs cleanupOrphanDeviceFiles
    // (the block data file NewBlockVolumeMapper wrote included): the capability check and the
    // MkdirAll below, and NodeStageVolume (stageOrPublish).
    let stageUnstage: boolean;
    try {
      stageUnstage = await supportsStageUnstage(client);
    } catch (err) {
      const failed = new Error(csiLog(`blockMapper.stageVolumeForBlock failed to check STAGE_UNSTAGE_VOLUME capability: ${errorMessage(err)}`));
      throw await this.finishedBeforeNodeStageVolume(failed, 'NodeGetCapabilities', args);
    }
    if (!stageUnstage) {
      host.logger.info(csiLog('blockMapper.stageVolumeForBlock STAGE_UNSTAGE_VOLUME capability not set. Skipping MountDevice...'));
      return '';
    }
    let secrets: Record<string, string> = {};
    const secretRef = this.spec.kind === 'persistent' ? this.spec.persistentVolume.csi?.nodeStageSecretRef : undefined;
    if (secretRef !== undefined) {
      try {
        secrets = await getCredentialsFromSecret(host, secretRef);
      } catch (err) {
        throw new TransientOperationFailure(csiLog(`failed to get NodeStageSecretRef ${secretRef.namespace}/${secretRef.name}: ${errorMessage(err)}`));
      }
    }
    const stagingPath = host.layout.csiBlockStagingPath(id.specName);
    if (this.hooks.beforeNodeStageVolume !== undefined) {
      await this.hooks.beforeNodeStageVolume(host, client, { volumeHandle: id.volumeHandle, stagingPath, dataDir: host.layout.csiBlockDataDir(id.specName), caller: 'blockMapper.SetUpDevice' });
    }
    try {
      await mkdirAll(host, stagingPath);
    } catch (err) {
      const failed = new Error(csiLog(`blockMapper.stageVolumeForBlock failed to create dir ${stagingPath}: ${errorMessage(err)}`));
      throw await this.finishedBeforeNodeStageVolume(failed, 'MkdirAll', args);
    }
    if (this.hooks.stagingPathCreated !== undefined) await this.hooks.stagingPathCreated(host, stagingPath);
    // A final error: cleanupOrphanDeviceFiles.
    await stageOrPublish(host, this.hooks, client, {
      caller: 'blockMapper.stageVolumeForBlock',
      spec: this.spec,
      path: stagingPath,
      // kubelet made the staging dir empty: anything in it is the driver's.
      workShown: { caller: 'blockMapper.SetUpDevice', orNotEmpty: true },
      removal: { operation: 'SetUpDevice', step: 'NodeStageVolume', args, dataDir: host.layout.csiBlockDataDir(id.specName), remove: () => cleanupOrphanDeviceFilesLogged(host, id.specName) },
      accessModeFailure: 'handled',
      send: (accessMode) =>
        client.nodeStageVolume({
          volumeId: id.volumeHandle,
          publishContext,
          stagingTargetPath: stagingPath,
          volumeCapability: blockCapability(this.spec, accessMode),
          secrets,
          volumeContext: this.spec.kind === 'persistent' ? (this.spec.persistentVolume.csi?.volumeAttributes ?? {}) : {},
        }),
    });
    return stagingPath;
  }

  /**
   * A final error of stageVolumeForBlock before NodeStageVolume: kubelet's SetUpDevice runs
   * cleanupOrphanDeviceFiles (its failure logged at V(4)), unless the onFinishedError hook
   * decides otherwise. Returns the error to throw.
   */
  private async finishedBeforeNodeStageVolume(err: Error, step: 'NodeGetCapabilities' | 'MkdirAll', args: MounterArgs): Promise<Error> {
    const { host, id } = this;
    const decision = this.hooks.onFinishedError?.({ operation: 'SetUpDevice', step, path: host.layout.csiBlockStagingPath(id.specName), args }) ?? 'cleanup';
    if (decision === 'uncertain') return new UncertainProgressError(err.message);
    if (decision === 'cleanup' && !(await cleanupOrphanDeviceFilesLogged(host, id.specName)) && this.hooks.afterFailedCleanup !== undefined) {
      const site = { operation: 'SetUpDevice', step, path: host.layout.csiBlockStagingPath(id.specName), args, dataDir: host.layout.csiBlockDataDir(id.specName) } as const;
      if ((await this.hooks.afterFailedCleanup(site)) === 'uncertain') return new UncertainProgressError(err.message);
    }
    return err;
  }

  /**
   * The publish context of SetUpDevice / MapPodDevice (`caller`): the VolumeAttachment's
   * attachmentMetadata, none when the CSIDriver says attachRequired: false. A failure to read the
   * CSIDriver is final, one to read the VolumeAttachment transient, with kubelet's texts.
   */
  private async publishContext(caller: 'SetupDevice' | 'MapPodDevice'): Promise<Record<string, string>> {
    const { host, id } = this;
    let skip: boolean;
    try {
      skip = await skipAttach(host, id.driverName);
    } catch (err) {
      throw new Error(csiLog(`blockMapper.${caller} failed to check CSIDriver for ${id.driverName}: ${errorMessage(err)}`));
    }
    if (skip) return {};
    try {
      return await attachmentMetadata(host, id.volumeHandle, id.driverName);
    } catch (err) {
      const attachID = getAttachmentName(id.volumeHandle, id.driverName, host.nodeName);
      throw new TransientOperationFailure(csiLog(`blockMapper.${caller} failed to get volume attachment [id=${attachID}]: ${errorMessage(err)}`));
    }
  }

  /**
   * MapPodDevice / publishVolumeForBlock, in kubelet's order: the VolumeAttachment, the pod
   * information, the publish secrets, the publish dir, then NodePublishVolume (which first maps
   * the access mode). No service account tokens: kubelet sends them from SetUp only. No
   * capability query of its own: the only NodeGetCapabilities call is the access mode's.
   */
  async mapPodDevice(): Promise<string> {
    const { host, id } = this;
    const publishContext = await this.publishContext('MapPodDevice');
    const client = clientFor(host, id.driverName);
    // publishVolumeForBlock: the pod keys when the CSIDriver has podInfoOnMount (a PV: ephemeral=false).
    let volumeContext: Record<string, string> = { ...(this.spec.kind === 'persistent' ? (this.spec.persistentVolume.csi?.volumeAttributes ?? {}) : {}) };
    let podInfo: boolean;
    try {
      podInfo = await podInfoEnabled(host, id.driverName);
    } catch (err) {
      throw new TransientOperationFailure(csiLog(`blockMapper.publishVolumeForBlock failed to assemble volume attributes: ${errorMessage(err)}`));
    }
    if (podInfo) volumeContext = { ...volumeContext, ...podInfoAttrs(this.pod, 'Persistent') };
    let secrets: Record<string, string> = {};
    const secretRef = this.spec.kind === 'persistent' ? this.spec.persistentVolume.csi?.nodePublishSecretRef : undefined;
    if (secretRef !== undefined) {
      try {
        secrets = await getCredentialsFromSecret(host, secretRef);
      } catch (err) {
        throw new TransientOperationFailure(csiLog(`blockMapper.publishVolumeForBlock failed to get NodePublishSecretRef ${secretRef.namespace}/${secretRef.name}: ${errorMessage(err)}`));
      }
    }
    const publishDir = host.layout.csiBlockPublishDir(id.specName);
    await mkdirAll(host, publishDir);
    const publishPath = host.layout.csiBlockPublishPath(id.specName, id.podUID);
    if (this.hooks.publishPathParentCreated !== undefined) await this.hooks.publishPathParentCreated(host, publishPath);
    // A final error: kubelet removes nothing.
    await stageOrPublish(host, this.hooks, client, {
      caller: 'blockMapper.publishVolumeForBlock',
      spec: this.spec,
      path: publishPath,
      workShown: { caller: 'blockMapper.MapPodDevice' },
      removal: 'none',
      accessModeFailure: 'returned',
      send: (accessMode) =>
        client.nodePublishVolume({
          volumeId: id.volumeHandle,
          publishContext,
          // Always the staging path, whether or not the driver stages (csi_block.go
          // publishVolumeForBlock passes getStagingPath(); csi_client.go sets the field when it is not empty).
          stagingTargetPath: host.layout.csiBlockStagingPath(id.specName),
          targetPath: publishPath,
          volumeCapability: blockCapability(this.spec, accessMode),
          readonly: this.spec.readOnly,
          secrets,
          volumeContext,
        }),
    });
    return publishPath;
  }
}

export class CsiBlockUnmapper implements BlockVolumeUnmapper {
  constructor(
    private readonly host: VolumeHost,
    private readonly id: BlockIdentity,
    private readonly hooks: CsiHooks = upstreamCsiHooks,
  ) {}

  async unmapPodDevice(): Promise<void> {
    const { host, id } = this;
    const client = clientFor(host, id.driverName);
    const publishPath = host.layout.csiBlockPublishPath(id.specName, id.podUID);
    await assertConfined(host, publishPath, 'NodeUnpublishVolume');
    try {
      await client.nodeUnpublishVolume({ volumeId: id.volumeHandle, targetPath: publishPath });
    } catch (err) {
      throw new Error(csiLog(`blockMapper.unpublishVolumeForBlock failed: ${errorMessage(err)}`));
    }
  }

  async tearDownDevice(): Promise<void> {
    const { host, id } = this;
    const client = clientFor(host, id.driverName);
    const stagingPath = host.layout.csiBlockStagingPath(id.specName);
    let staged = true;
    try {
      await host.fs.lstat(stagingPath);
    } catch (err) {
      if (!isNotExist(err)) throw err;
      staged = false;
    }
    // Kubelet skips NodeUnstageVolume when the staging path is gone; the hook sends it all the same.
    const unstageAnyway = !staged && this.hooks.unstageWhenStagingPathGone === true;
    if (unstageAnyway && (await supportsStageUnstage(client))) await this.unstage(client, stagingPath);
    if (staged) {
      if (await supportsStageUnstage(client)) {
        await this.unstage(client, stagingPath);
      } else {
        host.logger.info(csiLog('blockMapper.unstageVolumeForBlock STAGE_UNSTAGE_VOLUME capability not set. Skipping unstageVolumeForBlock ...'));
      }
      await removeIfUnmounted(host, stagingPath);
    }
    await cleanupOrphanDeviceFilesLogged(host, id.specName);
  }

  /**
   * NodeUnstageVolume at the staging path; a record of it (nodeUnstageVolumeRecord) is kept
   * beside the volume's data file only when that dir exists (the block volume's own).
   */
  private async unstage(client: CsiNodeClient, stagingPath: string): Promise<void> {
    const { host, id } = this;
    await assertConfined(host, stagingPath, 'NodeUnstageVolume');
    const dataDir = host.layout.csiBlockDataDir(id.specName);
    const record = this.hooks.nodeUnstageVolumeRecord;
    const recorded = record !== undefined && (await record.dataDirExists(host, dataDir));
    if (record !== undefined && recorded) await record.started(host, dataDir, 'blockMapper.TearDownDevice');
    try {
      await client.nodeUnstageVolume({ volumeId: id.volumeHandle, stagingTargetPath: stagingPath });
    } catch (err) {
      throw new Error(csiLog(`blockMapper.TearDownDevice failed: ${errorMessage(err)}`));
    }
    if (record !== undefined && recorded) await record.ended(host, dataDir);
  }
}

/**
 * Removes a directory tree only when nothing under it is mounted: kubelet's remove-all of the
 * staging path, made safe (nodevol never deletes what may still hold a mounted filesystem).
 */
async function removeIfUnmounted(host: VolumeHost, dir: string): Promise<void> {
  assertUnderRoot(host, dir);
  const table = await host.mounter.readMountTable();
  const mounts = table.mountsUnder(dir);
  if (mounts.length > 0) throw new Error(csiLog(`refusing to remove ${dir}: still mounted at ${mounts.join(', ')}`));
  await removeTree(host, dir, 0);
}

const MAX_REMOVE_DEPTH = 8;

async function removeTree(host: VolumeHost, p: string, depth: number): Promise<void> {
  if (depth > MAX_REMOVE_DEPTH) throw new Error(csiLog(`refusing to remove ${p}: deeper than ${MAX_REMOVE_DEPTH} levels`));
  let st;
  try {
    st = await host.fs.lstat(p);
  } catch (err) {
    if (isNotExist(err)) return;
    throw err;
  }
  if (st.type !== 'directory') {
    await host.fs.unlink(p);
    return;
  }
  for (const e of await host.fs.readdir(p)) await removeTree(host, path.join(p, e.name), depth + 1);
  await host.fs.rmdir(p);
}

/**
 * cleanupOrphanDeviceFiles (csi_block.go): remove publish/<spec> (it must be empty), then
 * staging/<spec> (a plain rmdir: it must be empty and unmounted), then volumeDevices/<spec> (its
 * data file and empty dev/). Like kubelet's, it stops at the first step that fails: a publish dir
 * still holding a pod's target means the volume is still in use, and its staging dir must stay.
 * Its callers log the failure at V(4) and carry on, as kubelet's do.
 */
export async function cleanupOrphanDeviceFiles(host: VolumeHost, spec: string): Promise<void> {
  const steps: [string, string, () => Promise<void>][] = [
    ['publish directory', host.layout.csiBlockPublishDir(spec), () => host.fs.rmdir(host.layout.csiBlockPublishDir(spec))],
    ['volume staging path', host.layout.csiBlockStagingPath(spec), () => host.fs.rmdir(host.layout.csiBlockStagingPath(spec))],
    ['volume directory', host.layout.csiBlockVolumeDir(spec), () => removeIfUnmounted(host, host.layout.csiBlockVolumeDir(spec))],
  ];
  for (const [what, dir, step] of steps) {
    try {
      await step();
    } catch (err) {
      if (!isNotExist(err)) throw new Error(csiLog(`failed to remove ${what} [${dir}]: ${errorMessage(err)}`));
    }
  }
}

/**
 * The orphan file cleanup as its callers run it: a failure is logged at V(4), never returned.
 * Resolves to whether it succeeded (kubelet's callers ignore that; the afterFailedCleanup hook
 * reads it after a failed SetUpDevice).
 */
async function cleanupOrphanDeviceFilesLogged(host: VolumeHost, spec: string): Promise<boolean> {
  try {
    await cleanupOrphanDeviceFiles(host, spec);
    return true;
  } catch (err) {
    host.logger.v(4).info(`Failed to clean up block volume directory ${errorMessage(err)}`);
    return false;
  }
}
