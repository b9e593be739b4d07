// The explorer killers of the mutation run (`npm run mutate`, docs/benchmarks.md "Mutation
// score"): the built-in scenarios and a fixed set of generated workloads, each explored at depth
// 1 with both crash kinds and at most CRASH_POINTS crash points (sampled by seed, as `nodevol
// explore --generate` does), with every gate on (no violation allowed) and with KEP-6058's gate
// only (exactly the violations of the shipped engine: the upstream gaps nodevol's gates close, so
// a mutant that changes what the kubelet copy does is seen there too). The files that run them end
// in .mutation.ts, not .test.ts: they are not part of `npm test`; run one by hand with
// `node --test dist/test/mutation/<name>.mutation.js`.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { CSIGlobalMountReconstruction, FeatureGate } from '../../src/features/features.js';
import { explore } from '../../src/sim/explorer.js';
import { nodevolGates } from '../../src/sim/gateProofs.js';
import { builtinScenarioNames, loadBuiltinScenario } from '../../src/sim/scenario.js';
import { exploreWorkload } from '../../src/sim/swarm.js';

/** Crash points explored per scenario or workload (of both kinds), sampled by seed. */
export const CRASH_POINTS = 12;
/** Generated medium workloads 1..WORKLOADS. */
export const WORKLOADS = 10;

export type GateSet = 'every gate on' | 'KEP-6058 only';

function gateValues(set: GateSet): Record<string, boolean> {
  const values: Record<string, boolean> = { [CSIGlobalMountReconstruction]: true };
  if (set === 'every gate on') for (const g of nodevolGates()) values[g] = true;
  return values;
}

/** The invariants broken by a built-in scenario, sorted. */
export async function scenarioViolations(name: string, set: GateSet): Promise<string[]> {
  const report = await explore({
    scenario: loadBuiltinScenario(name),
    gates: FeatureGate.of(gateValues(set)),
    crash: 'both',
    depth: 1,
    faults: false,
    seed: 1,
    runs: 1,
    maxCrashPoints: CRASH_POINTS,
    shrink: false,
    replayCommand: () => '',
  });
  return [...new Set(report.violations.map((v) => v.invariant))].sort();
}

/** The invariants broken by generated medium workload `seed`, sorted. */
export async function workloadViolations(seed: number, set: GateSet): Promise<string[]> {
  const r = await exploreWorkload(seed, { size: 'medium', gates: gateValues(set), crash: 'both', depth: 1, faults: false, maxCrashPoints: CRASH_POINTS, shrinkBudget: 0 });
  return [...new Set(r.violations.map((v) => v.invariant))].sort();
}

/** One test: every built-in scenario breaks exactly `expected[name]` (none when absent). */
export function scenariosTest(set: GateSet, expected: Readonly<Record<string, readonly string[]>>): void {
  it(`built-in scenarios, ${set}: ${Object.keys(expected).length === 0 ? 'no violation' : 'the violations of the shipped engine'}`, async () => {
    const got: Record<string, string[]> = {};
    for (const name of builtinScenarioNames()) {
      const v = await scenarioViolations(name, set);
      if (v.length > 0) got[name] = v;
    }
    assert.deepEqual(got, expected);
  });
}

/** One test: generated workloads 1..WORKLOADS break exactly `expected[seed]` (none when absent). */
export function workloadsTest(set: GateSet, expected: Readonly<Record<number, readonly string[]>>): void {
  it(`generated medium workloads 1..${WORKLOADS}, ${set}: ${Object.keys(expected).length === 0 ? 'no violation' : 'the violations of the shipped engine'}`, async () => {
    const got: Record<number, string[]> = {};
    for (let seed = 1; seed <= WORKLOADS; seed++) {
      const v = await workloadViolations(seed, set);
      if (v.length > 0) got[seed] = v;
    }
    assert.deepEqual(got, expected);
  });
}
