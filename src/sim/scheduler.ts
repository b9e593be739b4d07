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
  /** When set, the event's label is `label` followed by this number (a port call's `fs.lstat #` and its seq: no string built per call). */
  readonly labelSeq: number | undefined;
  readonly due: number;
  readonly run: () => void | Promise<void>;
}

/**
 * After each event the harness lets the engine's microtasks settle, so the engine runs until it
 * waits on a port again (simulation.ts: the run's drain). The engine in the simulator waits on
 * nothing but its fenced ports (no timer, no I/O of the host), so its work after an event is all
 * microtasks: a tick queued from a microtask runs once V8's microtask queue is empty, which is
 * the engine waiting again. That costs a fraction of a macrotask turn; a real turn every this
 * many events keeps the rest of the process (progress output, a worker's messages) served.
 * Which events get one depends only on their count, never on the host.
 */
export const MACRO_TURN_EVERY = 64;

export class Scheduler {
  now = 0;
  #nextId = 0;
  #ready: SimEvent[] = [];
  /**
   * Queued timers sorted by (due, id): the ones due now are a prefix, found without a scan, in
   * the order the PRNG picks among (what a filter and sort of every timer at each step gave).
   */
  #timers: SimEvent[] = [];

  constructor(private readonly rng: Prng) {}

  ready(domain: Domain, kind: TraceEventKind, label: string, run: () => void | Promise<void>, labelSeq?: number): void {
    this.#ready.push({ id: this.#nextId++, domain, kind, label, labelSeq, due: this.now, run });
  }

  /** Queues `run` at now + delayMs; returns the event's id (for {@link cancel}). */
  timer(domain: Domain, delayMs: number, kind: TraceEventKind, label: string, run: () => void | Promise<void>, labelSeq?: number): number {
    const id = this.#nextId++;
    const due = this.now + Math.max(0, delayMs);
    // Ids grow: a new timer goes after every queued one due no later than it.
    const timers = this.#timers;
    let lo = 0;
    let hi = timers.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((timers[mid] as SimEvent).due <= due) lo = mid + 1;
      else hi = mid;
    }
    const ev: SimEvent = { id, domain, kind, label, labelSeq, due, run };
    if (lo === timers.length) timers.push(ev);
    else timers.splice(lo, 0, ev);
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
    const timers = this.#timers;
    const ready = this.#ready;
    if (ready.length === 0) {
      const first = timers[0];
      if (first === undefined) return undefined;
      // Nothing due now: the clock jumps to the earliest timer.
      if (first.due > this.now) this.now = first.due;
    }
    // The candidates are the ready events in order, then the timers due now in (due, id) order.
    let due = 0;
    while (due < timers.length && (timers[due] as SimEvent).due <= this.now) due++;
    const count = ready.length + due;
    if (count === 0) return undefined;
    const k = count === 1 ? 0 : this.rng.int(count);
    return k < ready.length ? takeAt(ready, k) : takeAt(timers, k - ready.length);
  }
}

/** Removes and returns `list[i]`, keeping the order of the rest (splice without its result array). */
function takeAt(list: SimEvent[], i: number): SimEvent | undefined {
  const ev = list[i];
  if (ev === undefined) return undefined;
  const last = list.length - 1;
  for (let j = i; j < last; j++) list[j] = list[j + 1] as SimEvent;
  list.length = last;
  return ev;
}
