/**
 * `npm run bench`'s driver: runs each bench script given on the command line (`node <script>`),
 * one after the other, every one of them even when an earlier one failed (a missed limit exits
 * 1), then prints which failed and exits 1 if any did. Usage:
 *   node dist/bench/runSteps.js dist/bench/bench.js dist/bench/explore.js dist/bench/agentScale.js
 */
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';

/** What one step gave: its exit code, or the signal that ended it. */
export interface StepResult {
  readonly script: string;
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Runs every script in order with the parent's stdio; never stops early. */
export function runSteps(scripts: readonly string[]): StepResult[] {
  return scripts.map((script) => {
    const r = spawnSync(process.execPath, [script], { stdio: 'inherit' });
    return { script, status: r.error === undefined ? r.status : null, signal: r.signal };
  });
}

/** The summary lines, and whether every step exited 0. */
export function summarize(results: readonly StepResult[]): { readonly lines: string[]; readonly ok: boolean } {
  const failed = results.filter((r) => r.status !== 0);
  const lines = results.map((r) => `bench step ${r.script}: ${r.status === 0 ? 'ok' : r.signal !== null ? `FAILED (${r.signal})` : `FAILED (exit ${r.status ?? 'none'})`}`);
  lines.push(failed.length === 0 ? `bench: all ${results.length} steps ok` : `bench: ${failed.length} of ${results.length} steps FAILED: ${failed.map((r) => r.script).join(', ')}`);
  return { lines, ok: failed.length === 0 };
}

function main(): void {
  const scripts = process.argv.slice(2);
  if (scripts.length === 0) {
    console.error('usage: node dist/bench/runSteps.js SCRIPT...');
    process.exit(2);
  }
  const { lines, ok } = summarize(runSteps(scripts));
  for (const l of lines) console.log(l);
  process.exit(ok ? 0 : 1);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main();
