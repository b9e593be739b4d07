/**
 * The reconciler (reconciler_common.go / reconciler.go): one level-triggered
 * pass comparing the desired and the actual state and starting operations, in kubelet's order:
 * unmount pods' volumes, mount or attach, unmount devices, clean orphans, then settle
 * reconstructed volumes from the node status. The loop that calls reconcileOnce() lives in the
 * runtime (agent) or in the simulator, never here.
 */
import type { Clock } from '../../ports/clock.js';
import type { Logger } from '../../ports/logger.js';
import type { UniqueVolumeName } from '../../layout/names.js';
import { isExpectedError } from '../../operationexecutor/nestedPendingOperations.js';
import type { OperationExecutor } from '../../operationexecutor/operationExecutor.js';
import { isVolumeNotAttachedError, deviceMayBeMounted, type ActualStateOfWorld } from '../cache/actualStateOfWorld.js';
import type { DesiredStateOfWorld } from '../cache/desiredStateOfWorld.js';
import type { VolumeToMount } from '../../operationexecutor/volumeToMount.js';
import type { Reconstructor } from './reconstruct.js';

export interface ReconcilerDeps {
  readonly asw: ActualStateOfWorld;
  readonly dsw: DesiredStateOfWorld;
  readonly executor: OperationExecutor;
  readonly reconstructor: Reconstructor;
  /** The DSW populator has added every pod at least once (never the populator itself). */
  readonly populatorHasAddedPods: () => boolean;
  readonly logger: Logger;
}

export interface Reconciler {
  /** Runs reconstruction; call once before the first pass. */
  reconstruct(): Promise<void>;
  /** One pass; starts operations and returns without waiting for them. */
  reconcileOnce(): Promise<void>;
  /** True once reconstructed volumes were settled from the node status (kubelet StatesHasBeenSynced). */
  statesHaveBeenSynced(): boolean;
  /**
   * From now on a pass returns at once when it could start nothing: nothing it reads changed
   * since the last pass that ran (see {@link IdlePassGuard}). A pass still runs at least every
   * {@link IDLE_PASS_MAX_SKIP_MS} of `clock`. Off by default (the simulator runs every pass).
   */
  skipIdlePasses(clock: Clock): void;
  /**
   * With skipIdlePasses: how long from now passes would be skipped if nothing they read changes
   * (until the pass forced every {@link IDLE_PASS_MAX_SKIP_MS}); undefined when a pass now could
   * start something, or without skipIdlePasses. A caller may sleep that long unless woken by a
   * change (a DSW pass, an operation's completion).
   */
  idleForMs(): number | undefined;
}

/** With skipIdlePasses, the longest a reconciler pass is skipped for want of a change. */
export const IDLE_PASS_MAX_SKIP_MS = 1_000;

/**
 * Decides whether a reconciler pass could do anything. A pass reads the ASW, the DSW, the
 * pending operations (a completion frees a key; a failure arms a backoff whose expiry permits a
 * retry), whether the DSW was populated and the reconstructor's leftovers. While none of them
 * changed, a pass would start nothing and is skipped; while any operation is in backoff or a
 * reconstructed volume waits, every pass runs (as kubelet's).
 */
class IdlePassGuard {
  /** What the last pass that ran saw at its start. */
  #seen = '';
  #lastRunMs = Number.NEGATIVE_INFINITY;
  #completions = 0;
  /** Keys (volume/pod) whose last operation failed: their backoff expiry permits a retry. */
  readonly #failed = new Set<string>();

  constructor(
    private readonly clock: Clock,
    executor: Pick<OperationExecutor, 'onOperationComplete'>,
  ) {
    executor.onOperationComplete((e) => {
      this.#completions++;
      const key = `${e.key.volumeName}\u0000${e.key.podName}`;
      if (e.error === undefined) this.#failed.delete(key);
      else this.#failed.add(key);
    });
  }

