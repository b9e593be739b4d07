// Replays of explorer findings that were a simulator artefact (docs/explorer.md): a driver given a
// `hang: forever` rule (world.neverReturns) keeps holding its volume's lock; after a restart the
// new engine life retries the volume's operations every 100 ms, answered ABORTED (a mount and an
// unmount of the volume share one pending-operations entry, and a different operation name starts
// without backoff, as kubelet's nestedpendingoperations.go Run does), and every try rewrites files.
// The world is converged (the exempt driver's volumes are left out) but never quiet, so a last
// `wait: converged` step never passed and the run ended by the liveness bound. The allowance for
// such churn applied only once the steps were done, and the violation had an EMPTY message
// (generated workloads 8633, 9984 and 3815, shrunk, every gate on); then only once nothing but
// waits was left (8633 was found again with steps after its wait). Now a world converged all
// along for the exempt churn window passes a wait and ends a run, as quiet does. Also here: the
// convergence check's leftovers of a gone pod held by such a driver (generated workload 6675).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { explore } from '../../../src/sim/explorer.js';
import { parseScenario } from '../../../src/sim/scenario.js';
import { parsePlan } from '../../../src/sim/plan.js';
import { EXEMPT_CHURN_WINDOW_MS, LIVENESS_BOUND_MS, simulate, type SimResult } from '../../../src/sim/simulation.js';

/** Every gate on (KEP-6058's and every nodevol gate, as the search ran). */
const everyGate = (): FeatureGate => FeatureGate.parse(['AllAlpha=true']).gate;

/** Every violation names what went wrong: none has an empty message. */
function assertMessages(r: SimResult, what: string): void {
  for (const v of r.violations) assert.notEqual(v.message.trim(), '', `${what}: ${v.invariant} at step ${v.step} has an empty message`);
}

/**
 * The churn is still there (the engine is unchanged: retries every 100 ms), but the run ends
 * converged once it has been converged for the exempt churn window, long before the liveness
 * bound (it used to run to the bound: 30 virtual minutes, 10,000s of CSI calls).
 */
function assertChurnThenConverged(r: SimResult): void {
  assert.equal(r.endReason, 'converged');
  assert.ok(r.virtualMs < LIVENESS_BOUND_MS / 10, `ended at ${r.virtualMs} virtual ms`);
  assert.ok(r.csiCalls > EXEMPT_CHURN_WINDOW_MS / 100, `${r.csiCalls} CSI calls: the retries every 100 ms over the window`);
}

/** Generated medium workload 8633, shrunk (`extraSteps` appended after its last wait). */
function workload8633(extraSteps: readonly string[] = []): ReturnType<typeof parseScenario> {
  return parseScenario(
    [
      'name: generated-medium-8633-converges',
      'clusterSignalsChanges: false',
      'drivers:',
      '  - { name: a.csi.example.com, attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: lenient, registersAfter: 1m, singleNodeMultiWriter: true }',
      '  - { name: b.csi.example.com, attachRequired: false, podInfoOnMount: true, stageUnstage: false, mode: strict, registersAfter: 2s }',
      'volumes:',
      '  - { name: pv-1, handle: mock-57c401c9dec61f8d, driver: b.csi.example.com }',
      '  - { name: pv-2, handle: mock-3ff6904030512d92, driver: b.csi.example.com, volumeMode: Block }',
      '  - { name: pv-3, handle: mock-21840a96eaf08ef8, driver: a.csi.example.com }',
      '  - { name: pv-4, handle: mock-d664935601ddef9a, driver: a.csi.example.com }',
      '  - { name: refused-5, handle: mock-ef68bf9be6d59199, driver: a.csi.example.com, claim: Pending }',
      'pods:',
      '  - { uid: pod-1, volumes: [pv-4, pv-1, pv-3] }',
      '  - { uid: pod-1-r1, volumes: [pv-4, pv-1, pv-3], running: false }',
      'steps:',
      '  - wait: converged',
      '  - fault: { method: NodeUnpublishVolume, volumeId: mock-21840a96eaf08ef8, hang: forever }',
      '  - deletePod: pod-1',
      '  - addPod: pod-1-r1',
      '  - wait: converged',
      ...extraSteps,
      '',
    ].join('\n'),
    'generated-medium-8633-converges.yaml',
  );
}

