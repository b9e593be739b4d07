// The line the demo says next to the gate-on run's "safe" (src/cli/demoCommand.ts,
// KEP_GATE_ALONE_GAPS) is the explorer's finding: each story explored at every crash point
// (restart and reboot, depth 1, seed 1) with KEP-6058's gate alone breaks exactly the invariants
// the line names, and with the gates it names as well breaks none.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gateAloneGapLine, KEP_GATE_ALONE_GAPS, DEMO_SCENARIO, type GateAloneGap } from '../../../src/cli/demoCommand.js';
import { CSIGlobalMountReconstruction, FeatureGate } from '../../../src/features/features.js';
import { explore } from '../../../src/sim/explorer.js';
import { loadBuiltinScenario } from '../../../src/sim/scenario.js';

async function brokenWith(gap: GateAloneGap, gates: readonly string[]): Promise<string[]> {
  const report = await explore({
    scenario: loadBuiltinScenario(gap.scenario),
    gates: FeatureGate.of(Object.fromEntries(gates.map((g) => [g, true]))),
    crash: 'both',
    depth: 1,
    faults: false,
    seed: 1,
    runs: 1,
    shrink: false,
    replayCommand: () => '',
  });
  return [...new Set(report.violations.map((v) => v.invariant))].sort();
}

describe("the demo's line on what KEP-6058's gate alone leaves", () => {
  const gaps = [...new Set(Object.values(KEP_GATE_ALONE_GAPS))];

  it('the default scenario has one, and every line is under 200 characters', () => {
    assert.ok(KEP_GATE_ALONE_GAPS[DEMO_SCENARIO] !== undefined);
    for (const gap of gaps) {
      const line = gateAloneGapLine(gap);
      assert.ok(line.length < 200, `${line.length}: ${line}`);
      for (const word of [gap.scenario, ...gap.invariants, ...gap.closedBy]) assert.ok(line.includes(word), `${word} not in: ${line}`);
    }
  });

  for (const gap of gaps) {
    it(`${gap.scenario}: the gate alone breaks ${gap.invariants.join(', ')}; with ${gap.closedBy.join(', ')} nothing`, async () => {
      assert.deepEqual(await brokenWith(gap, [CSIGlobalMountReconstruction]), [...gap.invariants].sort());
      assert.deepEqual(await brokenWith(gap, [CSIGlobalMountReconstruction, ...gap.closedBy]), []);
    });
  }
});
