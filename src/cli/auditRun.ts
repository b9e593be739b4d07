/**
 * One run of the audit for the commands that need it (audit, its long-running mode, recover):
 * flags to report, plus the cluster's view and findings when a source is configured.
 */
import * as path from 'node:path';
import type { Command } from 'commander';
import { runAudit, unreadSources } from '../audit/audit.js';
import { addVolumesInUse, readStuckOperations } from '../audit/stuckFindings.js';
import type { ClusterAudit } from '../audit/clusterFindings.js';
import type { ClusterState } from '../audit/clusterState.js';
import { stagedVolumes } from '../audit/clusterReads.js';
import { EXIT_PROBLEM, EXIT_UNKNOWN, exitCodeFor, type AuditReport } from '../audit/report.js';
import { realClock } from '../adapters/node/clock.js';
import { LIVE_MOUNTINFO, mountInfoFileSource } from '../adapters/node/mountInfoFile.js';
import { SyncReadFileSystem } from '../adapters/node/syncReadFs.js';
import { FeatureGate, FeatureGateError } from '../features/features.js';
import { errorCode, errorMessage, type FileSystem } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import { DEFAULT_ROOT_DIR, KubeletLayout } from '../layout/layout.js';
import type { LoggingFormat } from '../logging/klog.js';
import { escapeMountPath, parseMountInfo } from '../mount/mountInfo.js';
import { MountTableSnapshot } from '../mount/mountRefs.js';
import { rebaseMountPoints } from '../mount/rebase.js';
import { readMountInfoText } from '../mount/mountTable.js';
import { ClusterSourceError, loadClusterState, requestTimeoutMs, type ClusterFlags } from './auditCluster.js';
import { AuditRunFailure, type AuditFailureReason } from './auditFailure.js';
import { collect } from './flags.js';

/** The flags every command that runs the audit shares (audit, recover). */
export interface AuditRunFlags extends ClusterFlags {
  rootDir: string;
  mountinfo: string;
  /** The kubelet root dir as the mount table names it, when --root-dir is a copy or mounted elsewhere. */
  mountinfoRootDir?: string;
  featureGates: string[];
  /** The agent's stuck operations status file (default <root-dir>/nodevol/stuck-operations.json, read when present). */
  stuckOperations?: string;
  v: number;
  loggingFormat: LoggingFormat;
}

/** Descriptions a command may word its own way; the flags, their defaults and parsers are the same. */
export interface AuditRunOptionDescriptions {
  readonly mountinfo?: string;
  readonly featureGates?: string;
}

/**
 * The flags that decide what the audit finds, defined once for every command that runs it (audit,
 * recover): --root-dir, --mountinfo, --mountinfo-root-dir, --feature-gates. (--stuck-operations
 * adds the audit's stuck findings only, and stays the audit's.)
 */
export function addAuditRunOptions(cmd: Command, describe: AuditRunOptionDescriptions = {}): Command {
  return cmd
    .option('--root-dir <dir>', 'kubelet root directory', DEFAULT_ROOT_DIR)
    .option('--mountinfo <file>', describe.mountinfo ?? 'mount table to read (a captured copy works too)', LIVE_MOUNTINFO)
    .option(
      '--mountinfo-root-dir <dir>',
      'the kubelet root dir as the mount table names it, when --root-dir is a copy or is mounted elsewhere (default: --root-dir)',
    )
    .option('--feature-gates <gates>', describe.featureGates ?? 'kubelet feature gates to evaluate with, e.g. CSIGlobalMountReconstruction=true', collect, []);
}

/**
 * The mount table of --mountinfo, with the mount points under --mountinfo-root-dir moved under
 * the (real) root dir, so that every look-up by a path of the root dir matches.
 */
export async function readRunMountTable(
  flags: Pick<AuditRunFlags, 'mountinfo' | 'mountinfoRootDir'>,
  realRootDir: string,
  options: { readonly strict: boolean; readonly fs?: FileSystem },
): Promise<MountTableSnapshot> {
  const text = await readMountInfoText(mountInfoFileSource(flags.mountinfo, options.fs));
  const parseOptions = { strict: options.strict, source: flags.mountinfo };
  // Without a rebase, the entries are built only as the look-ups need them (docs/benchmarks.md).
  if (flags.mountinfoRootDir === undefined) return MountTableSnapshot.scan(text, parseOptions);
  return new MountTableSnapshot(rebaseMountPoints(parseMountInfo(text, parseOptions), path.posix.resolve(flags.mountinfoRootDir), realRootDir));
}

