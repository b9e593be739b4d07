/**
 * OperationGenerator (pkg/volume/util/operationexecutor/operation_generator.go):
 * builds one closure per operation. Where kubelet looks the plugin up and builds the (un)mounter
 * at generation (unmount, map, unmount device), a failure rejects before anything is scheduled;
 * GenerateMountVolumeFunc does all of it inside the operation, so its failures are backed off.
 * The closure calls the plugin and records the outcome in the actual state through a narrow
 * updater.
 */
import type { ClusterView } from '../ports/cluster.js';
import { errorMessage } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import type { UniquePodName, UniqueVolumeName } from '../layout/names.js';
import type { MounterArgs, VolumePluginMgr, VolumeUnmounter } from '../volume/plugins.js';
import { specName, type Spec } from '../volume/spec.js';
import { isOperationFinishedError, isUncertainProgressError, UncertainProgressError } from '../volume/util/errors.js';
import { getDeviceBindMountRefs, mapBlockVolume, removeMapPath, unmapBlockVolume } from '../volume/util/blockMapping.js';
import { checkNodeAffinity } from '../volume/util/nodeAffinity.js';
import type { VolumeHost } from '../volume/volumeHost.js';
import type { ActualStateOfWorldAttacherUpdater, ActualStateOfWorldMounterUpdater, AttachedVolume, MarkVolumeOpts, UnmountTarget } from './actualStateOfWorldUpdater.js';
import type { OperationGeneratorHooks } from './operationGeneratorHooks.js';

export type { UnmountTarget };
import type { VolumeToMount } from './volumeToMount.js';
import { hasMountRefs } from '../mount/mountRefs.js';
import type { GeneratedOperation } from './nestedPendingOperations.js';

/** kubelet's unknownVolumePlugin: the metric label when the plugin could not be found at generation. */
export const UNKNOWN_VOLUME_PLUGIN = 'UnknownVolumePlugin';

/** Operation names (storage_operation_duration_seconds operation_name). */
export const OP = {
  verifyControllerAttachedVolume: 'verify_controller_attached_volume',
  mount: 'volume_mount',
  unmount: 'volume_unmount',
  unmountDevice: 'unmount_device',
  map: 'map_volume',
  unmap: 'unmap_volume',
  unmapDevice: 'unmap_device',
} as const;

export interface Operation extends GeneratedOperation {
  /** storage_operation_duration_seconds volume_plugin label. */
  readonly pluginLabel: string;
}

export interface OperationGeneratorDeps {
  readonly plugins: VolumePluginMgr;
  readonly host: VolumeHost;
  readonly cluster: ClusterView;
  readonly logger: Logger;
  /** nodevol's hooks (operationGeneratorHooks.ts); absent: kubelet's decisions. */
  readonly hooks?: OperationGeneratorHooks;
}

export class OperationGenerator {
  private readonly hooks: OperationGeneratorHooks;

  constructor(private readonly deps: OperationGeneratorDeps) {
    this.hooks = deps.hooks ?? {};
  }

  /**
   * VerifyControllerAttachedVolume: a non-attachable volume is marked attached at once; an
   * attachable one only when node.status.volumesAttached lists it (the attach/detach controller
   * attached it), and only after it was reported in use.
   */
  generateVerifyControllerAttachedVolume(vtm: VolumeToMount, asw: ActualStateOfWorldAttacherUpdater): Operation {
    const { cluster } = this.deps;
    return {
      operationName: OP.verifyControllerAttachedVolume,
      pluginLabel: pluginLabel(vtm.pluginName, vtm.spec),
      run: async () => {
        if (!vtm.pluginIsAttachable) {
          asw.markVolumeAsAttached(vtm.volumeName, vtm.spec, vtm.pluginName, '', false);
          return;
        }
        if (!vtm.reportedInUse) {
          throw new Error(`volume ${vtm.volumeName} has not been added to the list of VolumesInUse in the node's volume status`);
        }
        const status = await cluster.getNodeStatus();
        const attached = status.volumesAttached.find((v) => v.name === vtm.volumeName);
        if (attached === undefined) throw new Error(`volume ${vtm.volumeName} not attached according to node status`);
        asw.markVolumeAsAttached(vtm.volumeName, vtm.spec, vtm.pluginName, attached.devicePath, true);
      },
    };
  }

