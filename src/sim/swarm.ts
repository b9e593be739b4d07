/**
 * The explorer over generated workloads (`nodevol explore --generate N`): workload seeds
 * seed..seed+N-1 (those of this shard), each explored as a scenario is (its fault-free run, then
 * its crash points, sampled to --max-crash-points), spread over worker threads. For each
 * invariant broken, the first workloads that broke it are shrunk (shrink.ts) to a minimal
 * scenario, written out as a scenario file with the command that replays it.
 *
 * The split is by workload, deterministic: shard I of N takes the workloads whose index modulo N
 * is I, whatever the number of threads; a workload's result does not depend on which thread or
 * machine ran it.
 */
import { availableParallelism } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

import { FeatureGate } from '../features/features.js';
import { crashStops, explore, type CrashChoice } from './explorer.js';
import { generateScenario, type WorkloadSize } from './generate.js';
import { INVARIANT_NAMES, type InvariantName } from './invariants.js';
import { scenarioYaml } from './scenario.js';
import { shrinkCase } from './shrink.js';
import { formatPlan, parsePlan } from './plan.js';

export interface SwarmOptions {
  readonly seed: number;
  readonly count: number;
  readonly size: WorkloadSize;
  /** Gate values (a FeatureGate's snapshot: it crosses to the workers). */
  readonly gates: Readonly<Record<string, boolean>>;
  readonly crash: CrashChoice;
  readonly depth: 1 | 2;
  readonly faults: boolean;
  /** At most this many crash points a workload (default {@link DEFAULT_MAX_CRASH_POINTS}); 0: all. */
  readonly maxCrashPoints?: number;
  readonly shard?: { readonly index: number; readonly count: number };
  /** Worker threads; 1 runs in this thread. Default: every core. */
  readonly jobs?: number;
  /** How many workloads per invariant are shrunk (default 1). */
  readonly shrinkPerInvariant?: number;
  /** Most runs one shrink may take (default 400). */
  readonly shrinkBudget?: number;
  /** The replay command of a shrunk case, given its file, seed and plan. */
  readonly replayCommand: (file: string, seed: number, plan: string) => string;
  /** Where a shrunk case's file is written (its name: generated-<size>-<seed>-<invariant>.yaml). */
  readonly caseFile: (name: string) => string;
  /** Writes a file (the CLI's; the simulator itself writes nothing). */
  readonly writeFile: (file: string, text: string) => void;
  /** Called after each workload. */
  readonly onWorkload?: (done: number, total: number) => void;
  /** How worker threads start (default: swarmWorkerMain.js beside this module). */
  readonly workerEntry?: WorkerEntry;
}

/** The crash points a generated workload is explored at when not told otherwise. */
export const DEFAULT_MAX_CRASH_POINTS = 12;

/** What one workload's exploration found (crosses from a worker). */
export interface WorkloadResult {
  readonly seed: number;
  readonly runs: number;
  readonly crashPoints: number;
  readonly states: number;
  /** CPU time of the process while it explored this workload (alone in its process only: a worker shares it). */
  readonly cpuMs: number;
  readonly virtualMs: number;
  /** Scheduler steps of all its runs. */
  readonly steps: number;
  readonly violations: readonly { readonly invariant: InvariantName; readonly runs: number; readonly plan: string; readonly message: string }[];
}

export interface ShrunkCase {
  readonly invariant: InvariantName;
  /** The workload it came from. */
  readonly workload: number;
  readonly file: string;
  readonly plan: string;
  readonly seed: number;
  readonly message: string;
  readonly replay: string;
  /** Size of the shrunk scenario. */
  readonly pods: number;
  readonly volumes: number;
  readonly drivers: number;
  readonly steps: number;
  /** Runs the shrink took. */
  readonly shrinkRuns: number;
  /** The scenario file's text (what `file` holds): a report from a Job pod carries its cases. */
  readonly scenario: string;
}

