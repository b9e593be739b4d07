// `npm run slips` (bench/slipList.ts, bench/slipCheck.ts): the slips cannot go stale - every
// search text is found exactly once in the current source - and a slipped copy of the tree differs
// from the tree only in the slipped source file and its compiled JS.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { compiledPath, failedTests, prepareTree, REPO_ROOT, unitDirOf } from '../../../bench/slipCheck.js';
import { applySlip, occurrences, SLIPS, type Slip } from '../../../bench/slipList.js';

/** Every file below `dir` (relative paths, sorted). */
function filesBelow(root: string, dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(path.join(root, d), { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

/** The files below `dirs` whose bytes differ between the two trees (or exist in one only). */
function differing(a: string, b: string, dirs: readonly string[]): string[] {
  const out: string[] = [];
  for (const dir of dirs) {
    const fa = filesBelow(a, dir);
    const fb = filesBelow(b, dir);
    assert.deepEqual(fa, fb, `the same files below ${dir}`);
    for (const f of fa) if (!readFileSync(path.join(a, f)).equals(readFileSync(path.join(b, f)))) out.push(f);
  }
  return out.sort();
}

const source = (slip: Slip): string => readFileSync(path.join(REPO_ROOT, slip.file), 'utf8');

describe('slips (bench/slipList.ts)', () => {
  it('eleven slips, numbered 1..11, each with a one-line description', () => {
    assert.deepEqual(SLIPS.map((s) => s.id), Array.from({ length: 11 }, (_, i) => i + 1));
    for (const s of SLIPS) assert.ok(s.description.length > 0 && !s.description.includes('\n'), `slip ${s.id}`);
  });

  for (const slip of SLIPS) {
    it(`slip ${slip.id}: every search text is found exactly once in ${slip.file}, and the slip changes it`, () => {
      const text = source(slip);
      for (const e of slip.edits) assert.equal(occurrences(text, e.search), 1, JSON.stringify(e.search));
      assert.notEqual(applySlip(slip, text), text);
    });
  }

  it('a search text found twice or not at all is refused, naming the slip', () => {
    const slip: Slip = { id: 99, description: 'x', file: 'f.ts', edits: [{ search: 'a;\n', replace: 'b;\n' }] };
    assert.throws(() => applySlip(slip, 'a;\na;\n'), /slip 99 \(f\.ts\) edit 1: search text found 2 times, want exactly once/);
    assert.throws(() => applySlip(slip, 'c;\n'), /found 0 times/);
    assert.equal(applySlip(slip, 'x;\na;\n'), 'x;\nb;\n');
  });

  it('each slipped copy differs from the tree only in the slipped file and its compiled JS', () => {
    for (const slip of SLIPS) {
      const dir = prepareTree(slip);
      try {
        assert.deepEqual(differing(REPO_ROOT, dir, ['src', 'dist/src']), [slip.file, compiledPath(slip.file)].sort(), `slip ${slip.id}`);
        assert.equal(readFileSync(path.join(dir, slip.file), 'utf8'), applySlip(slip, source(slip)));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it('the unit check runs the deepest test/unit folder of the slipped file', () => {
    assert.equal(unitDirOf('src/volume/csi/csiAttacher.ts'), 'test/unit/volume/csi');
    assert.equal(unitDirOf('src/volumemanager/reconciler/reconstruct.ts'), 'test/unit/volumemanager');
    assert.equal(unitDirOf('src/agent/runtime.ts'), 'test/unit/agent');
  });

  it('the failing tests are read from TAP, innermost first', () => {
    const tap = ['# Subtest: d', '    not ok 1 - inner', '      ---', 'not ok 1 - d', 'ok 2 - e', 'not ok 3 - f'].join('\n');
    assert.deepEqual(failedTests(tap), ['inner', 'f']);
  });
});
