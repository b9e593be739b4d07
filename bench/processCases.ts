/**
 * Bench helper: whole processes as bench cases. Each run spawns the command and waits for it to
 * exit; the time is the process's wall time as the user meets it (start-up included). Output is
 * discarded; an exit code outside the expected ones fails the bench (a broken setup, not a
 * slow one).
 *
 * Each process also reports its own CPU time (user + system, start-up included): a one-line
 * CommonJS preload (`node -r`) writes `process.cpuUsage()` to fd 3 when the process exits. On a
 * machine shared with other work, wall time includes waiting for a core; CPU time does not, so
 * CPU ratios are much steadier than wall ratios. Every process, floors included, gets the same
 * preload, so its small cost is on both sides of each ratio.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
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

/** What one run of a process case returns: its exit status and the CPU time it used. */
export interface ProcessResult {
  readonly status: number;
  /** User + system CPU time of the process, in ms (start-up included). */
  readonly cpuMs: number;
}

export interface ProcessCase {
  readonly name: string;
  readonly run: () => ProcessResult;
}

/** The preload that reports a process's CPU time on fd 3 at exit (CommonJS: loads before any ESM). */
const CPU_PRELOAD =
  "'use strict';process.on('exit',()=>{const u=process.cpuUsage();try{require('node:fs').writeSync(3,String(u.user+u.system));}catch{}});\n";

let preloadFile: string | undefined;

/** Writes the CPU preload into `dir` (the bench's temporary dir); process cases use it from then on. */
export function installCpuPreload(dir: string): void {
  const file = path.join(dir, 'nodevol-bench-cpu.cjs');
  writeFileSync(file, CPU_PRELOAD);
  preloadFile = file;
}

/** Whether `r` is what a process case returns (so the bench can record its CPU time). */
export function isProcessResult(r: unknown): r is ProcessResult {
  return typeof r === 'object' && r !== null && typeof (r as { cpuMs?: unknown }).cpuMs === 'number';
}

/** A case that runs `node <args>` and checks its exit code is one of `okCodes`. */
export function processCase(name: string, args: readonly string[], okCodes: readonly number[] = [0]): ProcessCase {
  return {
    name,
    run: () => {
      if (preloadFile === undefined) throw new Error('bench setup: installCpuPreload was not called');
      const r = spawnSync(process.execPath, ['-r', preloadFile, ...args], {
        stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
        encoding: 'utf8',
        maxBuffer: 64 << 20,
      });
      if (r.error !== undefined) throw r.error;
      if (r.status === null || !okCodes.includes(r.status)) {
        throw new Error(`bench setup: node ${args.join(' ')} exited ${String(r.status ?? r.signal)}: ${r.stderr.slice(-2000)}`);
      }
      const cpuUs = Number(r.output[3] ?? '');
      if (!Number.isFinite(cpuUs) || cpuUs <= 0) throw new Error(`bench setup: node ${args.join(' ')} reported no CPU time on fd 3`);
      return { status: r.status, cpuMs: cpuUs / 1000 };
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
