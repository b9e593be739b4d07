// The mock CSI driver in-process: a real gRPC server on a unix socket in a temp dir, driven by
// GrpcCsiClient; storage, staging and target paths in a MemFs, mounts in a MemoryMounter (so no
// root is needed). The faults file and the journal are real files in the temp dir.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../../src/adapters/memory/memoryMounter.js';
import { GrpcCsiClient } from '../../../src/adapters/grpc/client.js';
import { unixEndpoint } from '../../../src/adapters/grpc/endpoint.js';
import { parseFaults } from '../../../src/mockdriver/faults.js';
import { REDACTED, type JournalCallLine, type JournalLine, type JournalPhaseLine } from '../../../src/mockdriver/journal.js';
import { EXIT_FAULT_CODE } from '../../../src/mockdriver/callPipeline.js';
import { packageVersion } from '../../../src/mockdriver/identityServer.js';
import { startMockDriver, type MockDriver, type MockDriverOptions } from '../../../src/mockdriver/mockDriver.js';
import { DEFAULT_CAPACITY_BYTES, mockBackingPaths, mockBlockDevicePath } from '../../../src/mockdriver/volumes.js';
import { mockVolumeId } from '../../../src/mockdriver/volumeId.js';
import { readMockState, renderVolumeRecord, volumeRecordPath } from '../../../src/mockdriver/state.js';
import {
  CsiCallError,
  GrpcStatus,
  type NodePublishVolumeRequest,
  type NodeStageVolumeRequest,
  type NodeUnpublishVolumeRequest,
  type NodeUnstageVolumeRequest,
  type VolumeCapability,
} from '../../../src/ports/csi.js';
import { createKlogLogger } from '../../../src/logging/klog.js';
import { FakeClock } from '../../support/fakeClock.js';
import type { Mounter } from '../../../src/ports/mounter.js';
import { FsError } from '../../../src/ports/fs.js';

// This file runs from dist/test/unit/csi/: the repo root is four levels up.
const BIN = path.resolve(import.meta.dirname, '..', '..', '..', '..', 'bin', 'nodevol.js');
const DRIVER = 'mock.csi.nodevol.io';
const NODE = 'node-1';
const K = '/var/lib/kubelet';
const STATE = '/var/lib/nodevol-mock';
const NAME = 'pvc-1';
const VOL = mockVolumeId(NAME);
const STAGING = `${K}/plugins/kubernetes.io/csi/${DRIVER}/4e29aa01861d/globalmount`;
const STAGING2 = `${K}/plugins/kubernetes.io/csi/${DRIVER}/5f3abb02972e/globalmount`;
const POD_DIR = `${K}/pods/6f1c0000-4e5f/volumes/kubernetes.io~csi/pvc-1`;
const TARGET = `${POD_DIR}/mount`;
const POD2_DIR = `${K}/pods/7a2d0000-5f60/volumes/kubernetes.io~csi/pvc-1`;
const TARGET2 = `${POD2_DIR}/mount`;
const BLOCK_NAME = 'pvc-b';
const BVOL = mockVolumeId(BLOCK_NAME);
const BLOCK_STAGING = `${K}/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-b`;
const BLOCK_PUBLISH_DIR = `${K}/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-b`;
const BLOCK_TARGET = `${BLOCK_PUBLISH_DIR}/6f1c0000-4e5f`;

const MOUNT_CAP: VolumeCapability = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
const BLOCK_CAP: VolumeCapability = { block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
/** A capability with an access mode but no access type: what the driver reads as "missing". */
const NO_CAP: VolumeCapability = { accessMode: { mode: 'SINGLE_NODE_WRITER' } };

function stageReq(over: Partial<NodeStageVolumeRequest> = {}): NodeStageVolumeRequest {
  return { volumeId: VOL, publishContext: {}, stagingTargetPath: STAGING, volumeCapability: MOUNT_CAP, secrets: {}, volumeContext: {}, ...over };
}
function unstageReq(over: Partial<NodeUnstageVolumeRequest> = {}): NodeUnstageVolumeRequest {
  return { volumeId: VOL, stagingTargetPath: STAGING, ...over };
}
function publishReq(over: Partial<NodePublishVolumeRequest> = {}): NodePublishVolumeRequest {
  return {
    volumeId: VOL, publishContext: {}, stagingTargetPath: STAGING, targetPath: TARGET, volumeCapability: MOUNT_CAP,
    readonly: false, secrets: {}, volumeContext: {}, ...over,
  };
}
function unpublishReq(over: Partial<NodeUnpublishVolumeRequest> = {}): NodeUnpublishVolumeRequest {
  return { volumeId: VOL, targetPath: TARGET, ...over };
}
const blockStage = (over: Partial<NodeStageVolumeRequest> = {}): NodeStageVolumeRequest =>
  stageReq({ volumeId: BVOL, stagingTargetPath: BLOCK_STAGING, volumeCapability: BLOCK_CAP, ...over });
const blockPublish = (over: Partial<NodePublishVolumeRequest> = {}): NodePublishVolumeRequest =>
  publishReq({ volumeId: BVOL, stagingTargetPath: BLOCK_STAGING, targetPath: BLOCK_TARGET, volumeCapability: BLOCK_CAP, ...over });

async function rejectsWithCode(p: Promise<unknown>, code: number, detail?: RegExp): Promise<CsiCallError> {
  let caught: CsiCallError | undefined;
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof CsiCallError, `expected a CsiCallError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    if (detail !== undefined) assert.match(err.details, detail);
    caught = err;
    return true;
  });
  return caught!;
}

/** A journal line someone waits for: resolved by the driver's onJournalLine hook, failed after a bound. */
interface LineWaiter {
  readonly match: (line: JournalLine) => boolean;
  readonly resolve: (line: JournalLine) => void;
}

/** One node: a MemFs where kubelet made its dirs, a MemoryMounter, a real temp dir for the socket, faults and journal. */
class Env {
  readonly fs = MemFs.create();
  readonly mounter = new MemoryMounter(this.fs);
  readonly logs: string[] = [];
  readonly exits: number[] = [];
  readonly drivers: MockDriver[] = [];
  readonly clients: GrpcCsiClient[] = [];
  /** Every journal line the drivers produced, in order (from the onJournalLine hook). */
  readonly lines: JournalLine[] = [];
  #waiters: LineWaiter[] = [];
  dir = '';

  /**
   * Resolves with the first journal line (already produced or to come) that matches; fails the
   * test if none arrives within `boundMs` (a bound, not a timing assertion).
   */
  line(match: (line: JournalLine) => boolean, what: string, boundMs = 10_000): Promise<JournalLine> {
    const seen = this.lines.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise<JournalLine>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no journal line for ${what} within ${boundMs} ms`)), boundMs);
      this.#waiters.push({
        match,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
    });
  }

  #onLine(line: JournalLine): void {
    this.lines.push(line);
    const ready = this.#waiters.filter((w) => w.match(line));
    this.#waiters = this.#waiters.filter((w) => !w.match(line));
    for (const w of ready) w.resolve(line);
  }

  get endpoint(): string {
    return unixEndpoint(path.join(this.dir, 'csi.sock'));
  }
  get journalFile(): string {
    return path.join(this.dir, 'journal.jsonl');
  }
  get faultsFile(): string {
    return path.join(this.dir, 'faults.yaml');
  }

  async init(): Promise<void> {
    this.dir = await mkdtemp(path.join(tmpdir(), 'nodevol-mock-'));
    for (const d of [STAGING, STAGING2, POD_DIR, POD2_DIR, BLOCK_STAGING, BLOCK_PUBLISH_DIR]) {
      await this.fs.mkdir(d, { recursive: true, mode: 0o750 });
    }
  }

  async start(over: Partial<MockDriverOptions> = {}): Promise<{ driver: MockDriver; client: GrpcCsiClient }> {
    const logger = createKlogLogger({ format: 'json', verbosity: 5, sink: (l) => this.logs.push(l), nowMs: () => Date.now(), pid: 1 });
    const driver = await startMockDriver({
      endpoint: this.endpoint,
      nodeId: NODE,
      driverName: DRIVER,
      stateDir: STATE,
      fs: this.fs,
      mounter: this.mounter,
      logger,
      journalFile: this.journalFile,
      faultsFile: this.faultsFile,
      exit: (code) => this.exits.push(code),
      shutdownGraceMs: 1000,
      onJournalLine: (l) => this.#onLine(l),
      ...over,
    });
    this.drivers.push(driver);
    return { driver, client: this.client() };
  }

  client(timeoutMs = 10_000): GrpcCsiClient {
    const c = new GrpcCsiClient(this.endpoint, { timeoutMs });
    this.clients.push(c);
    return c;
  }

  async cleanup(): Promise<void> {
    for (const c of this.clients) c.close();
    for (const d of this.drivers) await d.stop();
    await rm(this.dir, { recursive: true, force: true });
  }

  /** The non-root mounts as "mountPoint <- source-root". */
  mounts(): string[] {
    return this.mounter.entries().slice(1).map((e) => `${e.mountPoint} <- ${e.root}${e.options.includes('ro') ? ' (ro)' : ''}`);
  }

  async journal(): Promise<JournalLine[]> {
    if (!existsSync(this.journalFile)) return [];
    const text = await readFile(this.journalFile, 'utf8');
    return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as JournalLine);
  }

  async calls(): Promise<JournalCallLine[]> {
    return (await this.journal()).filter((l): l is JournalCallLine => !('phase' in l));
  }

  /** Replaces the faults file atomically (a new inode: the change is always seen). */
  async faults(text: string): Promise<void> {
    const tmp = `${this.faultsFile}.tmp`;
    await writeFile(tmp, text);
    await rename(tmp, this.faultsFile);
  }

  async state(): Promise<Awaited<ReturnType<typeof readMockState>>> {
    return readMockState(this.fs, STATE);
  }
}

