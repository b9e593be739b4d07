// Gate CSIKeepUncertainMountOnFinalError's decisions, one hook at a time: which args the
// operation generator hands MountDevice / SetUpDevice / SetUp (from the actual state of the
// world), what a final error keeps (onFinishedError), that an uncertain mount stays uncertain, and
// when a final error of the driver's call still counts as uncertain because its work shows at the
// path (uncertainIfDone: a mount point, or a non-empty raw block staging dir, or a check that
// itself failed); and what follows when kubelet's removal after a final error fails and leaves the
// volume's vol_data.json (afterFailedCleanup, uncertainIfRecordLeft: uncertain), end to end with
// the gate off (kubelet: forgotten, the files stay) and on (torn down once no pod wants it).
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { CSIKeepUncertainMountOnFinalError, FeatureGate } from '../../../src/features/features.js';
import { sha256Hex, type UniquePodName, type UniqueVolumeName } from '../../../src/layout/names.js';
import { keepUncertainMountOnFinalError } from '../../../src/nodevol/keepUncertainMountOnFinalError/index.js';
import { uncertainIfDone } from '../../../src/nodevol/keepUncertainMountOnFinalError/uncertainIfDone.js';
import { uncertainIfRecordLeft } from '../../../src/nodevol/keepUncertainMountOnFinalError/uncertainIfRecordLeft.js';
import type { VolumeToMount } from '../../../src/operationexecutor/volumeToMount.js';
import { FsError } from '../../../src/ports/fs.js';
import type { FailedCleanupSite, FinishedErrorSite } from '../../../src/volume/csi/csiHooks.js';
import type { MounterArgs } from '../../../src/volume/plugins.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { UncertainProgressError } from '../../../src/volume/util/errors.js';
import type { VolumeHost } from '../../../src/volume/volumeHost.js';
import { createActualStateOfWorld } from '../../../src/volumemanager/cache/actualStateOfWorld.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';
import { rootDirFault } from '../../support/rootDirFault.js';

