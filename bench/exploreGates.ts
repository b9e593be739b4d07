/**
 * The gates' explorer proof (`npm run explore:gates`; a CI job, too slow for `npm test`): every
 * built-in scenario at depth 1, both crash kinds, seed 1,
 *   - with KEP-6058's gate only (upstream with the KEP),
 *   - with every gate on (nodevol),
 * and for each nodevol gate its proof scenario with every gate on but that one: the gate's
 * violation must show there and vanish with the gate on. Prints the table the README carries.
 * Exit 1 when, with every gate on, any scenario reports a violation not listed in
 * KNOWN_UNGATED (each of which the README explains), or when a proof does not hold.
 */
import { FeatureGate, knownFeatures, CSIGlobalMountReconstruction } from '../src/features/features.js';
import { explore, type ExploreReport } from '../src/sim/explorer.js';
import { builtinScenarioNames, loadBuiltinScenario } from '../src/sim/scenario.js';

/** nodevol gate → the scenario that proves it. */
const PROOFS: Readonly<Record<string, string>> = {
  CSIUnpublishBeforeUnstageAfterReconstruction: 'alpha-gap',
  CSIListGlobalVolumesWithoutStagingDir: 'kep-story-1',
  CSIKeepListedVolumeOnStageFailure: 'listed-restage-fails',
  CSIDurableBlockVolumePaths: 'raw-block',
  CSIUnstageCompletesBeforeRestage: 'rewanted-during-unstage',
};

/** Violations left with every gate on, on purpose (README "Gates beyond upstream": not gated). None today. */
const KNOWN_UNGATED: Readonly<Record<string, readonly string[]>> = {};

const nodevolGates = knownFeatures()
  .filter(([name, spec]) => spec.aliasOf === undefined && name !== CSIGlobalMountReconstruction)
  .map(([name]) => name);

function gatesWith(on: readonly string[]): FeatureGate {
  return FeatureGate.parse([[CSIGlobalMountReconstruction, ...on].map((g) => `${g}=true`).join(',')]).gate;
}

async function run(scenario: string, gates: FeatureGate): Promise<ExploreReport> {
  return explore({
    scenario: loadBuiltinScenario(scenario),
    gates,
    crash: 'both',
    depth: 1,
    faults: false,
    seed: 1,
    runs: 1,
    replayCommand: (seed, plan) => `nodevol explore --scenario ${scenario} --seed ${seed} --plan ${plan}`,
  });
}

function summary(r: ExploreReport): string {
  return r.violations.length === 0 ? 'none' : r.violations.map((v) => `${v.invariant}(${v.runs})`).join(', ');
}

let failed = false;
const scenarios = process.argv.length > 2 ? process.argv.slice(2) : builtinScenarioNames();
console.log('| scenario | KEP-6058 gate only | every gate on |');
console.log('|---|---|---|');
for (const scenario of scenarios) {
  const kep = await run(scenario, gatesWith([]));
  const all = await run(scenario, gatesWith(nodevolGates));
  const unexpected = all.violations.filter((v) => !(KNOWN_UNGATED[scenario] ?? []).includes(v.invariant));
  if (unexpected.length > 0) failed = true;
  console.log(`| \`${scenario}\` | ${summary(kep)} | ${summary(all)}${unexpected.length > 0 ? ' **UNEXPECTED**' : ''} |`);
}
console.log('');
console.log('| gate | proof scenario | every other gate on, this one off | every gate on |');
console.log('|---|---|---|---|');
for (const gate of nodevolGates) {
  const scenario = PROOFS[gate];
  if (scenario === undefined || !scenarios.includes(scenario)) {
    console.log(`| \`${gate}\` | (no explorer scenario) | | |`);
    continue;
  }
  const off = await run(scenario, gatesWith(nodevolGates.filter((g) => g !== gate)));
  const on = await run(scenario, gatesWith(nodevolGates));
  const holds = off.violations.length > 0 && on.violations.length === 0;
  if (!holds) failed = true;
  console.log(`| \`${gate}\` | \`${scenario}\` | ${summary(off)} | ${summary(on)}${holds ? '' : ' **PROOF FAILS**'} |`);
}
process.exitCode = failed ? 1 : 0;