  /** Everything a pass reads, as one comparable value. */
  #signature(deps: ReconcilerDeps): string {
    return `${deps.asw.generation()}/${deps.dsw.generation()}/${this.#completions}/${deps.populatorHasAddedPods()}`;
  }

  /** A retry waits on a backoff, or reconstructed volumes wait: every pass runs. */
  #busy(deps: ReconcilerDeps): boolean {
    return this.#failed.size > 0 || deps.reconstructor.needsUpdateFromNodeStatus() || deps.reconstructor.failedReconstructions().length > 0;
  }

  /** Whether this pass may be skipped; when not, records what it starts from. */
  skip(deps: ReconcilerDeps): boolean {
    const seen = this.#signature(deps);
    const now = this.clock.nowMs();
    if (!this.#busy(deps) && seen === this.#seen && now - this.#lastRunMs < IDLE_PASS_MAX_SKIP_MS) return true;
    this.#seen = seen;
    this.#lastRunMs = now;
    return false;
  }

  /** See Reconciler.idleForMs; changes nothing. */
  idleForMs(deps: ReconcilerDeps): number | undefined {
    if (this.#busy(deps) || this.#signature(deps) !== this.#seen) return undefined;
    // Clamped: a clock stepped back must not stretch the wait beyond one forced-pass period.
    return Math.min(IDLE_PASS_MAX_SKIP_MS, Math.max(0, IDLE_PASS_MAX_SKIP_MS - (this.clock.nowMs() - this.#lastRunMs)));
  }

  /** The pass met an unexpected error: the next one runs whatever changed. */
  rerun(): void {
    this.#seen = '';
  }
}

export function createReconciler(deps: ReconcilerDeps): Reconciler {
  return new ReconcilerImpl(deps);
}

class ReconcilerImpl implements Reconciler {
  /** Set iff a pass found nothing waiting for the node status (kubelet's timeOfLastSync != 0). */
  private synced = false;
  private idle: IdlePassGuard | undefined;

  constructor(private readonly deps: ReconcilerDeps) {}

  async reconstruct(): Promise<void> {
    await this.deps.reconstructor.reconstructVolumes();
    this.deps.logger.info('Reconciler: start to sync state');
  }

  statesHaveBeenSynced(): boolean {
    return this.synced;
  }

  /** readyToUnmount: the DSW is populated and reconstructed volumes know their attachability. */
  private readyToUnmount(): boolean {
    if (!this.deps.populatorHasAddedPods()) {
      this.deps.logger.v(5).info('Skipping unmounts: the desired state of world has not been populated yet');
      return false;
    }
    if (this.deps.reconstructor.needsUpdateFromNodeStatus()) {
      this.deps.logger.v(5).info('Skipping unmounts: reconstructed volumes wait for the node status');
      return false;
    }
    return true;
  }

  skipIdlePasses(clock: Clock): void {
    this.idle ??= new IdlePassGuard(clock, this.deps.executor);
  }

  idleForMs(): number | undefined {
    return this.idle?.idleForMs(this.deps);
  }

  async reconcileOnce(): Promise<void> {
    if (this.idle?.skip(this.deps) === true) return;
    try {
      await this.reconcilePass();
    } catch (err) {
      this.idle?.rerun();
      throw err;
    }
  }

  private async reconcilePass(): Promise<void> {
    const ready = this.readyToUnmount();
    if (ready) await this.unmountVolumes();
    await this.mountOrAttachVolumes();
    if (ready) {
      await this.unmountDetachDevices();
      await this.deps.reconstructor.cleanOrphanVolumes();
    }
    if (this.deps.reconstructor.needsUpdateFromNodeStatus()) await this.deps.reconstructor.updateReconstructedFromNodeStatus();
    if (!this.deps.reconstructor.needsUpdateFromNodeStatus()) this.synced = true;
  }

  /** Every pod mount (certain or not) that no pod in the DSW wants. */
  private async unmountVolumes(): Promise<void> {
    const { asw, dsw, executor, logger } = this.deps;
    for (const mv of asw.getAllMountedVolumes()) {
      if (dsw.podExistsInVolume(mv.podName, mv.volumeName)) continue;
      // Busy or backing off: kubelet builds the operation and has it refused; the answer is the same.
      if (!executor.isUnmountVolumeRunnable(mv)) continue;
      logger.v(5).info('Starting operationExecutor.UnmountVolume', { podName: mv.podName, volumeName: mv.volumeName });
      try {
        await executor.unmountVolume(mv, asw);
        logger.info('operationExecutor.UnmountVolume started', { podName: mv.podName, volumeName: mv.volumeName });
      } catch (err) {
        if (!isExpectedError(err)) logger.error(err, 'operationExecutor.UnmountVolume failed', { podName: mv.podName, volumeName: mv.volumeName });
      }
    }
  }

  private async mountOrAttachVolumes(): Promise<void> {
    const { asw, logger } = this.deps;
    for (const vtm of this.deps.dsw.getVolumesToMount()) {
      let exists: boolean;
      let devicePath: string;
      try {
        ({ exists, devicePath } = asw.podExistsInVolume(vtm.podName, vtm.volumeName));
      } catch (err) {
        if (isVolumeNotAttachedError(err)) {
          this.waitForVolumeAttach(vtm);
          continue;
        }
        logger.error(err, 'Failed to check whether the volume is mounted', { volumeName: vtm.volumeName, podName: vtm.podName });
        continue;
      }
      if (exists) continue;
      // An operation already pending for the volume, or a backoff: kubelet builds the operation
      // and has it refused; skipping it before anything is built gives the same answer for almost
      // nothing, so a pass over a thousand busy volumes stays cheap.
      if (!this.deps.executor.isMountVolumeRunnable(vtm)) continue;
      await this.mountAttachedVolume(vtm, devicePath);
    }
  }

  /** Controller attach/detach: wait until node.status.volumesAttached lists the volume. */
  private waitForVolumeAttach(vtm: VolumeToMount): void {
    const { executor, asw, logger } = this.deps;
    if (vtm.pluginIsAttachable && !vtm.reportedInUse) {
      logger.v(5).info('Volume is not reported in use yet, not verifying attachment', { volumeName: vtm.volumeName });
      return;
    }
    // Already verifying, or backing off: kubelet has the operation refused; skip it unbuilt.
    if (!executor.isVerifyControllerAttachedVolumeRunnable(vtm)) return;
    logger.v(5).info('Starting operationExecutor.VerifyControllerAttachedVolume', { volumeName: vtm.volumeName, podName: vtm.podName });
    try {
      executor.verifyControllerAttachedVolume(vtm, asw);
      logger.info('operationExecutor.VerifyControllerAttachedVolume started', { volumeName: vtm.volumeName, podName: vtm.podName });
    } catch (err) {
      if (!isExpectedError(err)) logger.error(err, 'operationExecutor.VerifyControllerAttachedVolume failed', { volumeName: vtm.volumeName });
    }
  }

  private async mountAttachedVolume(vtm: VolumeToMount, devicePath: string): Promise<void> {
    const { executor, asw, logger } = this.deps;
    logger.v(4).info('Starting operationExecutor.MountVolume', { volumeName: vtm.volumeName, podName: vtm.podName });
    try {
      await executor.mountVolume(vtm, devicePath, asw);
      logger.v(1).info('operationExecutor.MountVolume started', { volumeName: vtm.volumeName, podName: vtm.podName });
    } catch (err) {
      if (!isExpectedError(err)) logger.error(err, 'operationExecutor.MountVolume failed', { volumeName: vtm.volumeName, podName: vtm.podName });
    }
  }

  /** Volumes no pod has mounted and the DSW does not want: unstage, or forget once not mounted. */
  private async unmountDetachDevices(): Promise<void> {
    const { asw, dsw, executor, logger } = this.deps;
    for (const av of asw.getUnmountedVolumes()) {
      if (dsw.volumeExists(av.volumeName)) continue;
      if (executor.isOperationPending(av.volumeName, '')) continue;
      // Re-read: an operation may have changed it since the list was taken.
      const current = asw.getAttachedVolume(av.volumeName);
      if (current === undefined) continue;
      if (deviceMayBeMounted(current)) {
        if (!executor.isUnmountDeviceRunnable(current)) continue;
        logger.v(5).info('Starting operationExecutor.UnmountDevice', { volumeName: current.volumeName });
        try {
          await executor.unmountDevice(current, asw);
          logger.info('operationExecutor.UnmountDevice started', { volumeName: current.volumeName });
        } catch (err) {
          if (!isExpectedError(err)) logger.error(err, 'operationExecutor.UnmountDevice failed', { volumeName: current.volumeName });
        }
      } else {
        // Controller-driven attach/detach: the node only stops reporting it.
        this.markDetached(current.volumeName);
      }
    }
  }

  private markDetached(volumeName: UniqueVolumeName): void {
    try {
      const devicePath = this.deps.asw.getAttachedVolume(volumeName)?.devicePath ?? '';
      this.deps.asw.markVolumeAsDetached(volumeName);
      this.deps.logger.info('Volume detached', { volumeName, devicePath });
    } catch (err) {
      this.deps.logger.error(err, 'Could not mark volume as detached', { volumeName });
    }
  }
}