  /**
   * MountVolume, filesystem, GenerateMountVolumeFunc: everything happens inside the
   * operation - plugin lookup, node affinity, NewMounter, the ReadWriteOncePod check - so that a
   * failure is retried with backoff; then MountDevice when the device is not globally mounted,
   * then SetUp.
   */
  generateMountVolume(vtm: VolumeToMount, devicePath: string, asw: ActualStateOfWorldMounterUpdater): Operation {
    const { plugins, logger } = this.deps;
    let pluginName = UNKNOWN_VOLUME_PLUGIN;
    try {
      pluginName = plugins.findPluginBySpec(vtm.spec).getPluginName();
    } catch {
      // Reported by the operation itself, which looks the plugin up again.
    }
    return {
      operationName: OP.mount,
      pluginLabel: pluginLabel(pluginName, vtm.spec),
      run: async () => {
        const plugin = wrap(vtm, 'MountVolume.FindPluginBySpec failed', () => plugins.findPluginBySpec(vtm.spec));
        const affinityErr = await this.checkNodeAffinity(vtm);
        if (affinityErr !== undefined) throw volumeError(vtm, 'MountVolume.NodeAffinity check failed', affinityErr);
        let mounter;
        try {
          mounter = await plugin.newMounter(vtm.spec, vtm.pod);
        } catch (err) {
          throw volumeError(vtm, 'MountVolume.NewMounter initialization failed', err);
        }
        const inUseElsewhere = isReadWriteOncePodInUseElsewhere(vtm, asw, this.hooks.volumeMountedElsewhere);
        if (inUseElsewhere === true || (inUseElsewhere !== false && (await inUseElsewhere))) throw volumeError(vtm, 'MountVolume.SetUp failed', new Error(RWOP_IN_USE));
        const deviceMountable = plugins.findDeviceMountablePluginBySpec(vtm.spec);
        const opts = markOpts(vtm, plugin.getPluginName());
        if (deviceMountable !== undefined && asw.getDeviceMountState(vtm.volumeName) !== 'DeviceGloballyMounted') {
          const deviceMounter = deviceMountable.newDeviceMounter();
          const deviceMountPath = deviceMounter.getDeviceMountPath(vtm.spec);
          const args = this.argsFor('device', vtm, asw, mounterArgs(vtm));
          try {
            await deviceMounter.mountDevice(vtm.spec, devicePath, deviceMountPath, args);
          } catch (err) {
            markDeviceErrorState(asw, vtm, devicePath, deviceMountPath, err, logger, this.hooks.deviceStaysUncertain);
            throw err;
          }
          asw.markDeviceAsMounted(vtm.volumeName, devicePath, deviceMountPath, vtm.seLinuxMountContext);
        }
        const args = this.argsFor('volume', vtm, asw, mounterArgs(vtm));
        try {
          await mounter.setUp(args);
        } catch (err) {
          markVolumeErrorState(asw, opts, err, logger, this.hooks.volumeMountStaysUncertain);
          throw err;
        }
        asw.markVolumeAsMounted({ ...opts, volumeMountState: 'VolumeMounted' });
      },
    };
  }

  /** The args of MountDevice / SetUpDevice (`device`) or SetUp (`volume`): kubelet's `args`, or the mounterArgs hook's. */
  private argsFor(step: 'device' | 'volume', vtm: VolumeToMount, asw: ActualStateOfWorldMounterUpdater, args: MounterArgs): MounterArgs {
    return this.hooks.mounterArgs === undefined ? args : this.hooks.mounterArgs(step, vtm, asw, args);
  }