async function create(client: GrpcCsiClient, name = NAME, cap: VolumeCapability = MOUNT_CAP, requiredBytes?: number): Promise<string> {
  const res = await client.controller.createVolume({
    name,
    volumeCapabilities: [cap],
    ...(requiredBytes === undefined ? {} : { capacityRange: { requiredBytes } }),
  });
  assert.ok(res.volume !== null);
  return res.volume.volumeId;
}

describe('mock driver: identity and controller', () => {
  let env: Env;
  beforeEach(async () => {
    env = new Env();
    await env.init();
  });
  afterEach(async () => env.cleanup());

  it('identifies itself, reports CONTROLLER_SERVICE, is ready, and lists its capabilities', async () => {
    const { client } = await env.start();
    const info = await client.identity.getPluginInfo();
    assert.equal(info.name, DRIVER);
    assert.equal(info.vendorVersion, packageVersion());
    assert.match(info.vendorVersion, /^\d+\.\d+\.\d+/);
    assert.deepEqual((await client.identity.getPluginCapabilities()).capabilities.map((c) => c.service?.type ?? c.volumeExpansion?.type), [
      'CONTROLLER_SERVICE', 'ONLINE',
    ]);
    assert.deepEqual((await client.identity.probe()).ready, { value: true });
    assert.deepEqual(await client.controller.controllerGetCapabilities(), ['CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME', 'LIST_VOLUMES', 'LIST_VOLUMES_PUBLISHED_NODES']);
    assert.deepEqual(await client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION', 'EXPAND_VOLUME']);
    assert.equal((await client.nodeGetInfo()).nodeId, NODE);
  });

  it('singleNodeMultiWriter (--single-node-multi-writer): SINGLE_NODE_MULTI_WRITER is reported too, as csi-driver-host-path does', async () => {
    const { client } = await env.start({ singleNodeMultiWriter: true });
    assert.deepEqual(await client.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION', 'EXPAND_VOLUME', 'SINGLE_NODE_MULTI_WRITER']);
  });

  it('CreateVolume: id derived from the name, backing dir or sparse file of the capacity, idempotent, incompatible repeat → ALREADY_EXISTS', async () => {
    const { client, driver } = await env.start();
    assert.equal(VOL, `mock-${createHash('sha256').update(NAME).digest('hex').slice(0, 16)}`);
    for (let i = 0; i < 3; i++) {
      const res = await client.controller.createVolume({ name: NAME, volumeCapabilities: [MOUNT_CAP] });
      assert.deepEqual(res.volume?.volumeId, VOL);
      assert.equal(res.volume.capacityBytes, DEFAULT_CAPACITY_BYTES);
    }
    assert.equal((await env.fs.stat(mockBackingPaths(STATE, VOL).dir)).type, 'directory');
    for (let i = 0; i < 3; i++) assert.equal(await create(client, BLOCK_NAME, BLOCK_CAP, 4096), BVOL);
    const img = await env.fs.stat(mockBackingPaths(STATE, BVOL).file);
    assert.deepEqual([img.type, img.size], ['file', 4096]);
    assert.deepEqual(driver.volumes().map((v) => [v.id, v.name, v.kind, v.capacity]), [
      [VOL, NAME, 'mount', DEFAULT_CAPACITY_BYTES], [BVOL, BLOCK_NAME, 'block', 4096],
    ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))));
    await rejectsWithCode(create(client, NAME, BLOCK_CAP), GrpcStatus.ALREADY_EXISTS, /mount access/);
    await rejectsWithCode(create(client, NAME, MOUNT_CAP, 2 * DEFAULT_CAPACITY_BYTES), GrpcStatus.ALREADY_EXISTS, /capacity/);
    // A smaller request is satisfied by the existing volume.
    assert.equal(await create(client, NAME, MOUNT_CAP, 1), VOL);
  });

  it('CreateVolume, DeleteVolume, ControllerPublish/Unpublish argument checks and NOT_FOUND', async () => {
    const { client } = await env.start();
    await rejectsWithCode(client.controller.createVolume({ name: '', volumeCapabilities: [MOUNT_CAP] }), GrpcStatus.INVALID_ARGUMENT, /name missing/);
    await rejectsWithCode(client.controller.createVolume({ name: 'x', volumeCapabilities: [] }), GrpcStatus.INVALID_ARGUMENT, /capabilities missing/);
    await rejectsWithCode(client.controller.createVolume({ name: 'x', volumeCapabilities: [NO_CAP] }), GrpcStatus.INVALID_ARGUMENT, /access type/);
    await rejectsWithCode(client.controller.createVolume({ name: 'x', volumeCapabilities: [MOUNT_CAP, BLOCK_CAP] }), GrpcStatus.INVALID_ARGUMENT, /both block and mount/);
    await rejectsWithCode(
      client.controller.createVolume({ name: 'x', volumeCapabilities: [MOUNT_CAP], capacityRange: { requiredBytes: 10, limitBytes: 5 } }),
      GrpcStatus.OUT_OF_RANGE,
    );
    await rejectsWithCode(client.controller.deleteVolume({ volumeId: '' }), GrpcStatus.INVALID_ARGUMENT, /volume ID missing/);
    const pub = { volumeId: VOL, nodeId: NODE, volumeCapability: MOUNT_CAP, readonly: false };
    await rejectsWithCode(client.controller.controllerPublishVolume({ ...pub, volumeId: '' }), GrpcStatus.INVALID_ARGUMENT, /volume ID/);
    await rejectsWithCode(client.controller.controllerPublishVolume({ ...pub, nodeId: '' }), GrpcStatus.INVALID_ARGUMENT, /node ID/);
    await rejectsWithCode(client.controller.controllerPublishVolume({ ...pub, volumeCapability: NO_CAP }), GrpcStatus.INVALID_ARGUMENT, /capability/);
    await rejectsWithCode(client.controller.controllerPublishVolume(pub), GrpcStatus.NOT_FOUND, /not found/);
    await rejectsWithCode(client.controller.controllerUnpublishVolume({ volumeId: '' }), GrpcStatus.INVALID_ARGUMENT);
    // A volume that does not exist is unpublished everywhere: OK (the spec's SHOULD).
    await client.controller.controllerUnpublishVolume({ volumeId: VOL, nodeId: NODE });
    // Deleting what does not exist is OK (idempotent).
    await client.controller.deleteVolume({ volumeId: VOL });
  });

  it('ControllerPublish/Unpublish record attachments per node, idempotently; DeleteVolume removes the backing storage', async () => {
    const { client, driver } = await env.start();
    await create(client);
    const pub = { volumeId: VOL, nodeId: NODE, volumeCapability: MOUNT_CAP, readonly: false };
    for (let i = 0; i < 3; i++) assert.deepEqual((await client.controller.controllerPublishVolume(pub)).publishContext, {});
    await rejectsWithCode(client.controller.controllerPublishVolume({ ...pub, nodeId: 'node-2' }), GrpcStatus.NOT_FOUND, /node node-2 not found/);
    assert.deepEqual(driver.volume(VOL)?.attachedNodes, [NODE]);
    assert.deepEqual((await env.state())[0]?.attachedNodes, [NODE]);
    for (let i = 0; i < 3; i++) await client.controller.controllerUnpublishVolume({ volumeId: VOL, nodeId: NODE });
    assert.deepEqual(driver.volume(VOL)?.attachedNodes, []);
    await client.controller.controllerPublishVolume(pub);
    // No node id: unpublished from every node.
    await client.controller.controllerUnpublishVolume({ volumeId: VOL });
    assert.deepEqual(driver.volume(VOL)?.attachedNodes, []);
    env.fs.writeRaw(`${mockBackingPaths(STATE, VOL).dir}/sub/data.txt`, 'payload');
    for (let i = 0; i < 3; i++) await client.controller.deleteVolume({ volumeId: VOL });
    assert.equal(driver.volume(VOL), undefined);
    assert.deepEqual(env.fs.tree(`${STATE}/volumes`), []);
    assert.deepEqual(await env.state(), []);
  });
});

