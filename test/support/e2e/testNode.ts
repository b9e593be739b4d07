/**
 * One e2e test node with its processes: a {@link NodeDisk}, the {@link NodeNamespace} currently
 * running on it (replaced by {@link TestNode.reboot}), the `nodevol mock-driver` ("driver") and
 * the `nodevol agent` ("agent") inside it, both logging JSON to `<disk>/logs/<name>.log`.
 *
 * Everything a test asserts on is read from what the processes leave behind: the driver's journal
 * ({@link TestNode.calls}), the agent's log ({@link TestNode.statusWrites}: every volumesInUse it
 * wrote, with the time), the files of the disk, the namespace's mount table and node-status.json.
 * Every wait is bounded and names what it waited for.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';

import { GrpcCsiClient } from '../../../src/adapters/grpc/client.js';
import type { VolumeCapability } from '../../../src/ports/csi.js';
import { readMockState, type MockVolumeRecord } from '../../../src/mockdriver/state.js';
import { NodeFileSystem } from '../../../src/adapters/node/nodeFs.js';
import { escapeMountPath, type MountInfoEntry } from '../../../src/mount/mountInfo.js';
import { NodeDisk, type JournalEntry, type PersistentVolumeOptions, type WrittenPersistentVolume } from './nodeDisk.js';
import { NodeNamespace } from './nodeNamespace.js';
import { waitFor } from './waitFor.js';

/** The mock driver's name on every test node. */
export const E2E_DRIVER = 'mock.csi.nodevol.io';
/** The agent's --node-status-update-frequency in the e2e tests. */
export const STATUS_PERIOD = '200ms';
/** The gate under test. */
export const GATE = 'CSIGlobalMountReconstruction';

/** Journal methods that are not about volumes (probes, capability checks). */
const HOUSEKEEPING = new Set(['GetPluginInfo', 'GetPluginCapabilities', 'Probe', 'NodeGetCapabilities', 'NodeGetInfo', 'ControllerGetCapabilities']);

const MOUNT_CAP: VolumeCapability = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
const BLOCK_CAP: VolumeCapability = { block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } };

/** Why a root-only e2e suite is skipped, or false when it can run (the harness's reason). */
export function rootOnlySkip(): string | false {
  const a = NodeNamespace.available();
  return a.ok ? false : `root-only e2e skipped: ${a.reason}`;
}

/** One JSON log line of the agent or the driver (component-base JSON: ts in epoch ms, msg, v, …). */
export interface LogLine {
  readonly ts: number;
  readonly msg: string;
  readonly v?: number;
  readonly [key: string]: unknown;
}

/** One node-status update the agent made: when (its log line's ts) and what it wrote. */
export interface StatusWrite {
  readonly ts: number;
  readonly volumesInUse: readonly string[];
}

export interface AgentStart {
  /** CSIGlobalMountReconstruction. */
  readonly gate: boolean;
  /** Further gates (nodevol's own). */
  readonly gates?: Readonly<Record<string, boolean>>;
}

/** A volume created through the driver's CreateVolume and ControllerPublishVolume (attached here). */
export interface TestVolume extends WrittenPersistentVolume {
  readonly volumeHandle: string;
}

export class TestNode {
  readonly disk: NodeDisk;
  #ns: NodeNamespace;
  #boots = 0;
  /** Byte offset of each process log when its current process started. */
  readonly #logStart = new Map<string, number>();

  private constructor(
    readonly name: string,
    disk: NodeDisk,
    ns: NodeNamespace,
    /** The mock driver's name (its CSIDriver object's, its socket's, its plugin dir's). */
    readonly driverName: string,
  ) {
    this.disk = disk;
    this.#ns = ns;
  }

