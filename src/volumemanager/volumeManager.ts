/**
 * The volume manager (pkg/kubelet/volumemanager/volume_manager.go): wires the caches, the
 * populator, the operation executor and the reconciler, and computes volumesInUse.
 *
 * Who writes what: the populator writes the DSW; operations (through narrow updaters) and
 * reconstruction write the ASW; the reconciler only reads both and starts operations. The
 * runtime (agent or simulator) drives populateOnce / reconcileOnce / syncNodeStatus on its own
 * schedule; nothing here owns a timer.
 */
import type { VolumeManagerMetrics } from '../ports/metrics.js';
import { createNestedPendingOperations, type NestedPendingOperations } from '../operationexecutor/nestedPendingOperations.js';
import { OperationExecutor } from '../operationexecutor/operationExecutor.js';
import { OperationGenerator, pluginLabel } from '../operationexecutor/operationGenerator.js';
import type { OperationGeneratorHooks } from '../operationexecutor/operationGeneratorHooks.js';
import { upstreamCsiHooks, type CsiHooks } from '../volume/csi/csiHooks.js';
import { CsiPlugin } from '../volume/csi/csiPlugin.js';
import { VolumePluginMgr } from '../volume/plugins.js';
import type { VolumeHost } from '../volume/volumeHost.js';
import { createActualStateOfWorld, type ActualStateOfWorld } from './cache/actualStateOfWorld.js';
import { createDesiredStateOfWorld, type DesiredStateOfWorld } from './cache/desiredStateOfWorld.js';
import { createDesiredStateOfWorldPopulator, type DesiredStateOfWorldPopulator } from './populator/desiredStateOfWorldPopulator.js';
import { Reconstructor } from './reconciler/reconstruct.js';
import { upstreamReconstructHooks, type ReconstructHooks } from './reconciler/reconstructHooks.js';
import { createReconciler, type Reconciler } from './reconciler/reconciler.js';

/** kubelet's loop periods (volume_manager.go: reconciler and populator, 100 ms each). */
export const RECONCILER_LOOP_PERIOD_MS = 100;
export const DSW_POPULATOR_LOOP_PERIOD_MS = 100;
/** kubelet's node status update frequency default. */
export const NODE_STATUS_UPDATE_PERIOD_MS = 10_000;

/**
 * nodevol's hooks into the kubelet copy, one set per part (see ARCHITECTURE.md, "The kubelet copy
 * and nodevol's gates"): composed by composeNode from the feature gates.
 */
export interface VolumeManagerHooks {
  readonly csi: CsiHooks;
  readonly operationGenerator: OperationGeneratorHooks;
  readonly reconstruct: ReconstructHooks;
}

/** Kubelet's volume manager: no hook set. */
export const upstreamVolumeManagerHooks: VolumeManagerHooks = {
  csi: upstreamCsiHooks,
  operationGenerator: {},
  reconstruct: upstreamReconstructHooks,
};

export interface VolumeManagerDeps {
  readonly host: VolumeHost;
  readonly metrics: VolumeManagerMetrics;
  /** Plugins to register; default the CSI plugin on `host` with `hooks.csi`. */
  readonly plugins?: VolumePluginMgr;
  /** Default: kubelet's ({@link upstreamVolumeManagerHooks}). */
  readonly hooks?: VolumeManagerHooks;
}

export class VolumeManager {
  readonly asw: ActualStateOfWorld;
  readonly dsw: DesiredStateOfWorld;
  readonly plugins: VolumePluginMgr;
  readonly populator: DesiredStateOfWorldPopulator;
  readonly reconstructor: Reconstructor;
  readonly reconciler: Reconciler;
  readonly executor: OperationExecutor;
  private readonly pending: NestedPendingOperations;
  /** The ASW and DSW generations volume_manager_total_volumes was last computed at. */
  private totalsComputedAt = '';

  constructor(private readonly deps: VolumeManagerDeps) {
    const { host, metrics } = deps;
    const hooks = deps.hooks ?? upstreamVolumeManagerHooks;
    this.plugins = deps.plugins ?? new VolumePluginMgr([new CsiPlugin(host, hooks.csi)]);
    this.asw = createActualStateOfWorld();
    this.dsw = createDesiredStateOfWorld();
    this.pending = createNestedPendingOperations(host.clock, host.logger);
    const generator = new OperationGenerator({ plugins: this.plugins, host, cluster: host.cluster, logger: host.logger, hooks: hooks.operationGenerator });
    this.executor = new OperationExecutor(generator, this.pending, host.clock, metrics);
    this.populator = createDesiredStateOfWorldPopulator({
      cluster: host.cluster,
      dsw: this.dsw,
      asw: this.asw,
      plugins: this.plugins,
      logger: host.logger,
      clock: host.clock,
    });
    this.reconstructor = new Reconstructor({
      fs: host.fs,
      layout: host.layout,
      realRootDir: host.realRootDir,
      plugins: this.plugins,
      asw: this.asw,
      dsw: this.dsw,
      executor: this.executor,
      cluster: host.cluster,
      features: host.features,
      logger: host.logger,
      metrics,
      hooks: hooks.reconstruct,
    });
    this.reconciler = createReconciler({
      asw: this.asw,
      dsw: this.dsw,
      executor: this.executor,
      reconstructor: this.reconstructor,
      populatorHasAddedPods: () => this.populator.hasAddedPods(),
      logger: host.logger,
    });
  }

