// kubectl/kubelet conventions of the CLI (docs/reference/README.md): version, completion, an Examples:
// block in every --help, all missing required flags in one message, -v=4, the old/new gate
// name conflict, and the long-running audit (--interval) serving metrics and no verdict after a
// run that could not complete.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { claim, list, node, persistentVolume } from '../support/clusterObjects.js';
import { CliProcess, NODEVOL_BIN } from '../support/cliProcess.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { NodeFixture } from '../support/nodeFixture.js';

function nodevol(args: readonly string[], input?: string): { status: number | null; stdout: string; stderr: string } {
  const env = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  const r = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', timeout: 60_000, env, ...(input !== undefined ? { input } : {}) });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const COMMANDS = ['audit', 'agent', 'mock-driver', 'demo', 'explore', 'recover', 'timeline', 'version', 'completion'];

describe('CLI conventions', () => {
  it('nodevol version prints the package version; -o json for scripts', () => {
    const pkg = JSON.parse(readFileSync(path.resolve(import.meta.dirname, '..', '..', '..', 'package.json'), 'utf8')) as { version: string };
    const t = nodevol(['version']);
    assert.equal(t.status, 0);
    assert.match(t.stdout, new RegExp(`^nodevol v${pkg.version.replace(/\./g, '\\.')}\n`));
    const j = JSON.parse(nodevol(['version', '-o', 'json']).stdout) as { nodevolVersion: string; nodeVersion: string };
    assert.equal(j.nodevolVersion, pkg.version);
    assert.equal(j.nodeVersion, process.version);
  });

  for (const cmd of ['', ...COMMANDS]) {
    it(`${cmd === '' ? 'nodevol' : cmd} --help ends with an Examples: block`, () => {
      const r = nodevol([...(cmd === '' ? [] : [cmd]), '--help']);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /\nExamples:\n {2}# .+\n {2}\S/);
    });
  }

  it('every command registered is covered by the Examples test above', () => {
    const r = nodevol(['--help']);
    const section = r.stdout.slice(r.stdout.indexOf('\nCommands:\n'), r.stdout.indexOf('\n\n', r.stdout.indexOf('\nCommands:\n') + 1));
    const listed = [...section.matchAll(/^ {2}([a-z-]+)(?: \[options\]| <shell>| \S+)?\s{2,}/gm)].map((m) => m[1]).filter((c) => c !== 'help');
    assert.deepEqual([...listed].sort(), [...COMMANDS].sort(), r.stdout);
  });

  it('a reader that goes away ends the process with status 141 and no stack trace (EPIPE)', async () => {
    // The read end of stdout is closed before the child has even started node, so its first
    // write meets EPIPE.
    const child = spawn(process.execPath, [NODEVOL_BIN, 'explore', '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const status = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    assert.equal(status, 141, stderr);
    assert.doesNotMatch(stderr, /EPIPE|Error/);
  });

  it('all missing required flags are named in one message (exit 2)', () => {
    const r = nodevol(['agent']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /error: required options '--root-dir <dir>', '--node-name <name>', '--cluster-dir <dir>' not specified/);
    const one = nodevol(['agent', '--root-dir', '/x', '--cluster-dir', '/y']);
    assert.match(one.stderr, /error: required option '--node-name <name>' not specified/);
  });

  it('-v=4 is accepted as klog accepts it; -v=x is not', async () => {
    const fx = await NodeFixture.create();
    try {
      const mountinfo = await fx.writeMountInfo();
      assert.equal(nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '-v=4']).status, 0);
      const bad = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '-v=x']);
      assert.equal(bad.status, 2);
      assert.match(bad.stderr, /must be a non-negative integer/);
    } finally {
      await fx.cleanup();
    }
  });

  it('the old and the new gate name with different values is an error (exit 2), not a silent off', async () => {
    const fx = await NodeFixture.create();
    try {
      const mountinfo = await fx.writeMountInfo();
      const r = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '--feature-gates', 'CSIGlobalMountReconstruction=true,VolumeReconstructionFallback=false']);
      assert.equal(r.status, 2);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /VolumeReconstructionFallback=false contradicts CSIGlobalMountReconstruction=true/);
    } finally {
      await fx.cleanup();
    }
  });

  it('completion bash is valid bash and completes commands, flags and -o values', () => {
    const script = nodevol(['completion', 'bash']).stdout;
    const complete = (words: string[]): string[] => {
      const prog = `${script}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _nodevol; printf '%s\\n' "\${COMPREPLY[@]}"`;
      const r = spawnSync('bash', ['-c', prog], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.split('\n').filter((l) => l !== '');
    };
    assert.deepEqual(complete(['nodevol', 're']), ['recover']);
    assert.ok(complete(['nodevol', 'audit', '--clu']).includes('--cluster-state'));
    assert.deepEqual(complete(['nodevol', 'audit', '-o', 'w']), ['wide']);
    assert.deepEqual(complete(['nodevol', 'completion', '']), ['bash', 'zsh', '--help']);
  });

  it('completion zsh names every command and flag; an unknown shell exits 2', () => {
    const z = nodevol(['completion', 'zsh']);
    assert.equal(z.status, 0);
    assert.match(z.stdout, /^#compdef nodevol\n/);
    for (const c of COMMANDS) assert.ok(z.stdout.includes(`'${c}:`), c);
    assert.ok(z.stdout.includes("'--output[output format]:value:(table wide json yaml prom summary)'"), z.stdout);
    const bad = nodevol(['completion', 'fish']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /fish/);
  });
});

