/**
 * kubelet's orphaned pod dir sweep gauges (pkg/kubelet/metrics, set by kubelet_volumes.go), set after
 * every sweep that ran (not when it was skipped: sources not ready, pods not listed, pods dir
 * unreadable), as kubelet's cleanupOrphanedPodDirs sets them:
 *
 * | name                                       | type  | value                                           |
 * |--------------------------------------------|-------|-------------------------------------------------|
 * | kubelet_orphan_pod_cleaned_volumes         | gauge | orphaned pod dirs the last sweep found          |
 * | kubelet_orphan_pod_cleaned_volumes_errors  | gauge | of those, the ones it could not remove (kept)   |
 *
 * The engine sees only the {@link OrphanPodMetrics} port; prom-client stays in this file.
 */
import { Gauge, type Registry } from 'prom-client';

import type { OrphanPodMetrics } from '../../ports/metrics.js';

export type { OrphanPodMetrics };

export const ORPHAN_POD_METRIC_NAMES = {
  cleanedVolumes: 'kubelet_orphan_pod_cleaned_volumes',
  cleanedVolumesErrors: 'kubelet_orphan_pod_cleaned_volumes_errors',
} as const;

/** Registers both gauges in `registry` (at 0 until the first sweep) and returns the port. */
export function createOrphanPodMetrics(registry: Registry): OrphanPodMetrics {
  const registers = [registry];
  const cleaned = new Gauge({
    name: ORPHAN_POD_METRIC_NAMES.cleanedVolumes,
    help: '[ALPHA] The total number of orphaned Pods whose volumes were cleaned in the last periodic sweep.',
    registers,
  });
  const errors = new Gauge({
    name: ORPHAN_POD_METRIC_NAMES.cleanedVolumesErrors,
    help: '[ALPHA] The number of orphaned Pods whose volumes failed to be cleaned in the last periodic sweep.',
    registers,
  });
  return {
    orphanPodSweep(orphans: number, failed: number): void {
      cleaned.set(orphans);
      errors.set(failed);
    },
  };
}
