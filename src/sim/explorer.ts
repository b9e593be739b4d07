/**
 * The explorer: runs a scenario's fault-free simulation, then one simulation per crash point
 * (depth 1: every numbered port call, before and after, each crash kind), optionally a second
 * crash at every point of each recovery (depth 2, sampled by seed when there are too many), and
 * optionally each CSI call of the run failing once (--faults). Violations are grouped by
 * invariant, each with a minimal (shrunk) plan, its trace and the exact command that replays it.
 *
 * Crash points are deduplicated by world state: a crash throws away every bit of engine memory,
 * so two crash points at which the files (and what of them is durable), the mount table, the
 * driver's state and in-flight calls, the cluster and the scenario's progress are identical lead
 * to the same recovery problem. The explorer runs the first of each class and counts the rest as
 * covered ("crash points" vs "distinct states" in the output).
 */
import type { FeatureGate } from '../features/features.js';
import { INVARIANT_NAMES, type InvariantName, type Violation } from './invariants.js';
import { Prng } from './prng.js';
import type { Scenario } from './scenario.js';
import { FAULT_KINDS, formatPlan, type CrashKind, type Perturbation } from './plan.js';
import type { CrashPoint } from './fencedPorts.js';
import { simulate, type SimResult } from './simulation.js';
import type { SimTrace, TraceStep } from '../trace/simTrace.js';

/**
 * What `--crash` injects at every crash point: no crash, one kind, `both` (restart and reboot,
 * the default) or `all` (restart, reboot and a SIGTERM's stop).
 */
export type CrashChoice = 'none' | CrashKind | 'both' | 'all';
export const CRASH_CHOICES: readonly CrashChoice[] = ['none', 'restart', 'reboot', 'stop', 'both', 'all'];

/** The crash kinds of a choice, in the order the explorer runs them. */
export function crashKindsOf(crash: CrashChoice): CrashKind[] {
  switch (crash) {
    case 'none':
      return [];
    case 'both':
      return ['restart', 'reboot'];
    case 'all':
      return ['restart', 'reboot', 'stop'];
    case 'restart':
    case 'reboot':
    case 'stop':
      return [crash];
  }
}

/** Whether a choice delivers SIGTERMs (then generated workloads draw `sigterm` steps too). */
export function crashStops(crash: CrashChoice): boolean {
  return crashKindsOf(crash).includes('stop');
}

/** Depth-2 runs per seed above which the second crashes are sampled by seed. */
export const DEPTH2_SAMPLE = 250;

export interface ExploreOptions {
  readonly scenario: Scenario;
  readonly gates: FeatureGate;
  readonly crash: CrashChoice;
  readonly depth: 1 | 2;
  readonly faults: boolean;
  readonly seed: number;
  /** How many seeds (interleavings) to explore: seed, seed+1, ... */
  readonly runs: number;
  readonly shard?: { readonly index: number; readonly count: number };
  /** Replay exactly this plan (with `seed`) instead of exploring. */
  readonly plan?: readonly Perturbation[];
  /** Builds the replay command of a plan. */
  readonly replayCommand: (seed: number, plan: string) => string;
  /** Called after every run (progress). */
  readonly onRun?: (done: number) => void;
  /** Called with every run's result. */
  readonly onResult?: (r: SimResult) => void;
  /**
   * At most this many crash points (distinct states, both crash kinds counted) per seed at depth
   * 1, sampled by seed when there are more; default all.
   */
  readonly maxCrashPoints?: number;
  /**
   * Shrink each violation's plan and record its full trace (default true). Off for a swarm of
   * generated workloads, which shrinks the scenario itself (shrink.ts) only for the cases it keeps.
   */
  readonly shrink?: boolean;
}

export interface ViolationReport {
  readonly invariant: InvariantName;
  /** Runs in which it was seen. */
  readonly runs: number;
  /** The plans (crash points / faults) of up to 20 runs that showed it. */
  readonly crashPoints: readonly string[];
  /** The minimal plan after shrinking. */
  readonly plan: string;
  readonly seed: number;
  readonly message: string;
  readonly replay: string;
  /** The shrunk run's trace; absent when the explorer was told not to shrink. */
  readonly trace?: SimTrace;
}

