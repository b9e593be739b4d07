/**
 * The stuck operations status file, `<root-dir>/nodevol/stuck-operations.json` (nodevol
 * addition; docs/reference/agent.md, "Stuck volumes"): the agent's StuckOperationTracker
 * (stuckOperations.ts) writes it, `nodevol audit` reads it (src/audit/stuckFindings.ts), so that
 * a volume whose teardown keeps failing is reported without anyone reading a log.
 *
 * Bounded: at most {@link MAX_STUCK_ENTRIES} entries, each error cut at
 * {@link MAX_STUCK_ERROR_CHARS}, at most {@link MAX_STUCK_TARGETS} targets, the whole file at most
 * {@link MAX_STUCK_FILE_BYTES}. Written atomically and durably, never through a symlink; read
 * back with every field checked.
 */
import * as posix from 'node:path/posix';
import { errorCode, errorMessage, writeFileAtomic, type FileSystem } from '../ports/fs.js';

/** The status file, relative to the root dir. */
export const STUCK_OPERATIONS_DIR_NAME = 'nodevol';
export const STUCK_OPERATIONS_FILE_NAME = 'stuck-operations.json';
export const STUCK_OPERATIONS_FILE_VERSION = 1;

/** Bounds of the status file: entries, characters of an error, bytes of the whole file. */
export const MAX_STUCK_ENTRIES = 1_000;
export const MAX_STUCK_ERROR_CHARS = 2_048;
export const MAX_STUCK_TARGETS = 16;
export const MAX_STUCK_FILE_BYTES = 4 * 1024 * 1024;

/** The status file of a root dir. */
export function stuckOperationsPath(rootDir: string): string {
  return posix.join(rootDir, STUCK_OPERATIONS_DIR_NAME, STUCK_OPERATIONS_FILE_NAME);
}

/** One stuck operation, as the status file stores it (times RFC 3339). */
export interface StuckOperation {
  readonly volumeName: string;
  /** The CSI driver, from the unique volume name; '' when the volume is not a CSI one. */
  readonly driver: string;
  /** The operation key's pod ('' for a device operation). */
  readonly podName: string;
  /** storage_operation_duration_seconds' operation_name: unmount_device, volume_unmount, ... */
  readonly operation: string;
  readonly firstFailure: string;
  readonly lastFailure: string;
  readonly failures: number;
  /** The last error, cut at MAX_STUCK_ERROR_CHARS. */
  readonly lastError: string;
  /** The gRPC status name in the error (Internal, FailedPrecondition, ...), when it came from the driver. */
  readonly grpcCode?: string;
  /** Pod volume directories (or publish targets) still naming the volume when it was found stuck. */
  readonly targets: readonly string[];
}

/** The whole status file. */
export interface StuckOperationsFile {
  readonly version: number;
  readonly writtenAt: string;
  readonly entries: readonly StuckOperation[];
}

/** An error text as the file keeps it: cut at {@link MAX_STUCK_ERROR_CHARS}. */
export function cutStuckError(text: string): string {
  return text.length <= MAX_STUCK_ERROR_CHARS ? text : `${text.slice(0, MAX_STUCK_ERROR_CHARS)}…`;
}

/**
 * Writes the status file below the (real) root dir: the directory must be a real one there (never
 * written through a symlink), the file is replaced atomically and durably (the FileSystem port's
 * writeFileAtomic, temp file `stuck-operations.json.tmp`). Throws when it cannot, or when the file
 * would exceed {@link MAX_STUCK_FILE_BYTES}.
 */
export async function writeStuckOperationsFile(fs: FileSystem, realRootDir: string, body: StuckOperationsFile): Promise<void> {
  const dir = posix.join(realRootDir, STUCK_OPERATIONS_DIR_NAME);
  await fs.mkdir(dir, { recursive: true, mode: 0o750 });
  const st = await fs.lstat(dir);
  if (st.type !== 'directory') throw new Error(`${dir} is not a directory (${st.type}); not written`);
  const data = new TextEncoder().encode(`${JSON.stringify(body, null, 2)}\n`);
  if (data.length > MAX_STUCK_FILE_BYTES) throw new Error(`status file would be ${data.length} bytes (limit ${MAX_STUCK_FILE_BYTES}); not written`);
  await writeFileAtomic(fs, stuckOperationsPath(realRootDir), data, { mode: 0o640 });
}

/** Removes the status file (nothing is stuck); a file already gone is fine. */
export async function removeStuckOperationsFile(fs: FileSystem, realRootDir: string): Promise<void> {
  await fs.unlink(stuckOperationsPath(realRootDir)).catch((err: unknown) => {
    if (errorCode(err) !== 'ENOENT') throw err;
  });
}

/** A status file that is not what this version writes: the reason, naming the field. */
export class StuckOperationsFileError extends Error {
  override readonly name = 'StuckOperationsFileError';
}

/** Validates a parsed status file; throws {@link StuckOperationsFileError} naming the field. */
export function parseStuckOperationsFile(text: string, source: string): StuckOperationsFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new StuckOperationsFileError(`${source}: not JSON: ${errorMessage(err)}`);
  }
  const bad = (field: string, what: string): never => {
    throw new StuckOperationsFileError(`${source}: field ${field}: ${what}`);
  };
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return bad('(top level)', 'not an object');
  const o = raw as Record<string, unknown>;
  if (o['version'] !== STUCK_OPERATIONS_FILE_VERSION) bad('version', `${JSON.stringify(o['version'])}, expected ${STUCK_OPERATIONS_FILE_VERSION}`);
  const writtenAt = o['writtenAt'];
  if (typeof writtenAt !== 'string' || Number.isNaN(Date.parse(writtenAt))) return bad('writtenAt', 'not an RFC 3339 time');
  const list = o['entries'];
  if (!Array.isArray(list)) return bad('entries', 'not a list');
  if (list.length > MAX_STUCK_ENTRIES) bad('entries', `${list.length} entries, more than ${MAX_STUCK_ENTRIES}`);
  const entries: StuckOperation[] = [];
  list.forEach((item: unknown, i: number) => {
    const at = `entries[${i}]`;
    if (typeof item !== 'object' || item === null) return bad(at, 'not an object');
    const e = item as Record<string, unknown>;
    const str = (k: string): string => {
      const v = e[k];
      return typeof v === 'string' ? v : bad(`${at}.${k}`, 'not a string');
    };
    const failures = e['failures'];
    if (typeof failures !== 'number' || !Number.isSafeInteger(failures) || failures < 1) return bad(`${at}.failures`, 'not a positive integer');
    const targets = e['targets'];
    if (!Array.isArray(targets) || targets.length > MAX_STUCK_TARGETS || !targets.every((t) => typeof t === 'string')) {
      return bad(`${at}.targets`, `not a list of at most ${MAX_STUCK_TARGETS} strings`);
    }
    const grpcCode = e['grpcCode'];
    if (grpcCode !== undefined && typeof grpcCode !== 'string') return bad(`${at}.grpcCode`, 'not a string');
    entries.push({
      volumeName: str('volumeName'),
      driver: str('driver'),
      podName: str('podName'),
      operation: str('operation'),
      firstFailure: str('firstFailure'),
      lastFailure: str('lastFailure'),
      failures,
      lastError: cutStuckError(str('lastError')),
      ...(grpcCode === undefined ? {} : { grpcCode }),
      targets,
    });
  });
  return { version: STUCK_OPERATIONS_FILE_VERSION, writtenAt, entries };
}
