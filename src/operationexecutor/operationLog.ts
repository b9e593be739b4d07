/**
 * The error line kubelet writes when a volume operation fails (nestedpendingoperations
 * operationComplete + exponentialbackoff's "no retries permitted" message), so that an operator
 * who greps a kubelet log for
 *
 *   Operation for "{volumeName:… podName:… nodeName:}" failed. No retries permitted until
 *   2026-12-01 02:55:00.5 +0000 UTC (durationBeforeRetry 500ms). Error: "…"
 *
 * finds the same line in nodevol's. The times and durations are printed the way Go's
 * time.Time and time.Duration print themselves (the monotonic "m=+…" suffix is left out: it
 * means nothing outside the process).
 */
/** An operation's key (nestedPendingOperations' OperationKey, restated to keep the import graph acyclic). */
export interface LoggedOperationKey {
  readonly volumeName: string;
  readonly podName: string;
}

/** Go's time.Duration String() for a non-negative number of milliseconds: "500ms", "1s", "1m4s", "2m2s". */
export function goDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1) return `${trimZeros((ms * 1000).toFixed(3))}µs`;
  if (ms < 1000) return `${trimZeros(ms.toFixed(6))}ms`;
  const totalSeconds = ms / 1000;
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds - hours * 3600) / 60);
  const seconds = totalSeconds - hours * 3600 - minutes * 60;
  let out = '';
  if (hours > 0) out += `${hours}h`;
  if (hours > 0 || minutes > 0) out += `${minutes}m`;
  return `${out}${trimZeros(seconds.toFixed(9))}s`;
}

/** Go's time.Time String() in UTC, to the microsecond: "2026-12-01 02:55:00.123456 +0000 UTC". */
export function goTime(epochMs: number): string {
  const whole = Math.floor(epochMs);
  const d = new Date(whole);
  const p = (n: number, w = 2): string => String(n).padStart(w, '0');
  const micros = Math.min(999_999, Math.round((epochMs - Math.floor(epochMs / 1000) * 1000) * 1000));
  const frac = micros === 0 ? '' : `.${p(micros, 6)}`.replace(/0+$/, '');
  return (
    `${p(d.getUTCFullYear(), 4)}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())} ` +
    `${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}${frac} +0000 UTC`
  );
}

function trimZeros(fixed: string): string {
  return fixed.includes('.') ? fixed.replace(/0+$/, '').replace(/\.$/, '') : fixed;
}

/** The operation key as kubelet's `%+v` prints its operationKey struct (nodevol has no node name in it). */
export function formatOperationKey(key: LoggedOperationKey): string {
  return `{volumeName:${key.volumeName} podName:${key.podName} nodeName:}`;
}

/** The text of a rejection value. */
export function operationErrorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The gRPC status name in an operation error ("Internal", "DeadlineExceeded", …), when the error
 * came from a CSI call; undefined otherwise. Read from the text, because the volume plugin wraps
 * the CSI error in its own message ("rpc error: code = Aborted desc = …" stays in it).
 */
export function grpcCodeOf(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    const m = /rpc error: code = (\w+)/.exec(operationErrorText(e));
    if (m !== null) return m[1];
    e = e instanceof Error ? e.cause : undefined;
  }
  return undefined;
}

export interface NoRetriesPermitted {
  readonly key: LoggedOperationKey;
  /** Wall-clock time of the failure (Clock.wallMs): printed only. */
  readonly lastErrorTimeMs: number;
  readonly durationBeforeRetryMs: number;
  /** What the operation failed with, prefixed by what failed for which volume and pod when known. */
  readonly errorText: string;
}

/** kubelet's "Operation for … failed. No retries permitted until … (durationBeforeRetry …). Error: …" line. */
export function noRetriesPermittedMsg(m: NoRetriesPermitted): string {
  return (
    `Operation for ${JSON.stringify(formatOperationKey(m.key))} failed. ` +
    `No retries permitted until ${goTime(m.lastErrorTimeMs + m.durationBeforeRetryMs)} ` +
    `(durationBeforeRetry ${goDuration(m.durationBeforeRetryMs)}). Error: ${JSON.stringify(m.errorText)}`
  );
}

/**
 * kubelet's GenerateErrorDetailed prefix for an operation's error:
 * `MountVolume failed for volume "pvc-1" (UniqueName: "kubernetes.io/csi/d^h") pod "web-0" (UID: "u1")`.
 * Fields that are unknown (a spec-less unmount, a device operation with no pod) are left out.
 */
export function operationFailurePrefix(what: {
  readonly operation: string;
  readonly volumeSpecName?: string;
  readonly volumeName: string;
  readonly podName?: string;
  readonly podUID?: string;
}): string {
  let s = `${what.operation} failed for volume ${JSON.stringify(what.volumeSpecName ?? what.volumeName)} (UniqueName: ${JSON.stringify(what.volumeName)})`;
  if (what.podName !== undefined && what.podName !== '') s += ` pod ${JSON.stringify(what.podName)}`;
  if (what.podUID !== undefined && what.podUID !== '') s += ` (UID: ${JSON.stringify(what.podUID)})`;
  return s;
}
