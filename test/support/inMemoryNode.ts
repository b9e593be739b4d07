/**
 * Test harness: a whole node in memory - files (MemFs), the mount table (MemoryMounter), a CSI
 * driver (FakeCsiDriver), the API server (FakeCluster), time (FakeClock) - and the volume
 * manager running over it. A kubelet restart drops the volume manager and keeps everything
 * else; a reboot also drops every mount. Tests drive it step by step; nothing sleeps for real.
 */
import { MemFs } from '../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../src/adapters/memory/memoryMounter.js';
import { FakeCsiDriver } from '../../src/adapters/memory/fakeCsiDriver.js';
import { composeNode, type ComposedNode } from '../../src/agent/node.js';
import type { CsiDriverRegistry, CsiNodeClient, NodeCapability } from '../../src/ports/csi.js';
import { composeNodevolPolicy } from '../../src/nodevol/composePolicy.js';
import { CsiPlugin } from '../../src/volume/csi/csiPlugin.js';
import type { Clock } from '../../src/ports/clock.js';
import type { ClusterView } from '../../src/ports/cluster.js';
import type { Pod } from '../../src/api/core.js';
import type { FileSystem } from '../../src/ports/fs.js';
import type { Mounter } from '../../src/ports/mounter.js';
import type { FeatureGate } from '../../src/features/features.js';
import { KubeletLayout } from '../../src/layout/layout.js';
import { RecordingMetrics } from '../../src/adapters/memory/recordingMetrics.js';
import { constructPVSourceSpec } from '../../src/volume/spec.js';
import { type PersistentVolume, type PersistentVolumeMode } from '../../src/api/core.js';
import type { CsiHooks } from '../../src/volume/csi/csiHooks.js';
import type { VolumePluginMgr } from '../../src/volume/plugins.js';
import type { VolumeHost } from '../../src/volume/volumeHost.js';
import { RECONCILER_LOOP_PERIOD_MS, type VolumeManager } from '../../src/volumemanager/volumeManager.js';
import { FakeClock } from './fakeClock.js';
import { FakeCluster } from '../../src/adapters/memory/fakeCluster.js';
import { Life } from './fence.js';
import { gates, RecordingLogger } from './hosts.js';

export const ROOT = '/var/lib/kubelet';
export const DRIVER = 'csi.example.com';
export const NODE = 'node-1';

export interface InMemoryNodeOptions {
  readonly driverName?: string;
  readonly capabilities?: NodeCapability[];
  /** CSIDriver attachRequired (default true: attachable volumes appear in volumesInUse). */
  readonly attachRequired?: boolean;
  /** CSIDriver podInfoOnMount (default true, as drivers with inline ephemeral volumes set it). */
  readonly podInfoOnMount?: boolean;
  /** The driver answers ABORTED to a call for a volume with a call in flight (csi-lib-utils' VolumeLocks). */
  readonly volumeLocks?: boolean;
}

/** How a pod added by {@link InMemoryNode.addPod} uses its volumes, and its state. */
export interface PodUseOptions {
  /** Pod volume names no container uses. */
  readonly unused?: readonly string[];
  /** Pod volume name → how a container uses it, over the default derived from the PV's mode. */
  readonly use?: Readonly<Record<string, 'mount' | 'device'>>;
  /** status.phase (default none: running). */
  readonly phase?: Pod['phase'];
  /** metadata.deletionTimestamp (default none). */
  readonly deletionTimestamp?: string;
}

export class InMemoryNode {
  readonly fs = MemFs.create();
  readonly mounter: MemoryMounter;
  readonly clock = new FakeClock();
  readonly driver: FakeCsiDriver;
  readonly cluster = new FakeCluster();
  readonly layout = new KubeletLayout(ROOT);
  /** Logs and metrics of every kubelet life of this node. */
  readonly logger = new RecordingLogger();
  readonly metrics = new RecordingMetrics();
  /** The running volume manager; undefined while kubelet is down. */
  vm: VolumeManager | undefined;
  /** The running kubelet's composed node (its stuck operation tracker, its housekeeping). */
  composed: ComposedNode | undefined;
  /** The fence of the running kubelet's ports. */
  private life: Life | undefined;

