/**
 * The mutation score per folder and per killer, from StrykerJS JSON reports (one per shard) or the
 * ledger's entries (ledger.ts): `node dist/scripts/mutate/score.js docs/mutation-results/*.json`
 * (a file in several counts once, from the newest: an entry by its date, a report by its file's
 * time). The score is Stryker's:
 * detected (killed + timeout) over valid (detected + survived + no coverage); ignored mutants
 * (log text, config.ts) and those that do not compile are not counted. A mutant's killer is the
 * test file that failed first: the killers run cheapest first and stop at the first failure, so
 * "per killer" counts the mutants each was the first to kill.
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { tsFiles, SCOPE } from './config.js';
import { formatCoverage, gitChangedSince, scopeCoverage } from './coverage.js';
import { isLedgerEntry } from './ledger.js';

interface Mutant {
  status: string;
  killedBy?: string[];
  mutatorName: string;
  location: { start: { line: number } };
  replacement?: string;
}

export interface Tally {
  killed: number;
  timeout: number;
  survived: number;
  noCoverage: number;
  ignored: number;
  invalid: number;
}

export interface Score {
  folders: Map<string, Tally>;
  killers: Map<string, number>;
  total: Tally;
  survivors: { file: string; line: number; mutator: string; replacement: string; status: string }[];
}

const empty = (): Tally => ({ killed: 0, timeout: 0, survived: 0, noCoverage: 0, ignored: 0, invalid: 0 });

/** The folder a mutated file is reported under: src/<folder>/ (two levels for volume/csi and the volume manager's). */
export function folderOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] !== 'src') return path.posix.dirname(file);
  if (parts[1] === 'agent') return file;
  if ((parts[1] === 'volume' || parts[1] === 'volumemanager') && parts.length > 3) return parts.slice(0, 3).join('/');
  return parts.slice(0, 2).join('/');
}

/** The killer group of a test file: its folder, or the explorer killer's name. */
export function killerOf(testFile: string): string {
  const m = /test\/mutation\/(\w+)\.mutation\.js$/.exec(testFile);
  if (m !== null) return m[1] ?? testFile;
  const u = /test\/unit\/(.+)\/[^/]+\.test\.js$/.exec(testFile);
  return u !== null ? `unit: test/unit/${u[1]}` : testFile;
}

function add(t: Tally, status: string): void {
  if (status === 'Killed') t.killed++;
  else if (status === 'Timeout') t.timeout++;
  else if (status === 'Survived') t.survived++;
  else if (status === 'NoCoverage') t.noCoverage++;
  else if (status === 'Ignored') t.ignored++;
  else t.invalid++;
}

export function percent(t: Tally): string {
  const valid = t.killed + t.timeout + t.survived + t.noCoverage;
  return valid === 0 ? '—' : `${((100 * (t.killed + t.timeout)) / valid).toFixed(1)} %`;
}

/**
 * The score of `reports`, oldest first. A file that several reports measured counts once, from
 * the last of them: a shard's files follow the sizes of the tree (config.ts `shardFiles`), so an
 * edit under src/ can move a file to another shard, whose newer report then holds it too.
 */
export function scoreOf(reports: readonly unknown[]): Score {
  const s: Score = { folders: new Map(), killers: new Map(), total: empty(), survivors: [] };
  const lastReportOf = new Map<string, number>();
  reports.forEach((report, i) => {
    for (const file of Object.keys((report as { files?: Record<string, unknown> }).files ?? {})) lastReportOf.set(file, i);
  });
  for (const [i, report] of reports.entries()) {
    const files = (report as { files?: Record<string, { mutants: Mutant[] }> }).files ?? {};
    const testIds = new Map<string, string>();
    for (const tf of Object.values((report as { testFiles?: Record<string, { tests: { id: string; name: string }[] }> }).testFiles ?? {})) {
      for (const t of tf.tests) testIds.set(t.id, t.name);
    }
    for (const [file, { mutants }] of Object.entries(files)) {
      if (lastReportOf.get(file) !== i) continue;
      const folder = folderOf(file.split(path.sep).join('/'));
      const tally = s.folders.get(folder) ?? empty();
      s.folders.set(folder, tally);
      for (const m of mutants) {
        add(tally, m.status);
        add(s.total, m.status);
        if (m.status === 'Killed' && m.killedBy?.[0] !== undefined) {
          const k = killerOf(testIds.get(m.killedBy[0]) ?? m.killedBy[0]);
          s.killers.set(k, (s.killers.get(k) ?? 0) + 1);
        }
        if (m.status === 'Survived' || m.status === 'NoCoverage') s.survivors.push({ file, line: m.location.start.line, mutator: m.mutatorName, replacement: m.replacement ?? '', status: m.status });
      }
    }
  }
  return s;
}

export function formatScore(s: Score): string {
  const row = (name: string, t: Tally): string =>
    `| ${name} | ${t.killed + t.timeout + t.survived + t.noCoverage} | ${t.killed} | ${t.timeout} | ${t.survived} | ${t.noCoverage} | ${t.ignored} | ${t.invalid} | **${percent(t)}** |`;
  const lines = ['| folder | mutants | killed | timeout | survived | no coverage | ignored | not compiled | score |', '|---|---|---|---|---|---|---|---|---|'];
  for (const [f, t] of [...s.folders].sort(([a], [b]) => (a < b ? -1 : 1))) lines.push(row(f, t));
  lines.push(row('all', s.total), '', '| first killer | mutants killed |', '|---|---|');
  for (const [k, n] of [...s.killers].sort((a, b) => b[1] - a[1])) lines.push(`| ${k} | ${n} |`);
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    process.stderr.write('usage: node dist/scripts/mutate/score.js <mutation.json>... [--survivors] [--scope]\n');
    process.exitCode = 2;
  } else {
    // Oldest first: the newest of a file is the one counted. A ledger entry's time is its run's
    // date (a checkout resets file times); a raw report's, its file's.
    const loaded = files
      .filter((f) => !f.startsWith('--'))
      .map((f) => {
        const report = JSON.parse(readFileSync(f, 'utf8')) as unknown;
        return { report, time: isLedgerEntry(report) ? Date.parse(report.date) : statSync(f).mtimeMs };
      })
      .sort((a, b) => a.time - b.time);
    const s = scoreOf(loaded.map((l) => l.report));
    process.stdout.write(`${formatScore(s)}\n`);
    if (files.includes('--survivors')) for (const v of s.survivors) process.stdout.write(`${v.status} ${v.file}:${v.line} ${v.mutator} ${JSON.stringify(v.replacement)}\n`);
    // Which files of the scope the entries measured, at their present text (run from the checkout's root).
    if (files.includes('--scope')) {
      const entries = loaded.map((l) => l.report).filter(isLedgerEntry);
      const root = process.cwd();
      process.stdout.write(`\n${formatCoverage(scopeCoverage(tsFiles(root, SCOPE), entries, gitChangedSince(root)))}\n`);
    }
  }
}
