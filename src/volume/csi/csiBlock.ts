/**
 * CSI raw block volumes (csi_block.go; reference §1.5, §3.5, §5): the block vol_data.json,
 * NodeStageVolume at volumeDevices/staging/<spec>, NodePublishVolume at
 * volumeDevices/publish/<spec>/<podUID>, and their teardown.
 */
import * as path from 'node:path/posix';
import { CSIDurableBlockVolumePaths, CSIListGlobalVolumesWithoutStagingDir } from '../../features/features.js';
import { errorMessage, isNotExist } from '../../host/fs.js';
import { getAttachmentName } from '../../layout/names.js';
import type { BlockVolumeMapper, BlockVolumeUnmapper, PodRef } from '../plugins.js';
import { specName, type Spec } from '../spec.js';
import type { VolumeHost } from '../volumeHost.js';
import { assertConfined, assertUnderRoot, blockCapability, classifyCsiError, clientFor, csiLog, mkdirAll, supportsStageUnstage } from './csiUtil.js';
import { isOperationFinishedError } from '../util/errors.js';
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
export async function newCsiBlockMapper(host: VolumeHost, spec: Spec, pod: PodRef): Promise<CsiBlockMapper> {
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
  return new CsiBlockMapper(host, id, spec);
}

export class CsiBlockMapper implements BlockVolumeMapper {
  constructor(
    private readonly host: VolumeHost,
    private readonly id: BlockIdentity,
    private readonly spec: Spec,
  ) {}

  getGlobalMapPath(): string {
    return this.host.layout.csiGlobalMapPath(this.id.specName);
  }

  getPodDeviceMapPath(): { dir: string; name: string } {
    return this.host.layout.csiPodDeviceMapPath(this.id.podUID, this.id.specName);
  }

  async setUpDevice(): Promise<string> {
    const { host, id } = this;
    const client = clientFor(host, id.driverName);
    if (!(await supportsStageUnstage(client))) return '';
    const stagingPath = host.layout.csiBlockStagingPath(id.specName);
    await mkdirAll(host, stagingPath);
    // Gate CSIDurableBlockVolumePaths: the staging dir survives a power cut before the driver
    // stages into it (upstream's plain mkdir may be lost while the driver's state is not).
    if (host.features.enabled(CSIDurableBlockVolumePaths)) await host.fs.fsyncDir(path.dirname(stagingPath));
    try {
      await client.nodeStageVolume({
        volumeId: id.volumeHandle,
        publishContext: {},
        stagingTargetPath: stagingPath,
        volumeCapability: blockCapability(this.spec),
        secrets: {},
        volumeContext: this.spec.kind === 'persistent' ? (this.spec.persistentVolume.csi?.volumeAttributes ?? {}) : {},
      });
    } catch (err) {
      const classified = classifyCsiError(err, 'blockMapper.stageVolumeForBlock failed');
      if (isOperationFinishedError(classified)) await cleanupOrphanDeviceFilesLogged(host, id.specName);
      throw classified;
    }
    return stagingPath;
  }

  async mapPodDevice(): Promise<string> {
    const { host, id } = this;
    const client = clientFor(host, id.driverName);
    const stageUnstage = await supportsStageUnstage(client);
    const publishDir = host.layout.csiBlockPublishDir(id.specName);
    await mkdirAll(host, publishDir);
    const publishPath = host.layout.csiBlockPublishPath(id.specName, id.podUID);
    if (host.features.enabled(CSIDurableBlockVolumePaths)) await createDurableTarget(host, publishPath);
    try {
      await client.nodePublishVolume({
        volumeId: id.volumeHandle,
        publishContext: {},
        stagingTargetPath: stageUnstage ? host.layout.csiBlockStagingPath(id.specName) : '',
        targetPath: publishPath,
        volumeCapability: blockCapability(this.spec),
        readonly: this.spec.readOnly,
        secrets: {},
        volumeContext: this.spec.kind === 'persistent' ? (this.spec.persistentVolume.csi?.volumeAttributes ?? {}) : {},
      });
    } catch (err) {
      throw classifyCsiError(err, 'blockMapper.publishVolumeForBlock failed');
    }
    return publishPath;
  }
}

export class CsiBlockUnmapper implements BlockVolumeUnmapper {
  constructor(
    private readonly host: VolumeHost,
    private readonly id: BlockIdentity,
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
    // Gate CSIListGlobalVolumesWithoutStagingDir: a staging dir lost with a power cut does not
    // mean the driver unstaged; NodeUnstageVolume is idempotent, so it is sent all the same
    // (upstream skips it when the staging dir is gone).
    const unstageAnyway = !staged && host.features.enabled(CSIListGlobalVolumesWithoutStagingDir);
    if (unstageAnyway && (await supportsStageUnstage(client))) {
      await assertConfined(host, stagingPath, 'NodeUnstageVolume');
      try {
        await client.nodeUnstageVolume({ volumeId: id.volumeHandle, stagingTargetPath: stagingPath });
      } catch (err) {
        throw new Error(csiLog(`blockMapper.TearDownDevice failed: ${errorMessage(err)}`));
      }
    }
    if (staged) {
      if (await supportsStageUnstage(client)) {
        await assertConfined(host, stagingPath, 'NodeUnstageVolume');
        try {
          await client.nodeUnstageVolume({ volumeId: id.volumeHandle, stagingTargetPath: stagingPath });
        } catch (err) {
          throw new Error(csiLog(`blockMapper.TearDownDevice failed: ${errorMessage(err)}`));
        }
      }
      await removeIfUnmounted(host, stagingPath);
    }
    await cleanupOrphanDeviceFilesLogged(host, id.specName);
  }
}

/**
 * Gate CSIDurableBlockVolumePaths: the publish target (an empty file the driver bind mounts the
 * device onto; CSI lets the CO create it) exists durably before NodePublishVolume, so that after a
 * power cut the target is still on disk to be unpublished (gate
 * CSIUnpublishBeforeUnstageAfterReconstruction pairs it with its volume).
 */
async function createDurableTarget(host: VolumeHost, publishPath: string): Promise<void> {
  try {
    await host.fs.lstat(publishPath);
  } catch (err) {
    if (!isNotExist(err)) throw err;
    await host.fs.writeFile(publishPath, new Uint8Array(0), { mode: 0o640, fsync: true });
  }
  await host.fs.fsyncDir(path.dirname(publishPath));
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

/** The orphan file cleanup as its callers run it: a failure is logged at V(4), never returned. */
async function cleanupOrphanDeviceFilesLogged(host: VolumeHost, spec: string): Promise<void> {
  try {
    await cleanupOrphanDeviceFiles(host, spec);
  } catch (err) {
    host.logger.v(4).info(`Failed to clean up block volume directory ${errorMessage(err)}`);
  }
}
