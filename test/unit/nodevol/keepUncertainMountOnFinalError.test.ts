// Gate CSIKeepUncertainMountOnFinalError's decisions, one hook at a time: which args the
// operation generator hands MountDevice / SetUpDevice / SetUp (from the actual state of the
// world), what a final error keeps (onFinishedError), that an uncertain mount stays uncertain, and
// when a final error of the driver's call still counts as uncertain because its work shows at the
// path (uncertainIfDone: a mount point, or a non-empty raw block staging dir, or a check that
// itself failed).
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { CSIKeepUncertainMountOnFinalError, FeatureGate } from '../../../src/features/features.js';
import type { UniquePodName, UniqueVolumeName } from '../../../src/layout/names.js';
import { keepUncertainMountOnFinalError } from '../../../src/nodevol/keepUncertainMountOnFinalError/index.js';
import { uncertainIfDone } from '../../../src/nodevol/keepUncertainMountOnFinalError/uncertainIfDone.js';
import type { VolumeToMount } from '../../../src/operationexecutor/volumeToMount.js';
import { FsError } from '../../../src/ports/fs.js';
import type { FinishedErrorSite } from '../../../src/volume/csi/csiHooks.js';
import type { MounterArgs } from '../../../src/volume/plugins.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { UncertainProgressError } from '../../../src/volume/util/errors.js';
import type { VolumeHost } from '../../../src/volume/volumeHost.js';
import { createActualStateOfWorld } from '../../../src/volumemanager/cache/actualStateOfWorld.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';

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
