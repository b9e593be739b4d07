/**
 * The end of `.ci/run`: the time of each step, as .ci/run measured it, and the test counts of
 * every step that ran node's test runner, read back from the step's output (the spec reporter's).
 *
 *   node dist/scripts/ciSummary.js STEPS_TSV [TOTAL_SECONDS]
 *
 * STEPS_TSV has one line per step that ran: name, seconds, exit status and the file its output
 * was written to, separated by tabs.
 *
 * Why the skipped suites are counted here: node's runner counts a skipped `describe` as a suite,
 * not as a skipped test, and never reports the tests inside it, so its "skipped" line hides them
 * (an unprivileged run said `skipped 1` while 17 root-only suites did not run). The spec reporter
 * prints one "﹣ name (…ms) # reason" line for every skipped test and every skipped suite: the
 * lines that are not in node's "skipped" count are skipped suites.
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** The counts of one run of node's test runner, as its spec reporter prints them. */
export interface TestCounts {
  readonly tests: number;
  readonly suites: number;
  readonly passed: number;
  readonly failed: number;
  readonly cancelled: number;
  /** Skipped tests, as node counts them (the tests of a skipped suite are in no count). */
  readonly skippedTests: number;
  /** Skipped suites: "﹣" lines beyond node's skipped count. */
  readonly skippedSuites: number;
  readonly todo: number;
  /** Every "﹣" line's reason (tests and suites), and how many lines give it, most first. */
  readonly skipReasons: readonly { readonly reason: string; readonly count: number }[];
}

export interface Step {
  readonly name: string;
  readonly seconds: number;
  readonly status: number;
  readonly log: string;
}

// eslint-disable-next-line no-control-regex -- the colour codes of a reporter writing to a terminal
const ANSI = /\u001b\[[0-9;]*m/g;
const COUNT_LINE = /^ℹ (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) (\d+(?:\.\d+)?)$/;
const SKIP_LINE = /^\s*﹣ .*?\(\d+(?:\.\d+)?m?s\)(?: # (.*))?$/;

/**
 * The counts of the last run of node's test runner in `output` (its spec reporter's text; a run
 * ends with its "ℹ duration_ms" line), or undefined when the output has none (the step ran no
 * tests, or ended before the counts).
 */
export function parseTestOutput(output: string): TestCounts | undefined {
  let counts = new Map<string, number>();
  let reasons = new Map<string, number>();
  let skipLines = 0;
  let last: TestCounts | undefined;
  for (const raw of output.split('\n')) {
    const line = raw.replace(ANSI, '').replace(/\r$/, '');
    const count = COUNT_LINE.exec(line);
    if (count?.[1] !== undefined && count[2] !== undefined) {
      counts.set(count[1], Number(count[2]));
      // The last line of a run's counts: what follows is another run's.
      if (count[1] === 'duration_ms') {
        last = countsOf(counts, reasons, skipLines) ?? last;
        counts = new Map();
        reasons = new Map();
        skipLines = 0;
      }
      continue;
    }
    const skip = SKIP_LINE.exec(line);
    if (skip !== null) {
      skipLines++;
      const reason = skip[1] ?? 'SKIP';
      reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
    }
  }
  return last;
}

function countsOf(counts: ReadonlyMap<string, number>, reasons: ReadonlyMap<string, number>, skipLines: number): TestCounts | undefined {
  const tests = counts.get('tests');
  const passed = counts.get('pass');
  const failed = counts.get('fail');
  const skippedTests = counts.get('skipped');
  if (tests === undefined || passed === undefined || failed === undefined || skippedTests === undefined) return undefined;
  return {
    tests,
    suites: counts.get('suites') ?? 0,
    passed,
    failed,
    cancelled: counts.get('cancelled') ?? 0,
    skippedTests,
    skippedSuites: Math.max(0, skipLines - skippedTests),
    todo: counts.get('todo') ?? 0,
    skipReasons: [...reasons].map(([reason, n]) => ({ reason, count: n })).sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : a.reason > b.reason ? 1 : 0)),
  };
}

/** The steps .ci/run wrote: name, seconds, status, log (tab-separated), one line each. */
export function parseSteps(tsv: string, file = 'steps'): Step[] {
  return tsv
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line, i) => {
      const [name, seconds, status, log] = line.split('\t');
      const s = Number(seconds);
      const st = Number(status);
      if (name === undefined || name === '' || log === undefined || !Number.isFinite(s) || !Number.isInteger(st)) {
        throw new Error(`${file}:${i + 1}: expected "name<TAB>seconds<TAB>status<TAB>log", got ${JSON.stringify(line)}`);
      }
      return { name, seconds: s, status: st, log };
    });
}

const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;

/** One line: what passed, failed and was skipped (tests and whole suites). */
export function formatCounts(c: TestCounts): string {
  const parts = [
    `${c.passed} passed`,
    `${c.failed} failed`,
    ...(c.cancelled > 0 ? [`${c.cancelled} cancelled`] : []),
    `${plural(c.skippedTests, 'test')} skipped`,
    `${plural(c.skippedSuites, 'suite')} skipped (their tests not run, in no count)`,
    ...(c.todo > 0 ? [`${c.todo} todo`] : []),
  ];
  return `${parts.join(', ')}; ${plural(c.tests, 'test')} in ${plural(c.suites, 'suite')} counted`;
}

/** The summary: the table step → seconds, the whole run, then each test step's counts and skip reasons. */
export function formatSummary(steps: readonly Step[], readLog: (file: string) => string | undefined, totalSeconds?: number): string {
  const width = Math.max('step'.length, 'whole run'.length, ...steps.map((s) => s.name.length));
  const lines = ['== CI summary', `${'step'.padEnd(width)}  ${'seconds'.padStart(7)}  result`];
  for (const s of steps) lines.push(`${s.name.padEnd(width)}  ${String(s.seconds).padStart(7)}  ${s.status === 0 ? 'ok' : `FAILED (exit ${s.status})`}`);
  if (totalSeconds !== undefined) lines.push(`${'whole run'.padEnd(width)}  ${String(totalSeconds).padStart(7)}  (${(totalSeconds / 60).toFixed(1)} min)`);
  for (const s of steps) {
    const log = readLog(s.log);
    const counts = log === undefined ? undefined : parseTestOutput(log);
    if (counts === undefined) continue;
    lines.push(`tests of ${s.name}: ${formatCounts(counts)}`);
    for (const r of counts.skipReasons) lines.push(`  skipped ${r.count} × ${r.reason.length > 150 ? `${r.reason.slice(0, 149)}…` : r.reason}`);
  }
  return lines.join('\n');
}

function main(argv: readonly string[]): number {
  const [stepsFile, total] = argv;
  if (stepsFile === undefined) {
    console.error('usage: node dist/scripts/ciSummary.js STEPS_TSV [TOTAL_SECONDS]');
    return 2;
  }
  const steps = parseSteps(readFileSync(stepsFile, 'utf8'), stepsFile);
  const readLog = (file: string): string | undefined => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return undefined;
    }
  };
  console.log(formatSummary(steps, readLog, total === undefined ? undefined : Number(total)));
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.exitCode = main(process.argv.slice(2));
