// The agent's runtime as the probes and the operator see it: /healthz (health: a loop or
// reconstruction stuck past the stall threshold), /readyz (isReady), the housekeeping loop, a loop
// iteration that fails, the node status line, the default timers and the idle heap compaction.
// Fake time: a scheduler queue the test advances, or node:test's mock timers for the global
// setTimeout/setInterval the runtime uses when given no scheduler.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { AgentRuntime, DEFAULT_LOOP_STALL_THRESHOLD_MS, type RuntimeOptions, type RuntimeVolumeManager } from '../../../src/agent/runtime.js';
import { CHECK_PERIOD_MS, IDLE_AFTER_MS } from '../../../src/agent/idleMemory.js';
import { deferred, FakeLoopScheduler, settle } from '../../support/fakeLoopScheduler.js';
import { fakeVolumeManager, type FakeVolumeManager } from '../../support/fakeRuntimeVolumeManager.js';
import { RecordingLogger } from '../../support/hosts.js';

function setUp(options: Partial<RuntimeOptions> = {}): { runtime: AgentRuntime; clock: FakeLoopScheduler; fake: FakeVolumeManager; logger: RecordingLogger } {
  const clock = new FakeLoopScheduler();
  const fake = fakeVolumeManager(() => clock.now);
  const logger = new RecordingLogger();
  const runtime = new AgentRuntime(fake.vm, logger, { nodeStatusUpdatePeriodMs: 3_600_000, shutdownGraceMs: 50, compactWhenIdle: false, now: () => clock.now, scheduler: clock, ...options });
  return { runtime, clock, fake, logger };
}

describe('AgentRuntime.health: /healthz', () => {
  it('a runtime not started is healthy; a stopped one is not, with the reason', async () => {
    const { runtime } = setUp();
    assert.deepEqual(runtime.health(), { healthy: true });
    await runtime.stop();
    assert.deepEqual(runtime.health(), { healthy: false, reason: 'stopped' });
  });

  it('a reconstruction that has not ended: healthy up to the threshold, unhealthy after it; once it ends, healthy', async () => {
    const { runtime, clock, fake } = setUp({ loopStallThresholdMs: 1_000 });
    const started = runtime.start();
    await clock.advanceTo(1_000);
    assert.deepEqual(runtime.health(), { healthy: true }, 'exactly the threshold is not a stall');
    await clock.advanceTo(1_001);
    assert.deepEqual(runtime.health(), { healthy: false, reason: 'reconstruction has not completed an iteration for 1001 ms (threshold 1000 ms)' });
    fake.reconstruction.resolve();
    await started;
    await clock.advanceTo(5_000);
    assert.deepEqual(runtime.health(), { healthy: true }, 'reconstruction ended and the loops pass');
    await runtime.stop();
  });

  it('a loop iteration stuck past the default threshold names the loop; a loop waiting for its next pass, however long, does not count', async () => {
    const { runtime, clock, fake } = setUp();
    fake.reconstruction.resolve();
    await runtime.start();
    await clock.advanceTo(50);
    fake.hold = deferred(); // the populator's pass at 100 never ends
    await clock.advanceTo(100 + DEFAULT_LOOP_STALL_THRESHOLD_MS);
    // The node status loop has waited 60 s for its next pass (an hour apart): not a stall.
    assert.deepEqual(fake.passes.nodeStatus, [0]);
    assert.deepEqual(runtime.health(), { healthy: true });
    await clock.advanceTo(101 + DEFAULT_LOOP_STALL_THRESHOLD_MS);
    assert.deepEqual(runtime.health(), { healthy: false, reason: 'desiredStateOfWorldPopulator has not completed an iteration for 60001 ms (threshold 60000 ms)' });
    const pass = fake.hold;
    fake.hold = undefined;
    pass.resolve();
    await clock.advanceTo(200 + DEFAULT_LOOP_STALL_THRESHOLD_MS);
    assert.deepEqual(runtime.health(), { healthy: true });
    await runtime.stop();
  });

  it('without `now`, the stall check reads the monotonic clock', async (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
    const fake = fakeVolumeManager(() => 0);
    const runtime = new AgentRuntime(fake.vm, new RecordingLogger(), { nodeStatusUpdatePeriodMs: 3_600_000, shutdownGraceMs: 50, compactWhenIdle: false });
    assert.deepEqual(runtime.health(), { healthy: true });
    const started = runtime.start();
    await settle();
    assert.deepEqual(runtime.health(), { healthy: true }, 'reconstruction started a moment ago');
    fake.reconstruction.resolve();
    await started;
    assert.deepEqual(runtime.health(), { healthy: true });
    assert.deepEqual(await runtime.stop(), { abandoned: false });
  });
});

