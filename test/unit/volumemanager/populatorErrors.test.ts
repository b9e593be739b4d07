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
    node.addVolume('pv-1', 'h1');
    await node.steps(3);
    assert.equal(errorLines(node).length, 2); // fixed: nothing new
    node.cluster.pvcs.delete('default/claim-pv-1');
    await node.steps(3);
    assert.equal(errorLines(node).length, 3); // broken again: logged at once
    assert.match((errorLines(node)[2]?.values['err'] as Error).message, /not found/);
  });
});
