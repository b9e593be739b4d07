/**
 * Per-key serialisation of volume operations, with exponential backoff after failures: nodevol's
 * counterpart of kubelet's nestedpendingoperations and exponentialbackoff packages
 * (the keys are operation_executor.go's: MountVolume of an attachable or
 * device-mountable volume and every UnmountDevice on (volume, ''), UnmountVolume on (volume, pod)).
 *
 * An operation is keyed by (volumeName, podName). The pod name `''` (kubelet's
 * EmptyUniquePodName) is a wildcard: an operation keyed (v, '') conflicts with every operation on
 * v, and every operation on v conflicts with it. Operations on different volumes, or on the same
 * volume for two different non-empty pods, run in parallel.
 *
 * Lifecycle of one entry:
 * - `run()` adds it, pending, and starts the operation asynchronously;
 * - success deletes it, which also forgets its backoff;
 * - failure keeps it, not pending, and arms (or doubles) its backoff from `clock.nowMs()`;
 * - a retry is refused while `now - lastErrorTime <= durationBeforeRetry` (kubelet's SafeToRetry:
 *   the boundary itself still refuses);
 * - a later `run()` that matches a failed entry reuses that entry and takes its key. While the
 *   backoff is still active, an operation of another name resets the backoff and renames the
 *   entry (a failing mount does not hold back an unmount); once it has expired, the entry keeps
 *   its recorded name and its backoff, so the next failure doubles - as kubelet's Run does.
 *
 * Time comes only from the {@link Clock} port; nothing here sleeps or sets timers.
 */
import type { Clock } from '../ports/clock.js';
import { discardLogger, type Logger } from '../ports/logger.js';
import { grpcCodeOf, noRetriesPermittedMsg, operationErrorText } from './operationLog.js';

/** Backoff after the first failure of a key. */
export const BACKOFF_INITIAL_MS = 500;
/** Backoff ceiling: 2 m 2 s, as in kubelet. Each further failure doubles the backoff up to this. */
export const BACKOFF_MAX_MS = 122_000;

/** kubelet's EmptyUniquePodName: the wildcard pod name. */
export const EMPTY_POD_NAME = '';

export interface OperationKey {
  readonly volumeName: string;
  /** `''` (EMPTY_POD_NAME) is the wildcard: it conflicts with every pod on the same volume. */
  readonly podName: string;
}

/** What an operation generator hands to the executor: a name (for logs/metrics) and the work. */
export interface GeneratedOperation {
  readonly operationName: string;
  /** Does the work. Rejects (or throws) on failure. */
  run(): Promise<void>;
  /**
   * What failed for which volume and pod, put before the error in the failure's log line
   * (kubelet's GenerateErrorDetailed prefix, e.g. `MountVolume failed for volume "pvc-1" …`).
   */
  readonly failurePrefix?: string;
}

export interface OperationCompleteEvent {
  readonly key: OperationKey;
  readonly operationName: string;
  /** `undefined` iff the operation succeeded; else its rejection value (an Error if it rejected with `undefined`). */
  readonly error: unknown;
  /** Clock time between the start and the settling of the operation. */
  readonly durationMs: number;
}

/**
 * An expected refusal. The reconciler meets one on every pass for every volume that is busy or
 * backing off (kubelet does too: its Run returns an error each time), and does not log it; at a
 * thousand volumes, capturing a stack trace for each was the agent's largest cost (~10x the rest
 * of building the error). So none is captured: `stack` is only "<name>: <message>".
 */
abstract class ExpectedRefusal extends Error {
  constructor(message: string) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(message);
    } finally {
      Error.stackTraceLimit = limit;
    }
  }
}

/**
 * Thrown by {@link NestedPendingOperations.run} when an operation conflicting with the key is still
 * running. Expected: the reconciler retries on its next pass and does not log it.
 */
export class AlreadyExistsError extends ExpectedRefusal {
  override readonly name = 'AlreadyExistsError';
  constructor(
    /** The key of the refused operation. */
    readonly operationKey: OperationKey,
    /** The name of the refused operation. */
    readonly operationName: string,
    /** The key of the pending operation that blocks it. */
    readonly pendingKey: OperationKey,
  ) {
    super(
      `failed to create operation ${JSON.stringify(operationName)} for ${describeKey(operationKey)}: ` +
        `an operation for ${describeKey(pendingKey)} is already executing`,
    );
  }
}

