// `nodevol recover` as a process: it will not run without the cluster's view, rejects a
// malformed --csi-endpoint, and -o json prints the journal lines of the plan (through the
// --csi-endpoint given, not the conventional socket). Against an API server that answers in
// pages, --yes never unstages a volume that a pod on a later page wants, nor one that two
// PersistentVolumes name (which only the list of every PV shows: recover reads it, where the
// audit reads PVs by name) (a gRPC CSI server here records every call; no mount is involved, so
// no root is needed). On the shipped example node (examples/node with its cluster.json), the
// documented first run prints the page's output (docs/reference/recover.md, README.md): the whole
// plan, the story-2 target included, with a warning per volume for the missing driver; --yes
// refuses both and removes nothing. With --mountinfo-root-dir, --yes tells a real driver the
// node's paths and removes under --root-dir.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:net';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { unixEndpoint } from '../../src/adapters/grpc/endpoint.js';
import { startCsiServer, type CsiServer } from '../../src/adapters/grpc/server.js';
import { claim, list, node, persistentVolume, pod, volumeAttachment } from '../support/clusterObjects.js';
import { NODEVOL_BIN } from '../support/cliProcess.js';
import { fakeApiServer, writeKubeconfig, type FakeApiServer } from '../support/fakeApiServer.js';
import { NodeFixture } from '../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';

// This file runs from dist/test/cli/: the repo root is three levels up.
const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');

