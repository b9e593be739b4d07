/**
 * `nodevol explore`: the deterministic simulator's explorer (src/sim). Runs the real engine under
 * a seeded scheduler, crashes and reboots it at every port call, and checks the invariants.
 * Needs no root and touches no real file but --html's output.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Command, InvalidArgumentError, Option } from 'commander';

import { CSIGlobalMountReconstruction, FeatureGate, FeatureGateError } from '../features/features.js';
import { errorMessage } from '../ports/fs.js';
import { CRASH_CHOICES, explore, type CrashChoice, type ExploreReport } from '../sim/explorer.js';
import { INVARIANTS } from '../sim/invariants.js';
import { builtinScenarioNames, loadBuiltinScenario, loadScenarioFile, ScenarioError, type Scenario } from '../sim/scenario.js';
import { parsePlan, type Perturbation } from '../sim/plan.js';
import { WORKLOAD_SIZES, type WorkloadSize } from '../sim/generate.js';
import { DEFAULT_MAX_CRASH_POINTS, swarm, type SwarmReport, type WorkerEntry } from '../sim/swarm.js';
import { simRunToTrace } from '../timeline/fromSim.js';
import { renderTimelineHtml } from '../timeline/html.js';
import { addHelpAfter, collect, examples, unknownScenario } from './flags.js';
import { newTempDir } from './tempDir.js';

export const EXPLORE_EXIT_OK = 0;
export const EXPLORE_EXIT_VIOLATIONS = 1;
export const EXPLORE_EXIT_CANNOT_RUN = 2;

interface ExploreFlags {
  scenario?: string;
  featureGates: string[];
  crash: CrashChoice;
  depth: string;
  faults: boolean;
  seed: number;
  runs: number;
  shard?: { index: number; count: number };
  output: 'table' | 'json';
  html?: string;
  plan?: string;
  generate?: number;
  size: WorkloadSize;
  jobs?: number;
  maxCrashPoints?: number;
  out?: string;
  shrink?: number;
}

function nonNegativeInt(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) > 0xffffffff) throw new InvalidArgumentError('must be a non-negative integer below 2^32');
  return Number(value);
}

function positiveInt(value: string): number {
  const n = nonNegativeInt(value);
  if (n === 0) throw new InvalidArgumentError('must be at least 1');
  return n;
}

function shard(value: string): { index: number; count: number } {
  const m = /^(\d+)\/(\d+)$/.exec(value);
  const index = Number(m?.[1]);
  const count = Number(m?.[2]);
  if (m === null || count < 1 || index >= count) throw new InvalidArgumentError('must be I/N with 0 <= I < N, e.g. 0/4');
  return { index, count };
}

export function exploreCommand(setExitCode: (code: number) => void): Command {
  const cmd = new Command('explore')
    .description(
      'Deterministic simulation: run the real volume manager under a seeded scheduler, crash (restart) ' +
        'or reboot it before and after every port call (or stop it gracefully: --crash stop|all), optionally fail every CSI call once, and check ' +
        'the safety invariants after every step. Prints violations with minimal traces and replay commands.',
    )
    .argument('[scenario.yaml]', 'a scenario file (see scenarios/ and docs/explorer.md)')
    .option('--scenario <name>', `a built-in scenario (${safeBuiltinNames()})`)
    .option('--feature-gates <gates>', 'feature gates, e.g. CSIGlobalMountReconstruction=true (override the scenario\'s)', collect, [])
    .addOption(
      new Option('--crash <kind>', 'crash kinds to inject at every crash point (stop: a SIGTERM, the graceful stop then an exit; all: restart, reboot and stop)')
        .choices([...CRASH_CHOICES])
        .default('both'),
    )
    .addOption(new Option('--depth <n>', '1: every single crash point; 2: and a second crash during each recovery').choices(['1', '2']).default('1'))
    .option('--faults', 'also fail each CSI call of the run once (Unavailable, Aborted, DeadlineExceeded, hang past the deadline)', false)
    .option('--seed <n>', 'seed of the scheduler (same seed, same interleaving)', nonNegativeInt, 1)
    .option('--runs <n>', 'how many seeds (interleavings) to explore: seed, seed+1, ...', positiveInt, 1)
    .option('--shard <I/N>', 'run only shard I of N (0-based; deterministic split for CI matrices and Indexed Jobs)', shard)
    .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'json']).default('table'))
    .option('--html <file>', 'write a self-contained HTML page of the first counterexample trace')
    .option('--plan <plan>', 'replay one run: comma-separated restart|reboot|stop:before|after:SEQ and fault:KIND:N (printed by a finding)')
    .option('--generate <n>', 'explore N generated workloads (seeds --seed .. --seed+N-1) instead of one scenario; violations are shrunk to scenario files', positiveInt)
    .addOption(new Option('--size <size>', 'size of the generated workloads').choices([...WORKLOAD_SIZES]).default('medium'))
    .option('--jobs <n>', 'worker threads for --generate (default: one per core)', positiveInt)
    .option('--max-crash-points <n>', `with --generate: at most this many crash points a workload, sampled by seed (0: all; default ${DEFAULT_MAX_CRASH_POINTS})`, nonNegativeInt)
    .option('--out <dir>', 'with --generate: where shrunk counterexamples are written (default: a new temp dir)')
    .option('--shrink <n>', 'with --generate: how many workloads per invariant broken are shrunk to a case (default 1)', nonNegativeInt);
  addHelpAfter(
    cmd,
    '\nInvariants:\n' +
      Object.keys(INVARIANTS)
        .map((n) => `  ${n}`)
        .join('\n') +
      '\n\nExit codes:\n  0  no invariant violated\n  1  at least one invariant violated\n  2  could not run (bad flags, bad scenario file)\n' +
      examples([
        ['Every crash point of KEP story 1, restart and reboot, with the gate off', 'nodevol explore --scenario kep-story-1 --crash both'],
        ['The same with the KEP-6058 gate on', 'nodevol explore --scenario kep-story-1 --crash both --feature-gates CSIGlobalMountReconstruction=true'],
        ['A second crash during every recovery, shard 0 of 4, as JSON', 'nodevol explore --scenario kep-story-1 --depth 2 --shard 0/4 -o json'],
        ['A SIGTERM (graceful stop, then exit) at every crash point too, every gate on', 'nodevol explore --scenario sigterm-in-flight --crash all --feature-gates AllAlpha=true'],
        ['Your own scenario, its first counterexample as a timeline', 'nodevol explore my-scenario.yaml --html counterexample.html'],
        ['100 generated workloads with every gate on (AllAlpha: each is Alpha), on every core', 'nodevol explore --generate 100 --feature-gates AllAlpha=true'],
        ['Shard 3 of 16 of a big search (one Indexed Job pod)', 'nodevol explore --generate 10000 --shard 3/16 -o json'],
      ]),
  );
  cmd.action(async (file: string | undefined, flags: ExploreFlags) => {
    setExitCode(await run(file, flags));
  });
  return cmd;
}

function safeBuiltinNames(): string {
  try {
    return builtinScenarioNames().join(', ');
  } catch {
    return 'none found';
  }
}

function gateString(values: Readonly<Record<string, boolean>>): string {
  return Object.entries(values)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(',');
}

/**
 * The gates as the output and the replay command name them: KEP-6058's gate always, every other
 * gate when on or when the scenario sets it (so that the replay cannot pick up another value).
 */
