// A SIGTERM inside any operation: the plan's stop:before|after:SEQ, the explorer's
// --crash stop|all, the scenario step `sigterm` and the generator's draw of it. A stop runs the
// agent's own graceful stop (AgentRuntime.stop) with its grace period on the virtual clock, then
// the process exits and the next engine life starts as after a restart.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Option } from 'commander';

import { DEFAULT_SHUTDOWN_GRACE_MS } from '../../../src/agent/node.js';
import { exploreCommand } from '../../../src/cli/exploreCommand.js';
import { FeatureGate } from '../../../src/features/features.js';
import { CRASH_CHOICES, crashKindsOf, crashStops, explore } from '../../../src/sim/explorer.js';
import { generateScenario, WORKLOAD_SIZES } from '../../../src/sim/generate.js';
import { formatPlan, parsePlan } from '../../../src/sim/plan.js';
import { loadBuiltinScenario, parseScenario, scenarioYaml, type Scenario } from '../../../src/sim/scenario.js';
import { simulate, type SimResult } from '../../../src/sim/simulation.js';
import { MINIMAL_SCENARIO, scenarioErrorOf } from '../../support/scenarioText.js';

const EVERY_GATE = FeatureGate.parse(['AllAlpha=true']).gate;
const GATE_OFF = FeatureGate.of({ CSIGlobalMountReconstruction: false });
const names = (r: SimResult): string[] => [...new Set(r.violations.map((v) => v.invariant))].sort();


/** The trace steps a SIGTERM made: its delivery and the exit, with their virtual times. */
function stops(r: SimResult): { sigterm: { timeMs: number; label: string }[]; exits: { timeMs: number; label: string }[] } {
  return {
    sigterm: r.trace.filter((s) => s.event.kind === 'scenario' && s.event.label.startsWith('SIGTERM')).map((s) => ({ timeMs: s.timeMs, label: s.event.label })),
    exits: r.trace.filter((s) => s.event.kind === 'crash' && s.event.label.startsWith('stop:')).map((s) => ({ timeMs: s.timeMs, label: s.event.label })),
  };
}

describe('plan: stop:before|after:SEQ', () => {
  it('parses and formats back; a stop is a crash point of kind stop', () => {
    const text = 'stop:before:12,stop:after:30,restart:after:5,reboot:before:7,fault:Hang:3';
    const plan = parsePlan(text);
    assert.deepEqual(plan[0], { kind: 'crash', crash: 'stop', at: 'before', seq: 12 });
    assert.deepEqual(plan[1], { kind: 'crash', crash: 'stop', at: 'after', seq: 30 });
    assert.equal(formatPlan(plan), text);
    assert.deepEqual(parsePlan(formatPlan(plan)), plan);
  });

  it('refuses a bad item naming every crash kind', () => {
    for (const bad of ['stop:during:3', 'stop:after:x', 'sigterm:after:3', 'stop:after', 'stop:after:3:4']) {
      assert.throws(() => parsePlan(bad), (err: Error) => err.message === `bad plan item ${JSON.stringify(bad)}: want restart|reboot|stop:before|after:SEQ or fault:Unavailable|Aborted|DeadlineExceeded|Hang:N`, bad);
    }
  });
});

