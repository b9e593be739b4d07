/**
 * Trace events: what happened on one node, in order, as the timeline draws it. The simulator's
 * runs and `nodevol agent --trace` both reduce to this list, so that a run in the simulator and
 * a run on a real node are looked at the same way.
 *
 * Times are milliseconds on the clock of the run that recorded them (virtual in the simulator,
 * monotonic since start on a node); only their order and differences matter.
 */

/** A scenario step (or a phase of a real run) begins: the timeline's columns. */
export interface StepEvent {
  readonly kind: 'step';
  readonly t: number;
  /** 0-based, the same across the runs drawn one above the other. */
  readonly index: number;
  readonly label: string;
}

/** One CSI call as the driver saw it (or as the client saw it when the driver cannot tell). */
export interface CsiEvent {
  readonly kind: 'csi';
  readonly t: number;
  /** When the answer came; undefined when none came (hung, or the caller died first). */
  readonly end?: number | undefined;
  readonly method: string;
  readonly volumeId: string;
  /** 'OK' or the gRPC status name. */
  readonly outcome: string;
  readonly details?: string;
  readonly request?: unknown;
}

/** A volume manager operation (MountVolume, UnmountDevice, ...). */
export interface OperationEvent {
  readonly kind: 'operation';
  readonly t: number;
  readonly end?: number | undefined;
  readonly name: string;
  readonly volumeName: string;
  readonly podName: string;
  readonly error?: string;
}

export interface FileEvent {
  readonly kind: 'file';
  readonly t: number;
  readonly action: 'write' | 'remove' | 'mkdir' | 'rmdir' | 'rename' | 'lost';
  readonly path: string;
}

export interface MountEvent {
  readonly kind: 'mount';
  readonly t: number;
  readonly action: 'mount' | 'unmount' | 'lost';
  readonly target: string;
  readonly source?: string;
}

/**
 * node.status as the attach/detach controller sees it: volumesInUse as read or as written, with
 * volumesAttached as last read. Nothing in it is assumed: a value not yet read is left out.
 */
export interface StatusEvent {
  readonly kind: 'status';
  readonly t: number;
  readonly volumesInUse: readonly string[];
  /** Absent when node.status has not been read yet (a write came first). */
  readonly volumesAttached?: readonly string[];
  /**
   * 'read': the agent read node.status; 'written': the agent wrote volumesInUse. Absent in a
   * simulator run (the cluster's state at that step) and in a trace of an older agent, which
   * recorded an assumed empty volumesInUse at each start (`nodevol timeline` warns of those).
   */
  readonly source?: 'read' | 'written';
}

/** The volume manager process ends (restart), or the whole node reboots. */
export interface CrashEvent {
  readonly kind: 'crash';
  readonly t: number;
  readonly crash: 'restart' | 'reboot';
  readonly detail?: string;
}

/** A safety or liveness invariant broke here. */
export interface ViolationEvent {
  readonly kind: 'violation';
  readonly t: number;
  readonly invariant: string;
  readonly message: string;
}

/**
 * What the volume manager's reconstruction found when it started (kubelet's reconstructVolumes):
 * a volume it took into its actual state, and how it found it, or a pod volume directory it could
 * not reconstruct. Why a volume stays in volumesInUse after a restart or a reboot, and why it is
 * then unmounted and unstaged when no pod wants it. Recorded from the engine's own log lines
 * (src/trace/reconstruction.ts), whatever the verbosity.
 */
export interface ReconstructEvent {
  readonly kind: 'reconstruct';
  readonly t: number;
  /**
   * `global-listing`: the CSI plugin listed its global mount, which no pod directory named
   * (CSIGlobalMountReconstruction); `pod-directory`: a pod volume directory named it; `failed`:
   * a pod volume directory could not be reconstructed (kubelet only cleans its mounts up).
   * A volume found is added as uncertain: kept in volumesInUse, and unmounted (NodeUnstageVolume)
   * unless a pod wants it again.
   */
  readonly found: ReconstructionSource;
  /** The unique volume name; for `failed`, the volume's name in the pod directory (its spec name). */
  readonly volumeName: string;
  /** The pod whose directory named it (pod-directory, failed). */
  readonly podName?: string;
  /** The global mount path (global-listing) or the error (failed). */
  readonly detail?: string;
}

export type ReconstructionSource = 'global-listing' | 'pod-directory' | 'failed';

/** A log line worth showing on the timeline (errors and warnings). */
export interface LogEvent {
  readonly kind: 'log';
  readonly t: number;
  readonly severity: 'I' | 'W' | 'E';
  readonly message: string;
}

export type TraceEvent = StepEvent | CsiEvent | OperationEvent | FileEvent | MountEvent | StatusEvent | CrashEvent | ViolationEvent | ReconstructEvent | LogEvent;

/** One run to draw: a label (e.g. the feature gates) and its events. */
export interface TraceRun {
  readonly label: string;
  /** One narrated sentence shown under the label. */
  readonly summary?: string;
  readonly events: readonly TraceEvent[];
}