export interface SwarmReport {
  readonly generate: { readonly seed: number; readonly count: number; readonly size: WorkloadSize };
  readonly featureGates: Readonly<Record<string, boolean>>;
  readonly crash: string;
  readonly depth: number;
  readonly faults: boolean;
  readonly maxCrashPoints: number;
  readonly shard: string;
  readonly jobs: number;
  readonly workloads: number;
  readonly runs: number;
  /** Scheduler steps of all runs (a run's cost grows with its steps). */
  readonly steps: number;
  readonly crashPoints: number;
  readonly states: number;
  /** Wall time in all, and of the exploration alone (shrinking the cases comes after it). */
  readonly durationMs: number;
  readonly exploreMs: number;
  /** CPU time of the process (every thread) during the exploration, shrinking excluded. */
  readonly cpuMs: number;
  /** Runs per second of wall time, and per CPU-second (one core). */
  readonly runsPerSecond: number;
  readonly runsPerCpuSecond: number;
  /** Per invariant: how many workloads and runs broke it, and which workloads (the first 20). */
  readonly violations: readonly { readonly invariant: InvariantName; readonly workloads: number; readonly runs: number; readonly first: readonly number[] }[];
  readonly cases: readonly ShrunkCase[];
}

/** The message a worker is given and the one it answers (exploreWorkload / shrinkWorkload). */
export type SwarmTask =
  | { readonly kind: 'explore'; readonly id: number; readonly workload: number; readonly options: TaskOptions }
  | { readonly kind: 'shrink'; readonly id: number; readonly workload: number; readonly invariant: InvariantName; readonly plan: string; readonly options: TaskOptions };
export type SwarmAnswer =
  | { readonly id: number; readonly ok: true; readonly explored?: WorkloadResult; readonly shrunk?: ShrinkOutcome }
  | { readonly id: number; readonly ok: false; readonly error: string };

/** What a task needs of the options (plain data: it crosses to the workers). */
export interface TaskOptions {
  readonly size: WorkloadSize;
  readonly gates: Readonly<Record<string, boolean>>;
  readonly crash: CrashChoice;
  readonly depth: 1 | 2;
  readonly faults: boolean;
  readonly maxCrashPoints: number;
  readonly shrinkBudget: number;
}

export interface ShrinkOutcome {
  readonly yaml: string;
  readonly plan: string;
  readonly message: string;
  readonly pods: number;
  readonly volumes: number;
  readonly drivers: number;
  readonly steps: number;
  readonly runs: number;
}

/** Explores one workload (in whichever thread). */
export async function exploreWorkload(workload: number, o: TaskOptions): Promise<WorkloadResult> {
  const scenario = generateScenario(workload, o.size, { sigterm: crashStops(o.crash) });
  const cpu = process.cpuUsage();
  let virtualMs = 0;
  let steps = 0;
  const report = await explore({
    scenario,
    gates: FeatureGate.of(o.gates),
    crash: o.crash,
    depth: o.depth,
    faults: o.faults,
    seed: workload,
    runs: 1,
    ...(o.maxCrashPoints > 0 ? { maxCrashPoints: o.maxCrashPoints } : {}),
    shrink: false,
    replayCommand: () => '',
    onResult: (r) => {
      virtualMs += r.virtualMs;
      steps += r.steps;
    },
  });
  const used = process.cpuUsage(cpu);
  return {
    seed: workload,
    runs: report.runs,
    crashPoints: report.crashPoints,
    states: report.states,
    cpuMs: (used.user + used.system) / 1000,
    virtualMs,
    steps,
    violations: report.violations.map((v) => ({ invariant: v.invariant, runs: v.runs, plan: v.plan, message: v.message })),
  };
}

