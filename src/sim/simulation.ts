/**
 * One deterministic simulation run: the real, unchanged engine (VolumeManager and everything
 * under it) over fenced, crashable ports, driven by a seeded scheduler, with the scenario's steps,
 * a plan of perturbations (crashes before/after numbered port calls, CSI faults) and the
 * invariants checked after every step.
 *
 * The scheduler (scheduler.ts) owns every completion: an engine port call only queues an event
 * (fencedPorts.ts); its effect lands on the world (world.ts), and its promise settles, when the
 * seeded scheduler picks that event. After each event the harness lets microtasks settle
 * (scheduler.ts: MACRO_TURN_EVERY), so the engine runs until it waits on a port again. Timers (the
 * agent loops incl. housekeeping, driver delays, client deadlines, the journal commit) are events
 * on the same virtual clock. Same seed + same plan = same trace hash.
 *
 * A crash ends an engine life: every event of that life is dropped (no port call of it settles,
 * no effect of it lands), its loops stop. CSI calls already at the driver carry on there (restart)
 * or die with the driver (reboot). A reboot also unmounts everything, restarts the driver (state
 * kept, in-flight calls lost, locks cleared) and cuts power under the filesystem (DurableFs).
 * A SIGTERM (a plan's `stop`, the scenario's `sigterm` step) first stops the life's runtime
 * gracefully (AgentRuntime.stop: no loop iteration starts, the ones in flight and the operations
 * run on for up to the grace period, timed by the virtual clock); then the process exits, which
 * ends the life as a restart does (what is still in flight is abandoned).
 *
 * This module is the run itself: the loop, the engine lives, the scenario's steps, the trace and
 * the violations found by the checks (checks.ts).
 */
import { composeNode, DEFAULT_SHUTDOWN_GRACE_MS } from '../agent/node.js';
import type { AgentRuntime, LoopScheduler } from '../agent/runtime.js';
import type { FeatureGate } from '../features/features.js';
import { errorMessage } from '../ports/fs.js';
import type { Logger, LogValues } from '../ports/logger.js';
import { reconstructionFinding } from '../trace/reconstruction.js';
import { KubeletLayout } from '../layout/layout.js';
import { RecordingMetrics } from '../adapters/memory/recordingMetrics.js';
import type { InvariantName, Violation } from './invariants.js';
import { Prng, RunningHash } from './prng.js';
import { formatScenarioDuration, type Scenario } from './scenario.js';
import type { PortCallRecord, TraceEventKind, TraceStep } from '../trace/simTrace.js';
import { checkArrival, checkInUseReported, checkRemoval, checkSinglePod, convergenceProblems, type Finding } from './checks.js';
import { Fence, type CallRecord, type CrashPoint, type EngineLife } from './fencedPorts.js';
import type { CrashKind, Perturbation } from './plan.js';
import { MACRO_TURN_EVERY, Scheduler } from './scheduler.js';
import { SIM_NODE, SIM_ROOT, SimWorld } from './world.js';

/** Liveness bound after the last crash or fault. */
export const LIVENESS_BOUND_MS = 30 * 60_000;
/**
 * A run ends as not converging earlier when nothing in the world changed for this long: longer
 * than kubelet's longest operation backoff (2m2s) plus a node status period, so an engine that
 * changes nothing for this long with all its loops running will not change anything later. It
 * counts from the last change or perturbation; a fault (planned, or a scenario's rule with a
 * count) perturbs when its answer reaches the engine (a hang: at the client deadline; a
 * clientTimeout rule: at its timeout), since the operation's backoff starts there.
 */
export const STUCK_WINDOW_MS = 3 * 60_000;
/** Converged must hold, with no change in the world, this long before a run ends early. */
export const QUIET_WINDOW_MS = 2_000;
/**
 * With a driver that never returns (`hang: forever`), converged must hold this long, changes or
 * not, for a `wait` step to pass or the run to end. The engine retries the operations that driver
 * holds for ever (answered ABORTED: its volume stays busy), every 100 ms when a mount and an
 * unmount of the volume alternate (a different operation name starts without backoff, as in
 * kubelet's nestedpendingoperations.go Run), so the world is never quiet; its volumes are left
 * out of the convergence check, and what is owed of the others converged.
 */
export const EXEMPT_CHURN_WINDOW_MS = 60_000;
/** A settled promise: `then` on it queues a microtask and allocates no resolving functions. */
const RESOLVED = Promise.resolve();

