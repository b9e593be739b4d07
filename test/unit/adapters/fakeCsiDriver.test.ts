import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../../src/adapters/memory/memoryMounter.js';
import { FakeCsiDriver, fakeDevicePath } from '../../../src/adapters/memory/fakeCsiDriver.js';
import {
  CsiCallError,
  GrpcStatus,
  type NodeCapability,
  type NodePublishVolumeRequest,
  type NodeStageVolumeRequest,
  type NodeUnpublishVolumeRequest,
  type NodeUnstageVolumeRequest,
  type VolumeCapability,
} from '../../../src/ports/csi.js';
import { getMountRefs } from '../../../src/mount/mountRefs.js';
import { FakeClock } from '../../support/fakeClock.js';

const DRIVER = 'hostpath.csi.k8s.io';
const K = '/var/lib/kubelet';
const VOL = 'vol-1';
const STAGING = `${K}/plugins/kubernetes.io/csi/${DRIVER}/4e29aa01861d/globalmount`;
const POD_DIR = `${K}/pods/6f1c0000-4e5f/volumes/kubernetes.io~csi/pvc-1`;
const TARGET = `${POD_DIR}/mount`;
const BLOCK_STAGING = `${K}/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-b`;
const BLOCK_TARGET = `${K}/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-b/6f1c0000-4e5f`;

const MOUNT_CAP: VolumeCapability = {
  mount: { fsType: 'xfs', mountFlags: [], volumeMountGroup: '' },
  accessMode: { mode: 'SINGLE_NODE_WRITER' },
};
const BLOCK_CAP: VolumeCapability = { block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } };

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

interface Node {
  fs: MemFs;
  mounter: MemoryMounter;
  clock: FakeClock;
  driver: FakeCsiDriver;
}

/** A node where kubelet already created the staging dir and the pod volume dir (parent of the target). */
async function node(capabilities?: NodeCapability[], stillPublishedCode?: number, volumeLocks = false): Promise<Node> {
  const fs = MemFs.create();
  for (const d of [STAGING, POD_DIR, BLOCK_STAGING, `${K}/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-b`]) {
    await fs.mkdir(d, { recursive: true, mode: 0o750 });
  }
  const mounter = new MemoryMounter(fs);
  const clock = new FakeClock();
  const base = { name: DRIVER, fs, mounter, clock };
  const driver = new FakeCsiDriver({
    ...base,
    ...(capabilities === undefined ? {} : { capabilities }),
    ...(stillPublishedCode === undefined ? {} : { stillPublishedCode }),
    volumeLocks,
  });
  return { fs, mounter, clock, driver };
}

/** The non-root mounts as "mountPoint <- major:minor root". */
function mounts(mounter: MemoryMounter): string[] {
  return mounter.entries().slice(1).map((e) => `${e.mountPoint} <- ${e.major}:${e.minor} ${e.root}`);
}

