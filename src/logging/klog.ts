/**
 * klog-compatible output for the Logger port: the text format
 * (`Lmmdd hh:mm:ss.uuuuuu threadid file:line] "msg" key="value"`) and the JSON format of
 * component-base/logs/json (`ts` in epoch milliseconds as a float, what its epochMillisTimeEncoder
 * writes, here always with three decimals; `caller`, `msg`, `v`, `err`, then the key/value pairs). `file:line` names the source
 * file when a resolver maps the running JavaScript back to it (KlogOptions.resolveCaller). Selected with kubelet's `--logging-format=text|json`, verbosity with `-v N`.
 */
import type { LogValues, Logger } from '../ports/logger.js';

export type LoggingFormat = 'text' | 'json';

export interface KlogOptions {
  readonly format: LoggingFormat;
  /** kubelet -v */
  readonly verbosity: number;
  /** Receives one complete line, without the trailing newline. */
  readonly sink: (line: string) => void;
  /** Wall clock for the header, in epoch milliseconds (may be fractional). */
  readonly nowMs: () => number;
  /** Printed as klog's thread id. */
  readonly pid: number;
  /**
   * Maps the calling frame's generated position (the JavaScript file, 1-based line and column)
   * to the source's "file.ts:line" (src/adapters/node/sourceMapCaller.ts); undefined keeps
   * "file.js:line". Without it the caller names the JavaScript that runs.
   */
  readonly resolveCaller?: (file: string, line: number, column: number) => string | undefined;
}

type Severity = 'I' | 'W' | 'E';

/** The clocks {@link preciseWallClock} reads. */
export interface WallClockSources {
  /** The wall clock in whole epoch milliseconds (Date.now). */
  readonly wallMs: () => number;
  /** A monotonic clock in fractional milliseconds (performance.now). */
  readonly monoMs: () => number;
  /** The epoch milliseconds, to the microsecond, that `monoMs() === 0` stands for (performance.timeOrigin). */
  readonly originMs: number;
}

/**
 * A wall clock in epoch milliseconds with a real microsecond fraction, for the header's
 * ".uuuuuu" and JSON's `ts`: Date.now() counts whole milliseconds only, so the time is the
 * monotonic clock from its origin (both to the microsecond). When the wall clock moves away from
 * that by a millisecond or more (a step, NTP slewing), the estimate follows it to its millisecond
 * and keeps the monotonic clock's sub-millisecond part: the fraction is never snapped to .000.
 */
export function preciseWallClock(sources: WallClockSources): () => number {
  let offset = sources.originMs;
  return () => {
    const mono = sources.monoMs();
    const wall = sources.wallMs();
    let t = offset + mono;
    // Date.now() is the true time rounded down: the estimate must lie in [wall, wall + 1).
    if (t < wall || t >= wall + 1) {
      t = wall + (t - Math.floor(t));
      offset = t - mono;
    }
    return t;
  };
}

/** {@link preciseWallClock} over Date.now, performance.now and performance.timeOrigin: the wall clock of every command's log. */
export const preciseWallClockMs: () => number = preciseWallClock({ wallMs: () => Date.now(), monoMs: () => performance.now(), originMs: performance.timeOrigin });

export function createKlogLogger(options: KlogOptions): Logger {
  return new KlogLogger(options, 0, new Map());
}

/** Most call sites whose resolved caller is kept (a program has far fewer). */
const MAX_CACHED_CALLERS = 10_000;

class KlogLogger implements Logger {
  constructor(
    private readonly options: KlogOptions,
    /** Verbosity of this logger's info lines; 0 for the root logger. */
    private readonly level: number,
    /** Resolved callers by frame (shared by the loggers of one root). */
    private readonly callers: Map<string, string>,
  ) {}

  info(msg: string, values?: LogValues): void {
    if (!this.enabled(this.level)) return;
    this.write('I', msg, undefined, values, this.caller(callerFrame()));
  }
  warning(msg: string, values?: LogValues): void {
    this.write('W', msg, undefined, values, this.caller(callerFrame()));
  }
  error(err: unknown, msg: string, values?: LogValues): void {
    this.write('E', msg, err === undefined || err === null ? undefined : errText(err), values, this.caller(callerFrame()));
  }
  v(level: number): Logger {
    return new KlogLogger(this.options, level, this.callers);
  }

