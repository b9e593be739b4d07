// Per-file durability of file data: a write without fsync is torn at a power cut until
// its bytes are written back, whatever else was fsynced; a write with fsync is whole. Our
// vol_data.json write (temp file + fsync, rename, fsync of the directory) never tears; a
// truncate-in-place one does (scenario torn-write-reboot).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { FeatureGate } from '../../../src/features/features.js';
import { DurableFs, WRITEBACK_MS } from '../../../src/sim/durableFs.js';
import { loadBuiltinScenario } from '../../../src/sim/scenario.js';
import { simulate } from '../../../src/sim/simulation.js';
import { SIM_ROOT } from '../../../src/sim/world.js';

const DIR = `${SIM_ROOT}/plugins/kubernetes.io/csi/d/h`;
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const everyGate = (): FeatureGate => FeatureGate.parse(['AllAlpha=true']).gate;

async function node(now: { ms: number }, keep: number): Promise<DurableFs> {
  const fs = new DurableFs(() => now.ms);
  fs.tear = (_p, length) => Math.min(keep, length);
  await fs.mkdir(DIR, { recursive: true, mode: 0o750 });
  fs.commit(now.ms);
  return fs;
}

describe('DurableFs: unsynced file data is lost per file at a power cut', () => {
  it('a write without fsync, committed by another file\'s fsync, comes back torn at the byte tear() picks', async () => {
    const now = { ms: 0 };
    const fs = await node(now, 7);
    await fs.writeFile(`${DIR}/vol_data.json`, bytes('{"driverName":"d"}'));
    await fs.writeFile(`${DIR}/other`, bytes('x'), { fsync: true });
    now.ms = 3000;
    assert.notEqual(fs.unsyncedState(), '');
    assert.equal(fs.powerCut(), true);
    assert.equal(fs.readTextSync(`${DIR}/vol_data.json`), '{"drive');
    assert.equal(fs.readTextSync(`${DIR}/other`), 'x');
    assert.equal(fs.unsyncedState(), '');
  });

  it('torn at any byte: tear() may keep nothing, or everything', async () => {
    for (const keep of [0, 1000]) {
      const now = { ms: 0 };
      const fs = await node(now, keep);
      await fs.writeFile(`${DIR}/f`, bytes('abc'));
      fs.commit(1);
      fs.powerCut();
      assert.equal(fs.readTextSync(`${DIR}/f`), keep === 0 ? '' : 'abc');
    }
  });

  it('a write with fsync, an atomic write (temp file + fsync, rename, fsync of the dir) and a write back after WRITEBACK_MS are whole', async () => {
    const now = { ms: 0 };
    const fs = await node(now, 0);
    await fs.writeFile(`${DIR}/synced`, bytes('whole'), { fsync: true });
    await fs.writeFile(`${DIR}/vol_data.json.tmp`, bytes('{"a":1}'), { fsync: true });
    await fs.rename(`${DIR}/vol_data.json.tmp`, `${DIR}/vol_data.json`);
    await fs.fsyncDir(DIR);
    await fs.writeFile(`${DIR}/old`, bytes('written back'));
    fs.commit(1);
    now.ms = WRITEBACK_MS;
    fs.powerCut();
    assert.equal(fs.readTextSync(`${DIR}/synced`), 'whole');
    assert.equal(fs.readTextSync(`${DIR}/vol_data.json`), '{"a":1}');
    assert.equal(fs.readTextSync(`${DIR}/old`), 'written back');
  });

  it('a write after the last commit is lost whole with the journal (as before); an unsynced file renamed stays unsynced', async () => {
    const now = { ms: 0 };
    const fs = await node(now, 2);
    await fs.writeFile(`${DIR}/late`, bytes('late'));
    await fs.writeFile(`${DIR}/a`, bytes('moved'));
    await fs.rename(`${DIR}/a`, `${DIR}/b`);
    fs.commit(1);
    await fs.writeFile(`${DIR}/after`, bytes('after'));
    fs.powerCut();
    assert.equal(fs.readTextSync(`${DIR}/b`), 'mo');
    assert.throws(() => fs.readTextSync(`${DIR}/after`), /ENOENT/);
  });
});

describe('simulator: torn-write-reboot', () => {
  it('every gate on: our vol_data.json writes come back whole; the next life unpublishes and unstages (seeds 1-3)', async () => {
    const scenario = loadBuiltinScenario('torn-write-reboot');
    for (const seed of [1, 2, 3]) {
      const r = await simulate({ scenario, gates: everyGate(), seed });
      assert.deepEqual(r.violations.map((v) => `${v.invariant}: ${v.message}`), [], `seed ${seed}`);
      assert.equal(r.endReason, 'converged');
    }
  });
});
