/**
 * The agent's runtime: kubelet's loops around the volume manager - reconstruction once, then the
 * DSW populator and the reconciler every 100 ms and the node status (volumesInUse) every
 * --node-status-update-frequency - plus a clean stop. Timers live here, never in the engine.
 */
import { getHeapStatistics } from 'node:v8';
import type { Logger } from '../ports/logger.js';
import { CHECK_PERIOD_MS, exposeGc, IdleMemoryCompactor } from './idleMemory.js';
import type { VolumeManager } from '../volumemanager/volumeManager.js';
import { DSW_POPULATOR_LOOP_PERIOD_MS, RECONCILER_LOOP_PERIOD_MS } from '../volumemanager/volumeManager.js';

/**
 * /healthz fails when a loop (or reconstruction) has not completed an iteration for this long:
 * every iteration is bounded (reads time out, CSI calls have deadlines and run outside the
 * loops), so a loop this late is stuck.
 */
export const DEFAULT_LOOP_STALL_THRESHOLD_MS = 60_000;

export interface RuntimeOptions {
  readonly nodeStatusUpdatePeriodMs: number;
  /** How long a stop waits for in-flight loop iterations and operations before abandoning them. */
  readonly shutdownGraceMs: number;
  /** Default {@link DEFAULT_LOOP_STALL_THRESHOLD_MS}. */
  readonly loopStallThresholdMs?: number;
  /**
   * Monotonic milliseconds for the stall check, the idle wake-ups and the idle heap compaction;
   * default performance.now (never the wall clock: a clock stepped forward by an hour while an
   * iteration runs must not fail /healthz, nor one stepped back hide a stuck loop).
   */
  readonly now?: () => number;
  /**
   * Compact the heap once the agent goes idle (idleMemory.ts); default true where the volume
   * manager reports its activity.
   */
  readonly compactWhenIdle?: boolean;
  /** kubelet's housekeeping (orphaned pod dir cleanup), run every `periodMs` once running. */
  readonly housekeeping?: { readonly periodMs: number; readonly run: () => Promise<unknown> };
  /**
   * The cluster view's change signal (ClusterView.onChange / signalsEveryChange). With it, an
   * idle populator sleeps until a change is signalled instead of passing every 100 ms.
   */
  readonly clusterChanges?: { readonly subscribe: (listener: () => void) => void; readonly signalsEveryChange: () => boolean };
  /**
   * The loops' timers and a stop's grace timer; default the global setTimeout/clearTimeout (tests
   * pass a fake one with `now`, the simulator its virtual clock's).
   */
  readonly scheduler?: LoopScheduler;
}

/** Timers for the loops: a handle from `setTimeout` is only ever given back to `clearTimeout`. */
export interface LoopScheduler {
  /** `label` names the loop the timer belongs to (the simulator's trace shows it). */
  setTimeout(callback: () => void, ms: number, label?: string): unknown;
  clearTimeout(handle: unknown): void;
}

const realScheduler: LoopScheduler = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** The label of a stop's grace timer (the simulator's trace shows it). */
export const SHUTDOWN_GRACE_TIMER = 'shutdownGrace';

/** The longest an idle populator sleeps without a signalled change (a missed signal costs at most this). */
export const POPULATOR_IDLE_MAX_SLEEP_MS = 1_000;

/** A running loop: `wake` ends an idle sleep early (no sooner than its period after its last pass). */
interface LoopHandle {
  wake(): void;
}

/** What the runtime drives: the volume manager's loop bodies. */
export type RuntimeVolumeManager = Pick<VolumeManager, 'start' | 'populateOnce' | 'reconcileOnce' | 'syncNodeStatus' | 'waitForOperations'> &
  Partial<Pick<VolumeManager, 'skipIdlePasses' | 'activity' | 'populatorIdle' | 'reconcilerIdleForMs' | 'onOperationComplete'>> & {
  readonly reconciler: Pick<VolumeManager['reconciler'], 'statesHaveBeenSynced'>;
};

export type RuntimePhase = 'starting' | 'reconstructing' | 'running' | 'stopping' | 'stopped';

export class AgentRuntime {
  /** Current phase; 'running' only after reconstruction finished. */
  private phase: RuntimePhase = 'starting';
  private readonly timers = new Set<NodeJS.Timeout>();
  /** The loops' pending timers (options.scheduler's handles). */
  private readonly loopTimers = new Set<unknown>();
  /** Resolves when every loop has finished its current iteration after stop(). */
  private readonly inFlight = new Set<Promise<void>>();
  /** When each loop (and reconstruction) last started waiting for an iteration to complete. */
  private readonly lastProgress = new Map<string, number>();

  constructor(
    private readonly vm: RuntimeVolumeManager,
    private readonly logger: Logger,
    private readonly options: RuntimeOptions,
  ) {}

