/**
 * `npm run slips`: would our checks notice a plausible slip in the engine? Each slip of
 * bench/slipList.ts is put into a temporary copy of the tree (bench/slipCheck.ts) and checked
 * three ways: the built-in scenarios with every gate on, the generated medium workloads with every
 * gate on, the unit tests of the touched folder. Prints a table, caught or missed per check and
 * what caught it. Exit 1 when a check that ran missed a slip.
 *
 *   node dist/bench/slips.js [--slip N]... [--check builtins|generated|unit|all]...
 *                            [--budget-s S] [--crash-points N] [--first-workload N] [--workloads N]
 *                            [--scenario NAME]... [--keep]
 *
 * --slip 0 is the unmodified tree (the baseline: every check must come out "missed").
 * --budget-s: wall seconds per check (default 180); a check over it is ended and marked "not run".
 * --first-workload / --workloads: the generated workloads' seeds (default 1..200), so that a range
 * too long for one budget can be run in pieces. --scenario: only these built-in scenarios.
 */
import { CHECKS, checkSlip, type CheckName, type CheckOutcome } from './slipCheck.js';
import { SLIPS, slipById } from './slipList.js';

interface Options {
  slips: number[];
  checks: CheckName[];
  budgetMs: number;
  crashPoints: number;
  firstWorkload: number;
  workloads: number;
  scenarios: string[] | undefined;
  keep: boolean;
}

function parse(argv: readonly string[]): Options {
  const slips: number[] = [];
  const checks: CheckName[] = [];
  let budgetMs = 180_000;
  let crashPoints = 12;
  let firstWorkload = 1;
  let workloads = 200;
  const scenarios: string[] = [];
  let keep = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a}: a value is wanted`);
      return v;
    };
    const int = (): number => {
      const v = value();
      if (!/^\d+$/.test(v)) throw new Error(`${a} ${v}: a non-negative integer is wanted`);
      return Number(v);
    };
    if (a === '--slip') {
      for (const part of value().split(',')) {
        const n = Number(part);
        if (n !== 0) slipById(n);
        slips.push(n);
      }
    } else if (a === '--check') {
      const v = value();
      if (v === 'all') checks.push(...CHECKS);
      else if ((CHECKS as readonly string[]).includes(v)) checks.push(v as CheckName);
      else throw new Error(`--check ${v}: want builtins, generated, unit or all`);
    } else if (a === '--budget-s') budgetMs = int() * 1000;
    else if (a === '--crash-points') crashPoints = int();
    else if (a === '--first-workload') firstWorkload = int();
    else if (a === '--workloads') workloads = int();
    else if (a === '--scenario') scenarios.push(value());
    else if (a === '--keep') keep = true;
    else throw new Error(`unknown argument ${String(a)}`);
  }
  return {
    slips: slips.length > 0 ? slips : SLIPS.map((s) => s.id),
    checks: checks.length > 0 ? [...new Set(checks)] : [...CHECKS],
    budgetMs,
    crashPoints,
    firstWorkload,
    workloads,
    scenarios: scenarios.length > 0 ? scenarios : undefined,
    keep,
  };
}

function cell(o: CheckOutcome | undefined): string {
  if (o === undefined) return '';
  const s = `${(o.wallMs / 1000).toFixed(0)} s`;
  if (o.result === 'caught') return `${o.slip === 0 ? '**violation**' : 'caught'}: ${o.by} (${s})`;
  if (o.result === 'missed') return o.slip === 0 ? `clean (${s})` : `**missed** (${s})`;
  return `not run: ${o.by}`;
}

async function main(): Promise<number> {
  let opts;
  try {
    opts = parse(process.argv.slice(2));
  } catch (err) {
    console.error(`slips: ${err instanceof Error ? err.message : String(err)}`);
    return 2;
  }
  const started = Date.now();
  const rows: { id: number; outcomes: Map<CheckName, CheckOutcome> }[] = [];
  for (const id of opts.slips) {
    const outcomes = new Map<CheckName, CheckOutcome>();
    for (const check of opts.checks) {
      const o = await checkSlip(id, check, {
        budgetMs: opts.budgetMs,
        crashPoints: opts.crashPoints,
        firstWorkload: opts.firstWorkload,
        workloads: opts.workloads,
        ...(opts.scenarios === undefined ? {} : { scenarios: opts.scenarios }),
        keep: opts.keep,
      });
      outcomes.set(check, o);
      console.error(`slip ${id} ${check}: ${cell(o)}`);
    }
    rows.push({ id, outcomes });
  }
  console.log(`| slip | ${opts.checks.join(' | ')} |`);
  console.log(`|---|${opts.checks.map(() => '---').join('|')}|`);
  for (const r of rows) {
    const name = r.id === 0 ? '0 (none: the shipped tree)' : `${r.id} ${slipById(r.id).description}`;
    console.log(`| ${name} | ${opts.checks.map((c) => cell(r.outcomes.get(c))).join(' | ')} |`);
  }
  console.log(`\n${((Date.now() - started) / 1000).toFixed(0)} s wall; builtins: ${opts.scenarios?.join(', ') ?? 'every built-in scenario'}, AllAlpha, depth 1, both crash kinds, ${opts.crashPoints} crash points; generated: medium workloads ${opts.firstWorkload}..${opts.workloads}, AllAlpha, 12 crash points; per-check budget ${opts.budgetMs / 1000} s`);
  const missed = rows.some((r) => r.id !== 0 && [...r.outcomes.values()].some((o) => o.result === 'missed'));
  const baselineCaught = rows.some((r) => r.id === 0 && [...r.outcomes.values()].some((o) => o.result === 'caught'));
  return missed || baselineCaught ? 1 : 0;
}

process.exitCode = await main();
