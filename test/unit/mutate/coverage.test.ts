// Which files of the scope the ledger measured at their present text (scripts/mutate/coverage.ts,
// `score.js … --scope`): a full run's score needs every file, each measured as it is now.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';

import { formatCoverage, gitChangedSince, scopeCoverage, type ChangedSince } from '../../../scripts/mutate/coverage.js';
import { formatLedgerEntry, type LedgerEntry } from '../../../scripts/mutate/ledger.js';

const A = 'src/volume/a.ts';
const B = 'src/volume/b.ts';
const TYPES = 'src/volume/types.ts';
const C = 'src/volume/c.ts';
const SCOPE = [A, B, TYPES, C];

function entry(label: string, commit: string, mutate: string[], files: string[]): LedgerEntry {
  const mutant = { mutatorName: 'BlockStatement', replacement: '{}', status: 'Killed', location: { start: { line: 1, column: 1 }, end: { line: 1, column: 2 } } };
  return { schema: 'nodevol-mutation-ledger/v1', label, commit, date: '2026-12-05T00:00:00.000Z', mutate, files: Object.fromEntries(files.map((f) => [f, { mutants: [mutant] }])) };
}

const OLD = 'a'.repeat(40);
const NEW = 'b'.repeat(40);
const GONE = 'c'.repeat(40);

describe('mutate: the scope the ledger covers', () => {
  it('sorts each file by its newest entry: current, changed since, unknown commit, never measured', () => {
    const asked: string[] = [];
    const changedSince: ChangedSince = (commit, files) => {
      asked.push(`${commit.slice(0, 1)}:${[...files].sort().join(',')}`);
      if (commit === GONE) return undefined;
      return new Set(commit === OLD ? [A, B] : []);
    };
    // A measured at OLD, then again at NEW (the newer counts); B only at OLD, where it differs
    // from now; the types-only file matched by a glob with no mutant; C never.
    const c = scopeCoverage(SCOPE, [entry('first', OLD, [A, B], [A, B]), entry('rerun', NEW, [A], [A]), entry('types', GONE, ['src/volume/types.ts'], [])], changedSince);
    assert.deepEqual(
      c.current.map((m) => [m.file, m.label]),
      [[A, 'rerun']],
    );
    assert.deepEqual(
      c.changed.map((m) => [m.file, m.label]),
      [[B, 'first']],
    );
    assert.deepEqual(
      c.unknown.map((m) => [m.file, m.label]),
      [[TYPES, 'types']],
    );
    assert.deepEqual(c.never, [C]);
    assert.equal(c.scope, 4);
    // One question per commit, of the files it is the newest entry for.
    assert.deepEqual(asked.sort(), ['a:src/volume/b.ts', 'b:src/volume/a.ts', 'c:src/volume/types.ts']);
  });

  it('calls the score a full run only when every file is current', () => {
    const none: ChangedSince = () => new Set();
    const full = scopeCoverage([A, B], [entry('all', NEW, ['src/volume/**/*.ts'], [A, B])], none);
    assert.match(formatCoverage(full), /^scope: 2 files/);
    assert.match(formatCoverage(full), /the score above is a full run of the scope$/);
    const part = scopeCoverage([A, B], [entry('one', NEW, [A], [A])], none);
    const text = formatCoverage(part);
    assert.match(text, /- never measured: 1: src\/volume\/b\.ts/);
    assert.match(text, /the score above is of 1 of the 2 files as they are now, not a full run$/);
  });

  it('asks git which files changed since a commit; a commit git lacks is unknown, a bad one is never run', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nodevol-coverage-'));
    const git = (...args: string[]): string => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], { cwd: dir, encoding: 'utf8' }).trim();
    try {
      git('init', '-q');
      writeFileSync(path.join(dir, 'a.ts'), 'one\n');
      writeFileSync(path.join(dir, 'b.ts'), 'one\n');
      git('add', 'a.ts', 'b.ts');
      git('commit', '-q', '-m', 'first');
      const first = git('rev-parse', 'HEAD');
      writeFileSync(path.join(dir, 'b.ts'), 'two\n');
      const since = gitChangedSince(dir);
      assert.deepEqual([...(since(first, ['a.ts', 'b.ts']) ?? ['?'])], ['b.ts']);
      assert.equal(since('d'.repeat(40), ['a.ts']), undefined);
      assert.equal(since('--output=/tmp/x', ['a.ts']), undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('score.js --scope prints the coverage of the real scope after the tables', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nodevol-coverage-'));
    try {
      const file = path.join(dir, 'e.json');
      writeFileSync(file, formatLedgerEntry(entry('e', GONE, ['src/volume/util/goText.ts'], ['src/volume/util/goText.ts'])));
      const out = execFileSync(process.execPath, ['dist/scripts/mutate/score.js', file, '--scope'], { encoding: 'utf8' });
      assert.match(out, /\| all \| 1 \| 1 \|/);
      assert.match(out, /\nscope: \d+ files \(scripts\/mutate\/config\.ts SCOPE\)\n/);
      assert.match(out, /- measured at a commit this clone lacks: 1: src\/volume\/util\/goText\.ts \(e, ccccccc\)/);
      assert.match(out, /not a full run\n$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
