// The built `nodevol` CLI as a process: help, exit codes, the three output formats, flag errors
// and the klog text / JSON logging on stderr.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { NodeFixture } from '../support/nodeFixture.js';

// This file runs from dist/test/cli/: the repo root is three levels up.
const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');
const DRIVER = 'ebs.csi.example.com';

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function nodevol(args: readonly string[]): Run {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Colour must depend on the TTY alone in these tests.
  delete env['NO_COLOR'];
  delete env['FORCE_COLOR'];
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env, timeout: 60_000 });
  if (r.error !== undefined) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function stderrLines(r: Run): string[] {
  return r.stderr.split('\n').filter((l) => l !== '');
}

const FLAGS = ['--root-dir', '--mountinfo', '--feature-gates', '-o', '-v', '--logging-format'];
/** The documented `-o json` keys (docs/reference/audit.md), in document order. */
const TOP_LEVEL_KEYS = ['rootDir', 'featureGates', 'volumes', 'failed', 'skipped', 'undescribed', 'summary', 'mountTableProblems', 'timestamp'];
const VOLUME_KEYS = ['uniqueName', 'driver', 'volumeHandle', 'specName', 'mode', 'lifecycle', 'pods', 'global', 'verdict', 'verdictWithGate', 'reasons'];

describe('nodevol CLI: help', () => {
  it('the built launcher exists where the tests expect it', () => {
    const r = nodevol(['--version']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^\d+\.\d+\.\d+\n$/);
  });

  it('--help exits 0, names the audit command and the exit codes', () => {
    const r = nodevol(['--help']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^Usage: nodevol /);
    assert.match(r.stdout, /\n {2}audit /);
    assert.match(r.stdout, /Exit codes: 0 ok; 1 [\s\S]*?;\s+2\s+could\s+not\s+run/);
  });

  it('audit --help exits 0 and names every flag and every exit code', () => {
    const r = nodevol(['audit', '--help']);
    assert.equal(r.status, 0, r.stderr);
    for (const flag of FLAGS) assert.ok(new RegExp(`(^|[ ,])${flag}[ ,]`, 'm').test(r.stdout), `${flag} missing from:\n${r.stdout}`);
    assert.match(r.stdout, /Exit codes/);
    for (const code of ['0', '1', '2']) assert.match(r.stdout, new RegExp(`^ {2}${code} {2}\\S`, 'm'));
  });

  it('help audit prints the same as audit --help', () => {
    const a = nodevol(['help', 'audit']);
    const b = nodevol(['audit', '--help']);
    assert.equal(a.status, 0);
    assert.equal(a.stdout, b.stdout);
  });
});

