import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { FakeClock } from '../../support/fakeClock.js';

/** Whether `p` has settled after the event loop turned once. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise<void>((resolve) => setImmediate(resolve));
  return done;
}

describe('FakeClock', () => {
  it('a sleep resolves only once virtual time reaches its due time', async () => {
    const clock = new FakeClock({ startMs: 1000 });
    const sleep = clock.sleep(50);
    assert.equal(clock.pendingSleeps(), 1);
    await clock.advance(49);
    assert.equal(await settled(sleep), false);
    assert.equal(clock.nowMs(), 1049);
    await clock.advance(1);
    assert.equal(await settled(sleep), true);
    assert.equal(clock.pendingSleeps(), 0);
  });

  it('wakes sleepers in order of due time, then of the sleep() calls, each at its own due time', async () => {
    const clock = new FakeClock();
    const woke: string[] = [];
    const sleeper = async (name: string, ms: number): Promise<void> => {
      await clock.sleep(ms);
      woke.push(`${name}@${clock.nowMs()}`);
    };
    const all = Promise.all([sleeper('c', 30), sleeper('a', 10), sleeper('b', 10), sleeper('d', 31)]);
    await clock.advance(30);
    assert.deepEqual(woke, ['a@10', 'b@10', 'c@30']);
    assert.equal(clock.nowMs(), 30);
    await clock.advance(1);
    await all;
    assert.deepEqual(woke, ['a@10', 'b@10', 'c@30', 'd@31']);
  });

  it('sleeps made by woken code fire within the same advance when they fall due inside it', async () => {
    const clock = new FakeClock();
    const ticks: number[] = [];
    const loop = (async () => {
      for (let i = 0; i < 5; i++) {
        await clock.sleep(10);
        ticks.push(clock.nowMs());
      }
    })();
    await clock.advance(35);
    assert.deepEqual(ticks, [10, 20, 30]);
    assert.equal(clock.nowMs(), 35);
    await clock.advance(15);
    await loop;
    assert.deepEqual(ticks, [10, 20, 30, 40, 50]);
  });

  it('advance lets freshly started work register its sleep before time moves', async () => {
    const clock = new FakeClock();
    let done = false;
    void (async () => {
      await Promise.resolve();
      await Promise.resolve();
      await clock.sleep(100);
      done = true;
    })();
    await clock.advance(100);
    assert.equal(done, true);
  });

  it('a zero or negative sleep resolves at once without being pending', async () => {
    const clock = new FakeClock();
    await clock.sleep(0);
    await clock.sleep(-5);
    assert.equal(clock.pendingSleeps(), 0);
    assert.equal(clock.nowMs(), 0);
  });

  it('runUntilIdle runs a retry loop with backoff to completion and reports idle', async () => {
    const clock = new FakeClock();
    const attempts: number[] = [];
    const retry = (async () => {
      for (let delay = 100; delay <= 800; delay *= 2) {
        attempts.push(clock.nowMs());
        await clock.sleep(delay);
      }
    })();
    assert.equal(await clock.runUntilIdle(10_000), true);
    await retry;
    assert.deepEqual(attempts, [0, 100, 300, 700]);
    assert.equal(clock.nowMs(), 1500);
    assert.equal(clock.pendingSleeps(), 0);
  });

  it('runUntilIdle stops at maxMs when sleepers remain, leaving time at start + maxMs', async () => {
    const clock = new FakeClock({ startMs: 5 });
    const early = clock.sleep(10);
    const late = clock.sleep(1000);
    assert.equal(await clock.runUntilIdle(500), false);
    assert.equal(await settled(early), true);
    assert.equal(await settled(late), false);
    assert.equal(clock.nowMs(), 505);
    assert.equal(clock.pendingSleeps(), 1);
    assert.equal(clock.nextDueMs(), 1005);
  });

  it('concurrent advance calls run one after the other', async () => {
    const clock = new FakeClock();
    const s = clock.sleep(15);
    await Promise.all([clock.advance(10), clock.advance(10)]);
    assert.equal(clock.nowMs(), 20);
    assert.equal(await settled(s), true);
  });

  it('with autoAdvance each sleep moves time forward by itself and resolves at once; sleeps are logged', async () => {
    const clock = new FakeClock({ startMs: 5, autoAdvance: true });
    const sleep = clock.sleep(10);
    assert.equal(await settled(sleep), true);
    await clock.sleep(0);
    await clock.sleep(25);
    assert.equal(clock.nowMs(), 40);
    assert.deepEqual(clock.sleeps, [10, 25], 'zero delays are not sleeps');
    assert.equal(clock.pendingSleeps(), 0);
  });
});
