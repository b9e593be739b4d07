/**
 * The proof that a refactor of the engine changes no behaviour: a fingerprint of what the
 * simulator does over a fixed corpus, to be compared byte for byte before and after.
 *
 *   node dist/bench/refactorFingerprint.js [--quick] > after.txt
 *   diff before.txt after.txt      (only the last line, the timing, may differ)
 *
 * For each scenario × gate configuration × seed it runs the fault-free simulation with its full
 * trace, every numbered call and every crash point recorded, and prints the sha256 of all of it
 * (every call, its number, its arguments and result, and the world at every crash point). Then it
 * replays a fixed sample of perturbations of that run: crashes (restart and reboot) at evenly
 * spread distinct crash points, and each fault kind at evenly spread CSI calls. One line per run:
 * scenario, gates, seed, plan, trace hash (every step label, every numbered port call with its
 * arguments and result, every violation), final world state, end reason, call and step counts,
 * virtual time and violations.
 *
 * Corpus, full: every built-in scenario and generated workloads (medium, seeds 1-6) with KEP-6058
 * off, KEP-6058 on, every gate on and every gate on but each nodevol gate, seed 1; KEP-6058 on
 * and every gate on also with seed 2, and over a large generated workload; 12 crash points and 4
 * CSI calls per run. `--quick` (for every commit of a refactor): KEP-6058 on and every gate on,
 * seed 1, the built-in scenarios and three medium workloads, 6 crash points and 3 CSI calls.
 */
import { createHash } from 'node:crypto';

import { CSIGlobalMountReconstruction, FeatureGate } from '../src/features/features.js';
import { generateScenario } from '../src/sim/generate.js';
import { nodevolGates } from '../src/sim/gateProofs.js';
import { FAULT_KINDS, formatPlan, type Perturbation } from '../src/sim/plan.js';
import { builtinScenarioNames, loadBuiltinScenario, type Scenario } from '../src/sim/scenario.js';
import { simulate } from '../src/sim/simulation.js';

const quick = process.argv.includes('--quick');
const gates = nodevolGates();

function gatesWith(kep: boolean, on: readonly string[]): FeatureGate {
  return FeatureGate.parse([[`${CSIGlobalMountReconstruction}=${kep}`, ...on.map((g) => `${g}=true`)].join(',')]).gate;
}

interface Config {
  readonly name: string;
  readonly gate: FeatureGate;
}
const kep: Config = { name: 'kep', gate: gatesWith(true, []) };
const all: Config = { name: 'all', gate: gatesWith(true, gates) };
const everyConfig: readonly Config[] = [
  { name: 'kep-off', gate: gatesWith(false, []) },
  kep,
  ...gates.map((g) => ({ name: `all-but-${g}`, gate: gatesWith(true, gates.filter((x) => x !== g)) })),
  all,
];

interface Combination {
  readonly name: string;
  readonly scenario: () => Scenario;
  readonly config: Config;
  readonly seed: number;
}

const builtin = builtinScenarioNames().map((name) => ({ name, load: () => loadBuiltinScenario(name) }));
const medium = (seeds: readonly number[]): { name: string; load: () => Scenario }[] =>
  seeds.map((seed) => ({ name: `generated-medium-${seed}`, load: () => generateScenario(seed, 'medium') }));

const combinations: Combination[] = [];
if (quick) {
  for (const s of [...builtin, ...medium([1, 2, 3])]) for (const config of [kep, all]) combinations.push({ name: s.name, scenario: s.load, config, seed: 1 });
} else {
  const scenarios = [...builtin, ...medium([1, 2, 3, 4, 5, 6])];
  for (const s of scenarios) for (const config of everyConfig) combinations.push({ name: s.name, scenario: s.load, config, seed: 1 });
  for (const s of scenarios) for (const config of [kep, all]) combinations.push({ name: s.name, scenario: s.load, config, seed: 2 });
  for (const config of [kep, all]) combinations.push({ name: 'generated-large-1', scenario: () => generateScenario(1, 'large'), config, seed: 1 });
}
const crashSample = quick ? 6 : 12;
const faultSample = quick ? 3 : 4;

/** `n` items spread evenly over `items` (all of them when there are no more than `n`). */
function spread<T>(items: readonly T[], n: number): T[] {
  if (items.length <= n) return [...items];
  if (n === 1) return items.slice(0, 1);
  return Array.from({ length: n }, (_, i) => items[Math.round((i * (items.length - 1)) / (n - 1))] as T);
}

const started = performance.now();
let runs = 0;
const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
for (const c of combinations) {
  const scenario = c.scenario();
  const head = `${c.name} | ${c.config.name} | ${c.seed}`;
  const base = await simulate({ scenario, gates: c.config.gate, seed: c.seed, fullTrace: true, recordCalls: true, recordCrashPoints: true });
  runs++;
  const digest = createHash('sha256').update(JSON.stringify({ trace: base.trace, calls: base.calls, crashPoints: base.crashPoints })).digest('hex');
  out(`${head} | fault-free, full trace | ${digest}`);
  const plans: Perturbation[][] = [[]];
  for (const crash of ['restart', 'reboot'] as const) {
    // One crash point per distinct world state, as the explorer runs them.
    const seen = new Set<string>();
    const distinct = base.crashPoints.filter((cp) => !seen.has(cp.state) && seen.add(cp.state) !== undefined);
    for (const cp of spread(distinct, crashSample)) plans.push([{ kind: 'crash', crash, at: cp.at, seq: cp.seq }]);
  }
  const csiCalls = Array.from({ length: base.csiCalls }, (_, i) => i + 1);
  for (const k of spread(csiCalls, faultSample)) for (const fault of FAULT_KINDS) plans.push([{ kind: 'fault', fault, csiCall: k }]);
  for (const plan of plans) {
    const r = await simulate({ scenario, gates: c.config.gate, seed: c.seed, plan });
    runs++;
    const violations = r.violations.map((v) => `${v.invariant}@${v.step}`).join(',');
    out(`${head} | ${formatPlan(plan)} | ${r.traceHash} | ${r.finalState} | ${r.endReason} | ${r.portCalls} | ${r.csiCalls} | ${r.steps} | ${r.virtualMs} | ${violations}`);
  }
}
out(`# ${combinations.length} combinations, ${runs} runs, ${((performance.now() - started) / 1000).toFixed(0)} s wall, ${(process.cpuUsage().user / 1e6).toFixed(0)} s CPU`);
