// The operations of operation_generator.go (GenerateVerifyControllerAttachedVolumeFunc,
// GenerateMountVolumeFunc, GenerateMapVolumeFunc, GenerateUnmountVolumeFunc,
// GenerateUnmapVolumeFunc, GenerateUnmountDeviceFunc, GenerateUnmapDeviceFunc) alone, over fake
// plugins and an actual state that records every mark: the errors an operator reads (operation
// name, volume, pod), the marks each outcome leaves, and markDeviceErrorState /
// markVolumeErrorState's rules. ReadWriteOncePod and UnmountDevice's order have their own files.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UniquePodName } from '../../../src/layout/names.js';
import type { AttachedVolume, UnmountTarget } from '../../../src/operationexecutor/actualStateOfWorldUpdater.js';
import { markDeviceErrorState, markVolumeErrorState, OperationGenerator, pluginLabel, UNKNOWN_VOLUME_PLUGIN } from '../../../src/operationexecutor/operationGenerator.js';
import type { VolumeToMount } from '../../../src/operationexecutor/volumeToMount.js';
import { FsError, overrideFileSystem, type FileSystem } from '../../../src/ports/fs.js';
import type { VolumePluginMgr } from '../../../src/volume/plugins.js';
import { UncertainProgressError } from '../../../src/volume/util/errors.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';
import { csiPvSpec, recordingAsw, VOLUME, volumeToMount } from '../../support/operationGeneratorFakes.js';

const CSI = 'kubernetes.io/csi';
const SPEC = csiPvSpec();
/** A PV that may be used only on nodes labelled zone=a (the test node has no labels). */
const ZONED = csiPvSpec({ nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }] } } });
/**
 * A PV whose only term kubelet's label selector refuses (NotIn needs values): it matches no node,
 * not even this label-less one, and the refusal is the error.
 */
const REFUSED = csiPvSpec({ nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: [] }] }] } } });
const REFUSED_ERR = "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty";
/** volumeError's suffix for volumeToMount(): "<prefix> for volume ... pod ...: <err>". */
const FOR_POD = `for volume "data" (UniqueName: ${JSON.stringify(VOLUME)}) pod "pod-2" (UID: "uid-2")`;

const TARGET: UnmountTarget = { podName: 'uid-1' as UniquePodName, podUID: 'uid-1', volumeName: VOLUME, innerVolumeSpecName: 'pv-1', outerVolumeSpecName: 'data', pluginName: CSI, volumeSpec: SPEC };

function generatorOn(node: InMemoryNode, plugins: Partial<Record<keyof VolumePluginMgr, unknown>>, fs?: FileSystem): OperationGenerator {
  return new OperationGenerator({ plugins: plugins as unknown as VolumePluginMgr, host: volumeHostOf(node, fs === undefined ? {} : { fs }), cluster: node.cluster, logger: node.logger });
}

