// Found by the explorer over generated workloads (workload 9871 of 10,000, every gate on): kubelet
// is killed inside UnmountDevice after it unlinked the global vol_data.json and before the rmdir
// of the volume dir; the next life's listing (gate CSIListGlobalVolumesWithoutStagingDir) finds
// the empty volume dir and removes it, but the root dir is read-only for a minute then, so the
// rmdir fails. The listing runs once a life: the housekeeping loop retries such a removal until
// it succeeds (or the dir is no leftover any more). Explored at every crash point, the gate off
// and on (every other gate on). Both cases are built-in scenarios (and gate proofs).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CSIGlobalMountReconstruction, FeatureGate } from '../../../src/features/features.js';
import { explore } from '../../../src/sim/explorer.js';
import { nodevolGates } from '../../../src/sim/gateProofs.js';
import { loadBuiltinScenario } from '../../../src/sim/scenario.js';

function gatesWith(listing: boolean): FeatureGate {
  const others = nodevolGates().filter((g) => g !== 'CSIListGlobalVolumesWithoutStagingDir');
  return FeatureGate.parse([[`${CSIGlobalMountReconstruction}=true`, ...others.map((g) => `${g}=true`), `CSIListGlobalVolumesWithoutStagingDir=${String(listing)}`].join(',')]).gate;
}

async function violations(listing: boolean, scenario: string, seed: number, crash: 'restart' | 'reboot'): Promise<string[]> {
  const report = await explore({
    scenario: loadBuiltinScenario(scenario),
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
    assert.ok((await violations(false, 'leftover-dir-read-only', 9871, 'restart')).includes('converges'));
  });

  it('on: every crash point converges, though the first removal met a read-only root dir', async () => {
    assert.deepEqual(await violations(true, 'leftover-dir-read-only', 9871, 'restart'), []);
  });
});

// Found the same way (workload 2686 of 10,000): a reboot cuts MountDevice (a driver without
// STAGE_UNSTAGE) between the fsync of the vol_data.json temp file and its rename; the next life's
// listing finishes the write with a rename, but the root dir is full then (ENOSPC) and the
// listing runs once a life. The record was never renamed, so nothing was staged from it: the
// volume dir is removed instead, now or by a later housekeeping pass.
describe('an interrupted vol_data.json write the listing cannot finish is removed', () => {
  it('CSIListGlobalVolumesWithoutStagingDir off: the volume dir of the interrupted write stays (converges)', async () => {
    assert.ok((await violations(false, 'interrupted-write-root-dir-full', 2686, 'reboot')).includes('converges'));
  });

  it('on: every crash point converges, though the root dir is full when the listing finds it', async () => {
    assert.deepEqual(await violations(true, 'interrupted-write-root-dir-full', 2686, 'reboot'), []);
  });
});
