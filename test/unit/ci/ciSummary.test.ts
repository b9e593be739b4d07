// The summary at the end of .ci/run (scripts/ciSummary.ts): each step's time as .ci/run measured
// it, and the counts of every test run, skipped suites included (node's own counts leave them,
// and the tests inside them, out).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { formatCounts, formatSummary, parseSteps, parseTestOutput } from '../../../scripts/ciSummary.js';

const NO_CHROMIUM = "no Chromium found (looked for /usr/bin/chromium, /usr/bin/chromium-browser, /usr/bin/chromium-headless-shell, /usr/bin/google-chrome; install Debian's chromium or set CHROME_PATH)";
const NO_IMAGE = 'no image: .ci/image builds one (node dist/scripts/image.js) and runs this file with NODEVOL_IMAGE_LAYOUT set';

/**
 * Recorded: the head, a failure and the end of `npm test` as root without chromium (a run of
 * 1,870 tests), cut to the lines that matter. Four suites did not run; node says `skipped 0`.
 */
const RECORDED_ROOT_RUN = `
> nodevol@0.1.0 test
> npm run build && node --test --test-reporter=spec $(find dist/test -name '*.test.js' | sort)

bundle: 712 KiB in dist/bundle/cli/main.cjs
bundle: code cache 412 KiB in dist/bundle/cli/main.cjs.cache
﹣ timeline report in headless Chromium (0.86646ms) # ${NO_CHROMIUM}
﹣ nodevol demo report in headless Chromium (0.125058ms) # ${NO_CHROMIUM}
﹣ nodevol demo report: the first screen at 1600×1000 (0.140587ms) # ${NO_CHROMIUM}
▶ nodevol agent --trace
  ✔ a clean stop writes the stop line; a kill -9 is recorded as a restart by the next life; timeline draws the lives (1643.201918ms)
✔ nodevol agent --trace (1662.723122ms)
▶ nodevol mock-driver flags (the built CLI)
  ✖ --help exits 0 and names every flag and exit code (321.787007ms)
    AssertionError [ERR_ASSERTION]: The input did not match the regular expression /Exit codes:\\n {2}0 .*\\n {2}2 .*\\n {2}3 /. Input:
  ✔ a missing required flag or a bad endpoint exits 2 without starting (971.069296ms)
✖ nodevol mock-driver flags (the built CLI) (1293.498626ms)
﹣ the image, run by runc (1.267064ms) # ${NO_IMAGE}
▶ timeline report in a browser
  ℹ screenshot: /tmp/nodevol-timeline-P3kIPk/story1.png; load took 202 ms
✔ volume_manager_total_volumes (62.192653ms)
ℹ tests 1870
ℹ suites 357
ℹ pass 1869
ℹ fail 1
ℹ cancelled 0
ℹ skipped 0
ℹ todo 0
ℹ duration_ms 484409.613262

✖ failing tests:

test at dist/test/unit/mockdriver/mockDriver.test.js:581:5
✖ --help exits 0 and names every flag and exit code (321.787007ms)
`;

/** Recorded from node 20's spec reporter: a skipped suite, a skipped test with and without a reason, a todo. */
const RECORDED_SMALL_RUN = `﹣ suite skipped (0.947227ms) # needs root
▶ suite run
  ✔ t ok (0.645672ms)
  ﹣ t skip (0.200914ms) # no chromium
  ✔ t todo (0.228897ms) # TODO
✔ suite run (1.712188ms)
﹣ top skipped (0.144355ms) # SKIP
ℹ tests 4
ℹ suites 2
ℹ pass 1
ℹ fail 0
ℹ cancelled 0
ℹ skipped 2
ℹ todo 1
ℹ duration_ms 285.738061
`;