/** The message `act` rejects (or throws) with; '' when it does not. */
async function errorOf(act: () => Promise<unknown>): Promise<string> {
  try {
    await act();
    return '';
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const notFound = (): never => {
  throw new Error('no volume plugin matched');
};
const mountPlugin = (newMounter: () => Promise<unknown> = () => Promise.resolve({})): unknown => ({ getPluginName: () => CSI, newMounter });
const mapperPlugin = (mapper: unknown = {}): unknown => ({ getPluginName: () => CSI, newBlockVolumeMapper: () => Promise.resolve(mapper) });
const attached = (over: Partial<AttachedVolume> = {}): AttachedVolume => ({
  volumeName: VOLUME,
  volumeSpec: SPEC,
  pluginName: CSI,
  pluginIsAttachable: true,
  attachability: 'True',
  deviceMountState: 'DeviceGloballyMounted',
  devicePath: '/dev/x',
  deviceMountPath: `${ROOT}/plugins/kubernetes.io/csi/volumeDevices/pv-1/dev`,
  seLinuxMountContext: '',
  ...over,
});

describe('operation errors: the text kubelet returns, naming the operation and the volume', () => {
  const GMP = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices/pv-1/dev`;
  const cases: { name: string; act: (node: InMemoryNode) => Promise<unknown>; error: string }[] = [
    {
      name: 'MountVolume, no plugin for the spec',
      act: (node) => generatorOn(node, { findPluginBySpec: notFound }).generateMountVolume(volumeToMount(), '/dev/x', recordingAsw().asw).run(),
      error: `MountVolume.FindPluginBySpec failed ${FOR_POD} : no volume plugin matched`,
    },
    {
      name: 'MountVolume, the PV\'s node affinity does not match the node',
      act: (node) => generatorOn(node, { findPluginBySpec: () => mountPlugin() }).generateMountVolume(volumeToMount({ spec: ZONED }), '/dev/x', recordingAsw().asw).run(),
      error: `MountVolume.NodeAffinity check failed ${FOR_POD} : no matching NodeSelectorTerms`,
    },
    {
      name: 'MountVolume, the PV\'s node affinity has a requirement kubelet refuses',
      act: (node) => generatorOn(node, { findPluginBySpec: () => mountPlugin() }).generateMountVolume(volumeToMount({ spec: REFUSED }), '/dev/x', recordingAsw().asw).run(),
      error: `MountVolume.NodeAffinity check failed ${FOR_POD} : ${REFUSED_ERR}`,
    },
    {
      name: 'MountVolume, NewMounter fails',
      act: (node) => generatorOn(node, { findPluginBySpec: () => mountPlugin(() => Promise.reject(new Error('no CSIDriver'))) }).generateMountVolume(volumeToMount(), '/dev/x', recordingAsw().asw).run(),
      error: `MountVolume.NewMounter initialization failed ${FOR_POD} : no CSIDriver`,
    },
    {
      name: 'MapVolume, no block mapper for the spec (at generation)',
      act: (node) => generatorOn(node, { findMapperPluginBySpec: () => undefined }).generateMapVolume(volumeToMount(), '/dev/x', recordingAsw().asw),
      error: `MapVolume.FindMapperPluginBySpec failed for ${VOLUME}`,
    },
    {
      name: 'MapVolume, the PV\'s node affinity does not match the node (at generation)',
      act: (node) => generatorOn(node, { findMapperPluginBySpec: () => mapperPlugin() }).generateMapVolume(volumeToMount({ spec: ZONED }), '/dev/x', recordingAsw().asw),
      error: `MapVolume.NodeAffinity check failed ${FOR_POD} : no matching NodeSelectorTerms`,
    },
    {
      name: 'MapVolume, the PV\'s node affinity has a requirement kubelet refuses (at generation)',
      act: (node) => generatorOn(node, { findMapperPluginBySpec: () => mapperPlugin() }).generateMapVolume(volumeToMount({ spec: REFUSED }), '/dev/x', recordingAsw().asw),
      error: `MapVolume.NodeAffinity check failed ${FOR_POD} : ${REFUSED_ERR}`,
    },
    {
      name: 'VerifyControllerAttachedVolume, not yet reported in use',
      act: (node) => generatorOn(node, {}).generateVerifyControllerAttachedVolume(volumeToMount({ reportedInUse: false }), recordingAsw().asw).run(),
      error: `volume ${VOLUME} has not been added to the list of VolumesInUse in the node's volume status`,
    },
    {
      name: 'VerifyControllerAttachedVolume, not in the node\'s volumesAttached',
      act: (node) => generatorOn(node, {}).generateVerifyControllerAttachedVolume(volumeToMount(), recordingAsw().asw).run(),
      error: `volume ${VOLUME} not attached according to node status`,
    },
    {
      name: 'UnmapVolume, no block mapper by that name (at generation)',
      act: (node) => generatorOn(node, { findMapperPluginByName: () => undefined }).generateUnmapVolume(TARGET, recordingAsw().asw),
      error: `UnmapVolume.FindMapperPluginByName failed for ${CSI}`,
    },
    {
      name: 'UnmountDevice, no device mountable plugin by that name (at generation)',
      act: (node) => Promise.resolve().then(() => generatorOn(node, { findDeviceMountablePluginByName: () => undefined }).generateUnmountDevice(attached(), recordingAsw().asw)),
      error: `UnmountDevice.FindDeviceMountablePluginByName failed for ${CSI}`,
    },
    {
      name: 'UnmapDevice, no block mapper by that name (at generation)',
      act: (node) => generatorOn(node, { findMapperPluginByName: () => undefined }).generateUnmapDevice(attached(), recordingAsw().asw),
      error: `UnmapDevice.FindMapperPluginByName failed for ${CSI}`,
    },
    {
      name: 'UnmapDevice, the global map path cannot be read',
      act: async (node) => {
        const fs = new FaultyFs(node.fs).failOn('readdir', GMP, 'EACCES');
        return (await generatorOn(node, { findMapperPluginByName: () => unmapperPlugin([]).plugin }, fs).generateUnmapDevice(attached(), recordingAsw().asw)).run();
      },
      error: `UnmapDevice.GetDeviceBindMountRefs check failed for volume ${JSON.stringify(VOLUME)}: ${new FsError('EACCES', GMP, 'readdir').message}`,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      assert.equal(await errorOf(() => c.act(new InMemoryNode())), c.error);
    });
  }
});

