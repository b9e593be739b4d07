// Fidelity review item 9: kubelet's populator adds no volume of a pod that is terminating (being deleted,
// or in a terminal phase) once its first passes are done, and removes the volumes of a terminal
// pod that is still listed once the ASW holds them mounted or uncertain.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CsiMethod } from '../../../src/ports/csi.js';
import { InMemoryNode } from '../../support/inMemoryNode.js';

const DELETED_AT = '2026-01-01T00:00:00Z';
const calls = (node: InMemoryNode, method: CsiMethod): number => node.driver.callsOf(method).length;
const lines = (node: InMemoryNode, msg: string) => node.logger.lines.filter((l) => l.msg === msg);

/** pv-1 mounted for running pod uid-1. */
async function mounted(): Promise<{ node: InMemoryNode; volume: string }> {
  const node = new InMemoryNode();
  const volume = node.addVolume('pv-1', 'h1');
  node.addPod('uid-1', ['pv-1']);
  const vm = await node.startKubelet(false);
  await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
  return { node, volume };
}

describe('populator: terminating and terminal pods (fidelity review item 9)', () => {
  for (const [what, state] of [
    ['being deleted', { deletionTimestamp: DELETED_AT }],
    ['Succeeded', { phase: 'Succeeded' }],
    ['Failed', { phase: 'Failed' }],
  ] as const) {
    it(`does not add the volumes of a pod ${what} that appears after the first pass`, async () => {
      const node = new InMemoryNode();
      node.addVolume('pv-1', 'h1');
      const vm = await node.startKubelet(false);
      await node.steps(5);
      node.addPod('uid-1', ['pv-1'], [], state);
      await node.steps(20);
      assert.deepEqual(vm.dsw.getVolumesToMount(), []);
      assert.equal(calls(node, 'NodeStageVolume'), 0);
      assert.equal(calls(node, 'NodePublishVolume'), 0);
    });
  }

  it("unmounts a terminal pod's volumes while the pod is still listed, with kubelet's line", async () => {
    const { node, volume } = await mounted();
    assert.ok(node.cluster.volumesInUse.includes(volume));
    node.cluster.updatePod('uid-1', { phase: 'Succeeded' });
    await node.steps(20);
    assert.equal(calls(node, 'NodeUnpublishVolume'), 1);
    assert.equal(calls(node, 'NodeUnstageVolume'), 1);
    assert.deepEqual(node.kubelet.dsw.getVolumesToMount(), []);
    assert.ok(!node.cluster.volumesInUse.includes(volume), JSON.stringify(node.cluster.volumesInUse));
    assert.ok(node.cluster.pods.has('uid-1'), 'the pod is still listed');
    const removed = lines(node, 'Removing volume from desired state');
    assert.equal(removed.length, 1);
    assert.deepEqual({ ...removed[0]?.values }, { pod: 'default/pod-uid-1', podUID: 'uid-1', volumeName: 'pv-1' });
    assert.equal(removed[0]?.level, 4);
  });

  it("keeps a deleting pod's mounted volumes while its phase is not terminal", async () => {
    const { node } = await mounted();
    node.cluster.updatePod('uid-1', { deletionTimestamp: DELETED_AT, phase: 'Running' });
    await node.steps(20);
    assert.equal(calls(node, 'NodeUnpublishVolume'), 0);
    assert.equal(node.kubelet.dsw.getVolumesToMount().length, 1);
    node.cluster.updatePod('uid-1', { phase: 'Failed' });
    await node.steps(20);
    assert.equal(calls(node, 'NodeUnpublishVolume'), 1, 'torn down once its containers stopped');
  });

  it("keeps a terminal pod's never-mounted volume until the pod goes (the actual-state check)", async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'h1', { attached: false });
    node.addPod('uid-1', ['pv-1']);
    const vm = await node.startKubelet(false);
    await node.steps(5);
    assert.equal(vm.dsw.getVolumesToMount().length, 1);
    node.cluster.updatePod('uid-1', { phase: 'Failed' });
    await node.steps(10);
    assert.equal(vm.dsw.getVolumesToMount().length, 1, 'kept: the ASW does not hold it');
    assert.ok(lines(node, 'Actual state does not yet have volume mount information and pod still exists in pod manager, skip removing volume from desired state').length >= 1);
    node.cluster.deletePod('uid-1');
    await node.steps(2);
    assert.deepEqual(vm.dsw.getVolumesToMount(), []);
  });

  it('adds a deleting, still-running pod found at the first pass, and does not unmount its reconstructed volume', async () => {
    const { node } = await mounted();
    node.crashKubelet();
    node.cluster.updatePod('uid-1', { deletionTimestamp: DELETED_AT });
    const vm = await node.startKubelet(false);
    await node.steps(20);
    assert.equal(vm.dsw.getVolumesToMount().length, 1);
    assert.equal(calls(node, 'NodeUnpublishVolume'), 0);
  });

  it('a terminal pod found at the first pass is not added: its volume is torn down', async () => {
    const { node } = await mounted();
    node.crashKubelet();
    node.cluster.updatePod('uid-1', { phase: 'Succeeded' });
    const vm = await node.startKubelet(false);
    await node.steps(20);
    assert.deepEqual(vm.dsw.getVolumesToMount(), []);
    assert.equal(calls(node, 'NodeUnpublishVolume'), 1);
  });
});
