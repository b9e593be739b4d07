/**
 * Two concurrency helpers shared by the engine and the adapters (no I/O of their own, no clock).
 */

/**
 * Runs `fn` over `items` with at most `limit` calls in flight; the results keep the items' order.
 * A rejection rejects the whole (calls already started run to their end).
 */
export async function mapConcurrently<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
  return results;
}

/**
 * A call that concurrent callers share, each still answered by a call *started after it asked*:
 * while one call runs, every new caller waits for the single call that starts when it settles.
 * A thousand callers at once then cost two calls, not a thousand; an error reaches every caller
 * that shared the call; nothing is kept once a call settled. Used for the mount table reads and
 * NodeGetCapabilities, whose answers must be fresh but are read-only.
 */
export class FreshSharedCall<T> {
  #running: Promise<T> | undefined;
  #queued: Promise<T> | undefined;

  constructor(private readonly start: () => Promise<T>) {}

  call(): Promise<T> {
    if (this.#running === undefined) return this.#startCall();
    this.#queued ??= this.#running.then(
      () => this.#startQueued(),
      () => this.#startQueued(),
    );
    return this.#queued;
  }

  #startQueued(): Promise<T> {
    this.#queued = undefined;
    return this.#startCall();
  }

  #startCall(): Promise<T> {
    const call = this.start();
    this.#running = call;
    const done = (): void => {
      if (this.#running === call) this.#running = undefined;
    };
    call.then(done, done);
    return call;
  }
}
