/**
 * One composition of a node: the ports a node talks to the world through, assembled into the
 * volume host, the volume manager, kubelet's housekeeping (the orphaned pod dir sweep), the stuck
 * operation tracker and the runtime's loops. `nodevol agent`, the simulator and the in-memory test
 * node all build their node here, so that what the simulator explores is what the agent runs:
 * the same wiring, the same idle skipping, the same wake-ups. The read-only tools (`nodevol audit`,
 * `nodevol recover`) build their volume host here too, from the same ports minus the ones they
 * must never use.
 *
 * Nothing here touches the world: every effect goes through the ports it is given.
 */
import type { Clock } from '../ports/clock.js';
import { unreachableCluster, type ClusterView } from '../ports/cluster.js';
import { noCsiDrivers, type CsiDriverRegistry } from '../ports/csi.js';
import type { FileSystem } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import type { OrphanPodMetrics, StuckOperationMetrics, VolumeManagerMetrics } from '../ports/metrics.js';
import type { Mounter, MountTable } from '../ports/mounter.js';
import type { FeatureGate } from '../features/features.js';
import { instrumentedRegistry } from '../csi/instrumented.js';
import { HOUSEKEEPING_PERIOD_MS, orphanedPodDirsCleanerFor, type OrphanedPodDirsCleaner } from '../kubelet/orphanedPodDirs.js';
import type { KubeletLayout } from '../layout/layout.js';
import type { UniqueVolumeName } from '../layout/names.js';
import { ReadOnlyMounter } from '../mount/readOnlyMounter.js';
import { podVolumeDirsNaming, StuckOperationTracker } from '../kubelet/stuckOperations.js';
import { composeNodevolPolicy } from '../nodevol/composePolicy.js';
import type { CsiHooks } from '../volume/csi/csiHooks.js';
import type { VolumePluginMgr } from '../volume/plugins.js';
import { specName } from '../volume/spec.js';
import type { VolumeHost } from '../volume/volumeHost.js';
import { NODE_STATUS_UPDATE_PERIOD_MS, VolumeManager } from '../volumemanager/volumeManager.js';
import { AgentRuntime, type LoopScheduler } from './runtime.js';

/** How long a stop waits for in-flight work when not told (the agent's --shutdown-grace-period default, 30s). */
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000;

/** Where a node lives and what it is: the parts of its host that are not ports. */
export interface NodeIdentity {
  readonly layout: KubeletLayout;
  /** The root dir with every symlink resolved (see VolumeHost.realRootDir). */
  readonly realRootDir: string;
  readonly nodeName: string;
  readonly features: FeatureGate;
}

/** Every port a running node talks to the world through. */
export interface NodePorts extends NodeIdentity {
  readonly fs: FileSystem;
  readonly mounter: Mounter;
  /** The drivers as registered; the node instruments them (csi_operations_seconds). */
  readonly csiDrivers: CsiDriverRegistry;
  readonly cluster: ClusterView;
  readonly clock: Clock;
  readonly logger: Logger;
}

export interface NodeMetrics {
  readonly volumeManager: VolumeManagerMetrics;
  /** volume_manager_stuck_operations. */
  readonly stuckOperations?: StuckOperationMetrics;
  /** kubelet_orphan_pod_cleaned_volumes{,_errors}. */
  readonly orphanPods?: OrphanPodMetrics;
}

export interface NodeOptions {
  readonly metrics: NodeMetrics;
  /** How often volumesInUse is written (--node-status-update-frequency). */
  readonly nodeStatusUpdatePeriodMs?: number;
  /** How long a stop waits for in-flight work (--shutdown-grace-period). */
  readonly shutdownGraceMs?: number;
  /** The loops' timers; default the real ones. */
  readonly scheduler?: LoopScheduler;
  /** The stall check's and idle wake-ups' monotonic clock; default the node's Clock port (nowMs). */
  readonly now?: () => number;
  /** Compact the heap once idle (a real process only). */
  readonly compactWhenIdle?: boolean;
  /** Write <root-dir>/nodevol/stuck-operations.json through the node's fs (default true). */
  readonly stuckOperationsFile?: boolean;
  /**
   * Plugins to register instead of the CSI plugin on the node's host (tests). A CSI plugin built
   * here gets `csiHooks` (the node's gates) and this `host`: the hooks act through the host they
   * are given, which must be the node's.
   */
  readonly plugins?: (host: VolumeHost, csiHooks: CsiHooks) => VolumePluginMgr;
  /**
   * Wraps the instrumented CSI registry (the agent's --trace observes every call). Applied after
   * the instrumentation, so that what is observed is what the engine sends.
   */
  readonly observeCsi?: (registry: CsiDriverRegistry) => CsiDriverRegistry;
}

/** A composed node: everything the runtime drives, and the runtime. */
export interface ComposedNode {
  readonly host: VolumeHost;
  readonly vm: VolumeManager;
  readonly orphans: OrphanedPodDirsCleaner;
  readonly stuck: StuckOperationTracker;
  readonly runtime: AgentRuntime;
  /** One pass of kubelet's housekeeping, as the runtime's housekeeping loop runs it. */
  housekeeping(): Promise<void>;
  /**
   * Starts the node: clears the stuck operations a previous life left, then reconstructs and
   * starts the loops (AgentRuntime.start).
   */
  start(): Promise<void>;
}

