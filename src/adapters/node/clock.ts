/** The real clock for the Clock port. */
import type { Clock } from '../../ports/clock.js';

export const realClock: Clock = {
  nowMs: () => Date.now(),
  sleep: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
};
