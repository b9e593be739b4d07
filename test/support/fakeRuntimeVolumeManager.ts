// The agent runtime's volume manager, faked for test/unit/agent/runtime*.test.ts.
import type { RuntimeVolumeManager } from '../../src/agent/runtime.js';
import { deferred, type Deferred } from './fakeLoopScheduler.js';

/** The fake and the knobs its tests turn. */
export interface FakeVolumeManager {
  readonly vm: RuntimeVolumeManager;
  /** Resolve to end reconstruction. */
  readonly reconstruction: Deferred;
  readonly passes: { populator: number[]; reconciler: number[]; nodeStatus: number[] };
  /** A populator pass held until resolved. */
  hold: Deferred | undefined;
  /** What statesHaveBeenSynced answers. */
  synced: boolean;
  /** What syncNodeStatus resolves to (the volumesInUse written, or undefined: nothing written). */
  written: string[] | undefined;
  /** What the volume manager's activity answers; no activity function when undefined at set-up. */
  activity: string;
  populatorIdle: boolean;
  /** An operation in flight: waitForOperations resolves with it. */
  operation: Deferred | undefined;
  /** How many times reconstruction (the volume manager's start) began. */
  starts: number;
}

/**
 * A volume manager for the runtime's tests: each pass records the fake time it ran at, and what
 * the runtime asks (reconstruction, a held populator pass, operations in flight, the answers of
 * statesHaveBeenSynced, syncNodeStatus, activity and populatorIdle) is set on the fake.
 */
export function fakeVolumeManager(now: () => number, o: { withActivity?: boolean; withIdle?: boolean } = {}): FakeVolumeManager {
  const f: FakeVolumeManager = {
    reconstruction: deferred(),
    passes: { populator: [], reconciler: [], nodeStatus: [] },
    hold: undefined,
    synced: true,
    written: undefined,
    activity: 'a',
    populatorIdle: false,
    operation: undefined,
    starts: 0,
    vm: undefined as unknown as RuntimeVolumeManager,
  };
  const vm: RuntimeVolumeManager = {
    start: () => {
      f.starts++;
      return f.reconstruction.promise;
    },
    populateOnce: () => {
      f.passes.populator.push(now());
      return f.hold?.promise ?? Promise.resolve();
    },
    reconcileOnce: () => {
      f.passes.reconciler.push(now());
      return Promise.resolve();
    },
    syncNodeStatus: () => {
      f.passes.nodeStatus.push(now());
      return Promise.resolve(f.written);
    },
    waitForOperations: () => f.operation?.promise ?? Promise.resolve(),
    reconciler: { statesHaveBeenSynced: () => f.synced },
    ...(o.withActivity === true ? { activity: () => f.activity } : {}),
    ...(o.withIdle === true ? { populatorIdle: () => f.populatorIdle } : {}),
  };
  (f as { vm: RuntimeVolumeManager }).vm = vm;
  return f;
}

