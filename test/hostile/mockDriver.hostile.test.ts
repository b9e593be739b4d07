/**
 * Hostile input (docs/security.md): `nodevol mock-driver` confines what it creates, mounts, unmounts and deletes.
 * In-process over a MemFs and a MemoryMounter (the socket, faults file and journal are real).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { MemFs } from '../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../src/adapters/memory/memoryMounter.js';
import { GrpcCsiClient } from '../../src/adapters/grpc/client.js';
import { unixEndpoint } from '../../src/adapters/grpc/endpoint.js';
import { startMockDriver, type MockDriver, type MockDriverOptions } from '../../src/mockdriver/mockDriver.js';
import { CsiCallError, GrpcStatus, type VolumeCapability } from '../../src/ports/csi.js';

const K = '/var/lib/kubelet';
const STATE = '/var/lib/nodevol-mock';
const STAGING = `${K}/plugins/kubernetes.io/csi/mock.csi.nodevol.io/abc/globalmount`;
const POD_DIR = `${K}/pods/uid-1/volumes/kubernetes.io~csi/pv-1`;
const TARGET = `${POD_DIR}/mount`;
const CAP: VolumeCapability = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } };

let dir = '';
let fs: MemFs;
let mounter: MemoryMounter;
const drivers: MockDriver[] = [];
const clients: GrpcCsiClient[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'nodevol-mock-hostile-'));
  fs = MemFs.create();
  mounter = new MemoryMounter(fs);
  for (const d of [STAGING, POD_DIR, '/srv/victim', '/srv/elsewhere/x']) await fs.mkdir(d, { recursive: true, mode: 0o755 });
  fs.writeRaw('/srv/victim/precious', 'data');
  fs.writeRaw('/etc/passwd', 'root:x:0:0');
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const d of drivers.splice(0)) await d.stop();
  await rm(dir, { recursive: true, force: true });
});

async function start(over: Partial<MockDriverOptions> = {}): Promise<GrpcCsiClient> {
  const endpoint = unixEndpoint(path.join(dir, 'csi.sock'));
  drivers.push(await startMockDriver({ endpoint, nodeId: 'node-1', driverName: 'mock.csi.nodevol.io', stateDir: STATE, fs, mounter, shutdownGraceMs: 500, ...over }));
  const c = new GrpcCsiClient(endpoint, { timeoutMs: 5_000 });
  clients.push(c);
  return c;
}

async function created(client: GrpcCsiClient): Promise<{ volumeId: string }> {
  const { volume } = await client.controller.createVolume({ name: 'pv-1', volumeCapabilities: [CAP] });
  assert.ok(volume !== null);
  return volume;
}

async function invalidArgument(p: Promise<unknown>, detail: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => err instanceof CsiCallError && err.code === GrpcStatus.INVALID_ARGUMENT && detail.test(err.details));
}

async function exists(p: string): Promise<boolean> {
  return fs.lstat(p).then(
    () => true,
    () => false,
  );
}

describe('hostile mock driver: volume ids', () => {
  it('an ephemeral volume id "../../victimdir" is refused: nothing bind-mounted, nothing deleted', async () => {
    const client = await start();
    await invalidArgument(
      client.nodePublishVolume({ volumeId: '../../srv/victim', publishContext: {}, stagingTargetPath: '', targetPath: TARGET, volumeCapability: CAP, readonly: false, secrets: {}, volumeContext: { 'csi.storage.k8s.io/ephemeral': 'true' } }),
      /must not contain a path separator/,
    );
    await invalidArgument(client.nodeUnpublishVolume({ volumeId: '..', targetPath: TARGET }), /must not be "\." or contain "\.\."/);
    assert.deepEqual(mounter.entries().slice(1), []);
    assert.equal(await exists('/srv/victim/precious'), true);
  });

  it('ids with a path separator are refused by every node call and DeleteVolume', async () => {
    const client = await start();
    await invalidArgument(client.nodeStageVolume({ volumeId: 'a/b', publishContext: {}, stagingTargetPath: STAGING, volumeCapability: CAP, secrets: {}, volumeContext: {} }), /path separator/);
    await invalidArgument(client.nodeUnstageVolume({ volumeId: 'a/b', stagingTargetPath: STAGING }), /path separator/);
    await invalidArgument(client.nodeUnpublishVolume({ volumeId: 'a/b', targetPath: TARGET }), /path separator/);
    await invalidArgument(client.controller.deleteVolume({ volumeId: '../x' }), /path separator/);
  });
});

describe('hostile mock driver: paths', () => {
  it('NodeStageVolume refuses "/", /etc and any system dir as the staging path', async () => {
    const client = await start();
    const volume = await created(client);
    for (const p of ['/', '/etc', '/usr/lib', '/proc/1', '/var']) {
      await invalidArgument(client.nodeStageVolume({ volumeId: volume.volumeId, publishContext: {}, stagingTargetPath: p, volumeCapability: CAP, secrets: {}, volumeContext: {} }), /system directory/);
    }
    assert.deepEqual(mounter.entries().slice(1), []);
  });

  it('with an allowed root, paths outside it or through a symlink below it are refused', async () => {
    const client = await start({ allowedRoots: [K] });
    const volume = await created(client);
    await invalidArgument(client.nodeStageVolume({ volumeId: volume.volumeId, publishContext: {}, stagingTargetPath: '/srv/elsewhere/x', volumeCapability: CAP, secrets: {}, volumeContext: {} }), /not under an allowed root \(\/var\/lib\/kubelet\)/);
    await fs.mkdir(`${K}/pods/uid-2/volumes/kubernetes.io~csi`, { recursive: true, mode: 0o755 });
    await fs.symlink('/srv/victim', `${K}/pods/uid-2/volumes/kubernetes.io~csi/pv-1`);
    await invalidArgument(client.nodeUnpublishVolume({ volumeId: volume.volumeId, targetPath: `${K}/pods/uid-2/volumes/kubernetes.io~csi/pv-1/mount` }), /pv-1 is a symlink; refusing to follow it/);
    // The ordinary path still works.
    await client.nodeStageVolume({ volumeId: volume.volumeId, publishContext: {}, stagingTargetPath: STAGING, volumeCapability: CAP, secrets: {}, volumeContext: {} });
    assert.deepEqual(mounter.entries().slice(1).map((e) => e.mountPoint), [STAGING]);
  });

  it('NodeUnpublishVolume with a known volume and a target it never published deletes and unmounts nothing', async () => {
    const client = await start();
    const volume = await created(client);
    await fs.mkdir('/srv/tmpfs', { recursive: true, mode: 0o755 });
    await mounter.mount('/srv/victim', '/srv/tmpfs', '', ['bind']);
    await client.nodeUnpublishVolume({ volumeId: volume.volumeId, targetPath: '/srv/victim/precious' });
    await client.nodeUnpublishVolume({ volumeId: volume.volumeId, targetPath: '/srv/tmpfs' });
    assert.equal(await exists('/srv/victim/precious'), true, 'an arbitrary file is not deleted');
    assert.deepEqual(mounter.entries().slice(1).map((e) => e.mountPoint), ['/srv/tmpfs'], 'an unrelated mount stays');
  });
});

describe('hostile mock driver: socket and faults file', () => {
  it('the socket is created 0660', async () => {
    await start();
    assert.equal(statSync(path.join(dir, 'csi.sock')).mode & 0o777, 0o660);
  });

  it('a FIFO as the faults file does not hang the driver: it starts and answers', { timeout: 10_000 }, async () => {
    const faults = path.join(dir, 'faults.yaml');
    execFileSync('mkfifo', [faults]);
    const client = await start({ faultsFile: faults });
    assert.deepEqual(await client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION', 'EXPAND_VOLUME']);
  });
});
