// The commands that need to write nothing work with HOME and TMPDIR read-only, or missing: version,
// completion, --help, audit, timeline, the demo without its report, and a recover dry run. The
// demo's default report goes to a new temp dir: without one it exits 2 with one line naming TMPDIR
// and what to do instead, never a stack trace. As root (whom a mode does not stop), the CLI runs as
// uid/gid 65534 through setpriv, as test/cli/unprivileged.cli.test.ts does; as anyone else, as
// that user, with HOME and TMPDIR a mode 0555 directory. Nothing is written to either.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { traceLine } from '../../src/trace/traceFile.js';
import { list, node } from '../support/clusterObjects.js';
import { NODEVOL_BIN } from '../support/cliProcess.js';
import { NodeFixture } from '../support/nodeFixture.js';
import { storyOneRuns } from '../support/timelineFixture.js';

const NOBODY = 65534;
const REPO_ROOT = path.resolve(path.dirname(NODEVOL_BIN), '..');
const EXAMPLE = path.join(REPO_ROOT, 'examples', 'node');
const IS_ROOT = process.getuid?.() === 0;
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));
const DRIVER = 'ebs.csi.example.com';

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Why the test cannot run here, or undefined. */
function skipReason(): string | undefined {
  if (!IS_ROOT) return undefined;
  if (SETPRIV === undefined) return 'running as root and setpriv (util-linux) is missing: cannot drop to uid 65534, whom a read-only mode stops';
  const probe = spawnSync(SETPRIV, [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', process.execPath, '-e', `require('fs').accessSync(${JSON.stringify(NODEVOL_BIN)}, 4); require('fs').readdirSync(${JSON.stringify(path.join(REPO_ROOT, 'dist'))})`], { encoding: 'utf8' });
  if (probe.status !== 0) return `uid ${NOBODY} cannot read ${REPO_ROOT} (run from a world-readable checkout, as .ci/run's unprivileged pass does): ${probe.stderr.trim().split('\n')[0] ?? ''}`;
  return undefined;
}

const skip = skipReason();

describe('commands that write nothing, with HOME and TMPDIR read-only or missing', { skip }, () => {
  let base = '';
  let readOnly = '';
  let fx: NodeFixture;
  let socket: Server;
  let trace = '';
  let recoverArgs: string[] = [];

  /** The CLI as the unprivileged user, with only PATH, LANG, HOME and TMPDIR set; its working directory is `cwd`. */
  function nodevol(args: readonly string[], home: string, cwd: string): Run {
    const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', LANG: 'C.UTF-8', HOME: home, TMPDIR: home };
    const argv = [process.execPath, NODEVOL_BIN, ...args];
    const [cmd, ...rest] = IS_ROOT ? [SETPRIV!, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', ...argv] : argv;
    const r = spawnSync(cmd!, rest, { cwd, env, encoding: 'utf8', timeout: 120_000, maxBuffer: 64 * 1024 * 1024 });
    if (r.error !== undefined) throw r.error;
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  before(async () => {
    base = mkdtempSync(path.join(tmpdir(), 'nodevol-rohome-'));
    readOnly = path.join(base, 'home');
    mkdirSync(readOnly);
    chmodSync(readOnly, 0o555);
    trace = path.join(base, 'trace.jsonl');
    writeFileSync(trace, storyOneRuns()[0]!.events.map(traceLine).join(''));

    // A node with one orphaned volume for the recover dry run, and its driver's socket.
    fx = await NodeFixture.create();
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    const sock = path.join(fx.base, 'csi.sock');
    socket = createServer();
    await new Promise<void>((resolve) => socket.listen(sock, resolve));
    const clusterState = path.join(fx.base, 'cluster.json');
    writeFileSync(clusterState, JSON.stringify(list([node('node-1')])));
    recoverArgs = ['recover', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '--cluster-state', clusterState, '--node-name', 'node-1', '--csi-endpoint', `${DRIVER}=unix://${sock}`];
    // Readable (not writable) by the unprivileged user.
    for (const dir of [base, fx.base]) spawnSync('chmod', ['-R', 'a+rX', dir]);
  });
  after(async () => {
    socket.close();
    await fx.cleanup();
    chmodSync(readOnly, 0o755);
    rmSync(base, { recursive: true, force: true });
  });

  for (const kind of ['read-only', 'missing'] as const) {
    const dirOf = (): string => (kind === 'read-only' ? readOnly : path.join(base, 'missing'));
    const cwd = (): string => (kind === 'read-only' ? readOnly : base);

    it(`${kind}: version, completion, --help, audit, timeline, demo --no-html and a recover dry run work`, () => {
      const run = (args: readonly string[]): Run => nodevol(args, dirOf(), cwd());
      const ok = (r: Run, status: number, what: string): void => {
        assert.equal(r.status, status, `${what}: ${r.stderr}`);
        assert.doesNotMatch(r.stderr, /^\s+at /m, `${what}: no stack trace`);
      };
      ok(run(['version']), 0, 'version');
      const completion = run(['completion', 'bash']);
      ok(completion, 0, 'completion');
      assert.match(completion.stdout, /^# nodevol bash completion/);
      ok(run(['--help']), 0, '--help');
      const audit = run(['audit', '--root-dir', path.join(EXAMPLE, 'kubelet'), '--mountinfo', path.join(EXAMPLE, 'mountinfo'), '--mountinfo-root-dir', '/var/lib/kubelet', '-o', 'summary']);
      ok(audit, 1, 'audit');
      assert.match(audit.stdout, /^PROBLEM: 2 orphaned /);
      const timeline = run(['timeline', trace, '-o', 'json']);
      ok(timeline, 0, 'timeline');
      assert.ok((JSON.parse(timeline.stdout) as unknown[]).length === 1);
      const demo = run(['demo', '--no-html']);
      ok(demo, 0, 'demo --no-html');
      assert.match(demo.stdout, /^CSIGlobalMountReconstruction=true: vol-1 unstaged first/m);
      const dry = run(recoverArgs);
      ok(dry, 0, 'recover dry run');
      assert.match(dry.stdout, /would call NodeUnstageVolume volume_id=vol-1 .*\n[\s\S]*Dry run: 1 volume\(s\) planned, nothing changed\./);
      assert.deepEqual(kind === 'read-only' ? readdirSync(readOnly) : [], [], 'nothing written to HOME or TMPDIR');
      assert.ok(!existsSync(path.join(base, 'missing')), 'the missing dir was not created');
    });

    it(`${kind}: demo, whose report goes to a new temp dir, exits 2 with one line naming TMPDIR`, () => {
      const r = nodevol(['demo'], dirOf(), cwd());
      assert.equal(r.status, 2, r.stderr);
      assert.equal(r.stdout, '');
      const dir = dirOf();
      assert.equal(
        r.stderr,
        `nodevol demo: the HTML report: cannot create a temp dir in ${dir} (from TMPDIR): ${kind === 'read-only' ? 'EACCES: permission denied' : 'ENOENT: no such file or directory'}, mkdtemp '${dir}/nodevol-demo-XXXXXX'; set TMPDIR to a writable directory, or pass --html FILE or --no-html\n`,
      );
    });
  }
});
