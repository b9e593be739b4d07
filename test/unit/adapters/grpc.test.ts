import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rename, rm, stat, writeFile } from 'node:fs/promises';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { GrpcCsiClient, GrpcCsiDriverRegistry, probeReady } from '../../../src/adapters/grpc/client.js';
import {
  fromWireNodePublishRequest,
  fromWireNodeStageRequest,
  toWireNodePublishRequest,
  toWireNodeStageRequest,
} from '../../../src/adapters/grpc/convert.js';
import { InvalidCsiEndpointError, unixEndpoint } from '../../../src/adapters/grpc/endpoint.js';
import { csiServices, protoPath } from '../../../src/adapters/grpc/loader.js';
import type * as wire from '../../../src/adapters/grpc/messages.js';
import { CsiStatusError, startCsiServer, type CsiCallContext, type CsiServer, type CsiServerHandlers } from '../../../src/adapters/grpc/server.js';
import {
  CsiCallError,
  GrpcStatus,
  isFinalCsiError,
  type NodePublishVolumeRequest,
  type NodeStageVolumeRequest,
} from '../../../src/ports/csi.js';

/** The decoded request of each RPC, by method name. */
type RequestOf = {
  [M in keyof wire.NodeRpcs]: wire.NodeRpcs[M][0];
} & {
  [M in keyof wire.ControllerRpcs]: wire.ControllerRpcs[M][0];
} & {
  [M in keyof wire.IdentityRpcs]: wire.IdentityRpcs[M][0];
};

interface Recorded {
  readonly method: string;
  readonly request: unknown;
}

/** Handlers that record every request; `failures` makes the next call of a method throw. */
function recordingHandlers(calls: Recorded[], failures: Map<string, unknown>, hung: CsiCallContext[]): CsiServerHandlers {
  const handle =
    <Req, Res>(method: string, answer: (req: Req) => Res) =>
    (req: Req, ctx: CsiCallContext): Promise<Res> => {
      calls.push({ method, request: req });
      if (failures.has(method)) {
        const err = failures.get(method);
        failures.delete(method);
        if (err === 'hang') {
          // Never answers; ends only when the call is cancelled (deadline) or the server closes.
          hung.push(ctx);
          return new Promise<Res>((_resolve, reject) => {
            ctx.signal.addEventListener('abort', () => reject(new Error('abandoned')), { once: true });
          });
        }
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
      return Promise.resolve(answer(req));
    };
  return {
    identity: {
      getPluginInfo: handle('GetPluginInfo', () => ({ name: 'hostpath.csi.k8s.io', vendorVersion: 'v1.17.0', manifest: { url: 'x' } })),
      getPluginCapabilities: handle('GetPluginCapabilities', () => ({
        capabilities: [{ service: { type: 'CONTROLLER_SERVICE' } }, { volumeExpansion: { type: 'ONLINE' } }],
      })),
      probe: handle('Probe', () => ({ ready: { value: false } })),
    },
    node: {
      nodeStageVolume: handle('NodeStageVolume', () => ({})),
      nodeUnstageVolume: handle('NodeUnstageVolume', () => ({})),
      nodePublishVolume: handle('NodePublishVolume', () => ({})),
      nodeUnpublishVolume: handle('NodeUnpublishVolume', () => ({})),
      nodeGetCapabilities: handle('NodeGetCapabilities', () => ({
        capabilities: [
          { rpc: { type: 'STAGE_UNSTAGE_VOLUME' } },
          { rpc: { type: 42 } }, // a capability newer than our proto
          { rpc: { type: 'VOLUME_MOUNT_GROUP' } },
          { rpc: { type: 'STAGE_UNSTAGE_VOLUME' } },
          {},
          { rpc: { type: 'SINGLE_NODE_MULTI_WRITER' } },
        ],
      })),
      nodeGetInfo: handle('NodeGetInfo', () => ({
        nodeId: 'node-1',
        maxVolumesPerNode: 2 ** 40,
        accessibleTopology: { segments: { 'topology.kubernetes.io/zone': 'z1' } },
      })),
    },
    controller: {
      createVolume: handle('CreateVolume', (req: wire.CreateVolumeRequest) => ({
        volume: { volumeId: `id-${req.name}`, capacityBytes: req.capacityRange?.requiredBytes ?? 0, volumeContext: { pool: 'a' } },
      })),
      deleteVolume: handle('DeleteVolume', () => ({})),
      controllerPublishVolume: handle('ControllerPublishVolume', () => ({ publishContext: { devicePath: '/dev/sdb' } })),
      controllerUnpublishVolume: handle('ControllerUnpublishVolume', () => ({})),
      controllerGetCapabilities: handle('ControllerGetCapabilities', () => ({
        capabilities: [{ rpc: { type: 'CREATE_DELETE_VOLUME' } }, { rpc: { type: 'PUBLISH_UNPUBLISH_VOLUME' } }, { rpc: { type: 99 } }],
      })),
    },
  };
}

const STAGE: NodeStageVolumeRequest = {
  volumeId: 'vol-1',
  publishContext: { devicePath: '/dev/sdb', 'lun': '3' },
  stagingTargetPath: '/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/abc/globalmount',
  volumeCapability: {
    mount: { fsType: 'xfs', mountFlags: ['noatime', 'nouuid'], volumeMountGroup: '2000' },
    accessMode: { mode: 'SINGLE_NODE_SINGLE_WRITER' },
  },
  secrets: { password: 's3cr3t', user: 'admin' },
  volumeContext: { 'csi.storage.k8s.io/pod.name': 'web-0', storage: 'fast' },
};

const PUBLISH_BLOCK: NodePublishVolumeRequest = {
  volumeId: 'vol-b',
  publishContext: {},
  stagingTargetPath: '/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-b',
  targetPath: '/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-b/pod-uid',
  volumeCapability: { block: {}, accessMode: { mode: 'MULTI_NODE_MULTI_WRITER' } },
  readonly: true,
  secrets: {},
  volumeContext: {},
};

async function rejectsWith(p: Promise<unknown>, code: number | undefined): Promise<CsiCallError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof CsiCallError, `expected a CsiCallError, got ${String(err)}`);
    assert.equal(err.code, code, `code ${err.code} (${err.details})`);
    return err;
  }
  assert.fail('expected the call to fail');
}

