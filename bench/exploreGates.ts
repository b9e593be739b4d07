/**
 * The gates' explorer proof (`npm run explore:gates`; a CI job, too slow for `npm test`): every
 * built-in scenario at depth 1, both crash kinds, seed 1,
 *   - with KEP-6058's gate only (upstream with the KEP),
 *   - with every gate on (nodevol),
 * and for each nodevol gate its proof scenario (src/sim/gateProofs.ts) with every gate on but that
 * one: the gate's violation must show there and vanish with the gate on. Prints the proof table
 * of docs/feature-gates.md. Exit 1 when, with every gate on, any scenario reports a violation not
 * listed in KNOWN_UNGATED (each of which docs/feature-gates.md would have to explain), when a proof does not hold, or when a gate of
 * src/features/features.ts has no proof scenario (**NO PROOF**).
 *
 * `--matrix [--faults]`: instead, the whole table scenario × gates (KEP-6058 off, on, each gate
 * "every gate on but this one", every gate on), the tables of docs/explorer.md.
 * Arguments that are not flags select scenarios (default: every built-in one).
 *
 * `--shard I/N`: only rows I, I+N, I+2N … of each table (the scenario rows, then the proof rows),
 * so that N processes share the work; `.ci/explore-gates` runs one shard per core and prints
 * their tables one after the other. A shard exits 1 on its own rows' failures, as above.
 */
import { FeatureGate, CSIGlobalMountReconstruction } from '../src/features/features.js';
import { explore, type ExploreReport } from '../src/sim/explorer.js';
import { GATE_PROOFS, nodevolGates, planProofs } from '../src/sim/gateProofs.js';
import { builtinScenarioNames, loadBuiltinScenario } from '../src/sim/scenario.js';

/** Violations left with every gate on, on purpose (docs/feature-gates.md would say why they are not gated). None today. */
const KNOWN_UNGATED: Readonly<Record<string, readonly string[]>> = {};

const args = process.argv.slice(2);
const matrix = args.includes('--matrix');
const faults = args.includes('--faults');
const shardArg = args.find((a) => a.startsWith('--shard='))?.slice('--shard='.length) ?? (args.includes('--shard') ? args[args.indexOf('--shard') + 1] : undefined);
const shard = parseShard(shardArg);
const named = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--shard');

function parseShard(text: string | undefined): { index: number; count: number } {
  if (text === undefined) return { index: 0, count: 1 };
  const m = /^(\d+)\/(\d+)$/.exec(text);
  const index = Number(m?.[1]);
  const count = Number(m?.[2]);
  if (m === null || count < 1 || index >= count) {
    console.error(`exploreGates: --shard ${text}: want I/N with 0 <= I < N`);
    process.exit(2);
  }
  return { index, count };
}
const mine = <T>(rows: readonly T[]): T[] => rows.filter((_, i) => i % shard.count === shard.index);
const builtin = builtinScenarioNames();
const scenarios = named.length > 0 ? named : builtin;
const gates = nodevolGates();

function gatesWith(kep: boolean, on: readonly string[]): FeatureGate {
  return FeatureGate.parse([[`${CSIGlobalMountReconstruction}=${kep}`, ...on.map((g) => `${g}=true`)].join(',')]).gate;
}

async function run(scenario: string, gate: FeatureGate, withFaults = false): Promise<ExploreReport> {
  return explore({
    scenario: loadBuiltinScenario(scenario),
    gates: gate,
    crash: 'both',
    depth: 1,
    faults: withFaults,
    seed: 1,
    runs: 1,
    replayCommand: (seed, plan) => `nodevol explore --scenario ${scenario} --seed ${seed} --plan ${plan}`,
  });
}

function summary(r: ExploreReport): string {
  return r.violations.length === 0 ? 'none' : r.violations.map((v) => `${v.invariant}(${v.runs})`).join(', ');
}

const started = Date.now();
let failed = false;
if (matrix) {
  const columns: { title: string; gate: FeatureGate }[] = [
    { title: 'KEP off', gate: gatesWith(false, []) },
    { title: 'KEP on', gate: gatesWith(true, []) },
    ...gates.map((g) => ({ title: `all but ${g}`, gate: gatesWith(true, gates.filter((x) => x !== g)) })),
    { title: 'every gate on', gate: gatesWith(true, gates) },
  ];
  console.log(`faults ${faults ? 'on' : 'off'}`);
  console.log(`| scenario | ${columns.map((c) => c.title).join(' | ')} |`);
  console.log(`|---|${columns.map(() => '---').join('|')}|`);
  for (const scenario of mine(scenarios)) {
    const cells: string[] = [];
    for (const c of columns) cells.push(summary(await run(scenario, c.gate, faults)));
    console.log(`| \`${scenario}\` | ${cells.join(' | ')} |`);
  }
} else {
  console.log('| scenario | KEP-6058 gate only | every gate on |');
  console.log('|---|---|---|');
  for (const scenario of mine(scenarios)) {
    const kep = await run(scenario, gatesWith(true, []));
    const all = await run(scenario, gatesWith(true, gates));
    const unexpected = all.violations.filter((v) => !(KNOWN_UNGATED[scenario] ?? []).includes(v.invariant));
    if (unexpected.length > 0) failed = true;
    console.log(`| \`${scenario}\` | ${summary(kep)} | ${summary(all)}${unexpected.length > 0 ? ' **UNEXPECTED**' : ''} |`);
  }
  console.log('');
  console.log('| gate | proof scenario | every other gate on, this one off | every gate on |');
  console.log('|---|---|---|---|');
  for (const p of mine(planProofs(gates, GATE_PROOFS, builtin, scenarios))) {
    if (p.kind === 'missing') {
      failed = true;
      console.log(`| \`${p.gate}\` | **NO PROOF** (${p.why}) | | |`);
      continue;
    }
    if (p.kind === 'not-selected') {
      console.log(`| \`${p.gate}\` | \`${p.scenario}\` (not selected) | | |`);
      continue;
    }
    const off = await run(p.scenario, gatesWith(true, gates.filter((g) => g !== p.gate)));
    const on = await run(p.scenario, gatesWith(true, gates));
    const holds = off.violations.length > 0 && on.violations.length === 0;
    if (!holds) failed = true;
    console.log(`| \`${p.gate}\` | \`${p.scenario}\` | ${summary(off)} | ${summary(on)}${holds ? '' : ' **PROOF FAILS**'} |`);
  }
}
const shardNote = shard.count > 1 ? ` (shard ${shard.index}/${shard.count})` : '';
console.log(`\n${((Date.now() - started) / 1000).toFixed(0)} s wall, ${(process.cpuUsage().user / 1e6).toFixed(0)} s CPU${shardNote}`);
process.exitCode = failed ? 1 : 0;
