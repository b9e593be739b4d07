/**
 * The simulated node around the engine: what a crash of the engine keeps. The root dir's files
 * (DurableFs: what was synced survives a power cut), the mount table, the cluster (pods, PVs,
 * CSIDrivers, VolumeAttachments, node status), the CSI drivers (in-process fakes with their
 * volume records, fault rules and the calls running at them), the pods the scenario runs, and
 * the scenario's injected read errors. The engine reaches it only through the fenced ports
 * (fencedPorts.ts); the scenario steps and the checks (checks.ts) use it directly.
 *
 * Every change to the world, whoever makes it, bumps {@link SimWorld.version} and
 * {@link SimWorld.lastChangeMs}: the run's stuck window, and the memos of its convergence check
 * and world-state hash, are keyed on them.
 */
import { MemoryMounter } from '../adapters/memory/memoryMounter.js';
import { FakeCsiDriver, type FakeCsiRequest } from '../adapters/memory/fakeCsiDriver.js';
import { FakeCluster } from '../adapters/memory/fakeCluster.js';
import type { Pod, PersistentVolume } from '../api/core.js';
import type { Clock } from '../ports/clock.js';
import type { CsiMethod, NodeCapability } from '../ports/csi.js';
import { FsError } from '../ports/fs.js';
import { constructPVSourceSpec } from '../volume/spec.js';
import { DurableFs } from './durableFs.js';
import { fnv1a } from './prng.js';
import type { FS_FAULT_CODES, Scenario, ScenarioFault, ScenarioVolume } from './scenario.js';
import type { Scheduler } from './scheduler.js';

export const SIM_ROOT = '/var/lib/kubelet';
export const SIM_NODE = 'sim-node';

/** The mount table, telling the world about every change (whoever makes it). */
class ObservedMounter extends MemoryMounter {
  onChange: () => void = () => undefined;
  override async mount(source: string, target: string, fsType: string, options: readonly string[]): Promise<void> {
    await super.mount(source, target, fsType, options);
    this.onChange();
  }
  override async unmount(target: string): Promise<void> {
    await super.unmount(target);
    this.onChange();
  }
}

/** A CSI call at a driver that has not finished there. */
export interface InFlight {
  readonly driver: string;
  readonly method: CsiMethod;
  readonly volumeId: string;
}

/** A volume the running pods want, with those pods. */
export interface WantedVolume {
  readonly driver: string;
  readonly handle: string;
  readonly pods: readonly string[];
  readonly vol: ScenarioVolume;
}

/** The unique volume name kubelet gives a CSI volume. */
export function uniqueName(driver: string, handle: string): string {
  return `kubernetes.io/csi/${driver}^${handle}`;
}

/** A pod's target path (filesystem `.../pods/<uid>/...`, block publish file `.../<uid>`). */
export function ownsTarget(uid: string, target: string): boolean {
  return target.includes(`/pods/${uid}/`) || target.endsWith(`/${uid}`);
}

export class SimWorld {
  readonly fs: DurableFs;
  /** The node's mount table (every change to it, by the engine or a driver, is a change to the world). */
  readonly mounter: MemoryMounter;
  readonly cluster = new FakeCluster({ watch: true });
  readonly #drivers = new Map<string, FakeCsiDriver>();
  /** CSI calls at the driver that have not finished there. */
  readonly #inFlight = new Map<number, InFlight>();
  readonly #running = new Set<string>();
  /**
   * wanted()'s answer until the running pods change (the scenario's pods and volumes do not
   * change in a run). The checks ask for it at every CSI call and every convergence test.
   */
  #wanted: ReadonlyMap<string, WantedVolume> | undefined;
  /** Running pods with a deletionTimestamp (scenario `terminatePod`): their containers still run. */
  readonly #terminating = new Set<string>();
  /** driver|volumeId|pod uid of every NodePublishVolume that returned OK in this run (all lives). */
  readonly #setUp = new Set<string>();
  /** Scenario `readError` steps: path → errno and how many more reads of it fail. */
  readonly #readErrors = new Map<string, { code: string; left: number }>();
  /** A slow disk: every file call of the engine takes `latencyMs` until `untilMs` (scenario `slowDisk`). */
  #slowDisk: { readonly latencyMs: number; readonly untilMs: number } | undefined;
  /** The API server is unreachable until this virtual time (scenario `apiDown`). */
  #apiDownUntil = 0;
  /** Drivers not registered with kubelet yet after a reboot: name → virtual time they register. */
  readonly #registersAt = new Map<string, number>();
  /** Drivers given a `hang: forever` rule: they never answer those calls (liveness is not owed for their volumes). */
  readonly #neverReturns = new Set<string>();
  /** Bumped at each reboot: the driver processes' timers belong to their epoch. */
  #driverEpoch = 0;
  #version = 0;
  #lastChangeMs = 0;
  #stateMemo: { key: string; hash: string } | undefined;
  #filesMemo: { readonly version: number; readonly text: string } | undefined;

