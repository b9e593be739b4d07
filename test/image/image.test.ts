// The image scripts/image.ts builds, run as a container (docs/operating.md, "Deploying it"): unpacked by umoci into an
// OCI runtime bundle and run by runc (Debian's packages), with every capability dropped, no new
// privileges and a read-only root filesystem, as the DaemonSet runs it. `.ci/image` builds the
// image and runs this file with NODEVOL_IMAGE_LAYOUT=<the OCI layout dir>; without it (npm test)
// the tests skip and say so.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { renderKustomization, type KubeObject } from '../support/kustomize.js';
import { waitFor } from '../support/e2e/waitFor.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const EXAMPLE = path.join(REPO_ROOT, 'examples', 'node');
const LAYOUT = process.env['NODEVOL_IMAGE_LAYOUT'] ?? '';
const TAG = process.env['NODEVOL_IMAGE_TAG'] ?? (JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

function skipReason(): string | undefined {
  if (LAYOUT === '') return 'no image: .ci/image builds one (node dist/scripts/image.js) and runs this file with NODEVOL_IMAGE_LAYOUT set';
  if (process.getuid?.() !== 0) return `runc needs root: running as uid ${String(process.getuid?.())}`;
  for (const tool of ['runc', 'umoci']) if (spawnSync(tool, ['--version']).status !== 0) return `${tool} is not installed (Debian package ${tool})`;
  return undefined;
}

interface Mount {
  readonly source: string;
  readonly destination: string;
  readonly readOnly: boolean;
}
interface RunOptions {
  readonly rootfs?: string;
  readonly args: readonly string[];
  readonly mounts?: readonly Mount[];
  readonly env?: Readonly<Record<string, string>>;
  readonly uid?: number;
  readonly hostNetwork?: boolean;
}
interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface OciSpec {
  root: { path: string; readonly?: boolean };
  process: { args: string[]; env: string[]; cwd: string; terminal: boolean; user: { uid: number; gid: number }; noNewPrivileges?: boolean; capabilities?: Record<string, string[]> };
  mounts: { destination: string; type: string; source: string; options: string[] }[];
  linux: { namespaces: { type: string }[] };
}

let work = '';
let template: OciSpec | undefined;
let imageRootfs = '';
let runs = 0;

/** A runtime bundle for one run: the image's spec with this run's process, mounts and rootfs. */
function bundleFor(o: RunOptions): { dir: string; id: string } {
  assert.ok(template !== undefined);
  const spec = structuredClone(template);
  const id = `nodevol-image-test-${process.pid}-${++runs}`;
  const dir = path.join(work, id);
  mkdirSync(dir);
  spec.root = { path: o.rootfs ?? imageRootfs, readonly: true };
  spec.process.args = [...o.args];
  spec.process.env = ['PATH=/opt/nodevol/runtime:/usr/local/bin:/usr/bin:/bin', ...Object.entries(o.env ?? {}).map(([k, v]) => `${k}=${v}`)];
  spec.process.terminal = false;
  spec.process.cwd = '/';
  spec.process.user = { uid: o.uid ?? 0, gid: o.uid ?? 0 };
  // As the DaemonSet: every capability dropped, no privilege escalation.
  spec.process.noNewPrivileges = true;
  spec.process.capabilities = { bounding: [], effective: [], inheritable: [], permitted: [], ambient: [] };
  for (const m of o.mounts ?? []) spec.mounts.push({ destination: m.destination, type: 'bind', source: m.source, options: ['rbind', m.readOnly ? 'ro' : 'rw'] });
  if (o.hostNetwork === true) spec.linux.namespaces = spec.linux.namespaces.filter((n) => n.type !== 'network');
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify(spec));
  return { dir, id };
}

function runContainer(o: RunOptions): Run {
  const { dir, id } = bundleFor(o);
  const r = spawnSync('runc', ['run', '--bundle', dir, id], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 * 1024 * 1024 });
  if (r.error !== undefined) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const EXAMPLE_MOUNTS: readonly Mount[] = [
  { source: path.join(EXAMPLE, 'kubelet'), destination: '/var/lib/kubelet', readOnly: true },
  { source: path.join(EXAMPLE, 'mountinfo'), destination: '/host/proc/1/mountinfo', readOnly: true },
];

