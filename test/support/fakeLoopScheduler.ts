// Fake time for the agent's runtime: a timer queue the test advances (shared by the runtime's
// idle and stop tests).
import type { LoopScheduler } from '../../src/agent/runtime.js';

interface Pending {
  readonly at: number;
  readonly seq: number;
  readonly label: string;
  readonly callback: () => void;
}

/** Timers on a fake clock: `advanceTo` runs every callback due by then, in time order (ties in the order set), letting promises settle between. */
export class FakeLoopScheduler implements LoopScheduler {
  now = 0;
  #seq = 0;
  readonly pending = new Map<number, Pending>();

  setTimeout(callback: () => void, ms: number, label?: string): unknown {
    const id = ++this.#seq;
    this.pending.set(id, { at: this.now + ms, seq: id, label: label ?? '', callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }

  /** The labels of the timers set and not yet run, sorted. */
  labels(): string[] {
    return [...this.pending.values()].map((p) => p.label).sort();
  }

  async advanceTo(t: number): Promise<void> {
    for (;;) {
      await settle();
      let next: [number, Pending] | undefined;
      for (const e of this.pending) if (e[1].at <= t && (next === undefined || e[1].at < next[1].at || (e[1].at === next[1].at && e[1].seq < next[1].seq))) next = e;
      if (next === undefined) break;
      this.pending.delete(next[0]);
      this.now = next[1].at;
      next[1].callback();
    }
    this.now = t;
    await settle();
  }
}

/** Lets every promise chain started so far run to completion (for fakes that never wait on I/O). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** A promise the test resolves when it chooses (an operation or a loop pass held in flight). */
export interface Deferred {
  readonly promise: Promise<void>;
  readonly resolve: () => void;
}

export function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
