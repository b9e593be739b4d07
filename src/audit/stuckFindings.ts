/**
 * The audit's `stuck` finding (nodevol addition; docs/reference/audit.md): a volume still staged on this
 * node whose teardown the driver keeps refusing, found without reading a log.
 *
 * The audit stays read-only and calls no driver, so it cannot ask the driver itself. It reads
 * what the agent persisted instead: `<root-dir>/nodevol/stuck-operations.json` (or
 * `--stuck-operations FILE`), the bounded status file the agent's StuckOperationTracker writes
 * once a teardown operation has failed continuously for a minute (and removes when none is).
 * An entry becomes a finding only when the audit still sees the volume on disk (staged, or named
 * by a pod volume directory); the others are counted as stale. The finding names the pod volume
 * directories that still name the volume as the audit sees them now (mounted or not, and whether
 * kubelet can reconstruct them): the publish targets the driver may still hold.
 *
 * What this does not prove: that the agent is still running or still retrying (the file's
 * `writtenAt` says when it last wrote), nor what the driver would answer now.
 */
import * as posix from 'node:path/posix';
import { errorCode, errorMessage, type FileSystem } from '../ports/fs.js';
import type { MountTable } from '../ports/mounter.js';
import {
  MAX_STUCK_FILE_BYTES,
  parseStuckOperationsFile,
  STUCK_OPERATIONS_DIR_NAME,
  stuckOperationsPath,
  type StuckOperationsFile,
} from '../kubelet/stuckOperationsFile.js';
import { rootEscapeReason } from '../layout/confinement.js';
import type { AuditFailed, AuditStuck, AuditStuckSection, AuditVolume } from './report.js';

/** What the audit got from the status file: its contents, or why it could not use it. */
export type StuckOperationsInput =
  | { readonly source: string; readonly file: StuckOperationsFile }
  | { readonly source: string; readonly error: string };

const CSI_CALL: Readonly<Record<string, string>> = {
  unmount_device: 'NodeUnstageVolume',
  unmap_device: 'NodeUnstageVolume',
  volume_unmount: 'NodeUnpublishVolume',
  unmap_volume: 'NodeUnpublishVolume',
};

/**
 * Reads the status file: `explicit` when given (any path; it must exist), else the root dir's
 * (absent: undefined). Regular files only, at most MAX_STUCK_FILE_BYTES, never through a symlink
 * leading out of the root dir.
 */
export async function readStuckOperations(fs: FileSystem, realRootDir: string, explicit?: string): Promise<StuckOperationsInput | undefined> {
  const source = explicit ?? stuckOperationsPath(realRootDir);
  try {
    if (explicit === undefined) {
      const dir = posix.join(realRootDir, STUCK_OPERATIONS_DIR_NAME);
      try {
        await fs.lstat(dir);
      } catch (err) {
        if (errorCode(err) === 'ENOENT') return undefined;
        throw err;
      }
      const escape = await rootEscapeReason(fs, dir, realRootDir);
      if (escape !== undefined) return { source, error: escape };
    }
    let bytes: Uint8Array;
    try {
      bytes = await fs.readFile(source, MAX_STUCK_FILE_BYTES, { noFollow: explicit === undefined });
    } catch (err) {
      if (explicit === undefined && errorCode(err) === 'ENOENT') return undefined;
      throw err;
    }
    const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return { source, file: parseStuckOperationsFile(text, source) };
  } catch (err) {
    const message = errorMessage(err);
    return { source, error: message.includes(source) ? message : `${source}: ${message}` };
  }
}

/** The stuck section of the report: entries matched against the volumes the audit found. */
export function stuckSection(
  input: StuckOperationsInput,
  volumes: readonly AuditVolume[],
  failed: readonly AuditFailed[],
  mountTable: MountTable,
): AuditStuckSection {
  if ('error' in input) return { source: input.source, writtenAt: null, findings: [], stale: 0, error: input.error };
  const byName = new Map(volumes.map((v) => [v.uniqueName, v]));
  const findings: AuditStuck[] = [];
  let stale = 0;
  for (const e of input.file.entries) {
    const v = byName.get(e.volumeName);
    if (v === undefined || (v.global === null && v.pods.length === 0)) {
      stale++;
      continue;
    }
    const podDirs: AuditStuck['podDirs'] = [
      ...v.pods.map((p) => ({ path: p.volumePath, mounted: p.mounted, reconstructs: true })),
      ...failed
        .filter((f) => f.specName === v.specName)
        .map((f) => ({ path: f.path, mounted: mountTable.isMountPoint(`${f.path}/mount`), reconstructs: false })),
    ].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    findings.push({
      uniqueName: v.uniqueName,
      driver: v.driver,
      operation: e.operation,
      podName: e.podName,
      firstFailure: e.firstFailure,
      lastFailure: e.lastFailure,
      failures: e.failures,
      lastError: e.lastError,
      ...(e.grpcCode === undefined ? {} : { grpcCode: e.grpcCode }),
      podDirs,
      reason: reasonOf(e, v, podDirs, input.file.writtenAt),
    });
  }
  findings.sort((a, b) => (a.uniqueName < b.uniqueName ? -1 : a.uniqueName > b.uniqueName ? 1 : 0));
  return { source: input.source, writtenAt: input.file.writtenAt, findings, stale };
}

/**
 * With the cluster's view, each stuck finding says whether node.status.volumesInUse lists it:
 * the agent keeps a volume it retries in volumesInUse, and one that is not there may be detached
 * while staged.
 */
export function addVolumesInUse(section: AuditStuckSection, volumesInUse: readonly string[]): void {
  const inUse = new Set(volumesInUse);
  for (const f of section.findings) {
    f.inVolumesInUse = inUse.has(f.uniqueName);
    f.reason += f.inVolumesInUse
      ? '; node.status.volumesInUse lists it'
      : '; node.status.volumesInUse does NOT list it: the attach/detach controller may detach it while it is staged';
  }
}

function reasonOf(e: StuckOperationsFile['entries'][number], v: AuditVolume, podDirs: AuditStuck['podDirs'], writtenAt: string): string {
  const call = CSI_CALL[e.operation] ?? e.operation;
  const staged = v.global === null ? 'named by pod volume directories' : `staged at ${v.global.deviceMountPath}`;
  let s =
    `${staged}; the agent has failed ${e.operation} (${call}) ${e.failures} times from ${e.firstFailure} to ${e.lastFailure} ` +
    `(status file written ${writtenAt}); the driver answers ${e.grpcCode ?? 'an error'}: ${JSON.stringify(e.lastError)}. ` +
    'The agent keeps it in volumesInUse and retries; it is not lost, but it cannot leave this node';
  if (podDirs.length > 0) {
    const dirs = podDirs.map((d) => `${d.path} (${d.mounted ? 'mounted' : 'not mounted'}${d.reconstructs ? '' : ', cannot be reconstructed'})`);
    s += `. Pod volume directories still naming it: ${dirs.join(', ')}`;
    if (call === 'NodeUnstageVolume') s += ': if the driver still has one published, NodeUnpublishVolume it, then the next retry unstages';
  } else if (call === 'NodeUnstageVolume') {
    s += '. No pod volume directory names it: the target the driver still holds is not under this root dir; see the driver\'s state';
  }
  return s;
}