describe('scenario step sigterm', () => {
  it('parses `sigterm`, `sigterm:` and `sigterm: { grace }`, and writes them back', () => {
    const s = parseScenario(`${MINIMAL_SCENARIO}steps:\n  - wait: converged\n  - sigterm\n  - sigterm:\n  - sigterm: { grace: 5s }\n  - sigterm: { grace: 2m }\n  - sigterm: {}\n`, 'x.yaml');
    assert.deepEqual(s.steps, [{ kind: 'wait' }, { kind: 'sigterm' }, { kind: 'sigterm' }, { kind: 'sigterm', graceMs: 5_000 }, { kind: 'sigterm', graceMs: 120_000 }, { kind: 'sigterm' }]);
    assert.deepEqual(parseScenario(scenarioYaml(s), 'x.yaml').steps, s.steps);
    assert.match(scenarioYaml(s), /- sigterm\n {2}- sigterm\n {2}- sigterm:\n {6}grace: 5s\n/);
  });

  it('refuses a bad one naming the step and its field', () => {
    const step = (v: string): string => scenarioErrorOf(`${MINIMAL_SCENARIO}steps:\n  - wait: converged\n  - sigterm: ${v}\n`);
    assert.match(step('{ grace: soon }'), /^x\.yaml:12: steps\[1\]\.sigterm\.grace: must be a duration such as 500ms, 30s or 2m$/);
    assert.match(step('{ grace: 11m }'), /^x\.yaml:12: steps\[1\]\.sigterm\.grace: must be at most 10m$/);
    assert.match(step('{ grace: 5s, signal: KILL }'), /^x\.yaml:12: steps\[1\]\.sigterm: Unrecognized key\(s\) in object: 'signal'$/);
    assert.match(step('5s'), /^x\.yaml:12: steps\[1\]\.sigterm: Expected object, received string$/);
  });

  it('the built-in scenario: each stop waits its grace period for the operation in flight on the virtual clock, then kubelet exits and starts again', async () => {
    const scenario = loadBuiltinScenario('sigterm-in-flight');
    const on = await simulate({ scenario, gates: EVERY_GATE, seed: 1, fullTrace: true });
    assert.deepEqual(names(on), []);
    assert.equal(on.endReason, 'converged');
    const { sigterm, exits } = stops(on);
    assert.deepEqual(
      sigterm.map((s) => s.label),
      ['SIGTERM: engine life 1 stops (grace 30s)', 'SIGTERM: engine life 3 stops (grace 5s)'],
    );
    // NodeUnstageVolume (60 s at the driver) and NodeStageVolume (20 s) outlive the grace periods.
    assert.deepEqual(
      exits.map((e, i) => ({ label: e.label, afterMs: e.timeMs - (sigterm[i]?.timeMs ?? NaN) })),
      [
        { label: 'stop: engine life 1 exits after SIGTERM, work in flight abandoned after the grace period', afterMs: DEFAULT_SHUTDOWN_GRACE_MS },
        { label: 'stop: engine life 3 exits after SIGTERM, work in flight abandoned after the grace period', afterMs: 5_000 },
      ],
    );
    // A stopping life starts no operation: the one in flight at the SIGTERM holds it to the end.
    for (const [i, s] of sigterm.entries()) {
      const life = i === 0 ? 1 : 3;
      const sent = on.trace.filter((t) => t.life === life && t.event.kind === 'csi-send' && t.timeMs >= s.timeMs);
      assert.deepEqual(sent, [], `life ${life} sends nothing after its SIGTERM`);
    }
    // Gate off: KEP-6058 user story 1, reached by a SIGTERM and a reboot rather than a crash.
    const off = await simulate({ scenario, gates: GATE_OFF, seed: 1 });
    assert.deepEqual(names(off), ['converges', 'in-use-reported']);
  });

  it('a stop with nothing in flight exits at once', async () => {
    const scenario = parseScenario(`${MINIMAL_SCENARIO}steps:\n  - wait: converged\n  - sigterm\n  - wait: converged\n`, 'x.yaml');
    const r = await simulate({ scenario, gates: EVERY_GATE, seed: 1, fullTrace: true });
    assert.deepEqual(names(r), []);
    const { sigterm, exits } = stops(r);
    assert.equal(sigterm.length, 1);
    assert.deepEqual(exits, [{ timeMs: sigterm[0]?.timeMs, label: 'stop: engine life 1 exits after SIGTERM' }]);
    assert.ok(r.trace.some((s) => s.life === 2 && s.event.kind === 'start'), 'the next life starts');
  });
});

/** One pod whose NodeStageVolume takes 60 s at the driver: longer than the grace period. */
const slowStage = (): Scenario =>
  parseScenario(`${MINIMAL_SCENARIO.replace('volumes: [pv-1]', 'volumes: [pv-1]\n    running: false')}steps:\n  - fault: { method: NodeStageVolume, volumeId: vol-1, delay: 60s, times: 1 }\n  - addPod: pod-a\n  - wait: converged\n`, 'x.yaml');