/** One audit run: the report, and the cluster's view and findings when a source is configured. */
export interface AuditRun {
  readonly report: AuditReport;
  readonly state?: ClusterState;
  readonly cluster?: ClusterAudit;
  readonly realRootDir: string;
  readonly features: FeatureGate;
  /** The top-level dirs (pods/, the CSI plugin dir) the walk could not read: the report says nothing of them. */
  readonly unread: readonly string[];
}

/** What the long-running audit gives one run besides the flags. */
export interface AuditRunContext {
  /** Aborts the run's API requests (their connections closed): the run then fails. */
  readonly signal?: AbortSignal;
  /** Told the API server's Retry-After (ms) when the cluster's view failed on an answer that had one. */
  readonly onRetryAfter?: (ms: number) => void;
  /** Whether this report needs every PersistentVolume of the cluster (recover); default no. */
  readonly everyPersistentVolume?: (report: AuditReport) => boolean;
}

/** Runs the audit; a string is the one-line reason it could not run (exit 2). */
export async function collectAudit(flags: AuditRunFlags, logger: Logger, command: string, context: AuditRunContext = {}): Promise<AuditRun | string> {
  const run = await collectAuditRun(flags, logger, command, context);
  return run instanceof AuditRunFailure ? run.message : run;
}

/** Runs the audit; an {@link AuditRunFailure} says why it could not run (exit 2), from a fixed set of reasons. */
export async function collectAuditRun(flags: AuditRunFlags, logger: Logger, command: string, context: AuditRunContext = {}): Promise<AuditRun | AuditRunFailure> {
  const fail = (reason: AuditFailureReason, message: string, brief?: string): AuditRunFailure => new AuditRunFailure(reason, message, brief);
  let features: FeatureGate;
  try {
    const parsed = FeatureGate.parse(flags.featureGates);
    features = parsed.gate;
    for (const w of parsed.warnings) logger.warning(w);
  } catch (err) {
    if (err instanceof FeatureGateError) return fail('flags', `nodevol ${command}: invalid --feature-gates: ${err.message}`);
    throw err;
  }

  // Synchronous reads: the walk's speed is the system calls' (docs/benchmarks.md, "What keeps it fast").
  const fs = new SyncReadFileSystem();
  const rootDir = path.resolve(flags.rootDir);
  let realRootDir: string;
  try {
    const st = await fs.stat(rootDir);
    if (st.type !== 'directory') throw new Error('not a directory');
    realRootDir = await fs.realpath(rootDir);
  } catch (err) {
    // The advice is for a person at a terminal; a Node condition (the brief) says only what is wrong.
    return errorCode(err) === 'ENOENT'
      ? fail(
          'root-dir',
          `nodevol ${command}: --root-dir ${rootDir} does not exist: pass this node's kubelet root dir; with no node, try nodevol demo or the example node (README.md)`,
          `--root-dir ${rootDir} does not exist`,
        )
      : fail('root-dir', `nodevol ${command}: --root-dir ${rootDir}: ${errorMessage(err)}`);
  }

  let mountTable: MountTableSnapshot;
  try {
    mountTable = await readRunMountTable(flags, realRootDir, { strict: false, fs });
  } catch (err) {
    return fail('mountinfo', `nodevol ${command}: --mountinfo ${flags.mountinfo}: ${errorMessage(err)}`);
  }
  for (const p of mountTable.problems) {
    logger.warning('Mount table line could not be parsed; kubelet would fail every mount-reference look-up', {
      file: flags.mountinfo,
      line: p.line,
      error: p.error,
    });
  }

  const layout = new KubeletLayout(realRootDir);
  const stuckOperations = await readStuckOperations(fs, realRootDir, flags.stuckOperations === undefined ? undefined : path.resolve(flags.stuckOperations));
  if (stuckOperations !== undefined && 'error' in stuckOperations) {
    logger.warning('Cannot read the agent\'s stuck operations status file; no stuck finding is derived from it', { file: stuckOperations.source, error: stuckOperations.error });
  }
  const report = await runAudit({
    fs,
    // Paths in the mount table are real paths: walk the root dir by its real path so that they match.
    layout,
    realRootDir,
    displayRootDir: rootDir,
    mountTableSource: flags.mountinfo,
    features,
    logger,
    clock: realClock,
    mountTable,
    nowMs: Date.now(),
    ...(stuckOperations === undefined ? {} : { stuckOperations }),
  });
  if (report.volumes.length > 0 && !namesPathUnder(mountTable, realRootDir)) {
    logger.warning('The mount table names no mount under the root dir: every volume reads as not mounted (a copied or moved root dir needs --mountinfo-root-dir)', {
      rootDir: realRootDir,
      mountinfo: flags.mountinfo,
    });
  }
  // The cluster's view after the walk (what the API server is asked for depends on the volumes
  // staged here: src/audit/clusterReads.ts), before anything is printed: an error gives no verdict.
  let state: ClusterState | undefined;
  try {
    state = await loadClusterState(flags, {
      ...(context.signal !== undefined ? { signal: context.signal } : {}),
      staged: stagedVolumes(report),
      everyPersistentVolume: context.everyPersistentVolume?.(report) === true,
      logger,
    });
  } catch (err) {
    if (err instanceof ClusterSourceError && err.retryAfterMs !== undefined) context.onRetryAfter?.(err.retryAfterMs);
    return fail(clusterFailureReason(flags), `nodevol ${command}: ${errorMessage(err)}`);
  }
  const unread = unreadSources(report, layout);
  const cluster = state === undefined ? undefined : (await import('../audit/clusterFindings.js')).clusterAudit(report, state);
  if (state !== undefined && report.stuckOperations !== undefined) addVolumesInUse(report.stuckOperations, state.volumesInUse);
  return { report, realRootDir, features, unread, ...(state !== undefined ? { state } : {}), ...(cluster !== undefined ? { cluster } : {}) };
}