export const RESTART_DELAY_MS = 1_000;
export const REBOOT_DELAY_MS = 5_000;

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

interface LogLine {
  readonly life: number;
  readonly severity: 'I' | 'W' | 'E';
  readonly msg: string;
}

class LifeLogger implements Logger {
  constructor(
    private readonly lines: LogLine[],
    private readonly life: number,
    /** Sees every info line with its values (the trace's reconstruction findings). */
    private readonly onInfo?: (msg: string, values: LogValues | undefined) => void,
  ) {}
  info(msg: string, values?: LogValues): void {
    this.lines.push({ life: this.life, severity: 'I', msg });
    this.onInfo?.(msg, values);
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

/**
 * The line kubelet's reconciler logs once reconstruction has ended, before its first pass
 * (reconciler.go's "Reconciler: start to sync state"): the simulator's independent witness of the
 * end of a life's reconstruction (the `reconstruction-first` invariant), whatever the runtime does.
 */
export const RECONSTRUCTION_ENDED_LINE = 'Reconciler: start to sync state';

export class Simulation {
  readonly #opt: SimOptions;
  readonly #scenario: Scenario;
  readonly #sched: Scheduler;
  readonly #world: SimWorld;
  readonly #fence: Fence;
  readonly #metrics = new RecordingMetrics();
  readonly #logs: LogLine[] = [];
  readonly #layout = new KubeletLayout(SIM_ROOT);
  readonly #hash = new RunningHash();
  readonly #violations: Violation[] = [];
  readonly #trace: TraceStep[] = [];
  #life: EngineLife = { id: 0, domain: 'life:0', alive: false };
  /** The last engine life whose reconstruction ended (logged {@link RECONSTRUCTION_ENDED_LINE}). */
  #reconstructedLife = 0;
  /** The life of the last `reconstruction-first` violation: one a life is enough. */
  #earlyLife = 0;
  #step = 0;
  #current: TraceStep | undefined;
  #stepIndex = 0;
  #stepStartedMs: number | undefined;
  /** Since when the world has been converged at every poll of the `wait` step now owed. */
  #waitConvergedSince: number | undefined;
  #lastPerturbationMs = 0;
  #pendingCrash: CrashKind | undefined;
  #restarting = false;
  /** The current life's runtime (a SIGTERM stops it). */
  #runtime: AgentRuntime | undefined;
  /** A SIGTERM the plan delivered during the current step: delivered once the step ends. */
  #pendingSigterm = false;
  /** The current life got a SIGTERM and its runtime is stopping: the process exits once the stop returned. */
  #stopping = false;
  /** The stop returned (whether it abandoned work): the process exits now. */
  #stopReturned: { readonly abandoned: boolean } | undefined;
  #pendingFailureChecks: { life: number; logMark: number; method: string }[] = [];
  #prevTree: string[] = [];
  #prevMounts: string[] = [];
  #diffedVersion = -1;
  /** The last convergence answer and what it depended on (compared field by field: no key built per step). */
  #convergedMemo: { version: number; inFlight: number; neverReturns: number; restarting: boolean; stopping: boolean; life: number; alive: boolean; why: string } | undefined;

  constructor(options: SimOptions) {
    this.#opt = options;
    this.#scenario = options.scenario;
    this.#sched = new Scheduler(new Prng(options.seed));
    this.#world = new SimWorld(options.scenario, this.#sched, options.seed);
    this.#world.onArrive = (driver, method, volumeId, request) => this.#violateAll(checkArrival(this.#world, driver, method, volumeId, request));
    this.#world.onPublishFinished = (driver, volumeId) => this.#violateAll(checkSinglePod(this.#world, driver, volumeId));
    this.#fence = new Fence(
      this.#sched,
      this.#world,
      { plan: options.plan ?? [], ...(options.recordCalls === undefined ? {} : { recordCalls: options.recordCalls }), ...(options.recordCrashPoints === undefined ? {} : { recordCrashPoints: options.recordCrashPoints }) },
      {
        crash: (kind) => this.#requestCrash(kind),
        sigterm: () => {
          this.#pendingSigterm = true;
        },
        record: (seq, life, port, op, args, result) => this.#record(seq, life, port, op, args, result),
        csi: (call) => {
          if (this.#current !== undefined) this.#current.csi = call;
        },
        perturbed: () => {
          this.#perturbUntil(this.#sched.now);
        },
        removed: (path) => this.#violateAll(checkRemoval(this.#world, path)),
        acts: (life, what) => {
          if (life.id === this.#reconstructedLife || life.id === this.#earlyLife) return;
          this.#earlyLife = life.id;
          this.#violate('reconstruction-first', `engine life ${life.id}: ${what} before its reconstruction ended`);
        },
        inUseWritten: (names) => this.#violateAll(checkInUseReported(this.#world, names)),
        csiFailed: (life, method) => this.#pendingFailureChecks.push({ life: life.id, logMark: this.#logs.length, method }),
        worldState: () => this.#world.state(this.#stepIndex),
      },
    );
  }

  // ---------------------------------------------------------------- run

  /**
   * The run: its loop is driven by callbacks, not awaits. After each event the engine's
   * microtasks drain (a tick queued behind them, scheduler.ts: MACRO_TURN_EVERY), and the loop
   * goes on in that tick, with every queue empty, as the continuation of an `await` of a promise
   * the tick resolved would: a promise, its resolving functions and an async resumption a step
   * less (the loop's awaits were about a tenth of the simulator's allocation).
   */
  run(): Promise<SimResult> {
    return new Promise<SimResult>((resolve, reject) => {
      this.#settle = { resolve, reject };
      this.#guarded(() => {
        this.#startLife();
        this.#top();
      });
    });
  }

  /** How the run's promise settles (set by run()). */
  #settle: { readonly resolve: (r: SimResult) => void; readonly reject: (err: unknown) => void } | undefined;
  /** Since when the world has been converged at every turn of the loop (cleared when it is not). */
  #quietSince: number | undefined;

  /** Runs `f`; what it throws rejects the run. */
  #guarded(f: () => void): void {
    try {
      f();
    } catch (err) {
      this.#fail(err);
    }
  }

