/**
 * How the mock driver's servers answer a call they refuse: a gRPC status error (what the CSI
 * server sends back), the refusal of a decision of the shared CSI node state machine, and the
 * access type a request's volume capability asks for.
 */
import { errorMessage } from '../ports/fs.js';
import { GrpcStatus } from '../ports/csi.js';
import { CsiStatusError } from '../adapters/grpc/server.js';
import type * as wire from '../adapters/grpc/messages.js';
import type { CsiDecision } from '../csi/nodeStateMachine.js';
import type { MockVolumeKind } from './state.js';

export function status(code: number, details: string): CsiStatusError {
  return new CsiStatusError(code, details);
}

export function invalid(details: string): CsiStatusError {
  return status(GrpcStatus.INVALID_ARGUMENT, details);
}

export function internal(details: string): CsiStatusError {
  return status(GrpcStatus.INTERNAL, details);
}

/** A thrown value as the status the call answers with (INTERNAL unless it is one already). */
export function statusError(err: unknown): CsiStatusError {
  if (err instanceof CsiStatusError) return err;
  return internal(errorMessage(err));
}

/** Throws a decision's refusal as a gRPC status; returns whether the call repeats a recorded one. */
export function decided(d: CsiDecision): boolean {
  if (!d.ok) throw status(d.code, d.details);
  return d.repeat;
}

/** The access type a request's capability asks for; INVALID_ARGUMENT when it names none. */
export function accessKind(cap: wire.VolumeCapability | null, what = 'volume capability'): MockVolumeKind {
  if (cap === null || (cap.mount === undefined && cap.block === undefined)) throw invalid(`${what} missing in request`);
  return cap.block !== undefined ? 'block' : 'mount';
}

/** The access type a request's capability asks for; undefined when it names none. */
export function accessKindOrUndefined(cap: wire.VolumeCapability | null): MockVolumeKind | undefined {
  if (cap === null || (cap.mount === undefined && cap.block === undefined)) return undefined;
  return cap.block !== undefined ? 'block' : 'mount';
}
