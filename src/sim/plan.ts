/**
 * A run's plan: the perturbations the explorer puts on one simulation run, besides the
 * scenario's own steps. A crash (restart or reboot of the engine) lands just before or just after
 * a numbered call (src/sim/fencedPorts.ts numbers every port and CSI call of a run); so does a
 * stop (a SIGTERM: the agent's runtime stops with its grace period, then the process exits and
 * the next engine life starts as after a restart). A fault is put on the Nth CSI call of the run.
 * Plans are written `reboot:after:57,stop:before:12,fault:Hang:3` (the explorer's --plan, the
 * shrunk cases it prints).
 */
import { GrpcStatus, type CsiMethod } from '../ports/csi.js';
import type { CsiFault } from '../csi/faults.js';

/**
 * How an engine life ends at a crash point: `restart` (the process dies: kubelet restarts),
 * `reboot` (the node too), `stop` (a SIGTERM: the runtime's graceful stop, whatever is still in
 * flight after the grace period abandoned, then a restart).
 */
export type CrashKind = 'restart' | 'reboot' | 'stop';
export const CRASH_KINDS: readonly CrashKind[] = ['restart', 'reboot', 'stop'];
export type FaultKind = 'Unavailable' | 'Aborted' | 'DeadlineExceeded' | 'Hang';
export const FAULT_KINDS: readonly FaultKind[] = ['Unavailable', 'Aborted', 'DeadlineExceeded', 'Hang'];

export type Perturbation =
  | { readonly kind: 'crash'; readonly crash: CrashKind; readonly at: 'before' | 'after'; readonly seq: number }
  | { readonly kind: 'fault'; readonly fault: FaultKind; readonly csiCall: number };

/** How long a "hang" fault holds a call at the driver: past the client deadline. */
export const HANG_AT_DRIVER_MS = 180_000;

/**
 * The rule a planned fault puts on its one call: the explorer's `--faults` kinds in the one fault
 * model. A hang holds the call at the driver past the client's deadline, so the engine sees
 * DEADLINE_EXCEEDED after 2 minutes while the driver finishes it a minute later.
 */
export function planFaultRule(fault: FaultKind, method: CsiMethod, volumeId: string): CsiFault {
  const base = { method, times: 1, ...(volumeId === '' ? {} : { volumeId }) };
  switch (fault) {
    case 'Unavailable':
      return { ...base, code: GrpcStatus.UNAVAILABLE };
    case 'Aborted':
      return { ...base, code: GrpcStatus.ABORTED };
    case 'DeadlineExceeded':
      return { ...base, code: GrpcStatus.DEADLINE_EXCEEDED, afterEffect: true };
    case 'Hang':
      return { ...base, delayMs: HANG_AT_DRIVER_MS };
  }
}

/** `reboot:after:57`, `restart:before:12`, `stop:after:30`, `fault:Hang:3` (the 3rd CSI call of the run). */
export function formatPerturbation(p: Perturbation): string {
  return p.kind === 'crash' ? `${p.crash}:${p.at}:${p.seq}` : `fault:${p.fault}:${p.csiCall}`;
}

export function formatPlan(plan: readonly Perturbation[]): string {
  return plan.map(formatPerturbation).join(',');
}

export function parsePlan(text: string): Perturbation[] {
  if (text.trim() === '') return [];
  return text.split(',').map((part) => {
    const bits = part.trim().split(':');
    if (bits.length === 3 && CRASH_KINDS.includes(bits[0] as CrashKind) && (bits[1] === 'before' || bits[1] === 'after') && /^\d+$/.test(bits[2] ?? '')) {
      return { kind: 'crash', crash: bits[0] as CrashKind, at: bits[1], seq: Number(bits[2]) };
    }
    if (bits.length === 3 && bits[0] === 'fault' && FAULT_KINDS.includes(bits[1] as FaultKind) && /^\d+$/.test(bits[2] ?? '')) {
      return { kind: 'fault', fault: bits[1] as FaultKind, csiCall: Number(bits[2]) };
    }
    throw new Error(`bad plan item ${JSON.stringify(part)}: want ${CRASH_KINDS.join('|')}:before|after:SEQ or fault:${FAULT_KINDS.join('|')}:N`);
  });
}
