// The stuck-teardown tracker's rig (src/kubelet/stuckOperations.ts), shared by its three test
// files: a gauge that records what it was last set to, a tracker on the fake clock and a
// recording logger, the in-memory file system its status file goes to, and that file read back.
import { MemFs } from '../../src/adapters/memory/memFs.js';
import type { OperationCompleteEvent } from '../../src/operationexecutor/nestedPendingOperations.js';
import { isNotExist } from '../../src/ports/fs.js';
import type { StuckOperationMetrics } from '../../src/ports/metrics.js';
import { StuckOperationTracker, type StuckOperationTrackerOptions } from '../../src/kubelet/stuckOperations.js';
import { parseStuckOperationsFile, stuckOperationsPath, type StuckOperationsFile } from '../../src/kubelet/stuckOperationsFile.js';
import { FakeClock } from './fakeClock.js';
import { RecordingLogger } from './hosts.js';
import { ROOT } from './inMemoryNode.js';

/** The gauge volume_manager_stuck_operations: what it was last set to. */
export class RecordingStuckMetrics implements StuckOperationMetrics {
  last: { pluginName: string; operationName: string; count: number }[] = [];
  setStuckOperations(counts: ReadonlyArray<{ pluginName: string; operationName: string; count: number }>): void {
    this.last = counts.map((c) => ({ ...c }));
  }
}

export interface StuckRig {
  readonly clock: FakeClock;
  readonly logger: RecordingLogger;
  readonly metrics: RecordingStuckMetrics;
  readonly tracker: StuckOperationTracker;
}

/**
 * A tracker on a fake clock started at 2026-12-01T03:00:00Z, a recording logger and gauge; the
 * options are added over those (a `logger` given replaces the recording one in the tracker).
 */
export function stuckRig(options: Partial<StuckOperationTrackerOptions> = {}): StuckRig {
  const clock = new FakeClock({ startMs: Date.UTC(2026, 11, 1, 3, 0, 0) });
  const logger = new RecordingLogger();
  const metrics = new RecordingStuckMetrics();
  const tracker = new StuckOperationTracker({ clock, logger, metrics, ...options });
  return { clock, logger, metrics, tracker };
}

/** An in-memory file system holding the root dir (inMemoryNode's ROOT), where the status file can be written. */
export function memFsWithRoot(): MemFs {
  const fs = MemFs.create();
  fs.writeRaw(`${ROOT}/.keep`, '');
  return fs;
}

/** The status file as parsed, or undefined when there is none. */
export async function readStuckStatusFile(fs: MemFs): Promise<StuckOperationsFile | undefined> {
  try {
    return parseStuckOperationsFile(new TextDecoder().decode(await fs.readFile(stuckOperationsPath(ROOT), 1 << 20)), 'status');
  } catch (err) {
    if (isNotExist(err)) return undefined;
    throw err;
  }
}

/** A settled operation of `volumeName`: failed with `error`, or succeeded when it is undefined. */
export function settledOperation(volumeName: string, operationName: string, error: unknown, podName = ''): OperationCompleteEvent {
  return { key: { volumeName, podName }, operationName, error, durationMs: 1 };
}

/** The lines logged at one severity. */
export function linesOf(logger: RecordingLogger, severity: 'I' | 'W' | 'E'): RecordingLogger['lines'] {
  return logger.lines.filter((x) => x.severity === severity);
}
