/**
 * The VolumeManagerMetrics port over prom-client, under kubelet's names (see the table in
 * src/ports/metrics.ts): what `nodevol agent` serves on /metrics.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

import type { ReconstructionSource, StorageOperationStatus, VolumeCount, VolumeManagerMetrics, VolumeManagerState } from '../../ports/metrics.js';

/** Bucket upper bounds, in seconds, of both histograms (kubelet's pkg/volume/util/metrics.go). */
export const OPERATION_DURATION_BUCKETS_SECONDS: readonly number[] = [
  0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600,
];

export const METRIC_NAMES = {
  reconstructVolumeOperationsTotal: 'reconstruct_volume_operations_total',
  reconstructVolumeOperationsErrorsTotal: 'reconstruct_volume_operations_errors_total',
  forceCleanedFailedVolumeOperationsTotal: 'force_cleaned_failed_volume_operations_total',
  forceCleanedFailedVolumeOperationErrorsTotal: 'force_cleaned_failed_volume_operation_errors_total',
  storageOperationDurationSeconds: 'storage_operation_duration_seconds',
  csiOperationsSeconds: 'csi_operations_seconds',
  volumeManagerTotalVolumes: 'volume_manager_total_volumes',
} as const;

/** kubelet's pluginNameNotAvailable. */
const PLUGIN_NAME_NOT_AVAILABLE = 'N/A';

const alpha = (help: string): string => `[ALPHA] ${help}`;

/**
 * Registers the metrics in `registry` and returns the port writing to them. Registering twice in
 * one registry throws (prom-client refuses duplicate names).
 */
export function createVolumeManagerMetrics(registry: Registry): VolumeManagerMetrics {
  return new PromVolumeManagerMetrics(registry);
}

class PromVolumeManagerMetrics implements VolumeManagerMetrics {
  private readonly reconstructTotal: Counter;
  private readonly reconstructErrors: Counter;
  private readonly forceCleanedTotal: Counter;
  private readonly forceCleanedErrors: Counter;
  private readonly storageDuration: Histogram<'volume_plugin' | 'operation_name' | 'status' | 'migrated'>;
  private readonly csiDuration: Histogram<'driver_name' | 'method_name' | 'grpc_status_code' | 'migrated'>;
  /** Holds exactly the series of the last setTotalVolumes call (none before the first). */
  private readonly totalVolumes: Gauge<'plugin_name' | 'state'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.reconstructTotal = new Counter({
      name: METRIC_NAMES.reconstructVolumeOperationsTotal,
      help: alpha(
        'The number of volumes that were attempted to be reconstructed from the operating system during kubelet startup. This includes both successful and failed reconstruction.',
      ),
      registers,
    });
    this.reconstructErrors = new Counter({
      name: METRIC_NAMES.reconstructVolumeOperationsErrorsTotal,
      help: alpha('The number of volumes that failed reconstruction from the operating system during kubelet startup.'),
      registers,
    });
    this.forceCleanedTotal = new Counter({
      name: METRIC_NAMES.forceCleanedFailedVolumeOperationsTotal,
      help: alpha(
        'The number of volumes that were force cleaned after their reconstruction failed during kubelet startup. This includes both successful and failed cleanups.',
      ),
      registers,
    });
    this.forceCleanedErrors = new Counter({
      name: METRIC_NAMES.forceCleanedFailedVolumeOperationErrorsTotal,
      help: alpha('The number of volumes that failed force cleanup after their reconstruction failed during kubelet startup.'),
      registers,
    });
    this.storageDuration = new Histogram({
      name: METRIC_NAMES.storageOperationDurationSeconds,
      help: alpha('Storage operation duration'),
      labelNames: ['volume_plugin', 'operation_name', 'status', 'migrated'] as const,
      buckets: [...OPERATION_DURATION_BUCKETS_SECONDS],
      registers,
    });
    this.csiDuration = new Histogram({
      name: METRIC_NAMES.csiOperationsSeconds,
      help: alpha('Container Storage Interface operation duration with gRPC error code status total'),
      labelNames: ['driver_name', 'method_name', 'grpc_status_code', 'migrated'] as const,
      buckets: [...OPERATION_DURATION_BUCKETS_SECONDS],
      registers,
    });
    this.totalVolumes = new Gauge({
      name: METRIC_NAMES.volumeManagerTotalVolumes,
      help: alpha('Number of volumes in Volume Manager'),
      labelNames: ['plugin_name', 'state'] as const,
      registers,
    });
  }

  /** kubelet's counters are unlabelled (KEP-6058 adds `source` at beta): the source is not exported. */
  reconstructVolumeOperation(_source: ReconstructionSource, failed: boolean): void {
    this.reconstructTotal.inc();
    if (failed) this.reconstructErrors.inc();
  }

  forceCleanedFailedVolumeOperation(failed: boolean): void {
    this.forceCleanedTotal.inc();
    if (failed) this.forceCleanedErrors.inc();
  }

  storageOperation(
    volumePlugin: string,
    operationName: string,
    status: StorageOperationStatus,
    durationMs: number,
    migrated = false,
  ): void {
    this.storageDuration.observe(
      { volume_plugin: volumePlugin, operation_name: operationName, status, migrated: String(migrated) },
      durationMs / 1000,
    );
  }

  csiOperation(driverName: string, methodName: string, grpcStatusCode: string, durationMs: number): void {
    this.csiDuration.observe(
      { driver_name: driverName, method_name: methodName, grpc_status_code: grpcStatusCode, migrated: 'false' },
      durationMs / 1000,
    );
  }

  setTotalVolumes(counts: ReadonlyArray<VolumeCount>): void {
    const sums = new Map<string, { pluginName: string; state: VolumeManagerState; count: number }>();
    for (const c of counts) {
      const pluginName = c.pluginName === '' ? PLUGIN_NAME_NOT_AVAILABLE : c.pluginName;
      const id = `${c.state}\u0000${pluginName}`;
      const sum = sums.get(id);
      if (sum === undefined) sums.set(id, { pluginName, state: c.state, count: c.count });
      else sum.count += c.count;
    }
    this.totalVolumes.reset();
    for (const s of sums.values()) this.totalVolumes.set({ plugin_name: s.pluginName, state: s.state }, s.count);
  }
}
