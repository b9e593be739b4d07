// Repeated identical populator errors are rate-limited; a change or a recovery is logged at once.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InMemoryNode } from '../../support/inMemoryNode.js';
import { POPULATOR_ERROR_REPEAT_MS } from '../../../src/volumemanager/populator/desiredStateOfWorldPopulator.js';

function errorLines(node: InMemoryNode) {
  return node.logger.lines.filter((l) => l.severity === 'E' && l.msg === 'Error processing volume');
}

describe('populator error rate limit', () => {
  it('logs an identical error once per interval, with the count of repeats it held back', async () => {
    const node = new InMemoryNode();
    node.addPod('uid-1', ['missing-pv']); // its claim does not exist
    await node.startKubelet(false);
    await node.steps(20);
    assert.equal(errorLines(node).length, 1);
    assert.equal(errorLines(node)[0]?.values['volumeName'], 'vol-missing-pv');
    assert.equal(errorLines(node)[0]?.values['pod'], 'default/pod-uid-1');

    await node.clock.advance(POPULATOR_ERROR_REPEAT_MS);
    await node.steps(1);
    const lines = errorLines(node);
    assert.equal(lines.length, 2);
    assert.ok(Number(lines[1]?.values['repeated']) >= 19);
  });

  it('logs a different error for the same volume at once, and the same error again after a success', async () => {
    const node = new InMemoryNode();
    node.addPod('uid-1', ['pv-1']);
    await node.startKubelet(false);
    await node.steps(3);
    assert.equal(errorLines(node).length, 1); // claim not found
    node.cluster.pvcs.set('default/claim-pv-1', { namespace: 'default', name: 'claim-pv-1', uid: 'uid-claim-default-claim-pv-1', volumeName: '', phase: 'Bound' });
    await node.steps(3);
    assert.equal(errorLines(node).length, 2); // a different error: claim not bound
    assert.equal(errorLines(node)[1]?.values['repeated'], undefined, 'a new error counts no repeats of the one before');
    node.addVolume('pv-1', 'h1');
    await node.steps(3);
    assert.equal(errorLines(node).length, 2); // fixed: nothing new
    node.cluster.pvcs.delete('default/claim-pv-1');
    await node.steps(3);
    assert.equal(errorLines(node).length, 3); // broken again: logged at once
    assert.match((errorLines(node)[2]?.values['err'] as Error).message, /not found/);
  });

  it('logs the same error again exactly when the interval has passed since its line, counting from that line', async () => {
    const node = new InMemoryNode();
    node.addPod('uid-1', ['missing-pv']);
    // The first line is written well after time 0, so the interval counts from it.
    await node.clock.advance(30_000);
    const vm = await node.startKubelet(false);
    await vm.populateOnce();
    assert.equal(errorLines(node).length, 1);
    await node.clock.advance(POPULATOR_ERROR_REPEAT_MS - 1);
    await vm.populateOnce();
    assert.equal(errorLines(node).length, 1, 'one ms short of the interval: held back');
    await node.clock.advance(1);
    await vm.populateOnce();
    assert.equal(errorLines(node).length, 2, 'the interval has passed: logged again');
    assert.equal(errorLines(node)[1]?.values['repeated'], 1);
  });

  it("forgets a pod's errors when it is no longer listed: a pod that comes back logs its error at once", async () => {
    const node = new InMemoryNode();
    node.addPod('uid-1', ['missing-pv']);
    await node.startKubelet(false);
    await node.steps(3);
    assert.equal(errorLines(node).length, 1);
    node.cluster.deletePod('uid-1');
    await node.steps(1);
    node.addPod('uid-1', ['missing-pv']);
    await node.steps(1);
    assert.equal(errorLines(node).length, 2);
    assert.equal(errorLines(node)[1]?.values['repeated'], undefined);
  });

  it('resolves the pods in uid order, whatever the order of the listing (fidelity row 25: outputs are deterministic)', async () => {
    const node = new InMemoryNode();
    for (const uid of ['uid-2', 'uid-3', 'uid-1']) node.addPod(uid, [`missing-${uid}`]);
    assert.deepEqual([...node.cluster.pods.keys()], ['uid-2', 'uid-3', 'uid-1'], 'the listing is not in uid order');
    await node.startKubelet(false);
    await node.steps(1);
    assert.deepEqual(
      errorLines(node).map((l) => l.values['pod']),
      ['default/pod-uid-1', 'default/pod-uid-2', 'default/pod-uid-3'],
    );
  });
});

describe('populator: an unreachable API server', () => {
  const listLines = (node: InMemoryNode) => node.logger.lines.filter((l) => l.severity === 'E' && l.msg.startsWith('Cannot reach the API server'));
  const recoveryLines = (node: InMemoryNode) => node.logger.lines.filter((l) => l.msg === 'API server reachable again: listing pods');

  it('logs a listing failure once per distinct message, its recovery once, and the same failure again after the recovery', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'h1');
    node.addPod('uid-1', ['pv-1']);
    const vm = await node.startKubelet(false);
    await vm.populateOnce();
    await vm.populateOnce();
    assert.equal(vm.dsw.getVolumesToMount().length, 1);
    assert.deepEqual(recoveryLines(node), [], 'nothing to recover from');

    node.cluster.unreachable = 'connection refused';
    for (let i = 0; i < 3; i++) await vm.populateOnce();
    assert.deepEqual(listLines(node).map((l) => (l.values['err'] as Error).message), ['connection refused']);
    node.cluster.unreachable = 'i/o timeout';
    for (let i = 0; i < 2; i++) await vm.populateOnce();
    assert.deepEqual(listLines(node).map((l) => (l.values['err'] as Error).message), ['connection refused', 'i/o timeout']);
    assert.equal(vm.dsw.getVolumesToMount().length, 1, 'the desired state is kept');

    node.cluster.unreachable = undefined;
    for (let i = 0; i < 3; i++) await vm.populateOnce();
    assert.equal(recoveryLines(node).length, 1);
    assert.equal(recoveryLines(node)[0]?.severity, 'I');

    node.cluster.unreachable = 'i/o timeout';
    await vm.populateOnce();
    assert.equal(listLines(node).length, 3, 'the failure last logged before the recovery is logged again');
  });
});
