/**
 * CheckNodeAffinity (component-helpers storage/volume): a PV with required node affinity may be
 * used only on a node whose labels match at least one of its terms; every requirement of a term
 * must hold. A PV without node affinity fits every node.
 */
import type { NodeSelectorRequirement, PersistentVolume } from '../../api/core.js';

export function checkNodeAffinity(pv: PersistentVolume, nodeLabels: Readonly<Record<string, string>>): Error | undefined {
  const terms = pv.nodeAffinity?.required?.nodeSelectorTerms;
  if (terms === undefined) return undefined;
  const matches = terms.some((t) => {
    const reqs = t.matchExpressions ?? [];
    // An empty term matches no node (NodeSelectorTerm semantics).
    return reqs.length > 0 && reqs.every((r) => requirementHolds(r, nodeLabels));
  });
  return matches ? undefined : new Error('no matching NodeSelectorTerms');
}

function requirementHolds(r: NodeSelectorRequirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = has ? labels[r.key] : undefined;
  const values = r.values ?? [];
  switch (r.operator) {
    case 'In':
      return value !== undefined && values.includes(value);
    case 'NotIn':
      return value === undefined || !values.includes(value);
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
    case 'Gt':
    case 'Lt': {
      if (value === undefined || values.length !== 1) return false;
      const have = Number.parseInt(value, 10);
      const want = Number.parseInt(values[0] ?? '', 10);
      if (!Number.isInteger(have) || !Number.isInteger(want)) return false;
      return r.operator === 'Gt' ? have > want : have < want;
    }
    default: {
      const unreachable: never = r.operator;
      return unreachable;
    }
  }
}
