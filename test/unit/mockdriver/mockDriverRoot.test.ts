// ROOT ONLY: the built CLI `node bin/nodevol.js mock-driver` inside
// `unshare --mount --propagation private --fork` (no mount leaks into the host), with real bind
// mounts: data written through a publish target lands in the backing storage; SIGTERM exits 0
// and removes the socket; an exit fault exits 3 and leaves the socket, which the next start
// clears while reloading state.json. Skipped with a message when not root or without unshare.
// Every process started here is killed in `after`, even on failure.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { GrpcCsiClient } from '../../../src/adapters/grpc/client.js';
import { unixEndpoint } from '../../../src/adapters/grpc/endpoint.js';
import type { JournalLine } from '../../../src/mockdriver/journal.js';
import { mockBackingPaths, mockBlockDevicePath } from '../../../src/mockdriver/volumes.js';
import { mockVolumeId } from '../../../src/mockdriver/volumeId.js';
import { readMockState } from '../../../src/mockdriver/state.js';
import { NodeFileSystem } from '../../../src/adapters/node/nodeFs.js';
import { CsiCallError, GrpcStatus, type VolumeCapability } from '../../../src/ports/csi.js';
import { CliMockDriver } from '../../support/cliMockDriver.js';

// This file runs from dist/test/unit/csi/: the repo root is four levels up.
const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');
const DRIVER = 'mock.csi.nodevol.io';
const NODE = 'node-root';

const MOUNT_CAP: VolumeCapability = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
const BLOCK_CAP: VolumeCapability = { block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } };

function rootSkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (real bind mounts inside a private mount namespace)';
  const r = spawnSync('unshare', ['--mount', '--propagation', 'private', '--fork', 'true'], { stdio: 'ignore' });
  if (r.error !== undefined || r.status !== 0) return '`unshare --mount` is missing or not permitted here';
  const n = spawnSync('nsenter', ['--version'], { stdio: 'ignore' });
  if (n.error !== undefined) return '`nsenter` is missing';
  if (!existsSync(BIN)) return `${BIN} is missing: build first`;
  return undefined;
}