describe('CSI over gRPC (unix socket)', () => {
  let dir: string;
  let server: CsiServer;
  let client: GrpcCsiClient;
  const calls: Recorded[] = [];
  const failures = new Map<string, unknown>();
  const hung: CsiCallContext[] = [];
  const clients: GrpcCsiClient[] = [];
  const servers: CsiServer[] = [];

  const lastRequest = <M extends keyof RequestOf>(method: M): RequestOf[M] => {
    const c = calls.filter((x) => x.method === method).at(-1);
    assert.ok(c !== undefined, `no ${method} call recorded`);
    return c.request as RequestOf[M];
  };
  const newClient = (endpoint: string, options?: ConstructorParameters<typeof GrpcCsiClient>[1]): GrpcCsiClient => {
    const c = new GrpcCsiClient(endpoint, options);
    clients.push(c);
    return c;
  };

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-grpc-'));
    server = await startCsiServer(unixEndpoint(path.join(dir, 'csi.sock')), recordingHandlers(calls, failures, hung), { shutdownGraceMs: 1000 });
    servers.push(server);
    client = newClient(server.endpoint, { timeoutMs: 10_000 });
  });

  after(async () => {
    for (const c of clients) c.close();
    await Promise.all(servers.map((s) => s.close()));
    await rm(dir, { recursive: true, force: true });
  });

  describe('the proto', () => {
    it('is found relative to the compiled module', () => {
      assert.ok(path.isAbsolute(protoPath()));
      assert.ok(protoPath().endsWith(path.join('proto', 'csi', 'v1', 'csi.proto')));
      assert.ok(existsSync(protoPath()));
      assert.equal(csiServices().node.methods.NodeStageVolume.path, '/csi.v1.Node/NodeStageVolume');
      assert.equal(csiServices().identity.methods.Probe.path, '/csi.v1.Identity/Probe');
      assert.equal(csiServices().controller.methods.ControllerPublishVolume.path, '/csi.v1.Controller/ControllerPublishVolume');
    });

    it('encodes NodeStageVolumeRequest with the spec field numbers (hand-computed bytes)', () => {
      const bytes = csiServices().node.methods.NodeStageVolume.requestSerialize({
        volumeId: 'vol-1',
        stagingTargetPath: '/s',
        volumeCapability: { mount: { fsType: 'ext4', volumeMountGroup: '2000' }, accessMode: { mode: 'SINGLE_NODE_MULTI_WRITER' } },
        secrets: { k: 'v' },
      });
      const ascii = (s: string): number[] => [...Buffer.from(s)];
      const expected = [
        // 1: volume_id, wire type 2 -> tag (1 << 3) | 2 = 0x0a
        0x0a, 5, ...ascii('vol-1'),
        // 3: staging_target_path -> 0x1a
        0x1a, 2, ...ascii('/s'),
        // 4: volume_capability -> 0x22, 18 bytes
        0x22, 18,
        //   oneof access_type, 2: mount -> 0x12, 12 bytes
        0x12, 12,
        //     1: fs_type -> 0x0a
        0x0a, 4, ...ascii('ext4'),
        //     3: volume_mount_group -> 0x1a
        0x1a, 4, ...ascii('2000'),
        //   3: access_mode -> 0x1a, 2 bytes: 1: mode (varint, tag 0x08) = SINGLE_NODE_MULTI_WRITER = 7
        0x1a, 2, 0x08, 7,
        // 5: secrets, a map entry (1: key, 2: value) -> 0x2a
        0x2a, 6, 0x0a, 1, ...ascii('k'), 0x12, 1, ...ascii('v'),
      ];
      assert.deepEqual([...bytes], expected);
    });

    it('the client leaves proto3 defaults off the wire, as Go does, but keeps set (empty) messages', () => {
      const { NodeStageVolume, NodePublishVolume } = csiServices().node.methods;
      const emptyMount = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'UNKNOWN' } } as const;
      const stage = NodeStageVolume.requestSerialize(
        toWireNodeStageRequest({ volumeId: 'v', publishContext: {}, stagingTargetPath: '', volumeCapability: emptyMount, secrets: {}, volumeContext: {} }),
      );
      // 1: "v"; 4: { 2: mount {} (the oneof choice), 3: access_mode {} }
      assert.deepEqual([...stage], [0x0a, 1, 0x76, 0x22, 4, 0x12, 0, 0x1a, 0]);
      const publish = NodePublishVolume.requestSerialize(
        toWireNodePublishRequest({ ...PUBLISH_BLOCK, volumeId: 'v', stagingTargetPath: '', targetPath: '/t', readonly: false }),
      );
      // 1: "v"; 4: "/t"; 5: { 1: block {}, 3: { 1: MULTI_NODE_MULTI_WRITER = 5 } }; no 6 (readonly false)
      assert.deepEqual([...publish], [0x0a, 1, 0x76, 0x22, 2, 0x2f, 0x74, 0x2a, 6, 0x0a, 0, 0x1a, 2, 0x08, 5]);
    });

    it('decodes hand-made NodePublishVolumeRequest bytes (block oneof, readonly, SINGLE_NODE_SINGLE_WRITER)', () => {
      const bytes = Buffer.from([
        0x0a, 1, 0x76, // 1: volume_id "v"
        0x22, 2, 0x2f, 0x74, // 4: target_path "/t"
        0x2a, 6, 0x0a, 0, 0x1a, 2, 0x08, 6, // 5: volume_capability { block {} , access_mode { mode: 6 } }
        0x30, 1, // 6: readonly true
      ]);
      const req = csiServices().node.methods.NodePublishVolume.requestDeserialize(bytes);
      assert.equal(req.volumeId, 'v');
      assert.equal(req.targetPath, '/t');
      assert.equal(req.stagingTargetPath, '');
      assert.equal(req.readonly, true);
      assert.equal(req.volumeCapability?.accessType, 'block');
      assert.deepEqual(req.volumeCapability.block, {});
      assert.equal(req.volumeCapability.mount, undefined);
      assert.equal(req.volumeCapability.accessMode?.mode, 'SINGLE_NODE_SINGLE_WRITER');
      assert.deepEqual(req.secrets, {});
    });
  });

  describe('Node service', () => {
    it('NodeGetCapabilities parses to our capability names (unknown and duplicate entries dropped)', async () => {
      assert.deepEqual(await client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME', 'VOLUME_MOUNT_GROUP', 'SINGLE_NODE_MULTI_WRITER']);
    });

    it('NodeGetCapabilities: concurrent callers share calls, each answered by a call sent after it asked', async () => {
      const c = newClient(server.endpoint, { timeoutMs: 10_000 });
      const count = (): number => calls.filter((x) => x.method === 'NodeGetCapabilities').length;
      const before = count();
      const answers = await Promise.all(Array.from({ length: 20 }, () => c.nodeGetCapabilities()));
      for (const a of answers) assert.deepEqual(a, ['STAGE_UNSTAGE_VOLUME', 'VOLUME_MOUNT_GROUP', 'SINGLE_NODE_MULTI_WRITER']);
      // The first caller's call, and one more for everyone who asked while it was in flight.
      assert.equal(count() - before, 2);
      // Nothing is kept once the calls settled: the next question is a new call.
      await c.nodeGetCapabilities();
      assert.equal(count() - before, 3);
      // A failure reaches every caller that shared the call, and is not kept either.
      failures.set('NodeGetCapabilities', new CsiStatusError(GrpcStatus.UNAVAILABLE, 'driver restarting'));
      const first = c.nodeGetCapabilities();
      const shared = c.nodeGetCapabilities();
      await rejectsWith(first, GrpcStatus.UNAVAILABLE);
      assert.deepEqual(await shared, ['STAGE_UNSTAGE_VOLUME', 'VOLUME_MOUNT_GROUP', 'SINGLE_NODE_MULTI_WRITER'], 'asked during the failed call: answered by the next one');
      const [x, y] = await Promise.all([c.nodeGetCapabilities(), c.nodeGetCapabilities()]);
      assert.deepEqual(x, y);
    });

    it('NodeStageVolume: every field arrives intact (maps, mount flags, volume_mount_group, access mode)', async () => {
      await client.nodeStageVolume(STAGE);
      const got = lastRequest('NodeStageVolume');
      assert.equal(got.volumeId, 'vol-1');
      assert.equal(got.stagingTargetPath, STAGE.stagingTargetPath);
      assert.deepEqual(got.publishContext, { devicePath: '/dev/sdb', lun: '3' });
      assert.deepEqual(got.secrets, { password: 's3cr3t', user: 'admin' });
      assert.deepEqual(got.volumeContext, { 'csi.storage.k8s.io/pod.name': 'web-0', storage: 'fast' });
      assert.equal(got.volumeCapability?.accessType, 'mount');
      assert.equal(got.volumeCapability.block, undefined);
      assert.deepEqual(got.volumeCapability.mount, { fsType: 'xfs', mountFlags: ['noatime', 'nouuid'], volumeMountGroup: '2000' });
      assert.deepEqual(got.volumeCapability.accessMode, { mode: 'SINGLE_NODE_SINGLE_WRITER' });
      // And back to the engine's type, unchanged.
      assert.deepEqual(fromWireNodeStageRequest(got), STAGE);
    });

    it('NodeStageVolume of a block volume sends the block member of the oneof', async () => {
      await client.nodeStageVolume({ ...STAGE, volumeId: 'vol-b', volumeCapability: { block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } } });
      const got = lastRequest('NodeStageVolume');
      assert.equal(got.volumeCapability?.accessType, 'block');
      assert.deepEqual(got.volumeCapability.block, {});
      assert.equal(got.volumeCapability.mount, undefined);
      assert.equal(got.volumeCapability.accessMode?.mode, 'SINGLE_NODE_WRITER');
    });

    it('NodePublishVolume: readonly block publish and read-write mount publish', async () => {
      await client.nodePublishVolume(PUBLISH_BLOCK);
      const block = lastRequest('NodePublishVolume');
      assert.equal(block.readonly, true);
      assert.equal(block.targetPath, PUBLISH_BLOCK.targetPath);
      assert.equal(block.stagingTargetPath, PUBLISH_BLOCK.stagingTargetPath);
      assert.equal(block.volumeCapability?.accessType, 'block');
      assert.equal(block.volumeCapability.accessMode?.mode, 'MULTI_NODE_MULTI_WRITER');
      assert.deepEqual(fromWireNodePublishRequest(block), PUBLISH_BLOCK);

      const mount: NodePublishVolumeRequest = {
        ...PUBLISH_BLOCK,
        volumeId: 'vol-1',
        stagingTargetPath: '', // a driver without STAGE_UNSTAGE_VOLUME
        targetPath: '/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/pvc-1/mount',
        volumeCapability: { mount: { fsType: '', mountFlags: ['ro', 'noexec'], volumeMountGroup: '' }, accessMode: { mode: 'MULTI_NODE_READER_ONLY' } },
        readonly: false,
        secrets: { token: 't' },
        volumeContext: { share: '//srv/a' },
        publishContext: { lun: '0' },
      };
      await client.nodePublishVolume(mount);
      const got = lastRequest('NodePublishVolume');
      assert.equal(got.readonly, false);
      assert.equal(got.stagingTargetPath, '');
      assert.deepEqual(got.volumeCapability?.mount?.mountFlags, ['ro', 'noexec']);
      assert.equal(got.volumeCapability?.accessMode?.mode, 'MULTI_NODE_READER_ONLY');
      assert.deepEqual(fromWireNodePublishRequest(got), mount);
    });

    it('NodeUnpublishVolume and NodeUnstageVolume', async () => {
      await client.nodeUnpublishVolume({ volumeId: 'vol-1', targetPath: '/t/mount' });
      assert.deepEqual(lastRequest('NodeUnpublishVolume'), { volumeId: 'vol-1', targetPath: '/t/mount' });
      await client.nodeUnstageVolume({ volumeId: 'vol-1', stagingTargetPath: '/g/globalmount' });
      assert.deepEqual(lastRequest('NodeUnstageVolume'), { volumeId: 'vol-1', stagingTargetPath: '/g/globalmount' });
    });

    it('NodeGetInfo (int64 as a number, topology map)', async () => {
      const info = await client.nodeGetInfo();
      assert.deepEqual(info, { nodeId: 'node-1', maxVolumesPerNode: 2 ** 40, accessibleTopology: { segments: { 'topology.kubernetes.io/zone': 'z1' } } });
    });

    it('a capability with both access types is refused locally, before the wire', async () => {
      const before = calls.length;
      const err = await rejectsWith(
        client.nodeStageVolume({
          ...STAGE,
          volumeCapability: { block: {}, mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } },
        }),
        undefined,
      );
      assert.equal(err.method, 'NodeStageVolume');
      // No gRPC status: kubelet's isFinalError counts it as uncertain.
      assert.equal(isFinalCsiError(err), false);
      assert.equal(calls.length, before);
    });
  });

  describe('Identity and Controller services', () => {
    it('GetPluginInfo, GetPluginCapabilities, Probe', async () => {
      assert.deepEqual(await client.identity.getPluginInfo(), { name: 'hostpath.csi.k8s.io', vendorVersion: 'v1.17.0', manifest: { url: 'x' } });
      const caps = await client.identity.getPluginCapabilities();
      assert.deepEqual(caps.capabilities, [
        { service: { type: 'CONTROLLER_SERVICE' }, type: 'service' },
        { volumeExpansion: { type: 'ONLINE' }, type: 'volumeExpansion' },
      ]);
      const probe = await client.identity.probe();
      assert.deepEqual(probe, { ready: { value: false } });
      assert.equal(probeReady(probe), false);
      assert.equal(probeReady({ ready: null }), true);
    });

    it('CreateVolume, ControllerPublishVolume, ControllerUnpublishVolume, DeleteVolume, ControllerGetCapabilities', async () => {
      const created = await client.controller.createVolume({
        name: 'pvc-1',
        capacityRange: { requiredBytes: 10 * 2 ** 30 },
        volumeCapabilities: [STAGE.volumeCapability, { block: {}, accessMode: { mode: 'SINGLE_NODE_MULTI_WRITER' } }],
        parameters: { type: 'ssd' },
        secrets: { k: 'v' },
        volumeContentSource: { snapshot: { snapshotId: 'snap-1' } },
        accessibilityRequirements: { requisite: [{ segments: { zone: 'z1' } }] },
      });
      assert.equal(created.volume?.volumeId, 'id-pvc-1');
      assert.equal(created.volume.capacityBytes, 10 * 2 ** 30);
      assert.deepEqual(created.volume.volumeContext, { pool: 'a' });
      const req = lastRequest('CreateVolume');
      assert.deepEqual(req.capacityRange, { requiredBytes: 10 * 2 ** 30, limitBytes: 0 });
      assert.deepEqual(req.volumeCapabilities.map((c) => [c.accessType, c.accessMode?.mode]), [
        ['mount', 'SINGLE_NODE_SINGLE_WRITER'],
        ['block', 'SINGLE_NODE_MULTI_WRITER'],
      ]);
      assert.deepEqual(req.parameters, { type: 'ssd' });
      assert.deepEqual(req.secrets, { k: 'v' });
      assert.equal(req.volumeContentSource?.type, 'snapshot');
      assert.equal(req.volumeContentSource.snapshot?.snapshotId, 'snap-1');
      assert.deepEqual(req.accessibilityRequirements, { requisite: [{ segments: { zone: 'z1' } }], preferred: [] });

      const published = await client.controller.controllerPublishVolume({
        volumeId: 'id-pvc-1',
        nodeId: 'node-1',
        volumeCapability: STAGE.volumeCapability,
        readonly: true,
        volumeContext: { pool: 'a' },
      });
      assert.deepEqual(published.publishContext, { devicePath: '/dev/sdb' });
      const pub = lastRequest('ControllerPublishVolume');
      assert.equal(pub.nodeId, 'node-1');
      assert.equal(pub.readonly, true);
      assert.deepEqual(pub.volumeCapability?.mount?.mountFlags, ['noatime', 'nouuid']);
      assert.deepEqual(pub.volumeContext, { pool: 'a' });

      await client.controller.controllerUnpublishVolume({ volumeId: 'id-pvc-1', nodeId: 'node-1' });
      assert.deepEqual(lastRequest('ControllerUnpublishVolume'), { volumeId: 'id-pvc-1', nodeId: 'node-1', secrets: {} });
      await client.controller.deleteVolume({ volumeId: 'id-pvc-1', secrets: { k: 'v' } });
      assert.deepEqual(lastRequest('DeleteVolume'), { volumeId: 'id-pvc-1', secrets: { k: 'v' } });
      assert.deepEqual(await client.controller.controllerGetCapabilities(), ['CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME']);
    });
  });

  describe('errors', () => {
    it('a handler status (NOT_FOUND) arrives as a final CsiCallError with its details', async () => {
      failures.set('NodeUnstageVolume', new CsiStatusError(GrpcStatus.NOT_FOUND, 'volume vol-9 not found'));
      const err = await rejectsWith(client.nodeUnstageVolume({ volumeId: 'vol-9', stagingTargetPath: '/g' }), GrpcStatus.NOT_FOUND);
      assert.equal(err.method, 'NodeUnstageVolume');
      assert.equal(err.details, 'volume vol-9 not found');
      assert.match(err.message, /code = NOT_FOUND desc = volume vol-9 not found/);
      assert.equal(isFinalCsiError(err), true);
    });

    it('a CsiCallError thrown by a handler keeps its code (UNAVAILABLE: uncertain)', async () => {
      failures.set('NodeStageVolume', new CsiCallError('NodeStageVolume', GrpcStatus.UNAVAILABLE, 'driver busy'));
      const err = await rejectsWith(client.nodeStageVolume(STAGE), GrpcStatus.UNAVAILABLE);
      assert.equal(err.details, 'driver busy');
      assert.equal(isFinalCsiError(err), false);
    });

    it('a plain Error thrown by a handler answers UNKNOWN', async () => {
      failures.set('NodePublishVolume', new Error('boom'));
      const err = await rejectsWith(client.nodePublishVolume(PUBLISH_BLOCK), GrpcStatus.UNKNOWN);
      assert.equal(err.details, 'boom');
      assert.equal(isFinalCsiError(err), true);
    });

    it('a missing handler, and a service not served, answer UNIMPLEMENTED', async () => {
      const s = await startCsiServer(unixEndpoint(path.join(dir, 'partial.sock')), { identity: {}, node: {} });
      servers.push(s);
      const c = newClient(s.endpoint, { timeoutMs: 5000 });
      const err = await rejectsWith(c.nodeGetCapabilities(), GrpcStatus.UNIMPLEMENTED);
      assert.equal(err.method, 'NodeGetCapabilities');
      await rejectsWith(c.identity.probe(), GrpcStatus.UNIMPLEMENTED);
      await rejectsWith(c.controller.controllerGetCapabilities(), GrpcStatus.UNIMPLEMENTED);
    });

    it('a driver that never answers: DEADLINE_EXCEEDED after the client deadline (uncertain)', async () => {
      const quick = newClient(server.endpoint, { timeoutMs: 200 });
      failures.set('NodeStageVolume', 'hang');
      // DEADLINE_EXCEEDED is the client's own deadline firing (the server never answers): no stopwatch needed.
      const err = await rejectsWith(quick.nodeStageVolume(STAGE), GrpcStatus.DEADLINE_EXCEEDED);
      assert.equal(err.method, 'NodeStageVolume');
      assert.equal(isFinalCsiError(err), false);
      // The server saw the call and learns it was cancelled.
      const ctx = hung.at(-1);
      assert.ok(ctx !== undefined);
      if (!ctx.signal.aborted) {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
      }
      assert.equal(ctx.signal.aborted, true);
    });

    it('no server on the socket: UNAVAILABLE (uncertain)', async () => {
      const nobody = newClient(unixEndpoint(path.join(dir, 'nobody.sock')), { timeoutMs: 5000 });
      const err = await rejectsWith(nobody.nodeGetCapabilities(), GrpcStatus.UNAVAILABLE);
      assert.equal(isFinalCsiError(err), false);
    });

    it('a closed client fails calls locally (no code: uncertain, as kubelet counts an error without a gRPC status)', async () => {
      const c = newClient(server.endpoint);
      c.close();
      c.close();
      assert.equal(c.closed, true);
      const err = await rejectsWith(c.nodeGetCapabilities(), undefined);
      assert.equal(isFinalCsiError(err), false);
    });
  });

  describe('endpoints', () => {
    it('only unix:///absolute/path endpoints are accepted', async () => {
      for (const bad of ['tcp://127.0.0.1:10000', '127.0.0.1:10000', 'dns:///csi.example:443', 'unix:csi.sock', 'unix:/tmp/csi.sock', 'unix://csi.sock', 'unix://', 'unix:///tmp/dir/', '/tmp/csi.sock', `unix:///${'x'.repeat(120)}.sock`]) {
        assert.throws(() => new GrpcCsiClient(bad), InvalidCsiEndpointError, bad);
        await assert.rejects(startCsiServer(bad, { identity: {}, node: {} }), InvalidCsiEndpointError, bad);
      }
      assert.throws(() => new GrpcCsiClient('unix:///tmp/x.sock', { timeoutMs: 0 }), RangeError);
      assert.equal(new GrpcCsiDriverRegistry().client('none'), undefined);
      assert.throws(() => new GrpcCsiDriverRegistry().register('d', 'tcp://1.2.3.4:5'), InvalidCsiEndpointError);
    });

    it('a stale socket file is replaced; a live socket or a regular file is refused', async () => {
      // A dead socket: bound by a server that is gone (renamed away before close so it is not unlinked).
      const stale = path.join(dir, 'stale.sock');
      const tmpListen = path.join(dir, 'tmp-listen.sock');
      const dead = net.createServer();
      await new Promise<void>((resolve) => dead.listen(tmpListen, resolve));
      await rename(tmpListen, stale);
      await new Promise<void>((resolve) => dead.close(() => resolve()));
      assert.ok((await stat(stale)).isSocket());
      const s = await startCsiServer(unixEndpoint(stale), recordingHandlers([], new Map(), []));
      servers.push(s);
      const c = newClient(s.endpoint, { timeoutMs: 5000 });
      assert.deepEqual((await c.identity.getPluginInfo()).name, 'hostpath.csi.k8s.io');

      // The socket is live now: a second server must not steal it.
      await assert.rejects(startCsiServer(unixEndpoint(stale), { identity: {}, node: {} }), /another server is listening/);
      assert.deepEqual((await c.identity.getPluginInfo()).name, 'hostpath.csi.k8s.io');

      const file = path.join(dir, 'not-a-socket');
      await writeFile(file, 'data');
      await assert.rejects(startCsiServer(unixEndpoint(file), { identity: {}, node: {} }), /not a socket/);
      assert.ok((await stat(file)).isFile());
    });

    it('close() removes the socket and is idempotent', async () => {
      const sock = path.join(dir, 'closing.sock');
      const s = await startCsiServer(unixEndpoint(sock), { identity: {}, node: {} });
      assert.ok(existsSync(sock));
      await Promise.all([s.close(), s.close()]);
      await s.close();
      assert.equal(existsSync(sock), false);
    });
  });

  describe('GrpcCsiDriverRegistry', () => {
    it('creates clients lazily, keeps them, and replaces them when a driver moves', async () => {
      const registry = new GrpcCsiDriverRegistry({ timeoutMs: 5000 });
      try {
        registry.register('hostpath.csi.k8s.io', server.endpoint);
        assert.deepEqual(registry.drivers(), ['hostpath.csi.k8s.io']);
        assert.equal(registry.endpoint('hostpath.csi.k8s.io'), server.endpoint);
        const c1 = registry.client('hostpath.csi.k8s.io');
        assert.ok(c1 !== undefined);
        assert.equal(registry.client('hostpath.csi.k8s.io'), c1);
        assert.deepEqual(await c1.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME', 'VOLUME_MOUNT_GROUP', 'SINGLE_NODE_MULTI_WRITER']);

        registry.register('hostpath.csi.k8s.io', server.endpoint); // same endpoint: same client
        assert.equal(registry.client('hostpath.csi.k8s.io'), c1);

        registry.register('hostpath.csi.k8s.io', unixEndpoint(path.join(dir, 'moved.sock')));
        assert.equal(c1.closed, true);
        const c2 = registry.client('hostpath.csi.k8s.io');
        assert.ok(c2 !== undefined && c2 !== c1);
        assert.equal(c2.endpoint, unixEndpoint(path.join(dir, 'moved.sock')));

        assert.equal(registry.unregister('hostpath.csi.k8s.io'), true);
        assert.equal(c2.closed, true);
        assert.equal(registry.client('hostpath.csi.k8s.io'), undefined);
        assert.equal(registry.unregister('hostpath.csi.k8s.io'), false);
      } finally {
        registry.close();
      }
    });
  });
});