describe('AgentRuntime.isReady: /readyz', () => {
  it('ready only once running with the states synced from the node status', async () => {
    const { runtime, clock, fake } = setUp();
    assert.equal(runtime.isReady(), false, 'not started');
    const started = runtime.start();
    await clock.advanceTo(10);
    assert.equal(runtime.isReady(), false, 'reconstructing');
    fake.synced = false;
    fake.reconstruction.resolve();
    await started;
    assert.equal(runtime.getPhase(), 'running');
    assert.equal(runtime.isReady(), false, 'running, states not synced yet');
    fake.synced = true;
    assert.equal(runtime.isReady(), true);
    await runtime.stop();
    assert.equal(runtime.isReady(), false, 'stopped');
  });
});

describe('AgentRuntime: the housekeeping loop, failing iterations, the node status line', () => {
  it('housekeeping runs every period after the previous run; a run that fails is logged and the loop goes on', async () => {
    const runs: number[] = [];
    const { runtime, clock, fake, logger } = setUp({
      housekeeping: {
        periodMs: 500,
        run: () => {
          runs.push(clock.now);
          return runs.length === 2 ? Promise.reject(new Error('cleanup failed')) : Promise.resolve();
        },
      },
    });
    fake.reconstruction.resolve();
    await runtime.start();
    await settle(); // the first passes end: each loop waits on its timer
    assert.deepEqual(clock.labels(), ['desiredStateOfWorldPopulator', 'housekeeping', 'nodeStatus', 'reconciler']);
    await clock.advanceTo(1_600);
    assert.deepEqual(runs, [0, 500, 1_000, 1_500]);
    const failed = logger.lines.filter((l) => l.msg === 'Loop iteration failed');
    assert.equal(failed.length, 1);
    assert.equal(failed[0]?.severity, 'E');
    assert.equal(failed[0]?.values['loop'], 'housekeeping');
    assert.equal((failed[0]?.values['err'] as Error).message, 'cleanup failed');
    await runtime.stop();
  });

  it('no housekeeping option: no housekeeping loop', async () => {
    const { runtime, clock, fake } = setUp();
    fake.reconstruction.resolve();
    await runtime.start();
    await settle();
    assert.deepEqual(clock.labels(), ['desiredStateOfWorldPopulator', 'nodeStatus', 'reconciler']);
    await runtime.stop();
  });

  it('a node status sync that wrote volumesInUse says so at V(4); one that wrote nothing says nothing', async () => {
    const { runtime, clock, fake, logger } = setUp({ nodeStatusUpdatePeriodMs: 1_000 });
    fake.reconstruction.resolve();
    await runtime.start();
    await clock.advanceTo(500);
    assert.equal(logger.lines.filter((l) => l.msg === 'Updated node status volumesInUse').length, 0);
    fake.written = ['kubernetes.io/csi/driver^vol-1'];
    await clock.advanceTo(1_000);
    const lines = logger.lines.filter((l) => l.msg === 'Updated node status volumesInUse');
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.level, 4);
    assert.deepEqual(lines[0]?.values, { volumesInUse: ['kubernetes.io/csi/driver^vol-1'] });
    await runtime.stop();
  });
});

