/**
 * The real clock for the Clock port. Durations, deadlines and backoff read the monotonic clock
 * (`performance.now()`, CLOCK_MONOTONIC: a step of the wall clock does not move it) and sleeps are
 * timers (libuv's loop time is monotonic too); only `wallMs()` reads the wall clock, for the
 * timestamps the engine prints.
 */
import type { Clock } from '../../ports/clock.js';

export const realClock: Clock = {
  nowMs: () => performance.now(),
  wallMs: () => Date.now(),
  sleep: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
};
