// UnmountDevice (operationGenerator.generateUnmountDevice, then the CSI attacher's unmountDevice)
// as kubelet orders it: NodeUnstageVolume first, and only after it succeeded the staging dir
// (globalmount), the global vol_data.json and the volume dir go; a failed UnmountDevice leaves the
// device marked uncertain in the actual state (GenerateUnmountDeviceFunc's MarkDeviceAsUncertain),
// never unmounted, so volumesInUse keeps it and the unmount is retried.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GrpcStatus } from '../../../src/ports/csi.js';
import { sha256Hex, type UniqueVolumeName } from '../../../src/layout/names.js';
import type { ActualStateOfWorldMounterUpdater, AttachedVolume } from '../../../src/operationexecutor/actualStateOfWorldUpdater.js';
import { OperationGenerator } from '../../../src/operationexecutor/operationGenerator.js';
import type { VolumePluginMgr } from '../../../src/volume/plugins.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';

const VOL_DIR = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex('vol-1')}`;
const STAGING = [`${VOL_DIR}/`, `${VOL_DIR}/globalmount/`, `${VOL_DIR}/vol_data.json`];

/** A node with pv-1 (handle vol-1) staged and published for pod uid-1, its kubelet running. */
async function mountedNode(): Promise<{ node: InMemoryNode; name: UniqueVolumeName }> {
  const node = new InMemoryNode();
  const name = node.addVolume('pv-1', 'vol-1') as UniqueVolumeName;
  node.addPod('uid-1', ['pv-1']);
  const vm = await node.startKubelet(true);
  await node.stepUntil(() => vm.asw.getAttachedVolume(name)?.deviceMountState === 'DeviceGloballyMounted' && vm.asw.getMountedVolumes().length === 1);
  return { node, name };
}

/** The staging paths of vol-1 that exist now. */
function stagingPaths(node: InMemoryNode): string[] {
  const tree = new Set(node.tree());
  return STAGING.filter((p) => tree.has(p));
}

describe('UnmountDevice', () => {
  it('calls NodeUnstageVolume while the staging dir and vol_data.json are there, and removes them only after it', async () => {
    const { node, name } = await mountedNode();
    assert.deepEqual(stagingPaths(node), STAGING);
    const atUnstage: string[][] = [];
    node.driver.observer = {
      arrived: (_seq, method) => {
        if (method === 'NodeUnstageVolume') atUnstage.push(stagingPaths(node));
      },
    };
    node.cluster.deletePod('uid-1');
    const vm = node.kubelet;
    await node.stepUntil(() => vm.asw.getAttachedVolume(name)?.deviceMountState === 'DeviceNotMounted' || !vm.asw.volumeExists(name));
    assert.deepEqual(atUnstage, [STAGING], 'one NodeUnstageVolume, with the staging dir and its vol_data.json in place');
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume').map((c) => c.outcome), ['OK']);
    assert.deepEqual(stagingPaths(node), [], 'removed after NodeUnstageVolume succeeded');
  });

  it('a failed UnmountDevice marks the device uncertain, not unmounted: it stays in volumesInUse and is retried', async () => {
    const { node, name } = await mountedNode();
    node.driver.inject({ method: 'NodeUnstageVolume', code: GrpcStatus.INTERNAL, times: 1 });
    node.cluster.deletePod('uid-1');
    const vm = node.kubelet;
    await node.stepUntil(() => node.driver.callsOf('NodeUnstageVolume').length === 1);
    assert.equal(node.driver.callsOf('NodeUnstageVolume')[0]?.outcome, 'INTERNAL');
    assert.equal(vm.asw.getAttachedVolume(name)?.deviceMountState, 'DeviceMountUncertain');
    assert.deepEqual(stagingPaths(node), STAGING, 'nothing removed after the failure');
    await vm.syncNodeStatus();
    assert.deepEqual(node.cluster.volumesInUse, [name], 'still reported in use');
    // The retry unstages it for good.
    await node.stepUntil(() => vm.asw.getAttachedVolume(name)?.deviceMountState === 'DeviceNotMounted' || !vm.asw.volumeExists(name));
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume').map((c) => c.outcome), ['INTERNAL', 'OK']);
    assert.deepEqual(stagingPaths(node), []);
  });
});

/**
 * The operation alone (GenerateUnmountDeviceFunc), over a fake plugin and a recording actual
 * state: what it asks of each, in order.
 */
describe('generateUnmountDevice: order of the plugin call and the actual state marks', () => {
  const VOLUME = 'kubernetes.io/csi/csi.example.com^vol-1' as UniqueVolumeName;
  const DMP = `${VOL_DIR}/globalmount`;

  /** `deviceMountPath`: the plugin's GetDeviceMountPath (default DMP); `seLinux`: the actual state's context (default ''). */
  async function run(
    unmountFails: boolean,
    refs: readonly string[] = [],
    o: { deviceMountPath?: () => string; seLinux?: string | undefined } = {},
  ): Promise<{ events: string[]; error: unknown }> {
    const events: string[] = [];
    const plugin = {
      getPluginName: () => 'kubernetes.io/csi',
      getDeviceMountPath: o.deviceMountPath ?? (() => DMP),
      getDeviceMountRefs: (p: string) => {
        events.push(`getDeviceMountRefs ${p}`);
        return Promise.resolve(refs);
      },
      newDeviceUnmounter: () => ({
        unmountDevice: (p: string) => {
          events.push(`unmountDevice ${p}`);
          return unmountFails ? Promise.reject(new Error('rpc error: code = Internal')) : Promise.resolve();
        },
      }),
    };
    const plugins = { findDeviceMountablePluginByName: () => plugin } as unknown as VolumePluginMgr;
    const node = new InMemoryNode();
    const generator = new OperationGenerator({ plugins, host: volumeHostOf(node), cluster: node.cluster, logger: node.logger });
    const asw = {
      markDeviceAsUncertain: (name: string, devicePath: string, deviceMountPath: string, seLinux: string) => events.push(`markDeviceAsUncertain ${name} ${devicePath} ${deviceMountPath} ${JSON.stringify(seLinux)}`),
      markDeviceAsUnmounted: (name: string) => events.push(`markDeviceAsUnmounted ${name}`),
    } as unknown as ActualStateOfWorldMounterUpdater;
    const av: AttachedVolume = {
      volumeName: VOLUME,
      volumeSpec: { kind: 'persistent', readOnly: false, persistentVolume: { name: 'pv-1', csi: { driver: DRIVER, volumeHandle: 'vol-1' } } },
      pluginName: 'kubernetes.io/csi',
      pluginIsAttachable: true,
      attachability: 'True',
      deviceMountState: 'DeviceGloballyMounted',
      devicePath: '/dev/x',
      deviceMountPath: DMP,
      seLinuxMountContext: 'seLinux' in o ? o.seLinux : '',
    };
    let error: unknown;
    try {
      await generator.generateUnmountDevice(av, asw).run();
    } catch (err) {
      error = err;
    }
    return { events, error };
  }

  it('success: the plugin\'s UnmountDevice, then the device is marked unmounted (and never uncertain)', async () => {
    const { events, error } = await run(false);
    assert.equal(error, undefined);
    assert.deepEqual(events, [`getDeviceMountRefs ${DMP}`, `unmountDevice ${DMP}`, `markDeviceAsUnmounted ${VOLUME}`]);
  });

  it('the device mount path still has other references: refused before the plugin is asked, nothing marked (kubelet: the volume stays globally mounted)', async () => {
    const other = '/var/lib/kubelet/pods/uid-2/volumes/kubernetes.io~csi/pv-1/mount';
    const { events, error } = await run(false, [other]);
    assert.equal(String(error), `Error: the device mount path ${JSON.stringify(DMP)} is still mounted by other references ${JSON.stringify([other])}`);
    assert.deepEqual(events, [`getDeviceMountRefs ${DMP}`]);
  });

  it('references under the device mount path itself are not other references: the unmount goes on', async () => {
    const { events, error } = await run(false, [`${DMP}/sub`]);
    assert.equal(error, undefined);
    assert.deepEqual(events, [`getDeviceMountRefs ${DMP}`, `unmountDevice ${DMP}`, `markDeviceAsUnmounted ${VOLUME}`]);
  });

  it('failure: the device is marked uncertain (never unmounted) with its device path and mount path, and the error is returned', async () => {
    const { events, error } = await run(true);
    assert.match(String(error), /code = Internal/);
    assert.deepEqual(events, [`getDeviceMountRefs ${DMP}`, `unmountDevice ${DMP}`, `markDeviceAsUncertain ${VOLUME} /dev/x ${DMP} ""`]);
  });

  it('failure of a device whose SELinux context the actual state does not know: marked uncertain with an empty one', async () => {
    const ctx = 'system_u:object_r:container_file_t:s0';
    assert.deepEqual((await run(true, [], { seLinux: ctx })).events.at(-1), `markDeviceAsUncertain ${VOLUME} /dev/x ${DMP} ${JSON.stringify(ctx)}`);
    assert.deepEqual((await run(true, [], { seLinux: undefined })).events.at(-1), `markDeviceAsUncertain ${VOLUME} /dev/x ${DMP} ""`);
  });

  it('the spec\'s device mount path cannot be computed: "does not exist" falls back to the actual state\'s path, any other error is returned before anything is asked', async () => {
    const fallback = await run(false, [], {
      deviceMountPath: () => {
        throw new Error('volume pv-1 does not exist');
      },
    });
    assert.equal(fallback.error, undefined);
    assert.deepEqual(fallback.events, [`getDeviceMountRefs ${DMP}`, `unmountDevice ${DMP}`, `markDeviceAsUnmounted ${VOLUME}`]);
    const failed = await run(false, [], {
      deviceMountPath: () => {
        throw new Error('CSIDriver csi.example.com: connection refused');
      },
    });
    assert.equal(String(failed.error), 'Error: CSIDriver csi.example.com: connection refused');
    assert.deepEqual(failed.events, []);
  });
});
