// Fidelity review item 11: kubelet's DSW sets a volume's plugin flags when it creates the volume, and a
// later add keeps them; only the populator's removal walk turns an attachable volume
// non-attachable (MarkVolumeAttachability, "Volume changes from attachable to non-attachable"),
// when the plugin answers with no attachable plugin and no error.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DRIVER, InMemoryNode } from '../../support/inMemoryNode.js';

const flags = (node: InMemoryNode, volume: string): boolean[] => node.kubelet.dsw.getVolumesToMount().filter((v) => v.volumeName === volume).map((v) => v.pluginIsAttachable);
const changeLines = (node: InMemoryNode) => node.logger.lines.filter((l) => l.msg === 'Volume changes from attachable to non-attachable');

function setAttachRequired(node: InMemoryNode, attachRequired: boolean): void {
  const d = node.cluster.drivers.get(DRIVER);
  assert.ok(d !== undefined);
  node.cluster.setCSIDriver({ ...d, attachRequired });
}

/** pv-1 mounted for pod uid-1, its CSIDriver saying attachRequired as given. */
async function mounted(attachRequired: boolean): Promise<{ node: InMemoryNode; volume: string }> {
  const node = new InMemoryNode({ attachRequired });
  const volume = node.addVolume('pv-1', 'h1');
  node.addPod('uid-1', ['pv-1']);
  const vm = await node.startKubelet(false);
  await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
  assert.deepEqual(flags(node, volume), [attachRequired]);
  return { node, volume };
}

describe('populator: attachability is set once (fidelity review item 11)', () => {
  it('does not make a volume attachable when its CSIDriver starts requiring attach', async () => {
    const { node, volume } = await mounted(false);
    setAttachRequired(node, true);
    node.addPod('uid-2', ['pv-1']);
    await node.steps(10);
    assert.deepEqual(flags(node, volume), [false, false]);
    assert.ok(!node.cluster.volumesInUse.includes(volume), 'a non-attachable volume is not reported in use');
  });

  it("marks a volume non-attachable when its CSIDriver stops requiring attach, with kubelet's line for each of its pods, in one pass", async () => {
    const { node, volume } = await mounted(true);
    node.addPod('uid-2', ['pv-1']);
    await node.steps(5);
    setAttachRequired(node, false);
    await node.steps(10);
    assert.deepEqual(flags(node, volume), [false, false]);
    const lines = changeLines(node);
    assert.equal(lines.length, 2, 'each (volume, pod) entry of the walk, as the entries were copied before it');
    assert.deepEqual({ ...lines[0]?.values }, { volumeName: volume });
    assert.equal(lines[0]?.severity, 'I');
  });

  it('asks nothing about the attachability of a deleted pod\'s volume, even when its CSIDriver stopped requiring attach', async () => {
    // findAndRemoveDeletedPods asks the plugin only for pods still in the pod manager: a deleted
    // pod's entry goes straight to the removal checks, with no "changes" line.
    const { node, volume } = await mounted(true);
    node.cluster.deletePod('uid-1');
    setAttachRequired(node, false);
    await node.steps(20);
    assert.deepEqual(changeLines(node), []);
    assert.deepEqual(node.kubelet.dsw.getVolumesToMount(), []);
    assert.ok(!node.kubelet.asw.getMountedVolumes().some((v) => v.volumeName === volume));
  });

  it('keeps the flag when the CSIDriver lookup fails', async () => {
    const { node, volume } = await mounted(true);
    Object.assign(node.cluster, { getCSIDriver: () => Promise.reject(new Error('connection refused')) });
    await node.steps(10);
    assert.deepEqual(flags(node, volume), [true]);
    assert.deepEqual(changeLines(node), []);
  });

  it('removes the volume of a deleted pod whose volume is not attachable, and asks nothing about its attachability', async () => {
    // findAndRemoveDeletedPods asks the plugin only for the entries of pods still listed whose
    // volume is attachable; any other entry goes on to the removal checks.
    const { node, volume } = await mounted(false);
    node.cluster.deletePod('uid-1');
    await node.steps(20);
    assert.deepEqual(node.kubelet.dsw.getVolumesToMount(), []);
    assert.equal(node.driver.callsOf('NodeUnpublishVolume').length, 1);
    assert.ok(!node.kubelet.asw.getMountedVolumes().some((v) => v.volumeName === volume));
    assert.deepEqual(changeLines(node), []);
  });
});
