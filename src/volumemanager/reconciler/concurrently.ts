/**
 * Runs `fn` over `items` with at most `limit` calls in flight; the results keep the items' order.
 * Reconstruction reads a thousand pod directories and volume data files at start: one awaited
 * file system call at a time leaves the thread pool idle while readiness waits.
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

/** How many reconstruction reads run at once (libuv's thread pool has four threads by default). */
export const RECONSTRUCTION_CONCURRENCY = 16;
