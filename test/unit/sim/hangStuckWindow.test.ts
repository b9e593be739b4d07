// Replay of an explorer finding that was a simulator artefact (docs/explorer.md): the stuck window (a run
// ends as not converging once nothing changed for STUCK_WINDOW_MS) counted from the moment a
// planned hang arrived at the driver, not from the moment its DEADLINE_EXCEEDED reached the engine
// 2 minutes later. The operation's backoff starts at that answer, so the engine's retry came after
// the run had already been called stuck.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { loadBuiltinScenario } from '../../../src/sim/scenario.js';
import { CSI_CLIENT_TIMEOUT_MS } from '../../../src/sim/fencedPorts.js';
import { STUCK_WINDOW_MS, simulate, type SimResult } from '../../../src/sim/simulation.js';

const everyGate = (): FeatureGate => FeatureGate.parse(['AllAlpha=true']).gate;

/** CSI calls of a full trace in the order sent (index 1 = the run's first), with answer and times. */
function csiCalls(r: SimResult): { index: number; method: string; sentMs: number; answer: string; answeredMs: number }[] {
  const sent: { seq: number; method: string; sentMs: number }[] = [];
  const answers = new Map<number, { answer: string; atMs: number }>();
  for (const s of r.trace) {
    for (const c of s.calls) {
      if (c.port !== 'csi') continue;
      if (c.result === 'sent') sent.push({ seq: c.seq, method: c.op, sentMs: s.timeMs });
      else answers.set(c.seq, { answer: c.result, atMs: s.timeMs });
    }
  }
  return sent.map((c, i) => ({ index: i + 1, method: c.method, sentMs: c.sentMs, answer: answers.get(c.seq)?.answer ?? '(none)', answeredMs: answers.get(c.seq)?.atMs ?? -1 }));
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