describe('mock driver: Node argument checks (the CSI spec\'s codes, in the fake driver\'s order)', () => {
  let env: Env;
  let client: GrpcCsiClient;
  beforeEach(async () => {
    env = new Env();
    await env.init();
    ({ client } = await env.start());
    await create(client);
  });
  afterEach(async () => env.cleanup());

  it('NodeStageVolume: volume id, staging path, capability → INVALID_ARGUMENT; unknown volume → NOT_FOUND', async () => {
    await rejectsWithCode(client.nodeStageVolume(stageReq({ volumeId: '', stagingTargetPath: '' })), GrpcStatus.INVALID_ARGUMENT, /volume ID missing/);
    await rejectsWithCode(client.nodeStageVolume(stageReq({ stagingTargetPath: '', volumeCapability: NO_CAP })), GrpcStatus.INVALID_ARGUMENT, /staging target path missing/);
    await rejectsWithCode(client.nodeStageVolume(stageReq({ volumeCapability: NO_CAP, volumeId: 'nope' })), GrpcStatus.INVALID_ARGUMENT, /capability missing/);
    await rejectsWithCode(client.nodeStageVolume(stageReq({ volumeId: 'nope' })), GrpcStatus.NOT_FOUND, /nope not found/);
    await rejectsWithCode(client.nodeStageVolume(stageReq({ volumeCapability: BLOCK_CAP })), GrpcStatus.INVALID_ARGUMENT, /created for mount access/);
    await rejectsWithCode(client.nodeStageVolume(stageReq({ stagingTargetPath: `${K}/missing/globalmount` })), GrpcStatus.INTERNAL, /staging target path \/var\/lib\/kubelet\/missing\/globalmount is not accessible/);
    assert.deepEqual(env.mounts(), []);
  });

  it('NodeUnstageVolume: volume id, staging path → INVALID_ARGUMENT; unknown volume → NOT_FOUND; not staged → OK', async () => {
    await rejectsWithCode(client.nodeUnstageVolume(unstageReq({ volumeId: '', stagingTargetPath: '' })), GrpcStatus.INVALID_ARGUMENT, /volume ID missing/);
    await rejectsWithCode(client.nodeUnstageVolume(unstageReq({ stagingTargetPath: '' })), GrpcStatus.INVALID_ARGUMENT, /staging target path missing/);
    await rejectsWithCode(client.nodeUnstageVolume(unstageReq({ volumeId: 'nope' })), GrpcStatus.NOT_FOUND);
    await client.nodeUnstageVolume(unstageReq());
  });

  it('NodePublishVolume: volume id, target path, capability, staging path → INVALID_ARGUMENT; unknown → NOT_FOUND; not staged → FAILED_PRECONDITION', async () => {
    await rejectsWithCode(client.nodePublishVolume(publishReq({ volumeId: '', targetPath: '' })), GrpcStatus.INVALID_ARGUMENT, /volume ID missing/);
    await rejectsWithCode(client.nodePublishVolume(publishReq({ targetPath: '', volumeCapability: NO_CAP })), GrpcStatus.INVALID_ARGUMENT, /target path missing/);
    await rejectsWithCode(client.nodePublishVolume(publishReq({ volumeCapability: NO_CAP, stagingTargetPath: '' })), GrpcStatus.INVALID_ARGUMENT, /capability missing/);
    await rejectsWithCode(client.nodePublishVolume(publishReq({ stagingTargetPath: '' })), GrpcStatus.INVALID_ARGUMENT, /staging target path missing/);
    await rejectsWithCode(client.nodePublishVolume(publishReq({ volumeId: 'nope' })), GrpcStatus.NOT_FOUND);
    await rejectsWithCode(client.nodePublishVolume(publishReq()), GrpcStatus.FAILED_PRECONDITION, /not staged at/);
    assert.equal(await env.fs.lstat(TARGET).catch(() => undefined), undefined);
  });

  it('NodeUnpublishVolume: volume id, target path → INVALID_ARGUMENT; unknown → NOT_FOUND; not published → OK', async () => {
    await rejectsWithCode(client.nodeUnpublishVolume(unpublishReq({ volumeId: '', targetPath: '' })), GrpcStatus.INVALID_ARGUMENT, /volume ID missing/);
    await rejectsWithCode(client.nodeUnpublishVolume(unpublishReq({ targetPath: '' })), GrpcStatus.INVALID_ARGUMENT, /target path missing/);
    await rejectsWithCode(client.nodeUnpublishVolume(unpublishReq({ volumeId: 'nope' })), GrpcStatus.NOT_FOUND);
    await client.nodeUnpublishVolume(unpublishReq());
  });

  it('staging one volume at a second path → FAILED_PRECONDITION; a target whose parent is missing → INTERNAL naming it', async () => {
    await client.nodeStageVolume(stageReq());
    await rejectsWithCode(client.nodeStageVolume(stageReq({ stagingTargetPath: STAGING2 })), GrpcStatus.FAILED_PRECONDITION, /already staged at/);
    await rejectsWithCode(
      client.nodePublishVolume(publishReq({ targetPath: `${K}/pods/none/volumes/x/mount` })),
      GrpcStatus.INTERNAL,
      /cannot create \/var\/lib\/kubelet\/pods\/none\/volumes\/x\/mount/,
    );
    assert.deepEqual(env.mounts(), [`${STAGING} <- ${mockBackingPaths(STATE, VOL).dir}`]);
  });
});