/** The volume host of a node: its identity and ports, the CSI registry as given. */
export function volumeHostOf(ports: NodePorts): VolumeHost {
  return {
    layout: ports.layout,
    realRootDir: ports.realRootDir,
    nodeName: ports.nodeName,
    features: ports.features,
    fs: ports.fs,
    mounter: ports.mounter,
    csiDrivers: ports.csiDrivers,
    cluster: ports.cluster,
    clock: ports.clock,
    logger: ports.logger,
  };
}

/**
 * The volume host of a read-only tool (`nodevol audit`, `nodevol recover`): no driver, no API
 * server, and a mounter that refuses to mount and reads the mount table through `loadMountTable`.
 */
export function readOnlyVolumeHost(identity: NodeIdentity, ports: { readonly fs: FileSystem; readonly clock: Clock; readonly logger: Logger; readonly loadMountTable: () => Promise<MountTable> }): VolumeHost {
  return volumeHostOf({
    ...identity,
    fs: ports.fs,
    clock: ports.clock,
    logger: ports.logger,
    mounter: new ReadOnlyMounter(ports.fs, ports.loadMountTable),
    csiDrivers: noCsiDrivers,
    cluster: unreachableCluster,
  });
}

/**
 * Assembles a node from its ports. Nothing runs until `start()` (or, for a test that drives the
 * loops by hand, `vm.start()` and the loop bodies).
 */
export function composeNode(ports: NodePorts, options: NodeOptions): ComposedNode {
  const instrumented = instrumentedRegistry(ports.csiDrivers, options.metrics.volumeManager, ports.clock);
  const host = volumeHostOf({ ...ports, csiDrivers: options.observeCsi === undefined ? instrumented : options.observeCsi(instrumented) });
  // nodevol's gates, composed once per life: the hooks the kubelet copy calls (ARCHITECTURE.md).
  const policy = composeNodevolPolicy(ports.features, host);
  const vm = new VolumeManager({
    host,
    metrics: options.metrics.volumeManager,
    hooks: policy.hooks,
    ...(options.plugins === undefined ? {} : { plugins: options.plugins(host, policy.hooks.csi) }),
  });
  // Stuck is visible: a teardown refused for over a minute is warned about once, counted in
  // volume_manager_stuck_operations and listed in <root-dir>/nodevol/stuck-operations.json for nodevol audit.
  const stuck = new StuckOperationTracker({
    clock: ports.clock,
    logger: ports.logger,
    ...(options.metrics.stuckOperations === undefined ? {} : { metrics: options.metrics.stuckOperations }),
    ...(options.stuckOperationsFile === false ? {} : { statusFile: { fs: ports.fs, realRootDir: ports.realRootDir } }),
    rootDir: ports.realRootDir,
    findTargets: (volumeName) => {
      const attached = vm.asw.getAttachedVolume(volumeName as UniqueVolumeName);
      const name = attached !== undefined ? specName(attached.volumeSpec) : vm.asw.getAllMountedVolumes().find((m) => m.volumeName === volumeName)?.innerVolumeSpecName;
      return name === undefined ? Promise.resolve([]) : podVolumeDirsNaming(ports.fs, ports.layout, name);
    },
  });
  vm.executor.onOperationComplete((e) => stuck.observe(e));
  const orphans = orphanedPodDirsCleanerFor(vm, {
    fs: ports.fs,
    layout: ports.layout,
    realRootDir: ports.realRootDir,
    mounter: ports.mounter,
    cluster: ports.cluster,
    logger: ports.logger,
    ...(options.metrics.orphanPods === undefined ? {} : { metrics: options.metrics.orphanPods }),
  });
  const housekeeping = async (): Promise<void> => {
    await orphans.cleanupOrphanedPodDirs();
    // nodevol's gates' periodic work, after kubelet's (resolves at once when there is none).
    await policy.housekeeping();
  };
  const { onChange, signalsEveryChange } = ports.cluster;
  const runtime = new AgentRuntime(vm, ports.logger, {
    nodeStatusUpdatePeriodMs: options.nodeStatusUpdatePeriodMs ?? NODE_STATUS_UPDATE_PERIOD_MS,
    shutdownGraceMs: options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS,
    housekeeping: { periodMs: HOUSEKEEPING_PERIOD_MS, run: housekeeping },
    ...(onChange === undefined || signalsEveryChange === undefined
      ? {}
      : { clusterChanges: { subscribe: (listener: () => void) => onChange.call(ports.cluster, listener), signalsEveryChange: () => signalsEveryChange.call(ports.cluster) } }),
    ...(options.scheduler === undefined ? {} : { scheduler: options.scheduler }),
    // The loops' stall check and idle wake-ups read the node's monotonic clock unless told otherwise.
    now: options.now ?? (() => ports.clock.nowMs()),
    ...(options.compactWhenIdle === undefined ? {} : { compactWhenIdle: options.compactWhenIdle }),
  });
  return {
    host,
    vm,
    orphans,
    stuck,
    runtime,
    housekeeping,
    start: async () => {
      await stuck.start();
      await runtime.start();
    },
  };
}
