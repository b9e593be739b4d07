// volume_manager_total_volumes is recounted only after the actual or desired state changed
// (an idle pass at 1,000 volumes must not recount them), and then counts right.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InMemoryNode } from '../../support/inMemoryNode.js';

describe('volume_manager_total_volumes', () => {
  it('is recounted after a change, not on idle passes', async () => {
    const node = new InMemoryNode({ attachRequired: false });
    // A view with an objects version, like the agent's: idle passes leave the desired state alone.
    const version = { value: 1 };
    Object.assign(node.cluster, { objectsVersion: () => version.value });
    node.addVolume('pv-1', 'h1');
    node.addPod('uid-1', ['pv-1']);
    await node.startKubelet(false);
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
    await node.steps(2);
    const settled = node.metrics.ofKind('setTotalVolumes').length;
    const last = node.metrics.ofKind('setTotalVolumes').at(-1)?.counts;
    assert.deepEqual(
      last?.map((c) => [c.state, c.count]),
      [
        ['actual_state_of_world', 1],
        ['desired_state_of_world', 1],
      ],
    );
    await node.steps(10);
    assert.equal(node.metrics.ofKind('setTotalVolumes').length, settled, 'nothing changed: not recounted');

    node.cluster.deletePod('uid-1');
    version.value++;
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 0);
    await node.steps(1); // the pass after the unmount completed recounts
    const after = node.metrics.ofKind('setTotalVolumes').at(-1)?.counts;
    assert.deepEqual(
      after?.map((c) => [c.state, c.count]),
      [],
      'the pod is gone: every series gone with it',
    );
  });
});
