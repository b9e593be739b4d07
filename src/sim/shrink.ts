/**
 * Shrinking a counterexample: the smallest scenario (fewer pods, volumes, drivers, steps and
 * faults) and plan (fewer crashes and planned faults) that still violate the same invariant.
 *
 * A candidate is the current best with one thing taken out; it is kept when a run of it still
 * breaks the invariant, and the search starts over from it until no candidate is kept or the
 * budget of runs is spent. Plans name calls by their sequence number, which moves when the
 * scenario changes: each crash and planned fault is carried over to a candidate by what it hit
 * (the k-th call with the same label, e.g. the 2nd `csi.NodeUnstageVolume vol-1`), found in a
 * probe run of the candidate.
 */
import type { FeatureGate } from '../features/features.js';
import type { InvariantName, Violation } from './invariants.js';
import { checkScenario, ScenarioError, type Scenario, type ScenarioStep } from './scenario.js';
import type { CallRecord } from './fencedPorts.js';
import type { Perturbation } from './plan.js';
import { simulate } from './simulation.js';

export interface ShrinkInput {
  readonly scenario: Scenario;
  readonly gates: FeatureGate;
  readonly seed: number;
  readonly plan: readonly Perturbation[];
  readonly invariant: InvariantName;
  /** Most simulations the search may run (default 400). */
  readonly budget?: number;
}

export interface ShrinkResult {
  readonly scenario: Scenario;
  readonly plan: readonly Perturbation[];
  readonly violation: Violation;
  /** Simulations run. */
  readonly runs: number;
}

/** What a perturbation hit: the label of its call and which occurrence of that label it was. */
interface Anchor {
  readonly label: string;
  readonly occurrence: number;
}

const DEFAULT_BUDGET = 400;

export async function shrinkCase(input: ShrinkInput): Promise<ShrinkResult> {
  const budget = input.budget ?? DEFAULT_BUDGET;
  let runs = 0;
  const run = async (scenario: Scenario, plan: readonly Perturbation[], recordCalls = false) => {
    runs++;
    return simulate({ scenario, gates: input.gates, seed: input.seed, plan, recordCalls });
  };
  const first = await run(input.scenario, input.plan, true);
  const found = first.violations.find((v) => v.invariant === input.invariant);
  if (found === undefined) throw new Error(`the case does not violate ${input.invariant}: nothing to shrink`);
  let best = { scenario: input.scenario, plan: [...input.plan], violation: found, calls: first.calls };

  // The plan first: its items keep their meaning while the scenario stays.
  for (let i = best.plan.length - 1; i >= 0 && runs < budget; i--) {
    const plan = best.plan.filter((_, j) => j !== i);
    const r = await run(best.scenario, plan, true);
    const v = r.violations.find((x) => x.invariant === input.invariant);
    if (v !== undefined) best = { scenario: best.scenario, plan, violation: v, calls: r.calls };
  }

  let progress = true;
  while (progress && runs < budget) {
    progress = false;
    for (const candidate of candidates(best.scenario)) {
      if (runs >= budget) break;
      for (const plan of await carriedPlans(best.plan, best.calls, candidate, (s, p) => run(s, p, true))) {
        if (runs >= budget) break;
        const r = await run(candidate, plan, true);
        const v = r.violations.find((x) => x.invariant === input.invariant);
        if (v === undefined) continue;
        best = { scenario: candidate, plan, violation: v, calls: r.calls };
        progress = true;
        break;
      }
      if (progress) break;
    }
  }
  return { scenario: best.scenario, plan: best.plan, violation: best.violation, runs };
}

/** What each perturbation of `plan` hit in the run that made `calls`. */
function anchorsOf(plan: readonly Perturbation[], calls: readonly CallRecord[]): (Anchor | undefined)[] {
  return plan.map((p) => {
    const i = p.kind === 'crash' ? calls.findIndex((c) => c.seq === p.seq) : calls.findIndex((c) => c.csiIndex === p.csiCall);
    const call = calls[i];
    if (call === undefined) return undefined;
    let occurrence = 0;
    for (let j = 0; j <= i; j++) if (calls[j]?.label === call.label) occurrence++;
    return { label: call.label, occurrence };
  });
}

/** How many calls around a crash's anchor are tried when the anchor itself does not break it. */
const NEIGHBOURS = 6;

/**
 * `plan` carried over to `candidate`, best guesses first: each perturbation at the same
 * occurrence of the same call, found in a probe run with the perturbations before it applied;
 * then, for the last crash of the plan, the calls nearest to it (the scheduler's choices move a
 * little as a scenario shrinks). Empty when a call is not there any more.
 */
