/**
 * Reconstruction at start (reconstruct.go / reconstruct_common.go, with kubernetes PR
 * #138454's reconstructGlobalVolumes):
 * rebuild the actual state from disk after a restart, every volume as uncertain.
 *
 * With CSIGlobalMountReconstruction on, the global mount listing runs first (and even when the
 * pod-directory walk then fails), so that a staged volume with no pod directory is registered,
 * reported in volumesInUse once the node status confirms it is attached, and unstaged if no pod
 * wants it (KEP-6058 Design Details item 4).
 */
import {
  CSIGlobalMountReconstruction,
  type KubeletFeatureGate,
} from '../../features/features.js';
import { mapConcurrently } from '../../ports/concurrency.js';
import type { ClusterView } from '../../ports/cluster.js';
import type { FileSystem } from '../../ports/fs.js';
import type { Logger } from '../../ports/logger.js';
import type { KubeletLayout } from '../../layout/layout.js';
import { getUniqueVolumeName, type UniqueVolumeName } from '../../layout/names.js';
import type { VolumeManagerMetrics } from '../../ports/metrics.js';
import type { OperationExecutor } from '../../operationexecutor/operationExecutor.js';
import { isExpectedError } from '../../operationexecutor/nestedPendingOperations.js';
import { isBlockVolumePlugin, type GlobalVolume, type GlobalVolumeListerPlugin, type VolumePluginMgr } from '../../volume/plugins.js';
import type { ActualStateOfWorld } from '../cache/actualStateOfWorld.js';
import type { DesiredStateOfWorld } from '../cache/desiredStateOfWorld.js';
import { getVolumesFromPodDir, RECONSTRUCTION_CONCURRENCY, type PodVolume } from './podVolumes.js';
import { reconstructVolumeSpec, type ReconstructedSpec } from './reconstructVolume.js';
import { upstreamReconstructHooks, type PodVolumesWalked, type ReconstructHooks, type RegisteredGlobalVolume } from './reconstructHooks.js';

export interface ReconstructorDeps {
  readonly fs: FileSystem;
  readonly layout: KubeletLayout;
  /** The root dir with symlinks resolved: the pod walk never leaves it. */
  readonly realRootDir: string;
  readonly plugins: VolumePluginMgr;
  readonly asw: ActualStateOfWorld;
  readonly dsw: DesiredStateOfWorld;
  readonly executor: OperationExecutor;
  readonly cluster: ClusterView;
  readonly features: KubeletFeatureGate;
  readonly logger: Logger;
  readonly metrics: VolumeManagerMetrics;
  /** nodevol's hooks (reconstructHooks.ts); absent: kubelet's reconstruction. */
  readonly hooks?: ReconstructHooks;
}

/** One reconstructed pod volume plus what updateStates needs. */
interface ReconstructedPodVolume extends ReconstructedSpec {
  /** Set when the volume has a device-level mount (device-mountable filesystem, or block). */
  readonly deviceMountPath: string | undefined;
}

export class Reconstructor {
  /** Names waiting for the node-status read that settles their attachability and devicePath. */
  private volumesNeedUpdateFromNodeStatus: UniqueVolumeName[] = [];
  /** Pod-directory candidates that failed; cleaned once, after the DSW is populated. */
  private volumesFailedReconstruction: PodVolume[] = [];
  /** Volumes the global listing registered in this pass, with their device mount paths. */
  private listedThisPass = new Map<UniqueVolumeName, string>();
  /** The same volumes as the hooks see them (afterPodVolumesWalked). */
  private listedVolumes: RegisteredGlobalVolume[] = [];
  private readonly hooks: ReconstructHooks;

  constructor(private readonly deps: ReconstructorDeps) {
    this.hooks = deps.hooks ?? upstreamReconstructHooks;
  }

  /** Whether reconstructed volumes still wait for the node status (unmounts are held back meanwhile). */
  needsUpdateFromNodeStatus(): boolean {
    return this.volumesNeedUpdateFromNodeStatus.length > 0;
  }

  /** For tests and status: copies. */
  pendingNodeStatusUpdates(): UniqueVolumeName[] {
    return [...this.volumesNeedUpdateFromNodeStatus];
  }
  failedReconstructions(): PodVolume[] {
    return [...this.volumesFailedReconstruction];
  }