describe('AgentRuntime: the loops\' timers around an idle sleep and a stop', () => {
  /** A runtime whose populator reports idle as `populatorIdle` says, with the cluster's change signal; the reconciler idle for `reconcilerIdleForMs`. */
  function idleSetUp(reconcilerIdleForMs: number | undefined): { runtime: AgentRuntime; clock: FakeLoopScheduler; fake: FakeVolumeManager; changed: () => void; reconcilerPasses: number[] } {
    const clock = new FakeLoopScheduler();
    const fake = fakeVolumeManager(() => clock.now, { withIdle: true });
    const reconcilerPasses: number[] = [];
    const vm: RuntimeVolumeManager = {
      ...fake.vm,
      reconcileOnce: () => {
        reconcilerPasses.push(clock.now);
        return Promise.resolve();
      },
      reconcilerIdleForMs: () => reconcilerIdleForMs,
    };
    const listeners: (() => void)[] = [];
    const runtime = new AgentRuntime(vm, new RecordingLogger(), {
      nodeStatusUpdatePeriodMs: 3_600_000,
      shutdownGraceMs: 50,
      compactWhenIdle: false,
      now: () => clock.now,
      scheduler: clock,
      clusterChanges: { subscribe: (l) => listeners.push(l), signalsEveryChange: () => true },
    });
    return {
      runtime,
      clock,
      fake,
      changed: () => {
        for (const l of listeners) l();
      },
      reconcilerPasses,
    };
  }

  it('a change signalled while a busy populator waits for its poll changes nothing: it passes every 100 ms', async () => {
    const { runtime, clock, fake, changed } = idleSetUp(undefined);
    fake.reconstruction.resolve();
    await runtime.start();
    await clock.advanceTo(50);
    changed();
    await clock.advanceTo(150);
    changed();
    await clock.advanceTo(300);
    assert.deepEqual(fake.passes.populator, [0, 100, 200, 300]);
    await runtime.stop();
  });

  it('a forced pass due at once (idle for 0 ms) runs 1 ms later, not on the same instant', async () => {
    const { runtime, clock, reconcilerPasses, fake } = idleSetUp(0);
    fake.populatorIdle = true;
    fake.reconstruction.resolve();
    await runtime.start();
    await clock.advanceTo(3);
    assert.deepEqual(reconcilerPasses, [0, 1, 2, 3]);
    await runtime.stop();
  });

  it('a change signalled after a stop sets no timer', async () => {
    const { runtime, clock, fake, changed } = idleSetUp(1_000);
    fake.populatorIdle = true;
    fake.reconstruction.resolve();
    await runtime.start();
    await clock.advanceTo(10);
    await runtime.stop();
    changed();
    assert.deepEqual(clock.labels(), []);
  });

  it('an iteration that ends after the stop began sets no timer for the next one, and asks no idle check', async () => {
    const { runtime, clock, fake } = idleSetUp(undefined);
    fake.reconstruction.resolve();
    await runtime.start();
    await clock.advanceTo(50);
    const pass = deferred();
    fake.hold = pass;
    await clock.advanceTo(100);
    let outcome: { abandoned: boolean } | undefined;
    void runtime.stop().then((o) => (outcome = o));
    await settle();
    assert.deepEqual(clock.labels(), ['shutdownGrace']);
    fake.hold = undefined;
    pass.resolve();
    await settle();
    assert.deepEqual(outcome, { abandoned: false });
    assert.deepEqual(clock.labels(), [], 'no timer left behind');
  });
});

describe('AgentRuntime without a scheduler: the global timers', () => {
  it('the loops poll on setTimeout, a wake clears the idle timer it replaces, and a stop\'s grace period runs on it too', async (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
    let now = 0;
    const fake = fakeVolumeManager(() => now, { withIdle: true });
    const listeners: (() => void)[] = [];
    const runtime = new AgentRuntime(fake.vm, new RecordingLogger(), {
      nodeStatusUpdatePeriodMs: 3_600_000,
      shutdownGraceMs: 5_000,
      compactWhenIdle: false,
      now: () => now,
      clusterChanges: { subscribe: (l) => listeners.push(l), signalsEveryChange: () => true },
    });
    /** Millisecond by millisecond: each timer's callback sees its own time, and the promises it starts settle before the next. */
    const advance = async (to: number): Promise<void> => {
      await settle();
      while (now < to) {
        now++;
        t.mock.timers.tick(1);
        await settle();
      }
    };
    fake.reconstruction.resolve();
    await runtime.start();
    await advance(100);
    await advance(200);
    assert.deepEqual(fake.passes.populator, [0, 100, 200], 'a busy populator polls every 100 ms');
    fake.populatorIdle = true; // from the pass at 300 on it sleeps (up to 1 s)
    await advance(300);
    await advance(330);
    for (const l of listeners) l(); // a change: the pass at 400, and the 1 s timer it replaces (due at 1,300) never fires
    fake.populatorIdle = false;
    await advance(1_300);
    assert.deepEqual(fake.passes.populator.filter((p) => p >= 300), [300, 400, 500, 600, 700, 800, 900, 1_000, 1_100, 1_200, 1_300]);
    fake.operation = deferred();
    let outcome: { abandoned: boolean } | undefined;
    void runtime.stop().then((o) => (outcome = o));
    await advance(1_300 + 4_999);
    assert.equal(outcome, undefined);
    await advance(1_300 + 5_000);
    assert.deepEqual(outcome, { abandoned: true });
  });
});

