/**
 * Gate CSIRetryReconstructionCleanup (docs/feature-gates.md): kubelet's cleanOrphanVolumes gives
 * each pod volume that failed reconstruction one cleanup, and skips for good one a pod wants at
 * that moment; with the gate a candidate stays until its volume directory is gone (TearDown
 * succeeded), its pod's SetUp put it in the actual state, or it is no longer a candidate. A
 * wanted one is only watched: if its pod goes before its SetUp (a delete while another operation
 * on the volume held the executor), it is cleaned up like the others. Cleanup is started again
 * after a backoff that doubles from 500 ms to kubelet's 2m2s (a failing TearDown is also backed
 * off by the operation executor).
 *
 * Hook: reconstruct.go cleanOrphanVolumes (cleanOrphanVolumes), with kubelet's cleanupMounts.
 */
import { CSIRetryReconstructionCleanup } from '../../features/features.js';
import { BACKOFF_INITIAL_MS, BACKOFF_MAX_MS, isAlreadyExists, isBackoff } from '../../operationexecutor/nestedPendingOperations.js';
import { isNotExist } from '../../ports/fs.js';
import type { VolumeHost } from '../../volume/volumeHost.js';
import type { PodVolume } from '../../volumemanager/reconciler/podVolumes.js';
import type { OrphanVolumeCleanup } from '../../volumemanager/reconciler/reconstructHooks.js';
import type { NodevolGate } from '../nodevolGate.js';

export const retryReconstructionCleanup: NodevolGate = {
  name: CSIRetryReconstructionCleanup,
  proofScenarios: ['reconstruction-cleanup-retry', 'reconstruction-failed-pod-deleted'],
  doc: 'csiretryreconstructioncleanup',
  create: (host) => {
    // Per candidate volume path, its cleanup backoff: in memory, for this life of the node.
    const cleanupRetries = new Map<string, { backoffMs: number; notBeforeMs: number }>();
    return { reconstruct: { cleanOrphanVolumes: (cleanup) => retryOrphanVolumeCleanup(host, cleanupRetries, cleanup) } };
  },
};

/** One pass over the candidates; resolves to those to look at again in the next. */
async function retryOrphanVolumeCleanup(
  host: VolumeHost,
  cleanupRetries: Map<string, { backoffMs: number; notBeforeMs: number }>,
  { failed, dsw, asw, isOperationPending, cleanupMounts }: OrphanVolumeCleanup,
): Promise<readonly PodVolume[]> {
  const { fs, logger } = host;
  const now = host.clock.nowMs();
  const left: PodVolume[] = [];
  for (const volume of failed) {
    if (dsw.volumeExistsWithSpecName(volume.podName, volume.volumeSpecName)) {
      cleanupRetries.delete(volume.volumePath);
      if (asw.volumeExistsWithSpecName(volume.podName, volume.volumeSpecName)) {
        // The pod's SetUp put it in the actual state: from now on the reconciler owns it.
        logger.v(4).info('Volume exists in desired and actual state, skip cleaning up mounts', { podName: volume.podName, volumeSpecName: volume.volumeSpecName });
        continue;
      }
      // Wanted but not set up yet: if the pod goes before its SetUp, nothing else would tear it
      // down (the actual state never had it), so keep watching it.
      left.push(volume);
      continue;
    }
    const key = volume.volumePath;
    if (isOperationPending(volume.volumeSpecName, volume.podName)) {
      left.push(volume);
      continue;
    }
    try {
      await fs.lstat(volume.volumePath);
    } catch (err) {
      if (isNotExist(err)) {
        if (cleanupRetries.has(key)) logger.info('Volume that could not be reconstructed is cleaned up', { podName: volume.podName, volumeSpecName: volume.volumeSpecName });
        cleanupRetries.delete(key);
        continue;
      }
    }
    left.push(volume);
    const retry = cleanupRetries.get(key);
    if (retry !== undefined && now < retry.notBeforeMs) continue;
    if (retry !== undefined) logger.info('Retrying the cleanup of a volume that could not be reconstructed', { podName: volume.podName, volumeSpecName: volume.volumeSpecName, backoff: `${retry.backoffMs}ms` });
    const err = await cleanupMounts(volume);
    // The executor refused to start it (its own backoff after a failed TearDown, or one still
    // running): not an attempt, so the backoff does not grow; try again when the executor's
    // backoff ends.
    const refusedForMs = isBackoff(err) ? err.retryAfterMs + 1 : isAlreadyExists(err) ? 0 : undefined;
    if (refusedForMs !== undefined) {
      cleanupRetries.set(key, { backoffMs: retry?.backoffMs ?? 0, notBeforeMs: now + refusedForMs });
      continue;
    }
    // A real attempt (a TearDown started, or its unmounter could not be built): the next one
    // waits, 500 ms doubling to 2m2s, as kubelet's exponential backoff after a failure.
    const backoffMs = retry === undefined || retry.backoffMs === 0 ? BACKOFF_INITIAL_MS : Math.min(retry.backoffMs * 2, BACKOFF_MAX_MS);
    cleanupRetries.set(key, { backoffMs, notBeforeMs: now + backoffMs });
  }
  if (left.length === 0) logger.v(2).info('Orphan volume cleanup finished');
  return left;
}