describe('nodevol audit --interval (long-running, Prometheus)', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('serves gauges per verdict and driver and the cluster findings; after a failed run no verdict is served', async () => {
    await fx.stage({ driver: 'ebs.csi.example.com', handle: 'vol-1', specVolID: 'pv-1' });
    const mountinfo = await fx.writeMountInfo();
    const clusterFile = path.join(fx.base, 'cluster.json');
    const name = 'kubernetes.io/csi/ebs.csi.example.com^vol-1';
    await writeFile(clusterFile, JSON.stringify(list([node('node-1', { volumesAttached: [name] }), persistentVolume('pv-1', 'ebs.csi.example.com', 'vol-1'), claim('c', 'pv-1')])));
    const p = CliProcess.start(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '--cluster-state', clusterFile, '--node-name', 'node-1', '--interval', '1s', '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json']);
    try {
      const address = String((await p.logged('Audit serving metrics'))['address']);
      assert.match(address, /^127\.0\.0\.1:\d+$/);
      const metrics = async (): Promise<string[]> => (await (await fetch(`http://${address}/metrics`)).text()).split('\n');
      const first = await waitFor(async () => ((await metrics()).includes('nodevol_audit_last_run_success 1') ? metrics() : false), { what: 'a completed run', timeoutMs: 15_000 });
      for (const want of [
        'nodevol_audit_driver_volumes{driver="ebs.csi.example.com",verdict="orphaned"} 1',
        'nodevol_audit_volumes{verdict="orphaned"} 1',
        'nodevol_audit_cluster_findings{finding="at-risk",driver="ebs.csi.example.com"} 1',
        'nodevol_audit_cluster_findings{finding="pod-gone",driver=""} 0',
      ]) {
        assert.ok(first.includes(want), `${want} missing:\n${first.join('\n')}`);
      }
      assert.equal((await fetch(`http://${address}/healthz`)).status, 200);

      // The cluster's view disappears: the next run cannot complete, and no verdict is served.
      await rm(clusterFile);
      const failed = await waitFor(async () => ((await metrics()).includes('nodevol_audit_last_run_success 0') ? metrics() : false), { what: 'a failed run', timeoutMs: 15_000 });
      assert.ok(!failed.some((l) => l.startsWith('nodevol_audit_volumes') || l.startsWith('nodevol_audit_cluster_findings')), failed.join('\n'));
    } finally {
      assert.deepEqual(await p.stop(), { code: 0, signal: null });
    }
  });

  it('an invalid --interval or --metrics-bind-address exits 2', async () => {
    const mountinfo = await fx.writeMountInfo();
    for (const [flag, value, want] of [['--interval', '5x', /invalid duration/], ['--interval', '10ms', /at least 1s/], ['--metrics-bind-address', 'nope', /invalid bind address/]] as const) {
      const r = nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, ...(flag === '--interval' ? [] : ['--interval', '1m']), flag, value]);
      assert.equal(r.status, 2, `${flag} ${value}: ${r.stderr}`);
      assert.match(r.stderr, want);
    }
  });
});