  /** Reconstruction: run once at start, before the first reconcile. */
  start(): Promise<void> {
    return this.reconciler.reconstruct();
  }

  /** The reconciler skips passes that could start nothing (the agent; see Reconciler.skipIdlePasses). */
  skipIdlePasses(): void {
    this.reconciler.skipIdlePasses(this.deps.host.clock);
  }

  /** Whether the last populator pass had nothing to do (see DesiredStateOfWorldPopulator.idle). */
  populatorIdle(): boolean {
    return this.populator.idle();
  }

  /** See Reconciler.idleForMs. */
  reconcilerIdleForMs(): number | undefined {
    return this.reconciler.idleForMs();
  }

  /** Calls `listener` as each operation settles, after its state changes were recorded. */
  onOperationComplete(listener: () => void): void {
    this.executor.onOperationComplete(() => listener());
  }

  /** Changes whenever the actual or desired state changed (the agent's idle detection). */
  activity(): string {
    return `${this.asw.generation()}/${this.dsw.generation()}`;
  }

  populateOnce(): Promise<void> {
    return this.populator.populateOnce();
  }

  async reconcileOnce(): Promise<void> {
    await this.reconciler.reconcileOnce();
    this.updateTotalVolumes();
  }

  /** Resolves when no operation is running. */
  waitForOperations(): Promise<void> {
    return this.executor.waitForPending();
  }

  /**
   * GetVolumesInUse: attachable volumes the DSW wants plus attachable volumes the ASW has,
   * sorted and de-duplicated. A reconstructed volume counts once its attachability resolved true.
   */
  getVolumesInUse(): string[] {
    const names = new Set<string>();
    for (const v of this.dsw.getVolumesToMount()) if (v.pluginIsAttachable) names.add(v.volumeName);
    for (const v of this.asw.getAttachedVolumes()) if (v.pluginIsAttachable) names.add(v.volumeName);
    return [...names].sort();
  }

  /**
   * The node status update's volumesInUse part: written only once the states have synced
   * (before that the previous list on the Node stays), then marked reported in the DSW. Before
   * the states sync, the volumes the Node already lists are marked reported all the same
   * (kubelet's tryUpdateNodeStatus marks whatever the updated Node carries), so an attachable
   * mount need not wait for the sync. Resolves to the list written, or undefined when nothing was.
   */
  async syncNodeStatus(): Promise<string[] | undefined> {
    if (!this.reconciler.statesHaveBeenSynced()) {
      try {
        this.dsw.markVolumesReportedInUse((await this.deps.host.cluster.getNodeStatus()).volumesInUse);
      } catch (err) {
        this.deps.host.logger.v(4).info('Could not read the Node to mark its volumesInUse as reported', { err: err instanceof Error ? err.message : String(err) });
      }
      return undefined;
    }
    const inUse = this.getVolumesInUse();
    try {
      await this.deps.host.cluster.setVolumesInUse(inUse);
    } catch (err) {
      this.deps.host.logger.error(err, 'Failed to update node status volumesInUse');
      return undefined;
    }
    this.dsw.markVolumesReportedInUse(inUse);
    return inUse;
  }

  /** Recounted only after the ASW or the DSW changed: at 1,000 volumes a recount costs more than the rest of an idle pass. */
  private updateTotalVolumes(): void {
    const at = `${this.asw.generation()}/${this.dsw.generation()}`;
    if (at === this.totalsComputedAt) return;
    this.totalsComputedAt = at;
    const counts = new Map<string, { asw: number; dsw: number }>();
    const bump = (plugin: string, which: 'asw' | 'dsw'): void => {
      const c = counts.get(plugin) ?? { asw: 0, dsw: 0 };
      c[which]++;
      counts.set(plugin, c);
    };
    for (const m of this.asw.getMountedVolumes()) bump(pluginLabel(m.pluginName, m.volumeSpec), 'asw');
    for (const v of this.dsw.getVolumesToMount()) bump(pluginLabel(v.pluginName, v.spec), 'dsw');
    this.deps.metrics.setTotalVolumes(
      [...counts].flatMap(([pluginName, c]) => [
        { pluginName, state: 'actual_state_of_world' as const, count: c.asw },
        { pluginName, state: 'desired_state_of_world' as const, count: c.dsw },
      ]),
    );
  }
}