describe('explorer: --crash stop|all', () => {
  it('a stop inside an in-flight NodeStageVolume is explored: before it, the stage holds the stop for the grace period and is abandoned; after it, the operation finishes within it', async () => {
    const scenario = slowStage();
    const baseRun = await simulate({ scenario, gates: EVERY_GATE, seed: 1, recordCalls: true, recordCrashPoints: true });
    const stage = baseRun.calls.find((c) => c.label === 'csi.NodeStageVolume vol-1');
    assert.ok(stage !== undefined);
    // The explorer runs one stop per class of crash points: the world state and the call it is at
    // (a stop keeps the engine's memory, so what it is doing matters); the stage's is one of them.
    const label = new Map(baseRun.calls.map((c) => [c.seq, c.label]));
    const classes = new Set(baseRun.crashPoints.map((cp) => `${cp.state}|${label.get(cp.seq)}`));
    const states = new Set(baseRun.crashPoints.map((cp) => cp.state));
    assert.ok(classes.size > states.size, 'more stop classes than world states');
    assert.ok(baseRun.crashPoints.some((cp) => cp.seq === stage.seq && cp.at === 'before'));
    const report = await explore({ scenario, gates: EVERY_GATE, crash: 'stop', depth: 1, faults: false, seed: 1, runs: 1, replayCommand: () => '' });
    assert.equal(report.runs, 1 + classes.size);
    const crashes = await explore({ scenario, gates: EVERY_GATE, crash: 'restart', depth: 1, faults: false, seed: 1, runs: 1, replayCommand: () => '' });
    assert.equal(crashes.runs, 1 + states.size, 'a crash point is still one per world state');
    assert.deepEqual(report.violations, []);
    // Just before the call: the stage is sent all the same and holds the stop for the whole grace
    // period; the process exits with it in flight, and the next life stages the volume again.
    const before = await simulate({ scenario, gates: EVERY_GATE, seed: 1, plan: parsePlan(`stop:before:${stage.seq}`), fullTrace: true });
    assert.deepEqual(names(before), []);
    assert.equal(before.endReason, 'converged');
    const b = stops(before);
    assert.equal(b.exits.length, 1);
    assert.equal((b.exits[0]?.timeMs ?? 0) - (b.sigterm[0]?.timeMs ?? 0), DEFAULT_SHUTDOWN_GRACE_MS);
    assert.match(b.exits[0]?.label ?? '', /abandoned after the grace period$/);
    assert.ok(before.trace.some((s) => s.life === 1 && s.event.kind === 'csi-send' && s.csi?.method === 'NodeStageVolume' && s.timeMs >= (b.sigterm[0]?.timeMs ?? Infinity)));
    assert.ok(before.trace.some((s) => s.life === 2 && s.csi?.method === 'NodeStageVolume' && s.csi.code === 'OK'), 'the next life stages the volume');
    // Just after it (its answer reached the engine): the operation goes on within the grace period
    // (SetUp: NodePublishVolume), and the process exits once it is done.
    const after = await simulate({ scenario, gates: EVERY_GATE, seed: 1, plan: parsePlan(`stop:after:${stage.seq}`), fullTrace: true });
    assert.deepEqual(names(after), []);
    const a = stops(after);
    assert.deepEqual(a.exits.map((e) => e.label), ['stop: engine life 1 exits after SIGTERM']);
    assert.ok((a.exits[0]?.timeMs ?? Infinity) - (a.sigterm[0]?.timeMs ?? 0) < DEFAULT_SHUTDOWN_GRACE_MS);
    assert.ok(after.trace.some((s) => s.life === 1 && s.csi?.method === 'NodePublishVolume' && s.csi.code === 'OK' && s.timeMs >= (a.sigterm[0]?.timeMs ?? Infinity)), 'the operation in flight finished');
  });

  it('--crash both is still restart and reboot (the default); stop and all add the SIGTERM', () => {
    assert.deepEqual(crashKindsOf('both'), ['restart', 'reboot']);
    assert.deepEqual(crashKindsOf('all'), ['restart', 'reboot', 'stop']);
    assert.deepEqual(crashKindsOf('stop'), ['stop']);
    assert.deepEqual(crashKindsOf('none'), []);
    assert.deepEqual(CRASH_CHOICES.filter(crashStops), ['stop', 'all']);
    const option = exploreCommand(() => undefined).options.find((o: Option) => o.long === '--crash');
    assert.equal(option?.defaultValue, 'both');
    assert.deepEqual(option?.argChoices, ['none', 'restart', 'reboot', 'stop', 'both', 'all']);
  });
});

describe('generator: sigterm only with --crash stop|all', () => {
  const SEEDS = Array.from({ length: 300 }, (_, i) => i + 1);

  it('draws no sigterm by default; with it, the workload minus its sigterm step is the default one, for every size', () => {
    for (const size of WORKLOAD_SIZES) {
      let drawn = 0;
      for (const seed of SEEDS) {
        const plain = generateScenario(seed, size);
        assert.ok(!plain.steps.some((s) => s.kind === 'sigterm'), `${plain.name}: no sigterm by default`);
        const withStop = generateScenario(seed, size, { sigterm: true });
        const sigterms = withStop.steps.filter((s) => s.kind === 'sigterm');
        assert.ok(sigterms.length <= 1);
        drawn += sigterms.length;
        assert.deepEqual({ ...withStop, steps: withStop.steps.filter((s) => s.kind !== 'sigterm') }, plain, `${withStop.name}: only the sigterm step differs`);
        assert.notEqual(withStop.steps[0]?.kind, 'sigterm', 'never before the first convergence');
      }
      // About 3 in 5 workloads.
      assert.ok(drawn > SEEDS.length * 0.45 && drawn < SEEDS.length * 0.75, `${size}: ${drawn} of ${SEEDS.length}`);
    }
  });

  it('draws the agent\'s grace period and shorter and longer ones; every workload reads back from its file', () => {
    const graces = new Set<number | undefined>();
    for (const seed of SEEDS) {
      const s = generateScenario(seed, 'medium', { sigterm: true });
      for (const st of s.steps) if (st.kind === 'sigterm') graces.add(st.graceMs);
      assert.deepEqual({ ...parseScenario(scenarioYaml(s), 'x.yaml'), source: '' }, { ...s, source: '' }, s.name);
    }
    assert.deepEqual([...graces].map((g) => g ?? 'default').sort(), [1_000, 5_000, 60_000, 'default']);
  });
});
