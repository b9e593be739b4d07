/**
 * One run of the audit for the commands that need it (audit, its long-running mode, recover):
 * flags to report, plus the cluster's view and findings when a source is configured.
 */
import * as path from 'node:path';
import { runAudit } from '../audit/audit.js';
import { clusterAudit, type ClusterAudit } from '../audit/clusterFindings.js';
import type { ClusterState } from '../audit/clusterState.js';
import { EXIT_PROBLEM, exitCodeFor, type AuditReport } from '../audit/report.js';
import { realClock } from '../adapters/node/clock.js';
import { mountInfoFileSource } from '../adapters/node/mountInfoFile.js';
import { NodeFileSystem } from '../adapters/node/nodeFs.js';
import { FeatureGate, FeatureGateError } from '../features/features.js';
import { errorMessage } from '../host/fs.js';
import type { Logger } from '../host/logger.js';
import { KubeletLayout } from '../layout/layout.js';
import type { LoggingFormat } from '../logging/klog.js';
import { MountTableSnapshot } from '../mount/mountRefs.js';
import { readMountInfoText } from '../mount/mountTable.js';
import { loadClusterState, type ClusterFlags } from './auditCluster.js';

/** The flags every command that runs the audit shares (audit, recover). */
export interface AuditRunFlags extends ClusterFlags {
  rootDir: string;
  mountinfo: string;
  featureGates: string[];
  v: number;
  loggingFormat: LoggingFormat;
}

/** One audit run: the report, and the cluster's view and findings when a source is configured. */
export interface AuditRun {
  readonly report: AuditReport;
  readonly state?: ClusterState;
  readonly cluster?: ClusterAudit;
  readonly realRootDir: string;
  readonly features: FeatureGate;
}

/** Runs the audit; a string is the one-line reason it could not run (exit 2). */
export async function collectAudit(flags: AuditRunFlags, logger: Logger, command: string): Promise<AuditRun | string> {
  let features: FeatureGate;
  try {
    const parsed = FeatureGate.parse(flags.featureGates);
    features = parsed.gate;
    for (const w of parsed.warnings) logger.warning(w);
  } catch (err) {
    if (err instanceof FeatureGateError) return `nodevol ${command}: invalid --feature-gates: ${err.message}`;
    throw err;
  }

  const fs = new NodeFileSystem();
  const rootDir = path.resolve(flags.rootDir);
  let realRootDir: string;
  try {
    const st = await fs.stat(rootDir);
    if (st.type !== 'directory') throw new Error('not a directory');
    realRootDir = await fs.realpath(rootDir);
  } catch (err) {
    return `nodevol ${command}: --root-dir ${rootDir}: ${errorMessage(err)}`;
  }

  let mountTable: MountTableSnapshot;
  try {
    const text = await readMountInfoText(mountInfoFileSource(flags.mountinfo));
    mountTable = MountTableSnapshot.parse(text, { strict: false, source: flags.mountinfo });
  } catch (err) {
    return `nodevol ${command}: --mountinfo ${flags.mountinfo}: ${errorMessage(err)}`;
  }
  for (const p of mountTable.problems) {
    logger.warning('Mount table line could not be parsed; kubelet would fail every mount-reference look-up', {
      file: flags.mountinfo,
      line: p.line,
      error: p.error,
    });
  }

  // The cluster's view first: an API error must stop the run before any verdict is printed.
  let state: ClusterState | undefined;
  try {
    state = await loadClusterState(flags);
  } catch (err) {
    return `nodevol ${command}: ${errorMessage(err)}`;
  }

  const report = await runAudit({
    fs,
    // Paths in the mount table are real paths: walk the root dir by its real path so that they match.
    layout: new KubeletLayout(realRootDir),
    realRootDir,
    displayRootDir: rootDir,
    mountTableSource: flags.mountinfo,
    features,
    logger,
    clock: realClock,
    mountTable,
    nowMs: Date.now(),
  });
  const cluster = state === undefined ? undefined : clusterAudit(report, state);
  return { report, realRootDir, features, ...(state !== undefined ? { state } : {}), ...(cluster !== undefined ? { cluster } : {}) };
}

/** The audit's exit code: the node's findings, then the cluster's. */
export function auditExitCode(run: AuditRun): number {
  const code = exitCodeFor(run.report);
  if (code !== 0) return code;
  return (run.cluster?.findings.length ?? 0) > 0 ? EXIT_PROBLEM : code;
}

