/**
 * Hostile driver lifecycle, over real unix sockets and the real gRPC client: a driver's socket
 * removed and replaced while a call is in flight (a new driver removes the old socket and binds
 * the path, as csi-driver-host-path does at start), and a driver killed (SIGKILL, its own
 * process) in the middle of NodeStageVolume, then restarted. As kubelet, which dials the socket
 * path for every call: the call in flight fails UNAVAILABLE and is uncertain (the device is marked
 * uncertain, never mounted, never forgotten, and NodeStageVolume is retried), and the next call
 * reaches whatever serves the path now, never a stale channel to the old process.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { GrpcCsiClient, GrpcCsiDriverRegistry } from '../../src/adapters/grpc/client.js';
import { unixEndpoint } from '../../src/adapters/grpc/endpoint.js';
import { MemFs } from '../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../src/adapters/memory/memoryMounter.js';
import { FeatureGate } from '../../src/features/features.js';
import type { UniqueVolumeName } from '../../src/layout/names.js';
import type { JournalCallLine, JournalLine } from '../../src/mockdriver/journal.js';
import { startMockDriver, type MockDriver } from '../../src/mockdriver/mockDriver.js';
import { CsiCallError, GrpcStatus, isFinalCsiError, type NodeStageVolumeRequest, type VolumeCapability } from '../../src/ports/csi.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { InMemoryNode, DRIVER, NODE, ROOT } from '../support/inMemoryNode.js';
import { KillableCsiServer } from '../support/killableCsiServer.js';

const MOUNT_CAP: VolumeCapability = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
const STATE = '/var/lib/nodevol-mock';

/** A socket path as kubelet's plugin dir lays it out, in a fresh temp dir. */
function socketDir(): { dir: string; endpoint: string; socket: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'nodevol-restart-'));
  const socket = path.join(dir, 'plugins', DRIVER, 'csi.sock');
  mkdirSync(path.dirname(socket), { recursive: true });
  return { dir, endpoint: unixEndpoint(socket), socket };
}

function calls(lines: readonly JournalLine[], method: string): JournalCallLine[] {
  return lines.filter((l): l is JournalCallLine => !('phase' in l) && l.method === method);
}

