// NestedPendingOperations must let go of a volume once its last operation succeeded: a
// long-running node operates on volumes all day, and an emptied per-volume list kept for each
// volume name ever seen would grow the daemon without bound. In a file of its own because it turns
// on the garbage collector's hook for this test process only.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createNestedPendingOperations, type GeneratedOperation } from '../../../src/operationexecutor/nestedPendingOperations.js';
import { FakeClock } from '../../support/fakeClock.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const done: GeneratedOperation = { operationName: 'volume_mount', run: () => Promise.resolve() };

describe('NestedPendingOperations: retention', () => {
  // Kept, each volume name ever operated on would hold an empty list: about 13 MB per 100,000.
  it('an operation that succeeded for each of 100,000 volumes leaves the heap where it was', async () => {
    const npo = createNestedPendingOperations(new FakeClock({ startMs: 1_000_000 }));
    const cycle = async (from: number, to: number): Promise<void> => {
      for (let i = from; i < to; i += 1_000) {
        for (let j = i; j < i + 1_000; j++) npo.run({ volumeName: `kubernetes.io/csi/d^vol-${j}`, podName: '' }, done);
        await npo.wait();
      }
    };
    await cycle(0, 1_000); // warm: every code path compiled and its caches made before the first measure
    await new Promise<void>((resolve) => setImmediate(resolve));
    gc();
    const before = process.memoryUsage().heapUsed;
    await cycle(1_000, 101_000);
    await new Promise<void>((resolve) => setImmediate(resolve));
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    assert.equal(npo.isOperationPending('kubernetes.io/csi/d^vol-100999', ''), false);
    assert.ok(grown < 4 << 20, `the heap grew by ${(grown / (1 << 20)).toFixed(1)} MB`);
  });
});
