/**
 * Where a simulator run's time goes: explores generated workloads in this process under V8's
 * sampling profiler (node:inspector) and sums each sample's self time by the part of nodevol (or
 * of node) its function belongs to. Used by bench/explore.ts; run alone with
 *   node dist/bench/exploreCost.js [workloads=6] [size=medium]
 */
import { Session, type Profiler } from 'node:inspector';
import { fileURLToPath } from 'node:url';

import { FeatureGate } from '../src/features/features.js';
import { exploreWorkload } from '../src/sim/swarm.js';
import type { WorkloadSize } from '../src/sim/generate.js';

/** Every gate on (`AllAlpha=true`): what the explorer runs in CI. */
export const EVERY_GATE: Readonly<Record<string, boolean>> = FeatureGate.parse(['AllAlpha=true']).gate.snapshot();

/** The parts a sample is put in, by the file of its function (first match). */
const PARTS: readonly (readonly [string, RegExp])[] = [
  ['engine (volume manager, operations, CSI plugin)', /\/src\/(volume|volumemanager|operationexecutor|kubelet|mount|layout)\//],
  ['agent runtime and composition', /\/src\/agent\//],
  ['fake CSI driver and state machine', /\/src\/csi\//],
  ['in-memory filesystem (MemFs over memfs) and mount table', /\/src\/adapters\/memory\/|\/node_modules\/(memfs|@jsonjoy\.com|thingies)\//],
  ['simulator (scheduler, fences, invariants, durability)', /\/src\/sim\//],
  ['other nodevol code', /\/src\//],
  ['zod, yaml', /\/node_modules\/(zod|yaml)\//],
];

function partOf(node: Profiler.ProfileNode): string {
  const fn = node.callFrame.functionName;
  if (fn === '(garbage collector)') return 'garbage collection';
  if (fn === '(idle)' || fn === '(program)' || fn === '(root)') return 'idle and native';
  const url = node.callFrame.url;
  for (const [part, re] of PARTS) if (re.test(url)) return part;
  return url.startsWith('node:') || url === '' ? 'node built-ins and native' : 'other packages';
}

export interface RunCost {
  readonly runs: number;
  readonly steps: number;
  readonly cpuMsPerRun: number;
  readonly usPerStep: number;
  /** Share of the profiled time per part, largest first. */
  readonly parts: readonly { readonly part: string; readonly share: number }[];
}

/** Explores `workloads` generated workloads from `seed`, profiled. */
export async function runCost(workloads: number, size: WorkloadSize, seed = 1): Promise<RunCost> {
  const session = new Session();
  session.connect();
  const post = <T>(method: string, params?: object): Promise<T> =>
    new Promise<T>((resolve, reject) => session.post(method, params ?? {}, (err, result) => (err === null ? resolve(result as T) : reject(err))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 200 });
  await post('Profiler.start');
  let runs = 0;
  let steps = 0;
  let cpuMs = 0;
  for (let w = seed; w < seed + workloads; w++) {
    const r = await exploreWorkload(w, { size, gates: EVERY_GATE, crash: 'both', depth: 1, faults: false, maxCrashPoints: 12, shrinkBudget: 0 });
    runs += r.runs;
    steps += r.steps;
    cpuMs += r.cpuMs;
  }
  const { profile } = await post<{ profile: Profiler.Profile }>('Profiler.stop');
  session.disconnect();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>();
  let all = 0;
  const deltas = profile.timeDeltas ?? [];
  (profile.samples ?? []).forEach((id, i) => {
    const node = byId.get(id);
    if (node === undefined) return;
    const us = deltas[i] ?? 0;
    const part = partOf(node);
    totals.set(part, (totals.get(part) ?? 0) + us);
    all += us;
  });
  const parts = [...totals].map(([part, us]) => ({ part, share: us / Math.max(all, 1) })).sort((a, b) => b.share - a.share);
  return { runs, steps, cpuMsPerRun: cpuMs / Math.max(runs, 1), usPerStep: (cpuMs * 1000) / Math.max(steps, 1), parts };
}

export function printCost(label: string, c: RunCost): void {
  console.log(`${label}: ${c.runs} runs, ${(c.steps / Math.max(c.runs, 1)).toFixed(0)} steps/run, ${c.cpuMsPerRun.toFixed(1)} ms cpu/run, ${c.usPerStep.toFixed(1)} us/step`);
  for (const p of c.parts) if (p.share >= 0.005) console.log(`  ${(p.share * 100).toFixed(1).padStart(5)} %  ${p.part}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const n = Number(process.argv[2] ?? 6);
  const size = (process.argv[3] ?? 'medium') as WorkloadSize;
  printCost(`${n} generated ${size} workloads, every gate on`, await runCost(n, size));
}
