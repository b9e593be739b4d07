/**
 * One deterministic simulation run: the real, unchanged engine (VolumeManager and everything
 * under it) over fenced, crashable ports, driven by a seeded scheduler, with the scenario's steps,
 * a plan of perturbations (crashes before/after numbered port calls, CSI faults) and the
 * invariants checked after every step.
 *
 * The scheduler owns every completion: an engine port call only queues an event; its effect
 * lands on the world, and its promise settles, when the seeded scheduler picks that event. After
 * each event the harness lets microtasks settle (one macrotask turn), so the engine runs until it
 * waits on a port again. Timers (the agent loops incl. housekeeping, driver delays, client deadlines, the
 * journal commit) are events on the same virtual clock. Same seed + same plan = same trace hash.
 *
 * A crash ends an engine life: every event of that life is dropped (no port call of it settles,
 * no effect of it lands), its loops stop. CSI calls already at the driver carry on there (restart)
 * or die with the driver (reboot). A reboot also unmounts everything, restarts the driver (state
 * kept, in-flight calls lost, locks cleared) and cuts power under the filesystem (DurableFs).
 */
import { MemoryMounter } from '../adapters/memory/memoryMounter.js';
import { FakeCsiDriver, type FakeCsiFaultHandle, type FakeCsiRequest } from '../adapters/memory/fakeCsiDriver.js';
import { composeNode, type ComposedNode } from '../agent/node.js';
import type { LoopScheduler } from '../agent/runtime.js';
import {
  CsiCallError,
  GrpcStatus,
  grpcStatusName,
  type CsiDriverRegistry,
  type CsiMethod,
  type CsiNodeClient,
  type NodeCapability,
} from '../ports/csi.js';
import type { FeatureGate } from '../features/features.js';
import type { Clock } from '../ports/clock.js';
import type { ClusterView } from '../ports/cluster.js';
import type { Pod } from '../api/core.js';
import { errorCode, errorMessage, FsError, type FileSystem } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import { KubeletLayout } from '../layout/layout.js';
import { sha256Hex } from '../layout/names.js';
import { RecordingMetrics } from '../adapters/memory/recordingMetrics.js';
import type { Mounter } from '../ports/mounter.js';
import type { MountTable } from '../ports/mounter.js';
import { constructPVSourceSpec } from '../volume/spec.js';
import { type PersistentVolume } from '../api/core.js';
import { FakeCluster } from '../adapters/memory/fakeCluster.js';
import { DurableFs } from './durableFs.js';
import { removalHits, type InvariantName, type Violation } from './invariants.js';
import { fnv1a, Prng, RunningHash } from './prng.js';
import type { Scenario, ScenarioFault, ScenarioVolume } from './scenario.js';
import type { CsiFault } from '../csi/faults.js';
import type { CsiRecord, PortCallRecord, TraceEventKind, TraceStep } from '../trace/simTrace.js';

export const SIM_ROOT = '/var/lib/kubelet';
export const SIM_NODE = 'sim-node';
/** kubelet's CSI client timeout (csiTimeout, 2 minutes). */
export const CSI_CLIENT_TIMEOUT_MS = 120_000;
/** How long a "hang" fault holds a call at the driver: past the client deadline. */
export const HANG_AT_DRIVER_MS = 180_000;
/** Liveness bound after the last crash or fault. */
export const LIVENESS_BOUND_MS = 30 * 60_000;
/**
 * A run ends as not converging earlier when nothing in the world changed for this long: longer
 * than kubelet's longest operation backoff (2m2s) plus a node status period, so an engine that
 * changes nothing for this long with all its loops running will not change anything later. It
 * counts from the last change or perturbation; a planned fault perturbs when its answer reaches
 * the engine (a hang: at the client deadline), since the operation's backoff starts there.
 */
export const STUCK_WINDOW_MS = 3 * 60_000;
/** Converged must hold, with no change in the world, this long before a run ends early. */
export const QUIET_WINDOW_MS = 2_000;
export const RESTART_DELAY_MS = 1_000;
export const REBOOT_DELAY_MS = 5_000;

export type CrashKind = 'restart' | 'reboot';
export type FaultKind = 'Unavailable' | 'Aborted' | 'DeadlineExceeded' | 'Hang';
export const FAULT_KINDS: readonly FaultKind[] = ['Unavailable', 'Aborted', 'DeadlineExceeded', 'Hang'];

export type Perturbation =
  | { readonly kind: 'crash'; readonly crash: CrashKind; readonly at: 'before' | 'after'; readonly seq: number }
  | { readonly kind: 'fault'; readonly fault: FaultKind; readonly csiCall: number };

/**
 * The rule a planned fault puts on its one call: the explorer's `--faults` kinds in the one fault
 * model. A hang holds the call at the driver past the client's deadline, so the engine sees
 * DEADLINE_EXCEEDED after 2 minutes while the driver finishes it a minute later.
 */
export function planFaultRule(fault: FaultKind, method: CsiMethod, volumeId: string): CsiFault {
  const base = { method, times: 1, ...(volumeId === '' ? {} : { volumeId }) };
  switch (fault) {
    case 'Unavailable':
      return { ...base, code: GrpcStatus.UNAVAILABLE };
    case 'Aborted':
      return { ...base, code: GrpcStatus.ABORTED };
    case 'DeadlineExceeded':
      return { ...base, code: GrpcStatus.DEADLINE_EXCEEDED, afterEffect: true };
    case 'Hang':
      return { ...base, delayMs: HANG_AT_DRIVER_MS };
  }
}

/** `reboot:after:57`, `restart:before:12`, `fault:Hang:3` (the 3rd CSI call of the run). */
export function formatPerturbation(p: Perturbation): string {
  return p.kind === 'crash' ? `${p.crash}:${p.at}:${p.seq}` : `fault:${p.fault}:${p.csiCall}`;
}

export function formatPlan(plan: readonly Perturbation[]): string {
  return plan.map(formatPerturbation).join(',');
}

export function parsePlan(text: string): Perturbation[] {
  if (text.trim() === '') return [];
  return text.split(',').map((part) => {
    const bits = part.trim().split(':');
    if (bits.length === 3 && (bits[0] === 'restart' || bits[0] === 'reboot') && (bits[1] === 'before' || bits[1] === 'after') && /^\d+$/.test(bits[2] ?? '')) {
      return { kind: 'crash', crash: bits[0], at: bits[1], seq: Number(bits[2]) };
    }
    if (bits.length === 3 && bits[0] === 'fault' && FAULT_KINDS.includes(bits[1] as FaultKind) && /^\d+$/.test(bits[2] ?? '')) {
      return { kind: 'fault', fault: bits[1] as FaultKind, csiCall: Number(bits[2]) };
    }
    throw new Error(`bad plan item ${JSON.stringify(part)}: want restart|reboot:before|after:SEQ or fault:${FAULT_KINDS.join('|')}:N`);
  });
}

export interface SimOptions {
  readonly scenario: Scenario;
  readonly gates: FeatureGate;
  readonly seed: number;
  readonly plan?: readonly Perturbation[];
  /** Record per-step file and mount diffs and node status (slower; for counterexamples). */
  readonly fullTrace?: boolean;
  /** Record the world-state hash at every crash point (before/after each numbered call). */
  readonly recordCrashPoints?: boolean;
  /** Record every numbered call as it is made (SimResult.calls): what a plan's seq refers to. */
  readonly recordCalls?: boolean;
}