/**
 * Thrown by {@link NestedPendingOperations.run} while the backoff of a failed operation matching the
 * key has not expired. Expected: the reconciler retries later and does not log it.
 */
export class BackoffError extends ExpectedRefusal {
  override readonly name = 'BackoffError';
  constructor(
    readonly operationKey: OperationKey,
    /**
     * Clock milliseconds until the backoff expires (>= 0). At 0 the retry is still refused:
     * kubelet permits it only once strictly more than durationBeforeRetry has passed.
     */
    readonly retryAfterMs: number,
    /** The backoff duration armed by the last failure. */
    readonly durationBeforeRetryMs: number,
    /** What the last failed operation rejected with. */
    readonly lastError: unknown,
  ) {
    super(
      `operation for ${describeKey(operationKey)} failed; no retries permitted for another ${retryAfterMs} ms ` +
        `(durationBeforeRetry ${durationBeforeRetryMs} ms); last error: ${errorText(lastError)}`,
    );
  }
}

export function isAlreadyExists(err: unknown): err is AlreadyExistsError {
  return err instanceof AlreadyExistsError;
}

export function isBackoff(err: unknown): err is BackoffError {
  return err instanceof BackoffError;
}

/** Already-exists and backoff refusals are part of normal operation: the reconciler does not log them. */
export function isExpectedError(err: unknown): boolean {
  return isAlreadyExists(err) || isBackoff(err);
}

export interface NestedPendingOperations {
  /**
   * Starts `op` under `key`, unless an operation is pending for the same volume with the same pod
   * or with `''` on either side (wildcard), or the key is in backoff for an operation of the same
   * name (while the backoff is active, a different operation name resets it, as kubelet does). Throws
   * {@link AlreadyExistsError} / {@link BackoffError} synchronously and then does not call `op`.
   * Otherwise `op.run()` is called asynchronously (never inside this call). On success the entry
   * is deleted (backoff reset); on failure the entry stays, not pending, with exponential backoff
   * (500 ms, doubling, capped at 122 s) counted from `clock.nowMs()` at the failure.
   */
  run(key: OperationKey, op: GeneratedOperation): void;
  /**
   * Throws exactly what {@link run} would throw for this key right now (AlreadyExistsError or
   * BackoffError) without starting anything, so that a caller can refuse before it does the
   * work of generating the operation.
   */
  checkRunnable(key: OperationKey, operationName: string): void;
  /**
   * True iff {@link checkRunnable} would not throw for this key and operation name right now. It
   * builds no error: the reconciler asks it for every volume on every pass, and at a thousand busy
   * volumes the refusals it would otherwise build and catch were most of a pass.
   */
  isRunnable(key: OperationKey, operationName: string): boolean;
  /** Whether an operation matching (volumeName, podName), wildcards included, is running. */
  isOperationPending(volumeName: string, podName: string): boolean;
  /** True iff `run()` with this key would start now: nothing matching is pending and no backoff blocks it. */
  isOperationSafeToRetry(volumeName: string, podName: string): boolean;
  /** Resolves when no operation is running (tests). Resolves at once when none is. */
  wait(): Promise<void>;
  /**
   * Adds a listener called once per settled operation, after its entry has been deleted or put in
   * backoff (tests and metrics). Listeners must not throw.
   */
  onComplete(listener: (e: OperationCompleteEvent) => void): void;
}

/**
 * `logger` receives kubelet's error line for every failed operation ("Operation for … failed. No
 * retries permitted until … (durationBeforeRetry …). Error: …"), at error severity.
 */
export function createNestedPendingOperations(clock: Clock, logger: Logger = discardLogger): NestedPendingOperations {
  return new NestedPendingOperationsImpl(clock, logger);
}

/** kubelet's exponentialbackoff: the backoff state of one key. */
interface Backoff {
  /** 0 iff the entry has never failed; else the wait armed by the last failure. */
  durationBeforeRetryMs: number;
  /** Clock time of the last failure; meaningful iff durationBeforeRetryMs > 0. */
  lastErrorTimeMs: number;
  /** What the last failure rejected with; meaningful iff durationBeforeRetryMs > 0. */
  lastError: unknown;
}