  /** "file:line" of a frame, through the source map resolver when there is one; cached per frame. */
  private caller(frame: string): string {
    const cached = this.callers.get(frame);
    if (cached !== undefined) return cached;
    const m = /\(?((?:file:\/\/)?[^\s()]+):(\d+):(\d+)\)?\s*$/.exec(frame);
    let caller = '???:1';
    if (m !== null) {
      const file = m[1] ?? '';
      const line = Number(m[2]);
      const column = Number(m[3]);
      caller = this.options.resolveCaller?.(file, line, column) ?? `${basename(file)}:${line}`;
    }
    // A frame inside this file means the stack was not [callerFrame, the method, the caller].
    if (/^klog\.[jt]s:/.test(caller)) caller = '???:1';
    if (this.callers.size < MAX_CACHED_CALLERS) this.callers.set(frame, caller);
    return caller;
  }
  enabled(level: number): boolean {
    return level <= this.options.verbosity;
  }

  private write(sev: Severity, msg: string, err: string | undefined, values: LogValues | undefined, caller: string): void {
    const ts = this.options.nowMs();
    if (this.options.format === 'json') {
      const obj: Record<string, unknown> = { caller, msg };
      if (sev === 'I') obj['v'] = this.level;
      if (err !== undefined) obj['err'] = err;
      for (const [k, v] of Object.entries(values ?? {})) obj[k] = jsonValue(v);
      // ts first, always a float with its microseconds (JSON.stringify would write a whole
      // millisecond as an integer: one line's ts an integer, the next's a float).
      this.options.sink(`{"ts":${ts.toFixed(3)},${JSON.stringify(obj).slice(1)}`);
      return;
    }
    let line = `${sev}${textHeaderTime(ts)} ${String(this.options.pid).padStart(7, ' ')} ${caller}] ${quote(msg)}`;
    if (err !== undefined) line += ` err=${quote(err)}`;
    for (const [k, v] of Object.entries(values ?? {})) line += ` ${k}=${textValue(v)}`;
    this.options.sink(line);
  }
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** "mmdd hh:mm:ss.uuuuuu" in UTC. */
function textHeaderTime(ms: number): string {
  const d = new Date(Math.floor(ms));
  const p2 = (n: number): string => String(n).padStart(2, '0');
  const micros = Math.floor((ms - Math.floor(ms / 1000) * 1000) * 1000);
  return (
    `${p2(d.getUTCMonth() + 1)}${p2(d.getUTCDate())} ${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())}:${p2(d.getUTCSeconds())}` +
    `.${String(micros).padStart(6, '0')}`
  );
}

function quote(s: string): string {
  return JSON.stringify(s);
}

function textValue(v: unknown): string {
  if (typeof v === 'string') return quote(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (v === undefined || v === null) return '<nil>';
  if (v instanceof Error) return quote(v.message);
  return JSON.stringify(v);
}

function jsonValue(v: unknown): unknown {
  if (v instanceof Error) return v.message;
  if (typeof v === 'bigint') return v.toString();
  return v;
}

/**
 * The stack frame of the code that called the logging method (klog's caller). Called directly by
 * info, warning and error only, so the stack is always [callerFrame, the method, the caller]: just
 * those three frames are captured. A whole stack trace per line, formatted and searched, was most
 * of the cost of a log line.
 */
function callerFrame(): string {
  const holder: { stack?: string } = {};
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 3;
  try {
    Error.captureStackTrace(holder);
  } finally {
    Error.stackTraceLimit = limit;
  }
  const stack = holder.stack ?? '';
  return stack.slice(stack.lastIndexOf('\n') + 1);
}

/** The last path segment of a path or file URL. */
function basename(file: string): string {
  return file.slice(file.lastIndexOf('/') + 1);
}