function nodevol(args: readonly string[], cwd?: string): { status: number | null; stdout: string; stderr: string } {
  const env = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  const r = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', timeout: 60_000, env, ...(cwd !== undefined ? { cwd } : {}) });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * The documented run of a page: the fenced block whose first line is `$ npx nodevol <args>`
 * starting with `prefix`; its output lines up to `$ echo $?`, and the exit code after it.
 */
function documentedRun(file: string, prefix: string): { args: string[]; command: string; output: string; status: number } {
  const lines = readFileSync(path.join(REPO_ROOT, file), 'utf8').split('\n');
  const start = lines.findIndex((l, i) => l.startsWith(`$ npx nodevol ${prefix}`) && lines[i - 1] === '```');
  assert.ok(start > 0, `${file}: no block starting with "$ npx nodevol ${prefix}"`);
  const end = lines.indexOf('```', start);
  const block = lines.slice(start, end);
  const echo = block.indexOf('$ echo $?');
  assert.ok(echo > 0 && echo === block.length - 2, `${file}: the block ends with "$ echo $?" and the code`);
  const command = block[0]!.slice('$ '.length);
  return {
    command,
    args: command.slice('npx nodevol '.length).split(' '),
    output: `${block.slice(1, echo).join('\n')}\n`,
    status: Number(block[echo + 1]),
  };
}

/** The CLI without blocking this process (the API and CSI servers under test live here). */
function nodevolAsync(args: readonly string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const env = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  return new Promise((resolve) => {
    execFile(process.execPath, [NODEVOL_BIN, ...args], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

describe('nodevol recover (process)', () => {
  let fx: NodeFixture;
  let server: Server | undefined;
  let api: FakeApiServer | undefined;
  let csi: CsiServer | undefined;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    server?.close();
    await api?.close();
    await csi?.close();
    api = undefined;
    csi = undefined;
    await fx.cleanup();
  });

  it('without the cluster\'s view it refuses to run (exit 2) and touches nothing', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const r = nodevol(['recover', '--yes', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo()]);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /the cluster's view is required/);
    assert.ok(existsSync(gm));
  });

  it('a malformed --csi-endpoint exits 2 naming it', () => {
    const r = nodevol(['recover', '--root-dir', fx.root, '--csi-endpoint', 'tcp://1.2.3.4:5']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--csi-endpoint "tcp:\/\/1\.2\.3\.4:5": want DRIVER=unix:\/\/\/abs\/csi\.sock/);
  });

  it('-o json prints the planned journal lines, through the --csi-endpoint given', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    const sock = path.join(fx.base, 'elsewhere.sock');
    server = createServer();
    await new Promise<void>((resolve) => server!.listen(sock, resolve));
    const clusterFile = path.join(fx.base, 'cluster.json');
    await writeFile(clusterFile, JSON.stringify(list([node('node-1')])));
    const r = nodevol(['recover', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '--cluster-state', clusterFile, '--node-name', 'node-1', '--csi-endpoint', `${DRIVER}=unix://${sock}`, '-o', 'json']);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { action: string; outcome: string; endpoint?: string; path?: string });
    assert.deepEqual(lines.map((l) => `${l.action} ${l.outcome}`), ['NodeUnstageVolume planned', 'rmdir planned', 'unlink planned', 'rmdir planned']);
    assert.equal(lines[0]?.endpoint, `unix://${sock}`);
    assert.equal(lines[0]?.path, gm);
    assert.ok(existsSync(gm));
  });

  it('--yes with an API server that answers in pages: a pod on page 2 that wants the volume keeps it (refused, no call)', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    const calls: string[] = [];
    csi = await startCsiServer(unixEndpoint(path.join(fx.base, 'csi.sock')), {
      identity: { probe: () => Promise.resolve({}) },
      node: {
        nodeGetCapabilities: () => Promise.resolve({ capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }] }),
        nodeUnstageVolume: (req) => {
          calls.push(`NodeUnstageVolume ${req.volumeId}`);
          return Promise.resolve({});
        },
        nodeUnpublishVolume: (req) => {
          calls.push(`NodeUnpublishVolume ${req.volumeId}`);
          return Promise.resolve({});
        },
      },
    });
    // After the reboot of story 1: attached, not in volumesInUse; the pod that wants vol-1 is
    // scheduled here again and is the second pod of the list.
    api = await fakeApiServer(
      [
        node('node-1', { volumesAttached: [`kubernetes.io/csi/${DRIVER}^vol-1`], volumesInUse: [] }),
        pod('batch', { nodeName: 'node-1', uid: 'uid-batch' }),
        pod('again', { nodeName: 'node-1', uid: 'uid-again', claims: ['data-1'] }),
        claim('data-1', 'pv-1'),
        persistentVolume('pv-1', DRIVER, 'vol-1', { namespace: 'default', name: 'data-1' }),
        volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-1'),
      ],
      { pageSize: 1 },
    );
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const r = await nodevolAsync(['recover', '--yes', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '--kubeconfig', kubeconfig, '--node-name', 'node-1', '--csi-endpoint', `${DRIVER}=${csi.endpoint}`]);
    assert.deepEqual(calls, [], `a volume a pod wants was unstaged:\n${r.stdout}\n${r.stderr}`);
    assert.equal(r.status, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /refused kubernetes\.io\/csi\/ebs\.csi\.example\.com\^vol-1: .*default\/again/);
    assert.ok(existsSync(gm) && existsSync(path.join(path.dirname(gm), 'vol_data.json')), 'nothing removed');
    assert.ok(api.requests.some((q) => q.path === '/api/v1/pods' && q.query['continue'] === '1'), 'the second page was read');
  });

  it('--yes through the API server: two PersistentVolumes naming the orphaned volume make it refused (recover lists every PV)', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    const calls: string[] = [];
    csi = await startCsiServer(unixEndpoint(path.join(fx.base, 'csi.sock')), {
      identity: { probe: () => Promise.resolve({}) },
      node: {
        nodeGetCapabilities: () => Promise.resolve({ capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }] }),
        nodeUnstageVolume: (req) => {
          calls.push(`NodeUnstageVolume ${req.volumeId}`);
          return Promise.resolve({});
        },
      },
    });
    // Story 1: attached here (its VolumeAttachment names pv-1), out of volumesInUse. Nothing on
    // this node names pv-1-copy: only the list of every PV finds it.
    api = await fakeApiServer(
      [
        node('node-1', { volumesAttached: [`kubernetes.io/csi/${DRIVER}^vol-1`], volumesInUse: [] }),
        persistentVolume('pv-1', DRIVER, 'vol-1'),
        persistentVolume('pv-1-copy', DRIVER, 'vol-1'),
        volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-1'),
      ],
      { pageSize: 1 },
    );
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const r = await nodevolAsync(['recover', '--yes', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '--kubeconfig', kubeconfig, '--node-name', 'node-1', '--csi-endpoint', `${DRIVER}=${csi.endpoint}`]);
    assert.deepEqual(calls, [], `a volume two PVs name was unstaged:\n${r.stdout}\n${r.stderr}`);
    assert.equal(r.status, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /refused kubernetes\.io\/csi\/ebs\.csi\.example\.com\^vol-1: PersistentVolumes pv-1 and pv-1-copy both name driver/);
    assert.ok(existsSync(gm));
    assert.equal(api.requests.filter((q) => q.path === '/api/v1/persistentvolumes').length, 2, 'every page of the PV list');
  });
});

