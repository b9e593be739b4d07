import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  AlreadyExistsError,
  BACKOFF_INITIAL_MS,
  BACKOFF_MAX_MS,
  BackoffError,
  createNestedPendingOperations,
  isAlreadyExists,
  isBackoff,
  isExpectedError,
  type GeneratedOperation,
  type NestedPendingOperations,
  type OperationCompleteEvent,
  type OperationKey,
} from '../../../src/operationexecutor/nestedPendingOperations.js';
import { FakeClock } from '../../support/fakeClock.js';

/** An operation the test settles by hand; counts its starts. */
class ManualOperation implements GeneratedOperation {
  starts = 0;
  private settle: { resolve: () => void; reject: (err: unknown) => void } | undefined;
  constructor(readonly operationName = 'volume_mount') {}
  run(): Promise<void> {
    this.starts++;
    return new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
  }
  get running(): boolean {
    return this.settle !== undefined;
  }
  succeed(): void {
    this.take().resolve();
  }
  fail(err: unknown = new Error(`${this.operationName} failed`)): void {
    this.take().reject(err);
  }
  private take(): { resolve: () => void; reject: (err: unknown) => void } {
    const settle = this.settle;
    assert.ok(settle, `${this.operationName} is not running`);
    this.settle = undefined;
    return settle;
  }
}

/** Lets started operations run their first step and settled ones complete. */
async function flush(): Promise<void> {
  await new Promise<void>((resolve) => setImmediate(resolve));
}

interface Harness {
  clock: FakeClock;
  npo: NestedPendingOperations;
  completed: OperationCompleteEvent[];
}

function harness(): Harness {
  // Nothing in NestedPendingOperations sleeps: time only moves when a test advances it.
  const clock = new FakeClock({ startMs: 1_000_000 });
  const npo = createNestedPendingOperations(clock);
  const completed: OperationCompleteEvent[] = [];
  npo.onComplete((e) => completed.push(e));
  return { clock, npo, completed };
}

const VOL = 'kubernetes.io/csi/ebs.csi.example.com^vol-1';
const VOL2 = 'kubernetes.io/csi/ebs.csi.example.com^vol-2';
const POD_A = 'pod-a-uid';
const POD_B = 'pod-b-uid';
const key = (volumeName: string, podName: string): OperationKey => ({ volumeName, podName });

/** Runs one operation under `k` and makes it fail; returns the BackoffError a retry gets at once. */
async function failOnce(h: Harness, k: OperationKey): Promise<BackoffError> {
  const op = new ManualOperation();
  h.npo.run(k, op);
  await flush();
  op.fail();
  await h.npo.wait();
  try {
    h.npo.run(k, new ManualOperation());
  } catch (err) {
    assert.ok(isBackoff(err), `expected a BackoffError, got ${String(err)}`);
    return err;
  }
  assert.fail('a retry right after a failure was not refused');
}