describe('simulator: churn against a driver that never returns excuses a pending wait step (explorer findings, generated workloads 8633, 9984 and 3815)', () => {
  it('workload 8633, every gate on, plan restart:after:270: Stage/Unpublish of pv-3 churn ABORTED; no converges violation, the run ends converged after the exempt churn window', async () => {
    const r = await simulate({ scenario: workload8633(), gates: everyGate(), seed: 8633, plan: parsePlan('restart:after:270') });
    assertMessages(r, '8633');
    assert.deepEqual(r.violations.map((v) => `${v.invariant}: ${v.message}`), [], 'was: converges with an empty message');
    assertChurnThenConverged(r);
  });

  it('workload 9984, every gate on, plan restart:after:7844: Publish/Unpublish of pv-4 churn ABORTED; no converges violation, the run ends converged after the exempt churn window', async () => {
    const scenario = parseScenario(
      [
        'name: generated-medium-9984-converges',
        'drivers:',
        '  - { name: a.csi.example.com, attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: lenient }',
        '  - { name: b.csi.example.com, attachRequired: false, podInfoOnMount: true, stageUnstage: false, mode: lenient, singleNodeMultiWriter: true }',
        'volumes:',
        '  - { name: pv-1, handle: mock-57c401c9dec61f8d, driver: a.csi.example.com }',
        '  - { name: pv-3, handle: mock-21840a96eaf08ef8, driver: b.csi.example.com, volumeMode: Block }',
        '  - { name: pv-4, handle: mock-d664935601ddef9a, driver: b.csi.example.com, volumeMode: Block }',
        'pods:',
        '  - { uid: pod-1, volumes: [pv-3, pv-4] }',
        '  - { uid: pod-3, volumes: [pv-4, pv-1, pv-3], running: false }',
        'steps:',
        '  - wait: converged',
        '  - fault: { method: NodeUnpublishVolume, volumeId: mock-21840a96eaf08ef8, delay: 90s, clientTimeout: 2s, times: 1 }',
        '  - fault: { method: NodeUnpublishVolume, volumeId: mock-d664935601ddef9a, hang: forever, times: 1 }',
        '  - deletePod: pod-1',
        '  - addPod: pod-3',
        '  - wait: converged',
        '',
      ].join('\n'),
      'generated-medium-9984-converges.yaml',
    );
    const r = await simulate({ scenario, gates: everyGate(), seed: 9984, plan: parsePlan('restart:after:7844') });
    assertMessages(r, '9984');
    assert.deepEqual(r.violations.map((v) => `${v.invariant}: ${v.message}`), [], 'was: converges with an empty message');
    assertChurnThenConverged(r);
  });
  it('workload 3815 (the same artefact, found later), every gate on, plan restart:after:126: Publish/Unpublish of pv-1 churn ABORTED; no converges violation, the run ends converged after the exempt churn window', async () => {
    const scenario = parseScenario(
      [
        'name: generated-medium-3815-converges',
        'drivers:',
        '  - { name: a.csi.example.com, attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: strict, registersAfter: 10s, singleNodeMultiWriter: true }',
        '  - { name: b.csi.example.com, attachRequired: true, podInfoOnMount: true, stageUnstage: false, mode: strict }',
        'volumes:',
        '  - { name: pv-1, handle: mock-57c401c9dec61f8d, driver: b.csi.example.com }',
        '  - { name: scratch-2, handle: mock-756f2fd9668066e4, driver: a.csi.example.com, inline: true }',
        '  - { name: pv-3, handle: mock-21840a96eaf08ef8, driver: a.csi.example.com, accessModes: [ReadWriteMany] }',
        '  - { name: pv-4, handle: mock-d664935601ddef9a, driver: a.csi.example.com, volumeMode: Block }',
        'pods:',
        '  - { uid: pod-2, volumes: [pv-1, pv-3] }',
        '  - { uid: pod-3, volumes: [pv-1, pv-4, pv-3, scratch-2], running: false }',
        'steps:',
        '  - wait: converged',
        '  - fault: { method: NodePublishVolume, volumeId: mock-57c401c9dec61f8d, code: UNAVAILABLE, times: 2 }',
        '  - advance: 5s',
        '  - fault: { method: NodeUnpublishVolume, volumeId: mock-57c401c9dec61f8d, hang: forever }',
        '  - deletePod: pod-2',
        '  - addPod: pod-3',
        '  - wait: converged',
        '',
      ].join('\n'),
      'generated-medium-3815-converges.yaml',
    );
    const r = await simulate({ scenario, gates: everyGate(), seed: 3815, plan: parsePlan('restart:after:126') });
    assertMessages(r, '3815');
    assert.deepEqual(r.violations.map((v) => `${v.invariant}: ${v.message}`), [], 'was: converges with an empty message');
    assertChurnThenConverged(r);
  });
});

