/**
 * Gives memory back once the agent goes idle. Bringing up 1,000 volumes leaves the V8 heap grown
 * with garbage that the young-generation collections of an idle process never reclaim: a quiet
 * agent would hold it for ever. Once nothing changed for {@link IDLE_AFTER_MS} (the volume
 * manager's states and the cluster objects stand still) and the committed heap (V8's
 * heapTotal: live objects plus the pages V8 keeps) grew by at least {@link MIN_GROWTH_BYTES}
 * since the last compaction, two full collections run: the first compacts the old space, the
 * second frees the pages the first evacuated (after one, a 1,000-volume heap still held them
 * resident). It costs a few tens of milliseconds, once per busy period, never while anything is
 * changing. Committed, not used, bytes are the signal: a major collection of its own can shrink
 * the used heap while the pages stay resident.
 *
 * The collection is V8's `gc()`, exposed at start with v8.setFlagsFromString('--expose-gc'); if
 * that is not possible, nothing is done.
 *
 * {@link limitYoungGeneration} keeps V8's young generation at its initial size: left to grow
 * under the allocation of a busy period, its two semi-spaces reach 16 MB each and stay resident
 * for the life of the process (no collection shrinks them).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How long nothing must change before the heap is compacted. */
export const IDLE_AFTER_MS = 5_000;
/** Growth of the committed heap since the last compaction below which nothing is done. */
export const MIN_GROWTH_BYTES = 16 * 1024 * 1024;
/** How often the compactor looks. */
export const CHECK_PERIOD_MS = 1_000;

export interface IdleMemoryDeps {
  /** Changes whenever the agent did something (state generations, objects version). */
  readonly activity: () => string;
  /** Bytes of V8 heap committed (process.memoryUsage().heapTotal). */
  readonly heapTotal: () => number;
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
    this.#heapAfterLast = deps.heapTotal();
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
    if (this.deps.heapTotal() - this.#heapAfterLast < MIN_GROWTH_BYTES) {
      // Shrunk on its own: measure growth from there.
      this.#heapAfterLast = Math.min(this.#heapAfterLast, this.deps.heapTotal());
      return false;
    }
    // The first collection compacts; the pages it evacuated are given back by the second.
    this.deps.gc();
    this.deps.gc();
    this.#compactions++;
    this.#heapAfterLast = this.deps.heapTotal();
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

/**
 * Keeps the young generation at V8's initial semi-space size (1 MB each) for the rest of the
 * process: `--semi-space-growth-factor=1`, which V8 reads whenever the new space would grow.
 * Returns whether the flag could be set.
 */
export function limitYoungGeneration(): boolean {
  try {
    setFlagsFromString('--semi-space-growth-factor=1');
    return true;
  } catch {
    return false;
  }
}
