/**
 * The volume manager's metrics, under kubelet's names (reference §12, field-notes §5.1):
 *
 * | name                                                 | type      | labels                                               |
 * |------------------------------------------------------|-----------|------------------------------------------------------|
 * | reconstruct_volume_operations_total                  | counter   | source                                               |
 * | reconstruct_volume_operations_errors_total           | counter   | source                                               |
 * | force_cleaned_failed_volume_operations_total         | counter   | -                                                    |
 * | force_cleaned_failed_volume_operation_errors_total   | counter   | - (singular "operation", as in kubelet)              |
 * | storage_operation_duration_seconds                   | histogram | volume_plugin, operation_name, status, migrated      |
 * | csi_operations_seconds                               | histogram | driver_name, method_name, grpc_status_code, migrated |
 * | volume_manager_total_volumes                         | gauge     | plugin_name, state                                   |
 *
 * Kubelet registers none of these with a `kubelet_` prefix. Its help strings carry the stability
 * level in front (`[ALPHA] ...`), as component-base renders them; we keep that.
 *
 * The `source` label (`pod-local` | `global-mount`) on the two reconstruct counters is KEP-6058's
 * planned beta label. Kubelet's alpha counters have no labels, and in alpha the global-mount step
 * does not count at all. Both `source` series are created at 0 so that dashboards and the KEP-3756
 * SLO ("errors should stay 0") see the series before the first reconstruction.
 *
 * The engine sees only the {@link VolumeManagerMetrics} port; prom-client types stay in this file.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type ReconstructionSource = 'pod-local' | 'global-mount';
export type StorageOperationStatus = 'success' | 'fail-unknown';
export type VolumeManagerState = 'actual_state_of_world' | 'desired_state_of_world';

export interface VolumeCount {
  /** Fully qualified, e.g. `kubernetes.io/csi:ebs.csi.example.com`; `''` is reported as `N/A`. */
  readonly pluginName: string;
  readonly state: VolumeManagerState;
  readonly count: number;
}

/** The metrics port the engine reports through. */
export interface VolumeManagerMetrics {
  /** One reconstruction attempt: reconstruct_volume_operations_total{source} +1, and _errors_total{source} +1 when it failed. */
  reconstructVolumeOperation(source: ReconstructionSource, failed: boolean): void;
  /** One force cleanup after a failed reconstruction: force_cleaned_failed_volume_operations_total +1, and the errors counter +1 when it failed. */
  forceCleanedFailedVolumeOperation(failed: boolean): void;
  /** One settled operation (`volume_mount`, `unmount_device`, ...) into storage_operation_duration_seconds. */
  storageOperation(
    volumePlugin: string,
    operationName: string,
    status: StorageOperationStatus,
    durationMs: number,
    migrated?: boolean,
  ): void;
  /** One CSI call into csi_operations_seconds. `grpcStatusCode` is the code's name (`OK`, `DeadlineExceeded`, ...). */
  csiOperation(driverName: string, methodName: string, grpcStatusCode: string, durationMs: number): void;
  /** Replaces every volume_manager_total_volumes series with `counts` (duplicates are summed). */
  setTotalVolumes(counts: ReadonlyArray<VolumeCount>): void;
}

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
const RECONSTRUCTION_SOURCES: readonly ReconstructionSource[] = ['pod-local', 'global-mount'];

const alpha = (help: string): string => `[ALPHA] ${help}`;

/**
 * Registers the metrics in `registry` and returns the port writing to them. Registering twice in
 * one registry throws (prom-client refuses duplicate names).
 */
export function createVolumeManagerMetrics(registry: Registry): VolumeManagerMetrics {
  return new PromVolumeManagerMetrics(registry);
}

class PromVolumeManagerMetrics implements VolumeManagerMetrics {
  private readonly reconstructTotal: Counter<'source'>;
  private readonly reconstructErrors: Counter<'source'>;
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
      labelNames: ['source'] as const,
      registers,
    });
    this.reconstructErrors = new Counter({
      name: METRIC_NAMES.reconstructVolumeOperationsErrorsTotal,
      help: alpha('The number of volumes that failed reconstruction from the operating system during kubelet startup.'),
      labelNames: ['source'] as const,
      registers,
    });
    for (const source of RECONSTRUCTION_SOURCES) {
      this.reconstructTotal.inc({ source }, 0);
      this.reconstructErrors.inc({ source }, 0);
    }
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

  reconstructVolumeOperation(source: ReconstructionSource, failed: boolean): void {
    this.reconstructTotal.inc({ source });
    if (failed) this.reconstructErrors.inc({ source });
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

/** A port that records nothing. */
export const noopVolumeManagerMetrics: VolumeManagerMetrics = {
  reconstructVolumeOperation() {},
  forceCleanedFailedVolumeOperation() {},
  storageOperation() {},
  csiOperation() {},
  setTotalVolumes() {},
};

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
