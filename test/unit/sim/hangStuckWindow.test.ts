// Replay of an explorer finding that was a simulator artefact (docs/explorer.md): the stuck window (a run
// ends as not converging once nothing changed for STUCK_WINDOW_MS) counted from the moment a
// planned hang arrived at the driver, not from the moment its DEADLINE_EXCEEDED reached the engine
// 2 minutes later. The operation's backoff starts at that answer, so the engine's retry came after
// the run had already been called stuck. The same held for a scenario's own fault rule
// (`fault:` steps): it perturbed only when the step ran, not when a call that took it was
// answered (generated workload 5511, a clientTimeout rule answering 2 minutes after the call).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { BACKOFF_MAX_MS } from '../../../src/operationexecutor/nestedPendingOperations.js';
import { loadBuiltinScenario, parseScenario } from '../../../src/sim/scenario.js';
import { CSI_CLIENT_TIMEOUT_MS } from '../../../src/sim/fencedPorts.js';
import { parsePlan } from '../../../src/sim/plan.js';
import { LIVENESS_BOUND_MS, STUCK_WINDOW_MS, simulate, type SimResult } from '../../../src/sim/simulation.js';

const everyGate = (): FeatureGate => FeatureGate.parse(['AllAlpha=true']).gate;

/** CSI calls of a full trace in the order sent (index 1 = the run's first), with answer and times. */
function csiCalls(r: SimResult): { index: number; method: string; volumeId: string; sentMs: number; answer: string; answeredMs: number }[] {
  const sent: { seq: number; method: string; volumeId: string; sentMs: number }[] = [];
  const answers = new Map<number, { answer: string; atMs: number }>();
  for (const s of r.trace) {
    for (const c of s.calls) {
      if (c.port !== 'csi') continue;
      if (c.result === 'sent') sent.push({ seq: c.seq, method: c.op, volumeId: c.args, sentMs: s.timeMs });
      else answers.set(c.seq, { answer: c.result, atMs: s.timeMs });
    }
  }
  return sent.map((c, i) => ({ index: i + 1, method: c.method, volumeId: c.volumeId, sentMs: c.sentMs, answer: answers.get(c.seq)?.answer ?? '(none)', answeredMs: answers.get(c.seq)?.atMs ?? -1 }));
}

describe('simulator: a planned hang perturbs the engine when its answer arrives (explorer finding, rewanted-during-unstage --faults)', () => {
  it('every gate on, fault:Hang:26 (the first NodeGetCapabilities after the unstage ended hangs): the retry after the backoff stages and publishes; no converges violation', async () => {
    const scenario = loadBuiltinScenario('rewanted-during-unstage');
    const r = await simulate({ scenario, gates: everyGate(), seed: 1, plan: [{ kind: 'fault', fault: 'Hang', csiCall: 26 }], fullTrace: true });
    assert.deepEqual(
      r.violations.map((v) => `${v.invariant}: ${v.message}`),
      [],
      'was: not converged (nothing changed for 3 virtual minutes): vol-1 is wanted but not staged; vol-1 is not published for pod pod-b',
    );
    assert.equal(r.endReason, 'converged');
    const calls = csiCalls(r);
    const hung = calls.find((c) => c.index === 26);
    assert.ok(hung !== undefined, 'the run has a 26th CSI call');
    assert.equal(hung.method, 'NodeGetCapabilities');
    assert.equal(hung.answer, 'DEADLINE_EXCEEDED');
    assert.equal(hung.answeredMs - hung.sentMs, CSI_CLIENT_TIMEOUT_MS);
    // The restage comes after the volume's backoff, which started at the hang's answer: later than
    // the old window counted from the hang's arrival, within the window counted from its answer.
    const stage = calls.find((c) => c.index > 26 && c.method === 'NodeStageVolume' && c.answer === 'OK');
    assert.ok(stage !== undefined, JSON.stringify(calls.slice(20)));
    assert.ok(stage.sentMs > hung.sentMs + STUCK_WINDOW_MS, `staged at ${stage.sentMs} ms, hang sent at ${hung.sentMs} ms`);
    assert.ok(stage.sentMs < hung.answeredMs + STUCK_WINDOW_MS, `staged at ${stage.sentMs} ms, hang answered at ${hung.answeredMs} ms`);
    assert.ok(calls.some((c) => c.index > stage.index && c.method === 'NodePublishVolume' && c.answer === 'OK'), 'pod-b published');
  });

  it('every gate on: the other hangs the explorer reported the same way (calls 28, 31, 32) converge too', async () => {
    const scenario = loadBuiltinScenario('rewanted-during-unstage');
    for (const csiCall of [28, 31, 32]) {
      const r = await simulate({ scenario, gates: everyGate(), seed: 1, plan: [{ kind: 'fault', fault: 'Hang', csiCall }] });
      assert.deepEqual(r.violations.map((v) => v.invariant), [], `fault:Hang:${csiCall}`);
      assert.equal(r.endReason, 'converged', `fault:Hang:${csiCall}`);
    }
  });
});

