// Replay of an explorer finding (docs/explorer.md, 10,000-workload search, shard 3: generated
// medium workload 9644, `converges`), an upstream kubelet gap closed behind
// CSIKeepUncertainMountOnFinalError: NodePublishVolume fails finally (INTERNAL) for pod-3-r1's pv-1
// inside a 5 s read-only window, just after its vol_data.json was written, as the pod is deleted.
// SetUp's cleanup (csi_mounter.go SetUpAt's deferred removeMountDir, csi_util.go) fails at its first
// rmdir (EROFS) and is only logged, so the pod volume dir and vol_data.json stay, the pod mount is in
// no state of world and never torn down, and the orphan sweep (kubelet_volumes.go
// removeOrphanedPodVolumeDirs: rmdir only) fails on them with ENOTEMPTY for ever. With the gate the
// pod mount becomes uncertain, and once the pod is gone it is unpublished and its dir removed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { parsePlan } from '../../../src/sim/plan.js';
import { parseScenario } from '../../../src/sim/scenario.js';
import { simulate, type SimResult } from '../../../src/sim/simulation.js';

// The shrunk case as the explorer wrote it (its replay line: the header's gates, --seed 9644
// --plan restart:after:421).
const SCENARIO = parseScenario(
  [
    'name: generated-medium-9644-converges',
    'description: "shrunk from generated-medium-9644 (converges): not converged (nothing changed for 3 virtual minutes): pod pod-3-r1 is gone but its volume directories are still there"',
    'drivers:',
    '  - { name: a.csi.example.com, attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: lenient, registersAfter: 1m, singleNodeMultiWriter: true }',
    '  - { name: b.csi.example.com, attachRequired: true, podInfoOnMount: false, stageUnstage: true, mode: lenient }',
    'volumes:',
    '  - { name: pv-1, handle: mock-57c401c9dec61f8d, driver: a.csi.example.com }',
    '  - { name: pv-2, handle: mock-3ff6904030512d92, driver: a.csi.example.com }',
    '  - { name: pv-3, handle: mock-21840a96eaf08ef8, driver: b.csi.example.com, volumeMode: Block }',
    '  - { name: scratch-4, handle: mock-459bdcd6ecbb40e3, driver: a.csi.example.com, inline: true }',
    'pods:',
    '  - { uid: pod-1, volumes: [pv-2, pv-3, pv-1] }',
    '  - { uid: pod-2, volumes: [pv-2, pv-3, pv-1, scratch-4] }',
    '  - { uid: pod-3, volumes: [pv-3, pv-1, pv-2] }',
    '  - { uid: pod-3-r1, volumes: [pv-3, pv-1, pv-2], running: false }',
    'steps:',
    '  - wait: converged',
    '  - deletePod: pod-3',
    '  - addPod: pod-3-r1',
    '  - slowDisk: { latency: 50ms, for: 1m }',
    '  - slowDisk: { latency: 50ms, for: 30s }',
    '  - restart',
    '  - advance: 5s',
    '  - deleteFile: { pod: pod-1, volume: pv-1 }',
    '  - advance: 2s',
    '  - deletePod: pod-3-r1',
    '  - fsFault: { code: EROFS, for: 5s }',
    '',
  ].join('\n'),
  'generated-medium-9644-converges.yaml',
);
const PLAN = parsePlan('restart:after:421');
const SEED = 9644;
/** Every gate on (KEP-6058's and every nodevol gate, as the search ran). */
const EVERY_GATE = ['AllAlpha=true'];
const TARGET = 'pods/pod-3-r1/volumes/kubernetes.io~csi/pv-1/mount';

function run(gates: readonly string[]): Promise<SimResult> {
  return simulate({ scenario: SCENARIO, gates: FeatureGate.parse([gates.join(',')]).gate, seed: SEED, plan: PLAN, fullTrace: true });
}

/** pv-1's NodePublishVolume / NodeUnpublishVolume answers (not the sends) for pod-3-r1's target, in order. */
function targetCalls(r: SimResult): string[] {
  return r.trace.flatMap((s) => (s.csi?.code !== undefined && s.csi.volumeId === 'mock-57c401c9dec61f8d' && String(s.csi.request['targetPath']).endsWith(TARGET) ? [`${s.csi.method} ${s.csi.code}`] : []));
}

describe('explorer workload 9644: a final NodePublishVolume error whose cleanup fails on a read-only root dir', () => {
  it("every gate on: pod-3-r1's pod mount is uncertain, unpublished once the pod is gone, and its dirs removed; no violation", async () => {
    const r = await run(EVERY_GATE);
    assert.deepEqual(
      r.violations.map((v) => `${v.invariant}: ${v.message}`),
      [],
      'was: converges: not converged (nothing changed for 3 virtual minutes): pod pod-3-r1 is gone but its volume directories are still there',
    );
    assert.equal(r.endReason, 'converged');
    const calls = targetCalls(r);
    assert.equal(calls[0], 'NodePublishVolume INTERNAL', JSON.stringify(calls));
    assert.equal(calls.at(-1), 'NodeUnpublishVolume OK', JSON.stringify(calls));
    assert.equal(calls.filter((c) => c.startsWith('NodePublishVolume')).length, 1, JSON.stringify(calls));
  });

  it("KEP-6058's gate alone (kubelet's SetUp): the violation remains, an upstream gap; pod-3-r1's target is never unpublished", async () => {
    const r = await run(['CSIGlobalMountReconstruction=true']);
    assert.deepEqual(
      r.violations.map((v) => `${v.invariant}: ${v.message}`),
      ['converges: not converged (nothing changed for 3 virtual minutes): pod pod-3-r1 is gone but its volume directories are still there'],
    );
    assert.deepEqual(targetCalls(r), ['NodePublishVolume INTERNAL']);
  });
});