describe('pluginLabel (storage_operation_duration_seconds volume_plugin)', () => {
  it('MountVolume whose plugin cannot be found at generation: UnknownVolumePlugin', () => {
    const op = generatorOn(new InMemoryNode(), { findPluginBySpec: notFound }).generateMountVolume(volumeToMount({ spec: { kind: 'inline', readOnly: false, volume: { name: 'scratch' } } }), '', recordingAsw().asw);
    assert.equal(op.pluginLabel, 'UnknownVolumePlugin');
    assert.equal(UNKNOWN_VOLUME_PLUGIN, 'UnknownVolumePlugin');
  });

  it('the plugin name, with the CSI driver when the spec has one', () => {
    assert.equal(pluginLabel(CSI, SPEC), `${CSI}:${DRIVER}`);
    assert.equal(pluginLabel('kubernetes.io/empty-dir', { kind: 'inline', readOnly: false, volume: { name: 'scratch' } }), 'kubernetes.io/empty-dir');
    assert.equal(pluginLabel(CSI, undefined), CSI);
  });
});

describe('VerifyControllerAttachedVolume: the attached mark', () => {
  async function verify(v: VolumeToMount, volumesAttached: { name: string; devicePath: string }[]): Promise<{ marks: string[]; error: string }> {
    const node = new InMemoryNode();
    node.cluster.volumesAttached = volumesAttached;
    const { asw, marks } = recordingAsw();
    const error = await errorOf(() => generatorOn(node, {}).generateVerifyControllerAttachedVolume(v, asw).run());
    return { marks, error };
  }

  it('a volume whose plugin is not attachable: attached at once, with no device path', async () => {
    const r = await verify(volumeToMount({ pluginIsAttachable: false, reportedInUse: false }), []);
    assert.deepEqual(r, { marks: [`markVolumeAsAttached ${JSON.stringify(VOLUME)} ${JSON.stringify(SPEC)} "${CSI}" "" false`], error: '' });
  });

  it('attachable, listed in volumesAttached but not yet reported in use: refused, nothing marked', async () => {
    const r = await verify(volumeToMount({ reportedInUse: false }), [{ name: VOLUME, devicePath: '/dev/ours' }]);
    assert.deepEqual(r.marks, []);
    assert.match(r.error, /has not been added to the list of VolumesInUse/);
  });

  it('attachable and reported: marked with the device path of its own volumesAttached entry', async () => {
    const other = { name: `kubernetes.io/csi/${DRIVER}^vol-0`, devicePath: '/dev/other' };
    assert.deepEqual(await verify(volumeToMount(), [other, { name: VOLUME, devicePath: '/dev/ours' }]), {
      marks: [`markVolumeAsAttached ${JSON.stringify(VOLUME)} ${JSON.stringify(SPEC)} "${CSI}" "/dev/ours" true`],
      error: '',
    });
    const r = await verify(volumeToMount(), [other]);
    assert.deepEqual(r.marks, [], 'another volume\'s entry does not count');
    assert.match(r.error, /not attached according to node status/);
  });
});

