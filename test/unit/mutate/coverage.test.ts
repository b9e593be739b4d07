// Which files of the scope the ledger measured at their present text (scripts/mutate/coverage.ts,
// `score.js … --scope`): a full run's score needs every file, each measured as it is now.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';

import { SCOPE as ENGINE } from '../../../scripts/mutate/config.js';
import { batchByBytes, formatCoverage, gitChangedSince, nextFiles, owedFiles, readLedger, scopeCoverage, type ChangedSince } from '../../../scripts/mutate/coverage.js';
import { formatLedgerEntry, type LedgerEntry } from '../../../scripts/mutate/ledger.js';
import { parseArgs } from '../../../scripts/mutate/run.js';

const A = 'src/volume/a.ts';
const B = 'src/volume/b.ts';
const TYPES = 'src/volume/types.ts';
const C = 'src/volume/c.ts';
const SCOPE = [A, B, TYPES, C];

/** A ChangedSince answer that must be a reason. */
function reason(x: ReadonlySet<string> | string): string {
  assert.equal(typeof x, 'string', 'a reason, not a set of files');
  return x as string;
}

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
      if (commit === GONE) return 'commit gone';
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
      c.unknown.map((m) => [m.file, m.label, m.why]),
      [[TYPES, 'types', 'commit gone']],
    );
    assert.deepEqual(c.never, [C]);
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

  it('asks git which files changed since a commit; a commit git lacks, a dirty run or a string that is no commit is unknown, and says why', () => {
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
      const set = (x: ReadonlySet<string> | string): string[] => (typeof x === 'string' ? [x] : [...x]);
      assert.deepEqual(set(since(first, ['a.ts', 'b.ts'])), ['b.ts']);
      writeFileSync(path.join(dir, 'c.ts'), 'new\n');
      assert.deepEqual(set(since(first, ['a.ts', 'c.ts'])), ['c.ts']);
      assert.equal(since('d'.repeat(40), ['a.ts']), 'commit dddddddddddd is not in this clone (a shallow clone?)');
      assert.equal(since(`${first}-dirty`, ['a.ts']), `not a commit: ${first}-dirty (a run of a tree with uncommitted changes)`);
      assert.match(reason(since('--output=/tmp/x', ['a.ts'])), /^not a commit: --output=/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a checkout git cannot read (no .git: a tarball, or one git refuses) makes every file unknown, with git\'s reason, not an error', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nodevol-coverage-'));
    try {
      const since = gitChangedSince(dir);
      assert.match(reason(since('a'.repeat(40), ['a.ts'])), new RegExp(`^git cannot read ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .*not a git repository`));
      const c = scopeCoverage([A], [entry('e', 'a'.repeat(40), [A], [A])], since);
      assert.deepEqual(c.unknown.map((u) => u.file), [A]);
      assert.match(formatCoverage(c), /- not known whether changed since their run: 1\n {2}- git cannot read .*: src\/volume\/a\.ts \(e, aaaaaaa\)/);
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
      assert.match(out, /- not known whether changed since their run: 1\n {2}- (commit cccccccccccc is not in this clone \(a shallow clone\?\)|git cannot read [^\n]+): src\/volume\/util\/goText\.ts \(e, ccccccc\)\n/);
      assert.match(out, /not a full run\n$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('mutate: --next, the files a full run from the ledger still owes', () => {
  it('owes the changed, the unknown and the never measured, in the scope\'s order', () => {
    const changedSince: ChangedSince = (commit) => (commit === GONE ? 'gone' : new Set(commit === OLD ? [B] : []));
    const c = scopeCoverage(SCOPE, [entry('old', OLD, [A, B], [A, B]), entry('gone', GONE, [TYPES], [])], changedSince);
    assert.deepEqual(owedFiles(c, SCOPE), [B, TYPES, C]);
  });

  it('takes the files that fit in the budget, in order, passing over one too large; never none', () => {
    const files = [
      { file: 'a', size: 10 },
      { file: 'big', size: 50 },
      { file: 'b', size: 15 },
      { file: 'c', size: 6 },
    ];
    assert.deepEqual(batchByBytes(files, 30), ['a', 'b']);
    assert.deepEqual(batchByBytes(files, 31), ['a', 'b', 'c']);
    assert.deepEqual(batchByBytes(files, 5), ['a']);
    assert.deepEqual(batchByBytes([{ file: 'huge', size: 90 }], 5), ['huge']);
    assert.deepEqual(batchByBytes([], 100), []);
  });

  it('npm run mutate -- --next BYTES: a positive integer, and neither --shard nor --mutate beside it', () => {
    assert.equal(parseArgs(['--next', '28000', '--label', 'n1']).next, 28000);
    assert.throws(() => parseArgs(['--next', '0']), /--next: want the bytes of source/);
    assert.throws(() => parseArgs(['--next', '1.5']), /--next: want the bytes of source/);
    assert.throws(() => parseArgs(['--next', '100', '--shard', '1/2']), /--next picks its own files/);
    assert.throws(() => parseArgs(['--mutate', 'src/a.ts', '--next', '100']), /--next picks its own files/);
  });

  it('reads the ledger oldest run first, skips other JSON, and names an entry it cannot parse', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nodevol-coverage-'));
    try {
      writeFileSync(path.join(dir, 'a-newer.json'), formatLedgerEntry({ ...entry('newer', NEW, [A], [A]), date: '2026-12-05T12:00:00.000Z' }));
      writeFileSync(path.join(dir, 'b-older.json'), formatLedgerEntry({ ...entry('older', OLD, [A], [A]), date: '2026-12-05T11:00:00.000Z' }));
      writeFileSync(path.join(dir, 'other.json'), '{"not": "an entry"}');
      writeFileSync(path.join(dir, 'notes.txt'), 'not JSON, not read');
      assert.deepEqual(
        readLedger(dir).map((e) => e.label),
        ['older', 'newer'],
      );
      writeFileSync(path.join(dir, 'torn.json'), '{"schema": "nodevol-mutation-ledger/v1", "la');
      assert.throws(() => readLedger(dir), (e: Error) => e.message.startsWith(`${path.join(dir, 'torn.json')}: `));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('picks the next files of a checkout from its ledger and git: a file edited since its run is owed again', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nodevol-coverage-'));
    const git = (...args: string[]): string => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], { cwd: dir, encoding: 'utf8' }).trim();
    try {
      // The engine's layout, with a file or two in each part of the scope.
      for (const entryPath of ENGINE) {
        if (entryPath.endsWith('.ts')) {
          mkdirSync(path.join(dir, path.dirname(entryPath)), { recursive: true });
          writeFileSync(path.join(dir, entryPath), 'x'.repeat(40));
        } else mkdirSync(path.join(dir, entryPath), { recursive: true });
      }
      writeFileSync(path.join(dir, 'src/volume/a.ts'), 'x'.repeat(100));
      writeFileSync(path.join(dir, 'src/volume/b.ts'), 'x'.repeat(100));
      mkdirSync(path.join(dir, 'docs/mutation-results'), { recursive: true });
      git('init', '-q');
      git('add', '.');
      git('commit', '-q', '-m', 'engine');
      const head = git('rev-parse', 'HEAD');
      // Every file measured at HEAD but b.ts, which then changes.
      writeFileSync(path.join(dir, 'docs/mutation-results/all.json'), formatLedgerEntry(entry('all', head, [...ENGINE.map((e) => (e.endsWith('.ts') ? e : `${e}/**/*.ts`))], [])));
      assert.deepEqual(nextFiles(dir, 1000), []);
      writeFileSync(path.join(dir, 'src/volume/b.ts'), 'y'.repeat(100));
      assert.deepEqual(nextFiles(dir, 1000), ['src/volume/b.ts']);
      // A new file no run has seen is owed too, though an entry's glob matches it, whether git
      // tracks it yet or not; the budget takes what fits.
      writeFileSync(path.join(dir, 'src/kubelet/new.ts'), 'z'.repeat(950));
      assert.deepEqual(nextFiles(dir, 1000), ['src/volume/b.ts']);
      assert.deepEqual(nextFiles(dir, 1100), ['src/volume/b.ts', 'src/kubelet/new.ts']);
      git('add', 'src/kubelet/new.ts');
      git('commit', '-q', '-m', 'a new file');
      assert.deepEqual(nextFiles(dir, 1100), ['src/volume/b.ts', 'src/kubelet/new.ts']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