export interface CrashPoint {
  readonly seq: number;
  readonly at: 'before' | 'after';
  /** Hash of everything a crash keeps: files (and what is durable), mounts, driver, cluster, scenario progress. */
  readonly state: string;
  /** Engine life the call belongs to. */
  readonly life: number;
}

export interface SimResult {
  readonly violations: readonly Violation[];
  readonly traceHash: string;
  readonly steps: number;
  readonly portCalls: number;
  readonly csiCalls: number;
  readonly virtualMs: number;
  readonly endReason: 'converged' | 'stuck' | 'bound';
  readonly crashPoints: readonly CrashPoint[];
  readonly trace: readonly TraceStep[];
  /** Hash of the world when the run ended. */
  readonly finalState: string;
  /** With recordCalls: every numbered call, in order. */
  readonly calls: readonly CallRecord[];
}

/** One numbered call of a run: a port call, or a CSI call (with its index among the run's CSI calls). */
export interface CallRecord {
  readonly seq: number;
  /** `fs.mkdir /var/lib/kubelet/...`, `csi.NodeStageVolume vol-1`. */
  readonly label: string;
  readonly csiIndex?: number;
}

// ------------------------------------------------------------------ scheduler

type Domain = string;

interface SimEvent {
  readonly id: number;
  readonly domain: Domain;
  readonly kind: TraceEventKind;
  readonly label: string;
  readonly due: number;
  readonly run: () => void | Promise<void>;
}

const NEVER = (): Promise<never> => new Promise<never>(() => undefined);

function macroTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

class Scheduler {
  now = 0;
  #nextId = 0;
  #ready: SimEvent[] = [];
  #timers: SimEvent[] = [];

  constructor(private readonly rng: Prng) {}

  ready(domain: Domain, kind: TraceEventKind, label: string, run: () => void | Promise<void>): void {
    this.#ready.push({ id: this.#nextId++, domain, kind, label, due: this.now, run });
  }

  /** Queues `run` at now + delayMs; returns the event's id (for {@link cancel}). */
  timer(domain: Domain, delayMs: number, kind: TraceEventKind, label: string, run: () => void | Promise<void>): number {
    const id = this.#nextId++;
    this.#timers.push({ id, domain, kind, label, due: this.now + Math.max(0, delayMs), run });
    return id;
  }

  /** Removes a queued timer (a no-op once it ran or was dropped). */
  cancel(id: number): void {
    const i = this.#timers.findIndex((t) => t.id === id);
    if (i >= 0) this.#timers.splice(i, 1);
  }

  drop(domain: Domain): void {
    this.#ready = this.#ready.filter((e) => e.domain !== domain);
    this.#timers = this.#timers.filter((e) => e.domain !== domain);
  }

  hasReady(domainPrefix: string): boolean {
    return this.#ready.some((e) => e.domain.startsWith(domainPrefix));
  }

