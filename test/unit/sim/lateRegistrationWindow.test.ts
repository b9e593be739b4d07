// Replay of an explorer finding that was a simulator artefact (docs/explorer.md): after a reboot a
// driver with `registersAfter` perturbs the engine until it registered (the stuck window counts
// from then), but a scenario step after the reboot (a `fault:` rule) set the last perturbation
// back to its own time. The run was called stuck 3 virtual minutes after that step, 5 s before
// the late driver registered: "not converged (nothing changed for 3 virtual minutes):
// mock-57c401c9dec61f8d is wanted but not staged; ... is not published for pod pod-3"
// (generated workload 487, shrunk, every gate on; it failed with no crash of the plan at all).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { parseScenario } from '../../../src/sim/scenario.js';
import { parsePlan } from '../../../src/sim/plan.js';
import { REBOOT_DELAY_MS, STUCK_WINDOW_MS, simulate } from '../../../src/sim/simulation.js';

/** Every gate on (KEP-6058's and every nodevol gate, as the search ran). */
const EVERY_GATE = ['AllAlpha=true'];

const REGISTERS_AFTER_MS = 3 * 60_000;

const scenario = parseScenario(
  [
    'name: generated-medium-487-converges',
    'clusterSignalsChanges: false',
    'drivers:',
    '  - { name: a.csi.example.com, attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: lenient, registersAfter: 3m, singleNodeMultiWriter: true }',
    '  - { name: b.csi.example.com, attachRequired: false, podInfoOnMount: false, stageUnstage: false, mode: strict, registersAfter: 3m, singleNodeMultiWriter: true }',
    'volumes:',
    '  - { name: pv-1, handle: mock-57c401c9dec61f8d, driver: a.csi.example.com }',
    '  - { name: pv-2, handle: mock-3ff6904030512d92, driver: b.csi.example.com, accessModes: [ReadWriteMany] }',
    '  - { name: pv-3, handle: mock-21840a96eaf08ef8, driver: a.csi.example.com }',
    '  - { name: pv-4, handle: mock-d664935601ddef9a, driver: b.csi.example.com, accessModes: [ReadOnlyMany] }',
    'pods:',
    '  - { uid: pod-3, volumes: [pv-1] }',
    'steps:',
    '  - wait: converged',
    '  - restartDriver: b.csi.example.com',
    '  - fault: { method: NodeStageVolume, code: INTERNAL, times: 3 }',
    '  - fault: { method: NodeStageVolume, delay: 30s, clientTimeout: 1m, times: 3 }',
    '  - reboot',
    '  - fault: { method: NodeUnpublishVolume, delay: 90s, clientTimeout: 2s, times: 1 }',
    '',
  ].join('\n'),
  'generated-medium-487-converges.yaml',
);

describe('simulator: a step after a reboot does not cut short the late drivers\' perturbation (explorer finding, generated workload 487)', () => {
  for (const [what, plan] of [
    ['no crash of the plan', ''],
    ['plan restart:after:154 (the finding\'s)', 'restart:after:154'],
  ] as const) {
    it(`every gate on, ${what}: the driver registers 3 minutes after the reboot, pv-1 is staged and published; no converges violation`, async () => {
      const r = await simulate({ scenario, gates: FeatureGate.parse(EVERY_GATE).gate, seed: 487, plan: parsePlan(plan), fullTrace: true });
      assert.deepEqual(
        r.violations.map((v) => `${v.invariant}: ${v.message}`),
        [],
        'was: not converged (nothing changed for 3 virtual minutes): mock-57c401c9dec61f8d is wanted but not staged; mock-57c401c9dec61f8d is not published for pod pod-3',
      );
      assert.equal(r.endReason, 'converged');
      const reboot = r.trace.find((s) => s.event.kind === 'crash' && s.event.label.startsWith('reboot'));
      assert.ok(reboot !== undefined, 'the scenario reboots');
      const registers = reboot.timeMs + REBOOT_DELAY_MS + REGISTERS_AFTER_MS;
      // The step after the reboot (the NodeUnpublishVolume rule) ran at the reboot's time: the old
      // window, counted from it, ended before the driver registered.
      assert.ok(reboot.timeMs + STUCK_WINDOW_MS < registers);
      const ok = (method: string): number[] => r.trace.flatMap((s) => (s.csi?.method === method && s.csi.volumeId === 'mock-57c401c9dec61f8d' && s.csi.code === 'OK' && s.timeMs > reboot.timeMs ? [s.timeMs] : []));
      const staged = ok('NodeStageVolume');
      assert.ok(staged.length > 0 && (staged[0] ?? 0) >= registers, `staged at ${JSON.stringify(staged)} ms, driver registers at ${registers} ms`);
      assert.ok(ok('NodePublishVolume').length > 0, 'pod-3 published again');
    });
  }

  it("KEP-6058's gate alone and every gate off: no converges; the run now gets to the restage's final errors, the gap CSIKeepUncertainMountOnFinalError closes (nothing-removed-early)", async () => {
    for (const gates of [['CSIGlobalMountReconstruction=true'], ['AllAlpha=false'], ['CSIGlobalMountReconstruction=true', 'CSIKeepUncertainMountOnFinalError=true']]) {
      const r = await simulate({ scenario, gates: FeatureGate.parse(gates).gate, seed: 487 });
      const expected = gates.includes('CSIKeepUncertainMountOnFinalError=true') ? [] : ['nothing-removed-early'];
      assert.deepEqual([...new Set(r.violations.map((v) => v.invariant))], expected, gates.join(','));
      assert.equal(r.endReason, 'converged', gates.join(','));
    }
  });
});