function shownGates(values: Readonly<Record<string, boolean>>, scenarioGates: Readonly<Record<string, boolean>>): Record<string, boolean> {
  return Object.fromEntries(Object.entries(values).filter(([k, v]) => v || k === CSIGlobalMountReconstruction || k in scenarioGates));
}

async function run(file: string | undefined, flags: ExploreFlags): Promise<number> {
  const fail = (msg: string): number => {
    process.stderr.write(`nodevol explore: ${msg}\n`);
    return EXPLORE_EXIT_CANNOT_RUN;
  };
  if (flags.generate !== undefined) {
    if (file !== undefined || flags.scenario !== undefined || flags.plan !== undefined || flags.html !== undefined) {
      return fail('--generate explores generated workloads: it takes no SCENARIO.yaml, --scenario, --plan or --html');
    }
    return runGenerated(flags, flags.generate, fail);
  }
  if (flags.jobs !== undefined || flags.maxCrashPoints !== undefined || flags.out !== undefined || flags.shrink !== undefined) return fail('--jobs, --max-crash-points, --out and --shrink go with --generate');
  if ((file === undefined) === (flags.scenario === undefined)) return fail('give exactly one of SCENARIO.yaml or --scenario NAME');
  if (flags.scenario !== undefined && !builtinScenarioNames().includes(flags.scenario)) return fail(unknownScenario(flags.scenario));
  let scenario: Scenario;
  try {
    scenario = file !== undefined ? loadScenarioFile(file) : loadBuiltinScenario(flags.scenario ?? '');
  } catch (err) {
    if (err instanceof ScenarioError) return fail(err.message);
    throw err;
  }
  let gates: FeatureGate;
  try {
    const fromScenario = gateString(scenario.featureGates);
    gates = FeatureGate.parse([...(fromScenario === '' ? [] : [fromScenario]), ...flags.featureGates]).gate;
  } catch (err) {
    if (err instanceof FeatureGateError) return fail(`invalid feature gates: ${err.message}`);
    throw err;
  }
  let plan: Perturbation[] | undefined;
  if (flags.plan !== undefined) {
    try {
      plan = parsePlan(flags.plan);
    } catch (err) {
      return fail(`--plan: ${errorMessage(err)}`);
    }
  }
  const source = file !== undefined ? file : `--scenario ${scenario.name}`;
  const effectiveGates = gateString(shownGates(gates.snapshot(), scenario.featureGates));
  const report = await explore({
    scenario,
    gates,
    crash: flags.crash,
    depth: flags.depth === '2' ? 2 : 1,
    faults: flags.faults,
    seed: flags.seed,
    runs: flags.runs,
    ...(flags.shard === undefined ? {} : { shard: flags.shard }),
    ...(plan === undefined ? {} : { plan }),
    replayCommand: (seed, p) => `nodevol explore ${source} --feature-gates ${effectiveGates} --seed ${seed}${p === '' ? ' --crash none' : ` --plan ${p}`}`,
  });
  if (flags.html !== undefined) {
    const first = report.violations[0];
    try {
      writeFileSync(
        flags.html,
        renderTimelineHtml(
          first === undefined
            ? { title: `nodevol explore: ${report.scenario}`, subtitle: `No invariant violated in ${report.runs} runs.`, runs: [] }
            : {
                title: `nodevol explore: ${report.scenario}: ${first.invariant}`,
                subtitle: `The minimal counterexample (seed ${first.seed}, plan ${first.plan === '' ? 'none' : first.plan}). Replay it with: ${first.replay}`,
                runs: [simRunToTrace({ label: effectiveGates, summary: first.message, trace: first.trace?.steps ?? [], violations: first.trace?.violations ?? [] })],
              },
        ),
      );
    } catch (err) {
      return fail(`--html ${flags.html}: ${errorMessage(err)}`);
    }
  }
  process.stdout.write(flags.output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : renderTable(report));
  return report.violations.length > 0 ? EXPLORE_EXIT_VIOLATIONS : EXPLORE_EXIT_OK;
}

