import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { loadBuiltinScenario } from '../../../src/sim/scenario.js';
import { simulate } from '../../../src/sim/simulation.js';
import { simRunToTrace } from '../../../src/timeline/fromSim.js';
import type { ReconstructEvent } from '../../../src/trace/events.js';
import { FAILED_MESSAGE, GLOBAL_LISTING_MESSAGE, POD_DIRECTORY_MESSAGE, reconstructionFinding } from '../../../src/trace/reconstruction.js';
import { parseTraceFile, traceLine, TraceFileError } from '../../../src/trace/traceFile.js';

const VOL = 'kubernetes.io/csi/csi.example.com^vol-1';

async function reconstructEvents(scenario: string, gateOn: boolean): Promise<{ step: string; event: ReconstructEvent }[]> {
  const r = await simulate({ scenario: loadBuiltinScenario(scenario), gates: FeatureGate.of({ CSIGlobalMountReconstruction: gateOn }), seed: 1, fullTrace: true });
  const run = simRunToTrace({ label: 'run', trace: r.trace, violations: r.violations });
  const steps = run.events.filter((e) => e.kind === 'step');
  return run.events
    .filter((e): e is ReconstructEvent => e.kind === 'reconstruct')
    .map((event) => ({ step: steps.filter((s) => s.t <= event.t).at(-1)?.label ?? '', event }));
}

describe('reconstruction findings in the trace', () => {
  it('reads the three findings from the engine log lines, and nothing from any other line', () => {
    assert.deepEqual(reconstructionFinding(GLOBAL_LISTING_MESSAGE, { volumeName: VOL, deviceMountPath: '/g/globalmount' }), { found: 'global-listing', volumeName: VOL, detail: '/g/globalmount' });
    assert.deepEqual(reconstructionFinding(POD_DIRECTORY_MESSAGE, { podName: 'uid-1', volumeName: VOL, seLinuxMountContext: '' }), { found: 'pod-directory', volumeName: VOL, podName: 'uid-1' });
    assert.deepEqual(reconstructionFinding(FAILED_MESSAGE, { podName: 'uid-1', volumeSpecName: 'pv-1', err: 'no vol_data.json' }), { found: 'failed', volumeName: 'pv-1', podName: 'uid-1', detail: 'no vol_data.json' });
    assert.equal(reconstructionFinding('Volume reconstruction finished', undefined), undefined);
    // A line without the volume it is about is no finding.
    assert.equal(reconstructionFinding(GLOBAL_LISTING_MESSAGE, { deviceMountPath: '/g' }), undefined);
    assert.equal(reconstructionFinding(POD_DIRECTORY_MESSAGE, { volumeName: 42 }), undefined);
  });

  it('story 1 (drain + reboot), gate on: the trace says the global listing found vol-1 when kubelet started again; gate off: nothing found it', async () => {
    const on = await reconstructEvents('kep-story-1-drain-reboot', true);
    assert.deepEqual(
      on.map(({ step, event }) => [step, event.found, event.volumeName]),
      [['kubelet starts again (life 2)', 'global-listing', VOL]],
    );
    assert.match(on[0]?.event.detail ?? '', /^\/var\/lib\/kubelet\/plugins\/kubernetes\.io\/csi\/csi\.example\.com\/[0-9a-f]{64}\/globalmount$/);
    assert.deepEqual(await reconstructEvents('kep-story-1-drain-reboot', false), []);
  });

  it('story 2 (lost vol_data.json): gate off the pod directory fails; gate on the listing and the pod directory both find vol-1', async () => {
    const off = await reconstructEvents('kep-story-2', false);
    assert.deepEqual(off.map(({ event }) => [event.found, event.volumeName, event.podName]), [['failed', 'pv-1', 'pod-a']]);
    assert.match(off[0]?.event.detail ?? '', /could not construct volume information/);
    const on = await reconstructEvents('kep-story-2', true);
    assert.deepEqual(on.map(({ event }) => [event.found, event.volumeName, event.podName]), [
      ['global-listing', VOL, undefined],
      ['pod-directory', VOL, 'pod-a'],
    ]);
  });

  it('a trace file line round-trips, and a bad one is refused naming its field', () => {
    const e: ReconstructEvent = { kind: 'reconstruct', t: 5, found: 'global-listing', volumeName: VOL, detail: '/g/globalmount' };
    assert.deepEqual(parseTraceFile(traceLine(e), 't.jsonl'), [e]);
    assert.throws(() => parseTraceFile(`${JSON.stringify({ ...e, found: 'guessed' })}\n`, 't.jsonl'), (err: unknown) => err instanceof TraceFileError && /t\.jsonl:1: field found:/.test(err.message));
  });
});