  /**
   * A fresh disk (with the driver's CSIDriver object: attachRequired and podInfoOnMount unless
   * told otherwise) and a namespace on it.
   */
  static async create(name: string, driver: { readonly name?: string; readonly attachRequired?: boolean; readonly podInfoOnMount?: boolean } = {}): Promise<TestNode> {
    const disk = await NodeDisk.create({ prefix: `nodevol-e2e-${name}-` });
    const driverName = driver.name ?? E2E_DRIVER;
    // Both lifecycle modes and podInfoOnMount unless told otherwise, as drivers with inline
    // ephemeral volumes have them (kubelet's SetUpAt refuses an inline volume of a driver that
    // does not list Ephemeral; the ephemeral key needs podInfoOnMount).
    await disk.writeCsiDriver({ name: driverName, attachRequired: driver.attachRequired ?? true, podInfoOnMount: driver.podInfoOnMount ?? true, volumeLifecycleModes: ['Persistent', 'Ephemeral'] });
    const ns = await NodeNamespace.start({ name: `${name}-boot0`, logDir: disk.logDir });
    return new TestNode(name, disk, ns, driverName);
  }

  /** The namespace the node runs now (a new one after each reboot). */
  get ns(): NodeNamespace {
    return this.#ns;
  }

  // ------------------------------------------------------------------ processes

