// The agent's loops on an idle node: a populator or reconciler with nothing to do sleeps until a
// change is signalled (at most until its forced pass), and a signalled change runs it no later
// than its 100 ms poll would have. Fake time: a scheduler queue driven by the test.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentRuntime, POPULATOR_IDLE_MAX_SLEEP_MS, type RuntimeVolumeManager } from '../../../src/agent/runtime.js';
import { DSW_POPULATOR_LOOP_PERIOD_MS, RECONCILER_LOOP_PERIOD_MS } from '../../../src/volumemanager/volumeManager.js';
import { FakeLoopScheduler } from '../../support/fakeLoopScheduler.js';
import { RecordingLogger } from '../../support/hosts.js';

interface FakeVmState {
  populatorPasses: number[];
  reconcilerPasses: number[];
  /** When a node status sync ran. */
  nodeStatusPasses: number[];
  populatorIdle: boolean;
  /** What reconcilerIdleForMs answers (undefined: a pass could start something). */
  reconcilerIdleForMs: number | undefined;
  /** Runs during the next populator pass (a change arriving while it runs). */
  duringPopulatorPass?: () => void;
  /** Whether a node status sync changes the state (volumes marked reported in use). */
  nodeStatusChangesState?: boolean;
  /** reconcilerIdleForMs throws. */
  reconcilerIdleThrows?: boolean;
}

function setUp(options: { signalsEveryChange: boolean; nodeStatusPeriodMs?: number; reconstruction?: Promise<void> }): {
  runtime: AgentRuntime;
  clock: FakeLoopScheduler;
  state: FakeVmState;
  logger: RecordingLogger;
  clusterChanged: () => void;
  operationCompleted: () => void;
} {
  const clock = new FakeLoopScheduler();
  const state: FakeVmState = { populatorPasses: [], reconcilerPasses: [], nodeStatusPasses: [], populatorIdle: false, reconcilerIdleForMs: undefined };
  const clusterListeners: (() => void)[] = [];
  const operationListeners: (() => void)[] = [];
  let activity = 0;
  const vm: RuntimeVolumeManager = {
    start: () => options.reconstruction ?? Promise.resolve(),
    populateOnce: () => {
      state.populatorPasses.push(clock.now);
      const during = state.duringPopulatorPass;
      state.duringPopulatorPass = undefined;
      during?.();
      return Promise.resolve();
    },
    reconcileOnce: () => {
      state.reconcilerPasses.push(clock.now);
      return Promise.resolve();
    },
    syncNodeStatus: () => {
      state.nodeStatusPasses.push(clock.now);
      if (state.nodeStatusChangesState === true) activity++;
      return Promise.resolve(undefined);
    },
    waitForOperations: () => Promise.resolve(),
    activity: () => String(activity),
    populatorIdle: () => state.populatorIdle,
    reconcilerIdleForMs: () => {
      if (state.reconcilerIdleThrows === true) throw new Error('broken idle check');
      return state.reconcilerIdleForMs;
    },
    onOperationComplete: (listener) => operationListeners.push(listener),
    reconciler: { statesHaveBeenSynced: () => true },
  };
  const logger = new RecordingLogger();
  const runtime = new AgentRuntime(vm, logger, {
    nodeStatusUpdatePeriodMs: options.nodeStatusPeriodMs ?? 3_600_000,
    shutdownGraceMs: 50,
    compactWhenIdle: false,
    now: () => clock.now,
    scheduler: clock,
    clusterChanges: { subscribe: (l) => clusterListeners.push(l), signalsEveryChange: () => options.signalsEveryChange },
  });
  return {
    runtime,
    clock,
    state,
    logger,
    clusterChanged: () => {
      for (const l of clusterListeners) l();
    },
    operationCompleted: () => {
      for (const l of operationListeners) l();
    },
  };
}

