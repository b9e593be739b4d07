// Fidelity review item 8: kubelet's processPodVolumes skips a pod volume no container mounts or uses as a
// device (GetPodVolumeNames over init, regular and ephemeral containers): no lookup, no error, no
// DSW entry, no stage or publish, not in volumesInUse.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CsiMethod } from '../../../src/ports/csi.js';
import { InMemoryNode } from '../../support/inMemoryNode.js';

const volumeIds = (node: InMemoryNode, method: CsiMethod): unknown[] => node.driver.callsOf(method).map((c) => (c.request as { volumeId?: unknown }).volumeId);

describe('populator: unused pod volumes (fidelity review item 8)', () => {
  it('skips a volume no container uses: no lookup, no stage, no publish, not in volumesInUse', async () => {
    const node = new InMemoryNode();
    const used = node.addVolume('pv-1', 'h1');
    const unused = node.addVolume('pv-2', 'h2');
    node.addPod('uid-1', ['pv-1', 'pv-2'], [], { unused: ['vol-pv-2'] });
    const vm = await node.startKubelet(false);
    await node.steps(20);
    assert.deepEqual(
      vm.dsw.getVolumesToMount().map((v) => [v.volumeName, v.outerVolumeSpecName]),
      [[used, 'vol-pv-1']],
    );
    assert.deepEqual(volumeIds(node, 'NodeStageVolume'), ['h1']);
    assert.deepEqual(volumeIds(node, 'NodePublishVolume'), ['h1']);
    assert.ok(node.cluster.volumesInUse.includes(used));
    assert.ok(!node.cluster.volumesInUse.includes(unused), JSON.stringify(node.cluster.volumesInUse));
    const skips = node.logger.lines.filter((l) => l.msg === 'Skipping unused volume');
    assert.ok(skips.length >= 1);
    assert.deepEqual({ ...skips[0]?.values }, { pod: 'default/pod-uid-1', volumeName: 'vol-pv-2' });
    assert.equal(skips[0]?.level, 4);
  });

  it('records no error for an unused volume whose claim does not exist', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'h1');
    node.addPod('uid-1', ['pv-1', 'missing-pv'], [], { unused: ['vol-missing-pv'] });
    const vm = await node.startKubelet(false);
    await node.steps(10);
    assert.deepEqual(node.logger.lines.filter((l) => l.msg === 'Error processing volume'), []);
    assert.deepEqual(vm.dsw.popPodErrors('uid-1' as never), []);
    assert.deepEqual(volumeIds(node, 'NodePublishVolume'), ['h1']);
  });

  it('a pod whose only volume is unused has no desired state at all, and an unused inline volume is not published', async () => {
    const node = new InMemoryNode({ attachRequired: false });
    node.addVolume('pv-1', 'h1');
    node.addPod('uid-1', ['pv-1'], ['scratch'], { unused: ['vol-pv-1', 'scratch'] });
    const vm = await node.startKubelet(false);
    await node.steps(10);
    assert.deepEqual(vm.dsw.getVolumesToMount(), []);
    assert.deepEqual(vm.dsw.getPods(), []);
    assert.deepEqual(node.driver.methods().filter((m) => m !== 'NodeGetCapabilities'), []);
  });
});