interface Entry {
  key: OperationKey;
  /**
   * The name the backoff belongs to (kubelet's operation.operationName): set when the entry is
   * created or reset, and left alone when an expired entry is reused by another operation.
   */
  operationName: string;
  /** The name of the operation that last ran under this entry (reported on completion). */
  runningOperationName: string;
  /** True iff the entry's operation has started and not settled. */
  pending: boolean;
  readonly backoff: Backoff;
}

function podsMatch(existingPod: string, newPod: string): boolean {
  return existingPod === newPod || existingPod === EMPTY_POD_NAME || newPod === EMPTY_POD_NAME;
}

function resetBackoff(b: Backoff): void {
  b.durationBeforeRetryMs = 0;
  b.lastErrorTimeMs = 0;
  b.lastError = undefined;
}

function nextBackoffMs(currentMs: number): number {
  if (currentMs === 0) return BACKOFF_INITIAL_MS;
  return Math.min(currentMs * 2, BACKOFF_MAX_MS);
}

function describeKey(key: OperationKey): string {
  return key.podName === EMPTY_POD_NAME
    ? `volume ${JSON.stringify(key.volumeName)}`
    : `volume ${JSON.stringify(key.volumeName)} pod ${JSON.stringify(key.podName)}`;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

class NestedPendingOperationsImpl implements NestedPendingOperations {
  /**
   * Entries by volume name, each list in insertion order. An entry is present iff its operation is
   * running or its last run failed. No two entries share an exact key. No empty lists are kept.
   */
  private readonly entriesByVolume = new Map<string, Entry[]>();
  /** Number of operations started and not yet settled (= entries with pending true). */
  private running = 0;
  /** Callers of wait(); resolved and emptied each time `running` drops to 0. */
  private waiters: (() => void)[] = [];
  private readonly listeners: ((e: OperationCompleteEvent) => void)[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  run(key: OperationKey, op: GeneratedOperation): void {
    const opKey: OperationKey = { volumeName: key.volumeName, podName: key.podName };
    const found = this.find(opKey);
    let entry: Entry;
    if (found.kind === 'pending') {
      throw new AlreadyExistsError(opKey, op.operationName, { ...found.entry.key });
    } else if (found.kind === 'failed') {
      entry = found.entry;
      if (this.isBackingOff(entry.backoff)) {
        if (entry.operationName === op.operationName) this.throwIfBackingOff(opKey, entry.backoff);
        // A different operation while the backoff is active: kubelet resets the backoff and
        // renames the entry rather than letting a failing mount hold back an unmount.
        resetBackoff(entry.backoff);
        entry.operationName = op.operationName;
      }
      // An expired backoff is kept, and so is the name it belongs to (kubelet's Run).
      entry.key = opKey;
      entry.runningOperationName = op.operationName;
      entry.pending = true;
    } else {
      entry = {
        key: opKey,
        operationName: op.operationName,
        runningOperationName: op.operationName,
        pending: true,
        backoff: { durationBeforeRetryMs: 0, lastErrorTimeMs: 0, lastError: undefined },
      };
      const list = this.entriesByVolume.get(opKey.volumeName);
      if (list === undefined) this.entriesByVolume.set(opKey.volumeName, [entry]);
      else list.push(entry);
    }
    this.running++;
    const startMs = this.clock.nowMs();
    // Start on a later microtask so that op.run() never runs inside run(), like kubelet's goroutine.
    void Promise.resolve()
      .then(() => op.run())
      .then(
        () => this.complete(entry, startMs, undefined, false),
        (err: unknown) => this.complete(entry, startMs, err, true, op.failurePrefix),
      );
  }

  checkRunnable(key: OperationKey, operationName: string): void {
    const opKey: OperationKey = { volumeName: key.volumeName, podName: key.podName };
    const found = this.find(opKey);
    if (found.kind === 'pending') throw new AlreadyExistsError(opKey, operationName, { ...found.entry.key });
    if (found.kind === 'failed' && found.entry.operationName === operationName) this.throwIfBackingOff(opKey, found.entry.backoff);
  }

  isRunnable(key: OperationKey, operationName: string): boolean {
    const found = this.find(key);
    if (found.kind === 'none') return true;
    if (found.kind === 'pending') return false;
    return found.entry.operationName !== operationName || !this.isBackingOff(found.entry.backoff);
  }

  /** kubelet's SafeToRetry, negated: refused while `now - lastErrorTime <= durationBeforeRetry`. */
  private isBackingOff(backoff: Backoff): boolean {
    return backoff.durationBeforeRetryMs > 0 && this.clock.nowMs() - backoff.lastErrorTimeMs <= backoff.durationBeforeRetryMs;
  }

  isOperationPending(volumeName: string, podName: string): boolean {
    return this.find({ volumeName, podName }).kind === 'pending';
  }

  isOperationSafeToRetry(volumeName: string, podName: string): boolean {
    const found = this.find({ volumeName, podName });
    switch (found.kind) {
      case 'none':
        return true;
      case 'pending':
        return false;
      case 'failed':
        return !this.isBackingOff(found.entry.backoff);
      default: {
        const unreachable: never = found;
        return unreachable;
      }
    }
  }

  wait(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  onComplete(listener: (e: OperationCompleteEvent) => void): void {
    this.listeners.push(listener);
  }

  /**
   * The entry a new operation with `key` would contend with. Any matching pending entry wins
   * (the operation is refused). Otherwise a failed entry with exactly this key is preferred over one
   * matched only through the wildcard; among wildcard matches the oldest is taken.
   */
  private find(key: OperationKey): { kind: 'none' } | { kind: 'pending' | 'failed'; entry: Entry } {
    const list = this.entriesByVolume.get(key.volumeName);
    if (list === undefined) return { kind: 'none' };
    let candidate: Entry | undefined;
    for (const entry of list) {
      if (!podsMatch(entry.key.podName, key.podName)) continue;
      if (entry.pending) return { kind: 'pending', entry };
      if (candidate === undefined || (entry.key.podName === key.podName && candidate.key.podName !== key.podName)) {
        candidate = entry;
      }
    }
    return candidate === undefined ? { kind: 'none' } : { kind: 'failed', entry: candidate };
  }

  private throwIfBackingOff(key: OperationKey, backoff: Backoff): void {
    if (!this.isBackingOff(backoff)) return;
    const remainingMs = backoff.lastErrorTimeMs + backoff.durationBeforeRetryMs - this.clock.nowMs();
    throw new BackoffError(key, remainingMs, backoff.durationBeforeRetryMs, backoff.lastError);
  }

  private complete(entry: Entry, startMs: number, rejection: unknown, failed: boolean, failurePrefix?: string): void {
    const nowMs = this.clock.nowMs();
    // A rejection with no value must still read as a failure to listeners and in BackoffError.
    const error = failed && rejection === undefined ? new Error(`operation ${JSON.stringify(entry.operationName)} failed without a reason`) : rejection;
    entry.pending = false;
    if (failed) {
      entry.backoff.durationBeforeRetryMs = nextBackoffMs(entry.backoff.durationBeforeRetryMs);
      entry.backoff.lastErrorTimeMs = nowMs;
      entry.backoff.lastError = error;
      this.logFailure(entry, error, failurePrefix);
    } else {
      this.remove(entry);
    }
    this.running--;
    const event: OperationCompleteEvent = {
      key: { ...entry.key },
      operationName: entry.runningOperationName,
      error: failed ? error : undefined,
      durationMs: nowMs - startMs,
    };
    try {
      for (const listener of this.listeners) listener(event);
    } finally {
      if (this.running === 0) {
        const waiters = this.waiters;
        this.waiters = [];
        for (const resolve of waiters) resolve();
      }
    }
  }

  /** kubelet's operationComplete error line; a failing logger must not break the bookkeeping. */
  private logFailure(entry: Entry, error: unknown, failurePrefix: string | undefined): void {
    try {
      const text = operationErrorText(error);
      const grpcCode = grpcCodeOf(error);
      const msg = noRetriesPermittedMsg({
        key: entry.key,
        // Printed: the wall clock now (the failure is now); the backoff itself runs on nowMs().
        lastErrorTimeMs: this.clock.wallMs(),
        durationBeforeRetryMs: entry.backoff.durationBeforeRetryMs,
        errorText: failurePrefix === undefined ? text : `${failurePrefix} : ${text}`,
      });
      this.logger.error(undefined, msg, grpcCode === undefined ? { operation: entry.operationName } : { operation: entry.operationName, grpcCode });
    } catch {
      // Logging is best effort.
    }
  }

  private remove(entry: Entry): void {
    const list = this.entriesByVolume.get(entry.key.volumeName);
    if (list === undefined) return;
    const index = list.indexOf(entry);
    if (index >= 0) list.splice(index, 1);
    if (list.length === 0) this.entriesByVolume.delete(entry.key.volumeName);
  }
}
