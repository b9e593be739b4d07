// Alerts that fire: `nodevol audit -o prom` says so when the audit cannot run (exit 2):
// `nodevol_audit_last_run_success 0` and why (`nodevol_audit_last_run_failure_info{reason}`, a
// fixed set of reasons), never an empty output and never a verdict. `--output-file` replaces its
// file atomically (a reader sees the old or the new content, whole), so node_exporter's textfile
// collector never reads an empty file and the cron recipe is one line. The long-running audit
// serves the same failure. Each output passes `promtool check metrics` where promtool is installed.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { promisify } from 'node:util';

import { AUDIT_FAILURE_REASONS } from '../../src/cli/auditFailure.js';
import { CliProcess, NODEVOL_BIN } from '../support/cliProcess.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { NodeFixture } from '../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function env(): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env };
  delete e['KUBERNETES_SERVICE_HOST'];
  return e;
}

function nodevol(args: readonly string[]): Run {
  const r = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', env: env(), timeout: 60_000 });
  if (r.error !== undefined) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
const noPromtool = promtool.status === 0 ? undefined : 'promtool is not installed (Debian package prometheus; .ci/run installs it): the exposition is not linted here';

/** promtool's lint of a Prometheus text exposition: its complaints (none when clean). */
function promtoolLint(text: string): string {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return `${r.stdout}${r.stderr}`.trim();
}

/** The series lines of an exposition, without comments. */
const series = (text: string): string[] => text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));

/** What every failure exposition is: success 0, the reason, a timestamp, nothing else. */
function assertFailure(text: string, reason: string, what: string): void {
  const names = series(text).map((l) => l.replace(/[{ ].*$/, '')).sort();
  assert.deepEqual(names, ['nodevol_audit_last_run_failure_info', 'nodevol_audit_last_run_success', 'nodevol_audit_last_run_timestamp_seconds'], `${what}:\n${text}`);
  assert.ok(series(text).includes('nodevol_audit_last_run_success 0'), `${what}:\n${text}`);
  assert.ok(series(text).includes(`nodevol_audit_last_run_failure_info{reason="${reason}"} 1`), `${what}:\n${text}`);
  const ts = Number(series(text).find((l) => l.startsWith('nodevol_audit_last_run_timestamp_seconds '))?.split(' ')[1]);
  assert.ok(Math.abs(ts - Date.now() / 1000) < 120, `${what}: timestamp ${ts}`);
}

describe('nodevol audit -o prom when the audit cannot run', () => {
  let fx: NodeFixture;
  let mountinfo: string;
  beforeEach(async () => {
    fx = await NodeFixture.create();
    mountinfo = await fx.writeMountInfo();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  /** A root dir whose pods/ and CSI plugin dir are symlinks out of it: neither is read. */
  async function hostileRoot(): Promise<string> {
    const outside = path.join(fx.base, 'outside');
    const hostile = path.join(fx.base, 'hostile-root');
    await mkdir(outside, { recursive: true });
    await mkdir(path.join(hostile, 'plugins', 'kubernetes.io'), { recursive: true });
    await symlink(outside, path.join(hostile, 'pods'));
    await symlink(outside, path.join(hostile, 'plugins', 'kubernetes.io', 'csi'));
    return hostile;
  }

  /** One command line per failure reason, each as an operator could get it wrong. */
  async function failingArgs(): Promise<Record<string, string[]>> {
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeFile(kubeconfig, 'not: [a kubeconfig');
    return {
      flags: ['--root-dir', fx.root, '--mountinfo', mountinfo, '--feature-gates', 'NoSuchGate=true'],
      'root-dir': ['--root-dir', path.join(fx.root, 'nope'), '--mountinfo', mountinfo],
      mountinfo: ['--root-dir', fx.root, '--mountinfo', path.join(fx.base, 'no-mountinfo')],
      'cluster-state': ['--root-dir', fx.root, '--mountinfo', mountinfo, '--cluster-state', path.join(fx.base, 'no-cluster.json'), '--node-name', 'node-1'],
      'cluster-api': ['--root-dir', fx.root, '--mountinfo', mountinfo, '--kubeconfig', kubeconfig, '--node-name', 'node-1'],
      'nothing-read': ['--root-dir', await hostileRoot(), '--mountinfo', mountinfo],
    };
  }

  it('every failure reason: exit 2, success 0 and the reason on stdout, no verdict, its line on stderr', async () => {
    const cases = await failingArgs();
    assert.deepEqual(Object.keys(cases).sort(), [...AUDIT_FAILURE_REASONS].sort(), 'one case per reason');
    for (const [reason, args] of Object.entries(cases)) {
      const r = nodevol(['audit', ...args, '-o', 'prom']);
      assert.equal(r.status, 2, `${reason}: ${r.stderr}`);
      assertFailure(r.stdout, reason, reason);
      assert.match(r.stderr, /^nodevol audit: /m, reason);
    }
  });

  it('a healthy run still prints success 1 and no failure reason', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const r = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '-o', 'prom']);
    assert.equal(r.status, 1, r.stderr);
    assert.ok(series(r.stdout).includes('nodevol_audit_last_run_success 1'), r.stdout);
    assert.ok(!r.stdout.includes('nodevol_audit_last_run_failure_info'), r.stdout);
  });

  it('promtool check metrics accepts the output of a run, of a failed run and of a run against the cluster', { skip: noPromtool }, async () => {
    const cases = await failingArgs();
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const ok = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '-o', 'prom']);
    for (const [what, text] of [['a run', ok.stdout], ...Object.entries(cases).map(([reason, args]) => [reason, nodevol(['audit', ...args, '-o', 'prom']).stdout])] as const) {
      assert.equal(promtoolLint(text), '', `${what}:\n${text}`);
    }
    // It can fail: a counter without _total is one of its complaints.
    assert.match(promtoolLint('# HELP x_count a\n# TYPE x_count counter\nx_count 1\n'), /_total/);
  });
});

