// The simulator's scenario fields for kubelet's desired-state populator (a pod volume no
// container uses, a pod terminating or terminal while listed, a claim kubelet refuses), the
// built-in scenario populator-decisions run fault-free, and the generator's draws of them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { generateScenario } from '../../../src/sim/generate.js';
import { checkScenario, loadBuiltinScenario, parseScenario, scenarioYaml, ScenarioError } from '../../../src/sim/scenario.js';
import { simulate, type SimResult } from '../../../src/sim/simulation.js';

const gates = FeatureGate.of({});

/** The CSI calls of a run, `method volumeId` in order, each with the scenario steps run before it. */
function csiCalls(r: SimResult): { call: string; after: string[] }[] {
  const out: { call: string; after: string[] }[] = [];
  const done: string[] = [];
  const seen = new Set<number>();
  for (const s of r.trace) {
    if (s.event.kind === 'scenario') done.push(s.event.label);
    if (s.csi === undefined || seen.has(s.csi.seq) || s.csi.method === 'NodeGetCapabilities') continue;
    seen.add(s.csi.seq);
    out.push({ call: `${s.csi.method} ${s.csi.volumeId}`, after: [...done] });
  }
  return out;
}

describe('scenario fields for the populator cases', () => {
  it('parses unused, claim, terminatePod and podPhase, and writes them back', () => {
    const s = loadBuiltinScenario('populator-decisions');
    assert.deepEqual(s.pods.find((p) => p.uid === 'pod-a')?.unused, ['pv-spare']);
    assert.deepEqual(s.volumes.filter((v) => v.claim !== undefined).map((v) => [v.name, v.claim]), [['pv-pending', 'Pending'], ['pv-deleting', 'Deleting'], ['pv-stolen', 'ClaimRefMismatch']]);
    assert.deepEqual(s.steps.filter((st) => st.kind === 'terminatePod' || st.kind === 'podPhase'), [{ kind: 'podPhase', uid: 'pod-b', phase: 'Succeeded' }, { kind: 'terminatePod', uid: 'pod-c' }]);
    const again = parseScenario(scenarioYaml(s), 'again.yaml');
    assert.deepEqual({ ...again, source: s.source }, s);
  });

  const bad: [string, string, RegExp][] = [
    ['an unused volume that is not a volume', 'pods: [{ uid: p, volumes: [v], unused: [nope] }]', /^x\.yaml:\d+: pods\[0\]\.unused\[0\]: unknown volume "nope"$/],
    ['a volume both used and unused', 'pods: [{ uid: p, volumes: [v], unused: [v] }]', /pods\[0\]\.unused\[0\]: "v" is in volumes too/],
    ['a claim state kubelet has not', 'pods: []\nvolumes: [{ name: w, claim: Gone }]', /volumes\[0\]\.claim: Invalid enum value/],
    ['a podPhase that is not terminal', 'pods: [{ uid: p, volumes: [v] }]\nsteps: [{ podPhase: { pod: p, phase: Running } }]', /steps\[0\]\.podPhase\.phase: Invalid enum value/],
    ['terminatePod of an unknown pod', 'pods: [{ uid: p, volumes: [v] }]\nsteps: [{ terminatePod: q }]', /steps\[0\]\.terminatePod: unknown pod "q"/],
  ];
  for (const [what, body, want] of bad) {
    it(`refuses ${what}, naming the line and field`, () => {
      const text = `name: x\ndrivers: [{ name: d }]\n${body.includes('volumes: [{ name: w') ? '' : 'volumes: [{ name: v }]\n'}${body}\n`;
      assert.throws(() => parseScenario(text, 'x.yaml'), (err: unknown) => err instanceof ScenarioError && want.test(err.message));
    });
  }
});