  getPhase(): RuntimePhase {
    return this.phase;
  }

  /** Ready: reconstruction done and reconstructed volumes settled from the node status. */
  isReady(): boolean {
    return this.phase === 'running' && this.vm.reconciler.statesHaveBeenSynced();
  }

  /**
   * Healthy: not stopped, and reconstruction and every loop completed an iteration within the
   * stall threshold. The reason is given when unhealthy.
   */
  health(): { healthy: true } | { healthy: false; reason: string } {
    if (this.phase === 'stopped') return { healthy: false, reason: 'stopped' };
    const threshold = this.options.loopStallThresholdMs ?? DEFAULT_LOOP_STALL_THRESHOLD_MS;
    const now = this.now();
    for (const [loop, since] of this.lastProgress) {
      if (now - since > threshold) return { healthy: false, reason: `${loop} has not completed an iteration for ${now - since} ms (threshold ${threshold} ms)` };
    }
    return { healthy: true };
  }

  private now(): number {
    return this.options.now === undefined ? performance.now() : this.options.now();
  }

  async start(): Promise<void> {
    // Stopped before it started (a SIGTERM while the node was still starting): nothing runs.
    if (this.phase === 'stopping' || this.phase === 'stopped') return;
    this.phase = 'reconstructing';
    this.lastProgress.set('reconstruction', this.now());
    await this.vm.start();
    this.lastProgress.delete('reconstruction');
    // Stopped during reconstruction (or the stop already gave up waiting): no loop starts.
    if ((this.phase as RuntimePhase) === 'stopping' || (this.phase as RuntimePhase) === 'stopped') return;
    this.phase = 'running';
    // An idle node costs next to nothing: reconciler passes that could start nothing are skipped.
    this.vm.skipIdlePasses?.();
    // And an idle node sleeps: a loop with nothing to do waits for a change instead of waking
    // every 100 ms. It runs again at once on a change (never sooner than its period after its
    // last pass, as its poll would), and at the latest when its forced pass is due.
    const changes = this.options.clusterChanges;
    // The populator's loop starts first (as kubelet's); it wakes the reconciler's, made just after.
    const handles: { reconciler?: LoopHandle } = {};
    const populator = this.loop(
      'desiredStateOfWorldPopulator',
      DSW_POPULATOR_LOOP_PERIOD_MS,
      async () => {
        await this.vm.populateOnce();
        // A pass that did something may have changed what the reconciler reads.
        if (this.vm.populatorIdle?.() !== true) handles.reconciler?.wake();
      },
      () => (changes?.signalsEveryChange() === true && this.vm.populatorIdle?.() === true ? POPULATOR_IDLE_MAX_SLEEP_MS : undefined),
    );
    const reconciler = this.loop('reconciler', RECONCILER_LOOP_PERIOD_MS, () => this.vm.reconcileOnce(), () => this.vm.reconcilerIdleForMs?.());
    handles.reconciler = reconciler;
    changes?.subscribe(() => populator.wake());
    this.vm.onOperationComplete?.(() => reconciler.wake());
    this.loop('nodeStatus', this.options.nodeStatusUpdatePeriodMs, async () => {
      const before = this.vm.activity?.();
      const written = await this.vm.syncNodeStatus();
      if (written !== undefined) this.logger.v(4).info('Updated node status volumesInUse', { volumesInUse: written });
      // Volumes marked reported in use change what the reconciler reads.
      if (this.vm.activity?.() !== before) reconciler.wake();
    });
    this.startIdleMemory();
    const housekeeping = this.options.housekeeping;
    if (housekeeping !== undefined) {
      this.loop('housekeeping', housekeeping.periodMs, async () => {
        await housekeeping.run();
      });
    }
  }

  /** A timer that compacts the heap once the agent is idle after growing (see idleMemory.ts). */
  private startIdleMemory(): void {
    const activity = this.vm.activity?.bind(this.vm);
    if (this.options.compactWhenIdle === false || activity === undefined) return;
    const gc = exposeGc();
    if (gc === undefined) return;
    // Each look reads V8's own counters only; the process's memory (RSS, read from /proc) is
    // read just around a compaction, for its log line.
    let before: NodeJS.MemoryUsage | undefined;
    const memoryBeforeCompaction = (): NodeJS.MemoryUsage | undefined => before;
    const compactor = new IdleMemoryCompactor({
      activity,
      heapTotal: () => getHeapStatistics().total_heap_size,
      gc: () => {
        before ??= process.memoryUsage();
        gc();
      },
      nowMs: () => this.now(),
    });
    const t = setInterval(() => {
      if (this.phase !== 'running') return;
      before = undefined;
      const compacted = compactor.check();
      const from = memoryBeforeCompaction();
      if (compacted && from !== undefined) {
        const after = process.memoryUsage();
        this.logger.v(4).info('Compacted the heap after going idle', {
          heapUsedBefore: from.heapUsed,
          heapUsedAfter: after.heapUsed,
          heapTotalBefore: from.heapTotal,
          heapTotalAfter: after.heapTotal,
          rssBefore: from.rss,
          rssAfter: after.rss,
        });
      }
    }, CHECK_PERIOD_MS);
    t.unref();
    this.timers.add(t);
  }

