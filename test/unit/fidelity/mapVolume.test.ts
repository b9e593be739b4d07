// GenerateMapVolumeFunc (operation_generator.go): once MapPodDevice succeeded, any later error
// of the operation (here util.MapBlockVolume's) marks the pod's mount uncertain, so that the
// published target is unmapped (NodeUnpublishVolume) when the pod goes. Read: the actual state,
// the driver's calls and the files left.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UniquePodName, UniqueVolumeName } from '../../../src/layout/names.js';
import { InMemoryNode, ROOT } from '../../support/inMemoryNode.js';

const BLOCK = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices`;

const calls = (node: InMemoryNode, from: number): string[] =>
  node.driver.calls
    .slice(from)
    .filter((c) => c.method !== 'NodeGetCapabilities')
    .map((c) => `${c.method} ${c.outcome}`);

describe('GenerateMapVolumeFunc: an error after MapPodDevice succeeded', () => {
  it('MapBlockVolume fails after NodePublishVolume: the pod mount is uncertain, and the pod going unpublishes, then unstages', async () => {
    const node = new InMemoryNode();
    const name = node.addVolume('pv-b', 'vol-b', { mode: 'Block' }) as UniqueVolumeName;
    node.addPod('pod-b', ['pv-b']);
    const vm = await node.startKubelet(false);
    // A directory where MapBlockVolume puts the pod's link: its unlink fails (not ENOENT), after
    // NodePublishVolume and the bind mount in the global map path.
    const link = `${ROOT}/pods/pod-b/volumeDevices/kubernetes.io~csi/pv-b`;
    await node.fs.mkdir(link, { recursive: true, mode: 0o750 });
    await node.stepUntil(() => node.driver.callsOf('NodePublishVolume').some((c) => c.outcome === 'OK'));
    await vm.waitForOperations();
    assert.equal(vm.asw.getVolumeMountState(name, 'pod-b' as UniquePodName), 'VolumeMountUncertain');

    await node.fs.rmdir(link);
    node.cluster.deletePod('pod-b');
    const mark = node.driver.calls.length;
    await node.stepUntil(() => node.driver.volume('vol-b')?.stagedAt === undefined, 60);
    await node.steps(3);
    const after = calls(node, mark);
    assert.deepEqual(after, ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    const unpublish = node.driver.callsOf('NodeUnpublishVolume')[0]?.request as { targetPath: string } | undefined;
    assert.equal(unpublish?.targetPath, `${BLOCK}/publish/pv-b/pod-b`);
    assert.deepEqual(node.tree().filter((p) => p.startsWith(`${BLOCK}/`) && p.includes('pv-b')), []);
  });
});
