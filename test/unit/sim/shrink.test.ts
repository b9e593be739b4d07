// Shrinking a counterexample at the scenario level (src/sim/shrink.ts): noise is taken out, the
// same invariant still breaks, and a crash is carried over to the call it hit.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { FeatureGate } from '../../../src/features/features.js';
import { explore } from '../../../src/sim/explorer.js';
import { parseScenario, type Scenario } from '../../../src/sim/scenario.js';
import { shrinkCase } from '../../../src/sim/shrink.js';
import { simulate } from '../../../src/sim/simulation.js';

const kepOnly = FeatureGate.of({ CSIGlobalMountReconstruction: true });
const gateOff = FeatureGate.of({ CSIGlobalMountReconstruction: false });

/** A scenario with the bug's volume and pods, plus a second driver, volume and pod that have nothing to do with it. */
function noisy(bugSteps: string): Scenario {
  return parseScenario(
    `name: noisy
drivers:
  - name: csi.example.com
  - name: other.example.com
    stageUnstage: false
volumes:
  - name: pv-1
    handle: vol-1
  - name: pv-2
    handle: vol-2
    driver: other.example.com
  - name: pv-3
    handle: vol-3
pods:
  - uid: pod-a
    volumes: [pv-1]
  - uid: pod-b
    volumes: [pv-1]
    running: false
  - uid: pod-c
    volumes: [pv-2, pv-3]
steps:
${bugSteps}`,
    'noisy.yaml',
  );
}

describe('shrinking a counterexample to a minimal scenario', () => {
  it('rewanted during unstage (KEP-6058 gate only): the unrelated driver, volumes, pod and steps go; the violation stays', async () => {
    const scenario = noisy(`  - wait: converged
  - advance: 5s
  - deletePod: pod-c
  - fault: { method: NodeUnstageVolume, volumeId: vol-1, delay: 3m, clientTimeout: 2m, times: 1 }
  - deletePod: pod-a
  - advance: 5s
  - addPod: pod-b
  - wait: converged
`);
    const before = await simulate({ scenario, gates: kepOnly, seed: 1 });
    assert.ok(before.violations.some((v) => v.invariant === 'stage-after-unstage'), JSON.stringify(before.violations));
    const r = await shrinkCase({ scenario, gates: kepOnly, seed: 1, plan: [], invariant: 'stage-after-unstage' });
    assert.equal(r.violation.invariant, 'stage-after-unstage');
    assert.deepEqual(r.scenario.volumes.map((v) => v.name), ['pv-1']);
    assert.deepEqual(r.scenario.drivers.map((d) => d.name), ['csi.example.com']);
    assert.deepEqual(r.scenario.pods.map((p) => p.uid).sort(), ['pod-a', 'pod-b']);
    assert.ok(r.scenario.steps.length < scenario.steps.length);
    assert.ok(r.scenario.steps.some((s) => s.kind === 'fault'), 'the fault that makes it is kept');
    const again = await simulate({ scenario: r.scenario, gates: kepOnly, seed: 1, plan: r.plan });
    assert.ok(again.violations.some((v) => v.invariant === 'stage-after-unstage'), 'the shrunk case replays');
  });

  it('a crash is carried over to the call it hit as the scenario shrinks (KEP story 1, gate off)', async () => {
    const scenario = noisy(`  - wait: converged
  - deletePod: pod-c
  - deletePod: pod-a
  - wait: converged
`);
    const found = await explore({ scenario, gates: gateOff, crash: 'restart', depth: 1, faults: false, seed: 1, runs: 1, shrink: false, replayCommand: () => '' });
    const v = found.violations.find((x) => x.invariant === 'in-use-reported');
    assert.ok(v !== undefined && v.plan !== '', JSON.stringify(found.violations.map((x) => [x.invariant, x.plan])));
    const { parsePlan } = await import('../../../src/sim/plan.js');
    const r = await shrinkCase({ scenario, gates: gateOff, seed: 1, plan: parsePlan(v.plan), invariant: 'in-use-reported' });
    assert.equal(r.plan.length, 1, 'the crash is kept: without it nothing breaks');
    // One staged volume and the one pod deleted are enough (which of the two deleted pods' volumes is kept is the search's choice).
    assert.equal(r.scenario.volumes.length, 1);
    assert.deepEqual(r.scenario.drivers.map((d) => d.name), ['csi.example.com']);
    assert.equal(r.scenario.pods.length, 1);
    assert.ok(r.scenario.steps.length <= 2, JSON.stringify(r.scenario.steps));
    const again = await simulate({ scenario: r.scenario, gates: gateOff, seed: 1, plan: r.plan });
    assert.ok(again.violations.some((x) => x.invariant === 'in-use-reported'));
  });

  it('refuses a case that does not break the invariant', async () => {
    const scenario = noisy('  - wait: converged\n');
    await assert.rejects(shrinkCase({ scenario, gates: kepOnly, seed: 1, plan: [], invariant: 'converges' }), /does not violate converges/);
  });
});
