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

async function violations(listing: boolean): Promise<string[]> {
  const report = await explore({
    scenario: parseScenario(SCENARIO, 'leftover-global-dir.yaml'),
    gates: gatesWith(listing),
    crash: 'restart',
    depth: 1,
    faults: false,
    seed: 9871,
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