const GATES = FeatureGate.of({ [CSIKeepUncertainMountOnFinalError]: true });
const VOLUME = `kubernetes.io/csi/${DRIVER}^vol-1` as UniqueVolumeName;
const POD = 'pod-a' as UniquePodName;
const STAGING = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/0123abcd/globalmount`;

function policy(host: VolumeHost): ReturnType<typeof keepUncertainMountOnFinalError.create> {
  return keepUncertainMountOnFinalError.create(host, GATES);
}

describe('mounterArgs: what MountDevice / SetUpDevice and SetUp are told', () => {
  const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1');
  const vtm = { volumeName: VOLUME, podName: POD, seLinuxMountContext: '' } as VolumeToMount;
  const args: MounterArgs = { seLinuxLabel: 'label' };
  const mountOpts = { podName: POD, podUID: 'pod-a', volumeName: VOLUME, volumeSpec: spec, outerVolumeSpecName: 'data', innerVolumeSpecName: 'pv-1', pluginName: 'kubernetes.io/csi', seLinuxMountContext: '' };

  function hook(): NonNullable<NonNullable<ReturnType<typeof policy>['operationGenerator']>['mounterArgs']> {
    const h = policy(volumeHostOf(new InMemoryNode())).operationGenerator?.mounterArgs;
    assert.ok(h !== undefined);
    return h;
  }

  it('an uncertain device: the device step keeps its staging on a final error; the pod step is told nothing', () => {
    const asw = createActualStateOfWorld();
    asw.markVolumeAsAttached(VOLUME, spec, 'kubernetes.io/csi', '', true);
    asw.markDeviceAsUncertain(VOLUME, '', STAGING, '');
    asw.markVolumeAsMounted({ ...mountOpts, volumeMountState: 'VolumeMounted' });
    assert.deepEqual(hook()('device', vtm, asw, args), { seLinuxLabel: 'label', keepStagingOnFinalError: true });
    assert.equal(hook()('volume', vtm, asw, args), args);
  });

  it('an uncertain pod mount: the pod step keeps its target on a final error; the device step is told nothing', () => {
    const asw = createActualStateOfWorld();
    asw.markVolumeAsAttached(VOLUME, spec, 'kubernetes.io/csi', '', true);
    asw.markDeviceAsMounted(VOLUME, '', STAGING, '');
    asw.markVolumeMountAsUncertain({ ...mountOpts, volumeMountState: 'VolumeMountUncertain' });
    assert.deepEqual(hook()('volume', vtm, asw, args), { seLinuxLabel: 'label', keepTargetOnFinalError: true });
    assert.equal(hook()('device', vtm, asw, args), args);
  });

  it("nothing uncertain (a new volume, or one mounted): kubelet's args, unchanged", () => {
    const asw = createActualStateOfWorld();
    asw.markVolumeAsAttached(VOLUME, spec, 'kubernetes.io/csi', '', true);
    assert.equal(hook()('device', vtm, asw, args), args);
    assert.equal(hook()('volume', vtm, asw, args), args);
    asw.markDeviceAsMounted(VOLUME, '', STAGING, '');
    asw.markVolumeAsMounted({ ...mountOpts, volumeMountState: 'VolumeMounted' });
    assert.equal(hook()('device', vtm, asw, args), args);
    assert.equal(hook()('volume', vtm, asw, args), args);
  });

  it('an uncertain device or pod mount stays uncertain after a final error', () => {
    const og = policy(volumeHostOf(new InMemoryNode())).operationGenerator;
    const asw = createActualStateOfWorld();
    assert.equal(og?.deviceStaysUncertain?.(asw, VOLUME), true);
    assert.equal(og?.volumeMountStaysUncertain?.(asw, VOLUME, POD), true);
  });
});

describe('onFinishedError: what a final error keeps', () => {
  const keepStaging: MounterArgs = { keepStagingOnFinalError: true };
  const keepTarget: MounterArgs = { keepTargetOnFinalError: true };
  const cases: [FinishedErrorSite['operation'], FinishedErrorSite['step'], MounterArgs, string][] = [
    ['SetUp', 'NodePublishVolume', {}, 'cleanup'],
    ['SetUp', 'NodePublishVolume', keepStaging, 'cleanup'],
    ['SetUp', 'NodePublishVolume', keepTarget, 'keep'],
    ['SetUp', 'saveVolumeData', keepTarget, 'keep'],
    ['MountDevice', 'NodeStageVolume', {}, 'cleanup'],
    ['MountDevice', 'NodeStageVolume', keepTarget, 'cleanup'],
    ['MountDevice', 'NodeStageVolume', keepStaging, 'keep'],
    ['MountDevice', 'NodeGetCapabilities', keepStaging, 'keep'],
    ['MountDevice', 'saveVolumeData', keepStaging, 'uncertain'],
    ['MountDevice', 'saveVolumeData', {}, 'cleanup'],
    ['SetUpDevice', 'NodeStageVolume', {}, 'cleanup'],
    ['SetUpDevice', 'MkdirAll', keepStaging, 'keep'],
    ['SetUpDevice', 'saveVolumeData', keepStaging, 'uncertain'],
  ];
  for (const [operation, step, args, want] of cases) {
    it(`${operation}, ${step} failed, args ${JSON.stringify(args)}: ${want}`, () => {
      const decide = policy(volumeHostOf(new InMemoryNode())).csi?.onFinishedError;
      assert.equal(decide?.({ operation, step, path: STAGING, args }), want);
    });
  }

  it('what is kept is logged at V(2), naming the operation and the path', () => {
    const node = new InMemoryNode();
    const decide = policy(volumeHostOf(node)).csi?.onFinishedError;
    decide?.({ operation: 'MountDevice', step: 'NodeStageVolume', path: STAGING, args: keepStaging });
    decide?.({ operation: 'SetUpDevice', step: 'NodeStageVolume', path: STAGING, args: keepStaging });
    decide?.({ operation: 'SetUp', step: 'NodePublishVolume', path: '/target', args: keepTarget });
    decide?.({ operation: 'MountDevice', step: 'saveVolumeData', path: STAGING, args: keepStaging });
    assert.deepEqual(
      node.logger.lines.map((l) => [l.level, l.msg.replace(/ after .*/, ''), l.values]),
      [
        [2, 'kubernetes.io/csi: attacher.MountDevice keeps the staging dir and its volume data', { deviceMountPath: STAGING }],
        [2, 'kubernetes.io/csi: blockMapper.SetUpDevice keeps the staging dir and the volume data', { stagingPath: STAGING }],
        [2, 'kubernetes.io/csi: mounter.SetUpAt keeps the pod volume dir and its volume data', { dir: '/target' }],
      ],
    );
  });
});

describe('uncertainIfDone: a final error, and the driver\'s work shows anyway', () => {
  let node: InMemoryNode;
  let fs: FaultyFs;
  let host: VolumeHost;
  const err = new Error('rpc error: code = Internal desc = stage failed');
  beforeEach(async () => {
    node = new InMemoryNode();
    await node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
    fs = new FaultyFs(node.fs);
    host = volumeHostOf(node, { fs });
  });

  /** The verdict: the uncertain error's message, or undefined when nothing shows. */
  async function verdict(p: string, opts?: { orNotEmpty?: boolean }): Promise<string | undefined> {
    const got = await uncertainIfDone(host, err, p, 'attacher.MountDevice', opts);
    if (got === undefined) return undefined;
    assert.ok(got instanceof UncertainProgressError);
    return got.message;
  }

  it('an empty dir that is no mount point: nothing shows, with or without the non-empty check', async () => {
    assert.equal(await verdict(STAGING), undefined);
    assert.equal(await verdict(STAGING, { orNotEmpty: true }), undefined);
  });

  it('a mount point: uncertain, with the same text, logged with the path', async () => {
    await node.mounter.mount('/dev/x', STAGING, 'ext4', []);
    assert.equal(await verdict(STAGING), err.message);
    assert.equal(await verdict(STAGING, { orNotEmpty: true }), err.message);
    assert.deepEqual(node.logger.lines[0]?.values, { path: STAGING, err: err.message });
  });

  it('a non-empty dir: uncertain only with the non-empty check (a raw block staging dir)', async () => {
    node.fs.writeRaw(`${STAGING}/dev`, '');
    assert.equal(await verdict(STAGING), undefined);
    assert.equal(await verdict(STAGING, { orNotEmpty: false }), undefined);
    assert.equal(await verdict(STAGING, { orNotEmpty: true }), err.message);
    assert.deepEqual(fs.calls.filter((c) => c.startsWith('readdir')), [`readdir ${STAGING}`]);
  });

  it('a missing path: nothing shows', async () => {
    assert.equal(await verdict(`${STAGING}-gone`, { orNotEmpty: true }), undefined);
  });

  it('the dir cannot be read (EIO): counts as shown', async () => {
    fs.failOn('readdir', STAGING, 'EIO');
    assert.equal(await verdict(STAGING, { orNotEmpty: true }), err.message);
  });

  it('the mount check fails (EACCES): counts as shown', async () => {
    const m = node.mounter;
    host = {
      ...host,
      mounter: {
        isLikelyNotMountPoint: (p) => Promise.reject(new FsError('EACCES', p, 'stat')),
        mount: (source, target, fsType, options) => m.mount(source, target, fsType, options),
        unmount: (target) => m.unmount(target),
        readMountTable: () => m.readMountTable(),
      },
    };
    assert.equal(await verdict(STAGING), err.message);
  });

  it('an error that is not an Error: its text', async () => {
    await node.mounter.mount('/dev/x', STAGING, 'ext4', []);
    const got = await uncertainIfDone(host, 'plain text', STAGING, 'attacher.MountDevice');
    assert.equal(got?.message, 'plain text');
  });
});

describe('afterFailedCleanup (uncertainIfRecordLeft): the removal after a final error failed', () => {
  const DATA_DIR = `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`;
  const site: FailedCleanupSite = { operation: 'SetUp', step: 'NodePublishVolume', path: `${DATA_DIR}/mount`, args: {}, dataDir: DATA_DIR };
  let node: InMemoryNode;
  let fs: FaultyFs;
  let host: VolumeHost;
  beforeEach(async () => {
    node = new InMemoryNode();
    await node.fs.mkdir(DATA_DIR, { recursive: true, mode: 0o750 });
    fs = new FaultyFs(node.fs);
    host = volumeHostOf(node, { fs });
  });

  it('the gate sets it: the policy answers with uncertainIfRecordLeft', async () => {
    node.fs.writeRaw(`${DATA_DIR}/vol_data.json`, '{}');
    assert.equal(await policy(host).csi?.afterFailedCleanup?.(site), 'uncertain');
  });

  it('vol_data.json is still there: uncertain, logged at V(0) with the path and the record', async () => {
    node.fs.writeRaw(`${DATA_DIR}/vol_data.json`, '{}');
    assert.equal(await uncertainIfRecordLeft(host, site), 'uncertain');
    assert.deepEqual(
      node.logger.lines.map((l) => [l.level, l.msg, l.values]),
      [[0, 'kubernetes.io/csi: SetUp failed and so did its cleanup: uncertain, torn down when no pod wants it', { path: site.path, data: `${DATA_DIR}/vol_data.json` }]],
    );
  });

  it('the removal got past it (no vol_data.json, only dirs left): forget, as kubelet does', async () => {
    assert.equal(await uncertainIfRecordLeft(host, site), 'forget');
    assert.deepEqual(node.logger.lines, []);
  });

  it('vol_data.json is not a file (a directory of that name): forget', async () => {
    await node.fs.mkdir(`${DATA_DIR}/vol_data.json`, { recursive: true, mode: 0o750 });
    assert.equal(await uncertainIfRecordLeft(host, site), 'forget');
  });

  it('it cannot be looked at (EIO): forget, logged at V(2) (a teardown could not build its unmounter from it)', async () => {
    node.fs.writeRaw(`${DATA_DIR}/vol_data.json`, '{}');
    fs.failOn('lstat', `${DATA_DIR}/vol_data.json`, 'EIO');
    assert.equal(await uncertainIfRecordLeft(host, site), 'forget');
    assert.deepEqual(node.logger.lines.map((l) => l.level), [2]);
  });
});

describe('a final error whose cleanup fails on a read-only root dir (explorer workload 9644): gate off (kubelet) and on', () => {
  const VOLUME_DIR = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex('vol-1')}`;
  const POD_VOLUME_DIR = `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`;
  const BLOCK_DIR = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices/pv-1`;
  const INTERNAL = 13;

  /** CSI calls after `from`, without NodeGetCapabilities, consecutive repeats of a call shown once. */
  function calls(node: InMemoryNode, from: number): string[] {
    const out: string[] = [];
    for (const c of node.driver.calls.slice(from)) {
      const s = `${c.method} ${c.outcome}`;
      if (c.method !== 'NodeGetCapabilities' && out.at(-1) !== s) out.push(s);
    }
    return out;
  }

  /**
   * pod-a wants pv-1; `method` fails with INTERNAL (before any work), and as it arrives the root
   * dir turns read-only and the pod is deleted (so the cleanup's first rmdir fails with EROFS,
   * and no retry follows). Two steps later (still read-only: `whileReadOnly`, the ASW's states then)
   * the fault is lifted and 60 steps run.
   */
  async function failedCleanup(
    on: boolean,
    method: 'NodeStageVolume' | 'NodePublishVolume',
    mode: 'Filesystem' | 'Block',
  ): Promise<{ node: InMemoryNode; name: UniqueVolumeName; mark: number; whileReadOnly: { device: string; pod: string } }> {
    const node = new InMemoryNode();
    const setFault = rootDirFault(node);
    const name = node.addVolume('pv-1', 'vol-1', { mode }) as UniqueVolumeName;
    node.driver.inject({ method, code: INTERNAL, times: 1 });
    node.driver.observer = {
      arrived: (_seq, m) => {
        if (m !== method) return;
        setFault('EROFS');
        node.cluster.deletePod('pod-a');
      },
      finished: () => undefined,
    };
    node.addPod('pod-a', ['pv-1']);
    const mark = node.driver.calls.length;
    await node.startKubelet(FeatureGate.of({ CSIGlobalMountReconstruction: true, [CSIKeepUncertainMountOnFinalError]: on }));
    await node.stepUntil(() => node.driver.calls.slice(mark).some((c) => c.method === method));
    await node.steps(2);
    const asw = node.kubelet.asw;
    const whileReadOnly = { device: asw.getDeviceMountState(name), pod: asw.getVolumeMountState(name, POD) };
    setFault(undefined);
    await node.steps(60);
    return { node, name, mark, whileReadOnly };
  }

  const left = (node: InMemoryNode): string[] => node.tree().filter((p) => p.includes('pv-1') || p.includes(sha256Hex('vol-1')));

  it('SetUp, off: the pod mount is forgotten, never unpublished; its pod volume dir and vol_data.json stay', async () => {
    const { node, name, mark, whileReadOnly } = await failedCleanup(false, 'NodePublishVolume', 'Filesystem');
    assert.equal(whileReadOnly.pod, 'VolumeNotMounted');
    assert.deepEqual(calls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume INTERNAL', 'NodeUnstageVolume OK']);
    assert.equal(node.kubelet.asw.volumeExists(name), false);
    assert.deepEqual(left(node), [`${POD_VOLUME_DIR}/`, `${POD_VOLUME_DIR}/vol_data.json`]);
  });

  it('SetUp, on: the pod mount is uncertain; once writable, NodeUnpublishVolume (idempotent), the dir removed, then NodeUnstageVolume', async () => {
    const { node, name, mark, whileReadOnly } = await failedCleanup(true, 'NodePublishVolume', 'Filesystem');
    assert.equal(whileReadOnly.pod, 'VolumeMountUncertain');
    assert.deepEqual(calls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume INTERNAL', 'NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    assert.equal(node.kubelet.asw.volumeExists(name), false);
    assert.equal(node.driver.volume('vol-1'), undefined);
    assert.deepEqual(left(node), []);
  });

  it('MountDevice, off: the device is forgotten, never unstaged; its volume dir, vol_data.json and globalmount stay', async () => {
    const { node, name, mark, whileReadOnly } = await failedCleanup(false, 'NodeStageVolume', 'Filesystem');
    assert.equal(whileReadOnly.device, 'DeviceNotMounted');
    assert.deepEqual(calls(node, mark), ['NodeStageVolume INTERNAL']);
    assert.equal(node.kubelet.asw.volumeExists(name), false);
    assert.deepEqual(left(node), [`${VOLUME_DIR}/`, `${VOLUME_DIR}/globalmount/`, `${VOLUME_DIR}/vol_data.json`]);
  });

  it('MountDevice, on: the device is uncertain; once writable, NodeUnstageVolume (idempotent) and the volume dir removed', async () => {
    const { node, name, mark, whileReadOnly } = await failedCleanup(true, 'NodeStageVolume', 'Filesystem');
    assert.equal(whileReadOnly.device, 'DeviceMountUncertain');
    assert.deepEqual(calls(node, mark), ['NodeStageVolume INTERNAL', 'NodeUnstageVolume OK']);
    assert.equal(node.kubelet.asw.volumeExists(name), false);
    assert.deepEqual(left(node), []);
  });

  it('raw block SetUpDevice, off: the device is forgotten, never unstaged; its block data file stays', async () => {
    const { node, mark, whileReadOnly } = await failedCleanup(false, 'NodeStageVolume', 'Block');
    assert.equal(whileReadOnly.device, 'DeviceNotMounted');
    assert.deepEqual(calls(node, mark), ['NodeStageVolume INTERNAL']);
    assert.ok(left(node).includes(`${BLOCK_DIR}/data/vol_data.json`), JSON.stringify(left(node)));
  });

  it('raw block SetUpDevice, on: the device is uncertain; once writable, NodeUnstageVolume (idempotent) and its files removed', async () => {
    const { node, name, mark, whileReadOnly } = await failedCleanup(true, 'NodeStageVolume', 'Block');
    assert.equal(whileReadOnly.device, 'DeviceMountUncertain');
    assert.deepEqual(calls(node, mark), ['NodeStageVolume INTERNAL', 'NodeUnstageVolume OK']);
    assert.equal(node.kubelet.asw.volumeExists(name), false);
    assert.deepEqual(left(node), []);
  });
});