describe('nodevol audit as a process', () => {
  let fx: NodeFixture;
  let mountinfo: string;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  /** Story 1: a staged volume no pod directory names. */
  async function story1(): Promise<void> {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    mountinfo = await fx.writeMountInfo();
  }
  const audit = (...extra: string[]): Run => nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, ...extra]);

  for (const gateOn of [false, true]) {
    it(`-o json on story 1 exits ${gateOn ? 0 : 1} with the gate ${gateOn ? 'on' : 'off'} and prints the documented shape`, async () => {
      await story1();
      const r = audit('-o', 'json', ...(gateOn ? ['--feature-gates', 'CSIGlobalMountReconstruction=true'] : []));
      assert.equal(r.status, gateOn ? 0 : 1, r.stderr);
      assert.equal(r.stderr, '');
      const report = JSON.parse(r.stdout) as Record<string, unknown>;
      assert.deepEqual(Object.keys(report), TOP_LEVEL_KEYS);
      assert.equal(report['rootDir'], fx.root);
      assert.equal((report['featureGates'] as Record<string, boolean>)['CSIGlobalMountReconstruction'], gateOn);
      assert.deepEqual(report['failed'], []);
      assert.deepEqual(report['skipped'], []);
      assert.deepEqual(report['mountTableProblems'], []);
      assert.ok(!Number.isNaN(Date.parse(report['timestamp'] as string)), String(report['timestamp']));
      const volumes = report['volumes'] as Record<string, unknown>[];
      assert.equal(volumes.length, 1);
      const v = volumes[0]!;
      assert.deepEqual(Object.keys(v), VOLUME_KEYS);
      assert.equal(v['uniqueName'], `kubernetes.io/csi/${DRIVER}^vol-1`);
      assert.equal(v['verdict'], gateOn ? 'recovered' : 'orphaned');
      assert.equal(v['verdictWithGate'], 'recovered');
      assert.deepEqual(v['global'], { deviceMountPath: fx.layout.csiDeviceMountPath(DRIVER, 'vol-1'), mounted: true, hasSpecVolID: true });
      assert.deepEqual(report['summary'], {
        volumes: 1,
        tracked: 0,
        recovered: gateOn ? 1 : 0,
        orphaned: gateOn ? 0 : 1,
        failed: 0,
        skipped: 0,
        undescribed: 0,
      });
    });
  }

  for (const gateOn of [false, true]) {
    it(`a mounted globalmount whose vol_data.json is missing exits 1 and says so in every format (gate ${gateOn ? 'on' : 'off'})`, async () => {
      const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', file: 'absent' });
      mountinfo = await fx.writeMountInfo();
      const gates = gateOn ? ['--feature-gates', 'CSIGlobalMountReconstruction=true'] : [];
      const t = audit(...gates);
      assert.equal(t.status, 1, t.stderr);
      assert.ok(!t.stdout.includes('No CSI volumes found.'), t.stdout);
      assert.ok(t.stdout.startsWith(`UNDESCRIBED (mounted global mounts no vol_data.json describes: no kubelet rebuilds or unstages them)\n  unreadable-vol-data: ${gm}: `), t.stdout);
      assert.match(t.stdout, /; 1 undescribed\n$/);
      const j = audit('-o', 'json', ...gates);
      assert.equal(j.status, 1);
      const report = JSON.parse(j.stdout) as { undescribed: { deviceMountPath: string; reason: string }[]; summary: { undescribed: number } };
      assert.deepEqual(report.undescribed.map((u) => [u.deviceMountPath, u.reason]), [[gm, 'unreadable-vol-data']]);
      assert.equal(report.summary.undescribed, 1);
      const s = audit('-o', 'summary', ...gates);
      assert.equal(s.status, 1);
      // The line is whole when it fits node-problem-detector's 200 bytes; a long temp dir (CI runs
      // the unprivileged pass under one) cuts the path, never the count.
      const whole = `PROBLEM: 1 undescribed global mount(s) (${gm})\n`;
      if (Buffer.byteLength(whole) <= 201) {
        assert.equal(s.stdout, whole);
      } else {
        const cut = /^PROBLEM: 1 undescribed global mount\(s\) \((.+)…\)\n$/.exec(s.stdout);
        assert.ok(cut !== null && gm.startsWith(cut[1]!), s.stdout);
        assert.ok(Buffer.byteLength(s.stdout) <= 201 && Buffer.byteLength(s.stdout) >= 195, s.stdout);
      }
      const p = audit('-o', 'prom', ...gates);
      assert.equal(p.status, 1);
      assert.ok(p.stdout.split('\n').includes('nodevol_audit_undescribed_global_mounts{reason="unreadable-vol-data"} 1'), p.stdout);
    });
  }

  it('-o json larger than a pipe holds arrives whole: the launcher ends the process only after its output is written', async () => {
    const n = 400;
    for (let i = 0; i < n; i++) await fx.stage({ driver: DRIVER, handle: `vol-${i}`, specVolID: `pv-${i}` });
    mountinfo = await fx.writeMountInfo();
    const r = audit('-o', 'json');
    assert.equal(r.status, 1, r.stderr);
    assert.ok(Buffer.byteLength(r.stdout) > 3 * 65_536, `${Buffer.byteLength(r.stdout)} bytes`);
    assert.ok(r.stdout.endsWith('}\n'));
    const report = JSON.parse(r.stdout) as { volumes: unknown[]; summary: { orphaned: number } };
    assert.equal(report.volumes.length, n);
    assert.equal(report.summary.orphaned, n);
  });

  it('-o prom on story 1 prints the volume gauge by verdict and the last-run timestamp', async () => {
    await story1();
    const before = Date.now() / 1000;
    const r = audit('-o', 'prom');
    assert.equal(r.status, 1, r.stderr);
    const lines = r.stdout.split('\n');
    assert.ok(lines.includes('nodevol_audit_volumes{verdict="orphaned"} 1'), r.stdout);
    assert.ok(lines.includes('nodevol_audit_volumes{verdict="recovered"} 0'), r.stdout);
    assert.ok(lines.includes(`nodevol_audit_orphaned_global_mounts{driver="${DRIVER}"} 1`), r.stdout);
    assert.ok(lines.includes('nodevol_audit_feature_gate{name="CSIGlobalMountReconstruction"} 0'), r.stdout);
    const ts = lines.find((l) => l.startsWith('nodevol_audit_last_run_timestamp_seconds '));
    assert.ok(ts, r.stdout);
    const seconds = Number(ts.split(' ')[1]);
    assert.ok(seconds >= Math.floor(before) && seconds <= Date.now() / 1000 + 1, ts);
  });

  it('-o table names the verdict and has no ANSI escapes when stdout is not a TTY', async () => {
    await story1();
    const r = audit('-o', 'table');
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stdout, /^VERDICT +WITH-GATE +DRIVER/);
    assert.match(r.stdout, /\norphaned +recovered +ebs\.csi\.example\.com +vol-1 /);
    assert.ok(!r.stdout.includes('\u001b'), JSON.stringify(r.stdout));
    assert.ok(!r.stderr.includes('\u001b'), JSON.stringify(r.stderr));
  });

  it('no volume: no header row and nothing on stdout, "No resources found" on stderr, as kubectl get prints it (table, wide, --no-headers)', async () => {
    await mkdir(path.join(fx.root, 'pods'), { recursive: true });
    await mkdir(fx.layout.csiPluginDir(), { recursive: true });
    mountinfo = await fx.writeMountInfo();
    for (const extra of [[], ['-o', 'wide'], ['--no-headers']]) {
      const r = audit(...extra);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, '', extra.join(' '));
      assert.equal(r.stderr, 'No resources found\n', extra.join(' '));
    }
    // json and yaml print the (empty) report itself, and nothing on stderr.
    const j = audit('-o', 'json');
    assert.equal(j.stderr, '');
    assert.deepEqual((JSON.parse(j.stdout) as { volumes: unknown[] }).volumes, []);
  });

  it('one volume is "1 volume:" in the summary line', async () => {
    await story1();
    const r = audit();
    assert.match(r.stdout, /\n1 volume: 0 tracked, 0 recovered, 1 orphaned; /);
    assert.doesNotMatch(r.stdout, /volumes:/);
  });

  it('a failed reconstruction names its directory once, over two lines under 200 characters', async () => {
    // Story 2: the pod-local vol_data.json lost, the bind mount still there.
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-2', specVolID: 'pv-2' });
    const dir = await fx.podVolume({ uid: 'uid-2', specName: 'pv-2', driver: DRIVER, handle: 'vol-2', boundFrom: gm, file: 'absent' });
    mountinfo = await fx.writeMountInfo();
    const r = audit();
    assert.equal(r.status, 1, r.stderr);
    const section = r.stdout.slice(r.stdout.indexOf('FAILED RECONSTRUCTION\n'));
    const [title, first, second] = section.split('\n');
    assert.equal(title, 'FAILED RECONSTRUCTION');
    assert.equal(first, `  ${dir}`);
    assert.match(second ?? '', /^ {4}\S.*vol_data\.json.*ENOENT/);
    assert.equal(section.split(dir).length - 1, 1, section);
    for (const line of [first, second]) assert.ok((line ?? '').length < 200, `${(line ?? '').length}: ${line}`);
    // -o json keeps kubelet's whole error.
    const j = JSON.parse(audit('-o', 'json').stdout) as { failed: { error: string }[] };
    assert.match(j.failed[0]?.error ?? '', /^could not construct volume information for pod uid-2 volume "pv-2" \(/);
  });

  it('the default output is the table', async () => {
    await story1();
    assert.equal(audit().stdout, audit('-o', 'table').stdout);
  });

  it('an unknown feature gate exits 2 naming it', async () => {
    await story1();
    const r = audit('--feature-gates', 'Foo=true');
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /unrecognized feature gate: Foo/);
  });

  it('a feature gate without a value exits 2', async () => {
    await story1();
    const r = audit('--feature-gates', 'CSIGlobalMountReconstruction');
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /missing bool value for CSIGlobalMountReconstruction/);
  });

  it('the deprecated gate name VolumeReconstructionFallback turns the gate on, with a warning', async () => {
    await story1();
    const r = audit('-o', 'json', '--feature-gates', 'VolumeReconstructionFallback=true');
    assert.equal(r.status, 0, r.stderr);
    const report = JSON.parse(r.stdout) as { featureGates: Record<string, boolean> };
    assert.equal(report.featureGates['CSIGlobalMountReconstruction'], true);
    const lines = stderrLines(r);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, /^W\d{4} /);
    assert.match(lines[0]!, /VolumeReconstructionFallback is deprecated/);
  });

  it('an unknown -o format exits 2 naming it', async () => {
    await story1();
    const r = audit('-o', 'xml');
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /xml/);
  });

  it('a missing root dir exits 2 naming it', async () => {
    await story1();
    const missing = path.join(fx.base, 'no-such-root');
    const r = nodevol(['audit', '--root-dir', missing, '--mountinfo', mountinfo]);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.ok(r.stderr.includes(missing), r.stderr);
    // One line, pointing at the flag and at something that works without a node.
    const lines = stderrLines(r);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0] ?? '', /does not exist: pass this node's kubelet root dir; with no node, try nodevol demo or the example node \(README\.md\)$/);
    // A message, not a paragraph: under 200 characters but for the path it names.
    assert.ok((lines[0] ?? '').length - missing.length < 200 - '/var/lib/kubelet'.length, lines[0]);
  });

  for (const [what, make] of [
    ['missing', (): Promise<string> => Promise.resolve(path.join(fx.base, 'no-such-mountinfo'))],
    [
      'a directory',
      async (): Promise<string> => {
        const dir = path.join(fx.base, 'mountinfo-dir');
        await mkdir(dir);
        return dir;
      },
    ],
  ] as const) {
    it(`an unreadable --mountinfo (${what}) exits 2 naming it`, async () => {
      await story1();
      const bad = await make();
      const r = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', bad]);
      assert.equal(r.status, 2);
      assert.equal(r.stdout, '');
      assert.ok(r.stderr.includes(bad), r.stderr);
    });
  }

  it('a mount table with a bad line still audits, and warns about the line', async () => {
    await story1();
    const text = `${fx.mountInfo()}999 22 8:1 / /broken\n`;
    await writeFile(mountinfo, text);
    const r = audit('-o', 'json');
    assert.equal(r.status, 1, r.stderr);
    const report = JSON.parse(r.stdout) as { mountTableProblems: { line: number; error: string }[] };
    assert.deepEqual(report.mountTableProblems.map((p) => p.line), [3]);
    assert.match(r.stderr, /^W\d{4} .*Mount table line could not be parsed/m);
  });

  /** Story 1 plus a staged directory with no vol_data.json: the listing skips it, at V(4). */
  async function withSkippedDir(): Promise<string> {
    await fx.stage({ driver: DRIVER, handle: 'vol-broken', file: 'absent' });
    await story1();
    return fx.layout.csiVolumeDir(DRIVER, 'vol-broken');
  }

  it('-v 4 --logging-format json: every stderr line is a JSON object with ts, caller and msg, and the skip is logged', async () => {
    const skippedDir = await withSkippedDir();
    const r = audit('-o', 'json', '-v', '4', '--logging-format', 'json');
    assert.equal(r.status, 1, r.stderr);
    const lines = stderrLines(r);
    assert.ok(lines.length > 0);
    const records = lines.map((l) => {
      const rec = JSON.parse(l) as Record<string, unknown>;
      assert.equal(typeof rec['ts'], 'number', l);
      assert.match(String(rec['caller']), /^[^ ]+:\d+$/, l);
      assert.equal(typeof rec['msg'], 'string', l);
      return rec;
    });
    const skip = records.find((rec) => rec['msg'] === 'Skipping a CSI global directory');
    assert.ok(skip, r.stderr);
    assert.equal(skip['v'], 4);
    assert.equal(skip['path'], skippedDir);
    assert.equal(skip['reason'], 'unreadable-vol-data');
    // stdout stays pure JSON.
    assert.doesNotThrow(() => JSON.parse(r.stdout));
  });

  it('-v 4 in text: every stderr line has the klog header, and the skip is logged', async () => {
    const skippedDir = await withSkippedDir();
    const r = audit('-v', '4');
    assert.equal(r.status, 1, r.stderr);
    const lines = stderrLines(r);
    assert.ok(lines.length > 0);
    for (const l of lines) assert.match(l, /^[IWE]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [^ ]+:\d+\] "/);
    const skip = lines.find((l) => l.includes('"Skipping a CSI global directory"'));
    assert.ok(skip, r.stderr);
    assert.match(skip, /^I/);
    assert.ok(skip.includes(`path=${JSON.stringify(skippedDir)}`), skip);
  });

  it('without -v nothing is logged for a skipped dir', async () => {
    await withSkippedDir();
    const r = audit('-o', 'json');
    assert.equal(r.status, 1);
    assert.equal(r.stderr, '');
  });
});