  /** The next event, chosen by the PRNG among everything due now; advances time when nothing is. */
  next(): SimEvent | undefined {
    if (this.#ready.length === 0) {
      const due = this.#timers.filter((t) => t.due <= this.now);
      if (due.length === 0) {
        let min = Infinity;
        for (const t of this.#timers) if (t.due < min) min = t.due;
        if (min === Infinity) return undefined;
        this.now = min;
      }
    }
    const candidates = [...this.#ready, ...this.#timers.filter((t) => t.due <= this.now).sort((a, b) => a.due - b.due || a.id - b.id)];
    if (candidates.length === 0) return undefined;
    const pick = candidates.length === 1 ? candidates[0] : candidates[this.rng.int(candidates.length)];
    if (pick === undefined) return undefined;
    const i = this.#ready.indexOf(pick);
    if (i >= 0) this.#ready.splice(i, 1);
    else this.#timers.splice(this.#timers.indexOf(pick), 1);
    return pick;
  }
}

// ------------------------------------------------------------------ world pieces

/** The mount table, telling the simulation about every change (whoever makes it). */
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

interface LogLine {
  readonly life: number;
  readonly severity: 'I' | 'W' | 'E';
  readonly msg: string;
}

class LifeLogger implements Logger {
  constructor(
    private readonly lines: LogLine[],
    private readonly life: number,
  ) {}
  info(msg: string): void {
    this.lines.push({ life: this.life, severity: 'I', msg });
  }
  warning(msg: string): void {
    this.lines.push({ life: this.life, severity: 'W', msg });
  }
  error(_err: unknown, msg: string): void {
    this.lines.push({ life: this.life, severity: 'E', msg });
  }
  v(): Logger {
    return this;
  }
  enabled(): boolean {
    return false;
  }
}

interface Life {
  readonly id: number;
  readonly domain: Domain;
  alive: boolean;
  node?: ComposedNode;
}

interface InFlight {
  readonly driver: string;
  readonly method: CsiMethod;
  readonly volumeId: string;
}

function uniqueName(driver: string, handle: string): string {
  return `kubernetes.io/csi/${driver}^${handle}`;
}

// ------------------------------------------------------------------ the simulation

export class Simulation {
  readonly #opt: SimOptions;
  readonly #scenario: Scenario;
  readonly #rng: Prng;
  readonly #sched: Scheduler;
  readonly #fs: DurableFs;
  readonly #mounter: ObservedMounter;
  readonly #cluster = new FakeCluster({ watch: true });
  readonly #drivers = new Map<string, FakeCsiDriver>();
  readonly #driverEpoch = { n: 0 };
  readonly #metrics = new RecordingMetrics();
  readonly #logs: LogLine[] = [];
  readonly #layout = new KubeletLayout(SIM_ROOT);
  readonly #plan: readonly Perturbation[];
  readonly #hash = new RunningHash();
  readonly #violations: Violation[] = [];
  readonly #seenInvariants = new Set<InvariantName>();
  readonly #trace: TraceStep[] = [];
  readonly #crashPoints: CrashPoint[] = [];
  readonly #calls: CallRecord[] = [];
  /** CSI calls at the driver that have not finished there. */
  readonly #inFlight = new Map<number, InFlight>();
  readonly #running = new Set<string>();
  /** driver|volumeId|pod uid of every NodePublishVolume that returned OK in this run (all lives). */
  readonly #setUp = new Set<string>();
  /** Scenario `readError` steps: path → errno and how many more reads of it fail. */
  readonly #readErrors = new Map<string, { code: string; left: number }>();
  #life: Life = { id: 0, domain: 'life:0', alive: false };
  #seq = 0;
  #csiCount = 0;
  #step = 0;
  #current: TraceStep | undefined;
  #stepIndex = 0;
  #stepStartedMs: number | undefined;
  #lastChangeMs = 0;
  #lastPerturbationMs = 0;
  #pendingCrash: CrashKind | undefined;
  #restarting = false;
  #pendingFailureChecks: { life: number; logMark: number; method: string }[] = [];
  #prevTree: string[] = [];
  #prevMounts: string[] = [];
  /** Bumped on every change to the world; keys the memos below. */
  #version = 0;
  #diffedVersion = -1;
  #convergedMemo: { key: string; why: string } | undefined;
  #stateMemo: { key: string; hash: string } | undefined;

  constructor(options: SimOptions) {
    this.#opt = options;
    this.#scenario = options.scenario;
    this.#plan = options.plan ?? [];
    this.#rng = new Prng(options.seed);
    this.#sched = new Scheduler(this.#rng);
    this.#fs = new DurableFs(() => this.#sched.now);
    this.#mounter = new ObservedMounter(this.#fs.mem);
    this.#mounter.onChange = () => this.#changed();
    this.#fs.onChange = () => this.#changed();
    this.#setUpWorld();
  }

  // ---------------------------------------------------------------- setup

  #setUpWorld(): void {
    this.#fs.mem.writeRaw(`${SIM_ROOT}/.keep`, '');
    // The VolumeAttachments of the attached volumes are this node's.
    this.#cluster.nodeName = SIM_NODE;
    for (const d of this.#scenario.drivers) {
      const capabilities: NodeCapability[] = d.stageUnstage ? ['STAGE_UNSTAGE_VOLUME'] : [];
      const driverClock: Clock = {
        nowMs: () => this.#sched.now,
        sleep: (ms) =>
          ms > 0
            ? new Promise<void>((resolve) => {
                this.#sched.timer(`driver:${this.#driverEpoch.n}`, ms, 'timer', `driver ${d.name} sleep ${ms}ms`, resolve);
              })
            : Promise.resolve(),
      };
      const driver = new FakeCsiDriver({ name: d.name, fs: this.#fs, mounter: this.#mounter, clock: driverClock, capabilities, mode: d.mode, volumeLocks: true });
      driver.observer = {
        arrived: (seq, method, volumeId, request) => this.#onArrive(d.name, seq, method, volumeId, request),
        finished: (call) => {
          this.#inFlight.delete(this.#driverSeqKey(d.name, call.seq));
          if (call.outcome === 'OK' && call.method !== 'NodeGetCapabilities') this.#changed();
        },
      };
      this.#drivers.set(d.name, driver);
      // Both lifecycle modes: scenario drivers serve inline ephemeral volumes too (as csi-driver-host-path's CSIDriver lists them).
      this.#cluster.setCSIDriver({ name: d.name, attachRequired: d.attachRequired, podInfoOnMount: d.podInfoOnMount, volumeLifecycleModes: ['Persistent', 'Ephemeral'] });
    }
    for (const v of this.#scenario.volumes) {
      if (v.inline) continue;
      const spec = constructPVSourceSpec(v.name, v.driver, v.handle, v.volumeMode);
      const pv: PersistentVolume = spec.kind === 'persistent' ? spec.persistentVolume : { name: v.name };
      const attachRequired = this.#scenario.drivers.find((d) => d.name === v.driver)?.attachRequired ?? true;
      this.#cluster.addPersistentVolume(pv, { namespace: 'default', name: `claim-${v.name}` }, { attached: attachRequired });
    }
    for (const p of this.#scenario.pods) if (p.running) this.#addPod(p.uid);
    this.#fs.commit(0);
  }

  #pod(uid: string): Pod {
    const p = this.#scenario.pods.find((x) => x.uid === uid);
    if (p === undefined) throw new Error(`unknown pod ${uid}`);
    const vols = p.volumes.map((n) => this.#volume(n));
    return {
      uid,
      namespace: 'default',
      name: `pod-${uid}`,
      nodeName: SIM_NODE,
      volumes: vols.map((v) => (v.inline ? { name: v.name, csi: { driver: v.driver } } : { name: v.name, persistentVolumeClaim: { claimName: `claim-${v.name}` } })),
      blockVolumeNames: vols.filter((v) => v.volumeMode === 'Block').map((v) => v.name),
    };
  }

  #volume(name: string): ScenarioVolume {
    const v = this.#scenario.volumes.find((x) => x.name === name || x.handle === name);
    if (v === undefined) throw new Error(`unknown volume ${name}`);
    return v;
  }

  #addPod(uid: string): void {
    this.#cluster.addPod(this.#pod(uid));
    this.#running.add(uid);
  }

  // ---------------------------------------------------------------- run

  async run(): Promise<SimResult> {
    this.#startLife();
    let endReason: SimResult['endReason'] = 'bound';
    let quietSince: number | undefined;
    for (;;) {
      this.#pollScenario();
      const converged = this.#stepIndex >= this.#scenario.steps.length && this.#converged();
      if (converged) {
        quietSince ??= this.#sched.now;
        if (this.#sched.now - Math.max(quietSince, this.#lastChangeMs) >= QUIET_WINDOW_MS) {
          endReason = 'converged';
          break;
        }
      } else quietSince = undefined;
      if (this.#sched.now - this.#lastPerturbationMs >= LIVENESS_BOUND_MS) {
        endReason = 'bound';
        break;
      }
      if (
        !this.#restarting &&
        this.#inFlight.size === 0 &&
        // An advance step is time the scenario lets pass on purpose, not the engine being stuck;
        // a converged world waits out its quiet window.
        this.#scenario.steps[this.#stepIndex]?.kind !== 'advance' &&
        !converged &&
        this.#sched.now - Math.max(this.#lastChangeMs, this.#lastPerturbationMs) >= STUCK_WINDOW_MS &&
        !this.#sched.hasReady('')
      ) {
        endReason = 'stuck';
        break;
      }
      const ev = this.#sched.next();
      if (ev === undefined) {
        endReason = 'stuck';
        break;
      }
      this.#fs.tick(this.#sched.now);
      await this.#runEvent(ev);
    }
    this.#settleFailureChecks(true);
    // Liveness is owed once the faults have ended: a call a driver still holds on a hang (until
    // its process restarts, which nothing in the run did after the call arrived) is a fault
    // that never ended.
    const held = [...this.#drivers.values()].some((d) => d.hangingCalls() > 0);
    if (endReason !== 'converged' && !held) {
      this.#violate('converges', this.#whyNotConverged(endReason));
    }
    return {
      violations: this.#violations,
      traceHash: this.#hash.hex(),
      steps: this.#step,
      portCalls: this.#seq,
      csiCalls: this.#csiCount,
      virtualMs: this.#sched.now,
      endReason,
      crashPoints: this.#crashPoints,
      trace: this.#trace,
      finalState: this.#worldState(),
      calls: this.#calls,
    };
  }

  async #runEvent(ev: SimEvent): Promise<void> {
    this.#beginStep(ev.kind, ev.label);
    await ev.run();
    await macroTurn();
    this.#afterStep();
  }

  #beginStep(kind: TraceEventKind, label: string): void {
    this.#step++;
    this.#hash.add(`${this.#sched.now}|${kind}|${label}`);
    // The step's record exists for a full trace only (the explorer's runs keep the hash).
    if (this.#opt.fullTrace !== true) return;
    this.#current = {
      step: this.#step,
      timeMs: this.#sched.now,
      life: this.#life.id,
      event: { kind, label },
      calls: [],
      volumesInUse: [],
      volumesAttached: [],
      violations: [],
    };
    this.#trace.push(this.#current);
  }

  #afterStep(): void {
    if (this.#pendingCrash !== undefined) {
      const kind = this.#pendingCrash;
      this.#pendingCrash = undefined;
      this.#crash(kind);
    }
    this.#settleFailureChecks(false);
    const cur = this.#current;
    if (cur !== undefined && this.#opt.fullTrace === true) {
      cur.volumesInUse = [...this.#cluster.volumesInUse];
      cur.volumesAttached = this.#cluster.volumesAttached.map((v) => v.name).sort();
      // Files change through the fenced fs (engine), the driver and the scenario, which all bump #version.
      if (this.#version !== this.#diffedVersion) {
        this.#diffedVersion = this.#version;
        const tree = this.#fs.mem.tree(SIM_ROOT);
        const mounts = this.#mounter.entries().map((e) => e.mountPoint).slice(1);
        const fsDiff = diff(this.#prevTree, tree);
        const mDiff = diff(this.#prevMounts, mounts);
        if (fsDiff.added.length + fsDiff.removed.length > 0) cur.fs = fsDiff;
        if (mDiff.added.length + mDiff.removed.length > 0) cur.mounts = mDiff;
        this.#prevTree = tree;
        this.#prevMounts = mounts;
      }
    }
  }

  /**
   * A failed CSI call is visible once its life logs an error line after it. The operation that
   * made the call may still clean up (more port calls) before it fails and logs, so a check stays
   * open while its life runs; it is a violation only if the run ends with its life still running
   * and nothing logged (a crash before the line is written takes the obligation with it).
   */
  #settleFailureChecks(runEnded: boolean): void {
    this.#pendingFailureChecks = this.#pendingFailureChecks.filter((check) => {
      if (check.life !== this.#life.id || !this.#life.alive) return false;
      if (this.#logs.slice(check.logMark).some((l) => l.life === check.life && l.severity === 'E')) return false;
      if (runEnded) this.#violate('failure-visible', `${check.method} failed and the engine logged no error line for it`);
      return !runEnded;
    });
  }

  #record(call: PortCallRecord): void {
    // The engine numbers its temporary files with a process-wide counter: normalise it so that a
    // run's hash does not depend on the runs before it in the same process.
    this.#hash.add(`${call.seq}|${call.port}.${call.op}|${call.args}|${call.result}`);
    this.#current?.calls.push(call);
  }

  #changed(): void {
    this.#lastChangeMs = this.#sched.now;
    this.#version++;
  }