describe('MapVolume: the device mark after SetUpDevice', () => {
  it('marked globally mounted at the global map path with an empty SELinux context; a failed MapPodDevice then returns its error', async () => {
    const mapper = {
      getGlobalMapPath: () => '/g',
      getPodDeviceMapPath: () => ({ dir: '/p', name: 'n' }),
      setUpDevice: () => Promise.resolve(),
      mapPodDevice: () => Promise.reject(new Error('NodePublishVolume failed')),
    };
    const { asw, marks } = recordingAsw({ getDeviceMountState: () => 'DeviceNotMounted', getVolumeMountState: () => 'VolumeNotMounted' });
    const op = await generatorOn(new InMemoryNode(), { findMapperPluginBySpec: () => mapperPlugin(mapper) }).generateMapVolume(volumeToMount({ seLinuxMountContext: 'system_u:object_r:container_file_t:s0' }), '/dev/x', asw);
    assert.equal(await errorOf(() => op.run()), 'NodePublishVolume failed');
    assert.deepEqual(marks, [`markDeviceAsMounted ${JSON.stringify(VOLUME)} "/dev/x" "/g" ""`]);
  });
});

describe('UnmountVolume and UnmapVolume: the marks after TearDown / UnmapPodDevice', () => {
  /** markVolumeMountAsUncertain's record for TARGET: the SELinux context is not known at unmount. */
  const UNCERTAIN = `markVolumeMountAsUncertain ${JSON.stringify({ podName: 'uid-1', podUID: 'uid-1', volumeName: VOLUME, volumeSpec: SPEC, outerVolumeSpecName: 'data', innerVolumeSpecName: 'pv-1', pluginName: CSI, volumeMountState: 'VolumeMountUncertain', seLinuxMountContext: '' })}`;
  const UNMOUNTED = `markVolumeAsUnmounted "uid-1" ${JSON.stringify(VOLUME)}`;

  async function unmount(kind: 'unmount' | 'unmap', fails: boolean, target: UnmountTarget, markFails = false): Promise<{ marks: string[]; error: string; node: InMemoryNode }> {
    const node = new InMemoryNode();
    const call = (): Promise<void> => (fails ? Promise.reject(new Error('NodeUnpublishVolume failed')) : Promise.resolve());
    const plugin = { getPluginName: () => CSI, newUnmounter: () => Promise.resolve({ tearDown: call }), newBlockVolumeUnmapper: () => Promise.resolve({ unmapPodDevice: call }) };
    const { asw, marks } = recordingAsw(
      markFails
        ? {
            markVolumeAsUnmounted: () => {
              throw new Error('volume not in the actual state');
            },
          }
        : {},
    );
    const generator = generatorOn(node, { findPluginByName: () => plugin, findMapperPluginByName: () => plugin });
    const op = kind === 'unmount' ? await generator.generateUnmountVolume(target, asw) : await generator.generateUnmapVolume(target, asw);
    const error = await errorOf(() => op.run());
    return { marks, error, node };
  }

  for (const kind of ['unmount', 'unmap'] as const) {
    it(`${kind}: a failure marks the pod mount uncertain (never unmounted) and returns the error`, async () => {
      const r = await unmount(kind, true, TARGET);
      assert.deepEqual([r.marks, r.error], [[UNCERTAIN], 'NodeUnpublishVolume failed']);
    });

    it(`${kind}: success marks the pod's volume unmounted; a failure of that mark is logged, not returned`, async () => {
      assert.deepEqual((await unmount(kind, false, TARGET)).marks, [UNMOUNTED]);
      const r = await unmount(kind, false, TARGET, true);
      assert.equal(r.error, '');
      const msg = kind === 'unmount' ? 'UnmountVolume.MarkVolumeAsUnmounted failed' : 'UnmapVolume.MarkVolumeAsUnmounted failed';
      const line = r.node.logger.lines.find((l) => l.msg === msg);
      assert.deepEqual(line && { severity: line.severity, values: { ...line.values, err: String(line.values['err']) } }, { severity: 'E', values: { volumeName: VOLUME, podName: 'uid-1', err: 'Error: volume not in the actual state' } });
    });
  }

  it('unmount: the TearDown succeeded line names the volume, the pod, the inner spec name and the plugin', async () => {
    const r = await unmount('unmount', false, TARGET);
    assert.deepEqual(r.node.logger.lines.find((l) => l.msg === 'UnmountVolume.TearDown succeeded')?.values, { volumeName: VOLUME, podName: 'uid-1', podUID: 'uid-1', innerVolumeSpecName: 'pv-1', pluginName: CSI });
  });

  it('unmap of a volume without a spec (a failed reconstruction\'s cleanup): a failure returns the error and marks nothing', async () => {
    const r = await unmount('unmap', true, { ...TARGET, volumeSpec: undefined });
    assert.deepEqual([r.marks, r.error], [[], 'NodeUnpublishVolume failed']);
  });
});