  constructor(options: InMemoryNodeOptions = {}) {
    this.fs.writeRaw(`${ROOT}/.keep`, '');
    this.mounter = new MemoryMounter(this.fs);
    const name = options.driverName ?? DRIVER;
    this.driver = new FakeCsiDriver({
      name,
      fs: this.fs,
      mounter: this.mounter,
      clock: this.clock,
      ...(options.capabilities === undefined ? {} : { capabilities: options.capabilities }),
      ...(options.volumeLocks === undefined ? {} : { volumeLocks: options.volumeLocks }),
    });
    // Both lifecycle modes, as a driver with inline ephemeral volumes (csi-driver-host-path) lists them.
    this.cluster.drivers.set(name, { name, attachRequired: options.attachRequired ?? true, podInfoOnMount: options.podInfoOnMount ?? true, volumeLifecycleModes: ['Persistent', 'Ephemeral'] });
  }

  /**
   * Starts a fresh kubelet (volume manager) and runs reconstruction: `gateOn` sets
   * CSIGlobalMountReconstruction, or pass a whole FeatureGate.
   */
  async startKubelet(
    gateOn: boolean | FeatureGate,
    options: {
      /** The node's plugins, built on its host with its gates' CSI hooks (NodeOptions.plugins). */
      plugins?: (host: VolumeHost, csiHooks: CsiHooks) => VolumePluginMgr;
      /** The drivers instead of the in-memory one (a real gRPC registry). */
      csiDrivers?: CsiDriverRegistry;
    } = {},
  ): Promise<VolumeManager> {
    this.life?.crash();
    const driver = this.driver;
    const life = new Life();
    this.life = life;
    // Every port of this life is fenced: after crashKubelet() nothing of it lands or settles.
    const clock: Clock = { nowMs: () => this.clock.nowMs(), wallMs: () => this.clock.wallMs(), sleep: (ms) => life.call(() => this.clock.sleep(ms)) as Promise<void> };
    const node = composeNode(
      {
        layout: this.layout,
        realRootDir: ROOT,
        nodeName: NODE,
        features: typeof gateOn === 'boolean' ? gates(gateOn) : gateOn,
        fs: life.fence<FileSystem>(this.fs),
        logger: this.logger,
        clock,
        mounter: life.fence<Mounter>(this.mounter),
        csiDrivers: life.fence<CsiDriverRegistry>(options.csiDrivers ?? { client: (n) => (n === driver.name ? driver : undefined) }),
        cluster: life.fence<ClusterView>(this.cluster),
      },
      { metrics: { volumeManager: this.metrics }, ...(options.plugins === undefined ? {} : { plugins: options.plugins }) },
    );
    const vm = node.vm;
    this.vm = vm;
    this.composed = node;
    await vm.start();
    return vm;
  }

  /**
   * kill -9 of kubelet: its memory is gone, and its life is fenced off - no call it makes lands
   * and no call it made settles, so its pending operations stop where they are. Calls already at
   * the driver carry on there (the real world).
   */
  crashKubelet(): void {
    this.life?.crash();
    this.life = undefined;
    this.vm = undefined;
    this.composed = undefined;
  }

  /** The node reboots: kubelet and every mount are gone; files and the driver's state stay. */
  reboot(): void {
    this.crashKubelet();
    this.driver.reboot();
    this.mounter.reboot();
  }

  get kubelet(): VolumeManager {
    if (this.vm === undefined) throw new Error('kubelet is not running');
    return this.vm;
  }

  /**
   * One kubelet loop iteration: populate, reconcile, node status; then let time pass by one
   * reconciler period so that started operations (and backoffs) make progress.
   */
  async step(periodMs = RECONCILER_LOOP_PERIOD_MS): Promise<void> {
    const vm = this.kubelet;
    await vm.populateOnce();
    await vm.reconcileOnce();
    await vm.syncNodeStatus();
    await this.clock.advance(periodMs);
  }

  /** Steps until `done()` holds, at most `maxSteps` times (throws if it never does). */
  async stepUntil(done: () => boolean, maxSteps = 200, periodMs = RECONCILER_LOOP_PERIOD_MS): Promise<number> {
    for (let i = 0; i < maxSteps; i++) {
      if (done()) return i;
      await this.step(periodMs);
    }
    if (done()) return maxSteps;
    throw new Error(`condition not reached after ${maxSteps} steps`);
  }

  /** Runs `n` steps. */
  async steps(n: number, periodMs = RECONCILER_LOOP_PERIOD_MS): Promise<void> {
    for (let i = 0; i < n; i++) await this.step(periodMs);
  }