export function renderTable(r: ExploreReport): string {
  const secs = r.durationMs / 1000;
  const lines = [
    `scenario ${r.scenario}  feature gates ${gateString(shownGates(r.featureGates, {}))}  seed ${r.seed}  crash ${r.crash}  depth ${r.depth}  faults ${r.faults ? 'on' : 'off'}  shard ${r.shard}`,
    `runs ${r.runs}  crash points ${r.crashPoints}  distinct states ${r.states}  ${secs.toFixed(1)} s (cpu ${(r.cpuMs / 1000).toFixed(1)} s)  ${(r.runs / Math.max(secs, 0.001)).toFixed(1)} runs/s`,
  ];
  if (r.violations.length === 0) {
    lines.push('no invariant violated');
    return `${lines.join('\n')}\n`;
  }
  const rows = [['INVARIANT', 'RUNS', 'MINIMAL PLAN', 'FIRST VIOLATION'], ...r.violations.map((v) => [v.invariant, String(v.runs), v.plan === '' ? '(none)' : v.plan, v.message])];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((row) => (row[i] ?? '').length)));
  for (const row of rows) lines.push(row.map((c, i) => (i < 3 ? c.padEnd(widths[i] ?? 0) : c)).join('  ').trimEnd());
  lines.push('');
  for (const v of r.violations) lines.push(`replay ${v.invariant}: ${v.replay}`);
  return `${lines.join('\n')}\n`;
}