describe('nodevol audit -o prom --output-file', () => {
  let fx: NodeFixture;
  let dir: string;
  let file: string;
  beforeEach(async () => {
    fx = await NodeFixture.create();
    dir = path.join(fx.base, 'textfile');
    await mkdir(dir);
    file = path.join(dir, 'nodevol.prom');
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('writes what stdout would get, nothing on stdout, the exit code kept, no temp file left, mode 0644', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const mountinfo = await fx.writeMountInfo();
    const r = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '-o', 'prom', '--output-file', file]);
    assert.equal(r.status, 1, r.stderr);
    assert.equal(r.stdout, '');
    const text = readFileSync(file, 'utf8');
    const stdout = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '-o', 'prom']).stdout;
    const noTs = (t: string): string[] => series(t).filter((l) => !l.startsWith('nodevol_audit_last_run_timestamp_seconds'));
    assert.deepEqual(noTs(text), noTs(stdout));
    assert.ok(series(text).includes('nodevol_audit_last_run_success 1'));
    assert.deepEqual(readdirSync(dir), ['nodevol.prom']);
    // 0644 less the umask: never more than that, always the owner's read and write.
    const mode = statSync(file).mode & 0o777;
    assert.equal(mode & ~0o644, 0, mode.toString(8));
    assert.equal(mode & 0o600, 0o600, mode.toString(8));
  });

  it('a failed run replaces the last verdict with success 0 (the old recipe published an empty file)', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const mountinfo = await fx.writeMountInfo();
    assert.equal(nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '-o', 'prom', '--output-file', file]).status, 1);
    const inode = statSync(file).ino;
    const r = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', path.join(fx.base, 'gone'), '-o', 'prom', '--output-file', file]);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assertFailure(readFileSync(file, 'utf8'), 'mountinfo', 'the file after a failed run');
    assert.notEqual(statSync(file).ino, inode, 'replaced by a rename, not rewritten in place');
    assert.deepEqual(readdirSync(dir), ['nodevol.prom']);
  });

  it('a reader never sees an empty or partial file while runs succeed and fail in turn', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const mountinfo = await fx.writeMountInfo();
    assert.equal(nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '-o', 'prom', '--output-file', file]).status, 1);
    const run = promisify(execFile);
    let done = false;
    let reads = 0;
    const seen = new Set<string>();
    const reader = (async (): Promise<void> => {
      while (!done) {
        const text = await readFile(file, 'utf8');
        assert.ok(text.endsWith('\n') && text.includes('nodevol_audit_last_run_success '), `read ${reads}: ${JSON.stringify(text)}`);
        seen.add(series(text).find((l) => l.startsWith('nodevol_audit_last_run_success ')) ?? '');
        reads++;
        await new Promise((r) => setImmediate(r));
      }
    })();
    try {
      for (let i = 0; i < 8; i++) {
        const info = i % 2 === 0 ? path.join(fx.base, 'gone') : mountinfo;
        await run(process.execPath, [NODEVOL_BIN, 'audit', '--root-dir', fx.root, '--mountinfo', info, '-o', 'prom', '--output-file', file], { env: env() }).catch((err: unknown) => {
          const code = (err as { code?: unknown }).code;
          assert.ok(code === 1 || code === 2, String(err));
        });
      }
    } finally {
      done = true;
      await reader;
    }
    assert.ok(reads > 8, `${reads} reads`);
    assert.deepEqual([...seen].sort(), ['nodevol_audit_last_run_success 0', 'nodevol_audit_last_run_success 1']);
    assert.deepEqual(readdirSync(dir), ['nodevol.prom']);
  });

  it('a symlink at the file\'s name is replaced, never followed', async () => {
    const outside = path.join(fx.base, 'outside.prom');
    await writeFile(outside, 'untouched\n');
    await symlink(outside, file);
    const r = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '-o', 'prom', '--output-file', file]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(readFileSync(outside, 'utf8'), 'untouched\n');
    assert.ok(statSync(file).isFile());
    assert.ok(series(readFileSync(file, 'utf8')).includes('nodevol_audit_last_run_success 1'));
  });

  it('refused, exit 2, file untouched: another format, --interval, a missing directory', async () => {
    const mountinfo = await fx.writeMountInfo();
    await writeFile(file, 'previous\n');
    for (const [extra, want] of [
      [['-o', 'json'], /-o json: --output-file is for -o prom/],
      [['-o', 'prom', '--interval', '1m'], /--interval: --output-file is for a single run/],
    ] as const) {
      const r = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, ...extra, '--output-file', file]);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, want);
      assert.equal(readFileSync(file, 'utf8'), 'previous\n');
    }
    const missing = path.join(fx.base, 'no-such-dir', 'nodevol.prom');
    const r = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '-o', 'prom', '--output-file', missing]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, new RegExp(`^nodevol audit: --output-file ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .*ENOENT`, 'm'));
    assert.equal(existsSync(path.dirname(missing)), false);
  });
});

