/**
 * The safety and liveness invariants the simulator checks after every step. Each has a stable
 * name used in output, JSON and docs/explorer.md.
 */
export const INVARIANTS = {
  'in-use-reported':
    'whenever volumesInUse is written, every volume the driver has staged on this node (or whose global mount exists) and that is in volumesAttached is in it (kubernetes#121937)',
  'no-unstage-in-use':
    'NodeUnstageVolume never arrives while a running pod wants the volume or while the driver has a target of it published; NodeUnpublishVolume never arrives for a running pod\'s target',
  'stage-after-unstage':
    'NodeStageVolume never arrives while a NodeUnstageVolume of the same volume is still running at the driver (kubernetes#121357); NodePublishVolume only after a successful stage',
  'nothing-removed-early':
    'a vol_data.json is never removed while the driver still has the path beside it staged / published, nor a staging dir or pod volume dir while it is still mounted and the driver has it staged / published',
  'rwop-one-pod':
    'a ReadWriteOncePod volume (the PV\'s only access mode) is never published at the targets of two pods at once (the driver\'s record after each NodePublishVolume); kubelet refuses the second pod\'s SetUp, and a driver with SINGLE_NODE_MULTI_WRITER is sent SINGLE_NODE_SINGLE_WRITER',
  converges:
    'after the last fault or crash and a bounded virtual time, every wanted volume is staged and published, every unwanted one is unpublished and unstaged with its directories gone, and volumesInUse equals the wanted attachable set (not owed while a driver still holds a call on a hang: that fault has not ended)',
  'reconstruction-first':
    "an engine life sends no CSI call, mounts or unmounts nothing and writes no volumesInUse before its reconstruction ended (kubelet reconstructs before its reconciler's first pass, and reports volumesInUse only once its states synced)",
  'failure-visible': 'every failed CSI call the engine sees leaves an error log line and a metric',
} as const;

export type InvariantName = keyof typeof INVARIANTS;

export const INVARIANT_NAMES = Object.keys(INVARIANTS) as InvariantName[];

export interface Violation {
  readonly invariant: InvariantName;
  /** Scheduler step at which it was seen. */
  readonly step: number;
  readonly message: string;
}

/** Whether removing `removed` removes `kept` or its pod/global vol_data.json sibling. */
export function removalHits(removed: string, kept: string): boolean {
  if (removed === kept || kept.startsWith(`${removed}/`)) return true;
  const parent = kept.slice(0, kept.lastIndexOf('/'));
  return removed === `${parent}/vol_data.json`;
}
