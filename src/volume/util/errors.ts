/**
 * Operation error classes (pkg/volume/util/types): the operation generator changes the actual
 * state differently for each.
 * - UncertainProgressError: the operation may still be in progress or may have succeeded (a
 *   timeout): a not-mounted volume/device becomes uncertain.
 * - TransientOperationFailure: nothing happened yet (driver not registered): no state change.
 * - anything else is final: an uncertain volume/device becomes not mounted, unless it was found
 *   during reconstruction.
 */
export class UncertainProgressError extends Error {
  override readonly name = 'UncertainProgressError';
}

export class TransientOperationFailure extends Error {
  override readonly name = 'TransientOperationFailure';
}

export function isUncertainProgressError(err: unknown): boolean {
  return err instanceof UncertainProgressError;
}

/** IsOperationFinishedError: neither uncertain nor transient. */
export function isOperationFinishedError(err: unknown): boolean {
  return !(err instanceof UncertainProgressError) && !(err instanceof TransientOperationFailure);
}
