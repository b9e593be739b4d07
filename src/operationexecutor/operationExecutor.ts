/**
 * OperationExecutor (operation_executor.go): picks the
 * generator for the volume mode and the key that serialises the operation, and hands both to
 * NestedPendingOperations. It also records storage_operation_duration_seconds.
 */
import type { Clock } from '../ports/clock.js';
import { getVolumeMode, specName } from '../volume/spec.js';
import type { VolumeManagerMetrics } from '../ports/metrics.js';
import type { ActualStateOfWorldAttacherUpdater, ActualStateOfWorldMounterUpdater, AttachedVolume } from './actualStateOfWorldUpdater.js';
import type { VolumeToMount } from './volumeToMount.js';
import { EMPTY_POD_NAME, type NestedPendingOperations, type OperationCompleteEvent, type OperationKey } from './nestedPendingOperations.js';
import { OP, type Operation, type OperationGenerator, type UnmountTarget } from './operationGenerator.js';
import { operationFailurePrefix } from './operationLog.js';

export class OperationExecutor {
  constructor(
    private readonly generator: OperationGenerator,
    private readonly pending: NestedPendingOperations,
    private readonly clock: Clock,
    private readonly metrics: VolumeManagerMetrics,
  ) {}

  isOperationPending(volumeName: string, podName: string): boolean {
    return this.pending.isOperationPending(volumeName, podName);
  }

  /** Resolves when no operation is running (tests, shutdown). */
  waitForPending(): Promise<void> {
    return this.pending.wait();
  }

  /**
   * Calls `listener` once per settled operation (after its entry is deleted or put in backoff):
   * for traces and timelines. The listener must not throw.
   */
  onOperationComplete(listener: (e: OperationCompleteEvent) => void): void {
    this.pending.onComplete(listener);
  }

  verifyControllerAttachedVolume(vtm: VolumeToMount, asw: ActualStateOfWorldAttacherUpdater): void {
    this.start(
      { volumeName: vtm.volumeName, podName: EMPTY_POD_NAME },
      this.generator.generateVerifyControllerAttachedVolume(vtm, asw),
      vtmFailurePrefix('VerifyControllerAttachedVolume', vtm),
    );
  }

  /**
   * Whether {@link mountVolume} would start an operation now (nothing pending for the volume, no
   * backoff holding it back), without building anything: the reconciler asks before each volume
   * so that a pass over a thousand busy volumes costs a map lookup each.
   */
  isMountVolumeRunnable(vtm: VolumeToMount): boolean {
    return this.pending.isRunnable(mountKey(vtm), getVolumeMode(vtm.spec) === 'Block' ? OP.map : OP.mount);
  }

  /** Whether {@link verifyControllerAttachedVolume} would start an operation now. */
  isVerifyControllerAttachedVolumeRunnable(vtm: VolumeToMount): boolean {
    return this.pending.isRunnable({ volumeName: vtm.volumeName, podName: EMPTY_POD_NAME }, OP.verifyControllerAttachedVolume);
  }

  /** Whether {@link unmountVolume} would start an operation now. */
  isUnmountVolumeRunnable(mv: UnmountTarget): boolean {
    return this.pending.isRunnable({ volumeName: mv.volumeName, podName: mv.podName }, getVolumeMode(mv.volumeSpec) === 'Block' ? OP.unmap : OP.unmount);
  }

  /** Whether {@link unmountDevice} would start an operation now. */
  isUnmountDeviceRunnable(av: AttachedVolume): boolean {
    return this.pending.isRunnable({ volumeName: av.volumeName, podName: EMPTY_POD_NAME }, getVolumeMode(av.volumeSpec) === 'Block' ? OP.unmapDevice : OP.unmountDevice);
  }

