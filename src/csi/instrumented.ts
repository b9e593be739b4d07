/**
 * A CsiDriverRegistry decorator that records csi_operations_seconds for every call, the way
 * kubelet's csi client does, whatever the transport underneath (gRPC or in-process).
 */
import type { Clock } from '../host/clock.js';
import type { VolumeManagerMetrics } from '../metrics/volumeManagerMetrics.js';
import { CsiCallError, grpcStatusName, type CsiDriverRegistry, type CsiMethod, type CsiNodeClient } from './types.js';

export function instrumentedRegistry(inner: CsiDriverRegistry, metrics: VolumeManagerMetrics, clock: Clock): CsiDriverRegistry {
  /** Per driver: the wrapped client and the client it wraps (rewrapped when that changes). */
  const cache = new Map<string, { inner: CsiNodeClient; wrapped: CsiNodeClient }>();
  return {
    client(driverName: string): CsiNodeClient | undefined {
      const c = inner.client(driverName);
      if (c === undefined) return undefined;
      const cached = cache.get(driverName);
      if (cached !== undefined && cached.inner === c) return cached.wrapped;
      const timed = <T>(method: CsiMethod, call: () => Promise<T>): Promise<T> => {
        const start = clock.nowMs();
        return call().then(
          (v) => {
            metrics.csiOperation(driverName, `/csi.v1.Node/${method}`, 'OK', clock.nowMs() - start);
            return v;
          },
          (err: unknown) => {
            const code = err instanceof CsiCallError && err.code !== undefined ? grpcStatusName(err.code) : 'UNKNOWN';
            metrics.csiOperation(driverName, `/csi.v1.Node/${method}`, code, clock.nowMs() - start);
            throw err;
          },
        );
      };
      const wrapped: CsiNodeClient = {
        nodeGetCapabilities: () => timed('NodeGetCapabilities', () => c.nodeGetCapabilities()),
        nodeStageVolume: (req) => timed('NodeStageVolume', () => c.nodeStageVolume(req)),
        nodeUnstageVolume: (req) => timed('NodeUnstageVolume', () => c.nodeUnstageVolume(req)),
        nodePublishVolume: (req) => timed('NodePublishVolume', () => c.nodePublishVolume(req)),
        nodeUnpublishVolume: (req) => timed('NodeUnpublishVolume', () => c.nodeUnpublishVolume(req)),
      };
      cache.set(driverName, { inner: c, wrapped });
      return wrapped;
    },
  };
}
