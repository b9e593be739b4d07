/**
 * `npm run mutate [-- --shard I/N | --mutate <glob>[,<glob>…] | --next BYTES] [--concurrency N] [--force]`:
 * the mutation run over the engine, incremental (only mutants whose code or killers changed since
 * the last run of the same shard are run again; `--force` runs them all). `--shard I/N` runs the
 * I-th of N slices of the scope's files (config.ts, `shardFiles`), with its own reports and
 * incremental file under reports/mutation/shard-I-of-N/, for a run spread over processes or an
 * Indexed Job (deploy/mutate-job.yaml; `--print-json` prints the JSON report after the score).
 * `--mutate` narrows the run to some files instead; `--next BYTES` picks them: the files the
 * ledger has not measured at their present text (coverage.ts), up to BYTES of source, so that a
 * full run from the ledger goes on from wherever the last one stopped, on any machine. Prints
 * the score per folder and per killer at the end (score.ts), and writes the run's ledger entry
 * beside the report (ledger.ts: the files this run mutated, compact, to commit under
 * docs/mutation-results/; `--label` names it).
 */
import { Stryker } from '@stryker-mutator/core';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { reportDir, SCOPE_GLOBS, shardFiles } from './config.js';
import { nextFiles } from './coverage.js';
import { formatLedgerEntry, ledgerEntryOf } from './ledger.js';
import { formatScore, scoreOf } from './score.js';

interface Args {
  shard?: { index: number; count: number };
  mutate?: string[];
  concurrency?: number;
  force: boolean;
  printJson: boolean;
  label?: string;
  /** --next BYTES: the files the ledger still lacks at their present text, up to BYTES of source. */
  next?: number;
}

export function parseArgs(argv: readonly string[]): Args {
  const args: Args = { force: false, printJson: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--shard') {
      const m = /^(\d+)\/(\d+)$/.exec(value());
      if (m === null) throw new Error('--shard: want I/N, e.g. 0/4');
      args.shard = { index: Number(m[1]), count: Number(m[2]) };
    } else if (a === '--mutate') {
      args.mutate = [...(args.mutate ?? []), ...value().split(',')];
    } else if (a === '--concurrency') {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 1) throw new Error('--concurrency: want a positive integer');
      args.concurrency = n;
    } else if (a === '--force') {
      args.force = true;
    } else if (a === '--print-json') {
      args.printJson = true;
    } else if (a === '--label') {
      const l = value();
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(l)) throw new Error(`--label: want letters, digits, '.', '_' or '-', got ${JSON.stringify(l)}`);
      args.label = l;
    } else if (a === '--next') {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 1) throw new Error('--next: want the bytes of source to mutate, a positive integer (28000: a sixteenth of the engine)');
      args.next = n;
    } else {
      throw new Error(`unknown argument ${JSON.stringify(a)}; want --shard I/N, --mutate <glob>, --next BYTES, --concurrency N, --label NAME, --force or --print-json`);
    }
  }
  if (args.shard !== undefined && args.mutate !== undefined) throw new Error('--shard and --mutate do not go together: a shard is a slice of the whole scope');
  if (args.next !== undefined && (args.shard !== undefined || args.mutate !== undefined)) throw new Error('--next picks its own files: it goes with neither --shard nor --mutate');
  return args;
}

async function main(): Promise<number> {
  let args: Args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`npm run mutate: ${(e as Error).message}\n`);
    return 2;
  }
  const dir = reportDir(args.shard);
  const overrides: Record<string, unknown> = {
    incrementalFile: `${dir}/stryker-incremental.json`,
    jsonReporter: { fileName: `${dir}/mutation.json` },
    htmlReporter: { fileName: `${dir}/mutation.html` },
    force: args.force,
  };
  if (args.shard !== undefined) {
    const files = shardFiles(process.cwd(), args.shard.index, args.shard.count);
    if (files.length === 0) {
      process.stdout.write(`shard ${args.shard.index}/${args.shard.count}: no file\n`);
      return 0;
    }
    overrides['mutate'] = files;
    overrides['tempDirName'] = `.stryker-tmp/shard-${args.shard.index}-of-${args.shard.count}`;
  }
  if (args.mutate !== undefined) overrides['mutate'] = args.mutate;
  if (args.next !== undefined) {
    let files: string[];
    try {
      files = nextFiles(process.cwd(), args.next);
    } catch (e) {
      process.stderr.write(`npm run mutate: --next: ${(e as Error).message}\n`);
      return 1;
    }
    if (files.length === 0) {
      process.stdout.write('--next: the ledger (docs/mutation-results/) measured every file of the scope at its present text: nothing to run\n');
      return 0;
    }
    process.stdout.write(`--next: ${files.length} file(s) the ledger lacks at their present text: ${files.join(', ')}\n`);
    overrides['mutate'] = files;
  }
  if (args.concurrency !== undefined) overrides['concurrency'] = args.concurrency;
  const globs = (overrides['mutate'] as string[] | undefined) ?? SCOPE_GLOBS;
  const commit = headCommit();
  const started = Date.now();
  await new Stryker(overrides).runMutationTest();
  const json = readFileSync(`${dir}/mutation.json`, 'utf8');
  const label = args.label ?? (args.shard !== undefined ? `shard-${args.shard.index}-of-${args.shard.count}` : 'run');
  const entry = ledgerEntryOf(JSON.parse(json) as unknown, { label, commit, date: new Date().toISOString(), mutate: globs });
  writeFileSync(`${dir}/ledger.json`, formatLedgerEntry(entry));
  process.stdout.write(`\n${formatScore(scoreOf([entry]))}\nwall ${((Date.now() - started) / 1000).toFixed(0)} s; report ${dir}/mutation.html; ledger entry ${dir}/ledger.json\n`);
  // For a Job's log: everything after this line is the shard's report (score.ts merges them).
  if (args.printJson) process.stdout.write(`--- mutation.json\n${json}\n`);
  return 0;
}

/** The commit mutated, `-dirty` when the sources differ from it (such a run is not one to keep). */
function headCommit(): string {
  const git = (...a: string[]): string => execFileSync('git', a, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    return git('rev-parse', 'HEAD') + (git('status', '--porcelain', '--', 'src', 'test', 'scripts') === '' ? '' : '-dirty');
  } catch {
    return 'unknown';
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) process.exitCode = await main();
