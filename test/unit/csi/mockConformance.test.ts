// A conformance pass over the mock CSI driver in the spirit of csi-sanity's Identity and Node
// suites (there is no csi-sanity binary here: the CSI spec is the test). It runs twice:
//  - in-process, with a MemFs and a MemoryMounter (always);
//  - against the built CLI (`node bin/nodevol.js mock-driver`) inside
//    `unshare --mount --propagation private --fork`, with real bind mounts (root only; skipped
//    with a message otherwise). Mounts are checked in /proc/<pid>/mountinfo of that namespace.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../../src/adapters/memory/memoryMounter.js';
import { GrpcCsiClient, probeReady } from '../../../src/csi/grpc/client.js';
import { unixEndpoint } from '../../../src/csi/grpc/endpoint.js';
import { startMockDriver, type MockDriver } from '../../../src/csi/mock/mockDriver.js';
import { CsiCallError, GrpcStatus, type VolumeCapability } from '../../../src/host/csi.js';
import { CliMockDriver } from '../../support/cliMockDriver.js';

// This file runs from dist/test/unit/csi/: the repo root is four levels up.
const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');
const DRIVER = 'mock.csi.nodevol.io';
const NODE = 'node-conformance';
/** csi-sanity's IdempotentCount. */
const IDEMPOTENT_COUNT = 3;

