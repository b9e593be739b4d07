// Every command that needs no root works for any user: `nodevol demo` once failed for
// everyone but root with `open /var/lib/kubelet/.keep: EACCES`. As root, this test runs the built
// CLI as uid/gid 65534 (`setpriv`, its own HOME and working directory); as any other user it runs
// it as that user (the unprivileged CI run of .ci/run, where nothing is root).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { NODEVOL_BIN } from '../support/cliProcess.js';

const NOBODY = 65534;
const REPO_ROOT = path.resolve(path.dirname(NODEVOL_BIN), '..');
const EXAMPLE = path.join(REPO_ROOT, 'examples', 'node');
const IS_ROOT = process.getuid?.() === 0;
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** As root: runs `argv` as uid/gid 65534 with no supplementary group; otherwise as ourselves. */
function asUnprivileged(argv: readonly string[], home: string): Run {
  const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8' };
  const [cmd, ...args] = IS_ROOT
    ? [SETPRIV!, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', ...argv]
    : argv;
  const r = spawnSync(cmd!, args, { cwd: home, env, encoding: 'utf8', timeout: 120_000, maxBuffer: 256 * 1024 * 1024 });
  if (r.error !== undefined) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const nodevol = (args: readonly string[], home: string): Run => asUnprivileged([process.execPath, NODEVOL_BIN, ...args], home);

/** Why the test cannot run here, or undefined. */
function skipReason(): string | undefined {
  if (!IS_ROOT) return undefined;
  if (SETPRIV === undefined) return 'running as root and setpriv (util-linux) is missing: cannot drop to uid 65534';
  const probe = spawnSync(SETPRIV, [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', process.execPath, '-e', `require('fs').accessSync(${JSON.stringify(NODEVOL_BIN)}, 4); require('fs').readdirSync(${JSON.stringify(path.join(REPO_ROOT, 'dist'))})`], { encoding: 'utf8' });
  if (probe.status !== 0) return `uid ${NOBODY} cannot read ${REPO_ROOT} (run from a world-readable checkout, as .ci/run's unprivileged pass does): ${probe.stderr.trim().split('\n')[0] ?? ''}`;
  return undefined;
}

const skip = skipReason();

describe(`commands that need no root, as ${IS_ROOT ? `uid ${NOBODY}` : `uid ${String(process.getuid?.())} (not root)`}`, { skip }, () => {
  let home = '';
  before(() => {
    home = mkdtempSync(path.join(tmpdir(), 'nodevol-unprivileged-'));
    if (IS_ROOT) chownSync(home, NOBODY, NOBODY);
  });
  after(() => {
    rmSync(home, { recursive: true, force: true });
  });

  it('nodevol demo plays both runs and writes its report to a new temp dir, not the working directory', () => {
    const r = nodevol(['demo'], home);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr, '');
    assert.ok(!existsSync(path.join(home, 'nodevol-demo.html')));
    assert.match(r.stdout, /^CSIGlobalMountReconstruction=false: vol-1 dropped from volumesInUse while staged → another node may\s+attach it; violated in-use-reported, converges\.$/m);
    assert.match(r.stdout, /^CSIGlobalMountReconstruction=true: vol-1 unstaged first, then dropped from volumesInUse: safe; no\s+invariant violated\.$/m);
    const file = /The timeline report is in (\S+):\s+open it/.exec(r.stdout)?.[1];
    assert.ok(file !== undefined && path.basename(file) === 'nodevol-demo.html', r.stdout);
    try {
      const report = statSync(file);
      assert.ok(report.size > 0);
      if (IS_ROOT) assert.equal(report.uid, NOBODY, 'written by the unprivileged user');
    } finally {
      rmSync(path.dirname(file), { recursive: true, force: true });
    }
  });

  it('nodevol explore finds the same violations as for any other user (the simulator does not depend on who runs it)', () => {
    const args = ['explore', '--scenario', 'kep-story-1', '--crash', 'restart', '-o', 'json'];
    const r = nodevol(args, home);
    assert.equal(r.status, 1, r.stderr);
    const mine = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', timeout: 120_000, maxBuffer: 256 * 1024 * 1024 });
    assert.equal(mine.status, 1, mine.stderr);
    interface Report {
      runs: number;
      crashPoints: number;
      states: number;
      violations: { invariant: string; plan: string; message: string }[];
    }
    const strip = (text: string): unknown => {
      const j = JSON.parse(text) as Report;
      return { runs: j.runs, crashPoints: j.crashPoints, states: j.states, violations: j.violations.map((v) => [v.invariant, v.plan, v.message]) };
    };
    const theirs = strip(r.stdout);
    assert.deepEqual(theirs, strip(mine.stdout));
    assert.deepEqual((JSON.parse(r.stdout) as Report).violations.map((v) => v.invariant).sort(), ['converges', 'in-use-reported']);
  });

  it('nodevol audit reads a world-readable root dir and mount table (examples/node)', () => {
    const r = nodevol(['audit', '--root-dir', path.join(EXAMPLE, 'kubelet'), '--mountinfo', path.join(EXAMPLE, 'mountinfo'), '-o', 'summary'], home);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stdout, /^PROBLEM: 2 orphaned /);
  });

  it('nodevol version and --help', () => {
    const v = nodevol(['version'], home);
    assert.equal(v.status, 0, v.stderr);
    assert.match(v.stdout, /\d+\.\d+\.\d+/);
    const h = nodevol(['--help'], home);
    assert.equal(h.status, 0, h.stderr);
    assert.match(h.stdout, /^Usage: nodevol/);
  });
});