describe('nodevol CLI: the shipped example node (examples/node)', () => {
  const ROOT = path.join(REPO_ROOT, 'examples', 'node', 'kubelet');
  const MOUNTINFO = path.join(REPO_ROOT, 'examples', 'node', 'mountinfo');
  const example = (...extra: string[]): Run =>
    nodevol(['audit', '--root-dir', ROOT, '--mountinfo', MOUNTINFO, '--mountinfo-root-dir', '/var/lib/kubelet', '-o', 'json', ...extra]);
  const verdicts = (r: Run): Record<string, [string, string, boolean | undefined]> => {
    const report = JSON.parse(r.stdout) as { volumes: { volumeHandle: string; verdict: string; verdictWithGate: string; global: { mounted: boolean } | null }[] };
    return Object.fromEntries(report.volumes.map((v) => [v.volumeHandle, [v.verdict, v.verdictWithGate, v.global?.mounted]]));
  };

  it('gate off: one volume tracked, the drained one and the one with a lost pod-local file orphaned (exit 1), all mounted', () => {
    const r = example();
    assert.equal(r.status, 1, r.stderr);
    assert.deepEqual(verdicts(r), {
      'vol-0a1b2c3d4e5f60001': ['tracked', 'tracked', true],
      'vol-0a1b2c3d4e5f60002': ['orphaned', 'recovered', true],
      'vol-0a1b2c3d4e5f60003': ['orphaned', 'recovered', true],
    });
  });

  it('gate on: both are recovered, the lost file through the pod-local fallback (exit 0)', () => {
    const r = example('--feature-gates', 'CSIGlobalMountReconstruction=true');
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(verdicts(r), {
      'vol-0a1b2c3d4e5f60001': ['tracked', 'tracked', true],
      'vol-0a1b2c3d4e5f60002': ['recovered', 'recovered', true],
      'vol-0a1b2c3d4e5f60003': ['recovered', 'recovered', true],
    });
    const report = JSON.parse(r.stdout) as { volumes: { volumeHandle: string; pods: { dataSource: string }[] }[] };
    const lost = report.volumes.find((v) => v.volumeHandle === 'vol-0a1b2c3d4e5f60003');
    assert.deepEqual(lost?.pods.map((p) => p.dataSource), ['global-fallback']);
  });

  it('without --mountinfo-root-dir nothing matches: every volume reads not mounted, and a warning names the flag', () => {
    const r = nodevol(['audit', '--root-dir', ROOT, '--mountinfo', MOUNTINFO, '-o', 'json']);
    assert.equal(r.status, 1, r.stderr);
    assert.deepEqual(
      Object.values(verdicts(r)).map((v) => v[2]),
      [false, false, false],
    );
    assert.match(r.stderr, /^W.*The mount table names no mount under the root dir.*--mountinfo-root-dir/m);
    const msg = /"(The mount table names no mount[^"]*)"/.exec(r.stderr)?.[1] ?? '';
    assert.ok(msg.length > 0 && msg.length < 200, `${msg.length}: ${msg}`);
  });
});