  /**
   * Runs `body` every `periodMs` after the previous run finished (wait.Until semantics). With
   * `idleForMs`: when it gives a time after a run, the loop sleeps that long (a forced pass due
   * sooner than a period runs when due) unless woken through the handle, which runs it `periodMs`
   * after the previous run ended, or at once if that is past. An idle check that throws is
   * logged and the loop polls.
   */
  private loop(name: string, periodMs: number, body: () => Promise<void>, idleForMs?: () => number | undefined): LoopHandle {
    const scheduler = this.options.scheduler ?? realScheduler;
    let timer: unknown;
    /** Set while the loop sleeps idle: when its last run ended (options.now). */
    let idleSince: number | undefined;
    /** A wake that came while the body ran: the run that follows is not idle. */
    let wokenWhileRunning = false;
    let running = false;
    const schedule = (ms: number): void => {
      const t = scheduler.setTimeout(
        () => {
          this.loopTimers.delete(t);
          timer = undefined;
          idleSince = undefined;
          tick();
        },
        ms,
        name,
      );
      timer = t;
      this.loopTimers.add(t);
    };
    const tick = (): void => {
      if (this.phase !== 'running') return;
      this.lastProgress.set(name, this.now());
      running = true;
      wokenWhileRunning = false;
      const run = body()
        .catch((err: unknown) => this.logger.error(err, 'Loop iteration failed', { loop: name }))
        .finally(() => {
          running = false;
          this.inFlight.delete(run);
          // Waiting for the next tick is progress too: the clock restarts at the next iteration.
          this.lastProgress.set(name, Number.POSITIVE_INFINITY);
          if (this.phase !== 'running') return;
          let idle: number | undefined;
          try {
            idle = wokenWhileRunning ? undefined : idleForMs?.();
          } catch (err) {
            this.logger.error(err, 'Loop idle check failed; polling', { loop: name });
          }
          if (idle === undefined) {
            schedule(periodMs);
            return;
          }
          idleSince = this.now();
          // Due sooner than a period (a forced pass about to fall due): then, not a period later.
          schedule(idle < periodMs ? Math.max(1, idle) : idle);
        });
      this.inFlight.add(run);
    };
    tick();
    return {
      wake: () => {
        if (running) {
          wokenWhileRunning = true;
          return;
        }
        if (idleSince === undefined || timer === undefined || this.phase !== 'running') return;
        scheduler.clearTimeout(timer);
        this.loopTimers.delete(timer);
        // Never later than the period after the last run (a clock stepping back changes nothing).
        const ms = Math.min(periodMs, Math.max(0, idleSince + periodMs - this.now()));
        idleSince = undefined;
        schedule(ms);
      },
    };
  }

  /**
   * Stops the loops, then waits up to the grace period, in all, for the loop iterations and the
   * volume operations in flight (a stuck iteration cannot hold the stop longer). Nothing is rolled
   * back: whatever is on disk and in the mount table is what the next start reconstructs.
   * `graceMs` overrides the runtime's shutdownGraceMs for this stop (the simulator's `sigterm`
   * step with its own grace).
   */
  async stop(options: { readonly graceMs?: number } = {}): Promise<{ abandoned: boolean }> {
    this.phase = 'stopping';
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const scheduler = this.options.scheduler ?? realScheduler;
    for (const t of this.loopTimers) scheduler.clearTimeout(t);
    this.loopTimers.clear();
    // The grace period is a timer of the loops' scheduler: under the simulator its virtual clock
    // runs it, like every other timer of the runtime, so a stop is as deterministic as the loops.
    let timer: unknown;
    const grace = new Promise<'timeout'>((resolve) => {
      timer = scheduler.setTimeout(() => resolve('timeout'), options.graceMs ?? this.options.shutdownGraceMs, SHUTDOWN_GRACE_TIMER);
    });
    const drained = Promise.allSettled([...this.inFlight]).then(() => this.vm.waitForOperations()).then(() => 'done' as const);
    const outcome = await Promise.race([drained, grace]);
    if (timer !== undefined) scheduler.clearTimeout(timer);
    this.phase = 'stopped';
    return { abandoned: outcome === 'timeout' };
  }
}
