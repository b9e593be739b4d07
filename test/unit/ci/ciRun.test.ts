// The steps of .ci/run (.ci/steps.sh), run by bash as .ci/run runs them: progress lines while a
// step runs, each step's time and exit status, a log per step, and the summary at the end, also
// after a failed step.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');

describe('.ci/steps.sh: the steps of .ci/run', () => {
  it('prints progress while a step runs, times every step, stops at a failed one and still prints the summary', () => {
    assert.ok(existsSync(path.join(REPO_ROOT, 'dist', 'scripts', 'ciSummary.js')), 'run npm run build first');
    const dir = mkdtempSync(path.join(tmpdir(), 'nodevol-ci-run-'));
    try {
      const out = path.join(dir, 'out');
      const logs = path.join(dir, 'logs');
      // The slow step ends once its first progress line is out (bounded by the spawn's timeout);
      // its pattern does not match its own command line, which the step prints first.
      const script = `
set -euo pipefail
source .ci/steps.sh
half() { echo before; false; echo after; }
step "quick" echo hello
step "slow one" bash -c 'until grep -q "still[ ]running" "$OUT"; do sleep 0.05; done; echo saw the progress line'
step "a function" half
step "never" echo never
`;
      const fd = openSync(out, 'w');
      let run;
      try {
        run = spawnSync('bash', ['-c', script], {
          cwd: REPO_ROOT,
          stdio: ['ignore', fd, fd],
          env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', OUT: out, NODEVOL_CI_LOGS: logs, NODEVOL_CI_PROGRESS_SECONDS: '1' },
          timeout: 60_000,
        });
      } finally {
        closeSync(fd);
      }
      const text = readFileSync(out, 'utf8');
      assert.equal(run.status, 1, text);
      assert.match(text, /^== step 1, quick: echo hello\nhello\n== step 1, quick: \d+ s, exit 0$/m);
      assert.match(text, /^== step 2, slow one: still running after [1-9]\d* s \(0 lines of output; the last: \)$/m);
      // The ticker may print another progress line before the step's end stops it (a loaded machine).
      assert.match(text, /^saw the progress line\n(?:== step 2, slow one: still running after \d+ s \(\d+ lines of output; the last: [^\n]*\)\n)*== step 2, slow one: [1-9]\d* s, exit 0$/m);
      // A function runs under set -e: it stops at its first failure.
      assert.match(text, /^before\n== step 3, a function: \d+ s, exit 1$/m);
      assert.doesNotMatch(text, /^after$|never/m);
      // The summary, by scripts/ciSummary.ts.
      assert.match(text, /^== CI summary\nstep {8}seconds {2}result\nquick {6} +\d+ {2}ok\nslow one {3} +[1-9]\d* {2}ok\na function  +\d+ {2}FAILED \(exit 1\)\nwhole run  +\d+ {2}\(\d+\.\d min\)$/m);
      assert.match(text, new RegExp(`^== each step's output: ${logs}\n== CI FAILED \\(exit 1\\)\n$`, 'm'));
      // Each step's output in its own log; one line per step that ran in steps.tsv.
      const steps = readFileSync(path.join(logs, 'steps.tsv'), 'utf8').trim().split('\n').map((l) => l.split('\t'));
      assert.deepEqual(steps.map((s) => [s[0], s[2]]), [['quick', '0'], ['slow one', '0'], ['a function', '1']]);
      assert.equal(readFileSync(steps[0]?.[3] ?? '', 'utf8'), 'hello\n');
      assert.equal(readFileSync(steps[2]?.[3] ?? '', 'utf8'), 'before\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('starts its progress ticker with stderr closed off, and the ticker its sleep with no output at all', () => {
    // A step of no time stops its ticker right after forking it. Stopped before its trap is set,
    // the ticker dies of bash's own TERM handling, and bash 5.2 printed "wait_for: No record of
    // process N" into the step's output (seen in about 1 step of 150 on a loaded machine). The
    // ticker's stderr is /dev/null from its fork on, so there is nowhere to print it. A sleep
    // left running by a stop between its fork and the trap's `kill` holds no pipe of the run.
    // The step finds the ticker (the shell's child with a sleep of its own, not the step's own
    // subshell) and reads where the two processes' descriptors point.
    const script = `
set -euo pipefail
source .ci/steps.sh
trap - EXIT
main=$$
look() {
  local c g
  while :; do
    for c in $(cat /proc/$main/task/$main/children); do
      [ "$c" != "$BASHPID" ] || continue
      for g in $(cat /proc/$c/task/$c/children 2>/dev/null); do
        if [ "$(cat /proc/$g/comm 2>/dev/null)" = sleep ]; then
          echo "ticker stderr: $(readlink /proc/$c/fd/2)"
          echo "sleep stdin, stdout, stderr: $(readlink /proc/$g/fd/0) $(readlink /proc/$g/fd/1) $(readlink /proc/$g/fd/2)"
          return 0
        fi
      done
    done
  done
}
step "look" look
`;
    const dir = mkdtempSync(path.join(tmpdir(), 'nodevol-ci-ticker-'));
    try {
      const run = spawnSync('bash', ['-c', script], {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', NODEVOL_CI_LOGS: dir, NODEVOL_CI_PROGRESS_SECONDS: '60' },
        timeout: 60_000,
      });
      assert.equal(run.status, 0, run.stdout + run.stderr);
      assert.match(run.stdout, /^ticker stderr: \/dev\/null\nsleep stdin, stdout, stderr: \/dev\/null \/dev\/null \/dev\/null$/m);
      assert.equal(run.stderr, '');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
