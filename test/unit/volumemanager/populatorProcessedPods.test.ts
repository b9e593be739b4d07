// The populator resolves a pod again only when it may resolve differently (an
// idle pass must not cost every pod's lookups): a pod resolved without an error is skipped while
// the cluster view's objectsVersion and the Pod object stay the same; a new version, a new Pod
// object or an earlier error makes it resolve again. A view without objectsVersion gets every pod
// resolved on every pass, as before.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InMemoryNode } from '../../support/inMemoryNode.js';

/** A node whose cluster view reports `version.value` and counts the claim look-ups. */
function countingNode(withVersion: boolean): { node: InMemoryNode; version: { value: number }; claimLookups: () => number } {
  const node = new InMemoryNode();
  const version = { value: 1 };
  let lookups = 0;
  const inner = node.cluster.getPersistentVolumeClaim.bind(node.cluster);
  Object.assign(node.cluster, {
    getPersistentVolumeClaim: (namespace: string, name: string) => {
      lookups++;
      return inner(namespace, name);
    },
    ...(withVersion ? { objectsVersion: () => version.value } : {}),
  });
  return { node, version, claimLookups: () => lookups };
}

/** A counting node with volume pv-1 and pod uid-1 using it, its kubelet started. */
async function startedWithOnePod(withVersion: boolean): Promise<ReturnType<typeof countingNode>> {
  const counting = countingNode(withVersion);
  counting.node.addVolume('pv-1', 'h1');
  counting.node.addPod('uid-1', ['pv-1']);
  await counting.node.startKubelet(false);
  return counting;
}

function errorLines(node: InMemoryNode) {
  return node.logger.lines.filter((l) => l.severity === 'E' && l.msg === 'Error processing volume');
}