describe('populator-decisions, fault-free, every gate off', () => {
  it('converges with no violation; the unused volume and the refused claims are never staged or published', async () => {
    const r = await simulate({ scenario: loadBuiltinScenario('populator-decisions'), gates, seed: 1, fullTrace: true });
    assert.deepEqual(r.violations, []);
    assert.equal(r.endReason, 'converged');
    const calls = csiCalls(r).map((c) => c.call);
    for (const handle of ['vol-spare', 'vol-pending', 'vol-deleting', 'vol-stolen']) assert.deepEqual(calls.filter((c) => c.endsWith(` ${handle}`)), [], handle);
    assert.deepEqual(calls.filter((c) => c.endsWith(' vol-1')), ['NodeStageVolume vol-1', 'NodePublishVolume vol-1']);
  });

  it("the terminal pod's volume is unpublished and unstaged while the pod is listed; the terminating pod's only once it leaves the list", async () => {
    const r = await simulate({ scenario: loadBuiltinScenario('populator-decisions'), gates, seed: 1, fullTrace: true });
    const calls = csiCalls(r);
    const at = (call: string): string[] => calls.find((c) => c.call === call)?.after ?? [];
    const unpublish2 = at('NodeUnpublishVolume vol-2');
    assert.ok(unpublish2.some((l) => l.includes('"podPhase"')), 'after pod-b turned Succeeded');
    assert.ok(!unpublish2.some((l) => l.includes('"deletePod","uid":"pod-b"')), 'before pod-b left the list');
    assert.ok(!at('NodeUnstageVolume vol-2').some((l) => l.includes('"deletePod","uid":"pod-b"')));
    const unpublish3 = at('NodeUnpublishVolume vol-3');
    assert.ok(unpublish3.some((l) => l.includes('"deletePod","uid":"pod-c"')), 'only after pod-c left the list, not when it was marked for deletion');
  });
});

describe('generated workloads draw the populator cases from a stream of their own', () => {
  it('some of 40 seeds have an unused volume, a refused claim, a terminatePod and a podPhase step; each is a valid scenario', () => {
    const seen = { unused: 0, refused: 0, terminatePod: 0, podPhase: 0 };
    for (let seed = 1; seed <= 40; seed++) {
      const s = generateScenario(seed, 'medium');
      checkScenario(s);
      if (s.pods.some((p) => (p.unused ?? []).length > 0)) seen.unused++;
      if (s.volumes.some((v) => v.claim !== undefined && v.claim !== 'Bound')) seen.refused++;
      if (s.steps.some((st) => st.kind === 'terminatePod')) seen.terminatePod++;
      if (s.steps.some((st) => st.kind === 'podPhase')) seen.podPhase++;
    }
    for (const [k, n] of Object.entries(seen)) assert.ok(n > 0 && n < 40, `${k}: ${n} of 40`);
  });

  it('a podPhase or terminatePod step comes right before an advance and the deletePod of the same pod', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const steps = generateScenario(seed, 'medium').steps;
      steps.forEach((st, i) => {
        if (st.kind !== 'terminatePod' && st.kind !== 'podPhase') return;
        assert.equal(steps[i + 1]?.kind, 'advance', `seed ${seed}`);
        const next = steps[i + 2];
        assert.ok(next?.kind === 'deletePod' && next.uid === st.uid, `seed ${seed}`);
      });
    }
  });

  it('a few generated seeds with the cases run without a violation with every gate off', async () => {
    const seeds: number[] = [];
    for (let seed = 1; seeds.length < 3 && seed <= 200; seed++) {
      const s = generateScenario(seed, 'small');
      if (s.pods.some((p) => (p.unused ?? []).length > 0) || s.volumes.some((v) => v.claim !== undefined) || s.steps.some((st) => st.kind === 'podPhase' || st.kind === 'terminatePod')) seeds.push(seed);
    }
    assert.equal(seeds.length, 3);
    for (const seed of seeds) {
      const s = generateScenario(seed, 'small');
      const r = await simulate({ scenario: { ...s, steps: s.steps.filter((st) => st.kind !== 'fault' && st.kind !== 'restart' && st.kind !== 'reboot') }, gates, seed: 1 });
      assert.deepEqual(r.violations.map((v) => `${v.invariant}: ${v.message}`), [], `seed ${seed}`);
    }
  });
});