  /** Starts the mock driver (with `extra` flags); resolves once it serves (its "serving" log line). */
  async startDriver(o: { readonly extra?: readonly string[] } = {}): Promise<void> {
    await this.#spawn('driver', this.disk.mockDriverArgv({ driverName: this.driverName, v: 2, loggingFormat: 'json', ...(o.extra === undefined ? {} : { extra: o.extra }) }));
    await waitFor(async () => (await this.log('driver')).some((l) => l.msg === 'Mock CSI driver serving'), {
      what: `the mock driver of ${this.name} to serve`,
      timeoutMs: 10_000,
      observe: async () => (await this.#ns.processes()).find((p) => p.name === 'driver') ?? (await this.disk.readLog('driver')).slice(-2000),
    });
  }

  /**
   * Starts the agent (JSON logs, -v 4, volumesInUse every {@link STATUS_PERIOD}); resolves once
   * /readyz answers 200 (reconstruction done, states synced).
   */
  async startAgent(o: AgentStart): Promise<void> {
    const argv = this.disk.agentArgv({
      featureGates: { [GATE]: o.gate, ...o.gates },
      nodeStatusUpdateFrequency: STATUS_PERIOD,
      shutdownGracePeriod: '1s',
      v: 4,
      loggingFormat: 'json',
    });
    await this.#spawn('agent', argv);
    await waitFor(
      async () => {
        const start = (await this.log('agent')).find((l) => l.msg === 'Starting nodevol agent');
        if (typeof start?.metricsAddress !== 'string') return false;
        const res = await fetch(`http://${start.metricsAddress}/readyz`, { signal: AbortSignal.timeout(1000) });
        await res.text();
        return res.status === 200;
      },
      {
        what: `the agent of ${this.name} to be ready (/readyz 200)`,
        timeoutMs: 15_000,
        intervalMs: 50,
        observe: async () => ({
          process: (await this.#ns.processes()).find((p) => p.name === 'agent'),
          log: (await this.log('agent')).slice(-5).map((l) => l.msg),
        }),
      },
    );
  }

  /** The current agent's /metrics text. */
  async metricsText(): Promise<string> {
    const start = (await this.log('agent')).find((l) => l.msg === 'Starting nodevol agent');
    if (typeof start?.metricsAddress !== 'string') throw new Error(`the agent of ${this.name} has not announced its metrics address`);
    const res = await fetch(`http://${start.metricsAddress}/metrics`, { signal: AbortSignal.timeout(2000) });
    if (res.status !== 200) throw new Error(`GET /metrics of the agent of ${this.name}: HTTP ${res.status}`);
    return res.text();
  }

  /**
   * The value of one series of the current agent's /metrics, written as the exposition prints
   * it: `reconstruct_volume_operations_total`, or with labels in their declared order; 0 when it is absent.
   */
  async metric(series: string): Promise<number> {
    for (const line of (await this.metricsText()).split('\n')) {
      if (line.startsWith('#')) continue;
      const at = line.lastIndexOf(' ');
      if (at > 0 && line.slice(0, at) === series) return Number(line.slice(at + 1));
    }
    return 0;
  }

  /** SIGKILL to the agent (kubelet killed: nothing is cleaned up); resolves once it is gone. */
  async killAgent(): Promise<void> {
    await this.#ns.kill('agent', 'SIGKILL');
  }

  /** Power cut: every process and every mount of the namespace die; the disk stays. */
  async reboot(): Promise<void> {
    await this.#ns.reboot();
    this.#ns = await NodeNamespace.start({ name: `${this.name}-boot${++this.#boots}`, logDir: this.disk.logDir });
  }

  async #spawn(name: 'agent' | 'driver', argv: readonly string[]): Promise<void> {
    const size = await stat(this.disk.logFile(name)).then(
      (s) => s.size,
      () => 0,
    );
    this.#logStart.set(name, size);
    await this.#ns.spawn(name, argv);
  }

  /** The JSON log lines of the current (or last) process `name`, from its start. */
  async log(name: 'agent' | 'driver'): Promise<LogLine[]> {
    const text = (await readFile(this.disk.logFile(name)).catch(() => Buffer.alloc(0))).subarray(this.#logStart.get(name) ?? 0).toString('utf8');
    return text.split('\n').flatMap((line): LogLine[] => {
      if (!line.startsWith('{') || !line.endsWith('}')) return [];
      try {
        return [JSON.parse(line) as LogLine];
      } catch {
        return [];
      }
    });
  }

  /** Whether the current agent logged a line with this message. */
  async agentLogged(msg: string): Promise<boolean> {
    return (await this.log('agent')).some((l) => l.msg === msg);
  }

  /** Every volumesInUse the current agent wrote to node-status.json, in order. */
  async statusWrites(): Promise<StatusWrite[]> {
    return (await this.log('agent'))
      .filter((l) => l.msg === 'Updated node status volumesInUse')
      .map((l) => ({ ts: l.ts, volumesInUse: Array.isArray(l.volumesInUse) ? (l.volumesInUse as string[]) : [] }));
  }

  /** Resolves once the current agent wrote volumesInUse at least `n` times; returns the writes. */
  async waitForStatusWrites(n: number, timeoutMs = 10_000): Promise<StatusWrite[]> {
    return waitFor(async () => {
      const w = await this.statusWrites();
      return w.length >= n ? w : false;
    }, { what: `${n} node status updates by the agent of ${this.name}`, timeoutMs, observe: () => this.statusWrites() });
  }

  // ------------------------------------------------------------------ the cluster side

  /**
   * A volume as a provisioner and the attach/detach controller make it: CreateVolume and
   * ControllerPublishVolume to this node through the driver's socket, its PV and PVC written,
   * and the volume listed in volumesAttached. The driver must be running.
   */
  async createVolume(pvName: string, mode: 'Filesystem' | 'Block' = 'Filesystem', pv: Omit<PersistentVolumeOptions, 'name' | 'driver' | 'volumeHandle' | 'volumeMode'> = {}): Promise<TestVolume> {
    const client = new GrpcCsiClient(`unix://${this.disk.driverSocket(this.driverName)}`, { timeoutMs: 10_000 });
    let volumeHandle: string;
    try {
      const cap = mode === 'Block' ? BLOCK_CAP : MOUNT_CAP;
      const res = await client.controller.createVolume({ name: pvName, volumeCapabilities: [cap] });
      if (res.volume === null || res.volume.volumeId === '') throw new Error(`CreateVolume ${pvName}: no volume in the answer`);
      volumeHandle = res.volume.volumeId;
      await client.controller.controllerPublishVolume({ volumeId: volumeHandle, nodeId: this.disk.nodeName, volumeCapability: cap, readonly: false });
    } finally {
      client.close();
    }
    const written = await this.disk.writePersistentVolume({ ...pv, name: pvName, driver: this.driverName, volumeHandle, volumeMode: mode });
    const attached = (await this.disk.nodeStatus()).volumesAttached.filter((v) => v.name !== written.uniqueVolumeName);
    await this.disk.setVolumesAttached([...attached, { name: written.uniqueVolumeName }]);
    return { ...written, volumeHandle };
  }

  // ------------------------------------------------------------------ the driver's journal

  /** How many journal lines there are now: a mark for {@link calls}. */
  async journalMark(): Promise<number> {
    return (await this.disk.journal()).length;
  }

  /** Journal lines from `mark` on. */
  async journalSince(mark: number): Promise<JournalEntry[]> {
    return (await this.disk.journal()).slice(mark);
  }

  /**
   * Completed volume calls from `mark` on, as "Method OUTCOME" ("NodeUnstageVolume OK",
   * "NodeStageVolume UNAVAILABLE"); probes, capability and info calls left out.
   */
  async calls(mark = 0, volumeId?: string): Promise<string[]> {
    return (await this.journalSince(mark))
      .filter((e) => e.phase === undefined && !HOUSEKEEPING.has(e.method ?? '') && (volumeId === undefined || e.volumeId === volumeId))
      .map((e) => `${e.method ?? '?'} ${e.error?.name ?? 'OK'}`);
  }

  /** Waits for a journal line from `mark` on; resolves to it. */
  async waitForCall(mark: number, match: (e: JournalEntry) => boolean, what: string, timeoutMs = 10_000): Promise<JournalEntry> {
    return waitFor(async () => (await this.journalSince(mark)).find(match), {
      what: `a journal entry: ${what}`,
      timeoutMs,
      observe: async () => (await this.journalSince(mark)).slice(-12).map((e) => `${e.seq ?? '?'} ${e.method ?? '?'} ${e.phase ?? e.error?.name ?? 'OK'}`),
    });
  }

  // ------------------------------------------------------------------ the node

  /** Mount points (escaped as in mountinfo) at or under `dir` in the node's mount table. */
  async mountsUnder(dir: string): Promise<string[]> {
    const prefix = escapeMountPath(dir);
    return (await this.#ns.mounts()).filter((m: MountInfoEntry) => m.mountPoint === prefix || m.mountPoint.startsWith(`${prefix}/`)).map((m) => m.mountPoint);
  }

  /** The driver's persisted record of a volume (undefined when it has none). */
  async driverVolume(volumeId: string): Promise<MockVolumeRecord | undefined> {
    if (!existsSync(this.disk.driverStateDir)) return undefined;
    return (await readMockState(new NodeFileSystem(), this.disk.driverStateDir)).find((v) => v.id === volumeId);
  }

  // ------------------------------------------------------------------ paths

  /** plugins/kubernetes.io/csi/<driver>/<sha256(handle)> */
  volumeDir(handle: string): string {
    return this.disk.layout.csiVolumeDir(this.driverName, handle);
  }
  /** …/<sha256(handle)>/globalmount */
  globalMount(handle: string): string {
    return this.disk.layout.csiDeviceMountPath(this.driverName, handle);
  }
  /** pods/<uid>/volumes/kubernetes.io~csi/<spec> */
  podVolumeDir(podUID: string, specName: string): string {
    return this.disk.layout.csiPodVolumeDir(podUID, specName);
  }
  /** pods/<uid>/volumes/kubernetes.io~csi/<spec>/mount */
  podMountPath(podUID: string, specName: string): string {
    return this.disk.layout.csiPodMountPath(podUID, specName);
  }
  /** The CSI plugin dir, plugins/kubernetes.io/csi. */
  get csiPluginDir(): string {
    return this.disk.layout.csiPluginDir();
  }
}
