/**
 * Audit reports built by hand, for the code that reads a report without walking a node (the
 * cluster findings, the audit's read plan of the API server).
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import type { AuditReport, AuditVolume, Verdict } from '../../src/audit/report.js';

export interface StagedVolumeSpec {
  readonly driver: string;
  readonly handle: string;
  readonly verdict?: Verdict;
  /** Pod UIDs whose volume dirs name it. */
  readonly pods?: readonly string[];
}

/** The report of a node whose staged volumes are `volumes` (each with a global mount), nothing else. */
export function reportOf(volumes: readonly StagedVolumeSpec[], failedPodUIDs: readonly string[] = []): AuditReport {
  const auditVolumes = volumes.map((v): AuditVolume => {
    const verdict = v.verdict ?? 'tracked';
    return {
      uniqueName: `kubernetes.io/csi/${v.driver}^${v.handle}`,
      driver: v.driver,
      volumeHandle: v.handle,
      specName: `pv-${v.handle}`,
      mode: 'Filesystem',
      lifecycle: 'Persistent',
      pods: (v.pods ?? []).map((uid) => ({ uid, specName: `pv-${v.handle}`, volumePath: `/var/lib/kubelet/pods/${uid}/volumes/kubernetes.io~csi/pv-${v.handle}`, dataSource: 'pod-local', mounted: true })),
      global: { deviceMountPath: `/var/lib/kubelet/plugins/kubernetes.io/csi/${v.driver}/${v.handle}/globalmount`, mounted: true, hasSpecVolID: true },
      verdict,
      verdictWithGate: verdict === 'orphaned' ? 'recovered' : verdict,
      reasons: [],
    };
  });
  const count = (verdict: Verdict): number => auditVolumes.filter((v) => v.verdict === verdict).length;
  return {
    rootDir: '/var/lib/kubelet',
    featureGates: {},
    volumes: auditVolumes,
    failed: failedPodUIDs.map((uid) => ({ podUID: uid, specName: 'pv-x', path: `/var/lib/kubelet/pods/${uid}/volumes/kubernetes.io~csi/pv-x`, error: 'lost', recoverableWithGate: false })),
    skipped: [],
    undescribed: [],
    summary: { volumes: auditVolumes.length, tracked: count('tracked'), recovered: count('recovered'), orphaned: count('orphaned'), failed: failedPodUIDs.length, skipped: 0, undescribed: 0 },
    mountTableProblems: [],
    timestamp: '2026-11-30T10:00:00Z',
  };
}