  /** checkNodeAffinity: only a PV with node affinity needs the node's labels. */
  private async checkNodeAffinity(vtm: VolumeToMount): Promise<Error | undefined> {
    if (vtm.spec.kind !== 'persistent' || vtm.spec.persistentVolume.nodeAffinity === undefined) return undefined;
    let labels: Readonly<Record<string, string>>;
    try {
      labels = (await this.deps.cluster.getNodeStatus()).labels ?? {};
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
    return checkNodeAffinity(vtm.spec.persistentVolume, labels);
  }

  /** MapVolume, raw block (GenerateMapVolumeFunc): SetUpDevice (NodeStage), MapPodDevice (NodePublish), link. */
  async generateMapVolume(vtm: VolumeToMount, devicePath: string, asw: ActualStateOfWorldMounterUpdater): Promise<Operation> {
    const { plugins, host } = this.deps;
    const plugin = plugins.findMapperPluginBySpec(vtm.spec);
    if (plugin === undefined) throw new Error(`MapVolume.FindMapperPluginBySpec failed for ${vtm.volumeName}`);
    // Unlike MountVolume, kubelet checks node affinity and builds the mapper at generation.
    const affinityErr = await this.checkNodeAffinity(vtm);
    if (affinityErr !== undefined) throw volumeError(vtm, 'MapVolume.NodeAffinity check failed', affinityErr);
    const mapper = await plugin.newBlockVolumeMapper(vtm.spec, vtm.pod);
    const opts = markOpts(vtm, plugin.getPluginName());
    const globalMapPath = mapper.getGlobalMapPath(vtm.spec);
    const logger = this.deps.logger;
    return {
      operationName: OP.map,
      pluginLabel: pluginLabel(plugin.getPluginName(), vtm.spec),
      run: async () => {
        const inUseElsewhere = isReadWriteOncePodInUseElsewhere(vtm, asw, this.hooks.volumeMountedElsewhere);
        if (inUseElsewhere === true || (inUseElsewhere !== false && (await inUseElsewhere))) throw volumeError(vtm, 'MapVolume.SetUpDevice failed', new Error(RWOP_IN_USE));
        if (asw.getDeviceMountState(vtm.volumeName) !== 'DeviceGloballyMounted') {
          const args = this.argsFor('device', vtm, asw, {});
          try {
            await mapper.setUpDevice(args);
          } catch (err) {
            markDeviceErrorState(asw, vtm, devicePath, globalMapPath, err, logger, this.hooks.deviceStaysUncertain);
            throw err;
          }
          asw.markDeviceAsMounted(vtm.volumeName, devicePath, globalMapPath, '');
        }
        let publishPath: string;
        try {
          publishPath = await mapper.mapPodDevice();
        } catch (err) {
          markVolumeErrorState(asw, opts, err, logger, this.hooks.volumeMountStaysUncertain);
          throw err;
        }
        // From here the device is published for the pod: kubelet's deferred markVolumeErrorState
        // with an UncertainProgressError of the error's text makes a not-mounted pod mount
        // uncertain on any later error, so that it is unmapped (NodeUnpublishVolume) when the pod
        // goes; the error returned is the original one.
        try {
          await mapBlockVolume(host, publishPath, globalMapPath, mapper.getPodDeviceMapPath(), vtm.pod.uid);
        } catch (err) {
          markVolumeErrorState(asw, opts, new UncertainProgressError(errorMessage(err)), logger, this.hooks.volumeMountStaysUncertain);
          throw err;
        }
        asw.markVolumeAsMounted({ ...opts, volumeMountState: 'VolumeMounted' });
      },
    };
  }

  /**
   * UnmountVolume (GenerateUnmountVolumeFunc). Generation builds the unmounter from the pod-local file: when that
   * cannot be read (and the KEP-6058 fallback is off or fails), this rejects and no operation runs.
   */
  async generateUnmountVolume(mv: UnmountTarget, asw: ActualStateOfWorldMounterUpdater): Promise<Operation> {
    const plugin = this.deps.plugins.findPluginByName(mv.pluginName);
    const logger = this.deps.logger;
    let unmounter: VolumeUnmounter;
    try {
      unmounter = await plugin.newUnmounter(mv.innerVolumeSpecName, mv.podUID);
    } catch (err) {
      const fallback = this.hooks.unmounterAfterNewUnmounterError?.(plugin, mv, err);
      if (fallback === undefined) throw err;
      unmounter = fallback;
    }
    return {
      operationName: OP.unmount,
      pluginLabel: pluginLabel(mv.pluginName, mv.volumeSpec),
      run: async () => {
        try {
          await unmounter.tearDown();
        } catch (err) {
          // Attempted even without a spec, as kubelet does; for the cleanup of a volume that
          // failed reconstruction the volume is not in the actual state and this only logs.
          try {
            asw.markVolumeMountAsUncertain({ ...unmountOpts(mv), volumeMountState: 'VolumeMountUncertain' });
          } catch (markErr) {
            logger.error(markErr, 'UnmountVolume.MarkVolumeMountAsUncertain failed', unmountLogValues(mv));
          }
          throw err;
        }
        logger.info('UnmountVolume.TearDown succeeded', { ...unmountLogValues(mv), podUID: mv.podUID, innerVolumeSpecName: mv.innerVolumeSpecName, pluginName: mv.pluginName });
        try {
          asw.markVolumeAsUnmounted(mv.podName, mv.volumeName);
        } catch (markErr) {
          logger.error(markErr, 'UnmountVolume.MarkVolumeAsUnmounted failed', unmountLogValues(mv));
        }
      },
    };
  }

  /** UnmapVolume (raw block): remove the pod's link and bind mount, then NodeUnpublish. */
  async generateUnmapVolume(mv: UnmountTarget, asw: ActualStateOfWorldMounterUpdater): Promise<Operation> {
    const { plugins, host } = this.deps;
    const plugin = plugins.findMapperPluginByName(mv.pluginName);
    if (plugin === undefined) throw new Error(`UnmapVolume.FindMapperPluginByName failed for ${mv.pluginName}`);
    const unmapper = await plugin.newBlockVolumeUnmapper(mv.innerVolumeSpecName, mv.podUID);
    const spec = mv.volumeSpec;
    return {
      operationName: OP.unmap,
      pluginLabel: pluginLabel(mv.pluginName, spec),
      run: async () => {
        try {
          await unmapBlockVolume(host, host.layout.csiGlobalMapPath(mv.innerVolumeSpecName), host.layout.csiPodDeviceMapPath(mv.podUID, mv.innerVolumeSpecName), mv.podUID);
          await unmapper.unmapPodDevice();
        } catch (err) {
          if (spec !== undefined) asw.markVolumeMountAsUncertain({ ...unmountOpts(mv), volumeMountState: 'VolumeMountUncertain' });
          throw err;
        }
        try {
          asw.markVolumeAsUnmounted(mv.podName, mv.volumeName);
        } catch (markErr) {
          this.deps.logger.error(markErr, 'UnmapVolume.MarkVolumeAsUnmounted failed', unmountLogValues(mv));
        }
      },
    };
  }

  /**
   * UnmountDevice (GenerateUnmountDeviceFunc): recompute the device mount path from the spec, refuse while pods still
   * reference it, then the plugin's UnmountDevice (NodeUnstage + removeMountDir).
   */
  generateUnmountDevice(av: AttachedVolume, asw: ActualStateOfWorldMounterUpdater): Operation {
    const plugin = this.deps.plugins.findDeviceMountablePluginByName(av.pluginName);
    if (plugin === undefined) throw new Error(`UnmountDevice.FindDeviceMountablePluginByName failed for ${av.pluginName}`);
    const deviceUnmounter = plugin.newDeviceUnmounter();
    const logger = this.deps.logger;
    return {
      operationName: OP.unmountDevice,
      pluginLabel: pluginLabel(av.pluginName, av.volumeSpec),
      run: async () => {
        let deviceMountPath: string;
        try {
          deviceMountPath = plugin.getDeviceMountPath(av.volumeSpec);
        } catch (err) {
          if (!(err instanceof Error && err.message.includes('does not exist'))) throw err;
          logger.warning('GetDeviceMountPath failed, using the path from the actual state', { volumeName: av.volumeName, err: err.message });
          deviceMountPath = av.deviceMountPath;
        }
        const refs = await plugin.getDeviceMountRefs(deviceMountPath);
        if (hasMountRefs(deviceMountPath, refs)) {
          throw new Error(`the device mount path ${JSON.stringify(deviceMountPath)} is still mounted by other references ${JSON.stringify(refs)}`);
        }
        try {
          await deviceUnmounter.unmountDevice(deviceMountPath);
        } catch (err) {
          asw.markDeviceAsUncertain(av.volumeName, av.devicePath, deviceMountPath, av.seLinuxMountContext ?? '');
          throw err;
        }
        logger.info('UnmountDevice succeeded', { volumeName: av.volumeName, deviceMountPath });
        asw.markDeviceAsUnmounted(av.volumeName);
      },
    };
  }

  /**
   * UnmapDevice, raw block (GenerateUnmapDeviceFunc), in kubelet's order: the global map path is
   * the actual state's device mount path; refused, with no state change and no call, while
   * GetDeviceBindMountRefs finds a pod's bind mount of the device there; the device marked
   * uncertain; TearDownDevice (NodeUnstageVolume, the block file cleanup); RemoveMapPath; then
   * not mounted. kubelet's isDeviceOpened check applies to a device path, which a CSI volume has
   * none of (kubelet skips it too).
   */
  async generateUnmapDevice(av: AttachedVolume, asw: ActualStateOfWorldMounterUpdater): Promise<Operation> {
    const { host } = this.deps;
    const plugin = this.deps.plugins.findMapperPluginByName(av.pluginName);
    if (plugin === undefined) throw new Error(`UnmapDevice.FindMapperPluginByName failed for ${av.pluginName}`);
    const name = specName(av.volumeSpec);
    const unmapper = await plugin.newBlockVolumeUnmapper(name, '');
    return {
      operationName: OP.unmapDevice,
      pluginLabel: pluginLabel(av.pluginName, av.volumeSpec),
      run: async () => {
        // kubelet reads the path from the actual state only; nodevol falls back to the spec's
        // when the state has none (a robustness step: every path that marks a block device sets it).
        const globalMapPath = av.deviceMountPath !== '' ? av.deviceMountPath : plugin.getGlobalMapPath(av.volumeSpec);
        let refs: string[];
        try {
          refs = await getDeviceBindMountRefs(host, globalMapPath);
        } catch (err) {
          throw new Error(`UnmapDevice.GetDeviceBindMountRefs check failed for volume ${JSON.stringify(av.volumeName)}: ${errorMessage(err)}`);
        }
        if (refs.length > 0) {
          throw new Error(`UnmapDevice failed for volume ${JSON.stringify(av.volumeName)}: the device ${JSON.stringify(globalMapPath)} is still referenced from other Pods [${refs.join(' ')}]`);
        }
        // Before the teardown, so that any failure below leaves the device uncertain.
        asw.markDeviceAsUncertain(av.volumeName, av.devicePath, globalMapPath, '');
        await unmapper.tearDownDevice(globalMapPath, av.devicePath);
        try {
          await removeMapPath(host, globalMapPath);
        } catch (err) {
          throw new Error(`UnmapDevice.RemoveMapPath failed for volume ${JSON.stringify(av.volumeName)}: ${errorMessage(err)}`);
        }
        asw.markDeviceAsUnmounted(av.volumeName);
      },
    };
  }
}

/**
 * markDeviceErrorState: a final error on an uncertain device marks it not mounted, unless it was
 * found during reconstruction (or the deviceStaysUncertain hook, `staysUncertain`, says it stays);
 * an uncertain error on a not-mounted device marks it uncertain.
 */
export function markDeviceErrorState(
  asw: ActualStateOfWorldMounterUpdater,
  vtm: VolumeToMount,
  devicePath: string,
  deviceMountPath: string,
  err: unknown,
  logger?: Logger,
  staysUncertain: (asw: ActualStateOfWorldMounterUpdater, volumeName: UniqueVolumeName) => boolean = isVolumeDeviceReconstructed,
): void {
  const state = asw.getDeviceMountState(vtm.volumeName);
  if (isOperationFinishedError(err) && state === 'DeviceMountUncertain') {
    if (staysUncertain(asw, vtm.volumeName)) {
      logger?.v(2).info('MountVolume.markDeviceErrorState leaving volume uncertain', { volumeName: vtm.volumeName });
      return;
    }
    asw.markDeviceAsUnmounted(vtm.volumeName);
    return;
  }
  if (isUncertainProgressError(err) && state === 'DeviceNotMounted') {
    asw.markDeviceAsUncertain(vtm.volumeName, devicePath, deviceMountPath, vtm.seLinuxMountContext);
  }
}

/**
 * markVolumeErrorState: the same rules for one pod's mount; a reconstructed pod mount stays
 * uncertain after a final error (kubernetes#96635), as does one the volumeMountStaysUncertain hook
 * (`staysUncertain`) says stays.
 */
export function markVolumeErrorState(
  asw: ActualStateOfWorldMounterUpdater,
  opts: MarkVolumeOpts,
  err: unknown,
  logger?: Logger,
  staysUncertain: (asw: ActualStateOfWorldMounterUpdater, volumeName: UniqueVolumeName, podName: UniquePodName) => boolean = isVolumeReconstructed,
): void {
  const state = asw.getVolumeMountState(opts.volumeName, opts.podName);
  if (isOperationFinishedError(err) && state === 'VolumeMountUncertain') {
    if (staysUncertain(asw, opts.volumeName, opts.podName)) {
      logger?.v(3).info('MountVolume.markVolumeErrorState leaving volume uncertain', { volumeName: opts.volumeName });
      return;
    }
    try {
      asw.markVolumeAsUnmounted(opts.podName, opts.volumeName);
    } catch (markErr) {
      logger?.error(markErr, 'MountVolume.MarkVolumeAsUnmounted failed', { volumeName: opts.volumeName, podName: opts.podName });
    }
    return;
  }
  if (isUncertainProgressError(err) && state === 'VolumeNotMounted') {
    asw.markVolumeMountAsUncertain({ ...opts, volumeMountState: 'VolumeMountUncertain' });
  }
}

/** Kubelet's test: IsVolumeDeviceReconstructed. */
function isVolumeDeviceReconstructed(asw: ActualStateOfWorldMounterUpdater, volumeName: UniqueVolumeName): boolean {
  return asw.isVolumeDeviceReconstructed(volumeName);
}

/** Kubelet's test: IsVolumeReconstructed. */
function isVolumeReconstructed(asw: ActualStateOfWorldMounterUpdater, volumeName: UniqueVolumeName, podName: UniquePodName): boolean {
  return asw.isVolumeReconstructed(volumeName, podName);
}

const RWOP_IN_USE = 'volume uses the ReadWriteOncePod access mode and is already in use by another pod';

/**
 * The ReadWriteOncePod check of GenerateMountVolumeFunc / GenerateMapVolumeFunc: refused when the
 * PV's only access mode is ReadWriteOncePod and another pod has it (possibly) mounted - kubelet
 * asks the actual state (IsVolumeMountedElsewhere); the hook volumeMountedElsewhere, when set,
 * answers instead (a promise only when its answer needs the file system: the caller awaits only
 * then, so a boolean answer costs no turn).
 */
function isReadWriteOncePodInUseElsewhere(vtm: VolumeToMount, asw: ActualStateOfWorldMounterUpdater, mountedElsewhere: OperationGeneratorHooks['volumeMountedElsewhere']): boolean | Promise<boolean> {
  if (vtm.spec.kind !== 'persistent') return false;
  const modes = vtm.spec.persistentVolume.accessModes ?? [];
  if (modes.length !== 1 || modes[0] !== 'ReadWriteOncePod') return false;
  return mountedElsewhere === undefined ? asw.isVolumeMountedElsewhere(vtm.volumeName, vtm.podName) : mountedElsewhere(vtm, asw);
}

/** volumeToMount.GenerateErrorDetailed: "<prefix> for volume ... pod ...: <err>". */
function volumeError(vtm: VolumeToMount, prefix: string, err: unknown): Error {
  const detail = err instanceof Error ? err.message : String(err);
  return new Error(
    `${prefix} for volume ${JSON.stringify(vtm.outerVolumeSpecName)} (UniqueName: ${JSON.stringify(vtm.volumeName)}) pod ${JSON.stringify(vtm.pod.name)} (UID: ${JSON.stringify(vtm.pod.uid)}) : ${detail}`,
  );
}

function wrap<T>(vtm: VolumeToMount, prefix: string, f: () => T): T {
  try {
    return f();
  } catch (err) {
    throw volumeError(vtm, prefix, err);
  }
}

function markOpts(vtm: VolumeToMount, pluginName: string): MarkVolumeOpts {
  return {
    podName: vtm.podName,
    podUID: vtm.pod.uid,
    volumeName: vtm.volumeName,
    volumeSpec: vtm.spec,
    outerVolumeSpecName: vtm.outerVolumeSpecName,
    innerVolumeSpecName: specName(vtm.spec),
    pluginName,
    volumeMountState: 'VolumeMounted',
    seLinuxMountContext: vtm.seLinuxMountContext,
  };
}

function unmountLogValues(mv: UnmountTarget): Record<string, string> {
  return { volumeName: mv.volumeName, podName: mv.podName };
}

function unmountOpts(mv: UnmountTarget): MarkVolumeOpts {
  return {
    podName: mv.podName,
    podUID: mv.podUID,
    volumeName: mv.volumeName,
    volumeSpec: mv.volumeSpec,
    outerVolumeSpecName: mv.outerVolumeSpecName,
    innerVolumeSpecName: mv.innerVolumeSpecName,
    pluginName: mv.pluginName,
    volumeMountState: 'VolumeMountUncertain',
    seLinuxMountContext: '',
  };
}

function mounterArgs(vtm: VolumeToMount): { fsGroup?: number; seLinuxLabel: string } {
  return vtm.pod.fsGroup === undefined ? { seLinuxLabel: vtm.seLinuxMountContext } : { fsGroup: vtm.pod.fsGroup, seLinuxLabel: vtm.seLinuxMountContext };
}

/** GetFullQualifiedPluginNameForVolume: kubernetes.io/csi:<driver> for a CSI volume. */
export function pluginLabel(pluginName: string, spec: Spec | undefined): string {
  if (spec === undefined) return pluginName;
  const driver = spec.kind === 'persistent' ? spec.persistentVolume.csi?.driver : spec.volume.csi?.driver;
  return driver === undefined ? pluginName : `${pluginName}:${driver}`;
}