  /** A CSI call arrives at a driver (called before the world counts it in flight). */
  onArrive: (driver: string, method: CsiMethod, volumeId: string, request: FakeCsiRequest) => void = () => undefined;

  /** A NodePublishVolume finished at a driver (OK or not): the driver's record of it is final for now. */
  onPublishFinished: (driver: string, volumeId: string) => void = () => undefined;

  constructor(
    readonly scenario: Scenario,
    private readonly sched: Scheduler,
    /** The run's seed: where a power cut tears an unsynced write depends on it. */
    seed = 0,
  ) {
    this.fs = new DurableFs(() => this.sched.now);
    // A write torn at any byte: the cut point is a function of the seed, the power cut and the file.
    this.fs.tear = (path, length, cut) => Number.parseInt(fnv1a(`${seed}|${cut}|${path}`), 16) % (length + 1);
    const mounter = new ObservedMounter(this.fs.mem);
    mounter.onChange = () => this.changed();
    this.mounter = mounter;
    this.fs.onChange = () => this.changed();
    this.#setUpWorld();
  }

  /** Bumped on every change to the world; keys the memos of the run. */
  get version(): number {
    return this.#version;
  }

  /** Virtual time of the last change. */
  get lastChangeMs(): number {
    return this.#lastChangeMs;
  }

  get drivers(): ReadonlyMap<string, FakeCsiDriver> {
    return this.#drivers;
  }

  get inFlight(): ReadonlyMap<number, InFlight> {
    return this.#inFlight;
  }

  /** The uids of the pods the scenario runs now. */
  get running(): ReadonlySet<string> {
    return this.#running;
  }

  changed(): void {
    this.#lastChangeMs = this.sched.now;
    this.#version++;
  }