  /** reconstructVolumes: runs once, at start, before the first reconcile. */
  async reconstructVolumes(): Promise<void> {
    const { features, logger } = this.deps;
    this.listedThisPass = new Map();
    this.listedVolumes = [];
    if (features.enabled(CSIGlobalMountReconstruction)) await this.reconstructGlobalVolumes();

    let candidates: readonly PodVolume[];
    try {
      candidates = (await getVolumesFromPodDir(this.deps.fs, this.deps.layout, logger, this.deps.realRootDir)).volumes;
    } catch (err) {
      logger.error(err, 'Cannot get volumes from disk, skip sync states for volume reconstruction');
      // Listed block volumes' publish targets do not depend on the pod directories.
      this.volumesFailedReconstruction = [...(await this.hooks.afterPodVolumesWalked(this.podVolumesWalked(new Map())))];
      return;
    }

    const byVolume = new Map<UniqueVolumeName, ReconstructedPodVolume[]>();
    // Each candidate is read on its own (its pod volume dir, vol_data.json): they are read
    // concurrently, and what each gave is recorded in the candidates' order, as one at a time.
    const inAsw = candidates.map((c) => this.deps.asw.volumeExistsWithSpecName(c.podName, c.volumeSpecName));
    const outcomes = await mapConcurrently(candidates, RECONSTRUCTION_CONCURRENCY, (candidate, i) =>
      inAsw[i] === true
        ? Promise.resolve(undefined)
        : this.reconstructVolume(candidate).then(
            (volume) => ({ volume }),
            (err: unknown) => ({ err }),
          ),
    );
    for (const [i, candidate] of candidates.entries()) {
      const outcome = outcomes[i];
      if (outcome === undefined) {
        logger.v(4).info('Volume exists in actual state, skip cleaning up mounts', { podName: candidate.podName, volumeSpecName: candidate.volumeSpecName });
        continue;
      }
      let reconstructed: ReconstructedPodVolume;
      try {
        if ('err' in outcome) throw outcome.err;
        reconstructed = outcome.volume;
        this.deps.metrics.reconstructVolumeOperation(reconstructed.dataSource === 'global-fallback' ? 'global-mount' : 'pod-local', false);
      } catch (err) {
        this.deps.metrics.reconstructVolumeOperation('pod-local', true);
        this.volumesFailedReconstruction.push(candidate);
        logger.info('Could not construct volume information', {
          podName: candidate.podName,
          volumeSpecName: candidate.volumeSpecName,
          err: err instanceof Error ? err.message : String(err),
        });
        continue;
      }
      logger.v(4).info('Adding reconstructed volume to actual state and node status', { podName: candidate.podName, volumeSpecName: candidate.volumeSpecName });
      const list = byVolume.get(reconstructed.uniqueVolumeName);
      if (list === undefined) byVolume.set(reconstructed.uniqueVolumeName, [reconstructed]);
      else list.push(reconstructed);
    }

    this.logListedAlsoInPodDirs(new Set(byVolume.keys()));
    this.hooks.podVolumesFailedReconstruction?.(this.volumesFailedReconstruction);
    this.volumesFailedReconstruction = [...(await this.hooks.afterPodVolumesWalked(this.podVolumesWalked(byVolume)))];
    if (byVolume.size > 0) {
      this.updateStates(byVolume);
      // One entry per pod volume, as kubelet assigns them; a volume the listing already queued
      // is not queued again.
      const queuedByListing = new Set(this.volumesNeedUpdateFromNodeStatus);
      for (const [name, pods] of byVolume) {
        if (queuedByListing.has(name)) continue;
        for (let i = 0; i < pods.length; i++) this.volumesNeedUpdateFromNodeStatus.push(name);
      }
    }
    logger.v(2).info('Volume reconstruction finished');
  }

  /** reconstructVolume: spec, unique name and (for block) the mapper, which rewrites the block data file. */
  private async reconstructVolume(candidate: PodVolume): Promise<ReconstructedPodVolume> {
    const { plugins } = this.deps;
    const r = await reconstructVolumeSpec(plugins, candidate);
    const pod = { uid: candidate.podName, namespace: '', name: '' };
    if (candidate.volumeMode === 'Block') {
      const mapper = plugins.findMapperPluginByName(candidate.pluginName);
      if (mapper === undefined) throw new Error(`could not find block volume plugin ${candidate.pluginName}`);
      await mapper.newBlockVolumeMapper(r.spec, pod);
    } else {
      await plugins.findPluginByName(candidate.pluginName).newMounter(r.spec, pod);
    }
    return r;
  }

