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
    ['Gt: the label is not an integer', { key: 'tier', operator: 'Gt', values: ['1'] }, false],
    ['Lt: smaller', { key: 'gen', operator: 'Lt', values: ['6'] }, true],
    ['Lt: equal', { key: 'gen', operator: 'Lt', values: ['5'] }, false],
    ['Lt: greater', { key: 'gen', operator: 'Lt', values: ['4'] }, false],
    ['Lt: the label is absent', { key: 'rack', operator: 'Lt', values: ['9'] }, false],
    ['Gt: a value with a leading zero', { key: 'gen', operator: 'Gt', values: ['04'] }, true],
    ['Lt: a prefixed key', { key: 'example.com/gen', operator: 'Lt', values: ['6'] }, false],
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

// kubelet builds each term's label selector before matching (component-helpers
// scheduling/corev1/nodeaffinity nodeaffinity.go nodeSelectorRequirementsAsSelector, then
// apimachinery labels/selector.go NewRequirement). A requirement it refuses makes its term match
// no node; the refusals are reported only when no term matches (LazyErrorNodeSelector.Match,
// reached through corev1 helpers.go MatchNodeSelectorTerms and component-helpers storage/volume
// helpers.go CheckNodeAffinity), as one field error per line of kubelet's aggregate.
describe('checkNodeAffinity: requirements kubelet\'s label selector refuses', () => {
  const E0 = 'nodeSelectorTerms[0].matchExpressions[0]';
  const INT = "for 'Gt', 'Lt' operators, the value must be an integer";
  const ONE = "for 'Gt', 'Lt' operators, exactly one value is required";
  const NON_EMPTY = "for 'in', 'notin' operators, values set can't be empty";
  const EMPTY = 'values set must be empty for exists and does not exist';
  const LABEL_VALUE =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
  const NAME_PART =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

  // Each row: a requirement (alone in the only term) that the old code let match NODE or refused
  // as a plain non-match, and kubelet's error for it.
  const rows: readonly [string, NodeSelectorRequirement, string][] = [
    ['Lt: trailing characters after the integer', { key: 'gen', operator: 'Lt', values: ['6abc'] }, `${E0}.values[0]: Invalid value: "6abc": ${INT}`],
    ['Lt: a decimal', { key: 'gen', operator: 'Lt', values: ['6.5'] }, `${E0}.values[0]: Invalid value: "6.5": ${INT}`],
    ['Lt: one past the largest int64', { key: 'gen', operator: 'Lt', values: ['9223372036854775808'] }, `${E0}.values[0]: Invalid value: "9223372036854775808": ${INT}`],
    ['Gt: not an integer', { key: 'gen', operator: 'Gt', values: ['x'] }, `${E0}.values[0]: Invalid value: "x": ${INT}`],
    ['Gt: two values', { key: 'gen', operator: 'Gt', values: ['1', '9'] }, `${E0}.values: Invalid value: []string{"1", "9"}: ${ONE}`],
    ['Gt: no values field', { key: 'gen', operator: 'Gt' }, `${E0}.values: Invalid value: []string(nil): ${ONE}`],
    ['Lt: an empty values list', { key: 'gen', operator: 'Lt', values: [] }, `${E0}.values: Invalid value: []string{}: ${ONE}`],
    [
      'Gt: two values, neither an integer: every refusal, in order',
      { key: 'gen', operator: 'Gt', values: ['x', 'y'] },
      `[${E0}.values: Invalid value: []string{"x", "y"}: ${ONE}, ${E0}.values[0]: Invalid value: "x": ${INT}, ${E0}.values[1]: Invalid value: "y": ${INT}]`,
    ],
    ['Gt: a negative integer is no label value', { key: 'gen', operator: 'Gt', values: ['-1'] }, `${E0}.values[0][gen]: Invalid value: "-1": ${LABEL_VALUE}`],
    [
      'Lt: too long for a label value and for an int64',
      { key: 'gen', operator: 'Lt', values: [HUGE] },
      `[${E0}.values[0]: Invalid value: "${HUGE}": ${INT}, ${E0}.values[0][gen]: Invalid value: "${HUGE}": must be no more than 63 bytes]`,
    ],
    ['NotIn: an empty values list', { key: 'zone', operator: 'NotIn', values: [] }, `${E0}.values: Invalid value: []string{}: ${NON_EMPTY}`],
    ['NotIn: no values field', { key: 'rack', operator: 'NotIn' }, `${E0}.values: Invalid value: []string(nil): ${NON_EMPTY}`],
    ['In: an empty values list', { key: 'zone', operator: 'In', values: [] }, `${E0}.values: Invalid value: []string{}: ${NON_EMPTY}`],
    ['Exists with a value', { key: 'zone', operator: 'Exists', values: ['a'] }, `${E0}.values: Invalid value: []string{"a"}: ${EMPTY}`],
    ['DoesNotExist with a value', { key: 'rack', operator: 'DoesNotExist', values: ['x'] }, `${E0}.values: Invalid value: []string{"x"}: ${EMPTY}`],
    [
      'an unknown operator',
      { key: 'zone', operator: 'Equals' as unknown as NodeSelectorRequirement['operator'], values: ['a'] },
      `${E0}.operator: Unsupported value: "Equals": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"`,
    ],
    ['In: a value that is no label value', { key: 'zone', operator: 'In', values: ['a', 'b c'] }, `${E0}.values[1][zone]: Invalid value: "b c": ${LABEL_VALUE}`],
    ['Exists: a key that is no label key', { key: 'zone!', operator: 'Exists' }, `${E0}.key: Invalid value: "zone!": ${NAME_PART}`],
    // Quoted as Go's %q quotes them (strconv.Quote), not as JSON does: \x01 and \u00a0.
    ['Exists: a key with a control character', { key: 'zone\u0001', operator: 'Exists' }, `${E0}.key: Invalid value: "zone\\x01": ${NAME_PART}`],
    ['In: a value with a no-break space', { key: 'zone', operator: 'In', values: ['a\u00a0'] }, `${E0}.values[0][zone]: Invalid value: "a\\u00a0": ${LABEL_VALUE}`],
    ['Exists: an empty key (one field error, its two reasons joined)', { key: '', operator: 'Exists' }, `${E0}.key: Invalid value: "": name part must be non-empty; ${NAME_PART}`],
    [
      'Exists: a key with an empty prefix',
      { key: '/zone', operator: 'Exists' },
      `${E0}.key: Invalid value: "/zone": prefix part must be non-empty`,
    ],
    [
      'Exists: a key with an upper-case prefix',
      { key: 'Example.com/zone', operator: 'Exists' },
      `${E0}.key: Invalid value: "Example.com/zone": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
    ],
    [
      'Exists: a key with two slashes',
      { key: 'a/b/zone', operator: 'Exists' },
      `${E0}.key: Invalid value: "a/b/zone": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ],
  ];
  // Labels under which each old outcome would have been a match where one is possible.
  const LABELS: Readonly<Record<string, string>> = { ...NODE, 'zone!': 'a', '': 'a', '/zone': 'a', 'Example.com/zone': 'a', 'a/b/zone': 'a' };
  for (const [name, req, error] of rows) {
    it(`${name}: refused with kubelet's field error`, () => {
      assert.equal(outcome(one(req), LABELS), error);
    });
  }

  it('the label side of Gt/Lt is read as an int64 too: trailing characters, decimals and overflow match nothing', () => {
    const gt4 = one({ key: 'gen', operator: 'Gt', values: ['4'] });
    for (const gen of ['5abc', '5.5', '9223372036854775808', ' 5', '5_0', '']) {
      assert.equal(outcome(gt4, { gen }), NO_MATCH, gen);
    }
    assert.equal(outcome(gt4, { gen: '+5' }), 'match');
    assert.equal(outcome(one({ key: 'gen', operator: 'Lt', values: ['0'] }), { gen: '-9223372036854775808' }), 'match');
  });

  it('Gt/Lt compare int64 exactly, beyond a double\'s precision', () => {
    const big = one({ key: 'gen', operator: 'Gt', values: ['9007199254740992'] });
    assert.equal(outcome(big, { gen: '9007199254740993' }), 'match');
    assert.equal(outcome(one({ key: 'gen', operator: 'Lt', values: ['9223372036854775807'] }), { gen: '9223372036854775806' }), 'match');
  });

  it('a refused requirement fails its whole term, even when another expression of it does not match', () => {
    const err = checkNodeAffinity(
      pv([{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['b'] }, { key: 'gen', operator: 'Gt', values: ['5abc'] }] }]),
      NODE,
    );
    assert.equal(err?.message, 'nodeSelectorTerms[0].matchExpressions[1].values[0]: Invalid value: "5abc": ' + INT);
  });

  it('another term that matches still admits the node, and the refusal is not reported', () => {
    const bad = { matchExpressions: [{ key: 'zone', operator: 'NotIn', values: [] }] } as const;
    const hit = { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] } as const;
    assert.equal(outcome(pv([bad, hit])), 'match');
    assert.equal(outcome(pv([hit, bad])), 'match');
  });

  it('when no term matches, the refusals replace "no matching NodeSelectorTerms", each at its own term index', () => {
    const bad = { matchExpressions: [{ key: 'zone', operator: 'Exists', values: ['a'] }] } as const;
    const miss = { matchExpressions: [{ key: 'zone', operator: 'In', values: ['b'] }] } as const;
    // The empty term is skipped but keeps its index.
    assert.equal(outcome(pv([miss, {}, bad])), `nodeSelectorTerms[2].matchExpressions[0].values: Invalid value: []string{"a"}: ${EMPTY}`);
    assert.equal(
      outcome(pv([bad, miss, bad])),
      `[nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []string{"a"}: ${EMPTY}, nodeSelectorTerms[2].matchExpressions[0].values: Invalid value: []string{"a"}: ${EMPTY}]`,
    );
  });

  // Length bounds of a label key (apimachinery validation IsQualifiedName / IsDNS1123Subdomain,
  // through labels/selector.go NewRequirement): a 253-byte prefix and a 63-byte name pass, one byte
  // more is refused with the max-length text.
  it('a label key prefix of 253 bytes is accepted, 254 bytes is refused', () => {
    const ok = `${'a'.repeat(253)}/zone`;
    assert.equal(outcome(one({ key: ok, operator: 'Exists' }), { [ok]: 'a' }), 'match');
    const long = `${'a'.repeat(254)}/zone`;
    assert.equal(outcome(one({ key: long, operator: 'Exists' }), { [long]: 'a' }), `${E0}.key: Invalid value: "${long}": prefix part must be no more than 253 bytes`);
  });

  it('a label key name of 63 bytes is accepted, 64 bytes is refused', () => {
    const ok = 'n'.repeat(63);
    assert.equal(outcome(one({ key: ok, operator: 'Exists' }), { [ok]: 'a' }), 'match');
    assert.equal(outcome(one({ key: `example.com/${ok}`, operator: 'Exists' }), { [`example.com/${ok}`]: 'a' }), 'match');
    const long = 'n'.repeat(64);
    assert.equal(outcome(one({ key: long, operator: 'Exists' }), { [long]: 'a' }), `${E0}.key: Invalid value: "${long}": name part must be no more than 63 bytes`);
  });

  it('a label value with two faults gets one field error, its reasons joined by "; "', () => {
    const v = `-${'a'.repeat(63)}`;
    assert.equal(outcome(one({ key: 'zone', operator: 'In', values: [v] })), `${E0}.values[0][zone]: Invalid value: "${v}": must be no more than 63 bytes; ${LABEL_VALUE}`);
  });

  it('Gt/Lt: one below the smallest int64 is no integer, on the value side and on the label side', () => {
    const below = '-9223372036854775809';
    assert.equal(
      outcome(one({ key: 'gen', operator: 'Lt', values: [below] })),
      `[${E0}.values[0]: Invalid value: "${below}": ${INT}, ${E0}.values[0][gen]: Invalid value: "${below}": ${LABEL_VALUE}]`,
    );
    assert.equal(outcome(one({ key: 'gen', operator: 'Lt', values: ['0'] }), { gen: below }), NO_MATCH);
  });

  it('valid keys and values: prefixed keys, empty and 63-byte values are accepted', () => {
    const v63 = 'a'.repeat(63);
    const labels = { 'topology.kubernetes.io/zone': v63, empty: '' };
    assert.equal(outcome(pv([{ matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: [v63] }, { key: 'empty', operator: 'In', values: [''] }] }]), labels), 'match');
  });
});
