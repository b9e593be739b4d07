/**
 * The volume manager's reconstruction findings, read from the log lines the engine writes when
 * it starts (kubelet's messages, reconstruct_common.go, and KEP-6058's for the global listing): the agent's
 * tracer and the simulator's trace writer both record them, so that the timeline can show why a
 * volume is kept in volumesInUse after a restart, and why it is then unstaged. The engine knows
 * nothing of the trace; a change of one of these messages fails the tests that play KEP-6058
 * story 1 (test/unit/trace/reconstruction.test.ts).
 */
import type { LogValues } from '../ports/logger.js';
import type { ReconstructEvent } from './events.js';

/** A reconstruction finding: a {@link ReconstructEvent} without its time. */
export type ReconstructionFinding = Omit<ReconstructEvent, 'kind' | 't'>;

/** The V(2) line of a global mount that only the plugin's listing found (KEP-6058). */
export const GLOBAL_LISTING_MESSAGE = 'Global mount with no pod directory is marked uncertain and added into the actual state';
/** The V(2) line of a volume a pod volume directory named. */
export const POD_DIRECTORY_MESSAGE = 'Volume is marked as uncertain and added into the actual state';
/** The line of a pod volume directory that could not be reconstructed. */
export const FAILED_MESSAGE = 'Could not construct volume information';

/** The finding a log line reports, or undefined for any other line. */
export function reconstructionFinding(message: string, values: LogValues | undefined): ReconstructionFinding | undefined {
  const text = (key: string): string | undefined => {
    const v = values?.[key];
    return typeof v === 'string' && v !== '' ? v : undefined;
  };
  switch (message) {
    case GLOBAL_LISTING_MESSAGE: {
      const volumeName = text('volumeName');
      const path = text('deviceMountPath');
      return volumeName === undefined ? undefined : { found: 'global-listing', volumeName, ...(path === undefined ? {} : { detail: path }) };
    }
    case POD_DIRECTORY_MESSAGE: {
      const volumeName = text('volumeName');
      const podName = text('podName');
      return volumeName === undefined ? undefined : { found: 'pod-directory', volumeName, ...(podName === undefined ? {} : { podName }) };
    }
    case FAILED_MESSAGE: {
      const volumeName = text('volumeSpecName');
      const podName = text('podName');
      const err = text('err');
      return volumeName === undefined ? undefined : { found: 'failed', volumeName, ...(podName === undefined ? {} : { podName }), ...(err === undefined ? {} : { detail: err }) };
    }
    default:
      return undefined;
  }
}
