// Generated workloads (src/sim/generate.ts): deterministic by seed, valid scenarios that
// round-trip through their file form, covering everything the format can say, and able to heal.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { generateScenario, SIZES, WORKLOAD_SIZES } from '../../../src/sim/generate.js';
import { parseScenario, scenarioYaml, type Scenario } from '../../../src/sim/scenario.js';
import { mockVolumeId } from '../../../src/mockdriver/volumeId.js';

const SEEDS = Array.from({ length: 300 }, (_, i) => i + 1);
const all = (size: 'small' | 'medium' | 'large' = 'medium'): Scenario[] => SEEDS.map((s) => generateScenario(s, size));

describe('generated workloads', () => {
  it('the same seed and size give the same scenario; another seed another one', () => {
    assert.deepEqual(generateScenario(7), generateScenario(7));
    assert.notDeepEqual(generateScenario(7).steps, generateScenario(8).steps);
    assert.notDeepEqual(generateScenario(7, 'small'), generateScenario(7, 'large'));
  });

  it('every workload of every size is a valid scenario that reads back from its file unchanged', () => {
    for (const size of WORKLOAD_SIZES) {
      for (const s of all(size).slice(0, 100)) {
        assert.deepEqual({ ...parseScenario(scenarioYaml(s), 'x.yaml'), source: '' }, { ...s, source: '' }, s.name);
      }
    }
  });

  it('a medium workload has 4 volumes (and sometimes one whose claim kubelet refuses), 2 drivers, at least 3 pods and about 15 steps', () => {
    for (const s of all()) {
      assert.equal(s.volumes.filter((v) => v.claim === undefined).length, SIZES.medium.volumes);
      assert.ok(s.volumes.length <= SIZES.medium.volumes + 1);
      assert.equal(s.drivers.length, SIZES.medium.drivers);
      assert.ok(s.pods.length >= SIZES.medium.pods);
      // Up to 2 more: a podPhase or terminatePod and its advance before one deletePod.
      assert.ok(s.steps.length >= 10 && s.steps.length <= 27, `${s.name}: ${s.steps.length} steps`);
    }
  });

  it('covers what the format can say: every step kind, every fault kind, both volume modes, inline and shared volumes, every driver flag', () => {
    const scenarios = all();
    const steps = new Set(scenarios.flatMap((s) => s.steps.map((st) => st.kind)));
    assert.deepEqual([...steps].sort(), ['addPod', 'advance', 'apiDown', 'clearFaults', 'corruptFile', 'deleteFile', 'deletePod', 'fault', 'fsFault', 'podPhase', 'readError', 'reboot', 'restart', 'restartDriver', 'slowDisk', 'terminatePod', 'wait']);
    const faults = scenarios.flatMap((s) => s.steps.flatMap((st) => (st.kind === 'fault' ? [st.fault] : [])));
    const kinds = new Set(faults.map((f) => (f.exit === true ? 'exit' : f.hang === true ? 'hang' : f.clientTimeoutMs !== undefined ? 'clientTimeout' : f.afterEffect === true ? 'afterEffect' : f.code !== undefined ? 'code' : 'delay')));
    assert.deepEqual([...kinds].sort(), ['afterEffect', 'clientTimeout', 'code', 'delay', 'exit', 'hang']);
    assert.ok(faults.some((f) => f.volumeId === undefined) && faults.some((f) => f.volumeId !== undefined));
    const fsFaults = new Set(scenarios.flatMap((s) => s.steps.flatMap((st) => (st.kind === 'fsFault' ? [st.code] : []))));
    assert.deepEqual([...fsFaults].sort(), ['ENOSPC', 'EROFS']);
    const volumes = scenarios.flatMap((s) => s.volumes);
    assert.ok(volumes.some((v) => v.volumeMode === 'Block') && volumes.some((v) => v.inline) && volumes.some((v) => !v.inline && v.volumeMode === 'Filesystem'));
    assert.ok(scenarios.some((s) => s.volumes.some((v) => s.pods.filter((p) => p.volumes.includes(v.name)).length > 1)), 'a volume shared by pods');
    const drivers = scenarios.flatMap((s) => s.drivers);
    for (const key of ['stageUnstage', 'attachRequired', 'podInfoOnMount'] as const) assert.ok(drivers.some((d) => d[key]) && drivers.some((d) => !d[key]), key);
    assert.ok(drivers.some((d) => d.mode === 'strict') && drivers.some((d) => d.mode === 'lenient'));
    assert.ok(scenarios.some((s) => s.pods.some((p) => /-r\d+$/.test(p.uid))), 'a pod re-created (new UID, same volumes)');
  });

  it('volume handles are the ids the mock driver provisions for the volume names', () => {
    for (const s of all().slice(0, 20)) for (const v of s.volumes) assert.equal(v.handle, mockVolumeId(v.name));
  });

  it('every workload can heal: faults are cleared at the end and a hang (but hang: forever) is followed by a restart of its driver or a reboot', () => {
    for (const s of all()) {
      const faults = s.steps.filter((st) => st.kind === 'fault');
      if (faults.length > 0) assert.ok(s.steps.some((st) => st.kind === 'clearFaults'), s.name);
      s.steps.forEach((st, i) => {
        // hang: forever is the driver that never returns (test/unit/sim/accessModes.test.ts): nothing ends it.
        if (st.kind !== 'fault' || st.fault.hang !== true || st.fault.forever === true) return;
        const later = s.steps.slice(i + 1);
        assert.ok(later.some((x) => x.kind === 'reboot' || x.kind === 'restartDriver'), `${s.name}: a hang at step ${i} is never ended`);
      });
      // What KEP-6058 leaves to an operator is left out: no lost file a volume has no other copy of.
      for (const st of s.steps) {
        if (st.kind !== 'deleteFile') continue;
        const v = s.volumes.find((x) => x.name === st.volume);
        assert.ok(v !== undefined && !v.inline && v.volumeMode === 'Filesystem' && s.drivers.find((d) => d.name === v.driver)?.stageUnstage === true, `${s.name}: ${st.volume}`);
      }
    }
  });
});