describe('mock driver: lifecycle and idempotency', () => {
  let env: Env;
  beforeEach(async () => {
    env = new Env();
    await env.init();
  });
  afterEach(async () => env.cleanup());

  it('filesystem: stage binds the backing dir, publish binds the staging path, teardown leaves no mounts and no target', async () => {
    const { client, driver } = await env.start();
    await create(client);
    const backing = mockBackingPaths(STATE, VOL).dir;
    await client.controller.controllerPublishVolume({ volumeId: VOL, nodeId: NODE, volumeCapability: MOUNT_CAP, readonly: false });
    await client.nodeStageVolume(stageReq());
    assert.deepEqual(env.mounts(), [`${STAGING} <- ${backing}`]);
    assert.equal(driver.volume(VOL)?.stagedAt, STAGING);
    await client.nodePublishVolume(publishReq());
    assert.deepEqual(env.mounts(), [`${STAGING} <- ${backing}`, `${TARGET} <- ${backing}`]);
    assert.deepEqual(driver.volume(VOL)?.publishedAt, [TARGET]);
    assert.deepEqual((await env.state())[0], driver.volume(VOL));

    await rejectsWithCode(client.nodeUnstageVolume(unstageReq()), GrpcStatus.FAILED_PRECONDITION, /still published at .*\/mount/);
    await rejectsWithCode(client.controller.deleteVolume({ volumeId: VOL }), GrpcStatus.FAILED_PRECONDITION, /still staged at .*published at/);

    await client.nodeUnpublishVolume(unpublishReq());
    assert.deepEqual(env.fs.tree(POD_DIR), []);
    await client.nodeUnstageVolume(unstageReq());
    assert.deepEqual(env.mounts(), []);
    assert.equal((await env.fs.stat(STAGING)).type, 'directory', 'the staging dir is kubelet\'s: left in place');
    await client.controller.controllerUnpublishVolume({ volumeId: VOL, nodeId: NODE });
    await client.controller.deleteVolume({ volumeId: VOL });
    assert.deepEqual(driver.volumes(), []);
    assert.deepEqual(env.mounter.actions, [
      `mount ${backing} ${STAGING}`, `mount ${STAGING} ${TARGET}`, `unmount ${TARGET}`, `unmount ${STAGING}`,
    ]);
  });

  it('block: stage binds the backing file on <staging>/dev, publish binds it on a target file, teardown removes both', async () => {
    const { client } = await env.start();
    await create(client, BLOCK_NAME, BLOCK_CAP);
    const img = mockBackingPaths(STATE, BVOL).file;
    const dev = mockBlockDevicePath(BLOCK_STAGING);
    await client.nodeStageVolume(blockStage());
    assert.equal((await env.fs.lstat(dev)).type, 'file');
    assert.deepEqual(env.mounts(), [`${dev} <- ${img}`]);
    await client.nodePublishVolume(blockPublish());
    assert.equal((await env.fs.lstat(BLOCK_TARGET)).type, 'file');
    assert.deepEqual(env.mounts(), [`${dev} <- ${img}`, `${BLOCK_TARGET} <- ${img}`]);
    await rejectsWithCode(client.nodePublishVolume(publishReq({ volumeId: BVOL, stagingTargetPath: BLOCK_STAGING })), GrpcStatus.INVALID_ARGUMENT, /block access/);
    await client.nodeUnpublishVolume(unpublishReq({ volumeId: BVOL, targetPath: BLOCK_TARGET }));
    await client.nodeUnstageVolume(unstageReq({ volumeId: BVOL, stagingTargetPath: BLOCK_STAGING }));
    assert.deepEqual(env.mounts(), []);
    assert.deepEqual(env.fs.tree(BLOCK_STAGING), []);
    assert.deepEqual(env.fs.tree(BLOCK_PUBLISH_DIR), []);
  });

  it('every call repeated 3× has the effect of one (csi-sanity "should be idempotent"), filesystem and block', async () => {
    const { client, driver } = await env.start();
    const backing = mockBackingPaths(STATE, VOL).dir;
    const img = mockBackingPaths(STATE, BVOL).file;
    const dev = mockBlockDevicePath(BLOCK_STAGING);
    const ctl = { nodeId: NODE, readonly: false };
    for (let i = 0; i < 3; i++) await create(client);
    for (let i = 0; i < 3; i++) await create(client, BLOCK_NAME, BLOCK_CAP);
    for (let i = 0; i < 3; i++) await client.controller.controllerPublishVolume({ ...ctl, volumeId: VOL, volumeCapability: MOUNT_CAP });
    for (let i = 0; i < 3; i++) await client.controller.controllerPublishVolume({ ...ctl, volumeId: BVOL, volumeCapability: BLOCK_CAP });
    for (let i = 0; i < 3; i++) await client.nodeStageVolume(stageReq());
    for (let i = 0; i < 3; i++) await client.nodeStageVolume(blockStage());
    assert.deepEqual(env.mounts(), [`${STAGING} <- ${backing}`, `${dev} <- ${img}`]);
    for (let i = 0; i < 3; i++) await client.nodePublishVolume(publishReq());
    for (let i = 0; i < 3; i++) await client.nodePublishVolume(blockPublish());
    assert.deepEqual(env.mounts(), [`${STAGING} <- ${backing}`, `${dev} <- ${img}`, `${TARGET} <- ${backing}`, `${BLOCK_TARGET} <- ${img}`]);
    for (let i = 0; i < 3; i++) await client.nodeUnpublishVolume(unpublishReq());
    for (let i = 0; i < 3; i++) await client.nodeUnpublishVolume(unpublishReq({ volumeId: BVOL, targetPath: BLOCK_TARGET }));
    for (let i = 0; i < 3; i++) await client.nodeUnstageVolume(unstageReq());
    for (let i = 0; i < 3; i++) await client.nodeUnstageVolume(unstageReq({ volumeId: BVOL, stagingTargetPath: BLOCK_STAGING }));
    assert.deepEqual(env.mounts(), []);
    for (let i = 0; i < 3; i++) await client.controller.controllerUnpublishVolume({ volumeId: VOL, nodeId: NODE });
    for (let i = 0; i < 3; i++) await client.controller.controllerUnpublishVolume({ volumeId: BVOL, nodeId: NODE });
    for (let i = 0; i < 3; i++) await client.controller.deleteVolume({ volumeId: VOL });
    for (let i = 0; i < 3; i++) await client.controller.deleteVolume({ volumeId: BVOL });
    assert.deepEqual(driver.volumes(), []);
    assert.equal(env.mounter.actions.filter((a) => a.startsWith('mount ')).length, 4, env.mounter.actions.join('\n'));
    assert.equal(env.mounter.actions.filter((a) => a.startsWith('unmount ')).length, 4);
    assert.ok((await env.calls()).every((c) => c.error === null), 'no call failed');
  });

  it('mode lenient: NodeUnstageVolume while published is accepted (strict, the default, refuses it); the target stays recorded', async () => {
    const { client, driver } = await env.start({ mode: 'lenient' });
    await create(client);
    const backing = mockBackingPaths(STATE, VOL).dir;
    await client.nodeStageVolume(stageReq());
    await client.nodePublishVolume(publishReq());
    await client.nodeUnstageVolume(unstageReq());
    assert.equal(driver.volume(VOL)?.stagedAt, undefined);
    assert.deepEqual(driver.volume(VOL)?.publishedAt, [TARGET], 'the target is still published: the invariants, not the driver, catch it');
    assert.deepEqual(env.mounts(), [`${TARGET} <- ${backing}`]);
    await client.nodeUnpublishVolume(unpublishReq());
    assert.deepEqual(env.mounts(), []);
    assert.equal(driver.volume(VOL)?.publishedAt.length, 0);
  });

  it('readonly publish mounts ro; SINGLE_NODE_SINGLE_WRITER refuses a second target with FAILED_PRECONDITION', async () => {
    const { client } = await env.start();
    await create(client);
    await client.nodeStageVolume(stageReq());
    await client.nodePublishVolume(publishReq({ readonly: true }));
    const backing = mockBackingPaths(STATE, VOL).dir;
    assert.deepEqual(env.mounts(), [`${STAGING} <- ${backing}`, `${TARGET} <- ${backing} (ro)`]);
    await client.nodePublishVolume(publishReq({ targetPath: TARGET2 }));
    await client.nodeUnpublishVolume(unpublishReq({ targetPath: TARGET2 }));
    const sw: VolumeCapability = { ...MOUNT_CAP, accessMode: { mode: 'SINGLE_NODE_SINGLE_WRITER' } };
    await rejectsWithCode(client.nodePublishVolume(publishReq({ targetPath: TARGET2, volumeCapability: sw })), GrpcStatus.FAILED_PRECONDITION, /SINGLE_NODE_SINGLE_WRITER/);
    await client.nodePublishVolume(publishReq({ volumeCapability: sw }));
  });

  it('SINGLE_NODE_SINGLE_WRITER (decideSingleWriter, shared with the simulator\'s driver): the same target again is a repeat, another target FAILED_PRECONDITION naming the first, once that is unpublished the other target is accepted', async () => {
    const { client, driver } = await env.start({ singleNodeMultiWriter: true });
    await create(client);
    await client.nodeStageVolume(stageReq());
    const sw: VolumeCapability = { ...MOUNT_CAP, accessMode: { mode: 'SINGLE_NODE_SINGLE_WRITER' } };
    await client.nodePublishVolume(publishReq({ volumeCapability: sw }));
    await client.nodePublishVolume(publishReq({ volumeCapability: sw }));
    await rejectsWithCode(client.nodePublishVolume(publishReq({ targetPath: TARGET2, volumeCapability: sw })), GrpcStatus.FAILED_PRECONDITION, new RegExp(`already published at ${TARGET}$`));
    assert.deepEqual(driver.volume(VOL)?.publishedAt, [TARGET]);
    await client.nodeUnpublishVolume(unpublishReq());
    await client.nodePublishVolume(publishReq({ targetPath: TARGET2, volumeCapability: sw }));
    assert.deepEqual(driver.volume(VOL)?.publishedAt, [TARGET2]);
  });

  it('inline ephemeral: publish without staging creates the volume and binds its backing dir; the last unpublish deletes it', async () => {
    const { client, driver } = await env.start();
    const EVOL = 'csi-0a1b2c3d4e5f';
    const ephemeral = (over: Partial<NodePublishVolumeRequest> = {}): NodePublishVolumeRequest =>
      publishReq({ volumeId: EVOL, stagingTargetPath: '', volumeContext: { 'csi.storage.k8s.io/ephemeral': 'true', size: '1Mi' }, ...over });
    const backing = mockBackingPaths(STATE, EVOL).dir;
    for (let i = 0; i < 3; i++) await client.nodePublishVolume(ephemeral());
    assert.deepEqual(env.mounts(), [`${TARGET} <- ${backing}`]);
    assert.deepEqual(driver.volume(EVOL), {
      id: EVOL, name: `ephemeral-${EVOL}`, capacity: DEFAULT_CAPACITY_BYTES, kind: 'mount', publishedAt: [TARGET], attachedNodes: [], ephemeral: true,
    });
    assert.deepEqual(await env.state(), driver.volumes(), 'persisted with its ephemeral flag');
    await rejectsWithCode(client.nodePublishVolume(ephemeral({ volumeCapability: BLOCK_CAP })), GrpcStatus.INVALID_ARGUMENT, /only mount access/);
    await create(client);
    await rejectsWithCode(client.nodePublishVolume(ephemeral({ volumeId: VOL })), GrpcStatus.FAILED_PRECONDITION, /not an ephemeral volume/);
    await rejectsWithCode(client.nodePublishVolume(publishReq({ stagingTargetPath: '' })), GrpcStatus.INVALID_ARGUMENT, /staging target path missing/);

    await client.nodeUnpublishVolume(unpublishReq({ volumeId: EVOL }));
    assert.deepEqual(env.mounts(), []);
    assert.deepEqual(env.fs.tree(POD_DIR), []);
    assert.equal(driver.volume(EVOL), undefined, 'deleted by its last unpublish');
    assert.equal(await env.fs.lstat(backing).catch(() => undefined), undefined, 'backing dir removed');
    await rejectsWithCode(client.nodeUnpublishVolume(unpublishReq({ volumeId: EVOL })), GrpcStatus.NOT_FOUND);
  });
});