  /** updateStates: everything reconstructed enters the ASW as uncertain. */
  private updateStates(byVolume: Map<UniqueVolumeName, ReconstructedPodVolume[]>): void {
    const { asw, logger } = this.deps;
    for (const [name, pods] of byVolume) {
      const first = pods[0];
      if (first === undefined) continue;
      const pluginName = first.volume.pluginName;
      try {
        asw.addAttachUncertainReconstructedVolume(name, first.spec, pluginName, '');
      } catch (err) {
        logger.error(err, 'Could not add volume information to actual state of world', { volumeName: name });
        continue;
      }
      let seLinuxMountContext = '';
      for (const p of pods) {
        const added = asw.checkAndMarkVolumeAsUncertainViaReconstruction({
          podName: p.volume.podName,
          podUID: p.volume.podName,
          volumeName: name,
          volumeSpec: p.spec,
          outerVolumeSpecName: '',
          innerVolumeSpecName: p.volume.volumeSpecName,
          pluginName,
          volumeMountState: 'VolumeMountUncertain',
          seLinuxMountContext: p.seLinuxMountContext,
        });
        seLinuxMountContext = p.seLinuxMountContext;
        if (added) {
          logger.v(2).info('Volume is marked as uncertain and added into the actual state', {
            podName: p.volume.podName,
            volumeName: name,
            seLinuxMountContext: p.seLinuxMountContext,
          });
        }
      }
      if (first.deviceMountPath !== undefined) {
        try {
          asw.markDeviceAsUncertain(name, '', first.deviceMountPath, seLinuxMountContext);
          logger.v(2).info('Volume is marked device as uncertain and added into the actual state', { volumeName: name, deviceMountPath: first.deviceMountPath });
        } catch (err) {
          logger.error(err, 'Could not mark device is uncertain to actual state of world', { volumeName: name });
        }
      }
    }
  }

  /** reconstructGlobalVolumes: every global mount a plugin lists and the ASW does not know. */
  private async reconstructGlobalVolumes(): Promise<void> {
    const { plugins, logger } = this.deps;
    for (const plugin of plugins.findGlobalVolumeListerPlugins()) {
      let listed: GlobalVolume[];
      try {
        listed = await plugin.listGlobalVolumes();
      } catch (err) {
        logger.error(err, 'Could not list global volumes', { plugin: plugin.getPluginName() });
        continue;
      }
      for (const gv of listed) this.reconstructGlobalVolume(plugin, gv);
    }
  }

  private reconstructGlobalVolume(plugin: GlobalVolumeListerPlugin, gv: GlobalVolume): void {
    const { asw, logger } = this.deps;
    const log4 = logger.v(4);
    if (gv.volumeMode === 'Block') {
      if (!isBlockVolumePlugin(plugin)) {
        log4.info('Skipping a global block volume: the plugin has no block mapper', { plugin: plugin.getPluginName(), deviceMountPath: gv.deviceMountPath });
        return;
      }
    } else if (!plugin.canDeviceMount(gv.spec)) {
      // The desired state names such volumes by pod, and there is no pod here to name it with.
      log4.info('Skipping a global volume its plugin cannot device mount', { deviceMountPath: gv.deviceMountPath });
      return;
    }
    let name: UniqueVolumeName;
    try {
      name = getUniqueVolumeName(plugin.getPluginName(), plugin.getVolumeName(gv.spec));
    } catch (err) {
      logger.error(err, 'Could not derive the unique name of a global volume', { deviceMountPath: gv.deviceMountPath });
      return;
    }
    if (asw.volumeExists(name)) {
      log4.info('Global mount is already in actual state, skipping', { volumeName: name });
      return;
    }
    try {
      asw.addAttachUncertainReconstructedVolume(name, gv.spec, plugin.getPluginName(), '');
    } catch (err) {
      logger.error(err, 'Could not add a global volume to the actual state', { volumeName: name });
      return;
    }
    try {
      asw.markDeviceAsUncertain(name, '', gv.deviceMountPath, gv.seLinuxMountContext);
    } catch (err) {
      // A volume with no pod and no device reads as one to detach: take it out again.
      asw.deleteVolume(name);
      logger.error(err, 'Could not mark a global volume device as uncertain', { volumeName: name });
      return;
    }
    this.volumesNeedUpdateFromNodeStatus.push(name);
    this.listedThisPass.set(name, gv.deviceMountPath);
    this.listedVolumes.push({ volumeName: name, pluginName: plugin.getPluginName(), spec: gv.spec, volumeMode: gv.volumeMode, seLinuxMountContext: gv.seLinuxMountContext });
    logger.v(2).info('Global mount with no pod directory is marked uncertain and added into the actual state', {
      volumeName: name,
      deviceMountPath: gv.deviceMountPath,
    });
  }

  /** What afterPodVolumesWalked is given. */
  private podVolumesWalked(byVolume: ReadonlyMap<UniqueVolumeName, readonly ReconstructedPodVolume[]>): PodVolumesWalked {
    return { failed: this.volumesFailedReconstruction, registered: this.listedVolumes, fromPodDirs: byVolume, asw: this.deps.asw };
  }

