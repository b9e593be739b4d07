/**
 * `volume_manager_stuck_operations` (gauge; labels plugin_name, operation_name): the number of
 * volume teardown operations (unmount_device, volume_unmount, unmap_device, unmap_volume) that
 * have failed continuously for over a minute. A nodevol metric, named in kubelet's style beside
 * volume_manager_total_volumes (plugin_name `kubernetes.io/csi:<driver>`, operation_name as in
 * storage_operation_duration_seconds); kubelet has no such gauge. ALPHA, like kubelet's own.
 * Written by the StuckOperationTracker (src/kubelet/stuckOperations.ts).
 */
import { Gauge, type Registry } from 'prom-client';
import type { StuckOperationMetrics } from '../../ports/metrics.js';

export const STUCK_OPERATIONS_METRIC = 'volume_manager_stuck_operations';

export function createStuckOperationMetrics(registry: Registry): StuckOperationMetrics {
  const gauge = new Gauge({
    name: STUCK_OPERATIONS_METRIC,
    help: '[ALPHA] Number of volume teardown operations (unmount_device, volume_unmount, unmap_device, unmap_volume) failing continuously for over a minute (nodevol).',
    labelNames: ['plugin_name', 'operation_name'] as const,
    registers: [registry],
  });
  return {
    setStuckOperations(counts) {
      gauge.reset();
      for (const c of counts) gauge.set({ plugin_name: c.pluginName, operation_name: c.operationName }, c.count);
    },
  };
}