/** A mount(8) older than util-linux 2.27: `-o bind,ro` binds read-write; `remount` is recorded only. */
class OldMountBinary implements Mounter {
  readonly options: string[] = [];
  constructor(private readonly inner: MemoryMounter) {}
  isLikelyNotMountPoint(p: string): Promise<boolean> {
    return this.inner.isLikelyNotMountPoint(p);
  }
  readMountTable(): ReturnType<Mounter['readMountTable']> {
    return this.inner.readMountTable();
  }
  unmount(target: string): Promise<void> {
    return this.inner.unmount(target);
  }
  async mount(source: string, target: string, fsType: string, options: readonly string[]): Promise<void> {
    this.options.push(options.join(','));
    if (!options.includes('remount')) await this.inner.mount(source, target, fsType, options.filter((o) => o !== 'ro'));
  }
}

describe('mock driver: readonly with an old mount(8)', () => {
  let env: Env;
  beforeEach(async () => {
    env = new Env();
    await env.init();
  });
  afterEach(async () => env.cleanup());

  it('a bind,ro mount the table shows writable is remounted remount,bind,ro', async () => {
    const old = new OldMountBinary(env.mounter);
    const { client } = await env.start({ mounter: old });
    await create(client);
    await client.nodeStageVolume(stageReq());
    await client.nodePublishVolume(publishReq({ readonly: true }));
    await client.nodePublishVolume(publishReq({ targetPath: TARGET2 }));
    assert.deepEqual(old.options, ['bind', 'bind,ro', 'remount,bind,ro', 'bind']);
  });
});

/** A mount table whose umount answers EBUSY the first `busy` times (a forked child holding a descriptor). */
class BusyOnce implements Mounter {
  unmounts = 0;
  constructor(private readonly inner: MemoryMounter, private busy: number) {}
  isLikelyNotMountPoint(p: string): Promise<boolean> {
    return this.inner.isLikelyNotMountPoint(p);
  }
  readMountTable(): ReturnType<Mounter['readMountTable']> {
    return this.inner.readMountTable();
  }
  mount(source: string, target: string, fsType: string, options: readonly string[]): Promise<void> {
    return this.inner.mount(source, target, fsType, options);
  }
  unmount(target: string): Promise<void> {
    this.unmounts += 1;
    if (this.busy > 0) {
      this.busy -= 1;
      return Promise.reject(new FsError('EBUSY', target, 'umount', `umount: ${target}: target is busy.`));
    }
    return this.inner.unmount(target);
  }
}

describe('mock driver: a busy unmount', () => {
  let env: Env;
  beforeEach(async () => {
    env = new Env();
    await env.init();
  });
  afterEach(async () => env.cleanup());

  it('EBUSY is retried with a backoff on the driver clock (up to 5 tries), then INTERNAL naming the path', async () => {
    const clock = new FakeClock({ autoAdvance: true });
    const sleeps = clock.sleeps;
    const twice = new BusyOnce(env.mounter, 2);
    const { client } = await env.start({ mounter: twice, clock });
    await create(client);
    await client.nodeStageVolume(stageReq());
    await client.nodeUnstageVolume(unstageReq());
    assert.deepEqual([twice.unmounts, sleeps], [3, [50, 100]]);
    assert.deepEqual(env.mounts(), []);

    await env.drivers.pop()?.stop();
    sleeps.length = 0;
    const always = new BusyOnce(env.mounter, 100);
    const second = await env.start({ mounter: always, clock });
    await second.client.nodeStageVolume(stageReq());
    await rejectsWithCode(second.client.nodeUnstageVolume(unstageReq()), GrpcStatus.INTERNAL, new RegExp(`cannot unmount ${STAGING}: .*target is busy`));
    assert.deepEqual([always.unmounts, sleeps], [5, [50, 100, 150, 200]]);
  });
});

describe('nodevol mock-driver flags (the built CLI)', () => {
  const run = (args: readonly string[]): { status: number | null; stdout: string; stderr: string } => {
    const r = spawnSync(process.execPath, [BIN, 'mock-driver', ...args], { encoding: 'utf8', timeout: 30_000 });
    if (r.error !== undefined) throw r.error;
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const base = ['--endpoint', 'unix:///tmp/nodevol-flags-test/csi.sock', '--node-id', 'n', '--driver-name', DRIVER, '--state-dir', '/tmp/nodevol-flags-test/state'];

  it('--help exits 0 and names every flag and exit code', () => {
    const r = run(['--help']);
    assert.equal(r.status, 0, r.stderr);
    for (const flag of ['--endpoint', '--node-id', '--driver-name', '--state-dir', '--faults', '--journal', '-v', '--logging-format']) {
      assert.ok(r.stdout.includes(flag), `${flag} missing from:\n${r.stdout}`);
    }
    assert.match(r.stdout, /Exit codes:\n {2}0 .*\n {2}2 .*\n {2}3 /);
  });

  it('a missing required flag or a bad endpoint exits 2 without starting', () => {
    const missing = run(base.slice(2));
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /--endpoint/);
    const tcp = run(['--endpoint', 'tcp://127.0.0.1:9000', ...base.slice(2)]);
    assert.equal(tcp.status, 2);
    assert.match(tcp.stderr, /--endpoint: invalid CSI endpoint .*only unix sockets/);
    const fmt = run([...base, '--logging-format', 'xml']);
    assert.equal(fmt.status, 2);
    assert.equal(existsSync('/tmp/nodevol-flags-test'), false, 'nothing was created');
  });
});

