// /metrics is rendered at most once per period, one rendering at a time, whatever the number of
// requests; a source whose text changed drops the kept rendering (the audit's verdicts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MetricsRenderCache, type MetricsRendering } from '../../../src/agent/httpServer.js';

/** A source whose renderings complete when the test says so, each with the text it started from; counts them. */
class Source {
  renders = 0;
  text = 'a 1\n';
  private readonly finishers: ((error?: Error) => void)[] = [];

  readonly render = (): Promise<string> => {
    this.renders++;
    const text = this.text;
    return new Promise((resolve, reject) => {
      this.finishers.push((error) => (error === undefined ? resolve(text) : reject(error)));
    });
  };

  /** Completes the oldest rendering in progress (the newest with `newest`), or fails it. */
  finish(opts: { readonly error?: Error; readonly newest?: boolean } = {}): void {
    const f = opts.newest === true ? this.finishers.pop() : this.finishers.shift();
    assert.ok(f !== undefined, 'a rendering is in progress');
    f(opts.error);
  }
}

const text = (r: MetricsRendering): string => (r.ok ? r.body.toString() : `error: ${r.error}`);

describe('MetricsRenderCache', () => {
  it('requests during a rendering share it; within the period they get the same bytes; after it, one new rendering', async () => {
    let now = 0;
    const src = new Source();
    const cache = new MetricsRenderCache(src.render, 1_000, () => now);
    const during = [cache.get(), cache.get(), cache.get()];
    assert.equal(src.renders, 1, 'one rendering for three requests');
    src.finish();
    const [a, b, c] = await Promise.all(during);
    assert.ok(a !== undefined && b !== undefined && c !== undefined);
    assert.deepEqual([text(a), text(b), text(c)], ['a 1\n', 'a 1\n', 'a 1\n']);

    now = 999;
    src.text = 'a 2\n';
    const kept = await cache.get();
    assert.equal(src.renders, 1, 'nothing rendered within the period');
    assert.ok(kept.ok && a.ok && kept.body === a.body, 'the very same Buffer');

    now = 1_000;
    const next = cache.get();
    assert.equal(src.renders, 2, 'rendered again once the period is over');
    src.finish();
    assert.equal(text(await next), 'a 2\n');
  });

  it('the period runs from the end of a rendering, so a slow rendering cannot run back to back', async () => {
    let now = 0;
    const src = new Source();
    const cache = new MetricsRenderCache(src.render, 1_000, () => now);
    const first = cache.get();
    now = 5_000; // the rendering took 5 s
    src.finish();
    await first;
    now = 5_999;
    await cache.get();
    assert.equal(src.renders, 1);
  });

  it('a failed rendering is kept for the period as well, then tried again', async () => {
    let now = 0;
    const src = new Source();
    const cache = new MetricsRenderCache(src.render, 1_000, () => now);
    const failed = cache.get();
    src.finish({ error: new Error('collector broke') });
    assert.equal(text(await failed), 'error: Error: collector broke');
    now = 500;
    assert.equal(text(await cache.get()), 'error: Error: collector broke');
    assert.equal(src.renders, 1);
    now = 1_000;
    const retried = cache.get();
    src.finish();
    assert.equal(text(await retried), 'a 1\n');
    assert.equal(src.renders, 2);
  });

  it('invalidate(): the next request renders again, and a rendering started before it is not kept', async () => {
    let now = 0;
    const src = new Source();
    const cache = new MetricsRenderCache(src.render, 60_000, () => now);
    const first = cache.get();
    src.finish();
    await first;

    src.text = 'a 2\n';
    cache.invalidate();
    const old = cache.get();
    assert.equal(src.renders, 2, 'rendered again within the period');
    src.text = 'a 3\n';
    cache.invalidate(); // while that rendering is in progress
    const fresh = cache.get();
    assert.equal(src.renders, 3, 'a request after invalidate() does not join the rendering started before it');
    src.finish({ newest: true });
    assert.equal(text(await fresh), 'a 3\n');
    src.finish(); // the older rendering completes last: it must not replace the newer one
    assert.equal(text(await old), 'a 2\n', 'its own requests still get it');
    now = 1;
    assert.equal(text(await cache.get()), 'a 3\n');
    assert.equal(src.renders, 3);
  });
});
