// CheckNodeAffinity (kubelet pkg/volume/util/util.go CheckNodeAffinity, which matches through
// component-helpers/scheduling/corev1/nodeaffinity): a PV's required node affinity against the
// node's labels. Kubernetes node-selector semantics: the terms are ORed, the match expressions of
// one term are ANDed, and a term without expressions matches no node.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { NodeSelectorRequirement, PersistentVolume } from '../../../../src/api/core.js';
import { checkNodeAffinity } from '../../../../src/volume/util/nodeAffinity.js';

const NODE: Readonly<Record<string, string>> = { zone: 'a', gen: '5', tier: 'gold' };
const NO_MATCH = 'no matching NodeSelectorTerms';
/** An integer too big for int64 (kubelet's parse fails on it). */
const HUGE = '9'.repeat(400);

function pv(terms: readonly { readonly matchExpressions?: readonly NodeSelectorRequirement[] }[]): PersistentVolume {
  return { name: 'pv', nodeAffinity: { required: { nodeSelectorTerms: terms } } };
}

/** The outcome for a PV with one term holding one requirement: 'match' or the error text. */
function outcome(p: PersistentVolume, labels: Readonly<Record<string, string>> = NODE): string {
  return checkNodeAffinity(p, labels)?.message ?? 'match';
}

function one(req: NodeSelectorRequirement): PersistentVolume {
  return pv([{ matchExpressions: [req] }]);
}

describe('checkNodeAffinity', () => {
  it('a PV without required node affinity fits every node', () => {
    assert.equal(checkNodeAffinity({ name: 'pv' }, NODE), undefined);
    assert.equal(checkNodeAffinity({ name: 'pv', nodeAffinity: {} }, {}), undefined);
  });

  // Each row: a requirement against NODE and whether the node matches.
  const rows: readonly [string, NodeSelectorRequirement, boolean][] = [
    ['In: the value is listed', { key: 'zone', operator: 'In', values: ['b', 'a'] }, true],
    ['In: the value is not listed', { key: 'zone', operator: 'In', values: ['b'] }, false],
    ['In: the label is absent', { key: 'rack', operator: 'In', values: ['a'] }, false],
    ['NotIn: the value is not listed', { key: 'zone', operator: 'NotIn', values: ['b'] }, true],
    ['NotIn: the value is listed', { key: 'zone', operator: 'NotIn', values: ['b', 'a'] }, false],
    ['NotIn: the label is absent', { key: 'rack', operator: 'NotIn', values: ['a'] }, true],
    ['Exists: the label is present', { key: 'zone', operator: 'Exists' }, true],
    ['Exists: the label is absent', { key: 'rack', operator: 'Exists' }, false],
    ['DoesNotExist: the label is absent', { key: 'rack', operator: 'DoesNotExist' }, true],
    ['DoesNotExist: the label is present', { key: 'zone', operator: 'DoesNotExist' }, false],
    ['Gt: greater', { key: 'gen', operator: 'Gt', values: ['4'] }, true],
    ['Gt: equal', { key: 'gen', operator: 'Gt', values: ['5'] }, false],
    ['Gt: smaller', { key: 'gen', operator: 'Gt', values: ['6'] }, false],
    ['Gt: the label is absent', { key: 'rack', operator: 'Gt', values: ['1'] }, false],
    ['Gt: more than one value', { key: 'gen', operator: 'Gt', values: ['1', '9'] }, false],
    ['Gt: no value', { key: 'gen', operator: 'Gt' }, false],
    ['Gt: the label is not an integer', { key: 'tier', operator: 'Gt', values: ['1'] }, false],
    ['Gt: the value is not an integer', { key: 'gen', operator: 'Gt', values: ['x'] }, false],
    ['Lt: smaller', { key: 'gen', operator: 'Lt', values: ['6'] }, true],
    ['Lt: equal', { key: 'gen', operator: 'Lt', values: ['5'] }, false],
    ['Lt: greater', { key: 'gen', operator: 'Lt', values: ['4'] }, false],
    ['Lt: the label is absent', { key: 'rack', operator: 'Lt', values: ['9'] }, false],
    ['Lt: the value is too big for an integer', { key: 'gen', operator: 'Lt', values: [HUGE] }, false],
  ];
  for (const [name, req, matches] of rows) {
    it(`${name} → ${matches ? 'match' : 'no match'}`, () => {
      assert.equal(outcome(one(req)), matches ? 'match' : NO_MATCH);
    });
  }

  it('Gt: a label too big for an integer matches nothing', () => {
    assert.equal(outcome(one({ key: 'gen', operator: 'Gt', values: ['5'] }), { gen: HUGE }), NO_MATCH);
  });

  it('the expressions of a term are ANDed', () => {
    const zoneA = { key: 'zone', operator: 'In', values: ['a'] } as const;
    assert.equal(outcome(pv([{ matchExpressions: [zoneA, { key: 'tier', operator: 'In', values: ['gold'] }] }])), 'match');
    assert.equal(outcome(pv([{ matchExpressions: [zoneA, { key: 'tier', operator: 'In', values: ['silver'] }] }])), NO_MATCH);
    assert.equal(outcome(pv([{ matchExpressions: [{ key: 'tier', operator: 'In', values: ['silver'] }, zoneA] }])), NO_MATCH);
  });

  it('the terms are ORed: one matching term is enough', () => {
    const miss = { matchExpressions: [{ key: 'zone', operator: 'In', values: ['b'] }] } as const;
    const hit = { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] } as const;
    assert.equal(outcome(pv([miss, hit])), 'match');
    assert.equal(outcome(pv([hit, miss])), 'match');
    assert.equal(outcome(pv([miss, miss])), NO_MATCH);
  });

  it('a term without expressions matches no node, and neither do no terms', () => {
    assert.equal(outcome(pv([{ matchExpressions: [] }])), NO_MATCH);
    assert.equal(outcome(pv([{}])), NO_MATCH);
    assert.equal(outcome(pv([])), NO_MATCH);
    assert.equal(outcome(pv([{}, { matchExpressions: [{ key: 'zone', operator: 'Exists' }] }])), 'match');
  });

  it('an unmatched PV is refused with kubelet\'s error text', () => {
    const err = checkNodeAffinity(one({ key: 'zone', operator: 'In', values: ['b'] }), NODE);
    assert.ok(err instanceof Error);
    assert.equal(err.message, NO_MATCH);
  });
});