  /**
   * Mount (or map) one pod's volume. Attachable or device-mountable volumes are serialised per
   * volume (empty pod); others per pod.
   */
  async mountVolume(vtm: VolumeToMount, devicePath: string, asw: ActualStateOfWorldMounterUpdater): Promise<void> {
    const key = mountKey(vtm);
    this.assertRunnable(key, getVolumeMode(vtm.spec) === 'Block' ? OP.map : OP.mount);
    const op =
      getVolumeMode(vtm.spec) === 'Block'
        ? await this.generator.generateMapVolume(vtm, devicePath, asw)
        : this.generator.generateMountVolume(vtm, devicePath, asw);
    this.start(key, op, vtmFailurePrefix(getVolumeMode(vtm.spec) === 'Block' ? 'MapVolume' : 'MountVolume', vtm));
  }

  /** Unmount (or unmap) one pod's volume, keyed per pod. A spec-less target takes the filesystem path. */
  async unmountVolume(mv: UnmountTarget, asw: ActualStateOfWorldMounterUpdater): Promise<void> {
    const key = { volumeName: mv.volumeName, podName: mv.podName };
    this.assertRunnable(key, getVolumeMode(mv.volumeSpec) === 'Block' ? OP.unmap : OP.unmount);
    const op =
      getVolumeMode(mv.volumeSpec) === 'Block'
        ? await this.generator.generateUnmapVolume(mv, asw)
        : await this.generator.generateUnmountVolume(mv, asw);
    this.start(
      key,
      op,
      operationFailurePrefix({
        operation: getVolumeMode(mv.volumeSpec) === 'Block' ? 'UnmapVolume' : 'UnmountVolume.TearDown',
        volumeSpecName: mv.innerVolumeSpecName,
        volumeName: mv.volumeName,
        podName: mv.podName,
      }),
    );
  }

  /** Unmount (or unmap) the device, keyed per volume. */
  async unmountDevice(av: AttachedVolume, asw: ActualStateOfWorldMounterUpdater): Promise<void> {
    const key = { volumeName: av.volumeName, podName: EMPTY_POD_NAME };
    this.assertRunnable(key, getVolumeMode(av.volumeSpec) === 'Block' ? OP.unmapDevice : OP.unmountDevice);
    const op =
      getVolumeMode(av.volumeSpec) === 'Block'
        ? await this.generator.generateUnmapDevice(av, asw)
        : this.generator.generateUnmountDevice(av, asw);
    this.start(
      key,
      op,
      operationFailurePrefix({
        operation: getVolumeMode(av.volumeSpec) === 'Block' ? 'UnmapDevice' : 'UnmountDevice',
        volumeSpecName: specName(av.volumeSpec),
        volumeName: av.volumeName,
      }),
    );
  }

  /** Fails fast (AlreadyExists / Backoff) before the generator reads anything from disk. */
  private assertRunnable(key: OperationKey, operationName: string): void {
    this.pending.checkRunnable(key, operationName);
  }

  private start(key: OperationKey, op: Operation, failurePrefix: string): void {
    const startedMs = this.clock.nowMs();
    this.pending.run(key, {
      operationName: op.operationName,
      failurePrefix,
      run: async () => {
        try {
          await op.run();
          this.metrics.storageOperation(op.pluginLabel, op.operationName, 'success', this.clock.nowMs() - startedMs);
        } catch (err) {
          this.metrics.storageOperation(op.pluginLabel, op.operationName, 'fail-unknown', this.clock.nowMs() - startedMs);
          throw err;
        }
      },
    });
  }
}

/** Attachable or device-mountable volumes are serialised per volume (empty pod); others per pod. */
function mountKey(vtm: VolumeToMount): OperationKey {
  return { volumeName: vtm.volumeName, podName: vtm.pluginIsAttachable || vtm.pluginIsDeviceMountable ? EMPTY_POD_NAME : vtm.podName };
}

/** The failure log line's prefix for an operation on one pod's volume. */
function vtmFailurePrefix(operation: string, vtm: VolumeToMount): string {
  return operationFailurePrefix({
    operation,
    volumeSpecName: specName(vtm.spec),
    volumeName: vtm.volumeName,
    podName: `${vtm.pod.namespace}/${vtm.pod.name}`,
    podUID: vtm.pod.uid,
  });
}
