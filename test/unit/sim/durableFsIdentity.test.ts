// The simulator's filesystem works for whoever runs it (`nodevol demo` as a non-root
// user once failed with `open /var/lib/kubelet/.keep: EACCES`). memfs owns new nodes by the identity
// the Volume is given but checks most accesses against the real process's: the two must agree.
// The test pretends to be another user (process.getuid/getgid replaced for its duration), so it
// fails without the fix even when the suite runs as root; test/cli/unprivileged.cli.test.ts runs
// the real commands as uid 65534.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { FeatureGate } from '../../../src/features/features.js';
import { DurableFs } from '../../../src/sim/durableFs.js';
import { loadBuiltinScenario } from '../../../src/sim/scenario.js';
import { simulate } from '../../../src/sim/simulation.js';
import { SIM_ROOT } from '../../../src/sim/world.js';

const NOBODY = 65534;

describe('DurableFs as a non-root user', () => {
  const real = { getuid: process.getuid, getgid: process.getgid };
  beforeEach(() => {
    process.getuid = () => NOBODY;
    process.getgid = () => NOBODY;
  });
  afterEach(() => {
    process.getuid = real.getuid;
    process.getgid = real.getgid;
  });

  it('creates, writes, renames and removes below directories it made (0755 and 0750), and after a power cut', async () => {
    const fs = new DurableFs(() => 0);
    const data = new TextEncoder().encode('{}');
    fs.mem.writeRaw(`${SIM_ROOT}/.keep`, '');
    await fs.mkdir(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h`, { recursive: true, mode: 0o750 });
    await fs.writeFile(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/vol_data.json.tmp`, data, { mode: 0o640, fsync: true });
    await fs.rename(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/vol_data.json.tmp`, `${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/vol_data.json`);
    await fs.fsyncDir(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h`);
    await fs.writeFile(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/lost`, data);
    assert.equal(fs.powerCut(), true);
    await fs.writeFile(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/after-reboot`, data);
    await fs.unlink(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/after-reboot`);
    assert.equal(fs.readTextSync(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/vol_data.json`), '{}');
  });

  it('plays a built-in scenario to the end', async () => {
    const r = await simulate({ scenario: loadBuiltinScenario('kep-story-1'), gates: FeatureGate.of({ CSIGlobalMountReconstruction: true }), seed: 1 });
    assert.equal(r.endReason, 'converged');
    assert.deepEqual(r.violations, []);
  });
});
