// The simulator's filesystem works for whoever runs it (`nodevol demo` as a non-root
// user once failed with `open /var/lib/kubelet/.keep: EACCES`). memfs owns new nodes by the identity
// the Volume is given but checks most accesses against the real process's: the two must agree.
// The test pretends to be another user (process.getuid/getgid replaced for its duration), so it
// fails without the fix even when the suite runs as root; test/cli/unprivileged.cli.test.ts runs
// the real commands as uid 65534.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { Volume } from 'memfs';

import { MemFs } from '../../../src/adapters/memory/memFs.js';

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

// The simulator's memfs superblock answers access checks for its one user without asking the
// process each time (src/sim/durableFs.ts, oneUserSuperblock) and makes its own inodes: the same
// inode numbers, modes and refusals as memfs' own superblock for the same calls.
describe("DurableFs' inodes", () => {
  async function play(fs: MemFs): Promise<string[]> {
    const seen: string[] = [];
    const data = new TextEncoder().encode('x');
    const step = async (what: string, op: () => Promise<unknown>): Promise<void> => {
      try {
        await op();
        seen.push(`${what}: ok`);
      } catch (err) {
        seen.push(`${what}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      }
    };
    await step('mkdir /a', () => fs.mkdir('/a', { recursive: false, mode: 0o755 }));
    await step('write /a/f1', () => fs.writeFile('/a/f1', data, { mode: 0o644 }));
    await step('write /a/f2', () => fs.writeFile('/a/f2', data, { mode: 0o600 }));
    await step('unlink /a/f1', () => fs.unlink('/a/f1'));
    await step('write /a/f3', () => fs.writeFile('/a/f3', data, { mode: 0o640 }));
    await step('mkdir /a/ro', () => fs.mkdir('/a/ro', { recursive: false, mode: 0o500 }));
    await step('write /a/ro/x', () => fs.writeFile('/a/ro/x', data));
    await step('mkdir /a/none', () => fs.mkdir('/a/none', { recursive: false, mode: 0o000 }));
    await step('readdir /a/none', () => fs.readdir('/a/none'));
    await step('write /a/none/y', () => fs.writeFile('/a/none/y', data));
    await step('write /a/f4', () => fs.writeFile('/a/f4', data));
    for (const p of ['/', '/a', '/a/f2', '/a/f3', '/a/ro', '/a/none', '/a/f4']) {
      const st = await fs.lstat(p);
      seen.push(`${p}: ino ${st.ino} ${st.type} ${st.mode.toString(8)}`);
    }
    return seen;
  }

  it("numbers, modes and refusals are memfs' own, as root and as another user", async () => {
    const real = { getuid: process.getuid, getgid: process.getgid };
    try {
      for (const user of [0, NOBODY]) {
        process.getuid = () => user;
        process.getgid = () => user;
        const theirs = await play(new MemFs(new Volume()));
        const ours = await play(new DurableFs(() => 0).mem);
        assert.deepEqual(ours, theirs, `as uid ${user}`);
        // The released inode number is taken again, and the read-only directories refuse.
        assert.ok(theirs.includes('write /a/ro/x: EACCES'), theirs.join('\n'));
      }
    } finally {
      process.getuid = real.getuid;
      process.getgid = real.getgid;
    }
  });
});