/** A block mapper plugin whose unmapper records its construction and TearDownDevice. */
function unmapperPlugin(calls: string[], specGlobalMapPath = '/spec-gmp'): { plugin: unknown } {
  return {
    plugin: {
      getPluginName: () => CSI,
      getGlobalMapPath: () => specGlobalMapPath,
      newBlockVolumeUnmapper: (name: string, podUID: string) => {
        calls.push(`newBlockVolumeUnmapper ${JSON.stringify(name)} ${JSON.stringify(podUID)}`);
        return Promise.resolve({
          tearDownDevice: (gmp: string, devicePath: string) => {
            calls.push(`tearDownDevice ${gmp} ${devicePath}`);
            return Promise.resolve();
          },
        });
      },
    },
  };
}

describe('UnmapDevice: the global map path, the references, the marks', () => {
  const AV_GMP = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices/pv-1/dev`;
  const SPEC_GMP = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices/pv-1-from-spec/dev`;

  async function unmapDevice(
    av: AttachedVolume,
    setup: (node: InMemoryNode) => Promise<void> = () => Promise.resolve(),
    fsOf?: (node: InMemoryNode) => FileSystem,
  ): Promise<{ events: string[]; error: string }> {
    const node = new InMemoryNode();
    await setup(node);
    const events: string[] = [];
    const { asw } = recordingAsw({}, events);
    const op = await generatorOn(node, { findMapperPluginByName: () => unmapperPlugin(events, SPEC_GMP).plugin }, fsOf?.(node)).generateUnmapDevice(av, asw);
    events.length = 0;
    const error = await errorOf(() => op.run());
    return { events, error };
  }

  it('the unmapper is built for the spec\'s name and no pod', async () => {
    const events: string[] = [];
    await generatorOn(new InMemoryNode(), { findMapperPluginByName: () => unmapperPlugin(events).plugin }).generateUnmapDevice(attached(), recordingAsw().asw);
    assert.deepEqual(events, ['newBlockVolumeUnmapper "pv-1" ""']);
  });

  it('the actual state\'s path: marked uncertain (no SELinux context), torn down, then unmounted', async () => {
    const r = await unmapDevice(attached({ seLinuxMountContext: 'system_u:object_r:container_file_t:s0' }));
    assert.equal(r.error, '');
    assert.deepEqual(r.events, [`markDeviceAsUncertain ${JSON.stringify(VOLUME)} "/dev/x" ${JSON.stringify(AV_GMP)} ""`, `tearDownDevice ${AV_GMP} /dev/x`, `markDeviceAsUnmounted ${JSON.stringify(VOLUME)}`]);
  });

  it('no path in the actual state: the spec\'s global map path', async () => {
    const r = await unmapDevice(attached({ deviceMountPath: '' }));
    assert.equal(r.error, '');
    assert.deepEqual(r.events, [`markDeviceAsUncertain ${JSON.stringify(VOLUME)} "/dev/x" ${JSON.stringify(SPEC_GMP)} ""`, `tearDownDevice ${SPEC_GMP} /dev/x`, `markDeviceAsUnmounted ${JSON.stringify(VOLUME)}`]);
  });

  it('pods\' bind mounts of the device left: refused, naming them, nothing marked or torn down', async () => {
    const r = await unmapDevice(attached(), async (node) => {
      node.fs.writeRaw('/dev-source', '');
      for (const uid of ['uid-1', 'uid-2']) {
        node.fs.writeRaw(`${AV_GMP}/${uid}`, '');
        await node.mounter.mount('/dev-source', `${AV_GMP}/${uid}`, '', ['bind']);
      }
    });
    assert.equal(r.error, `UnmapDevice failed for volume ${JSON.stringify(VOLUME)}: the device ${JSON.stringify(AV_GMP)} is still referenced from other Pods [${AV_GMP}/uid-1 ${AV_GMP}/uid-2]`);
    assert.deepEqual(r.events, []);
  });

  // volumepathhandler GetDeviceBindMountRefs counts the entries whose file mode is a device,
  // mounted here or not: a pod's device node left in the global map path is a reference.
  it('a device node in the global map path that is no mount point is still a reference: refused, nothing marked or torn down', async () => {
    const r = await unmapDevice(
      attached(),
      (node) => Promise.resolve(node.fs.writeRaw(`${AV_GMP}/uid-1`, '')),
      // The in-memory filesystem has no device nodes: its listing reports uid-1 as one ('other').
      (node) => overrideFileSystem(node.fs, { readdir: async (p) => (await node.fs.readdir(p)).map((e) => (p === AV_GMP && e.name === 'uid-1' ? { ...e, type: 'other' as const } : e)) }),
    );
    assert.equal(r.error, `UnmapDevice failed for volume ${JSON.stringify(VOLUME)}: the device ${JSON.stringify(AV_GMP)} is still referenced from other Pods [${AV_GMP}/uid-1]`);
    assert.deepEqual(r.events, []);
  });

  it('mounts left deeper below the global map path: RemoveMapPath refuses, naming each of them, the device stays uncertain', async () => {
    const r = await unmapDevice(attached(), async (node) => {
      for (const d of ['a', 'b']) {
        await node.fs.mkdir(`${AV_GMP}/${d}/m`, { recursive: true, mode: 0o750 });
        await node.mounter.mount(`/dev/${d}`, `${AV_GMP}/${d}/m`, 'ext4', []);
      }
    });
    assert.equal(r.error, `UnmapDevice.RemoveMapPath failed for volume ${JSON.stringify(VOLUME)}: refusing to remove ${AV_GMP}: still mounted at ${AV_GMP}/a/m, ${AV_GMP}/b/m`);
    assert.deepEqual(r.events, [`markDeviceAsUncertain ${JSON.stringify(VOLUME)} "/dev/x" ${JSON.stringify(AV_GMP)} ""`, `tearDownDevice ${AV_GMP} /dev/x`]);
  });

  // volumepathhandler RemoveMapPath: only "gone already" is success; any other removal error is returned.
  it('the global map path that cannot be deleted (EACCES): the error is returned and the device stays uncertain, never unmounted', async () => {
    const r = await unmapDevice(
      attached(),
      (node) => node.fs.mkdir(AV_GMP, { recursive: true, mode: 0o750 }),
      (node) => new FaultyFs(node.fs).failOn('rmdir', AV_GMP, 'EACCES'),
    );
    assert.equal(r.error, `UnmapDevice.RemoveMapPath failed for volume ${JSON.stringify(VOLUME)}: ${new FsError('EACCES', AV_GMP, 'rmdir').message}`);
    assert.deepEqual(r.events, [`markDeviceAsUncertain ${JSON.stringify(VOLUME)} "/dev/x" ${JSON.stringify(AV_GMP)} ""`, `tearDownDevice ${AV_GMP} /dev/x`]);
  });

  it('the global map path cannot be removed: the error names it, the device stays uncertain', async () => {
    const r = await unmapDevice(attached(), async (node) => {
      node.fs.writeRaw(`${AV_GMP}/.keep`, '');
      await node.mounter.mount('/dev/x', AV_GMP, 'ext4', []);
    });
    assert.equal(r.error, `UnmapDevice.RemoveMapPath failed for volume ${JSON.stringify(VOLUME)}: refusing to remove ${AV_GMP}: still mounted at ${AV_GMP}`);
    assert.deepEqual(r.events, [`markDeviceAsUncertain ${JSON.stringify(VOLUME)} "/dev/x" ${JSON.stringify(AV_GMP)} ""`, `tearDownDevice ${AV_GMP} /dev/x`]);
  });
});

