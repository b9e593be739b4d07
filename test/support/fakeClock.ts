/**
 * A virtual {@link Clock} for tests and the simulator. Time only moves when the HARNESS calls
 * {@link FakeClock.advance} or {@link FakeClock.runUntilIdle}; the engine just reads `nowMs()` and
 * awaits `sleep()` like it would on the real clock, and never drives this class itself.
 *
 * Sleepers wake in order of (due time, order of the sleep() calls). After each wake-up the clock
 * lets the event loop turn (a real setImmediate, allowed here because test/support is not an
 * engine folder) so that everything the woken code does on microtasks — including new sleeps —
 * happens before time moves on.
 *
 * With `autoAdvance`, sleep() itself moves time forward and resolves at once: for code under test
 * that retries with sleeps (mount-ref retries, recover's waits) and has no harness driving time.
 *
 * Its wall clock (`wallMs()`) is the virtual time plus an offset that only {@link FakeClock.stepWall}
 * changes, as an operator or NTP stepping the machine's clock would: the monotonic time does not
 * move, and no sleeper wakes.
 *
 * This is the one fake Clock of the test suite; every test that needs virtual time uses it.
 */
import type { Clock } from '../../src/ports/clock.js';

interface Sleeper {
  readonly dueMs: number;
  readonly seq: number;
  readonly resolve: () => void;
}

export interface FakeClockOptions {
  /** Virtual time at construction (default 0). */
  readonly startMs?: number;
  /** wallMs() - nowMs() at construction (default 0: the wall clock reads the virtual time). */
  readonly wallOffsetMs?: number;
  /** Event-loop turns to let pass after each wake-up (default 1). */
  readonly settleTurns?: number;
  /** sleep(ms) moves time forward by ms and resolves at once; nobody calls advance(). */
  readonly autoAdvance?: boolean;
}

function realTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

export class FakeClock implements Clock {
  #now: number;
  #wallOffsetMs: number;
  #seq = 0;
  #sleepers: Sleeper[] = [];
  readonly #settleTurns: number;
  readonly #autoAdvance: boolean;
  /** Every sleep() call with a positive delay, in order (ms asked for). */
  readonly sleeps: number[] = [];
  /** advance/runUntilIdle calls run one after the other. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: FakeClockOptions = {}) {
    this.#now = options.startMs ?? 0;
    this.#wallOffsetMs = options.wallOffsetMs ?? 0;
    this.#settleTurns = Math.max(1, options.settleTurns ?? 1);
    this.#autoAdvance = options.autoAdvance ?? false;
  }

  nowMs(): number {
    return this.#now;
  }

  wallMs(): number {
    return this.#now + this.#wallOffsetMs;
  }

  /** Steps the wall clock by `deltaMs` (negative: back), as `date -s` would. Monotonic time stays. */
  stepWall(deltaMs: number): void {
    this.#wallOffsetMs += deltaMs;
  }

  /** Resolves once virtual time reaches now + ms. A zero, negative or NaN delay resolves at once. */
  sleep(ms: number): Promise<void> {
    if (!(ms > 0)) return Promise.resolve();
    this.sleeps.push(ms);
    if (this.#autoAdvance) {
      this.#now += ms;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      this.#sleepers.push({ dueMs: this.#now + ms, seq: this.#seq++, resolve });
    });
  }

  /** How many sleep() calls are waiting. */
  pendingSleeps(): number {
    return this.#sleepers.length;
  }

  /** When the next sleeper is due, if any. */
  nextDueMs(): number | undefined {
    return this.#next()?.dueMs;
  }

  /**
   * Moves time forward by `ms`, waking every sleeper due by then in (due, sequence) order, each
   * at its own due time, settling the event loop after each one (sleeps made by woken code are
   * honoured if they fall due within the window). Ends with time at exactly now + ms.
   */
  advance(ms: number): Promise<void> {
    return this.#serial(async () => {
      await this.settle();
      await this.#advanceTo(this.#now + Math.max(0, ms));
    });
  }

  /**
   * Advances to each next due sleeper until none is pending, without moving more than `maxMs`
   * past the time at the call. Resolves true when idle, false when stopped by `maxMs` (time then
   * stands at start + maxMs).
   */
  runUntilIdle(maxMs: number): Promise<boolean> {
    return this.#serial(async () => {
      const limit = this.#now + Math.max(0, maxMs);
      await this.settle();
      for (;;) {
        const next = this.#next();
        if (next === undefined) return true;
        if (next.dueMs > limit) {
          await this.#advanceTo(limit);
          return false;
        }
        await this.#advanceTo(next.dueMs);
      }
    });
  }

  /** Lets the event loop turn so that pending microtasks run. Moves no virtual time. */
  async settle(): Promise<void> {
    for (let i = 0; i < this.#settleTurns; i++) await realTurn();
  }

  async #advanceTo(target: number): Promise<void> {
    for (;;) {
      const next = this.#next();
      if (next === undefined || next.dueMs > target) break;
      this.#sleepers = this.#sleepers.filter((s) => s !== next);
      if (next.dueMs > this.#now) this.#now = next.dueMs;
      next.resolve();
      await this.settle();
    }
    if (target > this.#now) this.#now = target;
  }

  #next(): Sleeper | undefined {
    let best: Sleeper | undefined;
    for (const s of this.#sleepers) {
      if (best === undefined || s.dueMs < best.dueMs || (s.dueMs === best.dueMs && s.seq < best.seq)) best = s;
    }
    return best;
  }

  #serial<T>(body: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(body, body);
    this.#queue = run.catch(() => undefined);
    return run;
  }
}