export interface ExploreReport {
  readonly scenario: string;
  readonly featureGates: Readonly<Record<string, boolean>>;
  readonly seed: number;
  readonly crash: string;
  readonly depth: number;
  readonly faults: boolean;
  readonly shard: string;
  /** Simulations run. */
  readonly runs: number;
  /** Crash points covered (before/after every numbered port call, per crash kind). */
  readonly crashPoints: number;
  /** Distinct world states at those crash points. */
  readonly states: number;
  readonly durationMs: number;
  /** CPU time of this process during the exploration (user + system). */
  readonly cpuMs: number;
  readonly violations: readonly ViolationReport[];
}

interface Finding {
  readonly seed: number;
  readonly plan: readonly Perturbation[];
  readonly violation: Violation;
}

export async function explore(o: ExploreOptions): Promise<ExploreReport> {
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  const findings = new Map<InvariantName, Finding[]>();
  let runs = 0;
  let crashPoints = 0;
  const states = new Set<string>();
  const kinds = crashKindsOf(o.crash);
  // A stop keeps the engine's memory for its grace period: two stop points with the same world
  // are told apart by the call they are at (what the engine is doing), so the runs that give
  // crash points record their calls too.
  const stops = kinds.includes('stop');
  const sim = async (seed: number, plan: readonly Perturbation[], recordCrashPoints = false): Promise<SimResult> => {
    const r = await simulate({ scenario: o.scenario, gates: o.gates, seed, plan, recordCrashPoints, ...(stops && recordCrashPoints ? { recordCalls: true } : {}) });
    runs++;
    o.onRun?.(runs);
    o.onResult?.(r);
    for (const v of r.violations) {
      const list = findings.get(v.invariant) ?? [];
      if (!list.some((f) => f.seed === seed && formatPlan(f.plan) === formatPlan(plan))) list.push({ seed, plan, violation: v });
      findings.set(v.invariant, list);
    }
    return r;
  };

  if (o.plan !== undefined) {
    await sim(o.seed, o.plan);
  } else {
    let topIndex = 0;
    const mine = (): boolean => {
      const i = topIndex++;
      return o.shard === undefined || i % o.shard.count === o.shard.index;
    };
    for (let s = 0; s < o.runs; s++) {
      const seed = o.seed + s;
      const base = await sim(seed, [], true);
      if (!mine()) {
        // The fault-free run's findings belong to the shard that owns it.
        for (const list of findings.values()) for (let i = list.length - 1; i >= 0; i--) if (list[i]?.seed === seed && list[i]?.plan.length === 0) list.splice(i, 1);
      }
      const depth1: Perturbation[][] = [];
      const baseCalls = callLabels(base);
      for (const kind of kinds) {
        const seen = new Set<string>();
        for (const cp of base.crashPoints) {
          crashPoints++;
          states.add(cp.state);
          const key = pointKey(kind, cp, baseCalls);
          if (seen.has(key)) continue;
          seen.add(key);
          depth1.push([{ kind: 'crash', crash: kind, at: cp.at, seq: cp.seq }]);
        }
      }
      if (o.maxCrashPoints !== undefined && depth1.length > o.maxCrashPoints) {
        const rng = new Prng(seed ^ 0x2545f491);
        while (depth1.length > o.maxCrashPoints) depth1.splice(rng.int(depth1.length), 1);
      }
      if (o.faults) {
        for (let k = 1; k <= base.csiCalls; k++) for (const f of FAULT_KINDS) depth1.push([{ kind: 'fault', fault: f, csiCall: k }]);
      }
      const depth2: Perturbation[][] = [];
      for (const plan of depth1) {
        if (!mine()) continue;
        const first = plan[0];
        const wantChildren = o.depth === 2 && first?.kind === 'crash';
        const r = await sim(seed, plan, wantChildren);
        if (!wantChildren) continue;
        const seen = new Set<string>();
        const calls = callLabels(r);
        for (const cp of r.crashPoints) {
          if (first !== undefined && first.kind === 'crash' && cp.seq <= first.seq) continue; // points of the recovery only
          for (const kind of kinds) {
            crashPoints++;
            states.add(cp.state);
            const key = pointKey(kind, cp, calls);
            if (seen.has(key)) continue;
            seen.add(key);
            depth2.push([...plan, { kind: 'crash', crash: kind, at: cp.at, seq: cp.seq }]);
          }
        }
      }
      const rng = new Prng(seed ^ 0x9e3779b9);
      while (depth2.length > DEPTH2_SAMPLE) depth2.splice(rng.int(depth2.length), 1);
      for (const plan of depth2) await sim(seed, plan);
    }
  }

  const violations: ViolationReport[] = [];
  for (const invariant of INVARIANT_NAMES) {
    const list = findings.get(invariant);
    if (list === undefined || list.length === 0) continue;
    const smallest = [...list].sort((a, b) => a.plan.length - b.plan.length || a.violation.step - b.violation.step)[0];
    if (smallest === undefined) continue;
    if (o.shrink === false) {
      const planText = formatPlan(smallest.plan);
      const replay = o.replayCommand(smallest.seed, planText);
      violations.push({
        invariant,
        runs: list.length,
        crashPoints: list.slice(0, 20).map((f) => (f.plan.length === 0 ? '(fault-free run)' : formatPlan(f.plan))),
        plan: planText,
        seed: smallest.seed,
        message: smallest.violation.message,
        replay,
      });
      continue;
    }
    const minimal = await shrink(o, invariant, smallest);
    const full = await simulate({ scenario: o.scenario, gates: o.gates, seed: minimal.seed, plan: minimal.plan, fullTrace: true });
    const first = full.violations.find((v) => v.invariant === invariant) ?? minimal.violation;
    const planText = formatPlan(minimal.plan);
    const replay = o.replayCommand(minimal.seed, planText);
    violations.push({
      invariant,
      runs: list.length,
      crashPoints: list.slice(0, 20).map((f) => (f.plan.length === 0 ? '(fault-free run)' : formatPlan(f.plan))),
      plan: planText,
      seed: minimal.seed,
      message: first.message,
      replay,
      trace: toTrace(o, full, minimal.seed, planText, replay, first.step),
    });
  }
  return {
    scenario: o.scenario.name,
    featureGates: o.gates.snapshot(),
    seed: o.seed,
    crash: o.crash,
    depth: o.depth,
    faults: o.faults,
    shard: o.shard === undefined ? '0/1' : `${o.shard.index}/${o.shard.count}`,
    runs,
    crashPoints,
    states: states.size,
    durationMs: Math.round(performance.now() - started),
    cpuMs: Math.round((process.cpuUsage(cpuStart).user + process.cpuUsage(cpuStart).system) / 1000),
    violations,
  };
}

