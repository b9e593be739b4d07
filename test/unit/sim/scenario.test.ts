// Scenario files: validated with zod, one-line errors naming file, line and field; every
// built-in scenario loads.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { builtinScenarioNames, loadBuiltinScenario, parseScenario } from '../../../src/sim/scenario.js';
import { MINIMAL_SCENARIO, scenarioErrorOf } from '../../support/scenarioText.js';


describe('scenario files', () => {
  it('parses the format: defaults, steps, durations', () => {
    const s = parseScenario(`${MINIMAL_SCENARIO}steps:\n  - wait: converged\n  - advance: 30s\n  - deletePod: pod-a\n  - reboot\n  - fault: { method: NodeUnstageVolume, volumeId: vol-1, code: UNAVAILABLE, times: 2 }\n`, 'x.yaml');
    assert.deepEqual(s.drivers, [{ name: 'csi.example.com', attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: 'strict' }]);
    assert.deepEqual(s.steps.map((x) => x.kind), ['wait', 'advance', 'deletePod', 'reboot', 'fault']);
    assert.deepEqual(s.steps[1], { kind: 'advance', ms: 30_000 });
  });

  it('an error is one line naming the file, the line and the field', () => {
    assert.equal(scenarioErrorOf(`${MINIMAL_SCENARIO}steps:\n  - wait: converged\n  - fault: { method: NodeFrobVolume, code: UNAVAILABLE }\n`).split('\n').length, 1);
    assert.match(scenarioErrorOf(`${MINIMAL_SCENARIO}steps:\n  - wait: converged\n  - deletePod: pod-z\n`), /^x\.yaml:12: steps\[1\]\.deletePod: unknown pod "pod-z"$/);
    assert.match(scenarioErrorOf(MINIMAL_SCENARIO.replace('handle: vol-1', 'handle: vol-1\n    volumeMode: Blok')), /^x\.yaml:7: volumes\[0\]\.volumeMode: /);
    assert.match(scenarioErrorOf(`${MINIMAL_SCENARIO}steps:\n  - jump: high\n`), /^x\.yaml:11: steps\[0\]: not a known step/);
    assert.match(scenarioErrorOf('name: [unclosed\n'), /^x\.yaml:\d+: \(yaml\): /);
    assert.match(scenarioErrorOf(MINIMAL_SCENARIO.replace('volumes: [pv-1]', 'volumes: [pv-9]')), /^x\.yaml:9: pods\[0\]\.volumes\[0\]: unknown volume "pv-9"$/);
  });

  it('a fault step names a node call the simulated drivers serve, NodeGetCapabilities included; any other RPC is refused by name', () => {
    const s = parseScenario(`${MINIMAL_SCENARIO}steps:\n  - fault: { method: NodeGetCapabilities, code: UNAVAILABLE, times: 1 }\n`, 'x.yaml');
    assert.deepEqual(s.steps.map((x) => x.kind), ['fault']);
    assert.match(
      scenarioErrorOf(`${MINIMAL_SCENARIO}steps:\n  - fault: { method: CreateVolume, code: UNAVAILABLE }\n`),
      /^x\.yaml:11: steps\[0\]\.fault\.method: the simulated drivers serve NodeStageVolume, NodeUnstageVolume, NodePublishVolume, NodeUnpublishVolume, NodeGetCapabilities$/,
    );
  });

  it('readError: a pod\'s vol_data.json fails its next N reads with EIO (default) or EACCES; bad values name the field', () => {
    const s = parseScenario(`${MINIMAL_SCENARIO}steps:\n  - readError: { pod: pod-a, volume: pv-1, times: 3 }\n  - readError: { pod: pod-a, volume: pv-1, code: EACCES, times: 1 }\n`, 'x.yaml');
    assert.deepEqual(s.steps, [
      { kind: 'readError', pod: 'pod-a', volume: 'pv-1', code: 'EIO', times: 3 },
      { kind: 'readError', pod: 'pod-a', volume: 'pv-1', code: 'EACCES', times: 1 },
    ]);
    const step = (v: string): string => scenarioErrorOf(`${MINIMAL_SCENARIO}steps:\n  - wait: converged\n  - readError: ${v}\n`);
    assert.match(step('{ pod: pod-a, volume: pv-1, code: ENOENT, times: 1 }'), /^x\.yaml:12: steps\[1\]\.readError\.code: Invalid enum value\. Expected 'EIO' \| 'EACCES', received 'ENOENT'$/);
    assert.match(step('{ pod: pod-a, volume: pv-1, times: 0 }'), /^x\.yaml:12: steps\[1\]\.readError\.times: /);
    assert.match(step('{ pod: pod-a, volume: pv-1 }'), /^x\.yaml:12: steps\[1\]\.readError\.times: Required$/);
    assert.match(step('{ pod: pod-z, volume: pv-1, times: 1 }'), /^x\.yaml:12: steps\[1\]\.readError\.pod: unknown pod "pod-z"$/);
    assert.match(step('{ pod: pod-a, volume: pv-9, times: 1 }'), /^x\.yaml:12: steps\[1\]\.readError\.volume: unknown volume "pv-9"$/);
    assert.match(step('{ pod: pod-a, volume: pv-1, times: 1, path: /etc/passwd }'), /^x\.yaml:12: steps\[1\]\.readError: Unrecognized key\(s\) in object: 'path'$/);
    const twoVolumes = MINIMAL_SCENARIO.replace('pods:', '  - name: pv-2\npods:');
    assert.match(
      scenarioErrorOf(`${twoVolumes}steps:\n  - readError: { pod: pod-a, volume: pv-2, times: 1 }\n`),
      /^x\.yaml:\d+: steps\[0\]\.readError\.volume: pod pod-a has no volume "pv-2"$/,
    );
  });

  it('every built-in scenario loads', () => {
    const names = builtinScenarioNames();
    for (const want of ['kep-story-1', 'kep-story-2', 'alpha-gap', 'inline-volume-orphans', 'shared-volume', 'raw-block', 'rewanted-during-unstage', 'reconstruction-cleanup-retry']) {
      assert.ok(names.includes(want), want);
    }
    for (const n of names) assert.equal(loadBuiltinScenario(n).name, n);
    assert.throws(() => loadBuiltinScenario('nope'), /unknown scenario "nope"; built in: /);
  });
});
