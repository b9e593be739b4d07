import type { GlobalDirSkipReason } from '../volume/csi/globalVolumes.js';

/**
 * The stable shape of `nodevol audit -o json` (documented in docs/reference/audit.md). Fields may be added;
 * none may be renamed or removed.
 */

export type Verdict = 'tracked' | 'recovered' | 'orphaned';
export type DataSource = 'pod-local' | 'global-fallback';
/** Why a global directory is not a volume: see docs/reference/audit.md (`skipped[].reason`). */
export type SkipReason = GlobalDirSkipReason;

export interface AuditPod {
  uid: string;
  specName: string;
  volumePath: string;
  dataSource: DataSource;
  /** Whether the pod's publish target (mount/, or the block publish path) is a mount point. */
  mounted: boolean;
}

export interface AuditGlobal {
  deviceMountPath: string;
  /** Filesystem: globalmount is a mount point. Block: something is mounted at or below staging/<spec>. */
  mounted: boolean;
  hasSpecVolID: boolean;
}

export interface AuditVolume {
  uniqueName: string;
  driver: string;
  volumeHandle: string | null;
  specName: string;
  mode: 'Filesystem' | 'Block';
  lifecycle: 'Persistent' | 'Ephemeral';
  pods: AuditPod[];
  global: AuditGlobal | null;
  verdict: Verdict;
  /** What the verdict would be with CSIGlobalMountReconstruction on (nodevol addition). */
  verdictWithGate: Verdict;
  reasons: string[];
}

export interface AuditFailed {
  podUID: string;
  specName: string;
  path: string;
  error: string;
  /** Whether the gate's pod-local fallback would reconstruct it (nodevol addition). */
  recoverableWithGate: boolean;
}

export interface AuditSkipped {
  path: string;
  reason: SkipReason;
  /** What exactly is wrong (nodevol addition). */
  detail: string;
}

/**
 * Finding `undescribed` (nodevol addition): a global directory the listing cannot describe (its
 * `skipped` entry) while its staging path is mounted: the device is staged, and no kubelet can
 * rebuild the volume from it (no driver, no handle), so it is never unstaged.
 */
export interface AuditUndescribed {
  /** The directory, as in `skipped[].path`. */
  path: string;
  /** Filesystem: `<path>/globalmount`, a mount point. Block: `volumeDevices/staging/<name>`, with a mount at or under it. */
  deviceMountPath: string;
  mode: 'Filesystem' | 'Block';
  reason: SkipReason;
  detail: string;
  /** Identity from the directory's vol_data.json where it names one. */
  driver?: string;
  volumeHandle?: string;
}

export interface AuditSummary {
  volumes: number;
  tracked: number;
  recovered: number;
  orphaned: number;
  failed: number;
  skipped: number;
  /** Mounted global mounts that cannot be described (nodevol addition). */
  undescribed: number;
  /** Stuck findings; present only when the agent's status file was read (nodevol addition). */
  stuck?: number;
}

/** A pod volume directory that names a stuck volume, as the audit sees it now. */
export interface AuditStuckPodDir {
  path: string;
  /** Whether its publish target (`mount/`) is a mount point. */
  mounted: boolean;
  /** Whether kubelet reconstructs it (false: it is in `failed`, the agent cannot unpublish it). */
  reconstructs: boolean;
}

/** Finding `stuck`: staged here, kept in volumesInUse by the agent, and the driver refuses its teardown. */
export interface AuditStuck {
  uniqueName: string;
  driver: string;
  /** unmount_device, volume_unmount, unmap_device, unmap_volume. */
  operation: string;
  /** The operation's pod ('' for a device operation). */
  podName: string;
  firstFailure: string;
  lastFailure: string;
  failures: number;
  /** The driver's last error, as the agent logged it. */
  lastError: string;
  grpcCode?: string;
  podDirs: AuditStuckPodDir[];
  /** With the cluster's view: whether node.status.volumesInUse lists it (absent otherwise). */
  inVolumesInUse?: boolean;
  reason: string;
}

/** The `stuckOperations` section: present when the agent's status file exists or was given. */
export interface AuditStuckSection {
  /** The status file read. */
  source: string;
  /** When the agent last wrote it; null when it could not be read. */
  writtenAt: string | null;
  findings: AuditStuck[];
  /** Entries for volumes this audit no longer finds on disk (torn down since, or an old file). */
  stale: number;
  /** Why the file could not be used (then no finding is derived from it). */
  error?: string;
}

export interface AuditReport {
  rootDir: string;
  featureGates: Record<string, boolean>;
  volumes: AuditVolume[];
  failed: AuditFailed[];
  skipped: AuditSkipped[];
  /** Skipped global directories that are mounted: findings (nodevol addition). */
  undescribed: AuditUndescribed[];
  summary: AuditSummary;
  /** Lines of the mount table that could not be parsed (nodevol addition). */
  mountTableProblems: { line: number; error: string }[];
  /** When the audit ran, RFC 3339 (nodevol addition). */
  timestamp: string;
  /** Stuck teardowns reported by the agent (nodevol addition; only when its status file was read). */
  stuckOperations?: AuditStuckSection;
}

/** The audit's exit code: node-problem-detector custom-plugin convention. */
export const EXIT_OK = 0;
export const EXIT_PROBLEM = 1;
export const EXIT_UNKNOWN = 2;

export function exitCodeFor(report: AuditReport): number {
  const s = report.summary;
  return s.orphaned > 0 || s.failed > 0 || s.undescribed > 0 || (s.stuck ?? 0) > 0 ? EXIT_PROBLEM : EXIT_OK;
}