async function rejectsWithCode(p: Promise<unknown>, code: number, detail?: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof CsiCallError, `expected a CsiCallError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    if (detail !== undefined) assert.match(err.details, detail);
    return true;
  });
}

/** Whether `p` has settled after the event loop turned once. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise<void>((resolve) => setImmediate(resolve));
  return done;
}

describe('FakeCsiDriver lifecycle', () => {
  it('stage, publish, unpublish, unstage leaves no mounts, removes the target and records the sequence', async () => {
    const { fs, mounter, driver } = await node();
    assert.deepEqual(await driver.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
    await driver.nodeStageVolume(stageReq());
    assert.deepEqual(mounts(mounter), [`${STAGING} <- 259:1 /`]);
    assert.equal(mounter.entries()[1]?.fsType, 'xfs');
    assert.equal(mounter.entries()[1]?.source, fakeDevicePath(VOL));

    await driver.nodePublishVolume(publishReq());
    assert.deepEqual(mounts(mounter), [`${STAGING} <- 259:1 /`, `${TARGET} <- 259:1 /`]);
    const table = await mounter.readMountTable();
    assert.deepEqual(await getMountRefs(fs, table, TARGET), [STAGING]);
    assert.deepEqual(await getMountRefs(fs, table, STAGING), [TARGET]);
    assert.deepEqual(driver.volume(VOL), { stagedAt: STAGING, publishedAt: new Set([TARGET]), block: false });

    await driver.nodeUnpublishVolume(unpublishReq());
    assert.deepEqual(fs.tree(POD_DIR), []);
    await driver.nodeUnstageVolume(unstageReq());

    assert.deepEqual(mounts(mounter), []);
    assert.equal(driver.volume(VOL), undefined);
    assert.equal(driver.volumes().size, 0);
    assert.deepEqual(driver.methods(), [
      'NodeGetCapabilities', 'NodeStageVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeUnstageVolume',
    ]);
    assert.deepEqual(driver.calls.map((c) => [c.seq, c.volumeId, c.outcome]), [
      [1, '', 'OK'], [2, VOL, 'OK'], [3, VOL, 'OK'], [4, VOL, 'OK'], [5, VOL, 'OK'],
    ]);
    assert.deepEqual(mounter.actions, [
      `mount ${fakeDevicePath(VOL)} ${STAGING}`, `mount ${STAGING} ${TARGET}`, `unmount ${TARGET}`, `unmount ${STAGING}`,
    ]);
  });

  it('every call is idempotent: each repeated three times has the effect of one', async () => {
    const { fs, mounter, driver } = await node();
    for (let i = 0; i < 3; i++) await driver.nodeStageVolume(stageReq());
    assert.deepEqual(mounts(mounter), [`${STAGING} <- 259:1 /`]);
    for (let i = 0; i < 3; i++) await driver.nodePublishVolume(publishReq());
    assert.deepEqual(mounts(mounter), [`${STAGING} <- 259:1 /`, `${TARGET} <- 259:1 /`]);
    for (let i = 0; i < 3; i++) await driver.nodeUnpublishVolume(unpublishReq());
    assert.deepEqual(mounts(mounter), [`${STAGING} <- 259:1 /`]);
    assert.deepEqual(fs.tree(POD_DIR), []);
    for (let i = 0; i < 3; i++) await driver.nodeUnstageVolume(unstageReq());
    assert.deepEqual(mounts(mounter), []);
    assert.equal(driver.calls.length, 12);
    assert.ok(driver.calls.every((c) => c.outcome === 'OK'));
    assert.equal(mounter.actions.length, 4);
  });

  it('the records carry a copy of the request and the clock time', async () => {
    const { clock, driver } = await node();
    await clock.advance(1234);
    await driver.nodeStageVolume(stageReq());
    const [call] = driver.callsOf('NodeStageVolume');
    assert.deepEqual(call?.request, stageReq());
    assert.equal(call?.atMs, 1234);
    assert.equal(call?.endMs, 1234);
    assert.equal(call?.details, '');
  });

  it('after a node reboot the state survives and a repeated stage and publish mount again', async () => {
    const { fs, mounter, driver } = await node();
    await driver.nodeStageVolume(stageReq());
    await driver.nodePublishVolume(publishReq());
    mounter.reboot();
    driver.reboot();
    assert.deepEqual(driver.volume(VOL), { stagedAt: STAGING, publishedAt: new Set([TARGET]), block: false });
    await driver.nodeStageVolume(stageReq());
    await driver.nodePublishVolume(publishReq());
    assert.deepEqual(mounts(mounter), [`${STAGING} <- 259:1 /`, `${TARGET} <- 259:1 /`]);
    assert.deepEqual(await getMountRefs(fs, await mounter.readMountTable(), STAGING), [TARGET]);
  });

  it('unpublish after a reboot removes the left-over target directory and forgets the publication', async () => {
    const { fs, mounter, driver } = await node();
    await driver.nodeStageVolume(stageReq());
    await driver.nodePublishVolume(publishReq());
    mounter.reboot();
    await driver.nodeUnpublishVolume(unpublishReq());
    assert.deepEqual(fs.tree(POD_DIR), []);
    await driver.nodeUnstageVolume(unstageReq());
    assert.equal(driver.volume(VOL), undefined);
    assert.deepEqual(mounter.actions, [`mount ${fakeDevicePath(VOL)} ${STAGING}`, `mount ${STAGING} ${TARGET}`, 'reboot']);
  });

  it('a block volume is published as a file bind-mounted from its device node, and unpublish removes the file', async () => {
    const { fs, mounter, driver } = await node();
    await driver.nodeStageVolume(stageReq({ volumeId: 'blk', stagingTargetPath: BLOCK_STAGING, volumeCapability: BLOCK_CAP }));
    await driver.nodePublishVolume(
      publishReq({ volumeId: 'blk', stagingTargetPath: BLOCK_STAGING, targetPath: BLOCK_TARGET, volumeCapability: BLOCK_CAP }),
    );
    assert.equal((await fs.lstat(BLOCK_TARGET)).type, 'file');
    assert.deepEqual(mounts(mounter), [`${BLOCK_STAGING} <- 259:1 /`, `${BLOCK_TARGET} <- 8:1 /dev/fake/blk`]);
    assert.equal(driver.volume('blk')?.block, true);
    await driver.nodeUnpublishVolume(unpublishReq({ volumeId: 'blk', targetPath: BLOCK_TARGET }));
    await driver.nodeUnstageVolume(unstageReq({ volumeId: 'blk', stagingTargetPath: BLOCK_STAGING }));
    await assert.rejects(fs.lstat(BLOCK_TARGET));
    assert.deepEqual(mounts(mounter), []);
  });

  it('a driver without STAGE_UNSTAGE_VOLUME publishes by mounting the device on the target directly', async () => {
    const { fs, mounter, driver } = await node([]);
    assert.deepEqual(await driver.nodeGetCapabilities(), []);
    await driver.nodePublishVolume(publishReq({ stagingTargetPath: '' }));
    assert.deepEqual(mounts(mounter), [`${TARGET} <- 259:1 /`]);
    assert.equal(mounter.entries()[1]?.source, fakeDevicePath(VOL));
    await rejectsWithCode(driver.nodeStageVolume(stageReq()), GrpcStatus.UNIMPLEMENTED);
    await driver.nodeUnpublishVolume(unpublishReq());
    assert.deepEqual(mounts(mounter), []);
    assert.deepEqual(fs.tree(POD_DIR), []);
  });

  it('a read-only publish mounts the target read-only', async () => {
    const { mounter, driver } = await node();
    await driver.nodeStageVolume(stageReq());
    await driver.nodePublishVolume(publishReq({ readonly: true }));
    const table = await mounter.readMountTable();
    assert.deepEqual(table.entries.find((e) => e.mountPoint === TARGET)?.mountOptions, ['ro', 'relatime']);
  });
});

describe('FakeCsiDriver errors', () => {
  it('unstage while still published is FAILED_PRECONDITION and leaves both mounts', async () => {
    const { mounter, driver } = await node();
    await driver.nodeStageVolume(stageReq());
    await driver.nodePublishVolume(publishReq());
    await rejectsWithCode(
      driver.nodeUnstageVolume(unstageReq()),
      GrpcStatus.FAILED_PRECONDITION,
      new RegExp(`volume ${VOL} is still published at ${TARGET}`),
    );
    assert.equal(mounts(mounter).length, 2);
    assert.equal(driver.calls.at(-1)?.outcome, 'FAILED_PRECONDITION');
  });

  it('the still-published answer can be hostpath\'s INTERNAL', async () => {
    const { driver } = await node(undefined, GrpcStatus.INTERNAL);
    await driver.nodeStageVolume(stageReq());
    await driver.nodePublishVolume(publishReq());
    await rejectsWithCode(driver.nodeUnstageVolume(unstageReq()), GrpcStatus.INTERNAL, /still published/);
  });

  it('publish before stage is FAILED_PRECONDITION and creates no target', async () => {
    const { fs, mounter, driver } = await node();
    await rejectsWithCode(driver.nodePublishVolume(publishReq()), GrpcStatus.FAILED_PRECONDITION, /not staged/);
    assert.deepEqual(fs.tree(POD_DIR), []);
    assert.deepEqual(mounts(mounter), []);
  });

  it('staging at a second path is FAILED_PRECONDITION', async () => {
    const { fs, driver } = await node();
    await driver.nodeStageVolume(stageReq());
    await fs.mkdir('/other/globalmount', { recursive: true, mode: 0o750 });
    await rejectsWithCode(
      driver.nodeStageVolume(stageReq({ stagingTargetPath: '/other/globalmount' })),
      GrpcStatus.FAILED_PRECONDITION,
      /already staged/,
    );
  });

  it('unstage of a volume not staged at that path, and unpublish of an unknown target, are OK', async () => {
    const { driver } = await node();
    await driver.nodeUnstageVolume(unstageReq({ volumeId: 'never-seen' }));
    await driver.nodeUnpublishVolume(unpublishReq({ volumeId: 'never-seen', targetPath: '/no/such/target' }));
    assert.deepEqual(driver.calls.map((c) => c.outcome), ['OK', 'OK']);
  });

  it('a missing staging directory or target parent is INTERNAL', async () => {
    const { fs, driver } = await node();
    await rejectsWithCode(driver.nodeStageVolume(stageReq({ stagingTargetPath: '/not/created' })), GrpcStatus.INTERNAL, /not accessible/);
    await driver.nodeStageVolume(stageReq());
    await rejectsWithCode(driver.nodePublishVolume(publishReq({ targetPath: '/no/parent/mount' })), GrpcStatus.INTERNAL, /cannot create target/);
    assert.deepEqual(fs.tree('/no'), []);
  });

  const invalid: { name: string; call: (d: FakeCsiDriver) => Promise<unknown> }[] = [
    { name: 'stage without volume id', call: (d) => d.nodeStageVolume(stageReq({ volumeId: '' })) },
    { name: 'stage without staging path', call: (d) => d.nodeStageVolume(stageReq({ stagingTargetPath: '' })) },
    {
      name: 'stage without capability',
      call: (d) => d.nodeStageVolume({ ...stageReq(), volumeCapability: undefined } as unknown as NodeStageVolumeRequest),
    },
    {
      name: 'stage with a capability that is neither mount nor block',
      call: (d) => d.nodeStageVolume(stageReq({ volumeCapability: { accessMode: { mode: 'SINGLE_NODE_WRITER' } } })),
    },
    { name: 'unstage without volume id', call: (d) => d.nodeUnstageVolume(unstageReq({ volumeId: '' })) },
    { name: 'unstage without staging path', call: (d) => d.nodeUnstageVolume(unstageReq({ stagingTargetPath: '' })) },
    { name: 'publish without volume id', call: (d) => d.nodePublishVolume(publishReq({ volumeId: '' })) },
    { name: 'publish without target path', call: (d) => d.nodePublishVolume(publishReq({ targetPath: '' })) },
    { name: 'publish without staging path on a staging driver', call: (d) => d.nodePublishVolume(publishReq({ stagingTargetPath: '' })) },
    {
      name: 'publish without capability',
      call: (d) => d.nodePublishVolume({ ...publishReq(), volumeCapability: undefined } as unknown as NodePublishVolumeRequest),
    },
    { name: 'unpublish without volume id', call: (d) => d.nodeUnpublishVolume(unpublishReq({ volumeId: '' })) },
    { name: 'unpublish without target path', call: (d) => d.nodeUnpublishVolume(unpublishReq({ targetPath: '' })) },
  ];
  for (const c of invalid) {
    it(`${c.name} is INVALID_ARGUMENT and is recorded as such`, async () => {
      const { mounter, driver } = await node();
      await rejectsWithCode(c.call(driver), GrpcStatus.INVALID_ARGUMENT);
      assert.equal(driver.calls.at(-1)?.outcome, 'INVALID_ARGUMENT');
      assert.deepEqual(mounts(mounter), []);
    });
  }
});

describe('FakeCsiDriver fault injection', () => {
  it('UNAVAILABLE injected three times fails three calls, then the call succeeds', async () => {
    const { mounter, driver } = await node();
    const handle = driver.inject({ method: 'NodeStageVolume', code: GrpcStatus.UNAVAILABLE, times: 3 });
    for (let i = 0; i < 3; i++) {
      await rejectsWithCode(driver.nodeStageVolume(stageReq()), GrpcStatus.UNAVAILABLE);
      assert.deepEqual(mounts(mounter), []);
    }
    assert.equal(handle.remaining(), 0);
    await driver.nodeStageVolume(stageReq());
    assert.deepEqual(driver.callsOf('NodeStageVolume').map((c) => c.outcome), ['UNAVAILABLE', 'UNAVAILABLE', 'UNAVAILABLE', 'OK']);
    assert.equal(mounts(mounter).length, 1);
  });

  it('lastTakenFault names the rule the last call took as it was made; none for a call the rule skips or a call refused as busy', async () => {
    const { clock, driver } = await node(undefined, undefined, true);
    const rule = { method: 'NodeStageVolume', volumeId: VOL, delayMs: 5000, times: 1 } as const;
    driver.inject(rule);
    const held = driver.nodeStageVolume(stageReq());
    assert.deepEqual(driver.lastTakenFault, rule);
    // The same volume while the first call is held: refused ABORTED, it takes no rule.
    const busy = driver.nodeStageVolume(stageReq());
    assert.equal(driver.lastTakenFault, undefined);
    await rejectsWithCode(busy, GrpcStatus.ABORTED);
    const caps = driver.nodeGetCapabilities();
    assert.equal(driver.lastTakenFault, undefined);
    await caps;
    await clock.advance(5000);
    await held;
    assert.deepEqual(driver.callsOf('NodeStageVolume').map((c) => c.outcome), ['ABORTED', 'OK']);
  });

  it('a fault for one volume leaves other volumes alone, and remove() stops it', async () => {
    const { fs, driver } = await node();
    await fs.mkdir('/stage/other', { recursive: true, mode: 0o750 });
    const handle = driver.inject({ method: 'NodeStageVolume', volumeId: VOL, code: GrpcStatus.INTERNAL });
    await driver.nodeStageVolume(stageReq({ volumeId: 'other', stagingTargetPath: '/stage/other' }));
    await rejectsWithCode(driver.nodeStageVolume(stageReq()), GrpcStatus.INTERNAL);
    await rejectsWithCode(driver.nodeStageVolume(stageReq()), GrpcStatus.INTERNAL);
    handle.remove();
    await driver.nodeStageVolume(stageReq());
    assert.deepEqual(driver.calls.map((c) => `${c.volumeId}:${c.outcome}`), ['other:OK', `${VOL}:INTERNAL`, `${VOL}:INTERNAL`, `${VOL}:OK`]);
  });

  it('a delay keeps the call pending until the FakeClock is advanced past it', async () => {
    const { mounter, clock, driver } = await node();
    driver.inject({ method: 'NodeStageVolume', delayMs: 5000, times: 1 });
    const call = driver.nodeStageVolume(stageReq());
    await clock.advance(4999);
    assert.equal(await settled(call), false);
    assert.deepEqual(mounts(mounter), []);
    assert.equal(driver.calls.length, 0);
    await clock.advance(1);
    await call;
    assert.equal(mounts(mounter).length, 1);
    assert.deepEqual(driver.calls.map((c) => [c.atMs, c.endMs, c.outcome]), [[0, 5000, 'OK']]);
  });

  it('a delayed failure is answered after the delay', async () => {
    const { clock, driver } = await node();
    driver.inject({ method: 'NodeStageVolume', delayMs: 100, code: GrpcStatus.DEADLINE_EXCEEDED, times: 1 });
    const call = driver.nodeStageVolume(stageReq());
    const outcome = rejectsWithCode(call, GrpcStatus.DEADLINE_EXCEEDED);
    assert.equal(await clock.runUntilIdle(1000), true);
    await outcome;
    assert.equal(clock.nowMs(), 100);
  });

  it('a hanging call answers only after releaseHangs, and then does its work', async () => {
    const { mounter, driver } = await node();
    await driver.nodeStageVolume(stageReq());
    driver.inject({ method: 'NodePublishVolume', hang: true, times: 1 });
    const call = driver.nodePublishVolume(publishReq());
    assert.equal(await settled(call), false);
    assert.equal(driver.hangingCalls(), 1);
    await driver.nodeUnstageVolume(unstageReq({ volumeId: 'unrelated' }));
    assert.equal(mounts(mounter).length, 1);
    assert.equal(driver.releaseHangs(), 1);
    await call;
    assert.equal(mounts(mounter).length, 2);
    assert.deepEqual(driver.calls.map((c) => [c.seq, c.method]), [
      [1, 'NodeStageVolume'], [3, 'NodeUnstageVolume'], [2, 'NodePublishVolume'],
    ]);
  });

  it('a driver reboot fails a hanging call with UNAVAILABLE and without its effect', async () => {
    const { mounter, driver } = await node();
    driver.inject({ method: 'NodeStageVolume', hang: true });
    const call = driver.nodeStageVolume(stageReq());
    const outcome = rejectsWithCode(call, GrpcStatus.UNAVAILABLE, /driver restarted/);
    driver.reboot();
    await outcome;
    assert.deepEqual(mounts(mounter), []);
    assert.equal(driver.volume(VOL), undefined);
  });

  it('an exit fault ends the driver process: that call and a delayed one fail UNAVAILABLE at once, the delayed work never lands, and the next process serves', async () => {
    const { mounter, clock, driver } = await node(undefined, undefined, true);
    let exits = 0;
    driver.onExit = () => exits++;
    driver.inject({ method: 'NodeStageVolume', volumeId: VOL, delayMs: 5000, times: 1 });
    driver.inject({ method: 'NodeUnstageVolume', volumeId: 'other', exit: true, times: 1 });
    const delayed = rejectsWithCode(driver.nodeStageVolume(stageReq()), GrpcStatus.UNAVAILABLE, /driver process exited/);
    await rejectsWithCode(driver.nodeUnstageVolume(unstageReq({ volumeId: 'other' })), GrpcStatus.UNAVAILABLE, /driver process exited/);
    await delayed;
    assert.equal(exits, 1);
    assert.equal(driver.isBusy(VOL), false, 'no volume stays busy');
    await clock.advance(5000);
    assert.deepEqual(mounts(mounter), [], 'the work of the process that exited never lands');
    assert.equal(driver.volume(VOL), undefined);
    await driver.nodeStageVolume(stageReq());
    assert.equal(mounts(mounter).length, 1, 'the next process stages');
    assert.deepEqual(driver.calls.map((c) => [c.method, c.outcome]), [['NodeUnstageVolume', 'UNAVAILABLE'], ['NodeStageVolume', 'UNAVAILABLE'], ['NodeStageVolume', 'OK']]);
  });

  it('afterEffect: unstage really unmounts but is reported DEADLINE_EXCEEDED, and the retry is OK', async () => {
    const { mounter, driver } = await node();
    await driver.nodeStageVolume(stageReq());
    driver.inject({ method: 'NodeUnstageVolume', code: GrpcStatus.DEADLINE_EXCEEDED, afterEffect: true, times: 1 });
    await rejectsWithCode(driver.nodeUnstageVolume(unstageReq()), GrpcStatus.DEADLINE_EXCEEDED, /after the effect/);
    assert.deepEqual(mounts(mounter), []);
    assert.equal(driver.volume(VOL), undefined);
    await driver.nodeUnstageVolume(unstageReq());
    assert.deepEqual(driver.callsOf('NodeUnstageVolume').map((c) => c.outcome), ['DEADLINE_EXCEEDED', 'OK']);
    assert.deepEqual(mounter.actions.filter((a) => a.startsWith('unmount')), [`unmount ${STAGING}`]);
  });

  it('faults apply before argument checks, like the mock driver\'s Pre hook', async () => {
    const { driver } = await node();
    driver.inject({ method: 'NodeStageVolume', code: GrpcStatus.ABORTED, times: 1 });
    await rejectsWithCode(driver.nodeStageVolume(stageReq({ volumeId: '' })), GrpcStatus.ABORTED);
  });

  it('NodeGetCapabilities can be failed too', async () => {
    const { driver } = await node();
    driver.inject({ method: 'NodeGetCapabilities', code: GrpcStatus.UNAVAILABLE, times: 1 });
    await rejectsWithCode(driver.nodeGetCapabilities(), GrpcStatus.UNAVAILABLE);
    assert.deepEqual(await driver.nodeGetCapabilities(), ['STAGE_UNSTAGE_VOLUME']);
  });
});
