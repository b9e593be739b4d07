import type { GlobalDirSkipReason } from '../volume/csi/globalVolumes.js';

/**
 * The stable shape of `nodevol audit -o json` (documented in README.md). Fields may be added;
 * none may be renamed or removed.
 */

export type Verdict = 'tracked' | 'recovered' | 'orphaned';
export type DataSource = 'pod-local' | 'global-fallback';
/** Why a global directory is not a volume: see README (`skipped[].reason`). */
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

export interface AuditSummary {
  volumes: number;
  tracked: number;
  recovered: number;
  orphaned: number;
  failed: number;
  skipped: number;
}

export interface AuditReport {
  rootDir: string;
  featureGates: Record<string, boolean>;
  volumes: AuditVolume[];
  failed: AuditFailed[];
  skipped: AuditSkipped[];
  summary: AuditSummary;
  /** Lines of the mount table that could not be parsed (nodevol addition). */
  mountTableProblems: { line: number; error: string }[];
  /** When the audit ran, RFC 3339 (nodevol addition). */
  timestamp: string;
}

/** The audit's exit code: node-problem-detector custom-plugin convention. */
export const EXIT_OK = 0;
export const EXIT_PROBLEM = 1;
export const EXIT_UNKNOWN = 2;

export function exitCodeFor(report: AuditReport): number {
  return report.summary.orphaned > 0 || report.summary.failed > 0 ? EXIT_PROBLEM : EXIT_OK;
}