describe('mock driver: state, restart and reboot', () => {
  let env: Env;
  beforeEach(async () => {
    env = new Env();
    await env.init();
  });
  afterEach(async () => env.cleanup());

  it('each change rewrites only its own volume\'s record, atomically and durably, before the answer; a new driver instance reloads them', async () => {
    const first = await env.start();
    await create(first.client);
    await first.client.nodeStageVolume(stageReq());
    await first.client.nodePublishVolume(publishReq());
    assert.deepEqual(await env.state(), [
      { id: VOL, name: NAME, capacity: DEFAULT_CAPACITY_BYTES, kind: 'mount', stagedAt: STAGING, publishedAt: [TARGET], attachedNodes: [] },
    ]);
    const record = volumeRecordPath(STATE, VOL);
    assert.equal(record, `${STATE}/state/${VOL}.json`);
    const syncs = env.fs.syncLog.filter((l) => l.includes(STATE));
    assert.deepEqual(syncs.slice(-2), [`fsync ${record}.tmp`, `fsyncDir ${STATE}/state`]);
    // A second volume's calls touch only its own record.
    const before = env.fs.syncLog.length;
    await create(first.client, BLOCK_NAME, BLOCK_CAP);
    await first.client.nodeStageVolume(blockStage());
    assert.deepEqual(
      [...new Set(env.fs.syncLog.slice(before).filter((l) => l.startsWith('fsync ') && l.includes('/state/')))],
      [`fsync ${volumeRecordPath(STATE, BVOL)}.tmp`],
    );
    await first.client.nodeUnstageVolume(unstageReq({ volumeId: BVOL, stagingTargetPath: BLOCK_STAGING }));
    assert.deepEqual(env.fs.tree(STATE).filter((p) => p.endsWith('.tmp')), []);
    await first.driver.stop();
    assert.equal(existsSync(first.driver.socketPath), false, 'stop removes the socket');

    const second = await env.start();
    assert.deepEqual(second.driver.volumes(), first.driver.volumes());
    // Still published, as recorded: unstage is refused until unpublish.
    await rejectsWithCode(second.client.nodeUnstageVolume(unstageReq()), GrpcStatus.FAILED_PRECONDITION);
    await second.client.nodeUnpublishVolume(unpublishReq());
    await second.client.nodeUnstageVolume(unstageReq());
    assert.deepEqual(env.mounts(), []);
    assert.equal((await env.state()).find((v) => v.id === VOL)?.stagedAt, undefined);
  });

  it('a legacy state.json is migrated into per-volume records (durably) and removed', async () => {
    await env.fs.mkdir(STATE, { recursive: true, mode: 0o755 });
    const v = { id: VOL, name: NAME, capacity: DEFAULT_CAPACITY_BYTES, kind: 'mount' as const, publishedAt: [], attachedNodes: [NODE] };
    env.fs.writeRaw(`${STATE}/state.json`, JSON.stringify({ version: 1, volumes: [v] }));
    const { driver, client } = await env.start();
    assert.deepEqual(driver.volumes(), [v]);
    assert.equal(await env.fs.lstat(`${STATE}/state.json`).then(() => true, () => false), false, 'state.json removed');
    assert.deepEqual(await env.state(), [v]);
    assert.ok(env.fs.syncLog.includes(`fsync ${volumeRecordPath(STATE, VOL)}.tmp`));
    await client.controller.controllerUnpublishVolume({ volumeId: VOL, nodeId: NODE });
    await client.controller.deleteVolume({ volumeId: VOL });
    assert.deepEqual(await env.state(), [], 'a deleted volume\'s record is removed');
  });

  it('a corrupt volume record stops the start with an error naming the file and the field', async () => {
    await env.fs.mkdir(`${STATE}/state`, { recursive: true, mode: 0o700 });
    env.fs.writeRaw(volumeRecordPath(STATE, VOL), '{"version":1,"volume":{"id":"x"}}');
    await assert.rejects(env.start(), new RegExp(`state/${VOL}\\.json: not a mock driver volume record at volume\\.name`));
    const other = { id: 'mock-other', name: 'o', capacity: 1, kind: 'mount' as const, publishedAt: [], attachedNodes: [] };
    env.fs.writeRaw(volumeRecordPath(STATE, VOL), renderVolumeRecord(other));
    await assert.rejects(env.start(), /holds volume mock-other, not mock-/);
    assert.equal(existsSync(path.join(env.dir, 'csi.sock')), false);
  });

  it('a corrupt state.json stops the start with an error naming it', async () => {
    await env.fs.mkdir(STATE, { recursive: true, mode: 0o755 });
    env.fs.writeRaw(`${STATE}/state.json`, '{"version":1,"volumes":[{"id":"x"}]}');
    await assert.rejects(env.start(), /state\.json: not a mock driver state file at volumes\.0\.name/);
    assert.equal(existsSync(path.join(env.dir, 'csi.sock')), false);
  });

  it('after a reboot: NodeStage re-mounts at the recorded path, NodePublish re-mounts the recorded target, teardown clears', async () => {
    const first = await env.start();
    await create(first.client);
    await first.client.nodeStageVolume(stageReq());
    await first.client.nodePublishVolume(publishReq());
    await first.driver.stop();
    env.mounter.reboot();

    const { client, driver } = await env.start();
    assert.deepEqual(driver.volume(VOL)?.stagedAt, STAGING);
    await rejectsWithCode(client.nodePublishVolume(publishReq()), GrpcStatus.FAILED_PRECONDITION, /is not mounted; stage it again/);
    await client.nodeStageVolume(stageReq());
    await client.nodePublishVolume(publishReq());
    const backing = mockBackingPaths(STATE, VOL).dir;
    assert.deepEqual(env.mounts(), [`${STAGING} <- ${backing}`, `${TARGET} <- ${backing}`]);
    await client.nodeUnpublishVolume(unpublishReq());
    await client.nodeUnstageVolume(unstageReq());
    assert.deepEqual(env.mounts(), []);
  });

  it('after a reboot: NodeUnpublish of a recorded target that is not mounted clears it and removes the dir; NodeUnstage of an unmounted staging clears the record', async () => {
    const first = await env.start();
    await create(first.client);
    await create(first.client, BLOCK_NAME, BLOCK_CAP);
    await first.client.nodeStageVolume(stageReq());
    await first.client.nodePublishVolume(publishReq());
    await first.client.nodeStageVolume(blockStage());
    await first.driver.stop();
    env.mounter.reboot();
    assert.deepEqual(env.mounts(), []);

    const { client, driver } = await env.start();
    await client.nodeUnpublishVolume(unpublishReq());
    assert.deepEqual(env.fs.tree(POD_DIR), []);
    assert.deepEqual(driver.volume(VOL)?.publishedAt, []);
    await client.nodeUnstageVolume(unstageReq());
    await client.nodeUnstageVolume(unstageReq({ volumeId: BVOL, stagingTargetPath: BLOCK_STAGING }));
    assert.equal(driver.volume(VOL)?.stagedAt, undefined);
    assert.equal(driver.volume(BVOL)?.stagedAt, undefined);
    assert.deepEqual(env.fs.tree(BLOCK_STAGING), []);
    assert.deepEqual(env.mounter.actions.slice(env.mounter.actions.indexOf('reboot') + 1), [], 'nothing to unmount after the reboot');
    assert.deepEqual((await env.state()).map((v) => [v.id, v.stagedAt, v.publishedAt]), driver.volumes().map((v) => [v.id, undefined, []]));
  });
});

