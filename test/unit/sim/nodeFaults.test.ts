// Faults of what real nodes do: a corrupted pod-local vol_data.json, the pod-local
// fallback at reconstruction, a node plugin registering after kubelet, an unreachable API server
// and a cluster that signals no change.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { generateScenario } from '../../../src/sim/generate.js';
import { loadBuiltinScenario, parseScenario, scenarioYaml } from '../../../src/sim/scenario.js';
import { simulate, type SimResult } from '../../../src/sim/simulation.js';

const everyGate = (): FeatureGate => FeatureGate.parse(['AllAlpha=true']).gate;
const found = (r: SimResult): string[] => r.violations.map((v) => `${v.invariant}: ${v.message}`);

async function clean(name: string, seeds: readonly number[] = [1, 2, 3]): Promise<SimResult[]> {
  const scenario = loadBuiltinScenario(name);
  const out: SimResult[] = [];
  for (const seed of seeds) {
    const r = await simulate({ scenario, gates: everyGate(), seed, fullTrace: true });
    assert.deepEqual(found(r), [], `${name} seed ${seed}`);
    assert.equal(r.endReason, 'converged', `${name} seed ${seed}`);
    out.push(r);
  }
  return out;
}

describe('simulator: faults of real nodes', () => {
  it('lost-pod-file-read-only-root, every gate on: the pod-local fallback recovers the volume; it is unpublished and unstaged', async () => {
    await clean('lost-pod-file-read-only-root');
  });

  it('a corrupted pod-local vol_data.json while kubelet is down, pod deleted, every gate on: bad JSON is recovered; another handle or driver is trusted (expected finding)', async () => {
    const text = (as: string): string =>
      `name: c\ndrivers: [{ name: csi.example.com }]\nvolumes: [{ name: pv-1, handle: vol-1 }]\npods: [{ uid: pod-a, volumes: [pv-1] }]\nsteps:\n  - wait: converged\n  - restart\n  - corruptFile: { pod: pod-a, volume: pv-1, as: ${as} }\n  - deletePod: pod-a\n  - wait: converged\n`;
    const run = (as: string): Promise<SimResult> => simulate({ scenario: parseScenario(text(as), 'c.yaml'), gates: everyGate(), seed: 1 });
    assert.deepEqual(found(await run('badJson')), []);
    assert.ok(found(await run('wrongHandle')).some((v) => v.startsWith('nothing-removed-early:')));
    assert.ok(found(await run('wrongDriver')).some((v) => v.startsWith('converges:')));
  });

  it('late-driver-after-reboot, every gate on: no CSI call reaches the driver before it registers, then it converges', async () => {
    for (const r of await clean('late-driver-after-reboot')) {
      const reboot = r.trace.find((s) => s.event.kind === 'crash')?.timeMs ?? 0;
      const after = r.trace.filter((s) => s.timeMs > reboot && s.calls.some((c) => c.port === 'csi'));
      // kubelet starts 5 s after the reboot; the driver registers 60 s after that.
      assert.ok((after[0]?.timeMs ?? 0) >= reboot + 65_000, `first CSI call after the reboot at ${after[0]?.timeMs} ms, reboot at ${reboot} ms`);
    }
  });

  it('api-server-down, every gate on: nothing is unmounted while pods cannot be listed; it converges after', async () => {
    await clean('api-server-down');
  });

  it('the new steps and driver fields read back from their files; bad values name the field', () => {
    const text = [
      'name: s',
      'clusterSignalsChanges: false',
      'drivers: [{ name: d, registersAfter: 30s }]',
      'volumes: [{ name: pv-1 }]',
      'pods: [{ uid: p, volumes: [pv-1] }]',
      'steps:',
      '  - apiDown: { for: 10s }',
      '  - corruptFile: { pod: p, volume: pv-1, as: wrongHandle }',
      '',
    ].join('\n');
    const s = parseScenario(text, 's.yaml');
    assert.equal(s.clusterSignalsChanges, false);
    assert.equal(s.drivers[0]?.registersAfterMs, 30_000);
    assert.deepEqual(s.steps, [
      { kind: 'apiDown', ms: 10_000 },
      { kind: 'corruptFile', pod: 'p', volume: 'pv-1', as: 'wrongHandle' },
    ]);
    assert.deepEqual(parseScenario(scenarioYaml(s), 's.yaml').steps, s.steps);
    assert.throws(() => parseScenario(text.replace('wrongHandle', 'zeros'), 's.yaml'), /s\.yaml:8: steps\[1\]\.corruptFile\.as: Invalid enum value/);
  });

  it('the generator draws corrupted files, API outages, late drivers and clusters without a watch', () => {
    const all = Array.from({ length: 200 }, (_, i) => generateScenario(i + 1));
    const steps = all.flatMap((s) => s.steps);
    const as = new Set(steps.flatMap((s) => (s.kind === 'corruptFile' ? [s.as] : [])));
    assert.deepEqual([...as].sort(), ['badJson']);
    assert.ok(steps.some((s) => s.kind === 'apiDown'));
    assert.ok(all.some((s) => s.drivers.some((d) => (d.registersAfterMs ?? 0) > 0)));
    assert.ok(all.some((s) => s.clusterSignalsChanges === false));
  });
});