describe('NestedPendingOperations', () => {
  describe('starting operations', () => {
    it('a single operation starts asynchronously, not inside run()', async () => {
      const { npo } = harness();
      const op = new ManualOperation();
      npo.run(key(VOL, ''), op);
      assert.equal(op.starts, 0);
      await flush();
      assert.equal(op.starts, 1);
      op.succeed();
      await npo.wait();
    });

    it('two operations on different volumes run in parallel', async () => {
      const { npo } = harness();
      const op1 = new ManualOperation();
      const op2 = new ManualOperation();
      npo.run(key(VOL, ''), op1);
      npo.run(key(VOL2, ''), op2);
      await flush();
      assert.ok(op1.running && op2.running);
      op1.succeed();
      op2.succeed();
      await npo.wait();
    });

    it('two operations on the same volume for different pods run in parallel', async () => {
      const { npo } = harness();
      const op1 = new ManualOperation('volume_unmount');
      const op2 = new ManualOperation('volume_unmount');
      npo.run(key(VOL, POD_A), op1);
      npo.run(key(VOL, POD_B), op2);
      await flush();
      assert.ok(op1.running && op2.running);
      op1.succeed();
      op2.succeed();
      await npo.wait();
    });
  });

  describe('refusing a second operation while the first is pending', () => {
    const cases: { name: string; first: OperationKey; second: OperationKey }[] = [
      { name: 'the same volume with the empty pod twice is refused', first: key(VOL, ''), second: key(VOL, '') },
      { name: 'the same volume and pod twice is refused', first: key(VOL, POD_A), second: key(VOL, POD_A) },
      { name: 'a pending empty-pod operation blocks any pod on that volume', first: key(VOL, ''), second: key(VOL, POD_A) },
      { name: 'a pending pod operation blocks the empty pod on that volume', first: key(VOL, POD_A), second: key(VOL, '') },
    ];
    for (const tc of cases) {
      it(tc.name, async () => {
        const { npo } = harness();
        const first = new ManualOperation('first');
        const second = new ManualOperation('second');
        npo.run(tc.first, first);
        assert.throws(
          () => npo.run(tc.second, second),
          (err: unknown) => {
            assert.ok(err instanceof AlreadyExistsError);
            assert.deepEqual(err.operationKey, tc.second);
            assert.deepEqual(err.pendingKey, tc.first);
            assert.equal(err.operationName, 'second');
            return true;
          },
        );
        await flush();
        assert.equal(second.starts, 0, 'the refused operation never starts');
        assert.equal(npo.isOperationPending(tc.second.volumeName, tc.second.podName), true);
        assert.equal(npo.isOperationSafeToRetry(tc.second.volumeName, tc.second.podName), false);
        first.succeed();
        await npo.wait();
      });
    }

    it('a second and a third operation with different names are both refused while the first runs', async () => {
      const { npo } = harness();
      const first = new ManualOperation('volume_mount');
      npo.run(key(VOL, ''), first);
      assert.throws(() => npo.run(key(VOL, ''), new ManualOperation('unmount_device')), AlreadyExistsError);
      assert.throws(() => npo.run(key(VOL, POD_A), new ManualOperation('volume_unmount')), AlreadyExistsError);
      await flush();
      first.succeed();
      await npo.wait();
    });

    it('a refusal also happens while the first operation has not yet started its work', () => {
      const { npo } = harness();
      npo.run(key(VOL, ''), new ManualOperation());
      assert.throws(() => npo.run(key(VOL, ''), new ManualOperation()), isAlreadyExists);
    });
  });

  describe('after the first operation completes', () => {
    it('a second operation with the same key starts after the first succeeds', async () => {
      const { npo } = harness();
      const first = new ManualOperation();
      npo.run(key(VOL, ''), first);
      await flush();
      first.succeed();
      await npo.wait();
      const second = new ManualOperation();
      npo.run(key(VOL, ''), second);
      await flush();
      assert.equal(second.starts, 1);
      second.succeed();
      await npo.wait();
    });

    it('a third operation starts after the first succeeds although the second was refused', async () => {
      const { npo } = harness();
      const first = new ManualOperation();
      npo.run(key(VOL, POD_A), first);
      assert.throws(() => npo.run(key(VOL, ''), new ManualOperation()), isAlreadyExists);
      await flush();
      first.succeed();
      await npo.wait();
      const third = new ManualOperation();
      npo.run(key(VOL, ''), third);
      await flush();
      assert.equal(third.starts, 1);
      third.succeed();
      await npo.wait();
    });

    it('an operation that throws synchronously counts as a failure and leaves the key in backoff', async () => {
      const { npo, completed } = harness();
      const boom = new Error('synchronous throw');
      npo.run(key(VOL, ''), {
        operationName: 'volume_mount',
        run: () => {
          throw boom;
        },
      });
      await npo.wait();
      assert.equal(completed.length, 1);
      assert.equal(completed[0]!.error, boom);
      assert.throws(() => npo.run(key(VOL, ''), new ManualOperation()), isBackoff);
    });
  });

  describe('exponential backoff', () => {
    it('after a failure the same key gets BackoffError until 500 ms have passed, then runs', async () => {
      const h = harness();
      const { clock, npo } = h;
      const refusal = await failOnce(h, key(VOL, ''));
      assert.equal(refusal.retryAfterMs, 500);
      assert.equal(refusal.durationBeforeRetryMs, BACKOFF_INITIAL_MS);
      assert.ok(refusal.lastError instanceof Error);
      assert.match(refusal.lastError.message, /volume_mount failed/);
      assert.equal(npo.isOperationPending(VOL, ''), false);
      assert.equal(npo.isOperationSafeToRetry(VOL, ''), false);

      await clock.advance(499);
      const late = new ManualOperation();
      assert.throws(
        () => npo.run(key(VOL, ''), late),
        (err: unknown) => isBackoff(err) && err.retryAfterMs === 1,
      );
      assert.equal(npo.isOperationSafeToRetry(VOL, ''), false);

      // At exactly durationBeforeRetry the retry is still refused (kubelet's SafeToRetry uses <=).
      await clock.advance(1);
      assert.throws(
        () => npo.run(key(VOL, ''), new ManualOperation()),
        (err: unknown) => isBackoff(err) && err.retryAfterMs === 0,
      );
      assert.equal(npo.isOperationSafeToRetry(VOL, ''), false);
      await clock.advance(1);
      assert.equal(npo.isOperationSafeToRetry(VOL, ''), true);
      const retry = new ManualOperation();
      npo.run(key(VOL, ''), retry);
      await flush();
      assert.equal(late.starts, 0);
      assert.equal(retry.starts, 1);
      retry.succeed();
      await npo.wait();
      assert.deepEqual(clock.sleeps, [], 'backoff is computed from nowMs(), never waited out with sleep()');
    });

    it('consecutive failures double the backoff from 500 ms and cap it at 122000 ms', async () => {
      const h = harness();
      const durations: number[] = [];
      for (let i = 0; i < 12; i++) {
        const refusal = await failOnce(h, key(VOL, ''));
        durations.push(refusal.durationBeforeRetryMs);
        assert.equal(refusal.retryAfterMs, refusal.durationBeforeRetryMs);
        await h.clock.advance(refusal.durationBeforeRetryMs + 1);
      }
      assert.deepEqual(durations, [
        500, 1000, 2000, 4000, 8000, 16_000, 32_000, 64_000, BACKOFF_MAX_MS, BACKOFF_MAX_MS, BACKOFF_MAX_MS, BACKOFF_MAX_MS,
      ]);
      assert.equal(BACKOFF_MAX_MS, 122_000);
    });

    it('the backoff starts from when the operation failed, not from when it started', async () => {
      const { clock, npo } = harness();
      const op = new ManualOperation();
      npo.run(key(VOL, ''), op);
      await flush();
      await clock.advance(10_000);
      op.fail();
      await npo.wait();
      await clock.advance(500);
      assert.throws(() => npo.run(key(VOL, ''), new ManualOperation()), isBackoff);
      await clock.advance(1);
      assert.equal(npo.isOperationSafeToRetry(VOL, ''), true);
    });

    it('a success resets the backoff so the next failure waits 500 ms again', async () => {
      const h = harness();
      const first = await failOnce(h, key(VOL, ''));
      await h.clock.advance(first.durationBeforeRetryMs + 1);
      const second = await failOnce(h, key(VOL, ''));
      assert.equal(second.durationBeforeRetryMs, 1000);
      await h.clock.advance(second.durationBeforeRetryMs + 1);

      const ok = new ManualOperation();
      h.npo.run(key(VOL, ''), ok);
      await flush();
      ok.succeed();
      await h.npo.wait();
      assert.equal(h.npo.isOperationSafeToRetry(VOL, ''), true);

      const third = await failOnce(h, key(VOL, ''));
      assert.equal(third.durationBeforeRetryMs, 500);
    });

    it('a failed pod operation does not put other pods of the same volume in backoff', async () => {
      const h = harness();
      await failOnce(h, key(VOL, POD_A));
      assert.equal(h.npo.isOperationSafeToRetry(VOL, POD_B), true);
      const other = new ManualOperation('volume_unmount');
      h.npo.run(key(VOL, POD_B), other);
      await flush();
      assert.equal(other.starts, 1);
      other.succeed();
      await h.npo.wait();
      assert.throws(() => h.npo.run(key(VOL, POD_A), new ManualOperation()), isBackoff);
    });

    it('a failed empty-pod operation puts every pod of the volume in backoff, and vice versa', async () => {
      const h = harness();
      await failOnce(h, key(VOL, ''));
      assert.throws(() => h.npo.run(key(VOL, POD_A), new ManualOperation()), isBackoff);

      const h2 = harness();
      await failOnce(h2, key(VOL, POD_A));
      assert.throws(() => h2.npo.run(key(VOL, ''), new ManualOperation()), isBackoff);
    });

    it('a failed entry with an expired backoff is taken over by a wildcard-matching key and keeps doubling', async () => {
      const h = harness();
      const first = await failOnce(h, key(VOL, ''));
      await h.clock.advance(first.durationBeforeRetryMs + 1);
      // (VOL, POD_A) matches the failed (VOL, '') entry through the wildcard and reuses it.
      const second = await failOnce(h, key(VOL, POD_A));
      assert.equal(second.durationBeforeRetryMs, 1000);
      // The entry now carries the key (VOL, POD_A), so POD_B is no longer blocked.
      assert.equal(h.npo.isOperationSafeToRetry(VOL, POD_B), true);
    });

    it('an empty-pod operation matching several failed pod entries is held by the oldest one\'s backoff', async () => {
      const h = harness();
      const a1 = await failOnce(h, key(VOL, POD_A));
      await h.clock.advance(a1.durationBeforeRetryMs + 1);
      const a2 = await failOnce(h, key(VOL, POD_A));
      assert.equal(a2.durationBeforeRetryMs, 1000);
      await failOnce(h, key(VOL, POD_B));
      await h.clock.advance(501);
      assert.equal(h.npo.isOperationSafeToRetry(VOL, POD_B), true);
      assert.equal(h.npo.isOperationSafeToRetry(VOL, POD_A), false);
      assert.throws(
        () => h.npo.run(key(VOL, ''), new ManualOperation()),
        (err: unknown) => isBackoff(err) && err.durationBeforeRetryMs === 1000 && err.retryAfterMs === 499,
      );
    });

    it('a pod operation is held by the backoff of its own failed entry, not by an older wildcard entry of the volume', async () => {
      // nestedpendingoperations.go isOperationExists: among the failed operations matching a key,
      // the one with exactly that pod name is the one whose backoff applies.
      const h = harness();
      const a = new ManualOperation();
      const b = new ManualOperation();
      h.npo.run(key(VOL, POD_A), a);
      h.npo.run(key(VOL, POD_B), b);
      await flush();
      a.fail();
      b.fail();
      await h.npo.wait();
      await h.clock.advance(BACKOFF_INITIAL_MS + 1);
      // (VOL, '') takes over the older entry, POD_A's, and fails again: that entry now waits 1000 ms
      // from now, while POD_B's own 500 ms have expired.
      const wildcard = await failOnce(h, key(VOL, ''));
      assert.equal(wildcard.durationBeforeRetryMs, 1000);
      assert.equal(h.npo.isOperationSafeToRetry(VOL, POD_B), true);
      assert.equal(h.npo.isRunnable(key(VOL, POD_B), 'volume_mount'), true);
      const retry = new ManualOperation();
      assert.doesNotThrow(() => h.npo.run(key(VOL, POD_B), retry));
      await flush();
      assert.equal(retry.starts, 1);
      retry.fail();
      await h.npo.wait();
      // The retry's failure doubled POD_B's own backoff, not the wildcard entry's.
      assert.throws(
        () => h.npo.run(key(VOL, POD_B), new ManualOperation()),
        (err: unknown) => isBackoff(err) && err.durationBeforeRetryMs === 1000 && err.retryAfterMs === 1000,
      );
    });

    it('a different operation on a key in backoff resets the backoff and runs (kubelet: a failing mount does not hold back an unmount)', async () => {
      const h = harness();
      const first = await failOnce(h, key(VOL, ''));
      assert.equal(first.durationBeforeRetryMs, 500);
      assert.throws(() => h.npo.run(key(VOL, ''), new ManualOperation()), (err: unknown) => isBackoff(err));
      assert.doesNotThrow(() => h.npo.checkRunnable(key(VOL, ''), 'unmount_device'));
      const other = new ManualOperation('unmount_device');
      h.npo.run(key(VOL, ''), other);
      await flush();
      other.fail();
      await h.npo.wait();
      // The backoff started again from its initial value for the new operation.
      assert.throws(
        () => h.npo.run(key(VOL, ''), new ManualOperation('unmount_device')),
        (err: unknown) => isBackoff(err) && err.durationBeforeRetryMs === 500,
      );
    });

    it('a different operation after the backoff expired keeps the backoff and the recorded name (kubelet Run resets only while active)', async () => {
      const h = harness();
      const first = await failOnce(h, key(VOL, ''));
      assert.equal(first.durationBeforeRetryMs, 500);
      await h.clock.advance(501);
      const other = new ManualOperation('unmount_device');
      h.npo.run(key(VOL, ''), other);
      await flush();
      other.fail();
      await h.npo.wait();
      // Not reset: the failure doubled the mount's backoff, and the entry still carries the
      // mount's name, so the mount is refused and the unmount is let through (and resets it).
      assert.throws(
        () => h.npo.run(key(VOL, ''), new ManualOperation('volume_mount')),
        (err: unknown) => isBackoff(err) && err.durationBeforeRetryMs === 1000,
      );
      assert.doesNotThrow(() => h.npo.checkRunnable(key(VOL, ''), 'unmount_device'));
      assert.equal(h.completed.at(-1)?.operationName, 'unmount_device');
    });
  });

  describe('isRunnable agrees with checkRunnable and run', () => {
    /** isRunnable(k, name) must be true exactly when checkRunnable(k, name) does not throw. */
    function agrees(npo: NestedPendingOperations, k: OperationKey, name: string): boolean {
      let throws = false;
      try {
        npo.checkRunnable(k, name);
      } catch {
        throws = true;
      }
      const runnable = npo.isRunnable(k, name);
      assert.equal(runnable, !throws, `isRunnable(${JSON.stringify(k)}, ${name})`);
      return runnable;
    }

    it('free, pending (exact and wildcard), in backoff (same and other name), expired', async () => {
      const h = harness();
      assert.equal(agrees(h.npo, key(VOL, POD_A), 'volume_mount'), true);
      const op = new ManualOperation();
      h.npo.run(key(VOL, POD_A), op);
      await flush();
      assert.equal(agrees(h.npo, key(VOL, POD_A), 'volume_mount'), false);
      assert.equal(agrees(h.npo, key(VOL, ''), 'unmount_device'), false, 'the wildcard conflicts with a pending pod');
      assert.equal(agrees(h.npo, key(VOL, POD_B), 'volume_mount'), true, 'another pod of the same volume may run');
      op.fail();
      await h.npo.wait();
      assert.equal(agrees(h.npo, key(VOL, POD_A), 'volume_mount'), false, 'backoff holds the same operation back');
      assert.equal(agrees(h.npo, key(VOL, POD_A), 'volume_unmount'), true, 'another operation name resets the backoff');
      await h.clock.advance(BACKOFF_INITIAL_MS);
      assert.equal(agrees(h.npo, key(VOL, POD_A), 'volume_mount'), false, 'the boundary itself still refuses');
      await h.clock.advance(1);
      assert.equal(agrees(h.npo, key(VOL, POD_A), 'volume_mount'), true);
    });
  });

  describe('wait() and onComplete', () => {
    it('wait() resolves at once when nothing runs', async () => {
      const { npo } = harness();
      let resolved = false;
      void npo.wait().then(() => (resolved = true));
      await flush();
      assert.equal(resolved, true, 'wait() with nothing running must not block');
    });

    it('wait() resolves only after every running operation has completed', async () => {
      const { npo } = harness();
      const op1 = new ManualOperation();
      const op2 = new ManualOperation();
      npo.run(key(VOL, ''), op1);
      npo.run(key(VOL2, ''), op2);
      let done = false;
      const waiting = npo.wait().then(() => {
        done = true;
      });
      await flush();
      op1.succeed();
      await flush();
      assert.equal(done, false, 'one operation still runs');
      op2.fail();
      await waiting;
      assert.equal(done, true);
    });

    it('onComplete reports key, name, error or undefined, and the clock duration of each operation', async () => {
      const { clock, npo, completed } = harness();
      const mount = new ManualOperation('volume_mount');
      const unmount = new ManualOperation('volume_unmount');
      npo.run(key(VOL, ''), mount);
      npo.run(key(VOL2, POD_A), unmount);
      await flush();
      await clock.advance(250);
      mount.succeed();
      await flush();
      await clock.advance(750);
      const err = new Error('unmount failed');
      unmount.fail(err);
      await npo.wait();
      assert.deepEqual(completed, [
        { key: key(VOL, ''), operationName: 'volume_mount', error: undefined, durationMs: 250 },
        { key: key(VOL2, POD_A), operationName: 'volume_unmount', error: err, durationMs: 1000 },
      ]);
    });

    it('listeners see the settled state: the key is no longer pending', async () => {
      const { npo } = harness();
      const seen: boolean[] = [];
      npo.onComplete((e) => seen.push(npo.isOperationPending(e.key.volumeName, e.key.podName)));
      const op = new ManualOperation();
      npo.run(key(VOL, ''), op);
      await flush();
      op.succeed();
      await npo.wait();
      assert.deepEqual(seen, [false]);
    });

    it('an operation rejecting without a value is still reported as failed, with a reason that names it', async () => {
      const { npo, completed } = harness();
      // Not ManualOperation.fail(undefined): its default parameter would put an Error in place of undefined.
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      npo.run(key(VOL, ''), { operationName: 'volume_mount', run: () => Promise.reject(undefined) });
      await npo.wait();
      const reason = 'operation "volume_mount" failed without a reason';
      assert.ok(completed[0]!.error instanceof Error);
      assert.equal(completed[0]!.error.message, reason);
      assert.throws(
        () => npo.run(key(VOL, ''), new ManualOperation()),
        (err: unknown) => isBackoff(err) && err.message.endsWith(`last error: ${reason}`),
      );
    });
  });

  describe('queries and error guards', () => {
    it('isOperationPending and isOperationSafeToRetry are true/false as expected for an unknown key', () => {
      const { npo } = harness();
      assert.equal(npo.isOperationPending(VOL, ''), false);
      assert.equal(npo.isOperationSafeToRetry(VOL, ''), true);
    });

    it('isExpectedError is true for already-exists and backoff refusals only', async () => {
      const h = harness();
      const backoff = await failOnce(h, key(VOL, ''));
      h.npo.run(key(VOL2, ''), new ManualOperation());
      let alreadyExists: unknown;
      try {
        h.npo.run(key(VOL2, ''), new ManualOperation());
      } catch (err) {
        alreadyExists = err;
      }
      assert.ok(isAlreadyExists(alreadyExists));
      assert.equal(isExpectedError(alreadyExists), true);
      assert.equal(isExpectedError(backoff), true);
      assert.equal(isExpectedError(new Error('mount failed')), false);
      assert.equal(isExpectedError(undefined), false);
      assert.equal(isBackoff(alreadyExists), false);
      assert.equal(isAlreadyExists(backoff), false);
      // What an operator reads: the key, the wait left, the backoff armed and the last failure.
      assert.equal(
        backoff.message,
        `operation for volume "${VOL}" failed; no retries permitted for another 500 ms (durationBeforeRetry 500 ms); last error: volume_mount failed`,
      );
      assert.match(alreadyExists.message, /already executing/);
    });

    it('an expected refusal captures no stack frames (it is made on every pass for every busy volume) and keeps its message', async () => {
      const h = harness();
      const backoff = await failOnce(h, key(VOL, ''));
      h.npo.run(key(VOL2, ''), new ManualOperation());
      const alreadyExists = (() => {
        try {
          h.npo.run(key(VOL2, POD_A), new ManualOperation());
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      assert.ok(alreadyExists instanceof AlreadyExistsError);
      for (const err of [alreadyExists, backoff]) {
        assert.ok(err instanceof Error);
        assert.equal(err.stack, `${err.name}: ${err.message}`, 'the stack is the header only');
      }
      assert.equal(
        alreadyExists.message,
        `failed to create operation "volume_mount" for volume "${VOL2}" pod "${POD_A}": an operation for volume "${VOL2}" is already executing`,
      );
      assert.ok(new Error('x').stack?.includes('\n    at '), 'other errors still capture their frames');
    });
  });
});
