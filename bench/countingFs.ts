/**
 * Bench helper: wraps a FileSystem so that every method call is recorded: how many calls, how
 * many rejected, and the time spent waiting for them. Meant for one untimed diagnostic run: the
 * bookkeeping itself costs a little.
 *
 * A Proxy rather than a class implementing the port, so that the wrapper follows the port as it
 * grows. Each call is also attributed to the function that made it (from a stack trace: slow,
 * hence diagnostic runs only). The audit awaits its file system calls one after another, so the summed durations are
 * the wall time it spends in the file system; what is left of its wall time is its own work.
 */
import type { FileSystem } from '../src/ports/fs.js';

export interface OpStats {
  calls: number;
  errors: number;
  /** Summed latency, nanoseconds. */
  ns: bigint;
}

export interface CountingFileSystem {
  readonly fs: FileSystem;
  readonly ops: Map<string, OpStats>;
  /** "<method> <- <calling function> (<file>:<line>)" -> number of calls. */
  readonly sites: Map<string, number>;
  /** Time spent on the wrapper's own bookkeeping (finding call sites), nanoseconds. */
  overheadNs(): bigint;
}

/** The first stack frame outside this wrapper and the FileSystem adapter: who made the call. */
function callSite(stack: string | undefined): string {
  for (const line of (stack ?? '').split('\n').slice(1)) {
    const m = /^\s*at (?:async )?(?:(\S+) \()?(.*?):(\d+):\d+\)?$/.exec(line);
    if (m === null) continue;
    const file = m[2] ?? '';
    if (file.endsWith('/countingFs.js') || file.includes('/adapters/') || file.startsWith('node:')) continue;
    return `${m[1] ?? '<anonymous>'} (${file.slice(file.lastIndexOf('/') + 1)}:${m[3] ?? '?'})`;
  }
  return '<unknown>';
}

export function countingFileSystem(inner: FileSystem): CountingFileSystem {
  const ops = new Map<string, OpStats>();
  const sites = new Map<string, number>();
  let overhead = 0n;
  const statsFor = (op: string): OpStats => {
    let stats = ops.get(op);
    if (stats === undefined) {
      stats = { calls: 0, errors: 0, ns: 0n };
      ops.set(op, stats);
    }
    return stats;
  };
  const fs = new Proxy(inner, {
    get(target, prop, receiver): unknown {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function' || typeof prop !== 'string') return value;
      return async (...args: unknown[]): Promise<unknown> => {
        const b0 = process.hrtime.bigint();
        const stats = statsFor(prop);
        stats.calls++;
        const site = `${prop} <- ${callSite(new Error().stack)}`;
        sites.set(site, (sites.get(site) ?? 0) + 1);
        overhead += process.hrtime.bigint() - b0;
        const t0 = process.hrtime.bigint();
        try {
          return (await Reflect.apply(value, target, args)) as unknown;
        } catch (err) {
          stats.errors++;
          throw err;
        } finally {
          stats.ns += process.hrtime.bigint() - t0;
        }
      };
    },
  });
  return { fs, ops, sites, overheadNs: () => overhead };
}

/** Summed latency of every recorded call, nanoseconds. */
export function totalNs(ops: ReadonlyMap<string, OpStats>): bigint {
  let total = 0n;
  for (const s of ops.values()) total += s.ns;
  return total;
}

/** Number of recorded calls. */
export function totalCalls(ops: ReadonlyMap<string, OpStats>): number {
  let total = 0;
  for (const s of ops.values()) total += s.calls;
  return total;
}
