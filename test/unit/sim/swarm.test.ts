// The explorer over generated workloads (src/sim/swarm.ts): what it finds does not depend on the
// threads or the shard that ran it; what it finds is shrunk and written out as a replayable case.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { FeatureGate } from '../../../src/features/features.js';
import { explore } from '../../../src/sim/explorer.js';
import { generateScenario } from '../../../src/sim/generate.js';
import { parseScenario } from '../../../src/sim/scenario.js';
import { parsePlan } from '../../../src/sim/plan.js';
import { simulate } from '../../../src/sim/simulation.js';
import { exploreWorkload, swarm, type SwarmOptions, type SwarmReport, type TaskOptions } from '../../../src/sim/swarm.js';

const KEP_ONLY = { CSIGlobalMountReconstruction: true };

function options(files: Map<string, string>, over: Partial<SwarmOptions> = {}): SwarmOptions {
  return {
    seed: 1,
    count: 4,
    size: 'small',
    gates: KEP_ONLY,
    crash: 'both',
    depth: 1,
    faults: false,
    maxCrashPoints: 3,
    jobs: 1,
    shrinkBudget: 60,
    replayCommand: (file, seed, plan) => `nodevol explore ${file} --seed ${seed}${plan === '' ? ' --crash none' : ` --plan ${plan}`}`,
    caseFile: (name) => `/cases/${name}`,
    writeFile: (file, text) => files.set(file, text),
    ...over,
  };
}

const summary = (r: SwarmReport): unknown => ({ runs: r.runs, states: r.states, violations: r.violations });

describe('the explorer over generated workloads', () => {
  it('finds what the KEP-6058 gate alone leaves open, and writes each invariant\'s first case shrunk, replayable from its file', async () => {
    const files = new Map<string, string>();
    const r = await swarm(options(files, { count: 8 }));
    assert.equal(r.workloads, 8);
    assert.ok(r.violations.length > 0, 'generated workloads break something with the KEP gate alone');
    assert.equal(r.cases.length, r.violations.length);
    for (const c of r.cases) {
      const text = files.get(c.file);
      assert.ok(text !== undefined, `${c.file} written`);
      assert.match(text, /^# Found by nodevol explore --generate/);
      assert.ok(text.includes(`# Replay: ${c.replay}`));
      const scenario = parseScenario(text, c.file);
      const again = await simulate({ scenario, gates: FeatureGate.of(KEP_ONLY), seed: c.seed, plan: parsePlan(c.plan) });
      assert.ok(again.violations.some((v) => v.invariant === c.invariant), `${c.file} replays ${c.invariant}`);
    }
  });

  it('every gate on: the same workloads break nothing', async () => {
    const every = Object.fromEntries(Object.entries(FeatureGate.defaults().snapshot()).map(([k]) => [k, true]));
    const r = await swarm(options(new Map(), { gates: every, count: 8 }));
    assert.deepEqual(r.violations, []);
  });

  it('two worker threads find what one thread finds; shards split the workloads and add up to the whole', async () => {
    const one = await swarm(options(new Map()));
    const two = await swarm(options(new Map(), { jobs: 2 }));
    assert.deepEqual(summary(two), summary(one));
    const shards = await Promise.all([0, 1].map((index) => swarm(options(new Map(), { shard: { index, count: 2 } }))));
    assert.deepEqual(shards.map((s) => s.workloads), [2, 2]);
    assert.equal((shards[0]?.runs ?? 0) + (shards[1]?.runs ?? 0), one.runs);
  });
  it('a crash choice with SIGTERMs (stop, all) explores the workload drawn with its sigterm step; the others the one drawn without', async () => {
    // The first small workload whose draw has a sigterm step when SIGTERMs are explored (chance 3/5).
    const workload = [1, 2, 3, 4, 5, 6, 7, 8].find((w) => generateScenario(w, 'small', { sigterm: true }).steps.some((s) => s.kind === 'sigterm'));
    assert.ok(workload !== undefined, 'one of 8 small workloads draws a sigterm step');
    const task = (crash: TaskOptions['crash']): TaskOptions => ({ size: 'small', gates: KEP_ONLY, crash, depth: 1, faults: false, maxCrashPoints: 2, shrinkBudget: 0 });
    // What explore() finds on a scenario, with the task's options.
    const direct = async (sigterm: boolean, crash: TaskOptions['crash']): Promise<{ runs: number; steps: number }> => {
      let steps = 0;
      const r = await explore({
        scenario: generateScenario(workload, 'small', { sigterm }),
        gates: FeatureGate.of(KEP_ONLY),
        crash,
        depth: 1,
        faults: false,
        seed: workload,
        runs: 1,
        maxCrashPoints: 2,
        shrink: false,
        replayCommand: () => '',
        onResult: (x) => (steps += x.steps),
      });
      return { runs: r.runs, steps };
    };
    for (const crash of ['stop', 'all'] as const) {
      const got = await exploreWorkload(workload, task(crash));
      assert.deepEqual({ runs: got.runs, steps: got.steps }, await direct(true, crash), `--crash ${crash}: the draw with the sigterm step`);
      assert.notDeepEqual({ runs: got.runs, steps: got.steps }, await direct(false, crash), `--crash ${crash}: not the draw without it`);
    }
    const both = await exploreWorkload(workload, task('both'));
    assert.deepEqual({ runs: both.runs, steps: both.steps }, await direct(false, 'both'), '--crash both: the draw without a sigterm step');
  });
});
