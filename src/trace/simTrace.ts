/**
 * The simulator's trace: a stable, documented JSON structure (docs/explorer.md, "Trace format",
 * "Trace format"), version 1. A later timeline view reads exactly this.
 *
 *   SimTrace { version: 1, scenario, featureGates, seed, plan, replay, hash, steps[], violations[] }
 *   TraceStep {
 *     step, timeMs, life,                 // scheduler step, virtual ms, engine life (0 = none yet)
 *     event: { kind, label },             // what the scheduler delivered (see TraceEventKind)
 *     calls: PortCallRecord[],            // port calls whose effect landed in this step, with seq
 *     csi?: CsiRecord,                    // a CSI request/response at the driver
 *     fs?: { added[], removed[] },        // files and directories below the root dir
 *     operations?: OperationRecord[],     // volume manager operations that settled
 *     reconstructed?: ReconstructionFinding[], // what reconstruction found (src/trace/reconstruction.ts)
 *     mounts?: { added[], removed[] },    // mount points
 *     volumesInUse, volumesAttached,      // node status after the step
 *     violations: string[]                // invariant names first seen at this step
 *   }
 *   TraceViolation { invariant, step, message }
 *
 * src/timeline/fromSim.ts turns a trace into the timeline report's events.
 */

import type { ReconstructionFinding } from './reconstruction.js';

export type TraceEventKind =
  | 'port-call' // an engine port call's effect lands (fs, mount, cluster, clock)
  | 'csi-send' // an engine CSI call reaches the driver
  | 'csi-reply' // the driver's answer reaches the engine
  | 'timer' // a timer fires (engine loop, driver delay, client deadline)
  | 'scenario' // a scenario step (addPod, deletePod, fault, deleteFile, ...)
  | 'crash' // the engine life ends (restart or reboot); details in label
  | 'start'; // a new engine life starts

export interface PortCallRecord {
  readonly seq: number;
  readonly life: number;
  readonly port: 'fs' | 'mount' | 'cluster' | 'csi' | 'clock';
  readonly op: string;
  readonly args: string;
  /** 'ok', or the error's code / message. */
  readonly result: string;
}

export interface CsiRecord {
  readonly seq: number;
  readonly driver: string;
  readonly method: string;
  readonly volumeId: string;
  readonly request: Readonly<Record<string, unknown>>;
  /** 'OK' or the gRPC code name; undefined while only sent. */
  readonly code?: string;
  readonly durationMs?: number;
}

export interface OperationRecord {
  /** storage_operation_duration_seconds operation_name: volume_mount, unmount_device, ... */
  readonly name: string;
  readonly volumeName: string;
  readonly podName: string;
  /** Virtual ms when it started. */
  readonly startMs: number;
  /** The error's text; undefined when it succeeded. */
  readonly error?: string;
}

export interface TraceStep {
  readonly step: number;
  readonly timeMs: number;
  readonly life: number;
  readonly event: { readonly kind: TraceEventKind; readonly label: string };
  readonly calls: PortCallRecord[];
  csi?: CsiRecord;
  fs?: { readonly added: string[]; readonly removed: string[] };
  /** Volume manager operations that settled in this step. */
  operations?: OperationRecord[];
  /** What the engine's reconstruction found in this step: {found, volumeName, podName?, detail?}. */
  reconstructed?: ReconstructionFinding[];
  mounts?: { readonly added: string[]; readonly removed: string[] };
  volumesInUse: readonly string[];
  volumesAttached: readonly string[];
  readonly violations: string[];
}

export interface TraceViolation {
  readonly invariant: string;
  readonly step: number;
  readonly message: string;
}

export interface SimTrace {
  readonly version: 1;
  readonly scenario: string;
  readonly featureGates: Readonly<Record<string, boolean>>;
  readonly seed: number;
  readonly plan: string;
  readonly replay: string;
  readonly hash: string;
  readonly steps: readonly TraceStep[];
  readonly violations: readonly TraceViolation[];
}