  /**
   * The drain's tick: the loop goes on in it. The tick ran with the microtask queue empty, as the
   * continuation of an await of a promise it resolved would; what the turn then queues (the next
   * event's effects and the engine's answers to them) drains before the next tick, since the turn
   * queues that tick from a microtask (see #turn).
   */
  readonly #resume = (): void => {
    this.#guarded(() => {
      this.#afterStep();
      this.#top();
    });
  };
  readonly #resumeStopping = (): void => {
    void RESOLVED.then(this.#afterStopTurn);
  };
  readonly #afterStopTurn = (): void => {
    this.#guarded(() => {
      const returned = this.#stopReturned;
      if (returned !== undefined) {
        this.#stopReturned = undefined;
        this.#crash('stop', returned.abandoned);
        this.#top();
        return;
      }
      this.#turn();
    });
  };

  /** The top of the loop. */
  #top(): void {
    if (this.#stopping) {
      // A stop settles in microtasks (at once when nothing is in flight): let it, and the
      // process exits as soon as it returned.
      setImmediate(this.#resumeStopping);
      return;
    }
    this.#turn();
  }

  /** One turn of the loop: ends the run, or runs the next event and waits for the engine to drain. */
  #turn(): void {
    this.#pollScenario();
    const converged = this.#stepIndex >= this.#scenario.steps.length && this.#converged();
    if (converged) {
      const quietSince = (this.#quietSince ??= this.#sched.now);
      if (this.#sched.now - Math.max(quietSince, this.#world.lastChangeMs) >= QUIET_WINDOW_MS || this.#exemptChurnFor(quietSince)) {
        this.#end('converged');
        return;
      }
    } else this.#quietSince = undefined;
    if (this.#sched.now - this.#lastPerturbationMs >= LIVENESS_BOUND_MS) {
      this.#end('bound');
      return;
    }
    if (
      !this.#restarting &&
      // A stopping life ends by its grace period at the latest.
      !this.#stopping &&
      // A call held by a driver that never returns is no reason to wait.
      this.#world.inFlightOwed() === 0 &&
      // An advance step is time the scenario lets pass on purpose, not the engine being stuck;
      // a converged world waits out its quiet window.
      this.#scenario.steps[this.#stepIndex]?.kind !== 'advance' &&
      !converged &&
      this.#sched.now - Math.max(this.#world.lastChangeMs, this.#lastPerturbationMs) >= STUCK_WINDOW_MS &&
      !this.#sched.hasReady('')
    ) {
      this.#end('stuck');
      return;
    }
    const ev = this.#sched.next();
    if (ev === undefined) {
      this.#end('stuck');
      return;
    }
    this.#world.fs.tick(this.#sched.now);
    this.#beginStep(ev.kind, ev.label, ev.labelSeq);
    // The drain's tick is queued from a microtask: after the event's own promise settled (as
    // `await ran` before the tick would), or at once. A tick queued from a tick or a macrotask
    // (the loop's turn runs in one) would run before the engine's microtasks.
    const ran = ev.run();
    if (ran === undefined) void RESOLVED.then(this.#drain);
    else void ran.then(this.#drain, this.#fail);
  }

  /** Waits for the engine to drain (a tick, or every {@link MACRO_TURN_EVERY} events a macrotask turn), then resumes. */
  readonly #drain = (): void => {
    if (this.#step % MACRO_TURN_EVERY === 0) setImmediate(this.#resume);
    else process.nextTick(this.#resume);
  };
  readonly #fail = (err: unknown): void => {
    this.#settle?.reject(err);
  };

  /** The run ended: its last checks, and its result. */
  #end(endReason: SimResult['endReason']): void {
    this.#settle?.resolve(this.#result(endReason));
  }

  #result(endReason: SimResult['endReason']): SimResult {
    this.#settleFailureChecks(true);
    // Liveness is owed once the faults have ended: a call a driver still holds on a hang (until
    // its process restarts, which nothing in the run did after the call arrived) is a fault
    // that never ended.
    // A driver that never returns (`hang: forever`) is exempt on its own (convergenceProblems
    // leaves its volumes out): its held calls excuse nothing else.
    const held = [...this.#world.drivers.values()].some((d) => !this.#world.neverReturns.has(d.name) && d.hangingCalls() > 0);
    const why = endReason === 'converged' || held ? '' : this.#whyNotConverged(endReason);
    // The steps done and all that is owed converged, but never quiet: the engine keeps retrying
    // the calls a driver that never returns answers ABORTED (its volume stays busy), which is the
    // exempt driver's doing, not a liveness failure.
    // The same holds while only `wait` steps are left: a wait needs the world quiet, which that
    // churn never lets it be, and a wait changes nothing, so the run is where it would be with the
    // steps done (explorer findings, generated workloads 8633 and 9984).
    const onlyWaitsLeft = this.#scenario.steps.slice(this.#stepIndex).every((s) => s.kind === 'wait');
    const exemptChurn = why === '' && this.#world.neverReturns.size > 0 && onlyWaitsLeft;
    if (endReason !== 'converged' && !held && !exemptChurn) this.#violate('converges', why === '' ? this.#whyNeverQuiet(endReason) : why);
    return {
      violations: this.#violations,
      traceHash: this.#hash.hex(),
      steps: this.#step,
      portCalls: this.#fence.portCalls,
      csiCalls: this.#fence.csiCalls,
      virtualMs: this.#sched.now,
      endReason,
      crashPoints: this.#fence.crashPoints,
      trace: this.#trace,
      finalState: this.#world.state(this.#stepIndex),
      calls: this.#fence.calls,
    };
  }

  #beginStep(kind: TraceEventKind, label: string, labelSeq?: number): void {
    this.#step++;
    if (labelSeq === undefined) this.#hash.add3(this.#sched.now, kind, label);
    else this.#hash.add3n(this.#sched.now, kind, label, labelSeq);
    // The step's record exists for a full trace only (the explorer's runs keep the hash).
    if (this.#opt.fullTrace !== true) return;
    this.#current = {
      step: this.#step,
      timeMs: this.#sched.now,
      life: this.#life.id,
      event: { kind, label: labelSeq === undefined ? label : `${label}${labelSeq}` },
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
    if (this.#pendingSigterm) {
      this.#pendingSigterm = false;
      this.#sigterm(undefined);
    }
    this.#settleFailureChecks(false);
    const cur = this.#current;
    if (cur !== undefined && this.#opt.fullTrace === true) {
      const world = this.#world;
      cur.volumesInUse = [...world.cluster.volumesInUse];
      cur.volumesAttached = world.cluster.volumesAttached.map((v) => v.name).sort();
      // Files change through the fenced fs (engine), the driver and the scenario, which all bump the world's version.
      if (world.version !== this.#diffedVersion) {
        this.#diffedVersion = world.version;
        const tree = world.fs.mem.tree(SIM_ROOT);
        const mounts = world.mounter.entries().map((e) => e.mountPoint).slice(1);
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
  /** Whether life `life` logged an error line at or after index `mark` of the run's log (no copy of the log: this runs after every step with a check open). */
  #loggedErrorSince(life: number, mark: number): boolean {
    const logs = this.#logs;
    for (let i = mark; i < logs.length; i++) {
      const l = logs[i];
      if (l !== undefined && l.life === life && l.severity === 'E') return true;
    }
    return false;
  }

  #settleFailureChecks(runEnded: boolean): void {
    // Runs after every step: no new array when nothing is pending.
    if (this.#pendingFailureChecks.length === 0) return;
    this.#pendingFailureChecks = this.#pendingFailureChecks.filter((check) => {
      if (check.life !== this.#life.id || !this.#life.alive) return false;
      if (this.#loggedErrorSince(check.life, check.logMark)) return false;
      if (runEnded) this.#violate('failure-visible', `${check.method} failed and the engine logged no error line for it`);
      return !runEnded;
    });
  }

  #record(seq: number, life: number, port: PortCallRecord['port'], op: string, args: string, result: string): void {
    // The engine numbers its temporary files with a process-wide counter: normalise it so that a
    // run's hash does not depend on the runs before it in the same process.
    this.#hash.addCall(seq, port, op, args, result);
    this.#current?.calls.push({ seq, life, port, op, args, result });
  }

  /**
   * Whether the world, converged since `sinceMs`, has been so for {@link EXEMPT_CHURN_WINDOW_MS}
   * in a run with a driver that never returns: its churn then stands in for quiet.
   */
  #exemptChurnFor(sinceMs: number): boolean {
    return this.#world.neverReturns.size > 0 && this.#sched.now - sinceMs >= EXEMPT_CHURN_WINDOW_MS;
  }

  /**
   * The engine is perturbed until `untilMs` (now, or when a timed fault or a late driver
   * registration ends). It only moves forward: a later step's fault does not cut short a
   * perturbation still running (generated workload 487: a fault step right after a reboot
   * moved it back from the late driver's registration, 3 minutes later, to the fault's time, and
   * the run was called stuck before the driver registered).
   */
  #perturbUntil(untilMs: number): void {
    this.#lastPerturbationMs = Math.max(this.#lastPerturbationMs, untilMs);
  }

  #violate(invariant: InvariantName, message: string): void {
    this.#violations.push({ invariant, step: this.#step, message });
    this.#current?.violations.push(invariant);
    this.#hash.add(`violation|${invariant}|${message}`);
  }

  #violateAll(findings: readonly Finding[]): void {
    for (const f of findings) this.#violate(f.invariant, f.message);
  }

  // ---------------------------------------------------------------- engine lives

  #startLife(): void {
    const life: EngineLife = { id: this.#life.id + 1, domain: `life:${this.#life.id + 1}`, alive: true };
    this.#life = life;
    this.#restarting = false;
    this.#stopping = false;
    this.#stopReturned = undefined;
    this.#beginStep('start', `engine life ${life.id} starts`);
    const fullTrace = this.#opt.fullTrace === true;
    const logger = new LifeLogger(this.#logs, life.id, (msg, values) => {
      if (msg === RECONSTRUCTION_ENDED_LINE && life.alive) this.#reconstructedLife = life.id;
      if (!fullTrace) return;
      // What reconstruction found, in the step it was found in (only the live life logs).
      const finding = reconstructionFinding(msg, values);
      const cur = this.#current;
      if (finding !== undefined && cur !== undefined && life.alive) (cur.reconstructed ??= []).push(finding);
    });
    const ports = this.#fence.ports(life);
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
        fs: ports.fs,
        logger,
        clock: ports.clock,
        mounter: ports.mounter,
        csiDrivers: ports.csiDrivers,
        cluster: ports.cluster,
      },
      { metrics: { volumeManager: this.#metrics }, scheduler, now: () => this.#sched.now, compactWhenIdle: false },
    );
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
    this.#runtime = node.runtime;
    node.start().catch((err: unknown) => logger.error(err, 'Reconstruction failed'));
    this.#afterStep();
  }

  /**
   * A SIGTERM to the current life: its runtime stops (AgentRuntime.stop, with `graceMs` or the
   * agent's default grace period); the run loop ends the life once the stop returned.
   */
  #sigterm(graceMs: number | undefined): void {
    const life = this.#life;
    const runtime = this.#runtime;
    if (!life.alive || this.#stopping || this.#restarting || runtime === undefined) return;
    this.#stopping = true;
    this.#perturbUntil(this.#sched.now);
    const grace = graceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
    this.#beginStep('scenario', `SIGTERM: engine life ${life.id} stops (grace ${formatScenarioDuration(grace)})`);
    runtime.stop({ graceMs: grace }).then(
      (r) => {
        if (life === this.#life && life.alive && this.#stopping) this.#stopReturned = r;
      },
      (err: unknown) => {
        // A stop never rejects; if it did, the process would exit all the same.
        if (life === this.#life && life.alive && this.#stopping) this.#stopReturned = { abandoned: true };
        this.#logs.push({ life: life.id, severity: 'E', msg: `stop failed: ${errorMessage(err)}` });
      },
    );
    this.#afterStep();
  }

  /** Ends the current life now (no further event of it runs) and schedules the next one. */
  #requestCrash(kind: Exclude<CrashKind, 'stop'>): void {
    if (!this.#life.alive) return;
    this.#life.alive = false;
    this.#pendingCrash = kind;
  }

  /** `stop`: the process exits after a SIGTERM's stop returned (`abandoned`: work left in flight). */
  #crash(kind: CrashKind, abandoned = false): void {
    const dead = this.#life;
    dead.alive = false;
    this.#stopping = false;
    this.#stopReturned = undefined;
    this.#pendingSigterm = false;
    this.#sched.drop(dead.domain);
    this.#perturbUntil(this.#sched.now);
    this.#beginStep('crash', kind === 'stop' ? `stop: engine life ${dead.id} exits after SIGTERM${abandoned ? ', work in flight abandoned after the grace period' : ''}` : `${kind}: engine life ${dead.id} ends`);
    if (kind === 'reboot') {
      this.#world.reboot();
      // A late node plugin perturbs the engine until it registered.
      this.#perturbUntil(this.#world.lateRegistrations(REBOOT_DELAY_MS));
    }
    this.#restarting = true;
    this.#sched.timer('world', kind === 'reboot' ? REBOOT_DELAY_MS : RESTART_DELAY_MS, 'start', 'engine restarts', () => this.#startLife());
    this.#afterStep();
  }

  // ---------------------------------------------------------------- convergence

  /** Converged: the world is what the running pods want, and the node status says so. */
  #converged(): boolean {
    const m = this.#convergedMemo;
    const version = this.#world.version;
    const inFlight = this.#world.inFlight.size;
    const neverReturns = this.#world.neverReturns.size;
    const life = this.#life;
    if (
      m !== undefined &&
      m.version === version &&
      m.inFlight === inFlight &&
      m.neverReturns === neverReturns &&
      m.restarting === this.#restarting &&
      m.stopping === this.#stopping &&
      m.life === life.id &&
      m.alive === life.alive
    )
      return m.why === '';
    const why = this.#whyNotConverged('converged');
    this.#convergedMemo = { version, inFlight, neverReturns, restarting: this.#restarting, stopping: this.#stopping, life: life.id, alive: life.alive, why };
    return why === '';
  }

  #whyNotConverged(reason: SimResult['endReason']): string {
    // A life that got a SIGTERM is not running: it exits, and the next one must converge.
    const problems = convergenceProblems(this.#world, { running: !this.#restarting && !this.#stopping && this.#life.alive }, reason === 'converged');
    if (problems.length === 0) return '';
    return `${reason === 'converged' ? '' : `not converged (${reason === 'stuck' ? `nothing changed for ${STUCK_WINDOW_MS / 60_000} virtual minutes` : `${LIVENESS_BOUND_MS / 60_000} virtual minutes after the last fault`}): `}${problems.join('; ')}`;
  }

  /**
   * Why a run that did not end converged fails liveness when nothing is wrong with the world at
   * its end (whyNotConverged has no problem to name): it was converged but never quiet for the
   * quiet window, so a pending `wait` step never passed (or, with the steps done, the run never
   * ended converged). A violation never has an empty message.
   */
  #whyNeverQuiet(reason: SimResult['endReason']): string {
    const never = `converged but never quiet for ${QUIET_WINDOW_MS / 1000} s (the world last changed at ${this.#world.lastChangeMs} virtual ms)`;
    const end = `the run ended ${reason === 'stuck' ? `after nothing changed for ${STUCK_WINDOW_MS / 60_000} virtual minutes` : `${LIVENESS_BOUND_MS / 60_000} virtual minutes after the last fault`}`;
    const step = this.#scenario.steps[this.#stepIndex];
    if (step === undefined) return `${end}: the steps are done, ${never}`;
    return `${end}: scenario step ${this.#stepIndex + 1} (${step.kind === 'wait' ? 'wait: converged' : step.kind}) never passed: ${never}`;
  }

  // ---------------------------------------------------------------- scenario steps

  #pollScenario(): void {
    const world = this.#world;
    for (;;) {
      const step = this.#scenario.steps[this.#stepIndex];
      if (step === undefined) return;
      // Steps other than wait and advance run once: their label is built then, not at every poll.
      const label = step.kind === 'wait' || step.kind === 'advance' ? '' : JSON.stringify(step);
      switch (step.kind) {
        case 'wait':
          // Converged and steady: nothing changed in the world for the quiet window (or, with a
          // driver that never returns, converged all along for the exempt churn window).
          if (!this.#converged()) {
            this.#waitConvergedSince = undefined;
            return;
          }
          this.#waitConvergedSince ??= this.#sched.now;
          if (this.#sched.now - world.lastChangeMs < QUIET_WINDOW_MS && !this.#exemptChurnFor(this.#waitConvergedSince)) return;
          this.#waitConvergedSince = undefined;
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
          world.addPod(step.uid);
          world.changed();
          this.#afterStep();
          break;
        case 'deletePod':
          this.#beginStep('scenario', label);
          world.deletePod(step.uid);
          world.changed();
          this.#afterStep();
          break;
        case 'terminatePod':
          this.#beginStep('scenario', label);
          world.terminatePod(step.uid);
          world.changed();
          this.#afterStep();
          break;
        case 'podPhase':
          this.#beginStep('scenario', label);
          world.podTerminal(step.uid, step.phase);
          world.changed();
          this.#afterStep();
          break;
        case 'restart':
        case 'reboot':
          // After a SIGTERM, once the process exited and the next life started.
          if (this.#restarting || this.#stopping) return;
          this.#stepIndex++;
          this.#life.alive = false;
          this.#crash(step.kind);
          continue;
        case 'sigterm':
          if (this.#restarting || this.#stopping) return;
          this.#stepIndex++;
          this.#sigterm(step.graceMs);
          continue;
        case 'fault':
          this.#beginStep('scenario', label);
          world.injectScenarioFault(step.fault);
          this.#perturbUntil(this.#sched.now);
          this.#afterStep();
          break;
        case 'clearFaults':
          this.#beginStep('scenario', label);
          world.clearFaults();
          this.#afterStep();
          break;
        case 'restartDriver':
          this.#beginStep('scenario', label);
          world.restartDriver(step.driver);
          this.#perturbUntil(this.#sched.now);
          this.#afterStep();
          break;
        case 'slowDisk':
          this.#beginStep('scenario', label);
          // The fault perturbs the engine until it ends.
          this.#perturbUntil(world.slowDisk(step.latencyMs, step.ms));
          this.#afterStep();
          break;
        case 'fsFault':
          this.#beginStep('scenario', label);
          // The fault perturbs the engine until it ends.
          this.#perturbUntil(world.failWrites(step.code, step.ms));
          this.#afterStep();
          break;
        case 'readError':
          this.#beginStep('scenario', label);
          world.failReads(step.pod, step.volume, step.code, step.times);
          this.#perturbUntil(this.#sched.now);
          this.#afterStep();
          break;
        case 'apiDown':
          this.#beginStep('scenario', label);
          // The fault perturbs the engine until it ends.
          this.#perturbUntil(world.apiDown(step.ms));
          this.#afterStep();
          break;
        case 'corruptFile':
          this.#beginStep('scenario', label);
          world.corruptVolumeData(step.pod, step.volume, step.as);
          this.#afterStep();
          break;
        case 'deleteFile':
          this.#beginStep('scenario', label);
          world.loseVolumeData(step.pod, step.volume);
          this.#afterStep();
          break;
      }
      this.#stepIndex++;
    }
  }
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
