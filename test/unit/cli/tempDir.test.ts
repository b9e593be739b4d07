// newTempDir (src/cli/tempDir.ts): a new 0700 dir in the OS temp dir; when it cannot be made, one
// message naming the directory, the variable it came from and what to do instead.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';

import { newTempDir } from '../../../src/cli/tempDir.js';

describe('newTempDir', () => {
  const saved = { TMPDIR: process.env['TMPDIR'], TMP: process.env['TMP'], TEMP: process.env['TEMP'] };
  let base = '';
  before(() => {
    base = mkdtempSync(path.join(tmpdir(), 'nodevol-tempdir-'));
  });
  afterEach(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) Reflect.deleteProperty(process.env, k);
      else process.env[k] = v;
    }
  });
  after(() => rmSync(base, { recursive: true, force: true }));

  it('makes a new private dir in TMPDIR', () => {
    process.env['TMPDIR'] = base;
    const dir = newTempDir('nodevol-x-', '');
    assert.equal(path.dirname(dir), base);
    assert.match(path.basename(dir), /^nodevol-x-.{6}$/);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
  });

  it('a missing TMPDIR: one message naming it, the variable and the way out', () => {
    process.env['TMPDIR'] = path.join(base, 'missing');
    assert.throws(() => newTempDir('nodevol-x-', ', or pass --out DIR'), {
      message: `cannot create a temp dir in ${base}/missing (from TMPDIR): ENOENT: no such file or directory, mkdtemp '${base}/missing/nodevol-x-XXXXXX'; set TMPDIR to a writable directory, or pass --out DIR`,
    });
  });

  it('TMPDIR unset: the variable the OS temp dir came from, else the default', () => {
    delete process.env['TMPDIR'];
    process.env['TMP'] = path.join(base, 'gone');
    assert.throws(() => newTempDir('nodevol-x-', ''), /^Error: cannot create a temp dir in .*\/gone \(from TMP\): ENOENT/);
  });
});
