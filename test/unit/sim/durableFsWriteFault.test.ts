// A full (ENOSPC) or read-only (EROFS) root dir in the simulator must refuse what the kernel
// refuses and nothing more: a mkdir of a directory that is already there looks the name up first
// and never asks for space (a recursive mkdir of it succeeds), so a MountDevice of a staged volume
// is not failed by a full disk it does not write to.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { DurableFs } from '../../../src/sim/durableFs.js';
import { SIM_ROOT } from '../../../src/sim/world.js';

const DIR = `${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/globalmount`;

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? String(err);
  }
}

for (const fault of ['ENOSPC', 'EROFS'] as const) {
  describe(`DurableFs with the root dir ${fault === 'ENOSPC' ? 'full' : 'read-only'}`, () => {
    it('refuses a new directory, a new file and, for EROFS, a removal', async () => {
      const fs = new DurableFs(() => 0);
      await fs.mkdir(DIR, { recursive: true, mode: 0o750 });
      fs.failWrites(SIM_ROOT, fault, 1000);
      assert.equal(await code(fs.mkdir(`${DIR}/new`, { recursive: true, mode: 0o750 })), fault);
      assert.equal(await code(fs.mkdir(`${SIM_ROOT}/pods/p/volumes`, { recursive: true, mode: 0o750 })), fault);
      assert.equal(await code(fs.writeFile(`${DIR}/../vol_data.json`, new Uint8Array(2))), fault);
      assert.equal(await code(fs.rmdir(DIR)), fault === 'ENOSPC' ? 'ok' : 'EROFS');
    });

    it('lets a recursive mkdir of an existing directory succeed and a plain one fail with EEXIST', async () => {
      const fs = new DurableFs(() => 0);
      await fs.mkdir(DIR, { recursive: true, mode: 0o750 });
      fs.failWrites(SIM_ROOT, fault, 1000);
      assert.equal(await code(fs.mkdir(DIR, { recursive: true, mode: 0o750 })), 'ok');
      assert.equal(await code(fs.mkdir(DIR, { recursive: false, mode: 0o750 })), 'EEXIST');
    });

    it('lifts the fault at its end', async () => {
      let now = 0;
      const fs = new DurableFs(() => now);
      fs.failWrites(SIM_ROOT, fault, 1000);
      assert.equal(await code(fs.mkdir(DIR, { recursive: true, mode: 0o750 })), fault);
      now = 1000;
      assert.equal(await code(fs.mkdir(DIR, { recursive: true, mode: 0o750 })), 'ok');
    });
  });
}
