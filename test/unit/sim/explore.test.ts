// `nodevol explore`: exit codes, JSON shape, --html, replay by --plan, and --shard splitting the
// runs deterministically.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FeatureGate } from '../../../src/features/features.js';
import { explore } from '../../../src/sim/explorer.js';
import { parseScenario } from '../../../src/sim/scenario.js';

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../bin/nodevol.js');

/** Runs the CLI as a process, as a user does. */
function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [BIN, ...args], { maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error !== null && typeof error.code !== 'number') reject(new Error(error.message));
      else resolve({ code: error === null ? 0 : Number(error.code), out: stdout, err: stderr });
    });
  });
}

describe('nodevol explore', () => {
  it('exit 1 with violations, the JSON shape, an HTML trace and a replay command that reproduces the finding', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'explore-'));
    try {
      const html = path.join(dir, 'trace.html');
      const r = await cli(['explore', '--scenario', 'kep-story-2', '--crash', 'none', '--feature-gates', 'CSIGlobalMountReconstruction=false', '-o', 'json', '--html', html]);
      assert.equal(r.code, 1, r.err);
      const report = JSON.parse(r.out) as {
        scenario: string;
        featureGates: Record<string, boolean>;
        runs: number;
        states: number;
        durationMs: number;
        violations: { invariant: string; crashPoints: string[]; trace: { version: number; steps: unknown[] }; replay: string }[];
      };
      assert.equal(report.scenario, 'kep-story-2');
      assert.equal(report.featureGates['CSIGlobalMountReconstruction'], false);
      assert.equal(report.runs, 1);
      assert.ok(report.durationMs >= 0 && report.states >= 0);
      assert.deepEqual(report.violations.map((v) => v.invariant), ['in-use-reported', 'converges']);
      const first = report.violations[0];
      assert.ok(first?.trace !== undefined && first.trace.version === 1 && first.trace.steps.length > 0);
      assert.equal(first.replay, 'nodevol explore --scenario kep-story-2 --feature-gates CSIGlobalMountReconstruction=false --seed 1 --crash none');
      const page = readFileSync(html, 'utf8');
      assert.match(page, /^<!doctype html>/);
      assert.match(page, /in-use-reported/);
      assert.match(page, /data-violation="in-use-reported"/, 'the violation is marked on the timeline');
      // The only script is the report's own (click a finding to scroll to it): nothing from the trace runs.
      assert.equal(page.match(/<script/g)?.length, 1);
      assert.doesNotMatch(page.slice(page.indexOf('<script')), /kubernetes\.io\/csi/);
      const replay = await cli([...first.replay.split(' ').slice(1), '-o', 'json']);
      assert.equal(replay.code, 1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exit 0 without violations; table output names runs and states', async () => {
    const r = await cli(['explore', '--scenario', 'shared-volume', '--crash', 'none', '--feature-gates', 'CSIGlobalMountReconstruction=true']);
    assert.equal(r.code, 0, r.out + r.err);
    assert.match(r.out, /^scenario shared-volume {2}feature gates CSIGlobalMountReconstruction=true/);
    assert.match(r.out, /runs 1 {2}crash points 0/);
    assert.match(r.out, /no invariant violated/);
  });

  it('exit 2 with one line naming file, line and field for a bad scenario; and for bad flags', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'explore-'));
    try {
      const file = path.join(dir, 'bad.yaml');
      writeFileSync(file, 'name: bad\ndrivers:\n  - name: d\n    mode: sloppy\n');
      const r = await cli(['explore', file]);
      assert.equal(r.code, 2);
      assert.equal(r.err, `nodevol explore: ${file}:4: drivers[0].mode: Invalid enum value. Expected 'strict' | 'lenient', received 'sloppy'\n`);
      assert.equal((await cli(['explore', '--scenario', 'kep-story-1', '--shard', '2/2'])).code, 2);
      assert.equal((await cli(['explore', '--scenario', 'kep-story-1', '--plan', 'crash:now'])).code, 2);
      assert.equal((await cli(['explore'])).code, 2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--shard I/N splits the runs deterministically: the shards together run every crash point once', async () => {
    const common = {
      scenario: parseScenario('name: mount-only\ndrivers: [{ name: csi.example.com }]\nvolumes: [{ name: pv-1 }]\npods: [{ uid: pod-a, volumes: [pv-1] }]\n', 'mount-only.yaml'),
      gates: FeatureGate.of({ CSIGlobalMountReconstruction: true }),
      crash: 'restart' as const,
      depth: 1 as const,
      faults: false,
      seed: 1,
      runs: 1,
      replayCommand: () => '',
    };
    const all = await explore(common);
    const s0 = await explore({ ...common, shard: { index: 0, count: 2 } });
    const s1 = await explore({ ...common, shard: { index: 1, count: 2 } });
    // Every shard runs the fault-free run to enumerate the crash points.
    assert.equal(s0.runs + s1.runs, all.runs + 1);
    assert.ok(s0.runs > 1 && s1.runs > 1);
    assert.deepEqual(all.violations.map((v) => v.invariant), []);
  });
});
