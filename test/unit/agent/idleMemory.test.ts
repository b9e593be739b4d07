// The idle memory compactor: one full collection once nothing changed for IDLE_AFTER_MS after the
// heap grew by MIN_GROWTH_BYTES; none while anything changes, none without growth, none twice for
// the same growth. Fake time and a fake heap.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { exposeGc, IDLE_AFTER_MS, IdleMemoryCompactor, limitYoungGeneration, MIN_GROWTH_BYTES } from '../../../src/agent/idleMemory.js';
import { getHeapSpaceStatistics } from 'node:v8';

function fake(): { c: IdleMemoryCompactor; s: { now: number; heap: number; activity: number; gcs: number } } {
  const s = { now: 0, heap: 10 * 1024 * 1024, activity: 0, gcs: 0 };
  const c = new IdleMemoryCompactor({
    activity: () => String(s.activity),
    heapTotal: () => s.heap,
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
    assert.equal(s.gcs, 2, 'one compaction: two collections (the second frees the evacuated pages)');
  });

  it('counts committed pages: a heap that shrank on its own is measured from there', () => {
    const { c, s } = fake();
    s.heap -= 4 * 1024 * 1024; // a major collection of its own
    for (let i = 0; i < 10; i++, s.now += 1_000) c.check();
    s.heap += MIN_GROWTH_BYTES; // MIN_GROWTH_BYTES above the lower mark, less above the original
    for (let i = 0; i < 10; i++, s.now += 1_000) c.check();
    assert.equal(s.gcs, 2, 'grown by MIN_GROWTH_BYTES from the lower mark');
  });

  it('does nothing without enough growth', () => {
    const { c, s } = fake();
    s.heap += MIN_GROWTH_BYTES - 1;
    for (let i = 0; i < 20; i++, s.now += 1_000) c.check();
    assert.equal(s.gcs, 0);
  });

  it('limitYoungGeneration keeps the new space from growing under allocation', () => {
    const newSpace = (): number => getHeapSpaceStatistics().find((x) => x.space_name === 'new_space')?.space_size ?? 0;
    const before = newSpace();
    assert.equal(limitYoungGeneration(), true);
    let keep: unknown[] = [];
    for (let round = 0; round < 40; round++) {
      const batch: { i: number; s: string }[] = [];
      for (let i = 0; i < 50_000; i++) batch.push({ i, s: `v${i}` });
      keep = batch.slice(0, 1000);
    }
    assert.ok(keep.length > 0);
    assert.ok(newSpace() <= Math.max(before, 2 * 1024 * 1024), `new space ${newSpace()} bytes, was ${before}`);
  });

  it('exposeGc gives a function that runs', () => {
    const gc = exposeGc();
    assert.equal(typeof gc, 'function');
    gc?.();
  });
});
