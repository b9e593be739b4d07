/** The VolumeManagerMetrics port as a record of every call: the simulator's and the tests' metrics. */
import type { ReconstructionSource, StorageOperationStatus, VolumeCount, VolumeManagerMetrics } from '../../ports/metrics.js';

export type RecordedMetricEvent =
  | { readonly kind: 'reconstructVolumeOperation'; readonly source: ReconstructionSource; readonly failed: boolean }
  | { readonly kind: 'forceCleanedFailedVolumeOperation'; readonly failed: boolean }
  | {
      readonly kind: 'storageOperation';
      readonly volumePlugin: string;
      readonly operationName: string;
      readonly status: StorageOperationStatus;
      readonly durationMs: number;
      readonly migrated: boolean;
    }
  | {
      readonly kind: 'csiOperation';
      readonly driverName: string;
      readonly methodName: string;
      readonly grpcStatusCode: string;
      readonly durationMs: number;
    }
  | { readonly kind: 'setTotalVolumes'; readonly counts: readonly VolumeCount[] };

/** For tests: records every call, in order, as plain data (arrays copied). */
export class RecordingMetrics implements VolumeManagerMetrics {
  readonly events: RecordedMetricEvent[] = [];

  reconstructVolumeOperation(source: ReconstructionSource, failed: boolean): void {
    this.events.push({ kind: 'reconstructVolumeOperation', source, failed });
  }

  forceCleanedFailedVolumeOperation(failed: boolean): void {
    this.events.push({ kind: 'forceCleanedFailedVolumeOperation', failed });
  }

  storageOperation(
    volumePlugin: string,
    operationName: string,
    status: StorageOperationStatus,
    durationMs: number,
    migrated = false,
  ): void {
    this.events.push({ kind: 'storageOperation', volumePlugin, operationName, status, durationMs, migrated });
  }

  csiOperation(driverName: string, methodName: string, grpcStatusCode: string, durationMs: number): void {
    this.events.push({ kind: 'csiOperation', driverName, methodName, grpcStatusCode, durationMs });
  }

  setTotalVolumes(counts: ReadonlyArray<VolumeCount>): void {
    this.events.push({ kind: 'setTotalVolumes', counts: counts.map((c) => ({ ...c })) });
  }

  /** The events of one kind, narrowed. */
  ofKind<K extends RecordedMetricEvent['kind']>(kind: K): Extract<RecordedMetricEvent, { kind: K }>[] {
    return this.events.filter((e): e is Extract<RecordedMetricEvent, { kind: K }> => e.kind === kind);
  }
}