/** A run's numbered calls' labels by seq (recorded only when the explorer delivers stops). */
function callLabels(r: SimResult): ReadonlyMap<number, string> {
  return new Map(r.calls.map((c) => [c.seq, c.label]));
}

/**
 * The class of a crash point: for a crash (restart, reboot), the world state, since a crash
 * throws every bit of engine memory away; for a stop, also the call it is at, since the engine
 * runs on (its operations in flight) for the grace period.
 */
function pointKey(kind: CrashKind, cp: CrashPoint, calls: ReadonlyMap<number, string>): string {
  return kind === 'stop' ? `${kind}|${cp.state}|${calls.get(cp.seq) ?? ''}` : `${kind}|${cp.state}`;
}

/** Drops perturbations one by one while the same invariant is still violated. */
async function shrink(o: ExploreOptions, invariant: InvariantName, f: Finding): Promise<Finding> {
  let best = f;
  for (let i = best.plan.length - 1; i >= 0; i--) {
    const candidate = best.plan.filter((_, j) => j !== i);
    if (candidate.length === best.plan.length) continue;
    const r = await simulate({ scenario: o.scenario, gates: o.gates, seed: best.seed, plan: candidate });
    const v = r.violations.find((x) => x.invariant === invariant);
    if (v !== undefined) best = { seed: best.seed, plan: candidate, violation: v };
  }
  return best;
}

/** The trace of a run up to (and a few steps past) the violation, without idle loop ticks. */
function toTrace(o: ExploreOptions, r: SimResult, seed: number, plan: string, replay: string, untilStep: number): SimTrace {
  const steps: TraceStep[] = r.trace.filter(
    (s) => s.step <= untilStep + 5 && (s.event.kind !== 'timer' || s.calls.length > 0 || s.fs !== undefined || s.mounts !== undefined || s.violations.length > 0),
  );
  return {
    version: 1,
    scenario: o.scenario.name,
    featureGates: o.gates.snapshot(),
    seed,
    plan,
    replay,
    hash: r.traceHash,
    steps,
    violations: r.violations.filter((v) => v.step <= untilStep + 5).map((v) => ({ invariant: v.invariant, step: v.step, message: v.message })),
  };
}
