/**
 * The simulator's seeded PRNG (mulberry32): one 32-bit state, so a seed replays a run exactly.
 * Every choice of the scheduler comes from here; nothing in the simulator reads Math.random.
 */
export class Prng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** A derived seed (for a sub-stream such as the second crash of depth 2). */
  fork(): number {
    return Math.floor(this.next() * 4294967296) >>> 0;
  }
}

/** FNV-1a over a string, as 8 hex digits: cheap, stable hashes of traces and world states. */
export function fnv1a(s: string, h = 0x811c9dc5): string {
  let x = h >>> 0;
  for (let i = 0; i < s.length; i++) {
    x ^= s.charCodeAt(i);
    x = Math.imul(x, 0x01000193) >>> 0;
  }
  return x.toString(16).padStart(8, '0');
}

/** FNV-1a state `x` fed the characters of `s`. */
function feed(x: number, s: string): number {
  for (let i = 0; i < s.length; i++) {
    x ^= s.charCodeAt(i);
    x = Math.imul(x, 0x01000193) >>> 0;
  }
  return x;
}

/** FNV-1a state `x` fed the decimal text of `n` (as `${n}` writes it). */
function feedNumber(x: number, n: number): number {
  if (!Number.isSafeInteger(n) || n < 0) return feed(x, String(n));
  let div = 1;
  while (div * 10 <= n) div *= 10;
  for (; div >= 1; div /= 10) {
    const digit = Math.floor(n / div) % 10;
    x ^= 48 + digit;
    x = Math.imul(x, 0x01000193) >>> 0;
  }
  return x;
}

const BAR = 0x7c;

/** A running FNV-1a hash fed piece by piece. */
export class RunningHash {
  #h = 0x811c9dc5;

  add(s: string): void {
    this.#end(feed(this.#h, s));
  }

  /** add() of a, b and c joined by "|", without building the string (a simulator step hashes one per event). */
  add3(a: number, b: string, c: string): void {
    this.#end(feed(this.#head3(a, b), c));
  }

  /** add3() of a, b and c followed by the decimal text of n (a port call's event: its label and seq). */
  add3n(a: number, b: string, c: string, n: number): void {
    this.#end(feedNumber(feed(this.#head3(a, b), c), n));
  }

  /** The state after `a|b|` (add3's first two pieces). */
  #head3(a: number, b: string): number {
    const x = Math.imul(feedNumber(this.#h, a) ^ BAR, 0x01000193) >>> 0;
    return Math.imul(feed(x, b) ^ BAR, 0x01000193) >>> 0;
  }

  /** add() of seq, "a.b", c and d joined by "|", without building the string (a port call's record). */
  addCall(seq: number, a: string, b: string, c: string, d: string): void {
    let x = feedNumber(this.#h, seq);
    x = Math.imul(x ^ BAR, 0x01000193) >>> 0;
    x = feed(x, a);
    x = Math.imul(x ^ 0x2e, 0x01000193) >>> 0;
    x = feed(x, b);
    x = Math.imul(x ^ BAR, 0x01000193) >>> 0;
    x = feed(x, c);
    x = Math.imul(x ^ BAR, 0x01000193) >>> 0;
    this.#end(feed(x, d));
  }

  /** Closes one piece: a newline. */
  #end(x: number): void {
    x ^= 0x0a;
    this.#h = Math.imul(x, 0x01000193) >>> 0;
  }

  hex(): string {
    return this.#h.toString(16).padStart(8, '0');
  }
}
