// The `reconstruction-first` invariant and the slow disk that makes it observable:
// kubelet reconstructs before its reconciler's first pass and writes volumesInUse only once its
// states synced. A runtime that starts its loops before reconstruction ends (`void
// this.vm.start()` in AgentRuntime.start) passed every check while reconstruction took no virtual
// time; on a slow disk it takes seconds, and the reconciler then mounts a new pod's volume first.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { AgentRuntime } from '../../../src/agent/runtime.js';
import { FeatureGate } from '../../../src/features/features.js';
import { generateScenario } from '../../../src/sim/generate.js';
import { loadBuiltinScenario, parseScenario } from '../../../src/sim/scenario.js';
import { RECONSTRUCTION_ENDED_LINE, simulate, type SimResult } from '../../../src/sim/simulation.js';
import { VolumeManager } from '../../../src/volumemanager/volumeManager.js';

const everyGate = (): FeatureGate => FeatureGate.parse(['AllAlpha=true']).gate;
const names = (r: SimResult): string[] => [...new Set(r.violations.map((v) => v.invariant))].sort();

/** The slip, in the test only: VolumeManager.start (reconstruction) resolves at once and runs on behind it. */
const originalStart = Object.getOwnPropertyDescriptor(VolumeManager.prototype, 'start')?.value as (this: VolumeManager) => Promise<void>;

function withLoopsBeforeReconstruction<T>(f: () => Promise<T>): Promise<T> {
  const original = originalStart;
  VolumeManager.prototype.start = function (this: VolumeManager): Promise<void> {
    void original.call(this);
    return Promise.resolve();
  };
  return f().finally(() => {
    VolumeManager.prototype.start = original;
  });
}

describe('simulator: reconstruction-first and the slow disk', () => {
  after(() => {
    VolumeManager.prototype.start = originalStart;
  });

  it('reconstruction-on-slow-disk, every gate on: converges, nothing before reconstruction, and reconstruction took seconds of virtual time', async () => {
    const scenario = loadBuiltinScenario('reconstruction-on-slow-disk');
    for (const seed of [1, 2, 3]) {
      const r = await simulate({ scenario, gates: everyGate(), seed, fullTrace: true });
      assert.deepEqual(r.violations.map((v) => `${v.invariant}: ${v.message}`), [], `seed ${seed}`);
      assert.equal(r.endReason, 'converged');
      // The second life's first CSI call comes after its reconstruction, which took over a second.
      const second = r.trace.filter((s) => s.life === 2);
      const start = second[0]?.timeMs ?? 0;
      const firstCsi = second.find((s) => s.calls.some((c) => c.port === 'csi'));
      assert.ok(firstCsi !== undefined && firstCsi.timeMs - start > 1000, `seed ${seed}: life 2's first CSI call ${firstCsi?.timeMs} ms, start ${start} ms`);
    }
  });

  it('the loops started before reconstruction ended (the slip) break reconstruction-first in the built-in scenario', async () => {
    const scenario = loadBuiltinScenario('reconstruction-on-slow-disk');
    const r = await withLoopsBeforeReconstruction(() => simulate({ scenario, gates: everyGate(), seed: 1 }));
    assert.ok(names(r).includes('reconstruction-first'), JSON.stringify(r.violations));
    assert.match(r.violations.find((v) => v.invariant === 'reconstruction-first')?.message ?? '', /^engine life 2: .* before its reconstruction ended$/);
  });

  it('the simulator starts every engine life through the shipped AgentRuntime.start, which waits for reconstruction (its own start order, not a copy)', async () => {
    const original = Object.getOwnPropertyDescriptor(AgentRuntime.prototype, 'start')?.value as (this: AgentRuntime) => Promise<void>;
    const atCall: string[] = [];
    const atEnd: string[] = [];
    AgentRuntime.prototype.start = function (this: AgentRuntime): Promise<void> {
      const started = original.call(this);
      atCall.push(this.getPhase());
      return started.then(() => {
        atEnd.push(this.getPhase());
      });
    };
    let r;
    try {
      r = await simulate({ scenario: loadBuiltinScenario('reconstruction-on-slow-disk'), gates: everyGate(), seed: 1 });
    } finally {
      AgentRuntime.prototype.start = original;
    }
    assert.equal(r.endReason, 'converged');
    // Every life (the scenario restarts the engine) is started by AgentRuntime.start: still
    // reconstructing when the call returns, running once its promise resolved.
    assert.ok(atCall.length >= 2, JSON.stringify(atCall));
    assert.deepEqual(atCall, atCall.map(() => 'reconstructing'));
    assert.equal(atEnd.at(-1), 'running');
  });

  it('the witness is the reconciler\'s own line, logged once reconstruction ended', () => {
    assert.equal(RECONSTRUCTION_ENDED_LINE, 'Reconciler: start to sync state');
  });

  it('a slowDisk step is parsed, written back and refused out of bounds naming its field', () => {
    const text = 'name: s\ndrivers: [{ name: d }]\nsteps:\n  - slowDisk: { latency: 200ms, for: 30s }\n';
    const s = parseScenario(text, 's.yaml');
    assert.deepEqual(s.steps, [{ kind: 'slowDisk', latencyMs: 200, ms: 30_000 }]);
    assert.throws(() => parseScenario(text.replace('200ms', '11s'), 's.yaml'), /s\.yaml:4: steps\[0\]\.slowDisk\.latency: must be from 1ms to 10s/);
    assert.throws(() => parseScenario(text.replace('200ms', 'slow'), 's.yaml'), /s\.yaml:4: steps\[0\]\.slowDisk\.latency: must be a duration/);
  });

  it('the generator draws slow disks, over a restart or a reboot', () => {
    const steps = Array.from({ length: 200 }, (_, i) => generateScenario(i + 1).steps).flat();
    const at = steps.flatMap((s, i) => (s.kind === 'slowDisk' ? [i] : []));
    assert.ok(at.length > 10, `${at.length} slow disks in 200 workloads`);
    assert.ok(at.some((i) => steps[i + 1]?.kind === 'restart') && at.some((i) => steps[i + 1]?.kind === 'reboot'));
  });
});
