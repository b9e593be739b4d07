/**
 * CsiDriverRegistry decorators that see every CSI call the engine makes, whatever the transport
 * underneath (gRPC or in-process): {@link observedRegistry} hands each finished call to an
 * observer; {@link instrumentedRegistry} uses it to record csi_operations_seconds the way
 * kubelet's csi client does; the agent's trace uses it to record the calls it draws.
 */
import type { Clock } from '../ports/clock.js';
import type { VolumeManagerMetrics } from '../ports/metrics.js';
import { CsiCallError, grpcStatusName, type CsiDriverRegistry, type CsiMethod, type CsiNodeClient } from '../ports/csi.js';

/** One finished CSI call, as the caller saw it. */
export interface ObservedCsiCall {
  readonly driverName: string;
  readonly method: CsiMethod;
  /** '' for calls about no volume (NodeGetCapabilities). */
  readonly volumeId: string;
  readonly request: unknown;
  /** The registry's Clock.nowMs (monotonic) when the call started and ended: only their difference means anything. */
  readonly startMs: number;
  readonly endMs: number;
  /** 'OK', the gRPC status name, or 'UNKNOWN' for an error that never reached the driver. */
  readonly code: string;
  /** The error's text; undefined on success. */
  readonly error: string | undefined;
}

export type CsiCallObserver = (call: ObservedCsiCall) => void;

/** What a redacted value reads (csi-lib-utils' protosanitizer writes the same). */
export const STRIPPED = '***stripped***';

/** The volume_context key kubelet puts service account tokens under (when not in the secrets). */
const TOKENS_KEY = 'csi.storage.k8s.io/serviceAccount.tokens';

/**
 * A copy of a request safe to record: every value of its `secrets` replaced (as protosanitizer's
 * StripSecrets does), and so is a service account token in its volume_context (a credential
 * kubelet puts there, which protosanitizer leaves: CVE-2023-2878). Keys stay, so a reader still
 * sees which secrets were sent.
 */
export function redactCsiRequest(request: unknown): unknown {
  if (typeof request !== 'object' || request === null) return request;
  const r = request as Readonly<Record<string, unknown>>;
  const out: Record<string, unknown> = { ...r };
  const secrets = r['secrets'];
  if (typeof secrets === 'object' && secrets !== null) out['secrets'] = Object.fromEntries(Object.keys(secrets).map((k) => [k, STRIPPED]));
  const ctx = r['volumeContext'];
  if (typeof ctx === 'object' && ctx !== null && Object.hasOwn(ctx, TOKENS_KEY)) out['volumeContext'] = { ...ctx, [TOKENS_KEY]: STRIPPED };
  return out;
}

/**
 * Hands every finished call to `observe` (which must not throw), then returns its outcome
 * unchanged. The observer sees the request redacted ({@link redactCsiRequest}): no secret reaches a
 * trace.
 */
export function observedRegistry(inner: CsiDriverRegistry, clock: Clock, observe: CsiCallObserver): CsiDriverRegistry {
  /** Per driver: the wrapped client and the client it wraps (rewrapped when that changes). */
  const cache = new Map<string, { inner: CsiNodeClient; wrapped: CsiNodeClient }>();
  return {
    client(driverName: string): CsiNodeClient | undefined {
      const c = inner.client(driverName);
      if (c === undefined) return undefined;
      const cached = cache.get(driverName);
      if (cached !== undefined && cached.inner === c) return cached.wrapped;
      const watched = <T>(method: CsiMethod, request: { readonly volumeId?: string } | undefined, call: () => Promise<T>): Promise<T> => {
        const startMs = clock.nowMs();
        const base = { driverName, method, volumeId: request?.volumeId ?? '', request: redactCsiRequest(request), startMs };
        return call().then(
          (v) => {
            observe({ ...base, endMs: clock.nowMs(), code: 'OK', error: undefined });
            return v;
          },
          (err: unknown) => {
            const code = err instanceof CsiCallError && err.code !== undefined ? grpcStatusName(err.code) : 'UNKNOWN';
            observe({ ...base, endMs: clock.nowMs(), code, error: err instanceof Error ? err.message : String(err) });
            throw err;
          },
        );
      };
      const wrapped: CsiNodeClient = {
        nodeGetCapabilities: () => watched('NodeGetCapabilities', undefined, () => c.nodeGetCapabilities()),
        nodeStageVolume: (req) => watched('NodeStageVolume', req, () => c.nodeStageVolume(req)),
        nodeUnstageVolume: (req) => watched('NodeUnstageVolume', req, () => c.nodeUnstageVolume(req)),
        nodePublishVolume: (req) => watched('NodePublishVolume', req, () => c.nodePublishVolume(req)),
        nodeUnpublishVolume: (req) => watched('NodeUnpublishVolume', req, () => c.nodeUnpublishVolume(req)),
      };
      cache.set(driverName, { inner: c, wrapped });
      return wrapped;
    },
  };
}

/** Records csi_operations_seconds for every call. */
export function instrumentedRegistry(inner: CsiDriverRegistry, metrics: VolumeManagerMetrics, clock: Clock): CsiDriverRegistry {
  return observedRegistry(inner, clock, (c) => metrics.csiOperation(c.driverName, `/csi.v1.Node/${c.method}`, c.code, c.endMs - c.startMs));
}
