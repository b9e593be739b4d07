/**
 * The agent's runtime: kubelet's loops around the volume manager - reconstruction once, then the
 * DSW populator and the reconciler every 100 ms and the node status (volumesInUse) every
 * --node-status-update-frequency - plus a clean stop. Timers live here, never in the engine.
 */
import type { Logger } from '../host/logger.js';
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
  /** Wall clock for the stall check; default Date.now. */
  readonly now?: () => number;
  /**
   * Compact the heap once the agent goes idle (idleMemory.ts); default true where the volume
   * manager reports its activity.
   */
  readonly compactWhenIdle?: boolean;
  /** kubelet's housekeeping (orphaned pod dir cleanup), run every `periodMs` once running. */
  readonly housekeeping?: { readonly periodMs: number; readonly run: () => Promise<unknown> };
}

/** What the runtime drives: the volume manager's loop bodies. */
export type RuntimeVolumeManager = Pick<VolumeManager, 'start' | 'populateOnce' | 'reconcileOnce' | 'syncNodeStatus' | 'waitForOperations'> &
  Partial<Pick<VolumeManager, 'skipIdlePasses' | 'activity'>> & {
  readonly reconciler: Pick<VolumeManager['reconciler'], 'statesHaveBeenSynced'>;
};

export type RuntimePhase = 'starting' | 'reconstructing' | 'running' | 'stopping' | 'stopped';

export class AgentRuntime {
  /** Current phase; 'running' only after reconstruction finished. */
  private phase: RuntimePhase = 'starting';
  private readonly timers = new Set<NodeJS.Timeout>();
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
    return (this.options.now ?? Date.now)();
  }

  async start(): Promise<void> {
    this.phase = 'reconstructing';
    this.lastProgress.set('reconstruction', this.now());
    await this.vm.start();
    this.lastProgress.delete('reconstruction');
    if ((this.phase as RuntimePhase) === 'stopping') return;
    this.phase = 'running';
    // An idle node costs next to nothing: reconciler passes that could start nothing are skipped.
    this.vm.skipIdlePasses?.();
    this.loop('desiredStateOfWorldPopulator', DSW_POPULATOR_LOOP_PERIOD_MS, () => this.vm.populateOnce());
    this.loop('reconciler', RECONCILER_LOOP_PERIOD_MS, () => this.vm.reconcileOnce());
    this.loop('nodeStatus', this.options.nodeStatusUpdatePeriodMs, async () => {
      const written = await this.vm.syncNodeStatus();
      if (written !== undefined) this.logger.v(4).info('Updated node status volumesInUse', { volumesInUse: written });
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
    const compactor = new IdleMemoryCompactor({ activity, heapTotal: () => process.memoryUsage().heapTotal, gc, nowMs: () => this.now() });
    const t = setInterval(() => {
      if (this.phase !== 'running') return;
      const before = process.memoryUsage();
      if (compactor.check()) {
        const after = process.memoryUsage();
        this.logger.v(4).info('Compacted the heap after going idle', {
          heapUsedBefore: before.heapUsed,
          heapUsedAfter: after.heapUsed,
          heapTotalBefore: before.heapTotal,
          heapTotalAfter: after.heapTotal,
          rssBefore: before.rss,
          rssAfter: after.rss,
        });
      }
    }, CHECK_PERIOD_MS);
    t.unref();
    this.timers.add(t);
  }

  /** Runs `body` every `periodMs` after the previous run finished (wait.Until semantics). */
  private loop(name: string, periodMs: number, body: () => Promise<void>): void {
    const tick = (): void => {
      if (this.phase !== 'running') return;
      this.lastProgress.set(name, this.now());
      const run = body()
        .catch((err: unknown) => this.logger.error(err, 'Loop iteration failed', { loop: name }))
        .finally(() => {
          this.inFlight.delete(run);
          // Waiting for the next tick is progress too: the clock restarts at the next iteration.
          this.lastProgress.set(name, Number.POSITIVE_INFINITY);
          if (this.phase !== 'running') return;
          const t = setTimeout(() => {
            this.timers.delete(t);
            tick();
          }, periodMs);
          this.timers.add(t);
        });
      this.inFlight.add(run);
    };
    tick();
  }

  /**
   * Stops the loops, then waits up to the grace period, in all, for the loop iterations and the
   * volume operations in flight (a stuck iteration cannot hold the stop longer). Nothing is rolled
   * back: whatever is on disk and in the mount table is what the next start reconstructs.
   */
  async stop(): Promise<{ abandoned: boolean }> {
    this.phase = 'stopping';
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.options.shutdownGraceMs);
    });
    const drained = Promise.allSettled([...this.inFlight]).then(() => this.vm.waitForOperations()).then(() => 'done' as const);
    const outcome = await Promise.race([drained, grace]);
    if (timer !== undefined) clearTimeout(timer);
    this.phase = 'stopped';
    return { abandoned: outcome === 'timeout' };
  }
}
