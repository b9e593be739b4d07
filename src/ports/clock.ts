/**
 * The Clock port: the engine's only source of time. Backoff, retry loops, reconciler periods,
 * the stuck-operation detector and every duration read `nowMs()` and wait with `sleep()`; the
 * real clock and the fake/simulated clocks implement it.
 *
 * Two clocks, as Go's time.Time carries two readings: `nowMs()` is monotonic and is the only one
 * any decision or duration may use; `wallMs()` is the wall clock, which an operator or NTP may
 * step back or forward by hours at any moment, and is only ever printed (log lines, the stuck
 * operations status file). Never subtract two `wallMs()` readings.
 */
export interface Clock {
  /**
   * Monotonic milliseconds: never goes back, and a change of the wall clock does not move it.
   * Its origin means nothing (the real clock counts from the process start): only differences of
   * two readings do.
   */
  nowMs(): number;
  /** Wall-clock milliseconds since the Unix epoch, for timestamps shown to people only. */
  wallMs(): number;
  /** Resolves after `ms` of this clock's (monotonic) time. */
  sleep(ms: number): Promise<void>;
}
