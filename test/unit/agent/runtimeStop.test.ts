// A stop of the agent's runtime (SIGTERM): the loops stop at once, and the stop waits for the loop
// iterations and volume operations in flight up to the grace period, timed by the runtime's own
// scheduler (the simulator's virtual clock drives it). Fake time: a timer queue the test advances.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentRuntime, SHUTDOWN_GRACE_TIMER } from '../../../src/agent/runtime.js';
import { deferred, FakeLoopScheduler, settle, type Deferred } from '../../support/fakeLoopScheduler.js';
import { fakeVolumeManager } from '../../support/fakeRuntimeVolumeManager.js';
import { RecordingLogger } from '../../support/hosts.js';

const GRACE_MS = 30_000;

function setUp(): {
  runtime: AgentRuntime;
  clock: FakeLoopScheduler;
  passes: { populator: number[]; reconciler: number[]; nodeStatus: number[] };
  /** An operation in flight: waitForOperations resolves when it is resolved. */
  setOperation: (d: Deferred | undefined) => void;
  /** A populator pass held until resolved. */
  holdPopulator: (d: Deferred | undefined) => void;
  reconstruction: Deferred;
  /** How many times reconstruction (the volume manager's start) began. */
  reconstructions: () => number;
} {
  const clock = new FakeLoopScheduler();
  const fake = fakeVolumeManager(() => clock.now);
  const runtime = new AgentRuntime(fake.vm, new RecordingLogger(), {
    nodeStatusUpdatePeriodMs: 10_000,
    shutdownGraceMs: GRACE_MS,
    compactWhenIdle: false,
    now: () => clock.now,
    scheduler: clock,
  });
  return {
    runtime,
    clock,
    passes: fake.passes,
    setOperation: (d) => (fake.operation = d),
    holdPopulator: (d) => (fake.hold = d),
    reconstruction: fake.reconstruction,
    reconstructions: () => fake.starts,
  };
}

/** The operation a stop waits for ends: the stop returns, not abandoned, and no loop ever ran. */
async function operationEndsTheStop(t: ReturnType<typeof setUp>, op: Deferred, stop: { outcome: () => { abandoned: boolean } | undefined }): Promise<void> {
  op.resolve();
  await settle();
  assert.deepEqual(stop.outcome(), { abandoned: false });
  await t.clock.advanceTo(GRACE_MS);
  assert.equal(t.runtime.getPhase(), 'stopped');
  assert.deepEqual(t.passes, { populator: [], reconciler: [], nodeStatus: [] });
}

/** Tracks a stop's outcome without waiting for it. */
function track(p: Promise<{ abandoned: boolean }>): { outcome: () => { abandoned: boolean } | undefined } {
  let outcome: { abandoned: boolean } | undefined;
  void p.then((o) => (outcome = o));
  return { outcome: () => outcome };
}

