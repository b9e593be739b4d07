/**
 * Gives memory back once the agent goes idle. Bringing up 1,000 volumes leaves the V8 heap grown
 * with garbage that the young-generation collections of an idle process never reclaim: a quiet
 * agent would hold it for ever. Once nothing changed for {@link IDLE_AFTER_MS} (the volume
 * manager's states and the cluster objects stand still) and the heap grew by at least
 * {@link MIN_GROWTH_BYTES} since the last compaction, one full, compacting collection runs. It
 * costs a few tens of milliseconds, once per busy period, never while anything is changing.
 *
 * The collection is V8's `gc()`, exposed at start with v8.setFlagsFromString('--expose-gc'); if
 * that is not possible, nothing is done.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How long nothing must change before the heap is compacted. */
export const IDLE_AFTER_MS = 5_000;
/** Heap growth since the last compaction below which nothing is done. */
export const MIN_GROWTH_BYTES = 32 * 1024 * 1024;
/** How often the compactor looks. */
export const CHECK_PERIOD_MS = 1_000;

export interface IdleMemoryDeps {
  /** Changes whenever the agent did something (state generations, objects version). */
  readonly activity: () => string;
  /** Bytes of V8 heap in use. */
  readonly heapUsed: () => number;
  /** A full, compacting collection. */
  readonly gc: () => void;
  /** Monotonic milliseconds. */
  readonly nowMs: () => number;
}

export class IdleMemoryCompactor {
  #lastActivity: string | undefined;
  #lastChangeMs: number;
  #heapAfterLast: number;
  #compactions = 0;

  constructor(private readonly deps: IdleMemoryDeps) {
    this.#lastChangeMs = deps.nowMs();
    this.#heapAfterLast = deps.heapUsed();
  }

  /** Compactions run so far. */
  get compactions(): number {
    return this.#compactions;
  }

  /** One look: compacts when idle long enough after enough growth. Returns whether it did. */
  check(): boolean {
    const now = this.deps.nowMs();
    const activity = this.deps.activity();
    if (activity !== this.#lastActivity) {
      this.#lastActivity = activity;
      this.#lastChangeMs = now;
      return false;
    }
    if (now - this.#lastChangeMs < IDLE_AFTER_MS) return false;
    if (this.deps.heapUsed() - this.#heapAfterLast < MIN_GROWTH_BYTES) {
      // Shrunk on its own (a major collection ran): measure growth from there.
      this.#heapAfterLast = Math.min(this.#heapAfterLast, this.deps.heapUsed());
      return false;
    }
    this.deps.gc();
    this.#compactions++;
    this.#heapAfterLast = this.deps.heapUsed();
    return true;
  }
}

/** V8's gc(), exposed for this process; undefined where it cannot be. */
export function exposeGc(): (() => void) | undefined {
  const existing = (globalThis as { gc?: unknown }).gc;
  if (typeof existing === 'function') return existing as () => void;
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('gc');
    return typeof gc === 'function' ? (gc as () => void) : undefined;
  } catch {
    return undefined;
  }
}