describe('hostile CSI driver lifecycle: sockets replaced, drivers killed mid-call', () => {
  it('the socket removed and a new driver started on the path while a call is in flight: the next call reaches the new driver; the old call fails UNAVAILABLE (uncertain) when the old driver dies', { timeout: 60_000 }, async () => {
    const { dir, endpoint, socket } = socketDir();
    const old = await KillableCsiServer.start(endpoint);
    const registry = new GrpcCsiDriverRegistry({ timeoutMs: 30_000 });
    let fresh: MockDriver | undefined;
    try {
      registry.register(DRIVER, endpoint);
      const client = registry.client(DRIVER);
      assert.ok(client !== undefined);
      assert.deepEqual(await client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
      const stage: NodeStageVolumeRequest = { volumeId: 'vol-1', publishContext: {}, stagingTargetPath: `${ROOT}/g/globalmount`, volumeCapability: MOUNT_CAP, secrets: {}, volumeContext: {} };
      const inFlight = client.nodeStageVolume(stage).then(
        () => 'answered' as const,
        (err: unknown) => err,
      );
      await old.arrived('NodeStageVolume');

      // A new driver starts: it removes the socket file and binds the path; the old one lives on.
      rmSync(socket);
      const lines: JournalLine[] = [];
      const fs = MemFs.create();
      fresh = await startMockDriver({ endpoint, nodeId: NODE, driverName: DRIVER, stateDir: STATE, fs, mounter: new MemoryMounter(fs), onJournalLine: (l) => lines.push(l) });

      // 50 calls at once: every one answered by the new driver, through one new channel.
      const infos = await Promise.all(Array.from({ length: 50 }, () => client.nodeGetInfo()));
      assert.deepEqual(new Set(infos.map((i) => i.nodeId)), new Set([NODE]), 'answered by the new driver');
      assert.ok((await client.nodeGetCapabilities()).includes('STAGE_UNSTAGE_VOLUME'));
      assert.equal(calls(lines, 'NodeGetInfo').length, 50);
      assert.equal(calls(lines, 'NodeGetCapabilities').length, 1);
      assert.deepEqual(old.arrivals, ['NodeGetCapabilities ', 'NodeStageVolume vol-1'], 'nothing more went to the old process');
      assert.equal(client.reconnects, 1, 'one new channel, for the new socket');

      // The old driver is killed: the call it held fails UNAVAILABLE, which kubelet counts as uncertain.
      await old.kill();
      const err = await inFlight;
      assert.ok(err instanceof CsiCallError, `the held call failed, got ${String(err)}`);
      assert.equal(err.code, GrpcStatus.UNAVAILABLE, err.message);
      assert.equal(isFinalCsiError(err), false, 'uncertain: the stage may have happened');
      assert.equal((await client.nodeGetInfo()).nodeId, NODE, 'the new driver still answers');
      assert.equal(client.reconnects, 1);
    } finally {
      registry.close();
      await old.kill();
      await fresh?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a driver killed during NodeStageVolume and restarted: the device stays uncertain (not mounted, not forgotten) while it is down, then is staged exactly once', { timeout: 60_000 }, async () => {
    const k = await killDuringStage(TRUSTED);
    try {
      await k.whileDown((i) => {
        assert.equal(k.node.kubelet.asw.getDeviceMountState(k.name), 'DeviceMountUncertain', `step ${i}`);
        assert.deepEqual(k.node.kubelet.asw.getMountedVolumes(), []);
      });
      const restarted = await k.restart();
      await k.stepUntil(() => k.node.kubelet.asw.getMountedVolumes().length === 1, 'the pod volume to be mounted');
      await k.node.steps(5);
      assert.equal(k.node.kubelet.asw.getDeviceMountState(k.name), 'DeviceGloballyMounted');
      const stages = calls(k.lines, 'NodeStageVolume');
      assert.equal(stages.filter((l) => l.error === null).length, 1, 'staged once');
      assert.deepEqual(stages.filter((l) => l.error !== null), [], 'and no refused stage either');
      const stagedAt = restarted.volume(k.volumeId)?.stagedAt ?? '';
      assert.ok(stagedAt.startsWith(k.globalDir) && stagedAt.endsWith('/globalmount'), stagedAt);
      assert.equal(k.node.mounter.entries().filter((e) => e.mountPoint === stagedAt).length, 1, 'one mount at the staging path');
      assert.deepEqual(k.doomed.arrivals.filter((a) => a.startsWith('NodeStageVolume')), [`NodeStageVolume ${k.volumeId}`]);
    } finally {
      await k.cleanup();
    }
  });

  it('the pod deleted while the killed driver is down: once it is back, the uncertain device is unstaged (NodeUnstageVolume), not dropped', { timeout: 60_000 }, async () => {
    const k = await killDuringStage(TRUSTED);
    try {
      const uncertain = (i: number): void => assert.equal(k.node.kubelet.asw.getDeviceMountState(k.name), 'DeviceMountUncertain', `step ${i}`);
      await k.whileDown(uncertain);
      k.node.cluster.deletePod('pod-a');
      await k.whileDown(uncertain);
      assert.deepEqual(k.node.cluster.volumesInUse, [k.name], 'still reported in use');
      await k.restart();
      await k.stepUntil(() => !k.node.kubelet.asw.volumeExists(k.name), 'the volume to leave the actual state');
      assert.deepEqual(
        k.lines.filter((l): l is JournalCallLine => !('phase' in l) && l.method.startsWith('NodeUnstage')).map((l) => `${l.method} ${l.error === null ? 'OK' : l.error.name}`),
        ['NodeUnstageVolume OK'],
      );
      assert.deepEqual(calls(k.lines, 'NodeStageVolume'), []);
      await k.node.steps(5);
      assert.deepEqual(k.node.cluster.volumesInUse, []);
    } finally {
      await k.cleanup();
    }
  });

  it('upstream (CSIKeepUncertainMountOnFinalError off): a retry whose NodeGetCapabilities fails while the driver is down marks the device not mounted, and a pod deleted then is dropped without NodeUnstageVolume', { timeout: 60_000 }, async () => {
    const k = await killDuringStage(FeatureGate.of({ CSIGlobalMountReconstruction: true }));
    try {
      await k.whileDown(() => undefined);
      assert.equal(k.node.kubelet.asw.getDeviceMountState(k.name), 'DeviceNotMounted', "kubelet's markDeviceErrorState: a final error on an uncertain device");
      k.node.cluster.deletePod('pod-a');
      await k.restart();
      await k.stepUntil(() => !k.node.kubelet.asw.volumeExists(k.name), 'the volume to leave the actual state');
      await k.node.steps(5);
      assert.deepEqual(calls(k.lines, 'NodeUnstageVolume'), [], 'the gap: a stage that may have happened is never undone');
    } finally {
      await k.cleanup();
    }
  });
});

/** nodevol's trusted setting for an uncertain device: a final error on a retry keeps it uncertain. */
const TRUSTED = FeatureGate.of({ CSIGlobalMountReconstruction: true, CSIKeepUncertainMountOnFinalError: true });

/**
 * A pod using a volume the mock driver created and attached to the node; the driver process that
 * receives its NodeStageVolume is SIGKILLed in the middle of it. Resolves once the device is
 * uncertain. The node's kubelet talks to the driver over the real gRPC client and socket; the
 * mock driver shares the node's disk and mount table.
 */
async function killDuringStage(features: FeatureGate): Promise<{
  readonly node: InMemoryNode;
  readonly name: UniqueVolumeName;
  readonly volumeId: string;
  readonly globalDir: string;
  readonly doomed: KillableCsiServer;
  readonly lines: JournalLine[];
  stepUntil(cond: () => boolean, what: string): Promise<boolean>;
  whileDown(check: (step: number) => void): Promise<void>;
  restart(): Promise<MockDriver>;
  cleanup(): Promise<void>;
}> {
  const { dir, endpoint } = socketDir();
  const node = new InMemoryNode();
  const lines: JournalLine[] = [];
  const mock = (): Promise<MockDriver> =>
    startMockDriver({ endpoint, nodeId: NODE, driverName: DRIVER, stateDir: STATE, fs: node.fs, mounter: node.mounter, onJournalLine: (l) => lines.push(l) });
  const registry = new GrpcCsiDriverRegistry({ timeoutMs: 30_000 });
  let doomed: KillableCsiServer | undefined;
  let restarted: MockDriver | undefined;
  const cleanup = async (): Promise<void> => {
    registry.close();
    await doomed?.kill();
    await restarted?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // The driver knows the volume and attached it to the node (its state lives on the node's disk).
    const first = await mock();
    const setup = new GrpcCsiClient(endpoint);
    const volumeId = (await setup.controller.createVolume({ name: 'pv-1', volumeCapabilities: [MOUNT_CAP] })).volume?.volumeId ?? '';
    await setup.controller.controllerPublishVolume({ volumeId, nodeId: NODE, volumeCapability: MOUNT_CAP, readonly: false });
    setup.close();
    await first.stop();
    lines.length = 0;

    doomed = await KillableCsiServer.start(endpoint);
    registry.register(DRIVER, endpoint);
    const name = node.addVolume('pv-1', volumeId) as UniqueVolumeName;
    node.addPod('pod-a', ['pv-1']);
    await node.startKubelet(features, { csiDrivers: registry });
    const stepUntil = (cond: () => boolean, what: string): Promise<boolean> =>
      waitFor(
        async () => {
          await node.step();
          return cond();
        },
        { what, timeoutMs: 20_000, intervalMs: 5 },
      );
    const killed = doomed;
    await stepUntil(() => killed.arrivals.includes(`NodeStageVolume ${volumeId}`), 'NodeStageVolume at the doomed driver');
    await killed.kill();
    await stepUntil(() => node.kubelet.asw.getDeviceMountState(name) === 'DeviceMountUncertain', 'the device to be marked uncertain');
    const globalDir = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/`;
    return {
      node,
      name,
      volumeId,
      globalDir,
      doomed: killed,
      lines,
      stepUntil,
      // Passes a second apart while the driver is down (its stale socket refuses connections),
      // `check` after each, until the operation was retried and failed UNAVAILABLE three times.
      whileDown: async (check) => {
        const mark = node.logger.lines.length;
        const failures = (): typeof node.logger.lines => node.logger.lines.slice(mark).filter((l) => l.severity === 'E' && l.msg.startsWith('Operation for '));
        let i = 0;
        await waitFor(
          async () => {
            await node.step(1_000);
            check(i++);
            return failures().length >= 3;
          },
          { what: 'three failed retries while the driver is down', timeoutMs: 20_000, intervalMs: 5 },
        );
        for (const r of failures()) assert.match(r.msg, /code = UNAVAILABLE/);
        assert.ok(node.mounter.entries().every((e) => !e.mountPoint.startsWith(globalDir)), 'nothing staged');
      },
      restart: async () => {
        restarted = await mock();
        return restarted;
      },
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