  #violate(invariant: InvariantName, message: string): void {
    this.#violations.push({ invariant, step: this.#step, message });
    this.#seenInvariants.add(invariant);
    this.#current?.violations.push(invariant);
    this.#hash.add(`violation|${invariant}|${message}`);
  }

  // ---------------------------------------------------------------- engine lives

  #startLife(): void {
    const life: Life = { id: this.#life.id + 1, domain: `life:${this.#life.id + 1}`, alive: true };
    this.#life = life;
    this.#restarting = false;
    this.#beginStep('start', `engine life ${life.id} starts`);
    const logger = new LifeLogger(this.#logs, life.id);
    const clock: Clock = {
      nowMs: () => this.#sched.now,
      sleep: (ms) =>
        this.#portCall(life, 'clock', 'sleep', `${ms}ms`, () => new Promise<void>((resolve) => this.#sched.timer(life.domain, ms, 'timer', `sleep ${ms}ms`, resolve))),
    };
    const csi: CsiDriverRegistry = {
      client: (name) => {
        const d = this.#drivers.get(name);
        return d === undefined ? undefined : this.#fencedCsi(life, d);
      },
    };
    const scheduler: LoopScheduler = {
      setTimeout: (callback, ms, label) => (life.alive ? this.#sched.timer(life.domain, ms, 'timer', label ?? 'timer', callback) : -1),
      clearTimeout: (handle) => {
        if (typeof handle === 'number') this.#sched.cancel(handle);
      },
    };
    // The node the agent runs, from the same composition, over this life's fenced ports.
    const node = composeNode(
      {
        layout: this.#layout,
        realRootDir: SIM_ROOT,
        nodeName: SIM_NODE,
        features: this.#opt.gates,
        fs: this.#fencedFs(life),
        logger,
        clock,
        mounter: this.#fencedMounter(life),
        csiDrivers: csi,
        cluster: this.#fencedCluster(life),
      },
      { metrics: { volumeManager: this.#metrics }, scheduler, now: () => this.#sched.now, compactWhenIdle: false },
    );
    life.node = node;
    if (this.#opt.fullTrace === true) {
      node.vm.executor.onOperationComplete((e) => {
        // A fenced life's operations never settle after its crash; this is only ever the live one.
        const cur = this.#current;
        if (cur === undefined || !life.alive) return;
        const record = {
          name: e.operationName,
          volumeName: e.key.volumeName,
          podName: e.key.podName,
          startMs: this.#sched.now - e.durationMs,
          ...(e.error === undefined ? {} : { error: errorMessage(e.error) }),
        };
        (cur.operations ??= []).push(record);
      });
    }
    node.start().catch((err: unknown) => logger.error(err, 'Reconstruction failed'));
    this.#afterStep();
  }

  /** Ends the current life now (no further event of it runs) and schedules the next one. */
  #requestCrash(kind: CrashKind): void {
    if (!this.#life.alive) return;
    this.#life.alive = false;
    this.#pendingCrash = kind;
  }

  #crash(kind: CrashKind): void {
    const dead = this.#life;
    dead.alive = false;
    this.#sched.drop(dead.domain);
    this.#lastPerturbationMs = this.#sched.now;
    this.#beginStep('crash', `${kind}: engine life ${dead.id} ends`);
    if (kind === 'reboot') {
      this.#sched.drop(`driver:${this.#driverEpoch.n}`);
      this.#driverEpoch.n++;
      for (const d of this.#drivers.values()) d.reboot();
      this.#inFlight.clear();
      this.#mounter.reboot();
      this.#fs.powerCut();
      this.#changed();
    }
    this.#restarting = true;
    this.#sched.timer('world', kind === 'reboot' ? REBOOT_DELAY_MS : RESTART_DELAY_MS, 'start', 'engine restarts', () => this.#startLife());
    this.#afterStep();
  }

  // ---------------------------------------------------------------- fenced ports

  #noteCrashPoint(life: Life, seq: number, at: 'before' | 'after'): boolean {
    if (this.#opt.recordCrashPoints === true) this.#crashPoints.push({ seq, at, state: this.#worldState(), life: life.id });
    const hit = this.#plan.find((p) => p.kind === 'crash' && p.seq === seq && p.at === at);
    if (hit === undefined || hit.kind !== 'crash') return false;
    this.#requestCrash(hit.crash);
    return true;
  }

  #portCall<T>(life: Life, port: PortCallRecord['port'], op: string, args: string, effect: () => Promise<T>): Promise<T> {
    if (!life.alive) return NEVER();
    const seq = ++this.#seq;
    if (this.#opt.recordCalls === true) this.#calls.push({ seq, label: `${port}.${op} ${args}` });
    if (this.#noteCrashPoint(life, seq, 'before')) return NEVER();
    return new Promise<T>((resolve, reject) => {
      this.#sched.ready(life.domain, 'port-call', `${port}.${op} #${seq}`, async () => {
        let outcome: { ok: true; value: T } | { ok: false; err: unknown };
        try {
          outcome = { ok: true, value: await effect() };
        } catch (err) {
          outcome = { ok: false, err };
        }
        this.#record({ seq, life: life.id, port, op, args, result: outcome.ok ? 'ok' : (errorCode(outcome.err) ?? errorMessage(outcome.err)) });
        if (this.#noteCrashPoint(life, seq, 'after') || !life.alive) return;
        if (outcome.ok) resolve(outcome.value);
        else reject(outcome.err instanceof Error ? outcome.err : new Error(String(outcome.err)));
      });
    });
  }

  #fencedFs(life: Life): FileSystem {
    const fs = this.#fs;
    const read = <T>(op: string, p: string, f: () => Promise<T>): Promise<T> => this.#portCall(life, 'fs', op, p, f);
    const write = (op: string, p: string, f: () => Promise<void>): Promise<void> =>
      this.#portCall(life, 'fs', op, p, async () => {
        await f();
        this.#changed();
      });
    const remove = (op: string, p: string, f: () => Promise<void>): Promise<void> =>
      write(op, p, async () => {
        await f();
        this.#checkRemoval(p);
      });
    return {
      readdir: (p) => read('readdir', p, () => fs.readdir(p)),
      lstat: (p) => read('lstat', p, () => fs.lstat(p)),
      stat: (p) => read('stat', p, () => fs.stat(p)),
      realpath: (p) => read('realpath', p, () => fs.realpath(p)),
      readFile: (p, max, o) =>
        read('readFile', p, () => {
          const injected = this.#takeReadError(p);
          return injected === undefined ? fs.readFile(p, max, o) : Promise.reject(injected);
        }),
      readlink: (p) => read('readlink', p, () => fs.readlink(p)),
      mkdir: (p, o) => write('mkdir', p, () => fs.mkdir(p, o)),
      writeFile: (p, d, o) => write(o?.fsync === true ? 'writeFile+fsync' : 'writeFile', p, () => fs.writeFile(p, d, o)),
      rename: (a, b) =>
        write('rename', `${a} -> ${b}`, async () => {
          await fs.rename(a, b);
          this.#checkRemoval(a);
        }),
      fsyncDir: (p) => read('fsyncDir', p, () => fs.fsyncDir(p)),
      rmdir: (p) => remove('rmdir', p, () => fs.rmdir(p)),
      unlink: (p) => remove('unlink', p, () => fs.unlink(p)),
      symlink: (t, p) => write('symlink', p, () => fs.symlink(t, p)),
    };
  }

  #fencedMounter(life: Life): Mounter {
    const m = this.#mounter;
    return {
      isLikelyNotMountPoint: (p) => this.#portCall(life, 'mount', 'isLikelyNotMountPoint', p, () => m.isLikelyNotMountPoint(p)),
      mount: (s, t, f, o) => this.#portCall(life, 'mount', 'mount', `${s} ${t}`, () => m.mount(s, t, f, o)),
      unmount: (t) => this.#portCall(life, 'mount', 'unmount', t, () => m.unmount(t)),
      readMountTable: (): Promise<MountTable> => this.#portCall(life, 'mount', 'readMountTable', '', () => m.readMountTable()),
    };
  }

  #fencedCluster(life: Life): ClusterView {
    const c = this.#cluster;
    const call = <T>(op: string, args: string, f: () => Promise<T>): Promise<T> => this.#portCall(life, 'cluster', op, args, f);
    return {
      // Served synchronously, as an informer's cache is: no port call, and a dead life hears nothing.
      objectsVersion: () => c.objectsVersion?.() ?? 0,
      onChange: (listener) =>
        c.onChange?.(() => {
          if (life.alive) listener();
        }),
      signalsEveryChange: () => true,
      listPods: () => call('listPods', '', () => c.listPods()),
      getPersistentVolumeClaim: (ns, n) => call('getPersistentVolumeClaim', `${ns}/${n}`, () => c.getPersistentVolumeClaim(ns, n)),
      getPersistentVolume: (n) => call('getPersistentVolume', n, () => c.getPersistentVolume(n)),
      getCSIDriver: (n) => call('getCSIDriver', n, () => c.getCSIDriver(n)),
      getVolumeAttachment: (n) => call('getVolumeAttachment', n, () => c.getVolumeAttachment(n)),
      getSecret: (ns, n) => call('getSecret', `${ns}/${n}`, () => c.getSecret(ns, n)),
      requestServiceAccountToken: (r) => call('requestServiceAccountToken', `${r.namespace}/${r.serviceAccountName}`, () => c.requestServiceAccountToken(r)),
      getNodeStatus: () => call('getNodeStatus', '', () => c.getNodeStatus()),
      setVolumesInUse: (names) =>
        call('setVolumesInUse', names.join(','), async () => {
          const before = c.volumesInUse.join(',');
          await c.setVolumesInUse(names);
          if (before !== names.join(',')) this.#changed();
          this.#checkInUseReported(names);
        }),
    };
  }

  #fencedCsi(life: Life, driver: FakeCsiDriver): CsiNodeClient {
    const call = <T>(method: CsiMethod, volumeId: string, request: Readonly<Record<string, unknown>>, invoke: () => Promise<T>): Promise<T> => {
      if (!life.alive) return NEVER();
      const seq = ++this.#seq;
      const index = ++this.#csiCount;
      if (this.#opt.recordCalls === true) this.#calls.push({ seq, label: `csi.${method} ${volumeId}`, csiIndex: index });
      if (this.#noteCrashPoint(life, seq, 'before')) return NEVER();
      const fault = this.#plan.find((p) => p.kind === 'fault' && p.csiCall === index);
      return new Promise<T>((resolve, reject) => {
        this.#sched.ready(life.domain, 'csi-send', `${method} ${volumeId} #${seq}`, () => {
          const sentMs = this.#sched.now;
          // A planned fault applies to this call or to none: the driver takes its faults when a
          // call arrives (synchronously, inside invoke()); one this call did not take (refused
          // ABORTED as busy, or an earlier scenario fault matched first) is withdrawn below, so
          // that it never lands on a later call.
          const planned = fault !== undefined && fault.kind === 'fault' ? this.#injectPlanFault(driver, method, volumeId, fault.fault) : undefined;
          this.#record({ seq, life: life.id, port: 'csi', op: method, args: volumeId, result: 'sent' });
          if (this.#current !== undefined) this.#current.csi = { seq, driver: driver.name, method, volumeId, request: { ...request } };
          const settle = (code: string, deliver: () => void): void => {
            // The answer travels back to the engine as its own event: it may be lost in a crash.
            this.#sched.ready(life.domain, 'csi-reply', `${method} ${volumeId} #${seq} -> ${code}`, () => {
              if (method === 'NodePublishVolume' && code === 'OK') this.#noteSetUp(driver.name, volumeId, request);
              if (this.#current !== undefined) {
                const rec: CsiRecord = { seq, driver: driver.name, method, volumeId, request: { ...request }, code, durationMs: this.#sched.now - sentMs };
                this.#current.csi = rec;
              }
              this.#record({ seq, life: life.id, port: 'csi', op: method, args: volumeId, result: code });
              // A planned fault reaches the engine with this answer, not when the call arrived: a
              // hang answers DEADLINE_EXCEEDED only after kubelet's 2-minute client deadline, and
              // the operation's backoff (up to 2m2s) starts then. The stuck window counts from here.
              if (tookPlanned) this.#lastPerturbationMs = this.#sched.now;
              if (this.#noteCrashPoint(life, seq, 'after') || !life.alive) return;
              if (code !== 'OK' && method !== 'NodeGetCapabilities') this.#pendingFailureChecks.push({ life: life.id, logMark: this.#logs.length, method });
              deliver();
            });
          };
          const pending = invoke();
          const tookPlanned = planned !== undefined && planned.remaining() === 0;
          planned?.remove();
          // The client's deadline (kubelet's csiTimeout): a call the driver has not answered by
          // then fails DEADLINE_EXCEEDED at the client, while the driver may carry on with it.
          let answered = false;
          const deadline = this.#sched.timer(life.domain, CSI_CLIENT_TIMEOUT_MS, 'timer', `${method} ${volumeId} #${seq} deadline`, () => {
            if (answered) return;
            answered = true;
            settle('DEADLINE_EXCEEDED', () => reject(new CsiCallError(method, GrpcStatus.DEADLINE_EXCEEDED, `context deadline exceeded after ${CSI_CLIENT_TIMEOUT_MS} ms`)));
          });
          const answer = (code: string, deliver: () => void): void => {
            // A dead life hears nothing; an answer after the deadline reaches no one.
            if (answered || !life.alive) return;
            answered = true;
            this.#sched.cancel(deadline);
            settle(code, deliver);
          };
          pending.then(
            (v) => answer('OK', () => resolve(v)),
            (err: unknown) => {
              const code = err instanceof CsiCallError && err.code !== undefined ? grpcStatusName(err.code) : 'UNKNOWN';
              answer(code, () => reject(err instanceof Error ? err : new Error(String(err))));
            },
          );
        });
      });
    };
    return {
      nodeGetCapabilities: () => call('NodeGetCapabilities', '', {}, () => driver.nodeGetCapabilities()),
      nodeStageVolume: (req) => call('NodeStageVolume', req.volumeId, { ...req }, () => driver.nodeStageVolume(req)),
      nodeUnstageVolume: (req) => call('NodeUnstageVolume', req.volumeId, { ...req }, () => driver.nodeUnstageVolume(req)),
      nodePublishVolume: (req) => call('NodePublishVolume', req.volumeId, { ...req }, () => driver.nodePublishVolume(req)),
      nodeUnpublishVolume: (req) => call('NodeUnpublishVolume', req.volumeId, { ...req }, () => driver.nodeUnpublishVolume(req)),
    };
  }

  #injectPlanFault(driver: FakeCsiDriver, method: CsiMethod, volumeId: string, fault: FaultKind): FakeCsiFaultHandle {
    this.#lastPerturbationMs = this.#sched.now;
    return driver.inject(planFaultRule(fault, method, volumeId));
  }

  // ---------------------------------------------------------------- invariants

  #driverSeqKey(driver: string, seq: number): number {
    // Driver call seqs are per driver; fold the driver index in.
    return [...this.#drivers.keys()].indexOf(driver) * 1_000_000 + seq;
  }

  /** Wanted (running pods') volumes as driver/handle keys, and target paths of running pods. */
  #wanted(): Map<string, { driver: string; handle: string; pods: string[]; vol: ScenarioVolume }> {
    const out = new Map<string, { driver: string; handle: string; pods: string[]; vol: ScenarioVolume }>();
    for (const uid of this.#running) {
      const p = this.#scenario.pods.find((x) => x.uid === uid);
      for (const n of p?.volumes ?? []) {
        const v = this.#volume(n);
        const handle = v.inline ? '' : v.handle;
        const key = v.inline ? `${v.driver}|inline|${uid}|${v.name}` : `${v.driver}|${handle}`;
        const e = out.get(key) ?? { driver: v.driver, handle, pods: [], vol: v };
        e.pods.push(uid);
        out.set(key, e);
      }
    }
    return out;
  }

  #onArrive(driverName: string, seq: number, method: CsiMethod, volumeId: string, request: FakeCsiRequest): void {
    const driver = this.#drivers.get(driverName);
    if (driver === undefined) return;
    const key = this.#driverSeqKey(driverName, seq);
    const running = [...this.#inFlight.values()].filter((f) => f.driver === driverName && f.volumeId === volumeId);
    this.#inFlight.set(key, { driver: driverName, method, volumeId });
    const wanted = this.#wanted().get(`${driverName}|${volumeId}`);
    const state = driver.volume(volumeId);
    const req = request as Readonly<Record<string, unknown>>;
    if (method === 'NodeUnstageVolume') {
      // The issue's words: "NodeUnstageVolume never arrives while a *running* pod wants the volume
      // or while the driver has a target of it published". A pod that wants the volume is running
      // once its SetUp of it succeeded (in any life of this run) or while a target of it is
      // published; before that (a pod waiting for its volumes, e.g. while MountDevice makes sure
      // an earlier unstage has ended, kubernetes#121357) an unstage takes nothing from it.
      const users = (wanted?.pods ?? []).filter(
        (uid) => this.#setUp.has(`${driverName}|${volumeId}|${uid}`) || [...(state?.publishedAt ?? [])].some((t) => ownsTarget(uid, t)),
      );
      if (users.length > 0) this.#violate('no-unstage-in-use', `NodeUnstageVolume ${volumeId} arrived while pod ${users.join(',')} wants it`);
      else if (state !== undefined && state.publishedAt.size > 0) {
        this.#violate('no-unstage-in-use', `NodeUnstageVolume ${volumeId} arrived while the driver has it published at ${[...state.publishedAt].sort().join(', ')}`);
      }
    }
    if (method === 'NodeUnpublishVolume') {
      const target = typeof req['targetPath'] === 'string' ? req['targetPath'] : '';
      const owner = [...this.#running].find((uid) => target.includes(`/pods/${uid}/`) || target.endsWith(`/${uid}`));
      if (owner !== undefined && this.#wantedByPod(owner, driverName, volumeId)) {
        this.#violate('no-unstage-in-use', `NodeUnpublishVolume ${volumeId} arrived for running pod ${owner}'s target ${target}`);
      }
    }
    if (method === 'NodeStageVolume' && running.some((f) => f.method === 'NodeUnstageVolume')) {
      this.#violate('stage-after-unstage', `NodeStageVolume ${volumeId} arrived while a NodeUnstageVolume of it is still running at the driver`);
    }
    if (method === 'NodePublishVolume') {
      const staging = typeof req['stagingTargetPath'] === 'string' ? req['stagingTargetPath'] : '';
      if (staging !== '' && state?.stagedAt !== staging) {
        this.#violate('stage-after-unstage', `NodePublishVolume ${volumeId} arrived without a successful NodeStageVolume at ${staging}`);
      }
    }
  }

  /** A NodePublishVolume returned OK: its pod's SetUp of the volume succeeded. */
  #noteSetUp(driver: string, volumeId: string, request: Readonly<Record<string, unknown>>): void {
    const target = typeof request['targetPath'] === 'string' ? request['targetPath'] : '';
    for (const p of this.#scenario.pods) if (ownsTarget(p.uid, target)) this.#setUp.add(`${driver}|${volumeId}|${p.uid}`);
  }

  #wantedByPod(uid: string, driver: string, volumeId: string): boolean {
    const p = this.#scenario.pods.find((x) => x.uid === uid);
    return (p?.volumes ?? []).some((n) => {
      const v = this.#volume(n);
      return v.driver === driver && (v.inline || v.handle === volumeId);
    });
  }

  /**
   * A removal that takes what a driver still uses: the vol_data.json beside a path it has staged
   * or published (the only record that names the volume there), or the path itself while it is
   * still mounted. A path whose mount is already gone (a driver that unmounted, then failed to
   * remove the directory, still lists it) is only an empty directory: the next call makes it again.
   */
  #checkRemoval(removed: string): void {
    const takes = (kept: string): boolean => removalHits(removed, kept) && (removed.endsWith('/vol_data.json') || this.#mounter.isMounted(kept));
    for (const [name, d] of this.#drivers) {
      for (const [id, st] of d.volumes()) {
        if (st.stagedAt !== undefined && takes(st.stagedAt)) {
          this.#violate('nothing-removed-early', `${removed} removed while ${name} has ${id} staged at ${st.stagedAt}`);
        }
        for (const t of st.publishedAt) {
          if (takes(t)) this.#violate('nothing-removed-early', `${removed} removed while ${name} has ${id} published at ${t}`);
        }
      }
    }
  }

  #checkInUseReported(written: readonly string[]): void {
    const attached = new Set(this.#cluster.volumesAttached.map((v) => v.name));
    const inUse = new Set(written);
    const globalMounts = new Set(this.#mounter.entries().map((e) => e.mountPoint));
    for (const [name, d] of this.#drivers) {
      for (const v of this.#scenario.volumes) {
        if (v.inline || v.driver !== name) continue;
        const u = uniqueName(name, v.handle);
        if (!attached.has(u) || inUse.has(u)) continue;
        const staged = d.volume(v.handle)?.stagedAt !== undefined;
        const gm = `${SIM_ROOT}/plugins/kubernetes.io/csi/${name}/${sha256Hex(v.handle)}/globalmount`;
        if (staged || globalMounts.has(gm)) {
          this.#violate('in-use-reported', `volumesInUse [${written.join(', ')}] written without ${u}, which is attached and ${staged ? 'staged at the driver' : 'globally mounted'}`);
        }
      }
    }
  }

  /** Converged: the world is what the running pods want, and the node status says so. */
  #converged(): boolean {
    const key = `${this.#version}|${this.#inFlight.size}|${this.#restarting}|${this.#life.id}|${this.#life.alive}`;
    if (this.#convergedMemo?.key !== key) this.#convergedMemo = { key, why: this.#whyNotConverged('converged') };
    return this.#convergedMemo.why === '';
  }

  #whyNotConverged(reason: string): string {
    const problems: string[] = [];
    if (this.#restarting || !this.#life.alive) problems.push('the engine is restarting');
    if (this.#inFlight.size > 0) problems.push('CSI calls are still running at the driver');
    const quick = reason === 'converged';
    if (problems.length > 0 && quick) return problems.join('; ');
    const wanted = this.#wanted();
    for (const w of wanted.values()) {
      const d = this.#drivers.get(w.driver);
      if (d === undefined) continue;
      if (w.vol.inline) {
        const uid = w.pods[0] ?? '';
        const published = [...d.volumes()].some(([, st]) => [...st.publishedAt].some((t) => t.includes(`/pods/${uid}/`) && this.#mounter.isMounted(t)));
        if (!published) problems.push(`inline volume ${w.vol.name} of pod ${uid} is not published`);
        continue;
      }
      const st = d.volume(w.handle);
      const stages = this.#scenario.drivers.find((x) => x.name === w.driver)?.stageUnstage ?? true;
      // The driver's records survive a reboot; the mounts do not: both must be there.
      if (stages && (st?.stagedAt === undefined || !this.#mounter.isMounted(st.stagedAt))) problems.push(`${w.handle} is wanted but not staged`);
      for (const uid of w.pods) {
        const target = [...(st?.publishedAt ?? [])].find((t) => t.includes(`/pods/${uid}/`) || t.endsWith(`/${uid}`));
        if (target === undefined || !this.#mounter.isMounted(target)) problems.push(`${w.handle} is not published for pod ${uid}`);
      }
    }
    for (const [name, d] of this.#drivers) {
      for (const [id, st] of d.volumes()) {
        const isWanted = wanted.has(`${name}|${id}`) || [...wanted.values()].some((w) => w.vol.inline && w.driver === name);
        if (!isWanted) problems.push(`${id} is unwanted but the driver still has it ${st.stagedAt !== undefined ? 'staged' : 'published'}`);
        else {
          for (const t of st.publishedAt) {
            const owner = [...this.#running].find((uid) => t.includes(`/pods/${uid}/`) || t.endsWith(`/${uid}`));
            if (owner === undefined) problems.push(`${id} is still published at ${t} for a pod that is gone`);
          }
        }
      }
    }
    // The driver's answer settles most runs; the directories are looked at one by one (a walk of
    // the whole tree at every change cost the simulator a fifth of its time).
    if (quick && problems.length > 0) return problems.join('; ');
    const mem = this.#fs.mem;
    for (const v of this.#scenario.volumes) {
      if (v.inline || wanted.has(`${v.driver}|${v.handle}`)) continue;
      const dir = `${SIM_ROOT}/plugins/kubernetes.io/csi/${v.driver}/${sha256Hex(v.handle)}`;
      if (mem.typeSync(dir) !== undefined) problems.push(`the directory of unwanted volume ${v.handle} is still there`);
    }
    for (const p of this.#scenario.pods) {
      if (this.#running.has(p.uid)) continue;
      // <root>/pods/<uid>/volumes/<plugin>/<volume>/: kubelet's pod cleanup (not the volume manager) removes the rest.
      const volumes = `${SIM_ROOT}/pods/${p.uid}/volumes`;
      const left = (mem.namesSync(volumes) ?? []).some((plugin) => (mem.namesSync(`${volumes}/${plugin}`) ?? []).length > 0);
      if (left) problems.push(`pod ${p.uid} is gone but its volume directories are still there`);
    }
    if (quick && problems.length > 0) return problems.join('; ');
    const attached = new Set(this.#cluster.volumesAttached.map((v) => v.name));
    const want = [...wanted.values()]
      .filter((w) => !w.vol.inline && (this.#scenario.drivers.find((x) => x.name === w.driver)?.attachRequired ?? true))
      .map((w) => uniqueName(w.driver, w.handle))
      .filter((u) => attached.has(u))
      .sort();
    const have = [...this.#cluster.volumesInUse].sort();
    if (want.join(',') !== have.join(',')) problems.push(`volumesInUse is [${have.join(', ')}], want [${want.join(', ')}]`);
    if (problems.length === 0) return '';
    return `${reason === 'converged' ? '' : `not converged (${reason === 'stuck' ? `nothing changed for ${STUCK_WINDOW_MS / 60_000} virtual minutes` : `${LIVENESS_BOUND_MS / 60_000} virtual minutes after the last fault`}): `}${problems.join('; ')}`;
  }

  // ---------------------------------------------------------------- scenario steps

  #pollScenario(): void {
    for (;;) {
      const step = this.#scenario.steps[this.#stepIndex];
      if (step === undefined) return;
      // Steps other than wait and advance run once: their label is built then, not at every poll.
      const label = step.kind === 'wait' || step.kind === 'advance' ? '' : JSON.stringify(step);
      switch (step.kind) {
        case 'wait':
          // Converged and steady: nothing changed in the world for the quiet window.
          if (!this.#converged() || this.#sched.now - this.#lastChangeMs < QUIET_WINDOW_MS) return;
          break;
        case 'advance': {
          if (this.#stepStartedMs === undefined) {
            this.#stepStartedMs = this.#sched.now;
            this.#sched.timer('world', step.ms, 'timer', `advance ${step.ms}ms`, () => undefined);
          }
          if (this.#sched.now - this.#stepStartedMs < step.ms) return;
          this.#stepStartedMs = undefined;
          break;
        }
        case 'addPod':
          this.#beginStep('scenario', label);
          this.#addPod(step.uid);
          this.#changed();
          this.#afterStep();
          break;
        case 'deletePod':
          this.#beginStep('scenario', label);
          this.#cluster.deletePod(step.uid);
          this.#running.delete(step.uid);
          this.#changed();
          this.#afterStep();
          break;
        case 'restart':
        case 'reboot':
          if (this.#restarting) return;
          this.#stepIndex++;
          this.#life.alive = false;
          this.#crash(step.kind);
          continue;
        case 'fault':
          this.#beginStep('scenario', label);
          this.#injectScenarioFault(step.fault);
          this.#lastPerturbationMs = this.#sched.now;
          this.#afterStep();
          break;
        case 'clearFaults':
          this.#beginStep('scenario', label);
          for (const d of this.#drivers.values()) d.clearFaults();
          this.#afterStep();
          break;
        case 'restartDriver':
          // The driver's process restarts: calls at it fail UNAVAILABLE, none of their work lands,
          // its state (and the rules in force) stay.
          this.#beginStep('scenario', label);
          this.#drivers.get(step.driver)?.reboot();
          this.#lastPerturbationMs = this.#sched.now;
          this.#changed();
          this.#afterStep();
          break;
        case 'fsFault': {
          this.#beginStep('scenario', label);
          const until = this.#sched.now + step.ms;
          this.#fs.failWrites(SIM_ROOT, step.code, until);
          this.#sched.timer('world', step.ms, 'timer', `${step.code} ends`, () => this.#changed());
          // The fault perturbs the engine until it ends.
          this.#lastPerturbationMs = until;
          this.#changed();
          this.#afterStep();
          break;
        }
        case 'readError': {
          this.#beginStep('scenario', label);
          const v = this.#volume(step.volume);
          this.#readErrors.set(`${SIM_ROOT}/pods/${step.pod}/volumes/kubernetes.io~csi/${v.name}/vol_data.json`, { code: step.code, left: step.times });
          this.#lastPerturbationMs = this.#sched.now;
          this.#changed();
          this.#afterStep();
          break;
        }
        case 'deleteFile': {
          this.#beginStep('scenario', label);
          const v = this.#volume(step.volume);
          const file = v.volumeMode === 'Block' ? `${SIM_ROOT}/plugins/kubernetes.io/csi/volumeDevices/${v.name}/data/vol_data.json` : `${SIM_ROOT}/pods/${step.pod}/volumes/kubernetes.io~csi/${v.name}/vol_data.json`;
          if (this.#fs.loseFile(file)) this.#changed();
          this.#afterStep();
          break;
        }
      }
      this.#stepIndex++;
    }
  }

  /** The error a scenario `readError` injects into this read of `p`, consuming one of its times. */
  #takeReadError(p: string): FsError | undefined {
    const e = this.#readErrors.get(p);
    if (e === undefined) return undefined;
    if (--e.left <= 0) this.#readErrors.delete(p);
    this.#lastPerturbationMs = this.#sched.now;
    this.#changed();
    // EACCES fails the open, EIO the read itself.
    return new FsError(e.code, p, e.code === 'EACCES' ? 'open' : 'read');
  }

  /** A scenario's fault rule goes to the driver of its volume, or to every driver when it names none. */
  #injectScenarioFault(f: ScenarioFault): void {
    const vol = f.volumeId === undefined ? undefined : this.#scenario.volumes.find((v) => !v.inline && v.handle === f.volumeId);
    const drivers = vol === undefined ? [...this.#drivers.values()] : [this.#drivers.get(vol.driver)].filter((d): d is FakeCsiDriver => d !== undefined);
    for (const d of drivers) d.inject(f);
  }

  // ---------------------------------------------------------------- world state

  /** Hash of everything a crash keeps. */
  #worldState(): string {
    const key = `${this.#version}|${this.#stepIndex}|${this.#fs.commits}|${this.#fs.dirty}|${this.#fs.writeFaultState()}|${[...this.#inFlight.keys()].join(',')}`;
    if (this.#stateMemo?.key === key) return this.#stateMemo.hash;
    const hash = this.#computeWorldState();
    this.#stateMemo = { key, hash };
    return hash;
  }

  /** The files' part of the world state: re-read only after the page cache changed. */
  #filesState(): string {
    const version = this.#fs.pageVersion;
    if (this.#filesMemo?.version === version) return this.#filesMemo.text;
    const parts: string[] = [];
    for (const p of this.#fs.mem.tree(SIM_ROOT)) {
      if (p.endsWith('.json')) {
        let content = '';
        try {
          content = this.#fs.readTextSync(p);
        } catch {
          content = '?';
        }
        parts.push(`${p}=${fnv1a(content)}`);
      } else parts.push(p);
    }
    const text = parts.join('\n');
    this.#filesMemo = { version, text };
    return text;
  }

  #filesMemo: { readonly version: number; readonly text: string } | undefined;

  #computeWorldState(): string {
    const parts: string[] = [`step ${this.#stepIndex}`, `running ${[...this.#running].sort().join(',')}`, this.#filesState()];
    parts.push(`durable ${this.#fs.commits} ${this.#fs.dirty} ${this.#fs.writeFaultState()}`);
    for (const e of this.#mounter.entries()) parts.push(`m ${e.mountPoint} ${e.source}`);
    for (const [name, d] of this.#drivers) {
      parts.push(`d ${name} ${JSON.stringify(d.snapshot())}`);
    }
    for (const f of [...this.#inFlight.values()].map((x) => `${x.driver} ${x.method} ${x.volumeId}`).sort()) parts.push(`in-flight ${f}`);
    parts.push(`inUse ${this.#cluster.volumesInUse.join(',')}`);
    for (const [p, e] of [...this.#readErrors].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) parts.push(`read-error ${p} ${e.code} ${e.left}`);
    return fnv1a(parts.join('\n'));
  }
}

/** A pod's target path (filesystem `.../pods/<uid>/...`, block publish file `.../<uid>`). */
function ownsTarget(uid: string, target: string): boolean {
  return target.includes(`/pods/${uid}/`) || target.endsWith(`/${uid}`);
}

function diff(before: readonly string[], after: readonly string[]): { added: string[]; removed: string[] } {
  const b = new Set(before);
  const a = new Set(after);
  return { added: after.filter((p) => !b.has(p)), removed: before.filter((p) => !a.has(p)) };
}

/** Runs one simulation. */
export function simulate(options: SimOptions): Promise<SimResult> {
  return new Simulation(options).run();
}
