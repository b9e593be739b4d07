/**
 * The simulator's scheduler: it owns every completion of a run. An engine port call, a CSI
 * answer, a timer of the agent's loops, a driver's delay, a client deadline: each is an event
 * queued here in a domain (an engine life, the driver's process, the world), and nothing
 * happens until the seeded PRNG picks it among the events due now. Time is virtual: when nothing
 * is ready, the clock jumps to the next timer. A crash drops a domain: none of its events runs.
 */
import type { TraceEventKind } from '../trace/simTrace.js';
import type { Prng } from './prng.js';

/** Who an event belongs to: `life:N` (an engine life), `driver:N` (a driver process epoch), `world`. */
export type Domain = string;

export interface SimEvent {
  readonly id: number;
  readonly domain: Domain;
  readonly kind: TraceEventKind;
  readonly label: string;
  readonly due: number;
  readonly run: () => void | Promise<void>;
}

/**
 * One macrotask turn: after each event the harness lets the engine's microtasks settle, so the
 * engine runs until it waits on a port again.
 */
export function macroTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

export class Scheduler {
  now = 0;
  #nextId = 0;
  #ready: SimEvent[] = [];
  #timers: SimEvent[] = [];

  constructor(private readonly rng: Prng) {}

  ready(domain: Domain, kind: TraceEventKind, label: string, run: () => void | Promise<void>): void {
    this.#ready.push({ id: this.#nextId++, domain, kind, label, due: this.now, run });
  }

  /** Queues `run` at now + delayMs; returns the event's id (for {@link cancel}). */
  timer(domain: Domain, delayMs: number, kind: TraceEventKind, label: string, run: () => void | Promise<void>): number {
    const id = this.#nextId++;
    this.#timers.push({ id, domain, kind, label, due: this.now + Math.max(0, delayMs), run });
    return id;
  }

  /** Removes a queued timer (a no-op once it ran or was dropped). */
  cancel(id: number): void {
    const i = this.#timers.findIndex((t) => t.id === id);
    if (i >= 0) this.#timers.splice(i, 1);
  }

  drop(domain: Domain): void {
    this.#ready = this.#ready.filter((e) => e.domain !== domain);
    this.#timers = this.#timers.filter((e) => e.domain !== domain);
  }

  hasReady(domainPrefix: string): boolean {
    return this.#ready.some((e) => e.domain.startsWith(domainPrefix));
  }

  /** The next event, chosen by the PRNG among everything due now; advances time when nothing is. */
  next(): SimEvent | undefined {
    if (this.#ready.length === 0) {
      const due = this.#timers.filter((t) => t.due <= this.now);
      if (due.length === 0) {
        let min = Infinity;
        for (const t of this.#timers) if (t.due < min) min = t.due;
        if (min === Infinity) return undefined;
        this.now = min;
      }
    }
    const candidates = [...this.#ready, ...this.#timers.filter((t) => t.due <= this.now).sort((a, b) => a.due - b.due || a.id - b.id)];
    if (candidates.length === 0) return undefined;
    const pick = candidates.length === 1 ? candidates[0] : candidates[this.rng.int(candidates.length)];
    if (pick === undefined) return undefined;
    const i = this.#ready.indexOf(pick);
    if (i >= 0) this.#ready.splice(i, 1);
    else this.#timers.splice(this.#timers.indexOf(pick), 1);
    return pick;
  }
}
