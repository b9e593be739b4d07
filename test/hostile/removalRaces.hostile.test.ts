/**
 * Every removal nodevol makes stays in the tree it started in, whatever races it
 * (docs/security.md, "Removals and writes beneath the root dir"): for each removal path
 * (test/support/race/cases.ts) a racer swaps a directory of the tree with a symlink to an outside
 * twin of the same names, atomically and over and over (renameat2 RENAME_EXCHANGE), while the
 * removal runs with the file system its program ships with; the outside canary must be
 * byte-identical afterwards, run after run. Each case runs in a private mount and PID namespace.
 *
 * Root only (the namespace); the racer needs perl. Before the descriptor-relative file system,
 * every case but the mock driver's lost canary files or directories within three runs.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

import { killAll, NodeNamespace } from '../support/e2e/nodeNamespace.js';
import { nodeExecPath } from '../support/e2e/paths.js';
import { rootOnlySkip, TestNode } from '../support/e2e/testNode.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { fingerprint, fingerprintDiff } from '../support/race/canary.js';
import { RACE_CASES } from '../support/race/cases.js';
import type { RaceRunResult } from '../support/race/raceMain.js';
import { racerSkip, startExchangeRacer } from '../support/race/racer.js';

/** Runs per case and how long each races; NODEVOL_RACE_RUNS raises the runs for a longer search. */
const RUNS = Number(process.env.NODEVOL_RACE_RUNS ?? '20');
const MS_PER_RUN = Number(process.env.NODEVOL_RACE_MS ?? '100');
const RACE_MAIN = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'support', 'race', 'raceMain.js');

function skipReason(): string | false {
  return rootOnlySkip() || racerSkip();
}

describe('removals under a directory/symlink swap race: nothing outside the tree is touched', { skip: skipReason() }, () => {
  let ns: NodeNamespace;
  let base: string;
  before(async () => {
    ns = await NodeNamespace.start({ name: 'removal-races' });
    base = mkdtempSync(path.join(tmpdir(), 'nodevol-races-'));
  });
  after(async () => {
    await ns.stop();
    rmSync(base, { recursive: true, force: true });
  });

  for (const c of RACE_CASES) {
    it(`${c.name}: ${c.what}; the canary is byte-identical over ${RUNS} runs`, async () => {
      const r = await ns.run([nodeExecPath(), RACE_MAIN, c.name, path.join(base, c.name), String(RUNS), String(MS_PER_RUN)], 300_000);
      assert.equal(r.exitCode, 0, r.stderr);
      const out = JSON.parse(r.stdout) as { case: string; results: RaceRunResult[] };
      assert.equal(out.results.length, RUNS);
      for (const run of out.results) {
        assert.ok(run.swaps > 0, `run ${run.run}: the racer swapped nothing`);
        assert.ok(run.canaryEntries > 1, `run ${run.run}: an empty canary proves nothing`);
        assert.deepEqual(run.canaryDiff, [], `run ${run.run} (${run.swaps} swaps, ${run.attempts} removals): the canary outside the root dir changed`);
        assert.equal(run.settle, undefined, `run ${run.run}: ${run.settle ?? ''}`);
      }
      const swaps = out.results.reduce((n, x) => n + x.swaps, 0);
      const attempts = out.results.reduce((n, x) => n + x.attempts, 0);
      // Told, so that a run that raced little shows: at least one swap per removal on average.
      assert.ok(swaps >= attempts, `${swaps} swaps over ${attempts} removals`);
    });
  }
});

describe('the agent as it ships: its orphaned pod dir sweep under the swap race', { skip: skipReason() }, () => {
  let node: TestNode | undefined;
  after(async () => {
    await killAll();
    await node?.disk.cleanup();
  });

  it('over 3 orphaned pod dirs in a row, each raced through two sweeps, the canary stays byte-identical and each pod dir goes once the race stops', async () => {
    node = await TestNode.create('race-sweep');
    const n = node;
    const canary = path.join(n.disk.base, 'canary');
    await n.startAgent({ gate: false });
    for (let run = 1; run <= 3; run++) {
      const uid = `0b6c1f9e-0000-4000-8000-00000000000${run}`;
      const app = path.join(n.disk.rootDir, 'pods', uid, 'containers', 'app');
      const twin = path.join(canary, `app-${run}`);
      const link = path.join(n.disk.base, `swap-${run}`);
      // The pod dir is filled outside the root dir and renamed into pods/ whole: the running
      // agent's sweep may remove an orphaned pod dir at any moment, also while a test fills it.
      const staged = path.join(n.disk.base, `staged-${run}`);
      const stagedApp = path.join(staged, 'containers', 'app');
      mkdirSync(stagedApp, { recursive: true });
      mkdirSync(twin, { recursive: true });
      for (let i = 0; i < 1000; i++) {
        writeFileSync(path.join(stagedApp, `f${i}`), 'pod');
        writeFileSync(path.join(twin, `f${i}`), `canary ${i}`);
      }
      symlinkSync(twin, link);
      const before = fingerprint(canary);
      mkdirSync(path.join(n.disk.rootDir, 'pods'), { recursive: true });
      renameSync(staged, path.join(n.disk.rootDir, 'pods', uid));
      const racer = await startExchangeRacer(app, link);
      const sweeps = async (): Promise<number> => (await n.log('agent')).filter((l) => typeof l.msg === 'string' && l.msg.startsWith('Orphaned pod found') && l.podUID === uid).length;
      // Two sweeps under the race, unless one already won it (it removed the swapped-in symlink and
      // the dirs above it before the racer could make it again).
      const podDir = path.join(n.disk.rootDir, 'pods', uid);
      await waitFor(async () => (await sweeps()) >= 2 || !existsSync(podDir), { what: `two sweeps of pod ${uid} under the race`, timeoutMs: 20_000 });
      const { swaps } = await racer.stop();
      assert.ok(swaps > 0);
      await waitFor(() => !existsSync(podDir), { what: `pod dir ${uid} removed once the race stopped`, timeoutMs: 20_000 });
      assert.deepEqual(fingerprintDiff(before, fingerprint(canary)), [], `run ${run} (${swaps} swaps): the canary outside the root dir changed`);
    }
  });
});