describe('mock driver: concurrency', () => {
  let env: Env;
  beforeEach(async () => {
    env = new Env();
    await env.init();
  });
  afterEach(async () => env.cleanup());

  it('a call for a volume with a call in flight answers ABORTED; calls for other volumes proceed', async () => {
    const clock = new FakeClock();
    const { client, driver } = await env.start({ clock });
    await create(client);
    await create(client, BLOCK_NAME, BLOCK_CAP);
    await env.faults(`faults:\n  - method: NodeStageVolume\n    volumeId: ${VOL}\n    delay: 400ms\n`);
    const slow = client.nodeStageVolume(stageReq());
    await env.line((l) => 'phase' in l && l.phase === 'held', 'the held line');
    await rejectsWithCode(client.nodeUnstageVolume(unstageReq()), GrpcStatus.ABORTED, new RegExp(`operation with the given volume ID ${VOL} already exists`));
    // The other volume is served while VOL's call is still held (no virtual time has passed).
    await client.nodeStageVolume(blockStage());
    assert.equal(driver.volume(BVOL)?.stagedAt, BLOCK_STAGING);
    assert.equal(driver.volume(VOL)?.stagedAt, undefined, 'VOL is still held');
    assert.equal(clock.pendingSleeps(), 1);
    await clock.advance(400);
    await slow;
    await client.nodeUnstageVolume(unstageReq());
    const calls = await env.calls();
    assert.deepEqual(calls.slice(-4).map((c) => [c.method, c.volumeId, c.error?.name ?? 'OK']), [
      ['NodeUnstageVolume', VOL, 'ABORTED'], ['NodeStageVolume', BVOL, 'OK'], ['NodeStageVolume', VOL, 'OK'], ['NodeUnstageVolume', VOL, 'OK'],
    ]);
  });

  it('clientTimeout: the client gets DEADLINE_EXCEEDED while the driver carries on; the volume answers ABORTED until the work is done', async () => {
    const clock = new FakeClock();
    const { client, driver } = await env.start({ clock });
    await create(client);
    await env.faults('faults:\n  - {method: NodeStageVolume, delay: 1s, clientTimeout: 100ms, times: 1}\n');
    const first = rejectsWithCode(client.nodeStageVolume(stageReq()), GrpcStatus.DEADLINE_EXCEEDED, /driver carries on/);
    await env.line((l) => 'phase' in l && l.phase === 'held', 'the held line');
    await clock.advance(100);
    await first;
    assert.equal(driver.volume(VOL)?.stagedAt, undefined, 'not done yet at the driver');
    await rejectsWithCode(client.nodeStageVolume(stageReq()), GrpcStatus.ABORTED);
    await clock.advance(900);
    const done = await env.line((l) => !('phase' in l) && l.method === 'NodeStageVolume' && l.error === null, 'the completed stage');
    assert.equal(driver.volume(VOL)?.stagedAt, STAGING, 'the driver finished the work the client gave up on');
    assert.equal((done as JournalCallLine).durationMs, 1000);
    await client.nodeStageVolume(stageReq());
    const phases = env.lines.filter((l): l is JournalPhaseLine => 'phase' in l).map((l) => [l.phase, l.fault]);
    assert.deepEqual(phases, [['held', 'delay'], ['timedOut', 'clientTimeout']]);
  });
});