/** `--generate N`: the swarm over generated workloads (src/sim/swarm.ts). */
async function runGenerated(flags: ExploreFlags, count: number, fail: (msg: string) => number): Promise<number> {
  let gates: FeatureGate;
  try {
    gates = FeatureGate.parse(flags.featureGates).gate;
  } catch (err) {
    if (err instanceof FeatureGateError) return fail(`invalid feature gates: ${err.message}`);
    throw err;
  }
  const shown = gateString(shownGates(gates.snapshot(), {}));
  let outDir = flags.out;
  const caseDir = (): string => {
    if (outDir === undefined) outDir = newTempDir('nodevol-explore-', ', or pass --out DIR');
    else mkdirSync(outDir, { recursive: true });
    return outDir;
  };
  let report: SwarmReport;
  try {
    report = await swarm({
      seed: flags.seed,
      count,
      size: flags.size,
      gates: gates.snapshot(),
      crash: flags.crash,
      depth: flags.depth === '2' ? 2 : 1,
      faults: flags.faults,
      ...(flags.maxCrashPoints === undefined ? {} : { maxCrashPoints: flags.maxCrashPoints }),
      ...(flags.shard === undefined ? {} : { shard: flags.shard }),
      ...(flags.jobs === undefined ? {} : { jobs: flags.jobs }),
      ...(flags.shrink === undefined ? {} : { shrinkPerInvariant: flags.shrink }),
      replayCommand: (file, seed, plan) => `nodevol explore ${file} --feature-gates ${shown} --seed ${seed}${plan === '' ? ' --crash none' : ` --plan ${plan}`}`,
      ...swarmWorkerEntry(),
      caseFile: (name) => path.join(caseDir(), name),
      writeFile: (file, text) => writeFileSync(file, text),
      // Progress on a terminal only, about every tenth of the way.
      ...(process.stderr.isTTY
        ? { onWorkload: (done: number, total: number) => {
              if (done === total || done % Math.max(1, Math.floor(total / 10)) === 0) process.stderr.write(`explored ${done}/${total} workloads\n`);
            } }
        : {}),
    });
  } catch (err) {
    return fail(errorMessage(err));
  }
  process.stdout.write(flags.output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : renderSwarmTable(report));
  return report.violations.length > 0 ? EXPLORE_EXIT_VIOLATIONS : EXPLORE_EXIT_OK;
}

export function renderSwarmTable(r: SwarmReport): string {
  const last = r.generate.seed + r.generate.count - 1;
  const lines = [
    `generated ${r.generate.size} workloads ${r.generate.seed}..${last}  feature gates ${gateString(shownGates(r.featureGates, {}))}  crash ${r.crash}  depth ${r.depth}  faults ${r.faults ? 'on' : 'off'}  crash points per workload ${r.maxCrashPoints === 0 ? 'all' : `<= ${r.maxCrashPoints}`}  shard ${r.shard}  jobs ${r.jobs}`,
    `workloads ${r.workloads}  runs ${r.runs}  distinct states ${r.states}  explored in ${(r.exploreMs / 1000).toFixed(1)} s (cpu ${(r.cpuMs / 1000).toFixed(1)} s): ${r.runsPerSecond.toFixed(1)} runs/s, ${r.runsPerCpuSecond.toFixed(1)} per cpu-second${r.cases.length > 0 ? `; shrunk in ${((r.durationMs - r.exploreMs) / 1000).toFixed(1)} s` : ''}`,
  ];
  if (r.violations.length === 0) {
    lines.push('no invariant violated');
    return `${lines.join('\n')}\n`;
  }
  const rows = [['INVARIANT', 'WORKLOADS', 'RUNS', 'FIRST WORKLOADS'], ...r.violations.map((v) => [v.invariant, String(v.workloads), String(v.runs), v.first.join(', ')])];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((row) => (row[i] ?? '').length)));
  for (const row of rows) lines.push(row.map((c, i) => (i < 3 ? c.padEnd(widths[i] ?? 0) : c)).join('  ').trimEnd());
  lines.push('', 'shrunk counterexamples:');
  for (const c of r.cases) {
    lines.push(`  ${c.invariant}: workload ${c.workload} -> ${c.pods} pod(s), ${c.volumes} volume(s), ${c.drivers} driver(s), ${c.steps} step(s), plan ${c.plan === '' ? 'none' : c.plan}`);
    lines.push(`    ${c.file}`);
    lines.push(`    ${c.message}`);
    lines.push(`    replay: ${c.replay}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Worker threads of a CLI that runs from its bundle (dist/bundle/cli/main.cjs, where this module
 * was bundled) load the bundle and serve from it; from the compiled modules, the swarm's default.
 */
function swarmWorkerEntry(): { workerEntry?: WorkerEntry } {
  const here = fileURLToPath(import.meta.url);
  if (!here.endsWith('.cjs')) return {};
  return { workerEntry: { eval: `require(${JSON.stringify(here)}).runSwarmWorker()` } };
}