describe('populator: processed pods', () => {
  it('resolves a pod once while the objects version and the Pod object stay the same', async () => {
    const { node, claimLookups } = countingNode(true);
    const volumeName = node.addVolume('pv-1', 'h1');
    node.addPod('uid-1', ['pv-1']);
    await node.startKubelet(false);
    await node.steps(10);
    assert.equal(claimLookups(), 1);
    assert.deepEqual(
      node.kubelet.dsw.getVolumesToMount().map((v) => [v.podName, v.volumeName]),
      [['uid-1', volumeName]],
      'the skipped pod keeps its volume in the desired state',
    );
  });

  it('resolves every pod again when the version changes, so a deleted claim is reported at once', async () => {
    const { node, version, claimLookups } = countingNode(true);
    node.addVolume('pv-1', 'h1');
    node.addVolume('pv-2', 'h2');
    node.addPod('uid-1', ['pv-1']);
    node.addPod('uid-2', ['pv-2']);
    await node.startKubelet(false);
    await node.steps(3);
    assert.equal(claimLookups(), 2);

    node.cluster.pvcs.delete('default/claim-pv-1');
    await node.steps(2);
    assert.equal(errorLines(node).length, 0, 'the same version: nothing is looked up, nothing reported');

    version.value++;
    await node.steps(1);
    assert.equal(claimLookups(), 4, 'both pods resolved again under the new version');
    assert.equal(errorLines(node).length, 1);
    assert.match(String(errorLines(node)[0]?.values['volumeName']), /vol-pv-1/);
  });

  it('while some pod keeps failing, skips only the resolved pods whose Pod object is unchanged', async () => {
    const { node, claimLookups } = countingNode(true);
    node.addVolume('pv-1', 'h1');
    node.addVolume('pv-2', 'h2');
    node.addPod('uid-1', ['pv-1']);
    node.addPod('uid-bad', ['missing']); // never resolves: no pass is ever settled
    await node.startKubelet(false);
    await node.steps(3);
    assert.equal(claimLookups(), 1 + 3, 'uid-1 once, uid-bad on every pass');
    node.addPod('uid-1', ['pv-1', 'pv-2']); // the same uid, a new object with one more volume
    await node.steps(1);
    assert.equal(claimLookups(), 4 + 2 + 1);
    assert.equal(node.kubelet.dsw.getVolumesToMount().length, 2);
  });

  it('once every pod resolved, a pass under the same version does nothing at all', async () => {
    const { node, version, claimLookups } = await startedWithOnePod(true);
    await node.steps(2);
    const generation = node.kubelet.dsw.generation();
    await node.steps(5);
    assert.equal(node.kubelet.dsw.generation(), generation, 'the desired state was not touched');
    assert.equal(claimLookups(), 1);
    node.cluster.deletePod('uid-1');
    version.value++;
    await node.steps(1);
    assert.deepEqual(node.kubelet.dsw.getPods(), [], 'a new version: the pod that is gone is removed');
  });

  it('keeps resolving a pod whose volume failed, and forgets a pod that is gone', async () => {
    const { node, claimLookups } = countingNode(true);
    node.addPod('uid-1', ['missing']);
    await node.startKubelet(false);
    await node.steps(5);
    assert.equal(claimLookups(), 5, 'an error: resolved on every pass');
    assert.equal(errorLines(node).length, 1, 'and still logged once (rate limit)');

    node.addVolume('pv-1', 'h1');
    node.addPod('uid-2', ['pv-1']);
    await node.steps(2);
    node.cluster.deletePod('uid-2');
    await node.steps(1);
    assert.deepEqual(node.kubelet.dsw.getPods(), [], 'the pod that is gone left the desired state');
    node.addPod('uid-2', ['pv-1']);
    const before = claimLookups();
    await node.steps(1);
    assert.ok(claimLookups() > before + 1, 'a pod that comes back is resolved again');
    assert.deepEqual(node.kubelet.dsw.getPods(), ['uid-2']);
  });

  it('idle(): true exactly while a pass finds the objects of a settled pass (what lets the agent sleep)', async () => {
    const { node, version } = await startedWithOnePod(true);
    await node.steps(1);
    assert.equal(node.kubelet.populatorIdle(), false, 'the first pass resolved the pod');
    await node.steps(1);
    assert.equal(node.kubelet.populatorIdle(), true);
    version.value++;
    await node.steps(1);
    assert.equal(node.kubelet.populatorIdle(), false, 'a new version: that pass resolved again');
    await node.steps(1);
    assert.equal(node.kubelet.populatorIdle(), true);
    node.addPod('uid-2', ['missing']);
    version.value++;
    await node.steps(3);
    assert.equal(node.kubelet.populatorIdle(), false, 'a pod that keeps failing: never idle');
  });

  it('idle(): never without objectsVersion, nor after a failed listing', async () => {
    const { node } = await startedWithOnePod(false);
    await node.steps(3);
    assert.equal(node.kubelet.populatorIdle(), false);

    const versioned = await startedWithOnePod(true);
    await versioned.node.steps(2);
    assert.equal(versioned.node.kubelet.populatorIdle(), true);
    Object.assign(versioned.node.cluster, { listPods: () => Promise.reject(new Error('connection refused')) });
    await versioned.node.steps(1);
    assert.equal(versioned.node.kubelet.populatorIdle(), false);
  });

  it('without objectsVersion, resolves every pod on every pass', async () => {
    const { node, claimLookups } = await startedWithOnePod(false);
    await node.steps(4);
    assert.equal(claimLookups(), 4);
  });

  it("is not idle while it keeps a terminal pod's volume on the actual state's account: the mount that lands later removes it", async () => {
    // findAndRemoveDeletedPods keeps a listed pod's volume the ASW does not hold mounted
    // (PodRemovedFromVolume); the ASW then changes with no change to the cluster objects.
    const { node, version } = countingNode(true);
    node.addVolume('pv-1', 'h1');
    node.addPod('uid-1', ['pv-1']);
    const hang = node.driver.inject({ method: 'NodePublishVolume', hang: true });
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => node.driver.hangingCalls() === 1);
    node.cluster.updatePod('uid-1', { phase: 'Succeeded' });
    version.value++;
    await node.steps(3);
    assert.equal(vm.dsw.getVolumesToMount().length, 1, 'kept: the ASW does not hold it yet');
    assert.equal(node.kubelet.populatorIdle(), false);

    hang.remove();
    node.driver.releaseHangs();
    await node.steps(20);
    assert.deepEqual(vm.dsw.getVolumesToMount(), [], 'removed once the ASW held it, the cluster objects unchanged');
    assert.equal(node.driver.callsOf('NodeUnpublishVolume').length, 1);
  });
});
