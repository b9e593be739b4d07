/**
 * composeNodevolPolicy: the hooks of every enabled nodevol gate over kubelet's defaults, built
 * once per life of a node (composeNode). Two gates setting one hook is an error: each hook point
 * belongs to one gate.
 */
import type { FeatureGate } from '../features/features.js';
import type { VolumeHost } from '../volume/volumeHost.js';
import { upstreamVolumeManagerHooks } from '../volumemanager/volumeManager.js';
import type { GatePolicy, NodevolGate, NodevolPolicy } from './nodevolGate.js';
import { NODEVOL_GATES } from './registry.js';

export function composeNodevolPolicy(features: FeatureGate, host: VolumeHost, gates: readonly NodevolGate[] = NODEVOL_GATES): NodevolPolicy {
  const policies: (readonly [string, GatePolicy])[] = gates.filter((g) => features.enabled(g.name)).map((g) => [g.name, g.create(host, features)] as const);
  const upstream = upstreamVolumeManagerHooks;
  const housekeeping = policies.flatMap(([, p]) => (p.housekeeping === undefined ? [] : [p.housekeeping]));
  return {
    hooks: {
      csi: over(upstream.csi, policies.map(([name, p]) => [name, p.csi] as const), 'csi'),
      operationGenerator: over(upstream.operationGenerator, policies.map(([name, p]) => [name, p.operationGenerator] as const), 'operationGenerator'),
      reconstruct: over(upstream.reconstruct, policies.map(([name, p]) => [name, p.reconstruct] as const), 'reconstruct'),
    },
    // One gate's work is that function itself: as many microtask turns as the call it replaces.
    housekeeping: housekeeping.length === 0 ? noHousekeeping : housekeeping.length === 1 ? (housekeeping[0] as () => Promise<void>) : async () => {
      for (const run of housekeeping) await run();
    },
  };
}

/** No periodic work: a settled promise (one turn, as the call of an async method that returns at once). */
function noHousekeeping(): Promise<void> {
  return Promise.resolve();
}

/** `base` with each gate's hooks set over it; a hook set by two gates throws. */
function over<T extends object>(base: T, parts: readonly (readonly [string, Partial<T> | undefined])[], what: string): T {
  const out: Partial<T> = { ...base };
  const setBy = new Map<keyof T, string>();
  for (const [gate, part] of parts) {
    if (part === undefined) continue;
    for (const key of Object.keys(part) as (keyof T)[]) {
      const other = setBy.get(key);
      if (other !== undefined) throw new Error(`feature gates ${other} and ${gate} both set the ${what} hook ${String(key)}`);
      setBy.set(key, gate);
      out[key] = part[key];
    }
  }
  return out as T;
}
