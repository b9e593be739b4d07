// The idle memory compactor: one full collection once nothing changed for IDLE_AFTER_MS after the
// heap grew by MIN_GROWTH_BYTES; none while anything changes, none without growth, none twice for
// the same growth. Fake time and a fake heap.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { exposeGc, IDLE_AFTER_MS, IdleMemoryCompactor, MIN_GROWTH_BYTES } from '../../../src/agent/idleMemory.js';

function fake(): { c: IdleMemoryCompactor; s: { now: number; heap: number; activity: number; gcs: number } } {
  const s = { now: 0, heap: 10 * 1024 * 1024, activity: 0, gcs: 0 };
  const c = new IdleMemoryCompactor({
    activity: () => String(s.activity),
    heapUsed: () => s.heap,
    gc: () => {
      s.gcs++;
      s.heap = 12 * 1024 * 1024;
    },
    nowMs: () => s.now,
  });
  return { c, s };
}

describe('IdleMemoryCompactor', () => {
  it('compacts once, after IDLE_AFTER_MS without a change following enough growth', () => {
    const { c, s } = fake();
    c.check();
    s.heap += MIN_GROWTH_BYTES;
    for (let t = 0; t < IDLE_AFTER_MS; t += 1_000) {
      s.now = t;
      s.activity++; // busy: something changes every second
      assert.equal(c.check(), false);
    }
    const quietSince = s.now;
    for (; s.now < quietSince + IDLE_AFTER_MS; s.now += 1_000) assert.equal(c.check(), false, `still settling at ${s.now}`);
    assert.equal(c.check(), true, 'idle long enough, grown enough');
    for (let i = 0; i < 10; i++, s.now += 1_000) assert.equal(c.check(), false, 'not again for the same growth');
    assert.equal(s.gcs, 1);
  });

  it('does nothing without enough growth', () => {
    const { c, s } = fake();
    s.heap += MIN_GROWTH_BYTES - 1;
    for (let i = 0; i < 20; i++, s.now += 1_000) c.check();
    assert.equal(s.gcs, 0);
  });

  it('exposeGc gives a function that runs', () => {
    const gc = exposeGc();
    assert.equal(typeof gc, 'function');
    gc?.();
  });
});