describe('markDeviceErrorState and markVolumeErrorState: which error changes which state', () => {
  const FINAL = new Error('rpc error: code = InvalidArgument');
  const UNCERTAIN_ERR = new UncertainProgressError('rpc error: code = DeadlineExceeded');
  const OPTS = { podName: 'uid-2' as UniquePodName, podUID: 'uid-2', volumeName: VOLUME, volumeSpec: SPEC, outerVolumeSpecName: 'data', innerVolumeSpecName: 'pv-1', pluginName: CSI, volumeMountState: 'VolumeMounted', seLinuxMountContext: '' } as const;

  it('a final error on a device that is not mounted (nor uncertain) changes nothing', () => {
    const { asw, marks } = recordingAsw({ getDeviceMountState: () => 'DeviceNotMounted', isVolumeDeviceReconstructed: () => false });
    markDeviceErrorState(asw, volumeToMount(), '/dev/x', '/g', FINAL);
    assert.deepEqual(marks, []);
  });

  it('a final error on a pod mount that is not mounted (nor uncertain) changes nothing', () => {
    const { asw, marks } = recordingAsw({ getVolumeMountState: () => 'VolumeNotMounted', isVolumeReconstructed: () => false });
    markVolumeErrorState(asw, OPTS, FINAL);
    assert.deepEqual(marks, []);
  });

  it('an uncertain error on a pod mount already mounted keeps it mounted (only a not-mounted one becomes uncertain)', () => {
    const mounted = recordingAsw({ getVolumeMountState: () => 'VolumeMounted' });
    markVolumeErrorState(mounted.asw, OPTS, UNCERTAIN_ERR);
    assert.deepEqual(mounted.marks, []);
    const notMounted = recordingAsw({ getVolumeMountState: () => 'VolumeNotMounted' });
    markVolumeErrorState(notMounted.asw, OPTS, UNCERTAIN_ERR);
    assert.deepEqual(notMounted.marks, [`markVolumeMountAsUncertain ${JSON.stringify({ ...OPTS, volumeMountState: 'VolumeMountUncertain' })}`]);
  });

  it('a final error on an uncertain pod mount marks it unmounted; when that mark fails, an error line, not a throw', () => {
    const node = new InMemoryNode();
    const { asw, marks } = recordingAsw({
      getVolumeMountState: () => 'VolumeMountUncertain',
      isVolumeReconstructed: () => false,
      markVolumeAsUnmounted: () => {
        throw new Error('volume not in the actual state');
      },
    });
    markVolumeErrorState(asw, OPTS, FINAL, node.logger);
    assert.deepEqual(marks, [`markVolumeAsUnmounted "uid-2" ${JSON.stringify(VOLUME)}`]);
    const line = node.logger.lines.find((l) => l.msg === 'MountVolume.MarkVolumeAsUnmounted failed');
    assert.deepEqual(line && [line.severity, line.values['volumeName'], line.values['podName'], String(line.values['err'])], ['E', VOLUME, 'uid-2', 'Error: volume not in the actual state']);
  });
});
