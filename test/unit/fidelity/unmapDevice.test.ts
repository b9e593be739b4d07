// GenerateUnmapDeviceFunc (operation_generator.go), raw block: the global map path from the
// actual state, the refusal while pods' bind mounts of the device are there
// (volumepathhandler GetDeviceBindMountRefs), the device marked uncertain before TearDownDevice,
// then RemoveMapPath. Each test runs the generated operation over the in-memory node and reads
// the driver's calls, the files left and the actual state.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UniqueVolumeName } from '../../../src/layout/names.js';
import { GrpcStatus } from '../../../src/ports/csi.js';
import { OperationGenerator } from '../../../src/operationexecutor/operationGenerator.js';
import { createActualStateOfWorld, type ActualStateOfWorld } from '../../../src/volumemanager/cache/actualStateOfWorld.js';
import type { VolumeManager } from '../../../src/volumemanager/volumeManager.js';
import { InMemoryNode, ROOT } from '../../support/inMemoryNode.js';

const BLOCK = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices`;

/** pod-b maps the block PV pv-b (vol-b) through the volume manager, every nodevol gate off. */
async function mappedBlockVolume(): Promise<{ node: InMemoryNode; vm: VolumeManager; name: UniqueVolumeName }> {
  const node = new InMemoryNode();
  const name = node.addVolume('pv-b', 'vol-b', { mode: 'Block' }) as UniqueVolumeName;
  node.addPod('pod-b', ['pv-b']);
  const vm = await node.startKubelet(false);
  await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
  assert.ok(node.mounter.isMounted(`${BLOCK}/pv-b/dev/pod-b`), "the pod's bind mount of the device");
  return { node, vm, name };
}

/**
 * An actual state that knows the device (uncertain, as the KEP-6058 listing or a failed pod
 * reconstruction leaves it) and no pod mount of it: the reconciler's UnmapDevice case.
 */
function deviceOnly(vm: VolumeManager, name: UniqueVolumeName): ActualStateOfWorld {
  const known = vm.asw.getAttachedVolume(name);
  assert.ok(known !== undefined);
  const asw = createActualStateOfWorld();
  asw.markVolumeAsAttached(name, known.volumeSpec, known.pluginName, '', true);
  asw.markDeviceAsUncertain(name, '', `${BLOCK}/pv-b/dev`, '');
  return asw;
}

async function unmapDevice(node: InMemoryNode, vm: VolumeManager, asw: ActualStateOfWorld, name: UniqueVolumeName): Promise<void> {
  const host = node.composed?.host;
  assert.ok(host !== undefined);
  const generator = new OperationGenerator({ plugins: vm.plugins, host, cluster: node.cluster, logger: node.logger });
  const av = asw.getAttachedVolume(name);
  assert.ok(av !== undefined);
  const op = await generator.generateUnmapDevice(av, asw);
  await op.run();
}

describe('GenerateUnmapDeviceFunc: GetDeviceBindMountRefs, then TearDownDevice, then RemoveMapPath', () => {
  it("refuses while a pod's bind mount of the device is in the global map path: no NodeUnstageVolume, nothing removed, the device stays uncertain", async () => {
    const { node, vm, name } = await mappedBlockVolume();
    const asw = deviceOnly(vm, name);
    await assert.rejects(unmapDevice(node, vm, asw, name), (err: Error) => {
      assert.match(err.message, /is still referenced from other Pods/);
      assert.ok(err.message.includes(`${BLOCK}/pv-b/dev/pod-b`), err.message);
      return true;
    });
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume'), []);
    assert.equal(node.driver.volume('vol-b')?.stagedAt, `${BLOCK}/staging/pv-b`);
    for (const p of ['staging/pv-b', 'pv-b/data/vol_data.json', 'pv-b/dev/pod-b']) assert.ok(await node.exists(`${BLOCK}/${p}`), p);
    assert.equal(asw.getDeviceMountState(name), 'DeviceMountUncertain');

    // The pod's mapping gone (UnmapVolume's work), the same operation unstages and removes the map path.
    await node.mounter.unmount(`${BLOCK}/pv-b/dev/pod-b`);
    await node.driver.nodeUnpublishVolume({ volumeId: 'vol-b', targetPath: `${BLOCK}/publish/pv-b/pod-b` });
    await unmapDevice(node, vm, asw, name);
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume').map((c) => c.outcome), ['OK']);
    assert.equal(node.driver.volume('vol-b')?.stagedAt, undefined);
    assert.equal(await node.exists(`${BLOCK}/pv-b`), false);
    assert.equal(asw.getDeviceMountState(name), 'DeviceNotMounted');
  });

  it('RemoveMapPath: the global map path goes even when the orphan file cleanup stopped early', async () => {
    const { node, vm, name } = await mappedBlockVolume();
    await node.mounter.unmount(`${BLOCK}/pv-b/dev/pod-b`);
    await node.driver.nodeUnpublishVolume({ volumeId: 'vol-b', targetPath: `${BLOCK}/publish/pv-b/pod-b` });
    // Another entry in publish/pv-b: cleanupOrphanDeviceFiles stops at its first step.
    node.fs.writeRaw(`${BLOCK}/publish/pv-b/other`, '');
    const asw = deviceOnly(vm, name);
    await unmapDevice(node, vm, asw, name);
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume').map((c) => c.outcome), ['OK']);
    assert.equal(await node.exists(`${BLOCK}/pv-b/dev`), false, 'RemoveMapPath');
    assert.ok(await node.exists(`${BLOCK}/pv-b/data/vol_data.json`), 'the cleanup stopped before the volume dir');
    assert.equal(asw.getDeviceMountState(name), 'DeviceNotMounted');
  });

  it('the device is uncertain before TearDownDevice: a failed NodeUnstageVolume leaves it uncertain with the map path it had', async () => {
    const { node, vm, name } = await mappedBlockVolume();
    await node.mounter.unmount(`${BLOCK}/pv-b/dev/pod-b`);
    await node.driver.nodeUnpublishVolume({ volumeId: 'vol-b', targetPath: `${BLOCK}/publish/pv-b/pod-b` });
    const known = vm.asw.getAttachedVolume(name);
    assert.ok(known !== undefined);
    const asw = createActualStateOfWorld();
    asw.markVolumeAsAttached(name, known.volumeSpec, known.pluginName, '', true);
    asw.markDeviceAsMounted(name, '', `${BLOCK}/pv-b/dev`, '');
    node.driver.inject({ method: 'NodeUnstageVolume', code: GrpcStatus.INTERNAL, times: 1 });
    await assert.rejects(unmapDevice(node, vm, asw, name));
    assert.equal(asw.getDeviceMountState(name), 'DeviceMountUncertain');
    assert.equal(asw.getAttachedVolume(name)?.deviceMountPath, `${BLOCK}/pv-b/dev`);
  });
});