/** Shrinks one workload's violation of `invariant` (in whichever thread). */
export async function shrinkWorkload(workload: number, invariant: InvariantName, plan: string, o: TaskOptions): Promise<ShrinkOutcome> {
  const scenario = generateScenario(workload, o.size, { sigterm: crashStops(o.crash) });
  const r = await shrinkCase({ scenario, gates: FeatureGate.of(o.gates), seed: workload, plan: parsePlan(plan), invariant, budget: o.shrinkBudget });
  return {
    yaml: scenarioYaml({ ...r.scenario, name: `${scenario.name}-${invariant}`, description: `shrunk from ${scenario.name} (${invariant}): ${r.violation.message}` }),
    plan: formatPlan(r.plan),
    message: r.violation.message,
    pods: r.scenario.pods.length,
    volumes: r.scenario.volumes.length,
    drivers: r.scenario.drivers.length,
    steps: r.scenario.steps.length,
    runs: r.runs,
  };
}

/** Runs one task: the worker's body, and the inline path when there is one job. */
export async function runTask(task: SwarmTask): Promise<SwarmAnswer> {
  try {
    if (task.kind === 'explore') return { id: task.id, ok: true, explored: await exploreWorkload(task.workload, task.options) };
    return { id: task.id, ok: true, shrunk: await shrinkWorkload(task.workload, task.invariant, task.plan, task.options) };
  } catch (err) {
    return { id: task.id, ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
  }
}

/** How a worker thread is started: a script file, or code to evaluate (the CLI bundle's). */
export type WorkerEntry = { readonly file: string } | { readonly eval: string };

/** The worker script beside this module (the compiled modules, not the bundle). */
function defaultWorkerEntry(): WorkerEntry {
  return { file: path.join(path.dirname(fileURLToPath(import.meta.url)), 'swarmWorkerMain.js') };
}

/** A pool of worker threads answering tasks in order of completion. */
class Pool {
  readonly #workers: Worker[] = [];
  readonly #idle: Worker[] = [];
  readonly #waiting = new Map<number, { resolve: (a: SwarmAnswer) => void; reject: (e: Error) => void }>();
  readonly #queue: { task: SwarmTask; resolve: (a: SwarmAnswer) => void; reject: (e: Error) => void }[] = [];

  constructor(size: number, entry: WorkerEntry) {
    for (let i = 0; i < size; i++) {
      const w = 'file' in entry ? new Worker(entry.file) : new Worker(entry.eval, { eval: true });
      w.on('message', (a: SwarmAnswer) => {
        const waiter = this.#waiting.get(a.id);
        this.#waiting.delete(a.id);
        waiter?.resolve(a);
        this.#next(w);
      });
      w.on('error', (err) => {
        for (const waiter of this.#waiting.values()) waiter.reject(err);
        this.#waiting.clear();
      });
      this.#workers.push(w);
      this.#idle.push(w);
    }
  }

  run(task: SwarmTask): Promise<SwarmAnswer> {
    return new Promise<SwarmAnswer>((resolve, reject) => {
      this.#queue.push({ task, resolve, reject });
      const w = this.#idle.pop();
      if (w !== undefined) this.#next(w);
    });
  }

  #next(w: Worker): void {
    const item = this.#queue.shift();
    if (item === undefined) {
      if (!this.#idle.includes(w)) this.#idle.push(w);
      return;
    }
    this.#waiting.set(item.task.id, { resolve: item.resolve, reject: item.reject });
    w.postMessage(item.task);
  }

  async close(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }
}

/** Explores the generated workloads of `o` and shrinks what they break. */
export async function swarm(o: SwarmOptions): Promise<SwarmReport> {
  const started = performance.now();
  // The process's CPU time (every thread's) over the exploration.
  const cpuAtStart = process.cpuUsage();
  const jobs = Math.max(1, o.jobs ?? availableParallelism());
  const options: TaskOptions = {
    size: o.size,
    gates: o.gates,
    crash: o.crash,
    depth: o.depth,
    faults: o.faults,
    maxCrashPoints: o.maxCrashPoints ?? DEFAULT_MAX_CRASH_POINTS,
    shrinkBudget: o.shrinkBudget ?? 400,
  };
  const workloads: number[] = [];
  for (let i = 0; i < o.count; i++) if (o.shard === undefined || i % o.shard.count === o.shard.index) workloads.push(o.seed + i);
  const pool = jobs > 1 ? new Pool(Math.min(jobs, Math.max(1, workloads.length)), o.workerEntry ?? defaultWorkerEntry()) : undefined;
  let nextId = 0;
  const run = async (task: SwarmTask): Promise<SwarmAnswer> => (pool === undefined ? runTask(task) : pool.run(task));
  const check = (a: SwarmAnswer): SwarmAnswer & { ok: true } => {
    if (!a.ok) throw new Error(`a swarm task failed: ${a.error}`);
    return a;
  };
  try {
    let done = 0;
    const results = await Promise.all(
      workloads.map(async (workload) => {
        const a = check(await run({ kind: 'explore', id: nextId++, workload, options }));
        o.onWorkload?.(++done, workloads.length);
        if (a.explored === undefined) throw new Error('a swarm worker answered without a result');
        return a.explored;
      }),
    );
    const exploreMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuAtStart);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    results.sort((a, b) => a.seed - b.seed);
    const violations = INVARIANT_NAMES.flatMap((invariant) => {
      const hit = results.filter((r) => r.violations.some((v) => v.invariant === invariant));
      if (hit.length === 0) return [];
      const runs = hit.reduce((n, r) => n + (r.violations.find((v) => v.invariant === invariant)?.runs ?? 0), 0);
      return [{ invariant, workloads: hit.length, runs, first: hit.slice(0, 20).map((r) => r.seed) }];
    });
    const toShrink = violations.flatMap((v) =>
      v.first.slice(0, o.shrinkPerInvariant ?? 1).map((workload) => ({ invariant: v.invariant, workload, plan: results.find((r) => r.seed === workload)?.violations.find((x) => x.invariant === v.invariant)?.plan ?? '' })),
    );
    const cases = await Promise.all(
      toShrink.map(async (t): Promise<ShrunkCase> => {
        const a = check(await run({ kind: 'shrink', id: nextId++, workload: t.workload, invariant: t.invariant, plan: t.plan, options }));
        const s = a.shrunk;
        if (s === undefined) throw new Error('a swarm worker answered without a shrunk case');
        const file = o.caseFile(`generated-${o.size}-${t.workload}-${t.invariant}.yaml`);
        const replay = o.replayCommand(file, t.workload, s.plan);
        const text = [`# Found by nodevol explore --generate (workload ${t.workload}, size ${o.size}), shrunk from it.`, `# Replay: ${replay}`, s.yaml].join('\n');
        o.writeFile(file, text);
        return { invariant: t.invariant, workload: t.workload, file, plan: s.plan, seed: t.workload, message: s.message, replay, pods: s.pods, volumes: s.volumes, drivers: s.drivers, steps: s.steps, shrinkRuns: s.runs, scenario: text };
      }),
    );
    const durationMs = performance.now() - started;
    const runs = results.reduce((n, r) => n + r.runs, 0);
    return {
      generate: { seed: o.seed, count: o.count, size: o.size },
      featureGates: o.gates,
      crash: o.crash,
      depth: o.depth,
      faults: o.faults,
      maxCrashPoints: options.maxCrashPoints,
      shard: o.shard === undefined ? '0/1' : `${o.shard.index}/${o.shard.count}`,
      jobs,
      workloads: results.length,
      runs,
      steps: results.reduce((n, r) => n + r.steps, 0),
      crashPoints: results.reduce((n, r) => n + r.crashPoints, 0),
      states: results.reduce((n, r) => n + r.states, 0),
      durationMs: Math.round(durationMs),
      exploreMs: Math.round(exploreMs),
      cpuMs: Math.round(cpuMs),
      runsPerSecond: runs / Math.max(exploreMs / 1000, 0.001),
      runsPerCpuSecond: runs / Math.max(cpuMs / 1000, 0.001),
      violations,
      cases,
    };
  } finally {
    await pool?.close();
  }
}
