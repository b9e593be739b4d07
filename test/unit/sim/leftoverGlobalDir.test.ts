// Found by the explorer over generated workloads (workload 9871 of 10,000, every gate on): kubelet
// is killed inside UnmountDevice after it unlinked the global vol_data.json and before the rmdir
// of the volume dir; the next life's listing (gate CSIListGlobalVolumesWithoutStagingDir) finds
// the empty volume dir and removes it, but the root dir is read-only for a minute then, so the
// rmdir fails. The listing runs once a life: the housekeeping loop retries such a removal until
// it succeeds (or the dir is no leftover any more). Explored at every crash point, the gate off
// and on (every other gate on).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CSIGlobalMountReconstruction, FeatureGate } from '../../../src/features/features.js';
import { explore } from '../../../src/sim/explorer.js';
import { nodevolGates } from '../../../src/sim/gateProofs.js';
import { parseScenario } from '../../../src/sim/scenario.js';

const SCENARIO = `name: leftover-global-dir
drivers:
  - name: a.csi.example.com
    mode: lenient
volumes:
  - name: pv-2
    handle: mock-3ff6904030512d92
    driver: a.csi.example.com
  - name: pv-3
    handle: mock-21840a96eaf08ef8
    driver: a.csi.example.com
pods:
  - uid: pod-1
    volumes: [pv-3, pv-2]
steps:
  - wait: converged
  - deletePod: pod-1
  - restart
  - advance: 2s
  - fsFault: { code: EROFS, for: 1m }
`;

function gatesWith(listing: boolean): FeatureGate {
  const others = nodevolGates().filter((g) => g !== 'CSIListGlobalVolumesWithoutStagingDir');
  return FeatureGate.parse([[`${CSIGlobalMountReconstruction}=true`, ...others.map((g) => `${g}=true`), `CSIListGlobalVolumesWithoutStagingDir=${String(listing)}`].join(',')]).gate;
}

async function violations(listing: boolean, scenario = SCENARIO, seed = 9871, crash: 'restart' | 'reboot' = 'restart'): Promise<string[]> {
  const report = await explore({
    scenario: parseScenario(scenario, 'leftover-global-dir.yaml'),
    gates: gatesWith(listing),
    crash,
    depth: 1,
    faults: false,
    seed,
    runs: 1,
    replayCommand: () => '',
  });
  return report.violations.map((v) => v.invariant);
}

describe('a leftover volume dir whose removal failed is removed by a later housekeeping pass', () => {
  it('CSIListGlobalVolumesWithoutStagingDir off: an empty volume dir left by a crash inside UnmountDevice stays (converges)', async () => {
    assert.ok((await violations(false)).includes('converges'));
  });

  it('on: every crash point converges, though the first removal met a read-only root dir', async () => {
    assert.deepEqual(await violations(true), []);
  });
});

// Found the same way (workload 2686 of 10,000): a reboot cuts MountDevice (a driver without
// STAGE_UNSTAGE) between the fsync of the vol_data.json temp file and its rename; the next life's
// listing finishes the write with a rename, but the root dir is full then (ENOSPC) and the
// listing runs once a life. The record was never renamed, so nothing was staged from it: the
// volume dir is removed instead, now or by a later housekeeping pass.
const INTERRUPTED_WRITE = `name: interrupted-write-unfinished
drivers:
  - name: b.csi.example.com
    attachRequired: false
    podInfoOnMount: false
    stageUnstage: false
    mode: lenient
volumes:
  - name: pv-1
    handle: mock-57c401c9dec61f8d
    driver: b.csi.example.com
pods:
  - uid: pod-3
    volumes: [pv-1]
  - uid: pod-3-r1
    volumes: [pv-1]
    running: false
steps:
  - wait: converged
  - deletePod: pod-3
  - advance: 2s
  - addPod: pod-3-r1
  - advance: 2s
  - deletePod: pod-3-r1
  - fsFault: { code: ENOSPC, for: 1m }
`;

describe('an interrupted vol_data.json write the listing cannot finish is removed', () => {
  it('CSIListGlobalVolumesWithoutStagingDir off: the volume dir of the interrupted write stays (converges)', async () => {
    assert.ok((await violations(false, INTERRUPTED_WRITE, 2686, 'reboot')).includes('converges'));
  });

  it('on: every crash point converges, though the root dir is full when the listing finds it', async () => {
    assert.deepEqual(await violations(true, INTERRUPTED_WRITE, 2686, 'reboot'), []);
  });
});