describe('nodevol audit --interval when nothing can be read', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('serves success 0 and reason nothing-read, no verdict (it served success 1 before)', async () => {
    const outside = path.join(fx.base, 'outside');
    const hostile = path.join(fx.base, 'hostile-root');
    await mkdir(outside);
    await mkdir(path.join(hostile, 'plugins', 'kubernetes.io'), { recursive: true });
    await symlink(outside, path.join(hostile, 'pods'));
    await symlink(outside, path.join(hostile, 'plugins', 'kubernetes.io', 'csi'));
    const p = CliProcess.start(['audit', '--root-dir', hostile, '--mountinfo', await fx.writeMountInfo(), '--interval', '1s', '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json'], env());
    try {
      const address = String((await p.logged('Audit serving metrics'))['address']);
      const failed = await p.logged('Audit could not run; serving no verdict');
      assert.equal(failed['reason'], 'nothing-read');
      const text = await waitFor(async () => {
        const t = await (await fetch(`http://${address}/metrics`)).text();
        return t.includes('nodevol_audit_last_run_failure_info') ? t : false;
      }, { what: 'the failure on /metrics', timeoutMs: 15_000 });
      assertFailure(text, 'nothing-read', '/metrics');
    } finally {
      assert.deepEqual(await p.stop(), { code: 0, signal: null });
    }
  });
});
