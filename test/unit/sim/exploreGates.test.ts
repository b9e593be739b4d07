// Every nodevol gate has an explorer scenario that proves it, and the gate check
// (bench/exploreGates.ts, run in CI) fails with **NO PROOF** for a gate that has none.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CSIGlobalMountReconstruction, knownFeatures } from '../../../src/features/features.js';
import { GATE_PROOFS, nodevolGates, planProofs } from '../../../src/sim/gateProofs.js';
import { builtinScenarioNames } from '../../../src/sim/scenario.js';

describe('gate proofs (bench/exploreGates.ts)', () => {
  it('every gate of src/features/features.ts but KEP-6058\'s and its alias has a built-in proof scenario', () => {
    const gates = nodevolGates();
    const registered = knownFeatures().filter(([, s]) => s.aliasOf === undefined && s.retired === undefined).map(([n]) => n);
    assert.deepEqual([...gates, CSIGlobalMountReconstruction].sort(), [...registered].sort());
    assert.ok(gates.includes('CSIRetryReconstructionCleanup'));
    const builtin = builtinScenarioNames();
    const plans = planProofs(gates, GATE_PROOFS, builtin, builtin);
    assert.deepEqual(plans.filter((p) => p.kind !== 'run'), []);
    assert.equal(plans.find((p) => p.gate === 'CSIRetryReconstructionCleanup' && p.kind === 'run')?.kind, 'run');
    // A gate fixed on two paths has a proof for each.
    assert.deepEqual(plans.filter((p) => p.gate === 'CSIUnstageCompletesBeforeRestage').map((p) => (p.kind === 'missing' ? p.why : p.scenario)), ['rewanted-during-unstage', 'block-restaged-during-unstage']);
  });

  it('a gate with no scenario, or one naming a scenario that is not built in, has NO PROOF; one left out of the selection is not run', () => {
    const builtin = ['alpha-gap', 'raw-block'];
    const plans = planProofs(['GateA', 'GateB', 'GateC', 'GateD'], { GateA: ['alpha-gap'], GateC: ['no-such-scenario'], GateD: ['raw-block'] }, builtin, ['alpha-gap']);
    assert.deepEqual(plans, [
      { gate: 'GateA', kind: 'run', scenario: 'alpha-gap' },
      { gate: 'GateB', kind: 'missing', why: 'no proof scenario' },
      { gate: 'GateC', kind: 'missing', why: 'proof scenario no-such-scenario is not built in' },
      { gate: 'GateD', kind: 'not-selected', scenario: 'raw-block' },
    ]);
  });
});
