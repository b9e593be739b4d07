/**
 * The one CSI fault model: what a fault rule says, how it is written, how rules are matched to
 * calls. The simulator's scenarios (`fault:` steps), `nodevol mock-driver --faults FILE` and the
 * in-process fake driver all read and apply the same rules, so a counterexample found in the
 * simulator replays unchanged against the real mock driver process from the same faults file.
 *
 * A rule, as written (YAML or JSON):
 *
 *   method: NodeUnstageVolume   # any csi.v1 RPC
 *   volumeId: vol-1             # optional: only calls for this volume
 *   delay: 2s                   # optional: hold the call this long first (ms, s, m, h)
 *   hang: true                  # optional: never answer (until the driver restarts)
 *   hang: forever               # optional: a driver that never answers these calls: in the
 *                               #   simulator neither a restart of the driver nor clearFaults
 *                               #   ends the rule (its volumes are exempt from `converges`);
 *                               #   in nodevol mock-driver the same as hang: true
 *   code: UNAVAILABLE           # optional: fail with this gRPC code (name, or 1..16)
 *   afterEffect: true           # optional, with code: do the real work, then fail
 *   clientTimeout: 2m           # optional: answer DEADLINE_EXCEEDED after this long while the
 *                               #   work carries on at the driver (the volume stays busy)
 *   exit: true                  # optional: the driver process dies when the call arrives
 *   times: 2                    # optional: apply to this many matching calls (default: all)
 *
 * Matching: the first rule (in order) whose method (and volume id, when it has one) matches a
 * call and that still has `times` left applies to it, and `times` counts down. A call the driver
 * refuses as busy (ABORTED, a call for the same volume in flight) takes no rule.
 */
import { z } from 'zod';

import { CSI_RPCS_BY_SERVICE, GrpcStatus, grpcStatusName, type CsiRpcMethod, type GrpcStatusName } from '../ports/csi.js';

/** Every RPC a rule's `method` may name. */
export const CSI_FAULT_METHODS = [...CSI_RPCS_BY_SERVICE.Identity, ...CSI_RPCS_BY_SERVICE.Controller, ...CSI_RPCS_BY_SERVICE.Node] as const;
export type CsiFaultMethod = (typeof CSI_FAULT_METHODS)[number];

/** Upper bound of a delay or client timeout: a day (a longer hold is a hang). */
export const MAX_FAULT_DURATION_MS = 24 * 60 * 60 * 1000;

/** A rule as the engine applies it: durations in ms, the code as a number. */
export interface CsiFault {
  readonly method: CsiFaultMethod;
  readonly volumeId?: string;
  readonly delayMs?: number;
  readonly hang?: boolean;
  /** With hang: `hang: forever`, a rule nothing but its own `times` ends (not clearFaults, not a restart). */
  readonly forever?: true;
  readonly code?: number;
  readonly afterEffect?: boolean;
  readonly clientTimeoutMs?: number;
  readonly exit?: boolean;
  readonly times?: number;
}

const UNITS_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** `500ms`, `2s`, `3m`, `1h` → ms; undefined when `text` is not such a duration. */
export function parseFaultDuration(text: string): number | undefined {
  const m = /^(\d{1,9})(ms|s|m|h)$/.exec(text);
  if (m === null) return undefined;
  return Number(m[1]) * (UNITS_MS[m[2] ?? ''] ?? NaN);
}

/** ms → the shortest exact duration text (`180000` → `3m`). */
export function formatFaultDuration(ms: number): string {
  for (const unit of ['h', 'm', 's'] as const) {
    const per = UNITS_MS[unit] ?? 1;
    if (ms > 0 && ms % per === 0) return `${ms / per}${unit}`;
  }
  return `${ms}ms`;
}

const duration = z.string().transform((text, ctx) => {
  const ms = parseFaultDuration(text);
  if (ms === undefined || ms > MAX_FAULT_DURATION_MS) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: `must be a duration of at most 24h such as 500ms, 30s, 2m (got ${JSON.stringify(text)})` });
    return z.NEVER;
  }
  return ms;
});

const STATUS_NAMES = Object.keys(GrpcStatus).filter((n) => n !== 'OK') as [Exclude<GrpcStatusName, 'OK'>, ...Exclude<GrpcStatusName, 'OK'>[]];

/** Keys of earlier vocabularies, refused with the key to use instead. */
const RENAMED: Readonly<Record<string, string>> = {
  volume: 'volumeId (the volume handle)',
  delayMs: 'delay (a duration such as 500ms)',
  clientTimeoutMs: 'clientTimeout (a duration such as 2m)',
  timeoutKeepRunning: 'delay: 3m with clientTimeout: 2m',
};