/** Which source of the cluster's view a failure to read it is about: a flag, the file, or the API server. */
function clusterFailureReason(flags: ClusterFlags): AuditFailureReason {
  if (flags.clusterState !== undefined && flags.kubeconfig !== undefined) return 'flags';
  try {
    requestTimeoutMs(flags);
  } catch {
    return 'flags';
  }
  return flags.clusterState !== undefined ? 'cluster-state' : 'cluster-api';
}

/** A run that read neither the pods dir nor the CSI plugin dir is a failure (exit 2) too: nothing was audited. */
export function nothingReadFailure(run: AuditRun, command: string): AuditRunFailure | undefined {
  if (run.unread.length < 2) return undefined;
  const message = unreadMessage(run, command) ?? `nodevol ${command}: nothing was audited`;
  return new AuditRunFailure('nothing-read', message);
}

/**
 * What to say on stderr about the dirs the walk could not read: nothing when both were read; with
 * one, which partial result the verdicts rest on; with neither, that nothing was audited.
 */
export function unreadMessage(run: AuditRun, command: string): string | undefined {
  const layout = new KubeletLayout(run.realRootDir);
  if (run.unread.length >= 2) {
    return `nodevol ${command}: could read neither ${run.unread[0] ?? ''} nor ${run.unread[1] ?? ''}: nothing was audited, the result says nothing about this node`;
  }
  const only = run.unread[0];
  if (only === undefined) return undefined;
  const trusted =
    only === layout.podsDir()
      ? `the global mounts under ${layout.csiPluginDir()} only (pod volumes unknown)`
      : `the pod volumes under ${layout.podsDir()} only (global mounts unknown)`;
  return `nodevol ${command}: partial result: could not read ${only}; the verdicts rest on ${trusted}`;
}

/** Whether some mount point of the table lies below `dir` (compared as the kernel escapes paths). */
function namesPathUnder(table: MountTableSnapshot, dir: string): boolean {
  const prefix = `${escapeMountPath(dir)}/`;
  return table.hasMountPointStartingWith(prefix);
}

/** The audit's exit code: the node's findings, then the cluster's. */
export function auditExitCode(run: AuditRun): number {
  // Neither source read: no verdict can be trusted, whatever the (empty) report says.
  if (run.unread.length >= 2) return EXIT_UNKNOWN;
  const code = exitCodeFor(run.report);
  if (code !== 0) return code;
  return (run.cluster?.findings.length ?? 0) > 0 ? EXIT_PROBLEM : code;
}

