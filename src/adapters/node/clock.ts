/** The real clock for the SleepClock port. */
import type { SleepClock } from '../../mount/mountRefs.js';

export const realClock: SleepClock = {
  nowMs: () => Date.now(),
  sleep: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
};