describe("simulator: a gone pod's volume dirs that only the orphan sweep removes are excused while a driver that never returns holds another of its volumes (explorer finding, generated workload 6675)", () => {
  // Generated medium workload 6675, shrunk: pod-1 has pv-1 (Block, driver b, whose
  // NodeUnpublishVolume hangs for ever) and scratch-2 (inline, driver a). The pod is deleted; the
  // restart comes between scratch-2's TearDown unlinking its vol_data.json and removing its
  // volume dir. Life 2 cannot reconstruct scratch-2 (no vol_data.json) and keeps retrying pv-1's
  // unmap (ABORTED), so pv-1 stays in the actual state for pod-1 and the orphan sweep skips the
  // pod (kubelet_volumes.go cleanupOrphanedPodDirs): the empty scratch-2 dir stays. It was
  // reported as "pod pod-1 is gone but its volume directories are still there".
  const scenario = (hang: boolean): ReturnType<typeof parseScenario> =>
    parseScenario(
      [
        'name: generated-medium-6675-converges',
        'drivers:',
        '  - { name: a.csi.example.com, attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: lenient, registersAfter: 1m, singleNodeMultiWriter: true }',
        '  - { name: b.csi.example.com, attachRequired: false, podInfoOnMount: true, stageUnstage: false, mode: lenient }',
        'volumes:',
        '  - { name: pv-1, handle: mock-57c401c9dec61f8d, driver: b.csi.example.com, volumeMode: Block, accessModes: [ReadWriteMany] }',
        '  - { name: scratch-2, handle: mock-756f2fd9668066e4, driver: a.csi.example.com, inline: true }',
        'pods:',
        '  - { uid: pod-1, volumes: [pv-1, scratch-2] }',
        'steps:',
        '  - wait: converged',
        ...(hang ? ['  - fault: { method: NodeUnpublishVolume, volumeId: mock-57c401c9dec61f8d, hang: forever, times: 1 }'] : []),
        '  - deletePod: pod-1',
        '',
      ].join('\n'),
      'generated-medium-6675-converges.yaml',
    );
  const scratch = '/var/lib/kubelet/pods/pod-1/volumes/kubernetes.io~csi/scratch-2';

  it('every gate on, plan restart:after:66: the empty scratch-2 dir stays, excused; no converges violation', async () => {
    const r = await simulate({ scenario: scenario(true), gates: everyGate(), seed: 6675, plan: parsePlan('restart:after:66'), fullTrace: true });
    assertMessages(r, '6675');
    assert.deepEqual(r.violations.map((v) => `${v.invariant}: ${v.message}`), [], 'was: pod pod-1 is gone but its volume directories are still there');
    assert.equal(r.endReason, 'converged');
    // The restart came right after TearDown's unlink of vol_data.json, before its rmdir.
    const crash = r.trace.findIndex((s) => s.event.kind === 'crash');
    assert.ok(crash > 0 && (r.trace[crash - 1]?.calls ?? []).some((c) => c.op === 'unlink' && c.args === `${scratch}/vol_data.json` && c.result === 'ok'), 'restart after the unlink');
    assert.ok(!r.trace.some((s) => s.fs?.removed.includes(`${scratch}/`) === true), 'the scratch-2 dir is never removed');
  });

  it('every gate on, no hang, a restart at every crash point: the orphan sweep removes what the restart left; no violation', async () => {
    // The excuse covers only the exempt driver's doing: without it the same dirs are swept.
    const report = await explore({ scenario: scenario(false), gates: everyGate(), crash: 'restart', depth: 1, faults: false, seed: 6675, runs: 1, shrink: false, replayCommand: () => '' });
    assert.ok(report.crashPoints > 100, `${report.crashPoints} crash points`);
    assert.deepEqual(report.violations.map((v) => `${v.invariant}: ${v.message}`), []);
  });
});

describe('simulator: steps after a wait, and no violation with an empty message', () => {
  it('a step after the wait runs once the world has been converged for the exempt churn window (workload 8633 found again with the wait not last)', async () => {
    // The same churn with steps still owed after the wait (as the search found it again):
    // nothing excused the run then, and it failed by the liveness bound.
    const r = await simulate({ scenario: workload8633(['  - advance: 2s', '  - deletePod: pod-1-r1']), gates: everyGate(), seed: 8633, plan: parsePlan('restart:after:270'), fullTrace: true });
    assertMessages(r, '8633 + advance, deletePod');
    assert.deepEqual(r.violations.map((v) => `${v.invariant}: ${v.message}`), [], 'was: converges, step 5 (wait: converged) never passed');
    assertChurnThenConverged(r);
    const restart = r.trace.find((t) => t.event.kind === 'crash');
    const deleted = r.trace.find((t) => t.event.kind === 'scenario' && t.event.label === '{"kind":"deletePod","uid":"pod-1-r1"}');
    assert.ok(restart !== undefined && deleted !== undefined, 'the restart and the last step are in the trace');
    assert.ok(deleted.timeMs - restart.timeMs >= EXEMPT_CHURN_WINDOW_MS, `the wait passed ${deleted.timeMs - restart.timeMs} ms after the restart: not before the window`);
  });

  it('a run that fails liveness on a problem of the world names it (a publish refused for ever)', async () => {
    const forever = parseScenario(
      'name: t\ndrivers:\n  - name: csi.example.com\nvolumes:\n  - name: pv-1\n    handle: vol-1\npods:\n  - uid: pod-a\n    volumes: [pv-1]\nsteps:\n  - fault: { method: NodePublishVolume, code: INTERNAL }\n',
      't.yaml',
    );
    const r = await simulate({ scenario: forever, gates: everyGate(), seed: 1 });
    assert.deepEqual(r.violations.map((v) => v.invariant), ['converges']);
    assertMessages(r, 'publish refused');
    assert.match(r.violations[0]?.message ?? '', /not published for pod pod-a/);
  });
});