async function carriedPlans(
  plan: readonly Perturbation[],
  calls: readonly CallRecord[],
  candidate: Scenario,
  probe: (s: Scenario, p: readonly Perturbation[]) => Promise<{ readonly calls: readonly CallRecord[] }>,
): Promise<Perturbation[][]> {
  if (plan.length === 0) return [[]];
  const anchors = anchorsOf(plan, calls);
  const out: Perturbation[] = [];
  let lastCalls: readonly CallRecord[] = [];
  let lastIndex = -1;
  for (let i = 0; i < plan.length; i++) {
    const p = plan[i];
    const a = anchors[i];
    if (p === undefined || a === undefined) return [];
    const r = await probe(candidate, out);
    let seen = 0;
    const index = r.calls.findIndex((c) => c.label === a.label && ++seen === a.occurrence);
    const hit = r.calls[index];
    if (hit === undefined) return [];
    if (p.kind === 'crash') out.push({ ...p, seq: hit.seq });
    else if (hit.csiIndex !== undefined) out.push({ ...p, csiCall: hit.csiIndex });
    else return [];
    lastCalls = r.calls;
    lastIndex = index;
  }
  const plans = [out];
  const last = out[out.length - 1];
  if (last?.kind === 'crash') {
    for (let d = 1; d <= NEIGHBOURS; d++) {
      for (const j of [lastIndex - d, lastIndex + d]) {
        const c = lastCalls[j];
        if (c !== undefined) plans.push([...out.slice(0, -1), { ...last, seq: c.seq }]);
      }
    }
  }
  return plans;
}

/** Valid scenarios with one thing taken out, the biggest cuts first. */
export function* candidates(s: Scenario): Generator<Scenario> {
  const valid = (c: Scenario): Scenario | undefined => {
    try {
      return checkScenario(c);
    } catch (err) {
      if (err instanceof ScenarioError) return undefined;
      throw err;
    }
  };
  const emit = function* (c: Scenario): Generator<Scenario> {
    const v = valid(c);
    if (v !== undefined) yield v;
  };
  // A pod, with the steps about it.
  for (const p of s.pods) {
    yield* emit({ ...s, pods: s.pods.filter((x) => x !== p), steps: s.steps.filter((st) => !stepNamesPod(st, p.uid)) });
  }
  // A step, the last ones first.
  for (let i = s.steps.length - 1; i >= 0; i--) yield* emit({ ...s, steps: s.steps.filter((_, j) => j !== i) });
  // A volume, out of every pod and step (a pod left with no volume goes too).
  for (const v of s.volumes) {
    const pods = s.pods
      .map(({ unused, ...p }) => {
        const left = (unused ?? []).filter((n) => n !== v.name);
        return { ...p, volumes: p.volumes.filter((n) => n !== v.name), ...(left.length > 0 ? { unused: left } : {}) };
      })
      .filter((p) => p.volumes.length > 0);
    const gone = new Set(s.pods.filter((p) => !pods.some((x) => x.uid === p.uid)).map((p) => p.uid));
    const steps = s.steps.filter((st) => !stepNamesVolume(st, v.name, v.handle) && ![...gone].some((uid) => stepNamesPod(st, uid)));
    yield* emit({ ...s, volumes: s.volumes.filter((x) => x !== v), pods, steps });
  }
  // A driver no volume uses.
  for (const d of s.drivers) {
    if (s.drivers.length === 1 || s.volumes.some((v) => v.driver === d.name)) continue;
    yield* emit({ ...s, drivers: s.drivers.filter((x) => x !== d), steps: s.steps.filter((st) => !(st.kind === 'restartDriver' && st.driver === d.name)) });
  }
  // A fault that applies once instead of several times.
  for (let i = 0; i < s.steps.length; i++) {
    const st = s.steps[i];
    if (st?.kind !== 'fault' || st.fault.times === 1) continue;
    const once: ScenarioStep = { kind: 'fault', fault: { ...st.fault, times: 1 } };
    yield* emit({ ...s, steps: s.steps.map((x, j) => (j === i ? once : x)) });
  }
}

function stepNamesPod(st: ScenarioStep, uid: string): boolean {
  if (st.kind === 'addPod' || st.kind === 'deletePod' || st.kind === 'terminatePod' || st.kind === 'podPhase') return st.uid === uid;
  if (st.kind === 'deleteFile' || st.kind === 'readError' || st.kind === 'corruptFile') return st.pod === uid;
  return false;
}

function stepNamesVolume(st: ScenarioStep, name: string, handle: string): boolean {
  if (st.kind === 'fault') return st.fault.volumeId === handle;
  if (st.kind === 'deleteFile' || st.kind === 'readError' || st.kind === 'corruptFile') return st.volume === name;
  return false;
}