describe('agent loops on an idle node', () => {
  // kubelet's volume manager Run: reconstruction (the reconciler's sync of states) comes before
  // the reconciler's first pass, and volumesInUse is written only once the states synced. A
  // runtime that starts its loops without waiting for reconstruction (`void this.vm.start()`)
  // passes before it ends.
  it('no populator, reconciler or node status pass before reconstruction ends; all three once it has', async () => {
    let reconstructed!: () => void;
    const reconstruction = new Promise<void>((resolve) => {
      reconstructed = resolve;
    });
    const { runtime, clock, state } = setUp({ signalsEveryChange: false, nodeStatusPeriodMs: 100, reconstruction });
    const started = runtime.start();
    await clock.advanceTo(5_000);
    assert.equal(runtime.getPhase(), 'reconstructing');
    assert.deepEqual({ populator: state.populatorPasses, reconciler: state.reconcilerPasses, nodeStatus: state.nodeStatusPasses }, { populator: [], reconciler: [], nodeStatus: [] });
    reconstructed();
    await started;
    assert.equal(runtime.getPhase(), 'running');
    await clock.advanceTo(5_100);
    assert.deepEqual(state.populatorPasses, [5_000, 5_100]);
    assert.deepEqual(state.reconcilerPasses, [5_000, 5_100]);
    assert.equal(state.nodeStatusPasses[0], 5_000);
    await runtime.stop();
  });

  it('busy: both loops pass every 100 ms, as kubelet polls', async () => {
    const { runtime, clock, state } = setUp({ signalsEveryChange: true });
    await runtime.start();
    await clock.advanceTo(1_000);
    assert.deepEqual(state.populatorPasses, [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1_000]);
    assert.deepEqual(state.reconcilerPasses, state.populatorPasses);
    await runtime.stop();
  });

  it('an idle populator sleeps until a signalled change, at most POPULATOR_IDLE_MAX_SLEEP_MS', async () => {
    const { runtime, clock, state } = setUp({ signalsEveryChange: true });
    state.populatorIdle = true;
    await runtime.start();
    await clock.advanceTo(2_500);
    assert.deepEqual(state.populatorPasses, [0, POPULATOR_IDLE_MAX_SLEEP_MS, 2 * POPULATOR_IDLE_MAX_SLEEP_MS]);
    await runtime.stop();
  });

  it('a signalled change runs it the period after its last pass, or at once when that is past', async () => {
    const { runtime, clock, state, clusterChanged } = setUp({ signalsEveryChange: true });
    state.populatorIdle = true;
    await runtime.start();
    await clock.advanceTo(30);
    clusterChanged(); // 30 ms after the pass at 0: runs at 100, as the poll would have
    await clock.advanceTo(450);
    clusterChanged(); // 350 ms after the pass at 100: runs at once
    await clock.advanceTo(460);
    assert.deepEqual(state.populatorPasses, [0, DSW_POPULATOR_LOOP_PERIOD_MS, 450]);
    await runtime.stop();
  });

  it('a change signalled while a pass runs keeps the next pass on the 100 ms poll', async () => {
    const { runtime, clock, state, clusterChanged } = setUp({ signalsEveryChange: true });
    state.populatorIdle = true;
    await runtime.start();
    await clock.advanceTo(30);
    clusterChanged(); // the pass at 100...
    state.duringPopulatorPass = clusterChanged; // ...meets another change while it runs
    await clock.advanceTo(250);
    assert.deepEqual(state.populatorPasses, [0, 100, 200]);
    await runtime.stop();
  });

  it('a view that cannot signal every change keeps the populator polling every 100 ms', async () => {
    const { runtime, clock, state } = setUp({ signalsEveryChange: false });
    state.populatorIdle = true;
    await runtime.start();
    await clock.advanceTo(300);
    assert.deepEqual(state.populatorPasses, [0, 100, 200, 300]);
    await runtime.stop();
  });

  it('an idle reconciler sleeps until its forced pass; an operation completing or a populator pass that did something wakes it', async () => {
    const { runtime, clock, state, operationCompleted } = setUp({ signalsEveryChange: true });
    state.populatorIdle = true;
    state.reconcilerIdleForMs = 1_000;
    await runtime.start();
    await clock.advanceTo(1_500);
    assert.deepEqual(state.reconcilerPasses, [0, 1_000]);
    operationCompleted(); // 500 ms after the pass at 1,000: at once
    await clock.advanceTo(1_510);
    assert.deepEqual(state.reconcilerPasses, [0, 1_000, 1_500]);
    // The populator's next pass (at 2,000) does something: the reconciler follows the period after its last pass.
    state.populatorIdle = false;
    await clock.advanceTo(2_000);
    state.populatorIdle = true;
    await clock.advanceTo(2_050);
    assert.deepEqual(state.reconcilerPasses, [0, 1_000, 1_500, 2_000]);
    assert.equal(RECONCILER_LOOP_PERIOD_MS, 100);
    await runtime.stop();
  });

  it('a node status sync that marks volumes reported in use wakes an idle reconciler; one that changes nothing does not', async () => {
    const { runtime, clock, state } = setUp({ signalsEveryChange: true, nodeStatusPeriodMs: 300 });
    state.populatorIdle = true;
    state.reconcilerIdleForMs = 1_000;
    await runtime.start();
    await clock.advanceTo(350);
    assert.deepEqual(state.reconcilerPasses, [0]);
    state.nodeStatusChangesState = true; // the sync at 600 marks volumes
    await clock.advanceTo(650);
    assert.deepEqual(state.reconcilerPasses, [0, 600]);
    await runtime.stop();
  });

  it('a forced pass due sooner than a period runs when it is due, not a period later', async () => {
    const { runtime, clock, state } = setUp({ signalsEveryChange: true });
    state.populatorIdle = true;
    state.reconcilerIdleForMs = 30;
    await runtime.start();
    await clock.advanceTo(35);
    assert.deepEqual(state.reconcilerPasses, [0, 30]);
    await runtime.stop();
  });

  it('an idle check that throws is logged and the loop keeps polling', async () => {
    const { runtime, clock, state, logger } = setUp({ signalsEveryChange: true });
    state.populatorIdle = true;
    state.reconcilerIdleThrows = true;
    await runtime.start();
    await clock.advanceTo(200);
    assert.deepEqual(state.reconcilerPasses, [0, 100, 200]);
    assert.ok(logger.lines.some((l) => l.severity === 'E' && l.msg === 'Loop idle check failed; polling' && l.values['loop'] === 'reconciler'));
    await runtime.stop();
  });

  it('stop() cancels an idle sleep: nothing runs afterwards', async () => {
    const { runtime, clock, state, clusterChanged } = setUp({ signalsEveryChange: true });
    state.populatorIdle = true;
    state.reconcilerIdleForMs = 1_000;
    await runtime.start();
    await runtime.stop();
    clusterChanged();
    await clock.advanceTo(5_000);
    assert.deepEqual(state.populatorPasses, [0]);
    assert.deepEqual(state.reconcilerPasses, [0]);
  });
});
