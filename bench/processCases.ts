/**
 * Bench helper: whole processes as bench cases. Each run spawns the command and waits for it to
 * exit; the time is the process's wall time as the user meets it (start-up included). Output is
 * discarded; an exit code outside the expected ones fails the bench (a broken setup, not a
 * slow one).
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

/** Where the built CLI and the floor script are. */
export interface ProcessPaths {
  readonly bin: string;
  readonly floorScript: string;
}

/** dist/bench/ -> the repo root's bin/nodevol.js and dist/bench/floorScript.js. */
export function processPaths(benchDir: string): ProcessPaths {
  return {
    bin: path.resolve(benchDir, '..', '..', 'bin', 'nodevol.js'),
    floorScript: path.join(benchDir, 'floorScript.js'),
  };
}

export interface ProcessCase {
  readonly name: string;
  readonly run: () => number;
}

/** A case that runs `node <args>` and checks its exit code is one of `okCodes`. */
export function processCase(name: string, args: readonly string[], okCodes: readonly number[] = [0]): ProcessCase {
  return {
    name,
    run: () => {
      const r = spawnSync(process.execPath, [...args], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', maxBuffer: 64 << 20 });
      if (r.error !== undefined) throw r.error;
      if (r.status === null || !okCodes.includes(r.status)) {
        throw new Error(`bench setup: node ${args.join(' ')} exited ${String(r.status ?? r.signal)}: ${r.stderr.slice(-2000)}`);
      }
      return r.status;
    },
  };
}

/**
 * The audit of a node as a whole process (`nodevol audit -o json`, exit 0 or 1: 1 means it found
 * something orphaned, which the synthetic nodes may well have) and its floor process.
 */
export function processCasesFor(prefix: string, paths: ProcessPaths, rootDir: string, mountinfo: string): ProcessCase[] {
  return [
    processCase(`${prefix}-audit`, [paths.bin, 'audit', '--root-dir', rootDir, '--mountinfo', mountinfo, '-o', 'json'], [0, 1]),
    processCase(`${prefix}-floor`, [paths.floorScript, rootDir, mountinfo]),
  ];
}