describe('AgentRuntime.stop: the grace period on the runtime\'s scheduler', () => {
  it('an operation in flight that finishes within the grace period: not abandoned, and the grace timer is cleared', async () => {
    const t = setUp();
    t.reconstruction.resolve();
    await t.runtime.start();
    await t.clock.advanceTo(1_000);
    const op = deferred();
    t.setOperation(op);
    const stop = track(t.runtime.stop());
    await t.clock.advanceTo(1_000 + GRACE_MS - 1);
    assert.equal(stop.outcome(), undefined, 'waits for the operation');
    assert.equal(t.runtime.getPhase(), 'stopping');
    op.resolve();
    await settle();
    assert.deepEqual(stop.outcome(), { abandoned: false });
    assert.equal(t.runtime.getPhase(), 'stopped');
    assert.deepEqual(t.clock.labels(), [], 'no timer left behind: the grace timer and every loop timer are cleared');
  });

  it('an operation still in flight when the grace period elapses is abandoned, at the grace period and not before', async () => {
    const t = setUp();
    t.reconstruction.resolve();
    await t.runtime.start();
    await t.clock.advanceTo(500);
    t.setOperation(deferred());
    const stop = track(t.runtime.stop());
    await settle();
    assert.deepEqual(t.clock.labels(), [SHUTDOWN_GRACE_TIMER], 'only the grace timer is pending; the loops\' timers are gone');
    await t.clock.advanceTo(500 + GRACE_MS - 1);
    assert.equal(stop.outcome(), undefined);
    await t.clock.advanceTo(500 + GRACE_MS);
    assert.deepEqual(stop.outcome(), { abandoned: true });
    assert.equal(t.runtime.getPhase(), 'stopped');
  });

  it('a grace period given to stop() overrides the runtime\'s', async () => {
    const t = setUp();
    t.reconstruction.resolve();
    await t.runtime.start();
    t.setOperation(deferred());
    const stop = track(t.runtime.stop({ graceMs: 5_000 }));
    await t.clock.advanceTo(4_999);
    assert.equal(stop.outcome(), undefined);
    await t.clock.advanceTo(5_000);
    assert.deepEqual(stop.outcome(), { abandoned: true });
  });

  it('waits for a loop iteration in flight; no loop iteration starts after stop()', async () => {
    const t = setUp();
    t.reconstruction.resolve();
    await t.runtime.start();
    await t.clock.advanceTo(1_000);
    const pass = deferred();
    t.holdPopulator(pass);
    await t.clock.advanceTo(1_100);
    const before = { populator: t.passes.populator.length, reconciler: t.passes.reconciler.length, nodeStatus: t.passes.nodeStatus.length };
    assert.equal(t.passes.populator.at(-1), 1_100, 'a populator pass is running');
    const stop = track(t.runtime.stop());
    await t.clock.advanceTo(2_000);
    assert.equal(stop.outcome(), undefined, 'the pass in flight holds the stop');
    t.holdPopulator(undefined);
    pass.resolve();
    await settle();
    assert.deepEqual(stop.outcome(), { abandoned: false });
    await t.clock.advanceTo(10 * GRACE_MS);
    assert.deepEqual({ populator: t.passes.populator.length, reconciler: t.passes.reconciler.length, nodeStatus: t.passes.nodeStatus.length }, before);
  });

  it('stopped during reconstruction: no loop starts when reconstruction ends, after the stop returned', async () => {
    const t = setUp();
    const started = t.runtime.start();
    await settle();
    assert.equal(t.runtime.getPhase(), 'reconstructing');
    assert.deepEqual(await t.runtime.stop(), { abandoned: false });
    t.reconstruction.resolve();
    await started;
    await t.clock.advanceTo(GRACE_MS);
    assert.equal(t.runtime.getPhase(), 'stopped');
    assert.deepEqual(t.passes, { populator: [], reconciler: [], nodeStatus: [] });
    assert.deepEqual(t.clock.labels(), []);
  });

  it('stopped during reconstruction, which ends while the stop still waits for an operation: no loop starts, the stop goes on', async () => {
    const t = setUp();
    const started = t.runtime.start();
    await settle();
    assert.equal(t.runtime.getPhase(), 'reconstructing');
    const op = deferred();
    t.setOperation(op);
    const stop = track(t.runtime.stop());
    await settle();
    t.reconstruction.resolve();
    await started;
    assert.equal(t.runtime.getPhase(), 'stopping', 'the stop goes on');
    assert.deepEqual(t.clock.labels(), [SHUTDOWN_GRACE_TIMER], 'no loop timer: only the grace period');
    await operationEndsTheStop(t, op, stop);
  });

  it('started while a stop still waits for an operation: nothing starts, not even reconstruction', async () => {
    const t = setUp();
    const op = deferred();
    t.setOperation(op);
    const stop = track(t.runtime.stop());
    await settle();
    assert.equal(t.runtime.getPhase(), 'stopping');
    t.reconstruction.resolve();
    await t.runtime.start();
    assert.equal(t.runtime.getPhase(), 'stopping', 'the stop goes on');
    assert.equal(t.reconstructions(), 0);
    await operationEndsTheStop(t, op, stop);
  });

  it('stopped before it started: start() starts nothing', async () => {
    const t = setUp();
    assert.deepEqual(await t.runtime.stop(), { abandoned: false });
    t.reconstruction.resolve();
    await t.runtime.start();
    await t.clock.advanceTo(GRACE_MS);
    assert.equal(t.runtime.getPhase(), 'stopped');
    assert.deepEqual(t.passes, { populator: [], reconciler: [], nodeStatus: [] });
  });
});
