/**
 * Runs one race case (cases.ts) several times and prints the outcome as one JSON line:
 *
 *   node raceMain.js <case> <base-dir> <runs> <ms-per-run>
 *
 * Each run lays out a fresh tree and canary under <base-dir>/run-<n>, starts a racer per pair
 * (racer.ts), repeats the removal for <ms-per-run> while they swap, stops them, and compares the
 * canary's fingerprint with the one taken before. The removal-race tests run it inside a private
 * mount and PID namespace (test/support/e2e/nodeNamespace.ts). Not named *.test.ts.
 */
import { mkdirSync, realpathSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';

import { fingerprint, fingerprintDiff } from './canary.js';
import { RACE_CASES } from './cases.js';
import { startExchangeRacer } from './racer.js';

export interface RaceRunResult {
  readonly run: number;
  readonly swaps: number;
  readonly attempts: number;
  readonly failedAttempts: number;
  readonly canaryEntries: number;
  /** Canary lines missing (-) or added (+) after the run; empty when byte-identical. */
  readonly canaryDiff: readonly string[];
  readonly settle?: string;
}

async function main(argv: readonly string[]): Promise<void> {
  const [name, baseArg, runsArg, msArg] = argv;
  const raceCase = RACE_CASES.find((c) => c.name === name);
  if (raceCase === undefined || baseArg === undefined) throw new Error(`usage: raceMain <${RACE_CASES.map((c) => c.name).join('|')}> <base-dir> [runs] [ms-per-run]`);
  const runs = Number(runsArg ?? '20');
  const msPerRun = Number(msArg ?? '250');
  const results: RaceRunResult[] = [];
  for (let run = 1; run <= runs; run++) {
    const base = path.join(baseArg, `run-${run}`);
    for (const d of ['root', 'canary', 'swap', 'cluster']) mkdirSync(path.join(base, d), { recursive: true });
    const dirs = { base, root: realpathSync(path.join(base, 'root')), canary: path.join(base, 'canary'), swap: path.join(base, 'swap') };
    const raced = await raceCase.setup(dirs);
    const before = fingerprint(dirs.canary);
    const racers = await Promise.all(raced.pairs.map(([a, b]) => startExchangeRacer(a, b)));
    let attempts = 0;
    let failedAttempts = 0;
    const end = performance.now() + msPerRun;
    do {
      attempts++;
      try {
        await raced.remove();
      } catch {
        failedAttempts++;
      }
    } while (performance.now() < end);
    let swaps = 0;
    for (const r of racers) swaps += (await r.stop()).swaps;
    const after = fingerprint(dirs.canary);
    const settle = raced.settle === undefined ? undefined : await raced.settle();
    await raced.close?.();
    results.push({ run, swaps, attempts, failedAttempts, canaryEntries: before.length, canaryDiff: fingerprintDiff(before, after), ...(settle === undefined ? {} : { settle }) });
    rmSync(base, { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify({ case: raceCase.name, results })}\n`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`raceMain: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