describe('ciSummary: the counts of a test run', () => {
  it('counts the skipped suites node leaves out: a recorded root run without chromium, node saying "skipped 0"', () => {
    const c = parseTestOutput(RECORDED_ROOT_RUN);
    assert.deepEqual(c, {
      tests: 1870,
      suites: 357,
      passed: 1869,
      failed: 1,
      cancelled: 0,
      skippedTests: 0,
      skippedSuites: 4,
      todo: 0,
      skipReasons: [
        { reason: NO_CHROMIUM, count: 3 },
        { reason: NO_IMAGE, count: 1 },
      ],
    });
    assert.equal(formatCounts(c), '1869 passed, 1 failed, 0 tests skipped, 4 suites skipped (their tests not run, in no count); 1870 tests in 357 suites counted');
  });

  it('tells skipped tests (in node\'s count) from skipped suites (not in it)', () => {
    const c = parseTestOutput(RECORDED_SMALL_RUN);
    assert.ok(c !== undefined);
    assert.equal(c.skippedTests, 2);
    assert.equal(c.skippedSuites, 1);
    assert.equal(c.todo, 1);
    assert.deepEqual(c.skipReasons, [
      { reason: 'SKIP', count: 1 },
      { reason: 'needs root', count: 1 },
      { reason: 'no chromium', count: 1 },
    ]);
    assert.equal(formatCounts(c), '1 passed, 0 failed, 2 tests skipped, 1 suite skipped (their tests not run, in no count), 1 todo; 4 tests in 2 suites counted');
  });

  it('reads the same counts through a terminal\'s colour codes and CRLF line ends', () => {
    const coloured = RECORDED_SMALL_RUN.split('\n')
      .map((l) => (l.startsWith('﹣') ? `\u001b[90m${l}\u001b[39m` : l.startsWith('ℹ') ? `\u001b[34m${l}\u001b[39m` : l))
      .join('\r\n');
    assert.deepEqual(parseTestOutput(coloured), parseTestOutput(RECORDED_SMALL_RUN));
  });

  it('of two runs in one output, gives the last one\'s, its skip lines only', () => {
    const c = parseTestOutput(RECORDED_ROOT_RUN + RECORDED_SMALL_RUN);
    assert.deepEqual(c, parseTestOutput(RECORDED_SMALL_RUN));
  });

  it('gives nothing for a step that ran no tests, or ended before node printed its counts', () => {
    assert.equal(parseTestOutput('> nodevol@0.1.0 typecheck\n> tsc -p tsconfig.json --noEmit\n'), undefined);
    assert.equal(parseTestOutput(RECORDED_SMALL_RUN.slice(0, RECORDED_SMALL_RUN.indexOf('ℹ pass'))), undefined);
  });

  it('parses what this node\'s test runner prints now (skipped suites, nested and top-level, and skipped tests)', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nodevol-ci-summary-'));
    try {
      const file = path.join(dir, 'sample.test.mjs');
      writeFileSync(
        file,
        `import { describe, it } from 'node:test';
describe('root only', { skip: 'needs root' }, () => { it('a', () => {}); it('b', () => {}); });
describe('outer', () => {
  describe('inner, no chromium', { skip: 'no chromium' }, () => { it('c', () => {}); });
  it('runs', () => {});
  it('skipped test', { skip: 'no promtool' }, () => {});
  it('fails', () => { throw new Error('expected'); });
});
it('top-level skipped test', { skip: true }, () => {});
`,
      );
      const env = { ...process.env };
      delete env['NODE_TEST_CONTEXT']; // a runner of its own, not a child reporting to this one
      const run = spawnSync(process.execPath, ['--test', '--test-reporter=spec', file], { encoding: 'utf8', env, cwd: dir, timeout: 60_000 });
      assert.equal(run.status, 1, run.stderr);
      const c = parseTestOutput(run.stdout);
      assert.ok(c !== undefined, run.stdout);
      assert.equal(c.passed, 1);
      assert.equal(c.failed, 1);
      assert.equal(c.skippedTests, 2, run.stdout);
      assert.equal(c.skippedSuites, 2, run.stdout);
      assert.deepEqual(
        c.skipReasons.map((r) => r.reason).sort(),
        ['SKIP', 'needs root', 'no chromium', 'no promtool'],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('ciSummary: the table of steps', () => {
  const STEPS = 'npm ci\t41\t0\t/ci/1.log\ntypecheck\t19\t0\t/ci/2.log\nnpm test\t486\t1\t/ci/3.log\n';

  it('prints step → seconds as .ci/run measured them, the whole run, a failed step, then each test step\'s counts', () => {
    const logs: Record<string, string> = { '/ci/1.log': 'added 435 packages in 33s\n', '/ci/2.log': '', '/ci/3.log': RECORDED_ROOT_RUN };
    const text = formatSummary(parseSteps(STEPS), (f) => logs[f], 940);
    assert.equal(
      text,
      [
        '== CI summary',
        'step       seconds  result',
        'npm ci          41  ok',
        'typecheck       19  ok',
        'npm test       486  FAILED (exit 1)',
        'whole run      940  (15.7 min)',
        'tests of npm test: 1869 passed, 1 failed, 0 tests skipped, 4 suites skipped (their tests not run, in no count); 1870 tests in 357 suites counted',
        `  skipped 3 × ${NO_CHROMIUM.slice(0, 149)}…`,
        `  skipped 1 × ${NO_IMAGE}`,
      ].join('\n'),
    );
  });

  it('a log that cannot be read leaves that step\'s counts out, not the table', () => {
    const text = formatSummary(parseSteps(STEPS), () => undefined);
    assert.equal(text.split('\n').length, 5);
    assert.match(text, /^npm test {7}486 {2}FAILED \(exit 1\)$/m);
  });

  it('a malformed line of the steps file is an error naming the file and line', () => {
    assert.throws(() => parseSteps('npm ci\t41\t0\t/ci/1.log\nnpm test\tlong\t0\t/ci/3.log\n', '/ci/steps.tsv'), /^Error: \/ci\/steps\.tsv:2: expected "name<TAB>seconds<TAB>status<TAB>log", got "npm test\\tlong\\t0\\t\/ci\/3\.log"$/);
  });
});