const KEYS = ['method', 'volumeId', 'delay', 'hang', 'code', 'afterEffect', 'clientTimeout', 'exit', 'times'] as const;

/** The schema of one rule as written; its output is a {@link CsiFault}. */
export const csiFaultSchema = z
  .object({
    method: z.enum(CSI_FAULT_METHODS),
    volumeId: z.string().min(1).max(1024).optional(),
    delay: duration.optional(),
    hang: z.union([z.boolean(), z.literal('forever')]).optional(),
    code: z.union([z.enum(STATUS_NAMES), z.number().int().min(GrpcStatus.CANCELLED).max(GrpcStatus.UNAUTHENTICATED)]).optional(),
    afterEffect: z.boolean().optional(),
    clientTimeout: duration.optional(),
    exit: z.boolean().optional(),
    times: z.number().int().min(1).max(1_000_000).optional(),
  })
  .passthrough()
  .superRefine((r, ctx) => {
    for (const key of Object.keys(r)) {
      if ((KEYS as readonly string[]).includes(key)) continue;
      const instead = RENAMED[key];
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: [key], message: instead === undefined ? `unknown key (a rule has ${KEYS.join(', ')})` : `unknown key: use ${instead}` });
    }
    if (r.delay === undefined && r.code === undefined && r.hang !== true && r.hang !== 'forever' && r.exit !== true && r.clientTimeout === undefined) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'a rule needs at least one of delay, code, hang: true, hang: forever, exit: true, clientTimeout' });
    }
    if (r.afterEffect === true && r.code === undefined) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['afterEffect'], message: 'afterEffect needs a code' });
  })
  .transform((r): CsiFault => {
    const code = typeof r.code === 'string' ? GrpcStatus[r.code] : r.code;
    return {
      method: r.method,
      ...(r.volumeId === undefined ? {} : { volumeId: r.volumeId }),
      ...(r.delay === undefined ? {} : { delayMs: r.delay }),
      ...(r.hang === true ? { hang: true } : {}),
      ...(r.hang === 'forever' ? { hang: true, forever: true } : {}),
      ...(code === undefined ? {} : { code }),
      ...(r.afterEffect === true ? { afterEffect: true } : {}),
      ...(r.clientTimeout === undefined ? {} : { clientTimeoutMs: r.clientTimeout }),
      ...(r.exit === true ? { exit: true } : {}),
      ...(r.times === undefined ? {} : { times: r.times }),
    };
  });

/** A rule as written (what {@link csiFaultSchema} reads and {@link writtenFault} writes). */
export type CsiFaultInput = z.input<typeof csiFaultSchema>;

/** The faults file: `faults: [rule, ...]`. */
export const csiFaultsFileSchema = z.object({ faults: z.array(csiFaultSchema).default([]) }).strict();

/** A rule the way it is written back (YAML, scenario steps, faults files): the inverse of the schema. */
export function writtenFault(f: CsiFault): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = { method: f.method };
  if (f.volumeId !== undefined) out['volumeId'] = f.volumeId;
  if (f.delayMs !== undefined) out['delay'] = formatFaultDuration(f.delayMs);
  if (f.hang === true) out['hang'] = f.forever === true ? 'forever' : true;
  if (f.code !== undefined) out['code'] = grpcStatusName(f.code);
  if (f.afterEffect === true) out['afterEffect'] = true;
  if (f.clientTimeoutMs !== undefined) out['clientTimeout'] = formatFaultDuration(f.clientTimeoutMs);
  if (f.exit === true) out['exit'] = true;
  if (f.times !== undefined) out['times'] = f.times;
  return out;
}

/** A short text for logs: "NodeStageVolume volume=x delay=2s code=UNAVAILABLE times=2". */
export function describeCsiFault(f: CsiFault): string {
  const parts: string[] = [f.method];
  if (f.volumeId !== undefined) parts.push(`volume=${f.volumeId}`);
  if (f.exit === true) parts.push('exit');
  if (f.hang === true) parts.push(f.forever === true ? 'hang forever' : 'hang');
  if (f.delayMs !== undefined) parts.push(`delay=${formatFaultDuration(f.delayMs)}`);
  if (f.code !== undefined) parts.push(`code=${grpcStatusName(f.code)}${f.afterEffect === true ? ' after the effect' : ''}`);
  if (f.clientTimeoutMs !== undefined) parts.push(`clientTimeout=${formatFaultDuration(f.clientTimeoutMs)}`);
  if (f.times !== undefined) parts.push(`times=${f.times}`);
  return parts.join(' ');
}

