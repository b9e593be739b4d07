/**
 * The Clock port: the engine's only source of time. Backoff, retry loops and reconciler
 * periods read `nowMs()` and wait with `sleep()`; the real clock and the fake/simulated clocks
 * implement it.
 */
export interface Clock {
  /** Monotonic milliseconds. */
  nowMs(): number;
  /** Resolves after `ms` of this clock's time. */
  sleep(ms: number): Promise<void>;
}