/** The same audit on this host, for comparison: the example's mount table names /var/lib/kubelet. */
function hostAudit(output: string): Run {
  const r = spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'nodevol.js'), 'audit', '--root-dir', path.join(EXAMPLE, 'kubelet'), '--mountinfo', path.join(EXAMPLE, 'mountinfo'), '--mountinfo-root-dir', '/var/lib/kubelet', '-o', output], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const blob = (digest: string): Buffer => readFileSync(path.join(LAYOUT, 'blobs', 'sha256', digest.replace(/^sha256:/, '')));
const podSpec = (objects: readonly KubeObject[], name: string): { containers: Container[]; initContainers?: Container[] } => {
  const ds = objects.find((o) => o.kind === 'DaemonSet' && o.metadata.name === name) as { spec: { template: { spec: { containers: Container[]; initContainers?: Container[] } } } } | undefined;
  assert.ok(ds !== undefined, `no DaemonSet ${name}`);
  return ds.spec.template.spec;
};
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string }[];
}

describe('the image, run by runc', { skip: skipReason() }, () => {
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'nodevol-image-test-'));
    const unpacked = path.join(work, 'unpacked');
    execFileSync('umoci', ['unpack', '--image', `${LAYOUT}:${TAG}`, unpacked], { stdio: 'pipe' });
    template = JSON.parse(readFileSync(path.join(unpacked, 'config.json'), 'utf8')) as OciSpec;
    imageRootfs = path.join(unpacked, 'rootfs');
  });
  after(() => {
    rmSync(work, { recursive: true, force: true });
  });

  it('holds the pinned node, the bundle with its code cache, scenarios/ and the runtime dependencies only; no shell', () => {
    const index = JSON.parse(readFileSync(path.join(LAYOUT, 'index.json'), 'utf8')) as { manifests: { digest: string; annotations: Record<string, string> }[] };
    assert.equal(index.manifests[0]?.annotations['org.opencontainers.image.ref.name'], TAG);
    const manifest = JSON.parse(blob(index.manifests[0].digest).toString()) as { config: { digest: string }; layers: { digest: string }[] };
    const config = JSON.parse(blob(manifest.config.digest).toString()) as { config: { Entrypoint: string[]; User: string; Labels: Record<string, string> } };
    assert.deepEqual(config.config.Entrypoint, ['/opt/nodevol/runtime/node', '/opt/nodevol/bin/nodevol.js']);
    assert.equal(config.config.User, '0:0');
    const node = readFileSync(path.join(imageRootfs, 'opt/nodevol/runtime/node'));
    assert.match(config.config.Labels['io.nodevol.node'] ?? '', new RegExp(`sha256:${createHash('sha256').update(node).digest('hex')}$`));
    assert.match(config.config.Labels['io.nodevol.debian-packages'] ?? '', /^libc6=\S+ libgcc-s1=\S+ libstdc\+\+6=\S+$/);
    for (const f of ['opt/nodevol/dist/bundle/cli/main.cjs', 'opt/nodevol/dist/bundle/cli/main.cjs.cache', 'opt/nodevol/scenarios/kep-story-1.yaml', 'opt/nodevol/proto/csi/v1/csi.proto', 'opt/nodevol/package.json']) {
      assert.ok(existsSync(path.join(imageRootfs, f)), f);
    }
    for (const f of ['bin/sh', 'usr/bin/env', 'opt/nodevol/dist/src', 'opt/nodevol/src', 'opt/nodevol/test']) assert.ok(!existsSync(path.join(imageRootfs, f)), `${f} is in the image`);
    const deps = Object.keys((JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies);
    const modules = readdirSync(path.join(imageRootfs, 'opt/nodevol/node_modules'));
    for (const d of deps) assert.ok(modules.includes(d.split('/')[0]!), `${d} missing`);
    for (const dev of ['typescript', 'esbuild', 'eslint', 'kubernetes-models', 'fast-check', 'puppeteer-core']) assert.ok(!modules.includes(dev), `devDependency ${dev} in the image`);
    assert.ok(!existsSync(path.join(imageRootfs, 'opt/nodevol/node_modules/@kubernetes/client-node')));
  });

  it('V8 accepts the bundle\'s code cache with the image\'s node', () => {
    const check = [
      "const fs = require('node:fs'), vm = require('node:vm');",
      "const file = '/opt/nodevol/dist/bundle/cli/main.cjs';",
      "const source = fs.readFileSync(file, 'utf8');",
      'const header = /^\\/\\/ nodevol bundle \\S+\\n/.exec(source)[0];',
      "const cache = fs.readFileSync(file + '.cache');",
      "if (cache.subarray(0, header.length).toString('latin1') !== header) { console.log('stale'); process.exit(1); }",
      "const s = new vm.Script('(function (exports, require, module, __filename, __dirname, __nodevolImport) {\\n' + source + '\\n})', { filename: file, lineOffset: -1, cachedData: cache.subarray(header.length) });",
      "console.log(s.cachedDataRejected ? 'rejected' : 'accepted');",
    ].join('\n');
    const r = runContainer({ args: ['/opt/nodevol/runtime/node', '-e', check] });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'accepted\n');
  });

  it('code compiled from the code cache is named by the bundle\'s path in the image, not by the builder\'s', () => {
    // V8 keeps the file name a cache was recorded under (scripts/codeCache.ts): a stack trace through
    // the bundle names it. The bundle runs with a require that throws at its first call: the frame below
    // the probe's is the bundle's.
    const probe = [
      "const fs = require('node:fs'), vm = require('node:vm');",
      "const file = '/opt/nodevol/dist/bundle/cli/main.cjs';",
      "const source = fs.readFileSync(file, 'utf8');",
      'const header = /^\\/\\/ nodevol bundle \\S+\\n/.exec(source)[0];',
      "const cache = fs.readFileSync(file + '.cache').subarray(header.length);",
      "const s = new vm.Script('(function (exports, require, module, __filename, __dirname, __nodevolImport) {\\n' + source + '\\n})', { filename: file, lineOffset: -1, cachedData: cache });",
      "try { s.runInThisContext()({}, () => { throw new Error('probe'); }, { exports: {} }, file, '/opt/nodevol/dist/bundle/cli', undefined); } catch (err) { console.log(err.stack.split('\\n').find((l) => l.includes('main.cjs')).trim()); }",
    ].join('\n');
    const r = runContainer({ args: ['/opt/nodevol/runtime/node', '-e', probe] });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^at \/opt\/nodevol\/dist\/bundle\/cli\/main\.cjs:\d+:\d+\n$/);
  });

  it('audits examples/node mounted read-only: the same report as on the host', () => {
    const inImage = runContainer({ args: ['/opt/nodevol/runtime/node', '/opt/nodevol/bin/nodevol.js', 'audit', '--mountinfo', '/host/proc/1/mountinfo', '-o', 'json'], mounts: EXAMPLE_MOUNTS });
    const onHost = hostAudit('json');
    assert.equal(inImage.status, 1, inImage.stderr);
    assert.equal(onHost.status, 1, onHost.stderr);
    interface Report {
      volumes: { uniqueName: string; verdict: string; withGate?: string }[];
      failed: unknown[];
      summary: unknown;
    }
    const a = JSON.parse(inImage.stdout) as Report;
    const b = JSON.parse(onHost.stdout) as Report;
    assert.deepEqual(a.summary, b.summary);
    assert.deepEqual(a.volumes.map((v) => [v.uniqueName, v.verdict]), b.volumes.map((v) => [v.uniqueName, v.verdict]));
    assert.deepEqual(a.volumes.map((v) => v.verdict).sort(), ['orphaned', 'orphaned', 'tracked']);
  });

  it('the audit DaemonSet\'s container, as deploy/base renders it, serves the findings and stops on SIGTERM', async () => {
    const c = podSpec(renderKustomization(path.join(REPO_ROOT, 'deploy', 'base')), 'nodevol-audit').containers[0]!;
    const env = new Map((c.env ?? []).map((e) => [e.name, e.value ?? '']));
    env.set('POD_IP', '127.0.0.1');
    env.set('NODE_NAME', 'node-1');
    const args = (c.args ?? []).map((a) => a.replace(/\$\((\w+)\)/g, (all, n: string) => env.get(n) ?? all)).map((a) => a.replace(/^--metrics-bind-address=127\.0\.0\.1:\d+$/, '--metrics-bind-address=127.0.0.1:0'));
    const { dir, id } = bundleFor({ args: ['/opt/nodevol/runtime/node', '/opt/nodevol/bin/nodevol.js', ...args], mounts: EXAMPLE_MOUNTS, env: Object.fromEntries(env), hostNetwork: true });
    const child = spawn('runc', ['run', '--bundle', dir, id], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const address = await waitFor(() => {
        for (const line of stderr.split('\n')) {
          try {
            const j = JSON.parse(line) as { msg?: string; address?: string };
            if (j.msg === 'Audit serving metrics' && j.address !== undefined && stderr.includes('"Audit finished"')) return j.address;
          } catch {
            // not a JSON line yet
          }
        }
        return undefined;
      }, { timeoutMs: 60_000, what: 'the audit serving metrics in the container' });
      const metrics = await (await fetch(`http://${address}/metrics`)).text();
      assert.ok(metrics.split('\n').includes('nodevol_audit_driver_volumes{driver="ebs.csi.aws.com",verdict="orphaned"} 2'), metrics);
      assert.equal((await fetch(`http://${address}/healthz`)).status, 200);
    } finally {
      spawnSync('runc', ['kill', id, 'TERM']);
    }
    assert.equal(await exited, 0, stderr);
  });

  it('node-problem-detector: the init container\'s copy runs the plugin\'s command in a root filesystem holding nothing else', () => {
    const pod = podSpec(renderKustomization(path.join(REPO_ROOT, 'deploy', 'npd')), 'nodevol-npd');
    const init = pod.initContainers?.[0];
    assert.ok(init?.command !== undefined);
    const copy = path.join(work, 'npd-emptydir');
    mkdirSync(copy);
    const installed = runContainer({ args: init.command, mounts: [{ source: copy, destination: '/nodevol', readOnly: false }] });
    assert.equal(installed.status, 0, installed.stderr);

    const rule = (JSON.parse(readFileSync(path.join(REPO_ROOT, 'deploy', 'npd', 'nodevol-audit-plugin.json'), 'utf8')) as { pluginConfig: { max_output_length: number }; rules: { path: string; args: string[] }[] });
    const empty = path.join(work, 'npd-rootfs');
    mkdirSync(empty);
    const npdMounts: Mount[] = [{ source: copy, destination: '/nodevol', readOnly: true }];
    const problem = runContainer({ rootfs: empty, args: [rule.rules[0]!.path, ...rule.rules[0]!.args], mounts: [...npdMounts, ...EXAMPLE_MOUNTS] });
    assert.equal(problem.status, 1, problem.stderr);
    assert.equal(problem.stdout, hostAudit('summary').stdout);
    assert.match(problem.stdout, /^PROBLEM: 2 orphaned \(ebs\.csi\.aws\.com\^vol-0a1b2c3d4e5f60002, ebs\.csi\.aws\.com\^vol-0a1b2c3d4e5f60003\)/);
    assert.ok(problem.stdout.length <= rule.pluginConfig.max_output_length);
    // No host /proc mounted: exit 2, and the reason on stdout for NPD's message. (A new empty
    // root: runc left the mount points of the run above in the first one.)
    const empty2 = path.join(work, 'npd-rootfs-2');
    mkdirSync(empty2);
    const unknown = runContainer({ rootfs: empty2, args: [rule.rules[0]!.path, ...rule.rules[0]!.args], mounts: [...npdMounts, EXAMPLE_MOUNTS[0]!] });
    assert.equal(unknown.status, 2, unknown.stderr);
    assert.match(unknown.stdout, /^UNKNOWN: --mountinfo \/host\/proc\/1\/mountinfo: [^\n]*ENOENT[^\n]*\n$/);
  });

  it('nodevol demo and explore run in the image as uid 65534', () => {
    const demo = runContainer({ args: ['/opt/nodevol/runtime/node', '/opt/nodevol/bin/nodevol.js', 'demo', '--no-html'], uid: 65534 });
    assert.equal(demo.status, 0, demo.stderr);
    assert.match(demo.stdout, /^CSIGlobalMountReconstruction=true: vol-1 unstaged first, then dropped from volumesInUse: safe; no\s+invariant violated\.$/m);
    const explore = runContainer({ args: ['/opt/nodevol/runtime/node', '/opt/nodevol/bin/nodevol.js', 'explore', '--scenario', 'kep-story-1', '--crash', 'restart'], uid: 65534 });
    assert.equal(explore.status, 1, explore.stderr);
    assert.match(explore.stdout, /^in-use-reported /m);
  });
});
