// The mock driver's targeted mount-point check (mnt_id of a path against its parent's), on this
// machine's real mounts: no root needed, nothing is mounted.
import assert from 'node:assert/strict';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { isMountPointByMountId, mountIdOf } from '../../../src/mockdriver/mountPoint.js';

describe('mock driver: targeted mount-point check', () => {
  it('"/" and /proc are mount points; a plain directory, a file and a symlink to a plain directory are not; a missing path rejects ENOENT', async () => {
    assert.equal(await isMountPointByMountId('/'), true);
    assert.equal(await isMountPointByMountId('/proc'), true);
    const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-mntid-'));
    try {
      assert.equal(await isMountPointByMountId(dir), false);
      assert.equal(await isMountPointByMountId(path.join(dir, '.')), false);
      await symlink(dir, path.join(dir, 'link'));
      assert.equal(await isMountPointByMountId(path.join(dir, 'link')), false);
      assert.equal(await mountIdOf('/proc') !== (await mountIdOf('/')), true);
      await assert.rejects(isMountPointByMountId(path.join(dir, 'missing')), { code: 'ENOENT' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