describe("simulator: a scenario's counted fault rule perturbs the engine when a call that took it is answered (explorer finding, generated workload 5511)", () => {
  // Generated medium workload 5511 (every gate on, seed 5511), shrunk: pv-2 (attachable) is
  // wanted by pod-3 and, after the reboot, by pod-2; its NodePublishVolume is held 30 s and
  // answered DEADLINE_EXCEEDED after 2 minutes, 3 times. Both pods' mounts share the volume's
  // operation key and backoff (kubelet's operation_executor.go MountVolume for an attachable
  // volume), so after the second timed-out answer the retry waits the longest backoff, 2m2s. The
  // stuck window counted from the last world change (the driver's held publish landing, 30 s
  // after the call), and the run was called stuck 90 s after the answer: "not converged (nothing
  // changed for 3 virtual minutes): mock-3ff6904030512d92 is not published for pod pod-3".
  const scenario = parseScenario(
    [
      'name: generated-medium-5511-converges',
      'drivers:',
      '  - { name: a.csi.example.com, attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: strict, registersAfter: 1m, singleNodeMultiWriter: true }',
      '  - { name: b.csi.example.com, attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: lenient, registersAfter: 10s, singleNodeMultiWriter: true }',
      'volumes:',
      '  - { name: pv-1, handle: mock-57c401c9dec61f8d, driver: b.csi.example.com }',
      '  - { name: pv-2, handle: mock-3ff6904030512d92, driver: a.csi.example.com }',
      '  - { name: pv-3, handle: mock-21840a96eaf08ef8, driver: b.csi.example.com, volumeMode: Block }',
      '  - { name: scratch-4, handle: mock-459bdcd6ecbb40e3, driver: a.csi.example.com, inline: true }',
      'pods:',
      '  - { uid: pod-1, volumes: [pv-3, pv-1] }',
      '  - { uid: pod-2, volumes: [pv-2], running: false }',
      '  - { uid: pod-3, volumes: [pv-2, scratch-4] }',
      'steps:',
      '  - wait: converged',
      '  - fault: { method: NodeStageVolume, volumeId: mock-21840a96eaf08ef8, hang: true, times: 1 }',
      '  - slowDisk: { latency: 1s, for: 30s }',
      '  - reboot',
      '  - addPod: pod-2',
      '  - fault: { method: NodePublishVolume, volumeId: mock-3ff6904030512d92, delay: 30s, clientTimeout: 2m, times: 3 }',
      '  - slowDisk: { latency: 200ms, for: 30s }',
      '  - restart',
      '  - fsFault: { code: ENOSPC, for: 30s }',
      '  - apiDown: { for: 30s }',
      '',
    ].join('\n'),
    'generated-medium-5511-converges.yaml',
  );

  it('every gate on, plan reboot:after:722: the third timed-out publish comes after the 2m2s backoff, then both pods are published; no converges violation', async () => {
    const r = await simulate({ scenario, gates: everyGate(), seed: 5511, plan: parsePlan('reboot:after:722'), fullTrace: true });
    assert.deepEqual(
      r.violations.map((v) => `${v.invariant}: ${v.message}`),
      [],
      'was: not converged (nothing changed for 3 virtual minutes): mock-3ff6904030512d92 is not published for pod pod-3',
    );
    assert.equal(r.endReason, 'converged');
    const publishes = csiCalls(r).filter((c) => c.method === 'NodePublishVolume' && c.volumeId === 'mock-3ff6904030512d92');
    const timedOut = publishes.filter((c) => c.answer === 'DEADLINE_EXCEEDED');
    assert.equal(timedOut.length, 3, JSON.stringify(publishes));
    const [, second, third] = timedOut;
    assert.ok(second !== undefined && third !== undefined);
    // The retry waits the longest backoff from the answer: later than the old window allowed
    // (counted from the held publish landing at the driver, 30 s after it was sent), within the
    // window counted from the answer.
    assert.ok(third.sentMs - second.answeredMs >= BACKOFF_MAX_MS, `retried ${third.sentMs - second.answeredMs} ms after the answer`);
    assert.ok(third.sentMs > second.sentMs + 30_000 + STUCK_WINDOW_MS, `retried at ${third.sentMs} ms`);
    assert.ok(third.sentMs < second.answeredMs + STUCK_WINDOW_MS, `retried at ${third.sentMs} ms`);
    // Once the rule is used up, both pods' targets are published.
    const targets = r.trace.flatMap((s) => (s.csi?.method === 'NodePublishVolume' && s.csi.volumeId === 'mock-3ff6904030512d92' && s.csi.code === 'OK' && s.timeMs > third.answeredMs ? [String(s.csi.request['targetPath'])] : []));
    assert.deepEqual(targets.map((t) => t.split('/')[5]).sort(), ['pod-2', 'pod-3']);
  });

  it("KEP-6058's gate alone and every gate off (the reboot at each one's call after the held NodeStageVolume): the same wait, now converged", async () => {
    for (const [gate, plan] of [
      ['CSIGlobalMountReconstruction=true', 'reboot:after:722'],
      ['CSIGlobalMountReconstruction=false', 'reboot:after:740'],
    ] as const) {
      const r = await simulate({ scenario, gates: FeatureGate.parse([gate]).gate, seed: 5511, plan: parsePlan(plan) });
      assert.deepEqual(r.violations.map((v) => `${v.invariant}: ${v.message}`), [], `${gate} ${plan}`);
      assert.equal(r.endReason, 'converged', `${gate} ${plan}`);
    }
  });

  it('a rule with no count (it lasts until clearFaults) does not perturb at its answers: a publish refused for ever ends the run at the liveness bound counted from the step', async () => {
    const forever = parseScenario(
      'name: t\ndrivers:\n  - name: csi.example.com\nvolumes:\n  - name: pv-1\n    handle: vol-1\npods:\n  - uid: pod-a\n    volumes: [pv-1]\nsteps:\n  - fault: { method: NodePublishVolume, code: INTERNAL }\n',
      't.yaml',
    );
    const r = await simulate({ scenario: forever, gates: everyGate(), seed: 1 });
    assert.equal(r.endReason, 'bound');
    assert.equal(r.virtualMs, LIVENESS_BOUND_MS);
    assert.deepEqual(r.violations.map((v) => v.invariant), ['converges']);
  });
});
