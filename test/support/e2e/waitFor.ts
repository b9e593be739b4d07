/**
 * Bounded waiting for the e2e harness. {@link waitFor} is the one place polling is allowed: it
 * waits for a real process (an agent, a driver, the kernel) to reach a state. Everything else
 * awaits an event, always with a bound ({@link withTimeout}), and a timeout always says what was
 * awaited and what was last seen.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { inspect } from 'node:util';

/** A bounded wait ran out. `what` is what was awaited; `lastState` what was seen last. */
export class WaitTimeoutError extends Error {
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
    readonly lastState?: string,
  ) {
    super(`timed out after ${timeoutMs} ms waiting for ${what}${lastState === undefined ? '' : `; last observed: ${lastState}`}`);
    this.name = 'WaitTimeoutError';
  }
}

export const DEFAULT_WAIT_TIMEOUT_MS = 10_000;
export const DEFAULT_WAIT_INTERVAL_MS = 50;
/** Longest rendering of an observed state kept in an error message. */
const MAX_STATE_CHARS = 2000;

export interface WaitForOptions {
  /** What is awaited, for the error message: "the agent to stage vol-1". */
  readonly what: string;
  /** Default 10 s. */
  readonly timeoutMs?: number;
  /** Pause between two evaluations of the condition; default 50 ms. */
  readonly intervalMs?: number;
  /**
   * Describes the state at timeout (e.g. reads the journal); its result replaces the condition's
   * last value in the message. Bounded too: it gets at most 2 s.
   */
  readonly observe?: () => unknown;
}

/** Renders any observed value for a message, shortened. */
export function describeState(value: unknown): string {
  const text =
    typeof value === 'string'
      ? value
      : value instanceof Error
        ? `${value.name}: ${value.message}`
        : inspect(value, { depth: 6, breakLength: Infinity, maxArrayLength: 50, maxStringLength: 500 });
  return text.length > MAX_STATE_CHARS ? `${text.slice(0, MAX_STATE_CHARS)}… (${text.length} chars)` : text;
}

/**
 * Evaluates `cond` until it returns a truthy value, and resolves to that value. A condition
 * that throws counts as "not yet" (its error is the last observed state); one that hangs is cut
 * off by the deadline. Rejects with {@link WaitTimeoutError} after `timeoutMs`:
 * "timed out after N ms waiting for <what>; last observed: <state>".
 */
export async function waitFor<T>(cond: () => T | Promise<T>, options: WaitForOptions): Promise<Exclude<T, false | null | undefined | 0 | ''>> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS;
  const intervalMs = options.intervalMs ?? DEFAULT_WAIT_INTERVAL_MS;
  const deadline = Date.now() + timeoutMs;
  let last: unknown = '(the condition was never evaluated)';
  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) break;
    try {
      const value = await withTimeout(Promise.resolve().then(cond), remaining, `the condition for ${options.what}`);
      if (value) return value as Exclude<T, false | null | undefined | 0 | ''>;
      last = value;
    } catch (err) {
      last = err instanceof WaitTimeoutError ? `the condition itself did not settle within ${remaining} ms` : err;
    }
    const pause = Math.min(intervalMs, deadline - Date.now());
    if (pause <= 0) break;
    await sleep(pause);
  }
  if (options.observe !== undefined) {
    try {
      last = await withTimeout(Promise.resolve().then(options.observe), 2000, `the state of ${options.what}`);
    } catch (err) {
      last = `(could not observe the state: ${describeState(err)}; the condition last returned ${describeState(last)})`;
    }
  }
  throw new WaitTimeoutError(options.what, timeoutMs, describeState(last));
}

/**
 * Settles like `promise`, or rejects with {@link WaitTimeoutError} naming `what` after
 * `timeoutMs`. The timer never outlives the race.
 */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string, lastState?: () => string | undefined): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new WaitTimeoutError(what, timeoutMs, lastState?.())), Math.max(0, timeoutMs));
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(describeState(err)));
      },
    );
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
