// The CSI conformance suite of `nodevol mock-driver`: the CSI spec's MUST sentences for
// Identity, Controller and Node (every capability the driver advertises) as tests, driven over
// the driver's real unix socket with the real gRPC client (there is no csi-sanity binary here:
// the spec is the test list; each test names the RPC and the rule). It runs twice:
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

import { MemFs } from '../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../src/adapters/memory/memoryMounter.js';
import { GrpcCsiClient, probeReady } from '../../src/adapters/grpc/client.js';
import { unixEndpoint } from '../../src/adapters/grpc/endpoint.js';
import { startMockDriver, type MockDriver } from '../../src/mockdriver/mockDriver.js';
import { CsiCallError, GrpcStatus, type VolumeCapability } from '../../src/ports/csi.js';
import { CliMockDriver } from '../support/cliMockDriver.js';

// This file runs from dist/test/conformance/: the repo root is three levels up.
const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');
const DRIVER = 'mock.csi.nodevol.io';
const NODE = 'node-conformance';
/** csi-sanity's IdempotentCount. */
const IDEMPOTENT_COUNT = 3;

const MOUNT_CAP: VolumeCapability = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
const BLOCK_CAP: VolumeCapability = { block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
const NO_CAP: VolumeCapability = { accessMode: { mode: 'SINGLE_NODE_WRITER' } };
const MiB = 1024 * 1024;

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

    /** The wire form of a capability (what a CO puts in a request). */
    const wireCap = (cap: VolumeCapability) => ({ ...cap, accessMode: cap.accessMode });
    const listAll = async (maxEntries = 0): Promise<{ id: string; capacity: number; nodes: readonly string[] }[]> => {
      const out: { id: string; capacity: number; nodes: readonly string[] }[] = [];
      let token = '';
      for (let page = 0; page < 10_000; page++) {
        const res = await t.client.controllerCall('ListVolumes', { maxEntries, startingToken: token });
        if (maxEntries > 0) assert.ok(res.entries.length <= maxEntries, `a page of ${res.entries.length} > max_entries ${maxEntries}`);
        for (const e of res.entries) out.push({ id: e.volume?.volumeId ?? '', capacity: e.volume?.capacityBytes ?? -1, nodes: e.status?.publishedNodeIds ?? [] });
        if (res.nextToken === '') return out;
        token = res.nextToken;
      }
      assert.fail('ListVolumes never ended');
    };

    describe('Controller Service', () => {
      it('ControllerGetCapabilities: CREATE_DELETE_VOLUME, PUBLISH_UNPUBLISH_VOLUME, LIST_VOLUMES, LIST_VOLUMES_PUBLISHED_NODES', async () => {
        assert.deepEqual(await t.client.controller.controllerGetCapabilities(), [
          'CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME', 'LIST_VOLUMES', 'LIST_VOLUMES_PUBLISHED_NODES',
        ]);
      });

      it('CreateVolume: no name or no capabilities → INVALID_ARGUMENT; required > limit → OUT_OF_RANGE; MUST be idempotent; same name, incompatible capacity → ALREADY_EXISTS', async () => {
        await rejectsWithCode(t.client.controllerCall('CreateVolume', { name: '', volumeCapabilities: [wireCap(MOUNT_CAP)] }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(t.client.controllerCall('CreateVolume', { name: 'conf-nocaps', volumeCapabilities: [] }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(
          t.client.controllerCall('CreateVolume', { name: 'conf-range', volumeCapabilities: [wireCap(MOUNT_CAP)], capacityRange: { requiredBytes: 2 * MiB, limitBytes: MiB } }),
          GrpcStatus.OUT_OF_RANGE,
        );
        const req = { name: 'conf-idem', volumeCapabilities: [wireCap(MOUNT_CAP)], capacityRange: { requiredBytes: 2 * MiB } };
        const a = await t.client.controllerCall('CreateVolume', req);
        const b = await t.client.controllerCall('CreateVolume', req);
        assert.equal(a.volume?.volumeId, b.volume?.volumeId);
        assert.ok((a.volume?.capacityBytes ?? 0) >= 2 * MiB, 'capacity at least the required bytes');
        await rejectsWithCode(
          t.client.controllerCall('CreateVolume', { ...req, capacityRange: { requiredBytes: 4 * MiB } }),
          GrpcStatus.ALREADY_EXISTS,
        );
        await t.client.controller.deleteVolume({ volumeId: a.volume?.volumeId ?? '' });
      });

      it('DeleteVolume: no volume id → INVALID_ARGUMENT; an unknown volume MUST answer OK', async () => {
        await rejectsWithCode(t.client.controllerCall('DeleteVolume', { volumeId: '' }), GrpcStatus.INVALID_ARGUMENT);
        await t.client.controller.deleteVolume({ volumeId: 'mock-does-not-exist' });
      });

      it('ValidateVolumeCapabilities: no volume id → INVALID_ARGUMENT; no capabilities → INVALID_ARGUMENT; an unknown volume → NOT_FOUND', async () => {
        const v = await fresh();
        await rejectsWithCode(t.client.controllerCall('ValidateVolumeCapabilities', { volumeId: '', volumeCapabilities: [wireCap(MOUNT_CAP)] }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(t.client.controllerCall('ValidateVolumeCapabilities', { volumeId: v.id, volumeCapabilities: [] }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(
          t.client.controllerCall('ValidateVolumeCapabilities', { volumeId: 'mock-does-not-exist', volumeCapabilities: [wireCap(MOUNT_CAP)] }),
          GrpcStatus.NOT_FOUND,
        );
      });

      it('ValidateVolumeCapabilities: supported capabilities (no optional values) are confirmed as asked; an unsupported access type is not confirmed and says why', async () => {
        const v = await fresh();
        const ok = await t.client.controllerCall('ValidateVolumeCapabilities', { volumeId: v.id, volumeCapabilities: [wireCap(MOUNT_CAP)] });
        assert.ok(ok.confirmed !== null, `not confirmed: ${ok.message}`);
        assert.deepEqual(ok.confirmed.volumeCapabilities.map((c) => [c.mount !== undefined, c.accessMode?.mode]), [[true, 'SINGLE_NODE_WRITER']]);
        assert.deepEqual([ok.confirmed.volumeContext, ok.confirmed.parameters], [{}, {}]);
        const no = await t.client.controllerCall('ValidateVolumeCapabilities', { volumeId: v.id, volumeCapabilities: [wireCap(BLOCK_CAP)] });
        assert.equal(no.confirmed, null);
        assert.match(no.message, /supports mount access, not block/);
      });

      it('ListVolumes: every volume once, in pages of at most max_entries with next_token; negative max_entries → INVALID_ARGUMENT; a bad starting_token → ABORTED', async () => {
        const made = [await fresh(), await fresh(), await fresh()].map((v) => v.id);
        const all = await listAll();
        for (const id of made) assert.equal(all.filter((e) => e.id === id).length, 1, `${id} listed once`);
        const paged = await listAll(1);
        assert.deepEqual(paged.map((e) => e.id), all.map((e) => e.id));
        await rejectsWithCode(t.client.controllerCall('ListVolumes', { maxEntries: -1 }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(t.client.controllerCall('ListVolumes', { startingToken: 'not-a-token' }), GrpcStatus.ABORTED);
      });

      it('ControllerPublishVolume: no volume id / node id / capability → INVALID_ARGUMENT; unknown volume → NOT_FOUND; unknown node → NOT_FOUND; idempotent; ListVolumes shows the node', async () => {
        const v = await fresh();
        const base = { volumeId: v.id, nodeId: NODE, volumeCapability: wireCap(MOUNT_CAP), readonly: false };
        await rejectsWithCode(t.client.controllerCall('ControllerPublishVolume', { ...base, volumeId: '' }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(t.client.controllerCall('ControllerPublishVolume', { ...base, nodeId: '' }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(t.client.controllerCall('ControllerPublishVolume', { ...base, volumeCapability: null }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(t.client.controllerCall('ControllerPublishVolume', { ...base, volumeId: 'mock-does-not-exist' }), GrpcStatus.NOT_FOUND);
        await rejectsWithCode(t.client.controllerCall('ControllerPublishVolume', { ...base, nodeId: 'some-other-node' }), GrpcStatus.NOT_FOUND);
        for (let i = 0; i < IDEMPOTENT_COUNT; i++) await t.client.controllerCall('ControllerPublishVolume', base);
        assert.deepEqual((await listAll()).find((e) => e.id === v.id)?.nodes, [NODE]);
        await rejectsWithCode(t.client.controllerCall('ControllerUnpublishVolume', { volumeId: '' }), GrpcStatus.INVALID_ARGUMENT);
        for (let i = 0; i < IDEMPOTENT_COUNT; i++) await t.client.controller.controllerUnpublishVolume({ volumeId: v.id, nodeId: NODE });
        assert.deepEqual((await listAll()).find((e) => e.id === v.id)?.nodes, []);
      });
    });

    describe('Node Service', () => {
      it('NodeGetCapabilities: STAGE_UNSTAGE_VOLUME, GET_VOLUME_STATS, VOLUME_CONDITION, EXPAND_VOLUME', async () => {
        assert.deepEqual(await t.client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION', 'EXPAND_VOLUME']);
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

      it('NodeGetVolumeStats: no volume id / volume path → INVALID_ARGUMENT; unknown volume → NOT_FOUND; a path the volume is not at → NOT_FOUND', async () => {
        const v = await fresh();
        await stage(v.id, v.staging);
        await rejectsWithCode(t.client.nodeCall('NodeGetVolumeStats', { volumeId: '', volumePath: v.staging }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(t.client.nodeCall('NodeGetVolumeStats', { volumeId: v.id, volumePath: '' }), GrpcStatus.INVALID_ARGUMENT);
        await rejectsWithCode(t.client.nodeCall('NodeGetVolumeStats', { volumeId: 'mock-does-not-exist', volumePath: v.staging }), GrpcStatus.NOT_FOUND);
        await rejectsWithCode(t.client.nodeCall('NodeGetVolumeStats', { volumeId: v.id, volumePath: v.target }), GrpcStatus.NOT_FOUND);
        await unstage(v.id, v.staging);
      });

      for (const [kind, cap] of [['filesystem', MOUNT_CAP], ['block', BLOCK_CAP]] as const) {
        it(`${kind}: NodeGetVolumeStats on the staging and the target path: BYTES usage (total = capacity, used ≤ total) and a normal VOLUME_CONDITION`, async () => {
          const v = await fresh(cap);
          await stage(v.id, v.staging, cap);
          await publish(v.id, v.staging, v.target, cap);
          for (const volumePath of [v.staging, v.target]) {
            const res = await t.client.nodeCall('NodeGetVolumeStats', { volumeId: v.id, volumePath, stagingTargetPath: v.staging });
            const bytes = res.usage.find((u) => u.unit === 'BYTES');
            assert.ok(bytes !== undefined, 'a BYTES usage');
            assert.equal(bytes.total, MiB);
            assert.ok(bytes.used >= 0 && bytes.used <= bytes.total && bytes.available >= 0);
            for (const u of res.usage) assert.ok(u.total >= 0 && u.used >= 0 && u.available >= 0, 'MUST NOT be negative');
            assert.deepEqual(res.volumeCondition?.abnormal, false, res.volumeCondition?.message);
          }
          await unpublish(v.id, v.target);
          await unstage(v.id, v.staging);
        });

        it(`${kind}: NodeExpandVolume: no volume id / path → INVALID_ARGUMENT; unknown → NOT_FOUND; required > limit → OUT_OF_RANGE; grows the staged volume, idempotently`, async () => {
          const v = await fresh(cap);
          await stage(v.id, v.staging, cap);
          const expand = (over: object = {}) =>
            t.client.nodeCall('NodeExpandVolume', { volumeId: v.id, volumePath: v.staging, stagingTargetPath: v.staging, capacityRange: { requiredBytes: 2 * MiB }, volumeCapability: wireCap(cap), ...over });
          await rejectsWithCode(expand({ volumeId: '' }), GrpcStatus.INVALID_ARGUMENT);
          await rejectsWithCode(expand({ volumePath: '' }), GrpcStatus.INVALID_ARGUMENT);
          await rejectsWithCode(expand({ volumeId: 'mock-does-not-exist' }), GrpcStatus.NOT_FOUND);
          await rejectsWithCode(expand({ capacityRange: { requiredBytes: 4 * MiB, limitBytes: 2 * MiB + 1 } }), GrpcStatus.OUT_OF_RANGE);
          for (let i = 0; i < IDEMPOTENT_COUNT; i++) assert.equal((await expand()).capacityBytes, 2 * MiB);
          assert.equal((await expand({ capacityRange: { requiredBytes: MiB } })).capacityBytes, 2 * MiB, 'already larger: OK, no shrink');
          assert.equal((await listAll()).find((e) => e.id === v.id)?.capacity, 2 * MiB);
          await unstage(v.id, v.staging);
        });


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
          // The cleanup a conformance run does afterwards, on a volume already deleted: the Node
          // calls answer NOT_FOUND (the spec's code for a volume that does not exist);
          // ControllerUnpublishVolume and DeleteVolume answer OK (nothing left to undo).
          await rejectsWithCode(unpublish(v.id, v.target), GrpcStatus.NOT_FOUND);
          await rejectsWithCode(unstage(v.id, v.staging), GrpcStatus.NOT_FOUND);
          await t.client.controller.controllerUnpublishVolume({ volumeId: v.id, nodeId: NODE });
          await t.client.controller.deleteVolume({ volumeId: v.id });
          assert.equal((await listAll()).some((e) => e.id === v.id), false, 'the volume is gone from ListVolumes');
        });
      }
    });
  });
}

conformance('in-process, MemFs + MemoryMounter', inProcessTarget);
conformance('built CLI, real bind mounts in a private mount namespace', cliTarget, rootSkipReason());
