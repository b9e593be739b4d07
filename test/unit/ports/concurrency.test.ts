import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FreshSharedCall } from '../../../src/ports/concurrency.js';

/** A call whose answers the test releases one at a time. */
function controlled(): { shared: FreshSharedCall<number>; started: () => number; settle: (ok: boolean) => void } {
  const pending: { resolve: (n: number) => void; reject: (e: Error) => void }[] = [];
  let started = 0;
  const shared = new FreshSharedCall(
    () =>
      new Promise<number>((resolve, reject) => {
        started++;
        pending.push({ resolve, reject });
      }),
  );
  return {
    shared,
    started: () => started,
    settle: (ok) => {
      const p = pending.shift();
      if (p === undefined) throw new Error('no call in flight');
      if (ok) p.resolve(started);
      else p.reject(new Error(`call ${started} failed`));
    },
  };
}

describe('FreshSharedCall', () => {
  it('callers during a running call share one call started after that one settles', async () => {
    const c = controlled();
    const first = c.shared.call();
    const a = c.shared.call();
    const b = c.shared.call();
    assert.equal(c.started(), 1, 'the later callers do not join the call already running');
    assert.equal(a, b, 'they share the queued call');
    c.settle(true);
    assert.equal(await first, 1);
    await Promise.resolve();
    await Promise.resolve();
    assert.equal(c.started(), 2, 'one new call for both');
    c.settle(true);
    assert.deepEqual(await Promise.all([a, b]), [2, 2]);
  });

  it('an error reaches every caller of that call, and nothing is kept afterwards', async () => {
    const c = controlled();
    const x = c.shared.call();
    const y = c.shared.call();
    c.settle(false);
    await assert.rejects(x, /call 1 failed/);
    await Promise.resolve();
    await Promise.resolve();
    c.settle(false);
    await assert.rejects(y, /call 2 failed/);
    const z = c.shared.call();
    assert.equal(c.started(), 3, 'a caller after everything settled starts a call of its own');
    c.settle(true);
    assert.equal(await z, 3);
  });
});
