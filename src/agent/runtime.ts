/**
 * The agent's runtime: kubelet's loops around the volume manager - reconstruction once, then the
 * DSW populator and the reconciler every 100 ms and the node status (volumesInUse) every
 * --node-status-update-frequency - plus a clean stop. Timers live here, never in the engine.
 */
import type { Logger } from '../host/logger.js';
import type { VolumeManager } from '../volumemanager/volumeManager.js';
import { DSW_POPULATOR_LOOP_PERIOD_MS, RECONCILER_LOOP_PERIOD_MS } from '../volumemanager/volumeManager.js';

export interface RuntimeOptions {
  readonly nodeStatusUpdatePeriodMs: number;
  /** How long a stop waits for in-flight operations before abandoning them. */
  readonly shutdownGraceMs: number;
  /** kubelet's housekeeping (orphaned pod dir cleanup), run every `periodMs` once running. */
  readonly housekeeping?: { readonly periodMs: number; readonly run: () => Promise<unknown> };
}

export type RuntimePhase = 'starting' | 'reconstructing' | 'running' | 'stopping' | 'stopped';

export class AgentRuntime {
  /** Current phase; 'running' only after reconstruction finished. */
  private phase: RuntimePhase = 'starting';
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Resolves when every loop has finished its current iteration after stop(). */
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly vm: VolumeManager,
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

  async start(): Promise<void> {
    this.phase = 'reconstructing';
    await this.vm.start();
    if ((this.phase as RuntimePhase) === 'stopping') return;
    this.phase = 'running';
    this.loop('desiredStateOfWorldPopulator', DSW_POPULATOR_LOOP_PERIOD_MS, () => this.vm.populateOnce());
    this.loop('reconciler', RECONCILER_LOOP_PERIOD_MS, () => this.vm.reconcileOnce());
    this.loop('nodeStatus', this.options.nodeStatusUpdatePeriodMs, async () => {
      const written = await this.vm.syncNodeStatus();
      if (written !== undefined) this.logger.v(4).info('Updated node status volumesInUse', { volumesInUse: written });
    });
    const housekeeping = this.options.housekeeping;
    if (housekeeping !== undefined) {
      this.loop('housekeeping', housekeeping.periodMs, async () => {
        await housekeeping.run();
      });
    }
  }

  /** Runs `body` every `periodMs` after the previous run finished (wait.Until semantics). */
  private loop(name: string, periodMs: number, body: () => Promise<void>): void {
    const tick = (): void => {
      if (this.phase !== 'running') return;
      const run = body()
        .catch((err: unknown) => this.logger.error(err, 'Loop iteration failed', { loop: name }))
        .finally(() => {
          this.inFlight.delete(run);
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
   * Stops the loops, then waits up to the grace period for in-flight volume operations. Nothing
   * is rolled back: whatever is on disk and in the mount table is what the next start reconstructs.
   */
  async stop(): Promise<{ abandoned: boolean }> {
    this.phase = 'stopping';
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.inFlight]);
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.options.shutdownGraceMs);
    });
    const outcome = await Promise.race([this.vm.waitForOperations().then(() => 'done' as const), grace]);
    if (timer !== undefined) clearTimeout(timer);
    this.phase = 'stopped';
    return { abandoned: outcome === 'timeout' };
  }
}
