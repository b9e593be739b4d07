/**
 * The volume manager's metrics, under kubelet's names (pkg/kubelet/volumemanager/metrics,
 * pkg/volume/util/metrics.go; all ALPHA in kubelet):
 *
 * | name                                                 | type      | labels                                               |
 * |------------------------------------------------------|-----------|------------------------------------------------------|
 * | reconstruct_volume_operations_total                  | counter   | -                                                    |
 * | reconstruct_volume_operations_errors_total           | counter   | -                                                    |
 * | force_cleaned_failed_volume_operations_total         | counter   | -                                                    |
 * | force_cleaned_failed_volume_operation_errors_total   | counter   | - (singular "operation", as in kubelet)              |
 * | storage_operation_duration_seconds                   | histogram | volume_plugin, operation_name, status, migrated      |
 * | csi_operations_seconds                               | histogram | driver_name, method_name, grpc_status_code, migrated |
 * | volume_manager_total_volumes                         | gauge     | plugin_name, state                                   |
 *
 * Kubelet registers none of these with a `kubelet_` prefix. Its help strings carry the stability
 * level in front (`[ALPHA] ...`), as component-base renders them; we keep that.
 *
 * The two reconstruct counters are unlabelled, as kubelet's alpha ones: one count per pod
 * directory candidate of reconstruction (reconstruct_common.go reconstructVolume); KEP-6058's
 * listing counts nothing. The port still carries the source (`pod-local` | `global-mount`, a pod
 * directory rebuilt through the global fallback) for the recording adapter; the label KEP-6058
 * plans for beta is not exported.
 *
 * The engine sees only this port; the prom-client implementation is
 * src/adapters/prometheus/volumeManagerMetrics.ts, the recording one (simulator, tests)
 * src/adapters/memory/recordingMetrics.ts.
 */
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
  /** One reconstruction attempt of a pod directory candidate: reconstruct_volume_operations_total +1, and _errors_total +1 when it failed. */
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

/** A port that records nothing. */
export const noopVolumeManagerMetrics: VolumeManagerMetrics = {
  reconstructVolumeOperation() {},
  forceCleanedFailedVolumeOperation() {},
  storageOperation() {},
  csiOperation() {},
  setTotalVolumes() {},
};

/** The port kubelet's orphaned pod dir sweep reports through (kubelet_orphan_pod_cleaned_volumes{,_errors}). */
export interface OrphanPodMetrics {
  /** After a sweep: `orphans` pod dirs found orphaned, `errors` of them left in place. */
  orphanPodSweep(orphans: number, errors: number): void;
}

/** The port the stuck operation tracker reports through (volume_manager_stuck_operations). */
export interface StuckOperationMetrics {
  setStuckOperations(counts: ReadonlyArray<{ readonly pluginName: string; readonly operationName: string; readonly count: number }>): void;
}
