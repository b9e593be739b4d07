// The explorer over generated workloads (src/sim/swarm.ts): what it finds does not depend on the
// threads or the shard that ran it; what it finds is shrunk and written out as a replayable case.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { FeatureGate } from '../../../src/features/features.js';
import { parseScenario } from '../../../src/sim/scenario.js';
import { parsePlan } from '../../../src/sim/plan.js';
import { simulate } from '../../../src/sim/simulation.js';
import { swarm, type SwarmOptions, type SwarmReport } from '../../../src/sim/swarm.js';

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
});
