// The real clock adapter: durations and sleeps on the monotonic clock, the wall clock only for
// timestamps. The wall clock is stepped by mocking Date.now (the process's wall clock as every
// reader sees it); the monotonic clock cannot be stepped, which is the point.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';

import { realClock } from '../../../src/adapters/node/clock.js';

const HOUR = 3_600_000;

describe('realClock', () => {
  it('nowMs() does not follow the wall clock stepped 3 h forward then 5 h back; wallMs() does', (t: TestContext) => {
    const wall0 = Date.now();
    let wall = wall0;
    t.mock.method(Date, 'now', () => wall);
    const before = realClock.nowMs();
    wall = wall0 + 3 * HOUR;
    const afterForward = realClock.nowMs();
    wall = wall0 - 2 * HOUR;
    const afterBack = realClock.nowMs();
    // Only the real time the test took elapsed (well under a minute), never hours, never backwards.
    assert.ok(afterForward >= before && afterForward - before < 60_000, `forward step: ${afterForward - before} ms`);
    assert.ok(afterBack >= afterForward && afterBack - afterForward < 60_000, `back step: ${afterBack - afterForward} ms`);
    // The timestamps, though, are the wall clock's.
    assert.equal(realClock.wallMs(), wall0 - 2 * HOUR);
    wall = wall0 + 3 * HOUR;
    assert.equal(realClock.wallMs(), wall0 + 3 * HOUR);
  });

  it('sleep(ms) lasts ms of monotonic time with the wall clock stepped back 5 h meanwhile', async (t: TestContext) => {
    const wall0 = Date.now();
    t.mock.method(Date, 'now', () => wall0 - 5 * HOUR);
    const start = realClock.nowMs();
    await realClock.sleep(30);
    const slept = realClock.nowMs() - start;
    // Timers may fire up to 1 ms early by their own rounding; hours late or early they are not.
    assert.ok(slept >= 29 && slept < 60_000, `slept ${slept} ms`);
  });
});