/** The path of a zod issue as `faults[0].delay`. */
export function issuePath(path: readonly (string | number)[]): string {
  let out = '';
  for (const k of path) out += typeof k === 'number' ? `[${k}]` : out === '' ? k : `.${k}`;
  return out;
}

interface ActiveFault {
  readonly rule: CsiFault;
  /** The rule's text, to recognise it in a replacement set. */
  readonly key: string;
  remaining: number;
}

/** A handle on one added rule. */
export interface CsiFaultHandle {
  /** Stops the rule from applying to further calls. */
  remove(): void;
  /** How many matching calls it still applies to (0 once used up or removed). */
  remaining(): number;
}

/**
 * The rules in force and their counters: the one matcher the fake driver, the mock driver and the
 * simulator use.
 */
export class CsiFaultBook {
  /** Every rule in order, used up or not (a used-up rule keeps its place for replace()). */
  #rules: ActiveFault[] = [];

  /** Adds a rule after the others; returns a handle on it. */
  add(rule: CsiFault): CsiFaultHandle {
    const active: ActiveFault = { rule, key: ruleKey(rule), remaining: rule.times ?? Infinity };
    this.#rules.push(active);
    return {
      remove: () => {
        this.#rules = this.#rules.filter((a) => a !== active);
      },
      remaining: () => (this.#rules.includes(active) ? active.remaining : 0),
    };
  }

  /**
   * Replaces the rules with `rules` (a faults file read again). A rule that was already there, at
   * the same place among its equals, keeps its counter, so that appending a rule to a file does
   * not re-arm the ones before it; every other rule starts afresh.
   */
  replace(rules: readonly CsiFault[]): void {
    const previous = new Map<string, ActiveFault[]>();
    for (const a of this.#rules) {
      const list = previous.get(a.key) ?? [];
      list.push(a);
      previous.set(a.key, list);
    }
    this.#rules = rules.map((rule) => {
      const key = ruleKey(rule);
      const kept = previous.get(key)?.shift();
      return { rule, key, remaining: kept?.remaining ?? rule.times ?? Infinity };
    });
  }

  /** The rule that applies to this call, its `times` counted down; undefined when none. */
  take(method: string, volumeId: string): CsiFault | undefined {
    const active = this.#rules.find((a) => a.remaining > 0 && a.rule.method === method && (a.rule.volumeId === undefined || a.rule.volumeId === volumeId));
    if (active === undefined) return undefined;
    active.remaining -= 1;
    return active.rule;
  }

  /** Removes every rule (`keep`: but those it keeps, with their counters). */
  clear(keep?: (rule: CsiFault) => boolean): void {
    this.#rules = keep === undefined ? [] : this.#rules.filter((a) => keep(a.rule));
  }

  /** The rules, with how many matching calls each still applies to. */
  rules(): { readonly rule: CsiFault; readonly remaining: number }[] {
    return this.#rules.map((a) => ({ rule: a.rule, remaining: a.remaining }));
  }

  /** Every rule's written form and counter, in order: what a driver keeps across its restarts. */
  counters(): { readonly rule: string; readonly remaining: number | null }[] {
    return this.#rules.map((a) => ({ rule: a.key, remaining: Number.isFinite(a.remaining) ? a.remaining : null }));
  }

  /**
   * Gives the rules the counters `saved` kept (from {@link counters}): each saved counter goes to
   * the next rule with the same written form, in order; a rule no counter names keeps its own.
   */
  restoreCounters(saved: readonly { readonly rule: string; readonly remaining: number | null }[]): void {
    const byKey = new Map<string, (number | null)[]>();
    for (const c of saved) {
      const list = byKey.get(c.rule) ?? [];
      list.push(c.remaining);
      byKey.set(c.rule, list);
    }
    for (const a of this.#rules) {
      const next = byKey.get(a.key)?.shift();
      if (next !== undefined) a.remaining = next ?? Infinity;
    }
  }

  /** How many rules still apply to a call. */
  get size(): number {
    return this.#rules.filter((a) => a.remaining > 0).length;
  }
}

function ruleKey(rule: CsiFault): string {
  return JSON.stringify(writtenFault(rule));
}

/** Whether a method is one a rule may name. */
export function isCsiFaultMethod(method: string): method is CsiFaultMethod {
  return (CSI_FAULT_METHODS as readonly string[]).includes(method);
}

export type { CsiRpcMethod };
