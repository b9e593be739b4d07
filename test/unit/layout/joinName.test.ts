// joinName is path.posix.join for (dir, name), faster on the clean inputs of a walk: it must give
// exactly path.join's result on every input, clean or not.
import assert from 'node:assert/strict';
import * as path from 'node:path/posix';
import { describe, it } from 'node:test';
import { joinName } from '../../../src/layout/joinName.js';

const DIRS = ['/', '/var/lib/kubelet', '/var/lib/kubelet/', '//var', '/var//lib', '/var/./lib', '/var/../lib', '/var/.', '/var/..', '/a/.b', '/a/..b', 'relative/dir', '', '.', '/a b/\u00e9', '/x/\udc80'];
const NAMES = ['pods', 'vol_data.json', '.', '..', '', 'a/b', '/abs', '.hidden', '..x', 'x..', 'sp ace', '\udcff', 'a\u0000b'];

describe('joinName', () => {
  it('equals path.posix.join on every pair of awkward dirs and names', () => {
    for (const d of DIRS) for (const n of NAMES) assert.equal(joinName(d, n), path.join(d, n), `joinName(${JSON.stringify(d)}, ${JSON.stringify(n)})`);
  });
});