  /**
   * For the listed volumes a pod directory also accounted for, a V(4) line. The listing itself
   * counts nothing in reconstruct_volume_operations_total (KEP-6058's alpha
   * reconstructGlobalVolume increments no counter; only reconstruct_common.go reconstructVolume,
   * one per pod-directory candidate, does).
   */
  private logListedAlsoInPodDirs(foundInPodDirs: ReadonlySet<UniqueVolumeName>): void {
    const { logger } = this.deps;
    for (const [name, deviceMountPath] of this.listedThisPass) {
      if (foundInPodDirs.has(name)) logger.v(4).info('Global mount also found through a pod directory', { volumeName: name, deviceMountPath });
    }
  }

  /**
   * updateReconstructedFromNodeStatus: settles attachability and devicePath of reconstructed
   * volumes from node.status.volumesAttached. While the node status cannot be read the queue
   * stays, and the reconciler unmounts nothing.
   */
  async updateReconstructedFromNodeStatus(): Promise<void> {
    const { asw, cluster, logger } = this.deps;
    let attached: ReadonlyMap<string, string>;
    try {
      const status = await cluster.getNodeStatus();
      attached = new Map(status.volumesAttached.map((v) => [v.name, v.devicePath]));
    } catch (err) {
      // This may repeat a few times a second until the Node can be read (kubelet logs it at V(4)).
      logger.v(4).info('Failed to get Node status to reconstruct device paths', { err: err instanceof Error ? err.message : String(err) });
      return;
    }
    for (const name of this.volumesNeedUpdateFromNodeStatus) {
      const devicePath = attached.get(name);
      if (devicePath !== undefined) {
        asw.updateReconstructedDevicePath(name, devicePath);
        asw.updateReconstructedVolumeAttachability(name, true);
      } else {
        asw.updateReconstructedVolumeAttachability(name, false);
      }
    }
    logger.v(2).info('DevicePaths of reconstructed volumes updated');
    this.volumesNeedUpdateFromNodeStatus = [];
  }

  /**
   * cleanOrphanVolumes: once, after the DSW is populated, each failed candidate no pod wants is
   * cleaned with TearDown only (its global mount stays - #101791). The hook cleanOrphanVolumes,
   * when set, runs instead and keeps the candidates it returns for the next pass.
   */
  async cleanOrphanVolumes(): Promise<void> {
    if (this.volumesFailedReconstruction.length === 0) return;
    const { dsw, asw, executor, logger } = this.deps;
    const instead = this.hooks.cleanOrphanVolumes;
    if (instead !== undefined) {
      const kept = await instead({
        failed: this.volumesFailedReconstruction,
        dsw,
        asw,
        isOperationPending: (volumeName, podName) => executor.isOperationPending(volumeName, podName),
        cleanupMounts: (volume) => this.cleanupMounts(volume),
      });
      this.volumesFailedReconstruction = [...kept];
      return;
    }
    for (const volume of this.volumesFailedReconstruction) {
      if (dsw.volumeExistsWithSpecName(volume.podName, volume.volumeSpecName)) {
        logger.v(4).info('Volume exists in desired state, skip cleaning up mounts', { podName: volume.podName, volumeSpecName: volume.volumeSpecName });
        continue;
      }
      await this.cleanupMounts(volume);
    }
    this.volumesFailedReconstruction = [];
    logger.v(2).info('Orphan volume cleanup finished');
  }

  /**
   * cleanupMounts: starts the cleanup (UnmountVolume) of one candidate. Resolves to what starting
   * it threw (the executor refused it, or its unmounter could not be built), else undefined.
   */
  private async cleanupMounts(volume: PodVolume): Promise<unknown> {
    const { executor, asw, logger, metrics } = this.deps;
    logger.v(2).info('Reconciler sync states: could not find volume information in desired state, clean up the mount points', {
      podName: volume.podName,
      volumeSpecName: volume.volumeSpecName,
    });
    let failed = false;
    let error: unknown;
    try {
      // A fake name and no spec: the executor takes the filesystem unmount path.
      await executor.unmountVolume(
        {
          podName: volume.podName,
          podUID: volume.podName,
          volumeName: volume.volumeSpecName as UniqueVolumeName,
          innerVolumeSpecName: volume.volumeSpecName,
          outerVolumeSpecName: volume.volumeSpecName,
          pluginName: volume.pluginName,
          volumeSpec: undefined,
        },
        asw,
      );
    } catch (err) {
      failed = true;
      error = err;
      if (!isExpectedError(err)) {
        logger.error(err, 'Failed to unmount volume that could not be reconstructed', { podName: volume.podName, volumeSpecName: volume.volumeSpecName });
      }
    }
    metrics.forceCleanedFailedVolumeOperation(failed);
    return error;
  }
}
