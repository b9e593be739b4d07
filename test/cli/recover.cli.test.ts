// `nodevol recover` as a process: it will not run without the cluster's view, rejects a
// malformed --csi-endpoint, and -o json prints the journal lines of the plan (through the
// --csi-endpoint given, not the conventional socket). Against an API server that answers in
// pages, --yes never unstages a volume that a pod on a later page wants, nor one that two
// PersistentVolumes name (which only the list of every PV shows: recover reads it, where the
// audit reads PVs by name) (a gRPC CSI server here records every call; no mount is involved, so
// no root is needed).
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
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

function nodevol(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  const env = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  const r = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', timeout: 60_000, env });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
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
