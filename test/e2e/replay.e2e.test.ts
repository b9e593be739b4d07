// A counterexample the explorer found and shrunk (scenarios/block-restaged-during-unstage.yaml,
// workload 416 of a medium search) replays against the real processes: `nodevol mock-driver`
// reads the scenario's fault rule from its faults file exactly as the simulator applied it, and
// the real `nodevol agent` (KEP-6058's gate alone) sends NodeStageVolume while the timed-out
// NodeUnstageVolume still runs at the driver, the stage-after-unstage the simulator reports. With
// gate CSIUnstageCompletesBeforeRestage on, the real agent waits for the unstage to end, as the
// simulator says it does.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import { parse as parseYaml } from 'yaml';

import { writtenFault } from '../../src/csi/faults.js';
import { FeatureGate } from '../../src/features/features.js';
import { builtinScenarioDir, loadScenarioFile, type Scenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulation.js';
import type { JournalEntry } from '../support/e2e/nodeDisk.js';
import { killAll } from '../support/e2e/nodeNamespace.js';
import { replayScenario, type Replay } from '../support/e2e/replay.js';
import { rootOnlySkip, type TestNode } from '../support/e2e/testNode.js';
import { waitFor } from '../support/e2e/waitFor.js';

const SCENARIO = path.join(builtinScenarioDir(), 'block-restaged-during-unstage.yaml');
const SEED = 416;
const KEP = { CSIGlobalMountReconstruction: true };
const FIXED = { ...KEP, CSIUnstageCompletesBeforeRestage: true };

const nodes: TestNode[] = [];

/**
 * NodeStageVolume calls of `volumeId` that arrived at the driver while one of its
 * NodeUnstageVolume calls still ran there: the journal numbers calls by arrival (seq) and writes
 * each line when the call completes, so a stage whose seq is above a running unstage's, written
 * before that unstage's own line, arrived during it.
 */
function stagesDuringUnstage(journal: readonly JournalEntry[], volumeId: string): JournalEntry[] {
  const done = journal.filter((e) => e.phase === undefined && e.volumeId === volumeId);
  const out: JournalEntry[] = [];
  done.forEach((unstage, end) => {
    if (unstage.method !== 'NodeUnstageVolume' || unstage.seq === undefined) return;
    const arrivedDuring = done.slice(0, end).filter((e) => e.method === 'NodeStageVolume' && (e.seq ?? 0) > (unstage.seq ?? 0));
    out.push(...arrivedDuring);
  });
  return out;
}

async function replayed(name: string, scenario: Scenario, gates: Readonly<Record<string, boolean>>): Promise<Replay & { journal: JournalEntry[] }> {
  const r = await replayScenario(name, scenario, gates);
  nodes.push(r.node);
  // The pod that came back gets its volume once the old unstage has ended at the driver.
  const volumeId = scenario.volumes[0]?.handle ?? '';
  await waitFor(async () => ((await r.node.driverVolume(volumeId))?.publishedAt ?? []).some((t) => t.endsWith('/pod-3-r3')), {
    what: 'the re-created pod to have its volume published',
    timeoutMs: 90_000,
    intervalMs: 200,
    observe: async () => (await r.node.journalSince(0)).filter((e) => e.volumeId === volumeId).map((e) => `${e.seq ?? '?'} ${e.method ?? '?'} ${e.phase ?? e.error?.name ?? 'OK'}`),
  });
  return { ...r, journal: await r.node.journalSince(0) };
}

describe('a shrunk counterexample replays against the real mock driver process, from the same fault rule', { skip: rootOnlySkip(), concurrency: 2 }, () => {
  after(async () => {
    await killAll();
    for (const node of nodes) await node.disk.cleanup();
  });

  const scenario = loadScenarioFile(SCENARIO);
  const handle = scenario.volumes[0]?.handle ?? '';
  const rule = scenario.steps.find((s) => s.kind === 'fault');

  it('KEP-6058 gate alone: the simulator and the real agent both send NodeStageVolume while the timed-out unstage still runs', async () => {
    const sim = await simulate({ scenario, gates: FeatureGate.of(KEP), seed: SEED });
    assert.ok(sim.violations.some((v) => v.invariant === 'stage-after-unstage'), 'the simulator finds it');

    const r = await replayed('replay-kep', scenario, KEP);
    assert.ok(rule?.kind === 'fault');
    assert.deepEqual(parseYaml(readFileSync(r.node.disk.faultsFile, 'utf8')), { faults: [writtenFault(rule.fault)] }, "the driver's faults file holds the scenario's rule as it is");
    const early = stagesDuringUnstage(r.journal, handle);
    assert.ok(early.length > 0, JSON.stringify(r.journal.filter((e) => e.volumeId === handle).map((e) => [e.seq, e.method, e.phase ?? e.error?.name ?? 'OK'])));
    assert.ok(early.every((e) => e.error?.name === 'ABORTED'), 'the driver refused it as busy');
    const timedOut = r.journal.find((e) => e.method === 'NodeUnstageVolume' && e.phase === 'timedOut');
    assert.ok(timedOut !== undefined, 'the unstage timed out at the client and ran on');
  });

  it('gate CSIUnstageCompletesBeforeRestage on: the simulator and the real agent both stage only after the unstage ended', async () => {
    const sim = await simulate({ scenario, gates: FeatureGate.of(FIXED), seed: SEED });
    assert.deepEqual(sim.violations.map((v) => v.invariant), []);

    const r = await replayed('replay-fixed', scenario, FIXED);
    assert.deepEqual(stagesDuringUnstage(r.journal, handle), []);
    const calls = r.journal.filter((e) => e.phase === undefined && e.volumeId === handle).map((e) => `${e.method ?? '?'} ${e.error?.name ?? 'OK'}`);
    const stage = calls.lastIndexOf('NodeStageVolume OK');
    assert.ok(stage > 0 && calls.slice(0, stage).filter((c) => c === 'NodeUnstageVolume OK').length >= 2, JSON.stringify(calls));
  });
});
