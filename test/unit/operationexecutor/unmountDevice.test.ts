// UnmountDevice (operationGenerator.generateUnmountDevice, then the CSI attacher's unmountDevice)
// as kubelet orders it: NodeUnstageVolume first, and only after it succeeded the staging dir
// (globalmount), the global vol_data.json and the volume dir go; a failed UnmountDevice leaves the
// device marked uncertain in the actual state (GenerateUnmountDeviceFunc's MarkDeviceAsUncertain),
// never unmounted, so volumesInUse keeps it and the unmount is retried.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GrpcStatus } from '../../../src/ports/csi.js';
import { sha256Hex, type UniqueVolumeName } from '../../../src/layout/names.js';
import { DRIVER, InMemoryNode, ROOT } from '../../support/inMemoryNode.js';

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
