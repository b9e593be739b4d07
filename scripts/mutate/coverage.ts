/**
 * How much of the scope the ledger's entries cover (`score.js … --scope`). The engine-wide score
 * is a full run's only when every file of the scope was measured, at the text it has now: a file
 * no entry mutated counts nothing, and one edited since its entry's run counts mutants of code
 * that is gone. So each file of the scope is one of:
 * - current: the newest entry that mutated it ran at a commit where the file was what it is now;
 * - changed: that commit's file differs from the file now (its score is of older code);
 * - unknown: nobody can tell here, and the output says why: the commit is not in this clone (a
 *   shallow one), the run's tree was dirty, or git cannot read the checkout (a tarball without
 *   .git, or a checkout another user owns, which git refuses);
 * - never: no entry mutated it.
 * A file an entry's `mutate` globs match counts as mutated even when the entry lists no mutant for
 * it: a file of types alone has none.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

import { SCOPE, tsFiles } from './config.js';
import { isLedgerEntry, mutatedFiles, type LedgerEntry } from './ledger.js';

export interface Measured {
  readonly file: string;
  readonly label: string;
  readonly commit: string;
}

/** Each file of the scope in exactly one list. */
/** A file whose change since its run nobody can tell here, and why. */
export interface Unknown extends Measured {
  readonly why: string;
}

export interface ScopeCoverage {
  readonly current: readonly Measured[];
  readonly changed: readonly Measured[];
  readonly unknown: readonly Unknown[];
  readonly never: readonly string[];
}

/**
 * Which of `files` differ between `commit` and the working tree: a set, or why that cannot be
 * told here.
 */
export type ChangedSince = (commit: string, files: readonly string[]) => ReadonlySet<string> | string;

/** The coverage of `scopeFiles` by `entries`, oldest first (the newest entry of a file counts). */
export function scopeCoverage(scopeFiles: readonly string[], entries: readonly LedgerEntry[], changedSince: ChangedSince): ScopeCoverage {
  const newest = new Map<string, LedgerEntry>();
  for (const e of entries) {
    const mutated = new Set([...Object.keys(e.files), ...mutatedFiles(scopeFiles, e.mutate)]);
    for (const f of scopeFiles) if (mutated.has(f)) newest.set(f, e);
  }
  const byCommit = new Map<string, string[]>();
  for (const [f, e] of newest) byCommit.set(e.commit, [...(byCommit.get(e.commit) ?? []), f]);
  const changedAt = new Map<string, ReadonlySet<string> | string>();
  for (const [commit, files] of byCommit) changedAt.set(commit, changedSince(commit, files));
  const current: Measured[] = [];
  const changed: Measured[] = [];
  const unknown: Unknown[] = [];
  const never: string[] = [];
  for (const f of scopeFiles) {
    const e = newest.get(f);
    if (e === undefined) {
      never.push(f);
      continue;
    }
    const m = { file: f, label: e.label, commit: e.commit };
    const diff = changedAt.get(e.commit) ?? 'not asked';
    if (typeof diff === 'string') unknown.push({ ...m, why: diff });
    else if (diff.has(f)) changed.push(m);
    else current.push(m);
  }
  return { current, changed, unknown, never };
}

/**
 * ChangedSince by git, in `root`: `git diff --name-only <commit> -- <files>` compares the commit
 * with the working tree (a file added since is changed), and a file git does not track yet is
 * changed too (an entry's glob may match it, but the run never saw it). When git cannot tell, the
 * answer says why: the commit is not one (a run of a dirty tree records `<sha>-dirty`), it is not
 * in this clone, or git cannot read the checkout at all (its own first line of error).
 */