  /** Adds a PV (CSI), its bound PVC, and marks it attached to this node. Returns the unique name. */
  addVolume(pvName: string, handle: string, options: { mode?: PersistentVolumeMode; attached?: boolean } = {}): string {
    const spec = constructPVSourceSpec(pvName, this.driver.name, handle, options.mode ?? 'Filesystem');
    const pv: PersistentVolume = spec.kind === 'persistent' ? spec.persistentVolume : { name: pvName };
    this.cluster.addPersistentVolume(pv, { namespace: 'default', name: `claim-${pvName}` }, { attached: options.attached ?? true });
    return `kubernetes.io/csi/${this.driver.name}^${handle}`;
  }

  /**
   * Adds a pod using the PVCs of the given PVs (claim-<pv>), and optional inline CSI volumes. A
   * container uses each volume as its PV's mode says (volumeDevices for a Block PV, volumeMounts
   * otherwise), but for the pod volume names in `options.unused` (in spec.volumes, used by no
   * container) and those `options.use` overrides.
   */
  addPod(uid: string, pvNames: readonly string[], inline: readonly string[] = [], options: PodUseOptions = {}): Pod {
    const volumes = [
      ...pvNames.map((pv) => ({ name: `vol-${pv}`, persistentVolumeClaim: { claimName: `claim-${pv}` } })),
      ...inline.map((name) => ({ name, csi: { driver: this.driver.name } })),
    ];
    const use = (name: string): 'mount' | 'device' | 'unused' => {
      if (options.unused?.includes(name) === true) return 'unused';
      const given = options.use?.[name];
      if (given !== undefined) return given;
      const pv = pvNames.find((p) => `vol-${p}` === name);
      return pv !== undefined && this.cluster.pvs.get(pv)?.volumeMode === 'Block' ? 'device' : 'mount';
    };
    const pod: Pod = {
      uid,
      namespace: 'default',
      name: `pod-${uid}`,
      nodeName: NODE,
      volumes,
      volumeMounts: volumes.map((v) => v.name).filter((n) => use(n) === 'mount'),
      volumeDevices: volumes.map((v) => v.name).filter((n) => use(n) === 'device'),
      ...(options.phase !== undefined ? { phase: options.phase } : {}),
      ...(options.deletionTimestamp !== undefined ? { deletionTimestamp: options.deletionTimestamp } : {}),
    };
    this.cluster.addPod(pod);
    return pod;
  }

  /** Whether a path exists (lstat: a symlink counts, whatever it points to). */
  async exists(p: string): Promise<boolean> {
    try {
      await this.fs.lstat(p);
      return true;
    } catch {
      return false;
    }
  }

  /** Paths below the root dir (dirs end in '/'). */
  tree(): string[] {
    return this.fs.tree(ROOT).filter((p) => p !== `${ROOT}/.keep`);
  }
}

/** What a plugin-level test changes of the node's ports. */
export interface PluginHostOptions {
  /** The driver client the CSI plugin gets for the node's driver name (default: the node's fake driver). */
  readonly client?: CsiNodeClient;
  readonly fs?: FileSystem;
  /** KEP-6058's gate in the host (default: off). */
  readonly kep?: boolean;
}

/**
 * A VolumeHost over the node's ports, unfenced (KEP-6058's gate off unless `kep`): for tests of
 * the CSI plugin without a volume manager.
 */
export function volumeHostOf(node: InMemoryNode, o: PluginHostOptions = {}): VolumeHost {
  const client = o.client ?? node.driver;
  return {
    layout: node.layout,
    realRootDir: ROOT,
    fs: o.fs ?? node.fs,
    features: gates(o.kep ?? false),
    logger: node.logger,
    clock: node.clock,
    mounter: node.mounter,
    csiDrivers: { client: (n) => (n === node.driver.name ? client : undefined) },
    cluster: node.cluster,
    nodeName: NODE,
  };
}

/** The CSI plugin over `volumeHostOf(node, o)`; with `features`, nodevol's hooks of those gates. */
export function csiPluginOf(node: InMemoryNode, o: PluginHostOptions & { readonly features?: FeatureGate } = {}): CsiPlugin {
  const host = volumeHostOf(node, o);
  return o.features === undefined ? new CsiPlugin(host) : new CsiPlugin(host, composeNodevolPolicy(o.features, host).hooks.csi);
}
