// The mutation ledger (scripts/mutate/ledger.ts): a run's outcome cut to the files it mutated, small
// enough to commit, and scored from a clean checkout by its run's date.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';

import { formatLedgerEntry, isLedgerEntry, ledgerEntryOf, mutatedFiles, type LedgerEntry } from '../../../scripts/mutate/ledger.js';
import { parseArgs } from '../../../scripts/mutate/run.js';
import { scoreOf } from '../../../scripts/mutate/score.js';

const loc = (line: number): object => ({ start: { line, column: 3 }, end: { line, column: 9 } });

/** A StrykerJS report of a run of `a.ts` started from an incremental file that also held `carried.ts`. */
const report = {
  schemaVersion: '2',
  files: {
    'src/volume/csi/a.ts': {
      language: 'typescript',
      source: 'the whole source, which the ledger leaves out',
      mutants: [
        { id: '1', mutatorName: 'ConditionalExpression', replacement: 'true', status: 'Killed', killedBy: ['7', '8'], coveredBy: ['7', '8'], location: loc(4) },
        { id: '2', mutatorName: 'BlockStatement', replacement: '{}', status: 'Survived', coveredBy: ['7'], location: loc(9) },
        { id: '3', mutatorName: 'StringLiteral', replacement: '""', status: 'Ignored', statusReason: 'log text', location: loc(12) },
      ],
    },
    'src/volume/csi/carried.ts': { language: 'typescript', source: '', mutants: [{ id: '4', mutatorName: 'BlockStatement', replacement: '{}', status: 'Survived', location: loc(1) }] },
  },
  testFiles: {
    'dist/test/unit/volume/csi/a.test.js': { tests: [{ id: '7', name: 'dist/test/unit/volume/csi/a.test.js' }] },
    'dist/test/mutation/scenariosAllGates.mutation.js': { tests: [{ id: '8', name: 'dist/test/mutation/scenariosAllGates.mutation.js' }] },
  },
};
const META = { label: 'g9', commit: '0123456789abcdef0123456789abcdef01234567', date: '2026-12-05T11:00:00.000Z', mutate: ['src/volume/csi/a.ts'] };