export function gitChangedSince(root: string): ChangedSince {
  const git = (args: readonly string[]): string[] =>
    execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 16 * 1024 * 1024 })
      .split('\n')
      .filter((l) => l !== '');
  const why = (e: unknown): string => {
    const stderr = (e as { stderr?: unknown }).stderr;
    const line = typeof stderr === 'string' ? stderr.split('\n').find((l) => l.trim() !== '') : undefined;
    return line?.trim() ?? (e as Error).message;
  };
  let checkout: string | undefined;
  const readable = (): string | undefined => {
    if (checkout !== undefined) return checkout === '' ? undefined : checkout;
    try {
      git(['rev-parse', '--git-dir']);
      checkout = '';
      return undefined;
    } catch (e) {
      checkout = `git cannot read ${root}: ${why(e)}`;
      return checkout;
    }
  };
  return (commit, files) => {
    if (!/^[0-9a-f]{7,64}$/.test(commit)) return `not a commit: ${commit} (a run of a tree with uncommitted changes)`;
    const unreadable = readable();
    if (unreadable !== undefined) return unreadable;
    try {
      git(['cat-file', '-e', `${commit}^{commit}`]);
    } catch {
      return `commit ${commit.slice(0, 12)} is not in this clone (a shallow clone?)`;
    }
    return new Set([...git(['diff', '--name-only', '--no-renames', commit, '--', ...files]), ...git(['ls-files', '--others', '--', ...files])]);
  };
}

/** The coverage as the lines score.js prints after its tables. */
export function formatCoverage(c: ScopeCoverage): string {
  const scope = c.current.length + c.changed.length + c.unknown.length + c.never.length;
  const short = (commit: string): string => commit.slice(0, 7);
  const named = (ms: readonly Measured[]): string => ms.map((m) => `${m.file} (${m.label}, ${short(m.commit)})`).join(', ');
  const lines = [
    `scope: ${scope} files (scripts/mutate/config.ts SCOPE)`,
    `- measured at their present text: ${c.current.length}`,
    `- changed since their entry's run: ${c.changed.length}${c.changed.length > 0 ? `: ${named(c.changed)}` : ''}`,
    `- not known whether changed since their run: ${c.unknown.length}`,
    ...[...new Set(c.unknown.map((u) => u.why))].map((w) => `  - ${w}: ${named(c.unknown.filter((u) => u.why === w))}`),
    `- never measured: ${c.never.length}${c.never.length > 0 ? `: ${c.never.join(', ')}` : ''}`,
    c.current.length === scope ? 'the score above is a full run of the scope' : `the score above is of ${c.current.length} of the ${scope} files as they are now, not a full run`,
  ];
  return lines.join('\n');
}

/** The files a run still owes the ledger (changed since, not known to be current, never measured), in the scope's order. */
export function owedFiles(c: ScopeCoverage, scopeFiles: readonly string[]): string[] {
  const owed = new Set([...c.changed.map((m) => m.file), ...c.unknown.map((m) => m.file), ...c.never]);
  return scopeFiles.filter((f) => owed.has(f));
}

/**
 * The files of `files`, in order, that fit together in `budget` bytes of source: one that would
 * go over is passed over for the next ones. Never empty when `files` is not: the first file goes
 * in whatever its size (a file larger than the budget still has to run some day).
 */
export function batchByBytes(files: readonly { readonly file: string; readonly size: number }[], budget: number): string[] {
  const out: string[] = [];
  let used = 0;
  for (const { file, size } of files) {
    if (out.length > 0 && used + size > budget) continue;
    out.push(file);
    used += size;
  }
  return out;
}

/** The ledger's entries in `dir` (its `*.json` that are entries), oldest run first. */
export function readLedger(dir: string): LedgerEntry[] {
  const entries: LedgerEntry[] = [];
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.json')).sort()) {
    const file = path.join(dir, name);
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new Error(`${file}: ${(e as Error).message}`);
    }
    if (isLedgerEntry(parsed)) entries.push(parsed);
  }
  return entries.sort((a, b) => Date.parse(a.date) - Date.parse(b.date));
}

/**
 * `npm run mutate -- --next BYTES`: the next files to measure for a full run from the ledger
 * (`docs/mutation-results/` under `root`), as many as fit in BYTES of source.
 */
export function nextFiles(root: string, budget: number, ledgerDir = 'docs/mutation-results'): string[] {
  const scope = tsFiles(root, SCOPE);
  const coverage = scopeCoverage(scope, readLedger(path.join(root, ledgerDir)), gitChangedSince(root));
  return batchByBytes(
    owedFiles(coverage, scope).map((file) => ({ file, size: statSync(path.join(root, file)).size })),
    budget,
  );
}
