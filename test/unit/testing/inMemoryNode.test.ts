// The in-memory harness's kubelet crash is a real, fenced crash: after
// crashKubelet() nothing the dead kubelet had in flight lands or settles, while a call already at
// the driver finishes there.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InMemoryNode, ROOT } from '../../support/inMemoryNode.js';
import { Life } from '../../support/fence.js';

const podVolumeDir = `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`;

describe('InMemoryNode.crashKubelet', () => {
  it('a TearDown in flight at the crash never removes the pod volume dir afterwards, though the driver finishes NodeUnpublishVolume', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    node.addPod('pod-a', ['pv-1']);
    await node.startKubelet(true);
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
    node.driver.inject({ method: 'NodeUnpublishVolume', delayMs: 1_000, times: 1 });
    let arrived = false;
    node.driver.observer = {
      arrived: (_seq, method) => {
        if (method === 'NodeUnpublishVolume') arrived = true;
      },
      finished: () => undefined,
    };
    node.cluster.deletePod('pod-a');
    const dead = node.kubelet;
    await node.stepUntil(() => arrived);
    assert.equal(node.driver.methods().includes('NodeUnpublishVolume'), false, 'still running at the driver');
    node.crashKubelet();
    // The driver's unpublish completes after the crash; the dead kubelet's TearDown must not go on
    // to removeMountDir, and its operation must not settle (nor mark anything in its memory).
    await node.clock.advance(5_000);
    assert.equal(node.driver.volume('vol-1')?.publishedAt.size, 0, 'the call at the driver finished there');
    assert.equal(await node.exists(podVolumeDir), true, 'nothing of the dead life landed after the crash');
    assert.equal(dead.asw.getMountedVolumes().length + dead.asw.getAllMountedVolumes().length > 0, true, 'the dead life never heard back');
    // A new kubelet life picks up from what is on disk.
    await node.startKubelet(true);
    await node.steps(30);
    assert.equal(await node.exists(podVolumeDir), false, 'the next life tears the volume down');
  });

  it('a dead life\'s calls neither run nor settle; a live one\'s do', async () => {
    const life = new Life();
    let ran = 0;
    const port = life.fence({ op: () => Promise.resolve(++ran), sub: () => ({ op: () => Promise.resolve(++ran) }) });
    assert.equal(await port.op(), 1);
    const inFlight = port.op();
    const client = port.sub();
    life.crash();
    let settled = false;
    void inFlight.then(() => (settled = true));
    void port.op().then(() => (settled = true));
    void client.op().then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(settled, false);
    assert.equal(ran, 2, 'the call in flight ran (it was inside the port); the calls after the crash did not');
  });
});