  #setUpWorld(): void {
    this.fs.mem.writeRaw(`${SIM_ROOT}/.keep`, '');
    // The VolumeAttachments of the attached volumes are this node's.
    this.cluster.nodeName = SIM_NODE;
    for (const d of this.scenario.drivers) {
      const capabilities: NodeCapability[] = [...(d.stageUnstage ? (['STAGE_UNSTAGE_VOLUME'] as const) : []), ...(d.singleNodeMultiWriter === true ? (['SINGLE_NODE_MULTI_WRITER'] as const) : [])];
      const driverClock: Clock = {
        nowMs: () => this.sched.now,
        wallMs: () => this.sched.now,
        sleep: (ms) =>
          ms > 0
            ? new Promise<void>((resolve) => {
                this.sched.timer(`driver:${this.#driverEpoch}`, ms, 'timer', `driver ${d.name} sleep ${ms}ms`, resolve);
              })
            : Promise.resolve(),
      };
      const driver = new FakeCsiDriver({ name: d.name, fs: this.fs, mounter: this.mounter, clock: driverClock, capabilities, mode: d.mode, volumeLocks: true });
      driver.observer = {
        arrived: (seq, method, volumeId, request) => {
          this.onArrive(d.name, method, volumeId, request);
          this.#inFlight.set(this.#driverSeqKey(d.name, seq), { driver: d.name, method, volumeId });
        },
        finished: (call) => {
          this.#inFlight.delete(this.#driverSeqKey(d.name, call.seq));
          if (call.method === 'NodePublishVolume') this.onPublishFinished(d.name, call.volumeId);
          if (call.outcome === 'OK' && call.method !== 'NodeGetCapabilities') this.changed();
        },
      };
      this.#drivers.set(d.name, driver);
      // Both lifecycle modes: scenario drivers serve inline ephemeral volumes too (as csi-driver-host-path's CSIDriver lists them).
      this.cluster.setCSIDriver({ name: d.name, attachRequired: d.attachRequired, podInfoOnMount: d.podInfoOnMount, volumeLifecycleModes: ['Persistent', 'Ephemeral'] });
    }
    for (const v of this.scenario.volumes) {
      if (v.inline) continue;
      const spec = constructPVSourceSpec(v.name, v.driver, v.handle, v.volumeMode);
      const base: PersistentVolume = spec.kind === 'persistent' ? spec.persistentVolume : { name: v.name };
      // The PV's access modes, as the API serves them (kubelet maps the first to the CSI access mode).
      const pv: PersistentVolume = v.accessModes === undefined ? base : { ...base, accessModes: [...v.accessModes] };
      const attachRequired = this.scenario.drivers.find((d) => d.name === v.driver)?.attachRequired ?? true;
      const claim = v.claim ?? 'Bound';
      this.cluster.addPersistentVolume(
        pv,
        { namespace: 'default', name: `claim-${v.name}` },
        {
          attached: attachRequired,
          ...(claim === 'Pending' || claim === 'Lost' ? { claimPhase: claim } : {}),
          ...(claim === 'Deleting' ? { claimDeleting: true } : {}),
          ...(claim === 'ClaimRefMismatch' ? { claimRefUid: `uid-of-an-earlier-claim-${v.name}` } : {}),
        },
      );
    }
    for (const p of this.scenario.pods) if (p.running) this.addPod(p.uid);
    this.fs.commit(0);
  }

  #driverSeqKey(driver: string, seq: number): number {
    // Driver call seqs are per driver; fold the driver index in.
    return [...this.#drivers.keys()].indexOf(driver) * 1_000_000 + seq;
  }

  // ---------------------------------------------------------------- the scenario's pods and volumes

  #pod(uid: string): Pod {
    const p = this.scenario.pods.find((x) => x.uid === uid);
    if (p === undefined) throw new Error(`unknown pod ${uid}`);
    const vols = p.volumes.map((n) => this.volume(n));
    // spec.volumes also lists the unused ones, which no container names.
    const listed = [...vols, ...(p.unused ?? []).map((n) => this.volume(n))];
    return {
      uid,
      namespace: 'default',
      name: `pod-${uid}`,
      nodeName: SIM_NODE,
      volumes: listed.map((v) => (v.inline ? { name: v.name, csi: { driver: v.driver } } : { name: v.name, persistentVolumeClaim: { claimName: `claim-${v.name}` } })),
      volumeMounts: vols.filter((v) => v.volumeMode !== 'Block').map((v) => v.name),
      volumeDevices: vols.filter((v) => v.volumeMode === 'Block').map((v) => v.name),
    };
  }

  /** A scenario volume by name or handle. */
  volume(name: string): ScenarioVolume {
    const v = this.scenario.volumes.find((x) => x.name === name || x.handle === name);
    if (v === undefined) throw new Error(`unknown volume ${name}`);
    return v;
  }

  addPod(uid: string): void {
    this.cluster.addPod(this.#pod(uid));
    this.#running.add(uid);
    this.#wanted = undefined;
    this.#terminating.delete(uid);
  }

  deletePod(uid: string): void {
    this.cluster.deletePod(uid);
    this.#running.delete(uid);
    this.#wanted = undefined;
    this.#terminating.delete(uid);
  }

  /**
   * The pod is being deleted (a deletionTimestamp), still listed and running: kubelet adds no
   * volume for it but keeps those it has. Its volumes stay wanted; a volume it had not mounted
   * yet is mounted only by a restarted kubelet, so a scenario sets this once they are mounted.
   */
  terminatePod(uid: string): void {
    if (!this.cluster.pods.has(uid)) return;
    this.cluster.updatePod(uid, { deletionTimestamp: '2026-01-01T00:00:00Z' });
    this.#terminating.add(uid);
  }

  /** The pod's containers stopped (phase Succeeded or Failed), the pod still listed: kubelet unmounts its volumes. */
  podTerminal(uid: string, phase: 'Succeeded' | 'Failed'): void {
    if (!this.cluster.pods.has(uid)) return;
    this.cluster.updatePod(uid, { phase });
    this.#running.delete(uid);
    this.#wanted = undefined;
    this.#terminating.delete(uid);
  }

  /** Whether kubelet's populator refuses the volume's claim (never staged): a PV whose claim is not Bound, is being deleted, or whose claimRef names another claim. */
  refused(v: ScenarioVolume): boolean {
    return !v.inline && (v.claim ?? 'Bound') !== 'Bound';
  }

  /**
   * Wanted (running pods') volumes as driver/handle keys, and target paths of running pods.
   * The same map until the running pods change: read it, do not change it.
   */
  wanted(): ReadonlyMap<string, WantedVolume> {
    if (this.#wanted !== undefined) return this.#wanted;
    const out = new Map<string, { driver: string; handle: string; pods: string[]; vol: ScenarioVolume }>();
    for (const uid of this.#running) {
      const p = this.scenario.pods.find((x) => x.uid === uid);
      for (const n of p?.volumes ?? []) {
        const v = this.volume(n);
        if (this.refused(v)) continue;
        const handle = v.inline ? '' : v.handle;
        const key = v.inline ? `${v.driver}|inline|${uid}|${v.name}` : `${v.driver}|${handle}`;
        const e = out.get(key) ?? { driver: v.driver, handle, pods: [], vol: v };
        e.pods.push(uid);
        out.set(key, e);
      }
    }
    this.#wanted = out;
    return out;
  }

  wantedByPod(uid: string, driver: string, volumeId: string): boolean {
    const p = this.scenario.pods.find((x) => x.uid === uid);
    return (p?.volumes ?? []).some((n) => {
      const v = this.volume(n);
      return !this.refused(v) && v.driver === driver && (v.inline || v.handle === volumeId);
    });
  }

  /** A NodePublishVolume returned OK: its pod's SetUp of the volume succeeded. */
  noteSetUp(driver: string, volumeId: string, request: Readonly<Record<string, unknown>>): void {
    const target = typeof request['targetPath'] === 'string' ? request['targetPath'] : '';
    for (const p of this.scenario.pods) if (ownsTarget(p.uid, target)) this.#setUp.add(`${driver}|${volumeId}|${p.uid}`);
  }

  /** Whether the pod's SetUp of the volume succeeded in some life of this run. */
  hasSetUp(driver: string, volumeId: string, uid: string): boolean {
    return this.#setUp.has(`${driver}|${volumeId}|${uid}`);
  }

  // ---------------------------------------------------------------- what the scenario does to it

  /** A scenario's fault rule goes to the driver of its volume, or to every driver when it names none. */
  injectScenarioFault(f: ScenarioFault): void {
    const vol = f.volumeId === undefined ? undefined : this.scenario.volumes.find((v) => !v.inline && v.handle === f.volumeId);
    const drivers = vol === undefined ? [...this.#drivers.values()] : [this.#drivers.get(vol.driver)].filter((d): d is FakeCsiDriver => d !== undefined);
    for (const d of drivers) {
      d.inject(f);
      if (f.forever === true) this.#neverReturns.add(d.name);
    }
  }

  /**
   * Drivers that never return (given a `hang: forever` rule in this run): the `converges`
   * invariant exempts their volumes and the calls they hold; the safety invariants still apply.
   */
  get neverReturns(): ReadonlySet<string> {
    return this.#neverReturns;
  }

  /** CSI calls still running at drivers that do return (what liveness waits for). */
  inFlightOwed(): number {
    let n = 0;
    for (const f of this.#inFlight.values()) if (!this.#neverReturns.has(f.driver)) n++;
    return n;
  }

  clearFaults(): void {
    for (const d of this.#drivers.values()) d.clearFaults();
  }

  /**
   * The driver's process restarts: calls at it fail UNAVAILABLE, none of their work lands, its
   * state (and the rules in force) stay.
   */
  restartDriver(name: string): void {
    this.#drivers.get(name)?.reboot();
    this.changed();
  }

  /** Writes below the root dir fail with `code` for `ms`; returns when the fault ends. */
  failWrites(code: (typeof FS_FAULT_CODES)[number], ms: number): number {
    const until = this.sched.now + ms;
    this.fs.failWrites(SIM_ROOT, code, until);
    this.sched.timer('world', ms, 'timer', `${code} ends`, () => this.changed());
    this.changed();
    return until;
  }

  /** Every file call of the engine takes `latencyMs` for `ms`; returns when the fault ends. */
  slowDisk(latencyMs: number, ms: number): number {
    const until = this.sched.now + ms;
    this.#slowDisk = { latencyMs, untilMs: until };
    this.sched.timer('world', ms, 'timer', 'slow disk ends', () => this.changed());
    this.changed();
    return until;
  }

  /** How long a file call started now takes (0: at once). */
  fileCallLatencyMs(): number {
    const d = this.#slowDisk;
    if (d === undefined) return 0;
    if (this.sched.now >= d.untilMs) {
      this.#slowDisk = undefined;
      return 0;
    }
    return d.latencyMs;
  }

  /** The drivers still to register ('' when none), for the world-state hash. */
  #registrationState(): string {
    if (this.#registersAt.size === 0) return '';
    // Asked at every crash point: no array is built while no registration is still to come.
    const now = this.sched.now;
    let pending: string[] | undefined;
    for (const [n, at] of this.#registersAt) if (now < at) (pending ??= []).push(`${n}@${at}`);
    return pending === undefined ? '' : pending.sort().join(',');
  }

  /** The slow disk in force ('' when none), for the world-state hash. */
  #slowDiskState(): string {
    const d = this.#slowDisk;
    return d === undefined || this.sched.now >= d.untilMs ? '' : `slow ${d.latencyMs}<${d.untilMs}`;
  }

  /** The next `times` reads of the pod's vol_data.json of the volume fail with `code`. */
  failReads(pod: string, volume: string, code: string, times: number): void {
    const v = this.volume(volume);
    this.#readErrors.set(`${SIM_ROOT}/pods/${pod}/volumes/kubernetes.io~csi/${v.name}/vol_data.json`, { code, left: times });
    this.changed();
  }

  /** The error a scenario `readError` injects into this read of `p`, consuming one of its times. */
  takeReadError(p: string): FsError | undefined {
    const e = this.#readErrors.get(p);
    if (e === undefined) return undefined;
    if (--e.left <= 0) this.#readErrors.delete(p);
    this.changed();
    // EACCES fails the open, EIO the read itself.
    return new FsError(e.code, p, e.code === 'EACCES' ? 'open' : 'read');
  }

  /** The volume's vol_data.json (the pod's, or the block volume's global one) is lost. */
  loseVolumeData(pod: string, volume: string): void {
    const v = this.volume(volume);
    const file = v.volumeMode === 'Block' ? `${SIM_ROOT}/plugins/kubernetes.io/csi/volumeDevices/${v.name}/data/vol_data.json` : `${SIM_ROOT}/pods/${pod}/volumes/kubernetes.io~csi/${v.name}/vol_data.json`;
    if (this.fs.loseFile(file)) this.changed();
  }

  /**
   * The pod-local vol_data.json of the volume is corrupted, durably: cut in half (not JSON any
   * more), or still JSON naming another volume handle or another driver.
   */
  corruptVolumeData(pod: string, volume: string, as: 'badJson' | 'wrongHandle' | 'wrongDriver'): void {
    const v = this.volume(volume);
    const file = `${SIM_ROOT}/pods/${pod}/volumes/kubernetes.io~csi/${v.name}/vol_data.json`;
    let text: string;
    try {
      text = this.fs.readTextSync(file);
    } catch {
      return;
    }
    let out = text.slice(0, Math.floor(text.length / 2));
    if (as !== 'badJson') {
      try {
        const data = JSON.parse(text) as Record<string, unknown>;
        if (as === 'wrongHandle') data['volumeHandle'] = `${String(data['volumeHandle'])}-other`;
        else data['driverName'] = `other.${String(data['driverName'])}`;
        out = JSON.stringify(data);
      } catch {
        // Already not JSON: it stays as it is.
        return;
      }
    }
    if (this.fs.replaceFile(file, new TextEncoder().encode(out))) this.changed();
  }

  /** The API server is unreachable for `ms`; returns when it is back. */
  apiDown(ms: number): number {
    this.#apiDownUntil = Math.max(this.#apiDownUntil, this.sched.now + ms);
    this.sched.timer('world', ms, 'timer', 'API server reachable', () => this.changed());
    this.changed();
    return this.#apiDownUntil;
  }

  /** Whether kubelet reaches the API server now. */
  apiReachable(): boolean {
    return this.sched.now >= this.#apiDownUntil;
  }

  /** Whether the driver is registered with kubelet now (a late node plugin is not, after a reboot). */
  registered(name: string): boolean {
    const at = this.#registersAt.get(name);
    if (at === undefined) return true;
    if (this.sched.now < at) return false;
    this.#registersAt.delete(name);
    return true;
  }

  /**
   * After a reboot, kubelet starts `kubeletStartsInMs` later and each driver with
   * `registersAfterMs` registers that long after it; returns when the last one registers (0:
   * none is late).
   */
  lateRegistrations(kubeletStartsInMs: number): number {
    let last = 0;
    for (const d of this.scenario.drivers) {
      const after = d.registersAfterMs ?? 0;
      if (after <= 0) continue;
      const at = this.sched.now + kubeletStartsInMs + after;
      this.#registersAt.set(d.name, at);
      this.sched.timer('world', at - this.sched.now, 'timer', `${d.name} registers`, () => this.changed());
      last = Math.max(last, at);
    }
    return last;
  }

  /**
   * The node reboots: the driver processes restart (their state kept, the calls at them and
   * their timers lost, locks cleared), every mount goes, and the power is cut under the files.
   */
  reboot(): void {
    this.sched.drop(`driver:${this.#driverEpoch}`);
    this.#driverEpoch++;
    for (const d of this.#drivers.values()) d.reboot();
    this.#inFlight.clear();
    this.mounter.reboot();
    this.fs.powerCut();
    this.changed();
  }

  // ---------------------------------------------------------------- its state

  /** Hash of everything a crash keeps, with the scenario's progress (`stepIndex`). */
  state(stepIndex: number): string {
    const key = `${this.#version}|${stepIndex}|${this.fs.commits}|${this.fs.dirty}|${this.fs.writeFaultState()}|${this.#slowDiskState()}|${this.fs.unsyncedState()}|${this.#registrationState()}|${this.apiReachable() ? '' : `api<${this.#apiDownUntil}`}|${[...this.#inFlight.keys()].join(',')}`;
    if (this.#stateMemo?.key === key) return this.#stateMemo.hash;
    const hash = this.#computeState(stepIndex);
    this.#stateMemo = { key, hash };
    return hash;
  }

  /** The files' part of the world state: re-read only after the page cache changed. */
  #filesState(): string {
    const version = this.fs.pageVersion;
    if (this.#filesMemo?.version === version) return this.#filesMemo.text;
    const parts: string[] = [];
    for (const p of this.fs.mem.tree(SIM_ROOT)) {
      if (p.endsWith('.json')) parts.push(`${p}=${this.fs.textHash(p)}`);
      else parts.push(p);
    }
    const text = parts.join('\n');
    this.#filesMemo = { version, text };
    return text;
  }

  #computeState(stepIndex: number): string {
    const parts: string[] = [`step ${stepIndex}`, `running ${[...this.#running].sort().join(',')}`, ...(this.#terminating.size > 0 ? [`terminating ${[...this.#terminating].sort().join(',')}`] : []), this.#filesState()];
    parts.push(`durable ${this.fs.commits} ${this.fs.dirty} ${this.fs.writeFaultState()} ${this.#slowDiskState()} ${this.fs.unsyncedState()} ${this.#registrationState()} ${this.apiReachable() ? '' : `api<${this.#apiDownUntil}`}`);
    for (const e of this.mounter.entries()) parts.push(`m ${e.mountPoint} ${e.source}`);
    for (const [name, d] of this.#drivers) {
      parts.push(`d ${name} ${JSON.stringify(d.snapshot())}`);
    }
    for (const f of [...this.#inFlight.values()].map((x) => `${x.driver} ${x.method} ${x.volumeId}`).sort()) parts.push(`in-flight ${f}`);
    parts.push(`inUse ${this.cluster.volumesInUse.join(',')}`);
    for (const [p, e] of [...this.#readErrors].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) parts.push(`read-error ${p} ${e.code} ${e.left}`);
    return fnv1a(parts.join('\n'));
  }
}
