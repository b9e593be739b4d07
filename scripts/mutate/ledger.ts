/**
 * The mutation ledger: each run's outcome, cut to the files it mutated and kept small enough to
 * commit (docs/mutation-results/<label>.json), so that the engine-wide score can be computed from a
 * clean checkout (`node dist/scripts/mutate/score.js docs/mutation-results/*.json`) and does not
 * hang on reports kept on one machine.
 *
 * A StrykerJS report holds every file of its incremental file, not only those its run mutated: a
 * run started from another run's incremental file carries that run's other files unchanged, and
 * as the newest report it would stand for them. An entry holds only the files the run's `mutate`
 * globs match. It keeps what the score and a survivor's hunt need (status, mutator, replacement,
 * location, the first killer's test file), not the sources, and it says when and at which commit
 * the run was made: score.js orders entries by that date, not by file times a checkout resets.
 */
import { minimatch } from 'minimatch';
import { readFileSync } from 'node:fs';

export interface LedgerMutant {
  mutatorName: string;
  replacement: string;
  status: string;
  location: { start: { line: number; column: number }; end: { line: number; column: number } };
  /** The test that killed it first (for the tap runner, its file), for a killed mutant. */
  killedBy?: [string];
}

export interface LedgerEntry {
  schema: 'nodevol-mutation-ledger/v1';
  label: string;
  /** The commit the run mutated (the tree at `git rev-parse HEAD`, clean). */
  commit: string;
  /** When the run ended, ISO 8601 (entries are ordered by it). */
  date: string;
  /** The run's `mutate` globs, as given. */
  mutate: string[];
  files: Record<string, { mutants: LedgerMutant[] }>;
}

interface ReportMutant {
  mutatorName: string;
  replacement?: string;
  status: string;
  location: { start: { line: number; column: number }; end: { line: number; column: number } };
  killedBy?: string[];
}

interface Report {
  files?: Record<string, { mutants?: ReportMutant[] }>;
  testFiles?: Record<string, { tests?: { id: string; name?: string }[] }>;
}

/** The globs' files among a report's: a `!`-glob excludes, as in Stryker's `mutate` option. */
export function mutatedFiles(files: readonly string[], globs: readonly string[]): string[] {
  const include = globs.filter((g) => !g.startsWith('!'));
  const exclude = globs.filter((g) => g.startsWith('!')).map((g) => g.slice(1));
  return files.filter((f) => include.some((g) => minimatch(f, g)) && !exclude.some((g) => minimatch(f, g)));
}

export function ledgerEntryOf(report: unknown, meta: { label: string; commit: string; date: string; mutate: readonly string[] }): LedgerEntry {
  if (typeof report !== 'object' || report === null || typeof (report as Report).files !== 'object') {
    throw new Error('not a StrykerJS JSON report: no "files" object');
  }
  const r = report as Report;
  const testFileOf = new Map<string, string>();
  for (const [testFile, tf] of Object.entries(r.testFiles ?? {})) for (const t of tf.tests ?? []) testFileOf.set(t.id, t.name ?? testFile);
  const reportFiles = r.files ?? {};
  const files: LedgerEntry['files'] = {};
  for (const file of mutatedFiles(Object.keys(reportFiles).sort(), meta.mutate)) {
    files[file] = {
      mutants: (reportFiles[file]?.mutants ?? []).map((m) => {
        const first = m.killedBy?.[0];
        const out: LedgerMutant = {
          mutatorName: m.mutatorName,
          replacement: m.replacement ?? '',
          status: m.status,
          location: { start: { ...m.location.start }, end: { ...m.location.end } },
        };
        if (m.status === 'Killed' && first !== undefined) out.killedBy = [testFileOf.get(first) ?? first];
        return out;
      }),
    };
  }
  return { schema: 'nodevol-mutation-ledger/v1', label: meta.label, commit: meta.commit, date: meta.date, mutate: [...meta.mutate], files };
}

/** The entry's JSON as committed: one mutant a line, so that a re-run's diff reads file by file. */
export function formatLedgerEntry(e: LedgerEntry): string {
  const files = Object.entries(e.files).map(
    ([file, { mutants }]) => `    ${JSON.stringify(file)}: {"mutants": [\n${mutants.map((m) => `      ${JSON.stringify(m)}`).join(',\n')}\n    ]}`,
  );
  const head = { schema: e.schema, label: e.label, commit: e.commit, date: e.date, mutate: e.mutate };
  const headText = JSON.stringify(head).slice(0, -1);
  return `${headText},\n  "files": {\n${files.join(',\n')}\n  }\n}\n`;
}

export function isLedgerEntry(x: unknown): x is LedgerEntry {
  return typeof x === 'object' && x !== null && (x as { schema?: unknown }).schema === 'nodevol-mutation-ledger/v1';
}

/**
 * `node dist/scripts/mutate/ledger.js <mutation.json> --label L --commit SHA --date ISO --mutate
 * <glob>[,<glob>…]`: the entry of a report written without one (a run before the ledger, or a
 * Job's log cut after `--- mutation.json`), on standard output.
 */
function cli(argv: readonly string[]): number {
  const [file, ...rest] = argv;
  const opts = new Map<string, string>();
  for (let i = 0; i < rest.length; i += 2) opts.set(rest[i] ?? '', rest[i + 1] ?? '');
  const missing = ['--label', '--commit', '--date', '--mutate'].filter((o) => (opts.get(o) ?? '') === '');
  if (file === undefined || file.startsWith('--') || missing.length > 0) {
    process.stderr.write(`usage: node dist/scripts/mutate/ledger.js <mutation.json> --label L --commit SHA --date ISO --mutate <globs>${missing.length > 0 ? ` (missing ${missing.join(', ')})` : ''}\n`);
    return 2;
  }
  const date = opts.get('--date') ?? '';
  if (Number.isNaN(Date.parse(date))) {
    process.stderr.write(`--date: not a date: ${JSON.stringify(date)}\n`);
    return 2;
  }
  let report: unknown;
  try {
    report = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    process.stderr.write(`${file}: ${(e as Error).message}\n`);
    return 1;
  }
  try {
    const entry = ledgerEntryOf(report, { label: opts.get('--label') ?? '', commit: opts.get('--commit') ?? '', date: new Date(date).toISOString(), mutate: (opts.get('--mutate') ?? '').split(',') });
    process.stdout.write(formatLedgerEntry(entry));
  } catch (e) {
    process.stderr.write(`${file}: ${(e as Error).message}\n`);
    return 1;
  }
  return 0;
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) process.exitCode = cli(process.argv.slice(2));