describe('nodevol recover on the shipped example node (examples/node)', () => {
  const ROOT = path.join(REPO_ROOT, 'examples', 'node', 'kubelet');
  const EXAMPLE = ['--mountinfo', 'examples/node/mountinfo', '--cluster-state', 'examples/node/cluster.json', '--node-name', 'node-1'];
  const GLOBAL = (dir: string): string => path.join(ROOT, 'plugins', 'kubernetes.io', 'csi', 'ebs.csi.aws.com', dir);
  const STORY1 = GLOBAL('b445c67ec73e5a7527f2956a7d6329cafc540baf5d840dcff5c93bd34ec80991');
  const STORY2 = GLOBAL('1842af1c3b8a6c50a5b4df5155557262ca06003ccc082dc21e6dfabf00c99a6a');
  const STORY2_POD = path.join(ROOT, 'pods', '9e6b2d47-1a3c-4f58-b2d1-7c0e5a9f3e21', 'volumes', 'kubernetes.io~csi', 'pvc-c4a9d0f7-lostfile');
  const AS_NODE = (p: string): string => p.replace(ROOT, '/var/lib/kubelet');
  const journal = (stdout: string): { volume: string; action: string; outcome: string; path?: string; reason?: string }[] =>
    stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { volume: string; action: string; outcome: string; path?: string; reason?: string });

  it('the documented first run: README.md and docs/reference/recover.md give one command, and it prints the page\'s output and exit code', () => {
    const doc = documentedRun('docs/reference/recover.md', 'recover --root-dir examples/node/kubelet');
    const readme = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8').split('\n');
    assert.ok(readme.includes(doc.command), `README.md does not give the command of docs/reference/recover.md:\n${doc.command}`);
    const r = nodevol(doc.args, REPO_ROOT);
    assert.equal(r.stderr, '');
    // The page writes the clone's directory as $PWD (recover prints real paths).
    assert.equal(r.stdout.replaceAll(realpathSync(REPO_ROOT), '$PWD'), doc.output);
    assert.equal(r.status, doc.status);
  });

  it('dry run: the whole plan of both orphaned volumes, the story-2 target first, naming only paths that exist, with a warning for the missing driver (exit 1)', () => {
    const r = nodevol(['recover', '--root-dir', 'examples/node/kubelet', '--mountinfo-root-dir', '/var/lib/kubelet', ...EXAMPLE, '-o', 'json'], REPO_ROOT);
    assert.equal(r.status, 1, r.stderr);
    assert.equal(r.stderr, '');
    const lines = journal(r.stdout);
    const warning = 'no driver socket (ENOENT): --yes refuses this volume until the ebs.csi.aws.com node plugin runs on this node';
    assert.deepEqual(
      lines.map((l) => [l.volume.replace(/^.*\^/, ''), l.action, l.outcome, l.path ?? l.reason]),
      [
        ['vol-0a1b2c3d4e5f60002', 'check', 'failed', warning],
        ['vol-0a1b2c3d4e5f60002', 'NodeUnstageVolume', 'planned', AS_NODE(path.join(STORY1, 'globalmount'))],
        ['vol-0a1b2c3d4e5f60002', 'rmdir', 'planned', path.join(STORY1, 'globalmount')],
        ['vol-0a1b2c3d4e5f60002', 'unlink', 'planned', path.join(STORY1, 'vol_data.json')],
        ['vol-0a1b2c3d4e5f60002', 'rmdir', 'planned', STORY1],
        ['vol-0a1b2c3d4e5f60003', 'check', 'failed', warning],
        ['vol-0a1b2c3d4e5f60003', 'NodeUnpublishVolume', 'planned', AS_NODE(path.join(STORY2_POD, 'mount'))],
        ['vol-0a1b2c3d4e5f60003', 'rmdir', 'planned', path.join(STORY2_POD, 'mount')],
        // No unlink of the pod-local vol_data.json: story 2 lost it.
        ['vol-0a1b2c3d4e5f60003', 'rmdir', 'planned', STORY2_POD],
        ['vol-0a1b2c3d4e5f60003', 'NodeUnstageVolume', 'planned', AS_NODE(path.join(STORY2, 'globalmount'))],
        ['vol-0a1b2c3d4e5f60003', 'rmdir', 'planned', path.join(STORY2, 'globalmount')],
        ['vol-0a1b2c3d4e5f60003', 'unlink', 'planned', path.join(STORY2, 'vol_data.json')],
        ['vol-0a1b2c3d4e5f60003', 'rmdir', 'planned', STORY2],
      ],
    );
  });

  it('without --mountinfo-root-dir the shared warning names the flag, which recover accepts', () => {
    const r = nodevol(['recover', '--root-dir', 'examples/node/kubelet', ...EXAMPLE, '-o', 'json'], REPO_ROOT);
    assert.match(r.stderr, /^W.*The mount table names no mount under the root dir.*needs --mountinfo-root-dir/m);
    // Nothing reads as mounted: the story-2 target is not seen, so the plan has no NodeUnpublishVolume.
    assert.ok(!journal(r.stdout).some((l) => l.action === 'NodeUnpublishVolume'), r.stdout);
    const help = nodevol(['recover', '--help']);
    assert.match(help.stdout, /^ {2}--mountinfo-root-dir <dir>(?: |$)/m);
  });

  it('--yes on a copy: both volumes refused for the missing driver, nothing removed (exit 1)', async () => {
    const base = await mkdtemp(path.join(tmpdir(), 'nodevol-example-'));
    try {
      const copy = path.join(base, 'kubelet');
      await cp(ROOT, copy, { recursive: true });
      const before = (await readdir(copy, { recursive: true })).sort();
      const r = nodevol(['recover', '--yes', '--root-dir', copy, '--mountinfo-root-dir', '/var/lib/kubelet', ...EXAMPLE], REPO_ROOT);
      assert.equal(r.status, 1, `${r.stdout}\n${r.stderr}`);
      assert.deepEqual(
        r.stdout.split('\n').filter((l) => l.startsWith('refused ')).map((l) => l.replace(/\^(\S+):.*$/, '^$1')),
        ['refused kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d4e5f60002', 'refused kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d4e5f60003'],
      );
      assert.match(r.stdout, /\n0 recovered, 0 failed, 2 refused\.\n$/);
      // The root dir's lock was held and released: its directory may stay, nothing else changed.
      const after = (await readdir(copy, { recursive: true })).filter((p) => p !== 'nodevol' && !p.startsWith('nodevol/')).sort();
      assert.deepEqual(after, before);
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
});

describe('nodevol recover --mountinfo-root-dir --yes (a root dir the node names otherwise)', () => {
  let fx: NodeFixture;
  let csi: CsiServer | undefined;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await csi?.close();
    csi = undefined;
    await fx.cleanup();
  });

  it('the driver is told the paths as the mount table names them; the removals are made under --root-dir', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const podDir = await fx.podVolume({ uid: 'gone-pod', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm, file: 'absent' });
    const target = path.join(podDir, 'mount');
    // The mount table of a node whose kubelet root dir is /var/lib/kubelet; the driver unmounts by rewriting it.
    const mountinfo = path.join(fx.base, 'mountinfo');
    const writeTable = (): Promise<void> => writeFile(mountinfo, fx.mountInfo().replaceAll(fx.root, '/var/lib/kubelet'));
    await writeTable();
    const calls: string[] = [];
    const socket = fx.layout.driverSocketPath(DRIVER);
    await mkdir(path.dirname(socket), { recursive: true });
    csi = await startCsiServer(unixEndpoint(socket), {
      identity: { probe: () => Promise.resolve({}) },
      node: {
        nodeGetCapabilities: () => Promise.resolve({ capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }] }),
        nodeUnpublishVolume: async (req) => {
          calls.push(`NodeUnpublishVolume ${req.volumeId} ${req.targetPath}`);
          const keep = fx.mountAt(gm)!;
          fx.unmountAll();
          fx.mount(keep);
          await writeTable();
          return {};
        },
        nodeUnstageVolume: async (req) => {
          calls.push(`NodeUnstageVolume ${req.volumeId} ${req.stagingTargetPath}`);
          fx.unmountAll();
          await writeTable();
          return {};
        },
      },
    });
    const clusterFile = path.join(fx.base, 'cluster.json');
    await writeFile(clusterFile, JSON.stringify(list([node('node-1', { volumesAttached: [`kubernetes.io/csi/${DRIVER}^vol-1`], volumesInUse: [] })])));
    const r = await nodevolAsync(['recover', '--yes', '--root-dir', fx.root, '--mountinfo', mountinfo, '--mountinfo-root-dir', '/var/lib/kubelet', '--cluster-state', clusterFile, '--node-name', 'node-1']);
    const asNode = (p: string): string => p.replace(fx.root, '/var/lib/kubelet');
    assert.deepEqual(calls, [`NodeUnpublishVolume vol-1 ${asNode(target)}`, `NodeUnstageVolume vol-1 ${asNode(gm)}`], `${r.stdout}\n${r.stderr}`);
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.ok(!existsSync(podDir) && !existsSync(path.dirname(gm)), 'removed under --root-dir');
    assert.match(r.stdout, /\n1 recovered, 0 failed, 0 refused\.\n$/);
  });
});