const MOUNT_CAP: VolumeCapability = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
const BLOCK_CAP: VolumeCapability = { block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
const NO_CAP: VolumeCapability = { accessMode: { mode: 'SINGLE_NODE_WRITER' } };

/** What the suite needs from a running driver and the node it runs on. */
interface Target {
  readonly client: GrpcCsiClient;
  /** A directory for staging and target paths (csi-sanity's --csi.mountdir / --csi.stagingdir parent). */
  readonly root: string;
  mkdir(p: string): Promise<void>;
  exists(p: string): Promise<boolean>;
  /** Mount points at or below `p` in the driver's mount namespace. */
  mountsUnder(p: string): Promise<string[]>;
  close(): Promise<void>;
}

function rootSkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (real bind mounts inside a private mount namespace)';
  const r = spawnSync('unshare', ['--mount', '--propagation', 'private', '--fork', 'true'], { stdio: 'ignore' });
  if (r.error !== undefined || r.status !== 0) return '`unshare --mount` is missing or not permitted here';
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

// ------------------------------------------------------------------------------ targets

async function inProcessTarget(): Promise<Target> {
  const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-conf-'));
  const fs = MemFs.create();
  const mounter = new MemoryMounter(fs);
  const root = '/csi-sanity';
  await fs.mkdir(root, { recursive: true, mode: 0o755 });
  const driver: MockDriver = await startMockDriver({
    endpoint: unixEndpoint(path.join(dir, 'csi.sock')),
    nodeId: NODE,
    driverName: DRIVER,
    stateDir: '/var/lib/nodevol-mock',
    fs,
    mounter,
  });
  const client = new GrpcCsiClient(driver.endpoint, { timeoutMs: 10_000 });
  return {
    client,
    root,
    mkdir: (p) => fs.mkdir(p, { recursive: true, mode: 0o750 }),
    exists: async (p) => (await fs.lstat(p).catch(() => undefined)) !== undefined,
    mountsUnder: (p) => Promise.resolve(mounter.entries().map((e) => e.mountPoint).filter((m) => m === p || m.startsWith(`${p}/`))),
    close: async () => {
      client.close();
      await driver.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The built CLI in a private mount namespace. */

async function cliTarget(): Promise<Target> {
  const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-conf-root-'));
  const socket = path.join(dir, 'csi.sock');
  const cli = new CliMockDriver(['--endpoint', unixEndpoint(socket), '--node-id', NODE, '--driver-name', DRIVER, '--state-dir', path.join(dir, 'state')]);
  try {
    await cli.waitServing(socket);
  } catch (err) {
    cli.kill();
    await cli.exited;
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const client = new GrpcCsiClient(unixEndpoint(socket), { timeoutMs: 20_000 });
  const root = path.join(dir, 'csi-sanity');
  await mkdir(root);
  return {
    client,
    root,
    mkdir: async (p) => {
      await mkdir(p, { recursive: true, mode: 0o750 });
    },
    exists: async (p) => (await lstat(p).catch(() => undefined)) !== undefined,
    mountsUnder: async (p) => (await cli.mountPoints()).filter((m) => m === p || m.startsWith(`${p}/`)),
    close: async () => {
      client.close();
      if (cli.running) {
        cli.terminate();
        const timer = setTimeout(() => cli.kill(), 10_000);
        await cli.exited;
        clearTimeout(timer);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

// ------------------------------------------------------------------------------ the suite

function conformance(title: string, makeTarget: () => Promise<Target>, skip?: string): void {
  describe(`mock driver conformance (${title})`, { skip }, () => {
    let t: Target;
    let n = 0;
    before(async () => {
      t = await makeTarget();
    });
    after(async () => {
      await t?.close();
    });

    /** A fresh volume, its staging dir created by "kubelet", its target's parent too. */
    async function fresh(cap: VolumeCapability = MOUNT_CAP): Promise<{ id: string; staging: string; target: string }> {
      n += 1;
      const res = await t.client.controller.createVolume({ name: `sanity-${n}`, volumeCapabilities: [cap] });
      assert.ok(res.volume !== null);
      const staging = path.join(t.root, `staging-${n}`);
      const podDir = path.join(t.root, `pod-${n}`);
      await t.mkdir(staging);
      await t.mkdir(podDir);
      return { id: res.volume.volumeId, staging, target: path.join(podDir, 'target') };
    }

    const stage = (id: string, staging: string, cap: VolumeCapability = MOUNT_CAP) =>
      t.client.nodeStageVolume({ volumeId: id, publishContext: {}, stagingTargetPath: staging, volumeCapability: cap, secrets: {}, volumeContext: {} });
    const unstage = (id: string, staging: string) => t.client.nodeUnstageVolume({ volumeId: id, stagingTargetPath: staging });
    const publish = (id: string, staging: string, target: string, cap: VolumeCapability = MOUNT_CAP) =>
      t.client.nodePublishVolume({
        volumeId: id, publishContext: {}, stagingTargetPath: staging, targetPath: target, volumeCapability: cap,
        readonly: false, secrets: {}, volumeContext: {},
      });
    const unpublish = (id: string, target: string) => t.client.nodeUnpublishVolume({ volumeId: id, targetPath: target });

    describe('Identity Service', () => {
      it('GetPluginInfo: name and vendor version are non-empty', async () => {
        const info = await t.client.identity.getPluginInfo();
        assert.equal(info.name, DRIVER);
        assert.notEqual(info.vendorVersion, '');
      });
      it('GetPluginCapabilities: CONTROLLER_SERVICE', async () => {
        const caps = await t.client.identity.getPluginCapabilities();
        assert.ok(caps.capabilities.some((c) => c.service?.type === 'CONTROLLER_SERVICE'));
      });
      it('Probe: ready', async () => {
        assert.equal(probeReady(await t.client.identity.probe()), true);
      });
    });

    describe('Node Service', () => {
      it('NodeGetCapabilities: STAGE_UNSTAGE_VOLUME', async () => {
        assert.deepEqual(await t.client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
      });
      it('NodeGetInfo: a node id', async () => {
        assert.equal((await t.client.nodeGetInfo()).nodeId, NODE);
      });

      it('NodePublishVolume: should fail when no volume id / no target path / no volume capability is provided', async () => {
        const v = await fresh();
        await rejectsWithCode(publish('', v.staging, v.target), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(publish(v.id, v.staging, ''), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(publish(v.id, v.staging, v.target, NO_CAP), GrpcStatus.INVALID_ARGUMENT);
      });
      it('NodePublishVolume: should fail when the volume is missing', async () => {
        const v = await fresh();
        await rejectsWithCode(publish('mock-does-not-exist', v.staging, v.target), GrpcStatus.NOT_FOUND);
      });
      it('NodeUnpublishVolume: should fail when no volume id / no target path is provided', async () => {
        const v = await fresh();
        await rejectsWithCode(unpublish('', v.target), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(unpublish(v.id, ''), GrpcStatus.INVALID_ARGUMENT);
      });
      it('NodeUnpublishVolume: should remove target path', async () => {
        const v = await fresh();
        await stage(v.id, v.staging);
        await publish(v.id, v.staging, v.target);
        assert.equal(await t.exists(v.target), true);
        assert.deepEqual(await t.mountsUnder(v.target), [v.target]);
        await unpublish(v.id, v.target);
        assert.equal(await t.exists(v.target), false, 'target path removed');
        await unstage(v.id, v.staging);
        assert.deepEqual(await t.mountsUnder(t.root), []);
      });
      it('NodeStageVolume: should fail when no volume id / no staging target path / no volume capability is provided', async () => {
        const v = await fresh();
        await rejectsWithCode(stage('', v.staging), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(stage(v.id, ''), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(stage(v.id, v.staging, NO_CAP), GrpcStatus.INVALID_ARGUMENT);
      });
      it('NodeStageVolume: should fail when the volume is missing', async () => {
        const v = await fresh();
        await rejectsWithCode(stage('mock-does-not-exist', v.staging), GrpcStatus.NOT_FOUND);
      });
      it('NodeUnstageVolume: should fail when no volume id / no staging target path is provided', async () => {
        const v = await fresh();
        await rejectsWithCode(unstage('', v.staging), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(unstage(v.id, ''), GrpcStatus.INVALID_ARGUMENT);
      });

      for (const [kind, cap] of [['filesystem', MOUNT_CAP], ['block', BLOCK_CAP]] as const) {
        it(`${kind}: should work (full lifecycle), and leave no mounts`, async () => {
          const v = await fresh(cap);
          const ctl = { volumeId: v.id, nodeId: NODE, volumeCapability: cap, readonly: false };
          await t.client.controller.controllerPublishVolume(ctl);
          await stage(v.id, v.staging, cap);
          await publish(v.id, v.staging, v.target, cap);
          assert.deepEqual(await t.mountsUnder(v.target), [v.target]);
          await rejectsWithCode(unstage(v.id, v.staging), GrpcStatus.FAILED_PRECONDITION);
          await unpublish(v.id, v.target);
          await unstage(v.id, v.staging);
          await t.client.controller.controllerUnpublishVolume({ volumeId: v.id, nodeId: NODE });
          await t.client.controller.deleteVolume({ volumeId: v.id });
          assert.deepEqual(await t.mountsUnder(t.root), []);
          assert.equal(await t.exists(v.target), false);
        });

        it(`${kind}: should be idempotent (each call ${IDEMPOTENT_COUNT}×)`, async () => {
          const v = await fresh(cap);
          const ctl = { volumeId: v.id, nodeId: NODE, volumeCapability: cap, readonly: false };
          for (let i = 0; i < IDEMPOTENT_COUNT; i++) await t.client.controller.controllerPublishVolume(ctl);
          for (let i = 0; i < IDEMPOTENT_COUNT; i++) await stage(v.id, v.staging, cap);
          const stagedMounts = await t.mountsUnder(v.staging);
          assert.equal(stagedMounts.length, 1, `one staging mount, got ${stagedMounts.join(', ')}`);
          for (let i = 0; i < IDEMPOTENT_COUNT; i++) await publish(v.id, v.staging, v.target, cap);
          assert.deepEqual(await t.mountsUnder(v.target), [v.target]);
          for (let i = 0; i < IDEMPOTENT_COUNT; i++) await unpublish(v.id, v.target);
          for (let i = 0; i < IDEMPOTENT_COUNT; i++) await unstage(v.id, v.staging);
          for (let i = 0; i < IDEMPOTENT_COUNT; i++) await t.client.controller.controllerUnpublishVolume({ volumeId: v.id, nodeId: NODE });
          for (let i = 0; i < IDEMPOTENT_COUNT; i++) await t.client.controller.deleteVolume({ volumeId: v.id });
          assert.deepEqual(await t.mountsUnder(t.root), []);
          assert.equal(await t.exists(v.target), false);
        });
      }
    });
  });
}

conformance('in-process, MemFs + MemoryMounter', inProcessTarget);
conformance('built CLI, real bind mounts in a private mount namespace', cliTarget, rootSkipReason());