describe('mock driver: faults', () => {
  let env: Env;
  beforeEach(async () => {
    env = new Env();
    await env.init();
  });
  afterEach(async () => env.cleanup());

  it('parses YAML and JSON, names or numbers for codes; rejects unknown keys, methods and empty rules', () => {
    assert.deepEqual(parseFaults('faults:\n  - {method: NodeUnstageVolume, code: UNAVAILABLE, times: 2}\n'), [
      { method: 'NodeUnstageVolume', code: 14, times: 2 },
    ]);
    assert.deepEqual(parseFaults('{"faults":[{"method":"Probe","code":4,"delay":"5ms","volumeId":"v"}]}'), [
      { method: 'Probe', volumeId: 'v', delayMs: 5, code: 4 },
    ]);
    assert.deepEqual(parseFaults(''), []);
    assert.deepEqual(parseFaults('faults: []'), []);
    assert.throws(() => parseFaults('faults:\n  - {method: NodeUnstage, code: 14}'), /faults\[0\]\.method/);
    assert.throws(() => parseFaults('faults:\n  - {method: Probe, code: 14, tims: 2}'), /faults\[0\]\.tims: unknown key/);
    assert.throws(() => parseFaults('faults:\n  - {method: Probe, delayMs: 5}'), /faults\[0\]\.delayMs: unknown key: use delay/);
    assert.throws(() => parseFaults('faults:\n  - {method: Probe, delay: 5}'), /faults\[0\]\.delay/);
    assert.throws(() => parseFaults('faults:\n  - {method: Probe, delay: 25h}'), /at most 24h/);
    assert.throws(() => parseFaults('faults:\n  - {method: Probe}'), /at least one of/);
    assert.throws(() => parseFaults('faults:\n  - {method: Probe, code: OK}'), /faults\[0\]\.code/);
    assert.throws(() => parseFaults('faults:\n  - {method: Probe, code: 17}'), /faults\[0\]\.code/);
    assert.throws(() => parseFaults('faults: [ {'), /not YAML or JSON/);
  });

  it('delay: the call is held (journal "held" line on arrival) and then does its work', async () => {
    const clock = new FakeClock();
    const { client, driver } = await env.start({ clock });
    await create(client);
    await env.faults(JSON.stringify({ faults: [{ method: 'NodeStageVolume', delay: '300ms' }] }));
    const p = client.nodeStageVolume(stageReq());
    await env.line((l) => 'phase' in l && l.method === 'NodeStageVolume', 'the held line');
    await clock.advance(299);
    assert.equal(driver.volume(VOL)?.stagedAt, undefined, 'not staged while held');
    assert.equal(clock.pendingSleeps(), 1, 'still held at 299 ms');
    await clock.advance(1);
    await p;
    assert.equal(driver.volume(VOL)?.stagedAt, STAGING);
    const lines = await env.journal();
    const held = lines.find((l): l is JournalPhaseLine => 'phase' in l)!;
    const done = lines.find((l): l is JournalCallLine => !('phase' in l) && l.method === 'NodeStageVolume')!;
    assert.deepEqual([held.phase, held.fault, held.volumeId, held.seq], ['held', 'delay', VOL, done.seq]);
    assert.ok(lines.indexOf(held) < lines.indexOf(done));
    assert.equal(done.durationMs, 300, 'measured on the driver clock');
    assert.ok(env.logs.some((l) => l.includes('Injecting a fault') && l.includes('delay=300ms')));
  });

  it('code × times, then success; a per-volume rule leaves other volumes alone; afterEffect does the work and fails', async () => {
    const { client, driver } = await env.start();
    await create(client);
    await create(client, BLOCK_NAME, BLOCK_CAP);
    await env.faults(
      [
        'faults:',
        '  - method: NodeStageVolume',
        `    volumeId: ${VOL}`,
        '    code: UNAVAILABLE',
        '    times: 2',
        '  - method: NodeUnstageVolume',
        '    code: 4',
        '    afterEffect: true',
        '    times: 1',
      ].join('\n'),
    );
    await client.nodeStageVolume(blockStage());
    await rejectsWithCode(client.nodeStageVolume(stageReq()), GrpcStatus.UNAVAILABLE, /^injected UNAVAILABLE$/);
    await rejectsWithCode(client.nodeStageVolume(stageReq()), GrpcStatus.UNAVAILABLE);
    assert.equal(driver.volume(VOL)?.stagedAt, undefined, 'a failed call has no effect');
    await client.nodeStageVolume(stageReq());
    assert.equal(driver.volume(VOL)?.stagedAt, STAGING);
    await rejectsWithCode(client.nodeUnstageVolume(unstageReq()), GrpcStatus.DEADLINE_EXCEEDED, /after the effect/);
    assert.equal(driver.volume(VOL)?.stagedAt, undefined, 'done on the driver, a failure to the caller');
    await client.nodeUnstageVolume(unstageReq());
    const errs = (await env.calls()).filter((c) => c.error !== null).map((c) => [c.method, c.error?.code, c.error?.name]);
    assert.deepEqual(errs, [
      ['NodeStageVolume', 14, 'UNAVAILABLE'], ['NodeStageVolume', 14, 'UNAVAILABLE'], ['NodeUnstageVolume', 4, 'DEADLINE_EXCEEDED'],
    ]);
  });

  it('hang: never answered (client deadline), the volume stays busy (ABORTED), released with UNAVAILABLE only at stop', async () => {
    const { client, driver } = await env.start();
    await create(client);
    await env.faults('faults:\n  - {method: NodeStageVolume, hang: true, times: 1}\n');
    const quick = env.client(300);
    await rejectsWithCode(quick.nodeStageVolume(stageReq()), GrpcStatus.DEADLINE_EXCEEDED);
    const held = (await env.journal()).filter((l): l is JournalPhaseLine => 'phase' in l);
    assert.deepEqual(held.map((l) => [l.method, l.fault]), [['NodeStageVolume', 'hang']]);
    await rejectsWithCode(client.nodeStageVolume(stageReq()), GrpcStatus.ABORTED);
    assert.equal(driver.volume(VOL)?.stagedAt, undefined);
    await driver.stop();
    const last = (await env.calls()).at(-1)!;
    assert.deepEqual([last.method, last.error?.name, last.seq], ['NodeStageVolume', 'UNAVAILABLE', held[0]?.seq]);
    assert.match(last.error?.message ?? '', /stopped while the call was held/);
    assert.deepEqual(env.mounts(), []);
  });

  it('exit: the exit hook gets code 3 when the call arrives, an "exit" journal line is written, the call is never answered', async () => {
    const { client } = await env.start();
    await create(client);
    await env.faults('faults:\n  - {method: NodePublishVolume, exit: true}\n');
    await client.nodeStageVolume(stageReq());
    assert.deepEqual(env.exits, []);
    await rejectsWithCode(env.client(300).nodePublishVolume(publishReq()), GrpcStatus.DEADLINE_EXCEEDED);
    assert.deepEqual(env.exits, [EXIT_FAULT_CODE]);
    const last = (await env.journal()).at(-1)!;
    assert.ok('phase' in last);
    assert.deepEqual([last.phase, last.fault, last.method, last.volumeId], ['exit', 'exit', 'NodePublishVolume', VOL]);
    assert.deepEqual(env.mounts(), [`${STAGING} <- ${mockBackingPaths(STATE, VOL).dir}`]);
    assert.ok(env.logs.some((l) => l.includes('Exiting on an injected fault')));
  });

  it('re-reads the file when it changes (counters reset), ignores a bad file with a log line and keeps the previous rules', async () => {
    const { client } = await env.start();
    await env.faults('faults:\n  - {method: NodeGetInfo, code: NOT_FOUND, times: 1}\n');
    await rejectsWithCode(client.nodeGetInfo(), GrpcStatus.NOT_FOUND);
    await client.nodeGetInfo();
    await env.faults('faults:\n  - {method: NodeGetInfo, code: UNAVAILABLE, times: 2}\n');
    await rejectsWithCode(client.nodeGetInfo(), GrpcStatus.UNAVAILABLE);
    await env.faults('faults:\n  - {method: NodeGetInfo, code: BOGUS}\n');
    await rejectsWithCode(client.nodeGetInfo(), GrpcStatus.UNAVAILABLE, undefined);
    const bad = env.logs.filter((l) => l.includes('Ignoring the faults file'));
    assert.equal(bad.length, 1, env.logs.join('\n'));
    assert.match(bad[0]!, /faults\[0\]\.code/);
    await client.nodeGetInfo();
    await client.nodeGetInfo();
    assert.equal(env.logs.filter((l) => l.includes('Ignoring the faults file')).length, 1, 'logged once per change');
    await rm(env.faultsFile);
    await client.nodeGetInfo();
    assert.ok(env.logs.some((l) => l.includes('Loaded the faults file') && l.includes('code=UNAVAILABLE times=2')));
  });

  it('a rule used up stays used up across a restart of the driver (its counter is kept with the state), as in the simulator', async () => {
    await writeFile(env.faultsFile, 'faults:\n  - {method: Probe, code: FAILED_PRECONDITION, times: 1}\n  - {method: NodeGetInfo, code: NOT_FOUND, times: 2}\n');
    const first = await env.start();
    await rejectsWithCode(first.client.identity.probe(), GrpcStatus.FAILED_PRECONDITION);
    await rejectsWithCode(first.client.nodeGetInfo(), GrpcStatus.NOT_FOUND);
    await first.driver.stop();
    const second = await env.start();
    await second.client.identity.probe();
    await rejectsWithCode(second.client.nodeGetInfo(), GrpcStatus.NOT_FOUND, undefined);
    await second.client.nodeGetInfo();
    assert.ok(env.logs.some((l) => l.includes('Restored the counters of the fault rules')));
    // A changed rule starts afresh.
    await env.faults('faults:\n  - {method: Probe, code: FAILED_PRECONDITION, times: 2}\n');
    await rejectsWithCode(second.client.identity.probe(), GrpcStatus.FAILED_PRECONDITION);
  });

  it('a faults file present at start is applied from the first call', async () => {
    await writeFile(env.faultsFile, 'faults:\n  - {method: Probe, code: FAILED_PRECONDITION}\n');
    const { client } = await env.start();
    await rejectsWithCode(client.identity.probe(), GrpcStatus.FAILED_PRECONDITION);
    await rejectsWithCode(client.identity.probe(), GrpcStatus.FAILED_PRECONDITION);
  });
});

describe('mock driver: journal', () => {
  let env: Env;
  beforeEach(async () => {
    env = new Env();
    await env.init();
  });
  afterEach(async () => env.cleanup());

  it('one JSON line per completed call, in order, seq from 1, with request, response or error, duration; secrets redacted', async () => {
    const { client } = await env.start();
    await client.identity.getPluginInfo();
    await create(client);
    await client.nodeStageVolume(stageReq({ secrets: { password: 's3cr3t', token: 'abc' }, volumeContext: { a: 'b' } }));
    await rejectsWithCode(client.nodePublishVolume(publishReq({ volumeId: 'nope', secrets: { password: 's3cr3t' } })), GrpcStatus.NOT_FOUND);
    const text = await readFile(env.journalFile, 'utf8');
    assert.ok(!text.includes('s3cr3t'), 'no secret in the journal');
    const lines = await env.calls();
    assert.deepEqual(lines.map((l) => [l.seq, l.method, l.volumeId]), [
      [1, 'GetPluginInfo', ''], [2, 'CreateVolume', VOL], [3, 'NodeStageVolume', VOL], [4, 'NodePublishVolume', 'nope'],
    ]);
    for (const l of lines) {
      assert.deepEqual(Object.keys(l), ['time', 'seq', 'method', 'volumeId', 'request', 'response', 'error', 'durationMs']);
      assert.match(l.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.equal(typeof l.durationMs, 'number');
    }
    assert.deepEqual(lines[0]?.response, { name: DRIVER, vendorVersion: packageVersion() });
    assert.deepEqual(lines[1]?.response, { volume: { volumeId: VOL, capacityBytes: DEFAULT_CAPACITY_BYTES, volumeContext: {} } });
    const stage = lines[2]!.request as { secrets: Record<string, string>; stagingTargetPath: string; volumeContext: Record<string, string> };
    assert.deepEqual(stage.secrets, { password: REDACTED, token: REDACTED });
    assert.equal(stage.stagingTargetPath, STAGING);
    assert.deepEqual(stage.volumeContext, { a: 'b' });
    assert.deepEqual([lines[2]?.response, lines[2]?.error], [{}, null]);
    assert.deepEqual(lines[3]?.response, null);
    assert.deepEqual(lines[3]?.error, { code: 5, name: 'NOT_FOUND', message: 'volume nope not found' });
    const published = lines[3]?.request as { secrets: Record<string, string> } | undefined;
    assert.deepEqual(published?.secrets, { password: REDACTED });
  });

  it('without --journal nothing is written; stop removes the socket', async () => {
    const { client, driver } = await env.start({ journalFile: undefined });
    await client.identity.probe();
    assert.equal(existsSync(env.journalFile), false);
    assert.equal(existsSync(driver.socketPath), true);
    await driver.stop();
    await driver.stop();
    assert.equal(existsSync(driver.socketPath), false);
  });
});
