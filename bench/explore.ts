/**
 * Explorer benchmark (`npm run bench`, after bench.ts): runs `nodevol explore` as a whole process,
 * the way a user meets it, and prints counts and ratios, never pass/fail by time:
 *   - story 1, depth 1, both crash kinds, gate on: wall and CPU time, runs, runs/s, against the
 *     10 s target, and as a ratio to the floor (a `nodevol --version` process);
 *   - the same with the gate off;
 *   - story 2, gate off and on;
 *   - every built-in scenario, depth 1, both crash kinds, gate on: the invariants violated;
 *   - story 1, depth 2, gate on, against the 2 min target (skip with BENCH_EXPLORE_DEPTH2=0);
 *   - generated workloads (`nodevol explore --generate`, every gate on), one process on one
 *     thread (--jobs 1) per size: runs/s against the 20 runs/s target for medium, and the cost of
 *     a step for small, medium and large (a run's cost grows with its steps: the ratio of the
 *     large to the small cost of a step says whether it grows faster);
 *   - the same medium workloads on every core (--jobs), and where a run's time goes (a profile
 *     of the workloads explored in this process, bench/exploreCost.ts).
 * The gate-off runs must report in-use-reported or converges for stories 1 and 2 (the bugs the
 * KEP exists for); a missing finding is printed as MISS. The exit code stays 0.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';

import { EVERY_GATE, printCost, runCost } from './exploreCost.js';

interface Report {
  readonly runs: number;
  readonly crashPoints: number;
  readonly states: number;
  readonly durationMs: number;
  readonly cpuMs: number;
  readonly violations: readonly { readonly invariant: string; readonly runs: number; readonly plan: string }[];
}

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = path.resolve(here, '../../bin/nodevol.js');
const ON = 'CSIGlobalMountReconstruction=true';
const OFF = 'CSIGlobalMountReconstruction=false';

function timed(args: readonly string[]): { wallMs: number; stdout: string; status: number | null } {
  const start = performance.now();
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  return { wallMs: performance.now() - start, stdout: r.stdout, status: r.status };
}

function explore(scenario: string, gates: string, extra: readonly string[] = []): { report: Report; wallMs: number } {
  const r = timed(['explore', '--scenario', scenario, '--crash', 'both', '--feature-gates', gates, '-o', 'json', ...extra]);
  if (r.status !== 0 && r.status !== 1) throw new Error(`nodevol explore --scenario ${scenario} exited ${String(r.status)}`);
  return { report: JSON.parse(r.stdout) as Report, wallMs: r.wallMs };
}

const invariants = (r: Report): string => r.violations.map((v) => `${v.invariant}(${v.runs})`).join(' ') || 'none';

function line(label: string, r: Report, wallMs: number, floorMs: number, targetMs?: number): void {
  const target = targetMs === undefined ? '' : `  target <= ${targetMs / 1000} s: ${wallMs <= targetMs ? 'met' : 'MISSED'}`;
  console.log(
    `${label.padEnd(44)} runs ${String(r.runs).padStart(5)}  states ${String(r.states).padStart(4)}  crash points ${String(r.crashPoints).padStart(6)}  ` +
      `wall ${(wallMs / 1000).toFixed(1)} s (${(wallMs / floorMs).toFixed(0)}x floor)  cpu ${(r.cpuMs / 1000).toFixed(1)} s  ` +
      `${(r.runs / (r.durationMs / 1000)).toFixed(1)} runs/s${target}`,
  );
  console.log(`${''.padEnd(44)} violations: ${invariants(r)}`);
}

const floor = Math.min(...[0, 1, 2].map(() => timed(['--version']).wallMs));
console.log(`explore bench: floor (a nodevol --version process) ${floor.toFixed(0)} ms`);

const s1on = explore('kep-story-1', ON);
line('story 1, depth 1, both, gate on', s1on.report, s1on.wallMs, floor, 10_000);
const s1off = explore('kep-story-1', OFF);
line('story 1, depth 1, both, gate off', s1off.report, s1off.wallMs, floor);
const s2off = explore('kep-story-2', OFF);
line('story 2, depth 1, both, gate off', s2off.report, s2off.wallMs, floor);
const s2on = explore('kep-story-2', ON);
line('story 2, depth 1, both, gate on', s2on.report, s2on.wallMs, floor);
for (const [label, r] of [['story 1 gate off', s1off.report], ['story 2 gate off', s2off.report]] as const) {
  const found = r.violations.some((v) => v.invariant === 'in-use-reported' || v.invariant === 'converges');
  console.log(`${label}: the KEP's bug ${found ? 'found (in-use-reported / converges)' : 'MISS: not found'}`);
}
for (const scenario of ['alpha-gap', 'listed-restage-fails', 'inline-volume-orphans', 'shared-volume', 'raw-block', 'rewanted-during-unstage']) {
  const r = explore(scenario, ON);
  line(`${scenario}, depth 1, both, gate on`, r.report, r.wallMs, floor);
}
if (process.env['BENCH_EXPLORE_DEPTH2'] !== '0') {
  const d2 = explore('kep-story-1', ON, ['--depth', '2']);
  line('story 1, depth 2, both, gate on', d2.report, d2.wallMs, floor, 120_000);
}

interface SwarmJson {
  readonly workloads: number;
  readonly runs: number;
  readonly steps: number;
  readonly exploreMs: number;
  readonly cpuMs: number;
  readonly runsPerSecond: number;
  readonly violations: readonly { readonly invariant: string; readonly workloads: number }[];
}

const everyGate = Object.entries(EVERY_GATE)
  .map(([k, v]) => `${k}=${String(v)}`)
  .join(',');
function generated(size: string, count: number, jobs: number): { report: SwarmJson; wallMs: number } {
  const r = timed(['explore', '--generate', String(count), '--size', size, '--jobs', String(jobs), '--feature-gates', everyGate, '-o', 'json']);
  if (r.status !== 0 && r.status !== 1) throw new Error(`nodevol explore --generate ${count} --size ${size} exited ${String(r.status)}`);
  return { report: JSON.parse(r.stdout) as SwarmJson, wallMs: r.wallMs };
}
const workloads = Number(process.env['BENCH_EXPLORE_WORKLOADS'] ?? 12);
const perStep: Record<string, number> = {};
for (const size of ['small', 'medium', 'large']) {
  const { report: r, wallMs } = generated(size, size === 'large' ? Math.max(2, Math.round(workloads / 3)) : workloads, 1);
  perStep[size] = (r.cpuMs * 1000) / Math.max(r.steps, 1);
  const target = size === 'medium' ? `  target >= 20 runs/s on one core: ${r.runsPerSecond >= 20 ? 'met' : 'MISSED'}` : '';
  console.log(
    `generated ${size.padEnd(6)} x${String(r.workloads).padStart(3)}, one thread`.padEnd(44) +
      ` runs ${String(r.runs).padStart(5)}  ${(r.steps / r.runs).toFixed(0)} steps/run  ${(r.cpuMs / r.runs).toFixed(1)} ms cpu/run  ${(perStep[size] ?? 0).toFixed(1)} us/step  ` +
      `${r.runsPerSecond.toFixed(1)} runs/s (wall ${(wallMs / 1000).toFixed(1)} s)${target}`,
  );
  console.log(`${''.padEnd(44)} violations: ${r.violations.map((v) => `${v.invariant}(${v.workloads} workloads)`).join(' ') || 'none'}`);
}
console.log(`cost of a step, large against small: ${((perStep['large'] ?? 0) / Math.max(perStep['small'] ?? 1, 1e-9)).toFixed(2)}x (1 when a run's cost grows linearly with its steps)`);
const cores = availableParallelism();
const { report: all, wallMs: allWall } = generated('medium', workloads * cores, cores);
console.log(`generated medium x${all.workloads}, ${cores} threads`.padEnd(44) + ` runs ${String(all.runs).padStart(5)}  ${all.runsPerSecond.toFixed(1)} runs/s (wall ${(allWall / 1000).toFixed(1)} s)`);
printCost('where a run of a generated medium workload spends its time', await runCost(Math.max(2, Math.round(workloads / 2)), 'medium'));