describe('AgentRuntime: the idle heap compaction', () => {
  /** Fake V8 gc (exposeGc returns a global gc when there is one): counts its calls. */
  function fakeGc(t: TestContext): { calls: () => number } {
    let calls = 0;
    const g = globalThis as { gc?: unknown };
    const had = Object.prototype.hasOwnProperty.call(g, 'gc');
    const previous = g.gc;
    g.gc = (): void => {
      calls++;
    };
    t.after(() => {
      if (had) g.gc = previous;
      else delete g.gc;
    });
    return { calls: () => calls };
  }

  /** Runs a started runtime's compaction checks over an idle stretch after the heap grew by far more than 16 MB. */
  async function idleAfterGrowth(t: TestContext, compactWhenIdle: boolean | undefined, withActivity: boolean): Promise<{ gcCalls: number; lines: RecordingLogger['lines']; heap: number[] }> {
    t.mock.timers.enable({ apis: ['setInterval'] });
    const gc = fakeGc(t);
    const clock = new FakeLoopScheduler();
    const fake = fakeVolumeManager(() => clock.now, { withActivity });
    const logger = new RecordingLogger();
    const runtime = new AgentRuntime(fake.vm, logger, {
      nodeStatusUpdatePeriodMs: 3_600_000,
      shutdownGraceMs: 50,
      now: () => clock.now,
      scheduler: clock,
      ...(compactWhenIdle === undefined ? {} : { compactWhenIdle }),
    });
    fake.reconstruction.resolve();
    await runtime.start();
    const heap = new Array<number>(3_000_000).fill(1.5); // tens of MB of committed heap
    await clock.advanceTo(CHECK_PERIOD_MS);
    t.mock.timers.tick(CHECK_PERIOD_MS); // the first look sees the activity
    await clock.advanceTo(CHECK_PERIOD_MS + IDLE_AFTER_MS);
    t.mock.timers.tick(CHECK_PERIOD_MS); // idle long enough, grown enough
    const gcCalls = gc.calls();
    await runtime.stop();
    t.mock.timers.tick(10 * CHECK_PERIOD_MS);
    assert.equal(gc.calls(), gcCalls, 'no look after the stop');
    return { gcCalls, lines: logger.lines, heap };
  }

  it('idle after growing: two full collections and the V(4) line with the memory before and after', async (t: TestContext) => {
    const { gcCalls, lines, heap } = await idleAfterGrowth(t, undefined, true);
    assert.equal(heap.length, 3_000_000);
    assert.equal(gcCalls, 2);
    const compacted = lines.filter((l) => l.msg === 'Compacted the heap after going idle');
    assert.equal(compacted.length, 1);
    assert.equal(compacted[0]?.level, 4);
    for (const k of ['heapUsedBefore', 'heapUsedAfter', 'heapTotalBefore', 'heapTotalAfter', 'rssBefore', 'rssAfter']) assert.equal(typeof compacted[0]?.values[k], 'number', k);
  });

  it('compactWhenIdle false, or a volume manager that reports no activity: never', async (t: TestContext) => {
    await t.test('compactWhenIdle: false', async (t2: TestContext) => {
      const { gcCalls, lines } = await idleAfterGrowth(t2, false, true);
      assert.equal(gcCalls, 0);
      assert.equal(lines.filter((l) => l.msg === 'Compacted the heap after going idle').length, 0);
    });
    await t.test('no activity', async (t2: TestContext) => {
      const { gcCalls } = await idleAfterGrowth(t2, true, false);
      assert.equal(gcCalls, 0);
    });
  });
});