describe('mutate: the ledger', () => {
  it('holds only the files the run mutated, not those its incremental file carried', () => {
    const e = ledgerEntryOf(report, META);
    assert.deepEqual(Object.keys(e.files), ['src/volume/csi/a.ts']);
    assert.equal(scoreOf([e]).total.survived, 1);
  });

  it('globs as Stryker reads them: a ** glob, an exact path, a !-glob excluding', () => {
    const files = ['src/volume/a.ts', 'src/volume/csi/b.ts', 'src/kubelet/c.ts', 'src/volume/csi/d.ts'];
    assert.deepEqual(mutatedFiles(files, ['src/volume/**/*.ts', '!src/volume/csi/d.ts']), ['src/volume/a.ts', 'src/volume/csi/b.ts']);
    assert.deepEqual(mutatedFiles(files, ['src/kubelet/c.ts']), ['src/kubelet/c.ts']);
    assert.deepEqual(mutatedFiles(files, []), []);
  });

  it('keeps status, mutator, replacement, location and the first killer by its test file; drops the sources and ids', () => {
    const e = ledgerEntryOf(report, META);
    assert.deepEqual(e.files['src/volume/csi/a.ts']?.mutants, [
      { mutatorName: 'ConditionalExpression', replacement: 'true', status: 'Killed', location: loc(4), killedBy: ['dist/test/unit/volume/csi/a.test.js'] },
      { mutatorName: 'BlockStatement', replacement: '{}', status: 'Survived', location: loc(9) },
      { mutatorName: 'StringLiteral', replacement: '""', status: 'Ignored', location: loc(12) },
    ]);
    assert.deepEqual(
      { label: e.label, commit: e.commit, date: e.date, mutate: e.mutate, schema: e.schema },
      { ...META, schema: 'nodevol-mutation-ledger/v1' },
    );
    const s = scoreOf([e]);
    assert.deepEqual([...s.killers], [['unit: test/unit/volume/csi', 1]]);
    assert.deepEqual(s.total, { killed: 1, timeout: 0, survived: 1, noCoverage: 0, ignored: 1, invalid: 0 });
  });

  it('its committed text parses back to the same entry, one mutant a line', () => {
    const e = ledgerEntryOf(report, META);
    const text = formatLedgerEntry(e);
    assert.deepEqual(JSON.parse(text), e);
    assert.ok(isLedgerEntry(JSON.parse(text)));
    assert.equal(text.split('\n').filter((l) => l.includes('"mutatorName"')).length, 3);
  });

  it('refuses what is not a StrykerJS report, naming the missing field', () => {
    assert.throws(() => ledgerEntryOf({ schemaVersion: '2' }, META), /not a StrykerJS JSON report: no "files" object/);
    assert.throws(() => ledgerEntryOf(null, META), /no "files" object/);
    assert.equal(isLedgerEntry(report), false);
  });

  it('score.js counts a file from the entry whose run is newest, whatever the files\' times', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nodevol-ledger-'));
    try {
      const first: LedgerEntry = ledgerEntryOf(report, { ...META, label: 'first', date: '2026-12-01T00:00:00.000Z' });
      const rerun: LedgerEntry = ledgerEntryOf(
        { files: { 'src/volume/csi/a.ts': { mutants: [{ mutatorName: 'BlockStatement', replacement: '{}', status: 'Killed', killedBy: ['7'], location: loc(9) }] } }, testFiles: report.testFiles },
        { ...META, label: 'rerun', date: '2026-12-02T00:00:00.000Z' },
      );
      writeFileSync(path.join(dir, 'first.json'), formatLedgerEntry(first));
      writeFileSync(path.join(dir, 'rerun.json'), formatLedgerEntry(rerun));
      // The re-run's file looks older, as a checkout may leave it.
      utimesSync(path.join(dir, 'rerun.json'), new Date('2020-01-01'), new Date('2020-01-01'));
      const out = execFileSync(process.execPath, ['dist/scripts/mutate/score.js', path.join(dir, 'first.json'), path.join(dir, 'rerun.json')], { encoding: 'utf8' });
      assert.match(out, /\| all \| 1 \| 1 \| 0 \| 0 \| 0 \| 0 \| 0 \| \*\*100\.0 %\*\* \|/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('npm run mutate -- --label names the entry; a label that is no file name is refused', () => {
    assert.equal(parseArgs(['--label', 'g5-rerun.2']).label, 'g5-rerun.2');
    assert.throws(() => parseArgs(['--label', '../x']), /--label: want letters, digits/);
    assert.throws(() => parseArgs(['--label']), /--label needs a value/);
  });
});

describe('mutate: ledger.js, the entry of a report written without one', () => {
  it('prints the entry, and refuses a missing option or a bad date naming it', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nodevol-ledger-'));
    try {
      const file = path.join(dir, 'mutation.json');
      writeFileSync(file, JSON.stringify(report));
      const run = (...a: string[]): { status: number; out: string; err: string } => {
        try {
          return { status: 0, out: execFileSync(process.execPath, ['dist/scripts/mutate/ledger.js', ...a], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }), err: '' };
        } catch (e) {
          const x = e as { status: number; stdout: string; stderr: string };
          return { status: x.status, out: x.stdout, err: x.stderr };
        }
      };
      const ok = run(file, '--label', 'g9', '--commit', META.commit, '--date', META.date, '--mutate', 'src/volume/csi/a.ts');
      assert.equal(ok.status, 0, ok.err);
      assert.deepEqual(JSON.parse(ok.out), ledgerEntryOf(report, META));
      const noDate = run(file, '--label', 'g9', '--commit', META.commit, '--mutate', 'src/volume/csi/a.ts');
      assert.equal(noDate.status, 2);
      assert.match(noDate.err, /missing --date/);
      const badDate = run(file, '--label', 'g9', '--commit', META.commit, '--date', 'yesterday', '--mutate', 'x');
      assert.equal(badDate.status, 2);
      assert.match(badDate.err, /--date: not a date: "yesterday"/);
      writeFileSync(file, '{}');
      const notReport = run(file, '--label', 'g9', '--commit', META.commit, '--date', META.date, '--mutate', 'x');
      assert.equal(notReport.status, 1);
      assert.match(notReport.err, /mutation\.json: not a StrykerJS JSON report/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