async function rejectsWithCode(p: Promise<unknown>, code: number): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof CsiCallError, `expected a CsiCallError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    return true;
  });
}

const skip = rootSkipReason();

describe('nodevol mock-driver as root, real bind mounts in a private mount namespace', { skip }, () => {
  let dir = '';
  let socket = '';
  let stateDir = '';
  let journal = '';
  let faults = '';
  const started: CliMockDriver[] = [];
  const clients: GrpcCsiClient[] = [];
  let cli: CliMockDriver;
  let client: GrpcCsiClient;
  let t0 = 0;

  const args = (): string[] => [
    '--endpoint', unixEndpoint(socket), '--node-id', NODE, '--driver-name', DRIVER, '--state-dir', stateDir,
    '--journal', journal, '--faults', faults, '-v', '2',
  ];
  async function startCli(): Promise<{ cli: CliMockDriver; client: GrpcCsiClient }> {
    const c = new CliMockDriver(args());
    started.push(c);
    await c.waitServing(socket);
    const cl = new GrpcCsiClient(unixEndpoint(socket), { timeoutMs: 20_000 });
    clients.push(cl);
    return { cli: c, client: cl };
  }

  before(async () => {
    t0 = Date.now();
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-mock-root-'));
    socket = path.join(dir, 'plugins', DRIVER, 'csi.sock');
    stateDir = path.join(dir, 'state');
    journal = path.join(dir, 'journal.jsonl');
    faults = path.join(dir, 'faults.yaml');
    ({ cli, client } = await startCli());
  });

  after(async () => {
    for (const c of clients) c.close();
    for (const c of started) {
      c.kill();
      await c.exited;
    }
    if (dir !== '') await rm(dir, { recursive: true, force: true });
    process.stderr.write(`# mock-driver root test: ${Date.now() - t0} ms\n`);
  });

  it('filesystem: CreateVolume, stage, publish; a file written through the target is in the backing dir; readonly is ro; teardown leaves nothing', async () => {
    const id = mockVolumeId('pvc-root');
    const res = await client.controller.createVolume({ name: 'pvc-root', volumeCapabilities: [MOUNT_CAP] });
    assert.equal(res.volume?.volumeId, id);
    const backing = mockBackingPaths(stateDir, id).dir;
    assert.ok((await stat(backing)).isDirectory());
    const kubelet = path.join(dir, 'kubelet');
    const staging = path.join(kubelet, 'plugins', 'kubernetes.io', 'csi', DRIVER, 'abc', 'globalmount');
    const podDir = path.join(kubelet, 'pods', 'uid-1', 'volumes', 'kubernetes.io~csi', 'pvc-root');
    const target = path.join(podDir, 'mount');
    const roTarget = path.join(kubelet, 'pods', 'uid-2', 'volumes', 'kubernetes.io~csi', 'pvc-root', 'mount');
    await mkdir(staging, { recursive: true });
    await mkdir(podDir, { recursive: true });
    await mkdir(path.dirname(roTarget), { recursive: true });

    await client.controller.controllerPublishVolume({ volumeId: id, nodeId: NODE, volumeCapability: MOUNT_CAP, readonly: false });
    const stageReq = { volumeId: id, publishContext: {}, stagingTargetPath: staging, volumeCapability: MOUNT_CAP, secrets: { key: 'hunter2' }, volumeContext: {} };
    await client.nodeStageVolume(stageReq);
    const publishReq = { ...stageReq, targetPath: target, readonly: false };
    await client.nodePublishVolume(publishReq);
    await client.nodePublishVolume({ ...publishReq, targetPath: roTarget, readonly: true });
    assert.deepEqual(await cli.mountsUnder(kubelet), [
      { mountPoint: staging, ro: false }, { mountPoint: target, ro: false }, { mountPoint: roTarget, ro: true },
    ]);

    const src = path.join(dir, 'hello.txt');
    await writeFile(src, 'written through the publish target\n');
    const cp = cli.inNamespace(['cp', src, path.join(target, 'hello.txt')]);
    assert.equal(cp.status, 0, cp.stderr);
    assert.equal(await readFile(path.join(backing, 'hello.txt'), 'utf8'), 'written through the publish target\n');
    assert.deepEqual(await readdir(target), [], 'outside the namespace the target is a plain empty dir: the write went through the mount');
    const ro = cli.inNamespace(['touch', path.join(roTarget, 'nope')]);
    assert.notEqual(ro.status, 0, 'the readonly target refuses writes');
    assert.match(ro.stderr, /Read-only file system/);
    const cat = cli.inNamespace(['cat', path.join(roTarget, 'hello.txt')]);
    assert.equal(cat.status, 0, cat.stderr);

    await rejectsWithCode(client.nodeUnstageVolume({ volumeId: id, stagingTargetPath: staging }), GrpcStatus.FAILED_PRECONDITION);
    for (const t of [target, roTarget]) await client.nodeUnpublishVolume({ volumeId: id, targetPath: t });
    assert.equal(existsSync(target), false);
    assert.equal(existsSync(roTarget), false);
    await client.nodeUnstageVolume({ volumeId: id, stagingTargetPath: staging });
    assert.deepEqual(await cli.mountsUnder(dir), []);
    assert.ok((await stat(staging)).isDirectory(), 'the staging dir is kubelet\'s');
    await client.controller.controllerUnpublishVolume({ volumeId: id, nodeId: NODE });
    await client.controller.deleteVolume({ volumeId: id });
    assert.equal(existsSync(backing), false);
  });

  it('block: the sparse backing file is bound on <staging>/dev and on the target file; bytes written through the target land in it', async () => {
    const id = mockVolumeId('pvc-block');
    const res = await client.controller.createVolume({ name: 'pvc-block', volumeCapabilities: [BLOCK_CAP], capacityRange: { requiredBytes: 1 << 20 } });
    assert.equal(res.volume?.capacityBytes, 1 << 20);
    const img = mockBackingPaths(stateDir, id).file;
    const st = await stat(img);
    assert.equal(st.size, 1 << 20);
    assert.ok(st.blocks * 512 < st.size, `sparse: ${st.blocks} blocks for ${st.size} bytes`);
    const staging = path.join(dir, 'kubelet', 'plugins', 'kubernetes.io', 'csi', 'volumeDevices', 'staging', 'pvc-block');
    const publishDir = path.join(dir, 'kubelet', 'plugins', 'kubernetes.io', 'csi', 'volumeDevices', 'publish', 'pvc-block');
    const target = path.join(publishDir, 'uid-1');
    await mkdir(staging, { recursive: true });
    await mkdir(publishDir, { recursive: true });
    const stageReq = { volumeId: id, publishContext: {}, stagingTargetPath: staging, volumeCapability: BLOCK_CAP, secrets: {}, volumeContext: {} };
    await client.nodeStageVolume(stageReq);
    await client.nodePublishVolume({ ...stageReq, targetPath: target, readonly: false });
    assert.deepEqual((await cli.mountsUnder(dir)).map((m) => m.mountPoint), [mockBlockDevicePath(staging), target]);

    const src = path.join(dir, 'block.bin');
    await writeFile(src, 'BLOCKDATA');
    const dd = cli.inNamespace(['dd', `if=${src}`, `of=${target}`, 'conv=notrunc', 'status=none']);
    assert.equal(dd.status, 0, dd.stderr);
    const head = (await readFile(img)).subarray(0, 9).toString('utf8');
    assert.equal(head, 'BLOCKDATA');
    assert.equal((await stat(img)).size, 1 << 20);

    await client.nodeUnpublishVolume({ volumeId: id, targetPath: target });
    await client.nodeUnstageVolume({ volumeId: id, stagingTargetPath: staging });
    assert.deepEqual(await cli.mountsUnder(dir), []);
    assert.equal(existsSync(target), false);
    assert.equal(existsSync(mockBlockDevicePath(staging)), false);
    await client.controller.deleteVolume({ volumeId: id });
    assert.equal(existsSync(img), false);
  });

  it('the journal has a line per call with secrets redacted', async () => {
    const lines = (await readFile(journal, 'utf8')).split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as JournalLine);
    assert.ok(lines.length > 10);
    assert.ok(!lines.some((l) => JSON.stringify(l).includes('hunter2')));
    assert.ok(lines.some((l) => l.method === 'NodeStageVolume' && !('phase' in l) && l.error === null));
  });

  it('SIGTERM: exit 0 and the socket is removed', async () => {
    assert.ok(existsSync(socket));
    cli.terminate();
    const { code, signal } = await cli.exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, cli.stderr.join(''));
    assert.equal(existsSync(socket), false, 'socket removed');
    assert.match(cli.stderr.join(''), /Shutting down the mock CSI driver/);
  });

  it('restart reloads the volume records; an exit fault exits 3 and leaves the socket; the next start clears it', async () => {
    let c = await startCli();
    const id = mockVolumeId('pvc-keep');
    await c.client.controller.createVolume({ name: 'pvc-keep', volumeCapabilities: [MOUNT_CAP] });
    await c.client.controller.controllerPublishVolume({ volumeId: id, nodeId: NODE, volumeCapability: MOUNT_CAP, readonly: false });
    await writeFile(faults, 'faults:\n  - method: NodeGetInfo\n    exit: true\n');
    await assert.rejects(c.client.nodeGetInfo(), CsiCallError);
    const { code } = await c.cli.exited;
    assert.equal(code, 3, c.cli.stderr.join(''));
    assert.ok(existsSync(socket), 'a crash leaves the socket behind');
    const last = JSON.parse((await readFile(journal, 'utf8')).trim().split('\n').at(-1)!) as JournalLine;
    assert.ok('phase' in last && last.phase === 'exit' && last.method === 'NodeGetInfo');

    await rm(faults);
    c = await startCli();
    const vols = await readMockState(new NodeFileSystem(), stateDir);
    assert.deepEqual(vols.map((v) => [v.id, v.attachedNodes]), [[id, [NODE]]]);
    // The reloaded driver knows the volume (an unknown one would answer NOT_FOUND here).
    await c.client.controller.controllerUnpublishVolume({ volumeId: id, nodeId: NODE });
    await c.client.controller.deleteVolume({ volumeId: id });
    c.cli.terminate();
    assert.equal((await c.cli.exited).code, 0);
    assert.equal(existsSync(socket), false);
  });
});
