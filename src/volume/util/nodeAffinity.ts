/**
 * CheckNodeAffinity (component-helpers storage/volume helpers.go CheckNodeAffinity, through
 * scheduling/corev1 helpers.go MatchNodeSelectorTerms and nodeaffinity.go
 * LazyErrorNodeSelector): a PV with required node affinity may be used only on a node whose labels
 * match at least one of its terms; every requirement of a term must hold. A PV without node
 * affinity fits every node.
 *
 * Each non-empty term is first turned into a label selector (nodeaffinity.go
 * nodeSelectorRequirementsAsSelector, apimachinery labels/selector.go NewRequirement). A term with
 * a requirement kubelet refuses there - an unknown operator, a key or value that is no label key or
 * value, a values list of the wrong size for its operator, a Gt/Lt value that is no int64 - matches
 * no node. Those refusals are reported only when no term matches: they then replace "no matching
 * NodeSelectorTerms", in kubelet's field-error text (apimachinery util/validation/field errors.go
 * Error.Error) joined as its aggregate is (util/errors errors.go aggregate.Error).
 */
import type { NodeSelectorRequirement, PersistentVolume } from '../../api/core.js';
import { goQuote } from './goText.js';

type Labels = Readonly<Record<string, string>>;

/** A requirement that passed NewRequirement's checks. */
interface Requirement {
  readonly key: string;
  readonly operator: NodeSelectorRequirement['operator'];
  readonly values: readonly string[];
}

export function checkNodeAffinity(pv: PersistentVolume, nodeLabels: Labels): Error | undefined {
  const terms = pv.nodeAffinity?.required?.nodeSelectorTerms;
  if (terms === undefined) return undefined;
  const refusals: string[] = [];
  for (const [i, term] of terms.entries()) {
    const exprs = term.matchExpressions ?? [];
    // An empty term matches no node (NodeSelectorTerm semantics) and is not parsed.
    if (exprs.length === 0) continue;
    const parsed = parseTerm(exprs, `nodeSelectorTerms[${i}].matchExpressions`);
    if (parsed.refusals.length > 0) {
      refusals.push(...parsed.refusals);
      continue;
    }
    if (parsed.requirements.every((r) => requirementHolds(r, nodeLabels))) return undefined;
  }
  return new Error(refusals.length > 0 ? aggregate(refusals) : 'no matching NodeSelectorTerms');
}

const OPERATORS: readonly string[] = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt'];

/** One term's requirements, or the field errors of those kubelet refuses (nodeSelectorRequirementsAsSelector). */
function parseTerm(exprs: readonly NodeSelectorRequirement[], path: string): { requirements: Requirement[]; refusals: string[] } {
  const requirements: Requirement[] = [];
  const refusals: string[] = [];
  for (const [j, expr] of exprs.entries()) {
    const p = `${path}[${j}]`;
    // The operator is checked before anything else; an unknown one skips the other checks.
    const op: string = expr.operator;
    if (!OPERATORS.includes(op)) {
      refusals.push(`${p}.operator: Unsupported value: ${goQuote(op)}: supported values: ${OPERATORS.map(goQuote).join(', ')}`);
      continue;
    }
    const errs = requirementRefusals(expr, p);
    if (errs.length > 0) refusals.push(...errs);
    else requirements.push({ key: expr.key, operator: expr.operator, values: expr.values ?? [] });
  }
  return { requirements, refusals };
}

/** NewRequirement's checks, in its order: the key, the values for the operator, each value. Repeated texts once. */
function requirementRefusals(expr: NodeSelectorRequirement, p: string): string[] {
  const errs: string[] = [];
  const vals = expr.values;
  const n = vals?.length ?? 0;
  const keyErrs = labelKeyErrors(expr.key);
  if (keyErrs.length > 0) errs.push(invalid(`${p}.key`, goQuote(expr.key), keyErrs.join('; ')));
  switch (expr.operator) {
    case 'In':
    case 'NotIn':
      if (n === 0) errs.push(invalid(`${p}.values`, goStrings(vals), "for 'in', 'notin' operators, values set can't be empty"));
      break;
    case 'Exists':
    case 'DoesNotExist':
      if (n !== 0) errs.push(invalid(`${p}.values`, goStrings(vals), 'values set must be empty for exists and does not exist'));
      break;
    case 'Gt':
    case 'Lt':
      if (n !== 1) errs.push(invalid(`${p}.values`, goStrings(vals), "for 'Gt', 'Lt' operators, exactly one value is required"));
      for (const [i, v] of (vals ?? []).entries()) {
        if (parseInt64(v) === undefined) errs.push(invalid(`${p}.values[${i}]`, goQuote(v), "for 'Gt', 'Lt' operators, the value must be an integer"));
      }
      break;
    default: {
      const unreachable: never = expr.operator;
      return unreachable;
    }
  }
  for (const [i, v] of (vals ?? []).entries()) {
    const valueErrs = labelValueErrors(v);
    if (valueErrs.length > 0) errs.push(invalid(`${p}.values[${i}][${expr.key}]`, goQuote(v), valueErrs.join('; ')));
  }
  return [...new Set(errs)];
}

/** Requirement.Matches (labels/selector.go) for a requirement NewRequirement accepted. */
function requirementHolds(r: Requirement, labels: Labels): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = has ? labels[r.key] : undefined;
  switch (r.operator) {
    case 'In':
      return value !== undefined && r.values.includes(value);
    case 'NotIn':
      return value === undefined || !r.values.includes(value);
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
    case 'Gt':
    case 'Lt': {
      // The label is read as an int64 like the value; a label that is not one matches nothing.
      const have = value === undefined ? undefined : parseInt64(value);
      const want = parseInt64(r.values[0] ?? '');
      if (have === undefined || want === undefined) return false;
      return r.operator === 'Gt' ? have > want : have < want;
    }
    default: {
      const unreachable: never = r.operator;
      return unreachable;
    }
  }
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** strconv.ParseInt(s, 10, 64): an optional sign and decimal digits only, within int64; else undefined. */
function parseInt64(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = BigInt(s);
  return n < INT64_MIN || n > INT64_MAX ? undefined : n;
}

// Label key and value syntax (apimachinery api/validate/content kube.go IsLabelKey and
// IsLabelValue, dns.go IsDNS1123Subdomain; messages from errors.go RegexError, MaxLenError and
// EmptyError). Lengths are in bytes.
const LABEL_KEY_FMT = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const LABEL_KEY_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT = `(${LABEL_KEY_FMT})?`;
const LABEL_VALUE_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL_FMT}(\\.${DNS1123_LABEL_FMT})*`;
const DNS1123_SUBDOMAIN_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const whole = (fmt: string): RegExp => new RegExp(`^(?:${fmt})$`);
const LABEL_KEY_RE = whole(LABEL_KEY_FMT);
const LABEL_VALUE_RE = whole(LABEL_VALUE_FMT);
const DNS1123_SUBDOMAIN_RE = whole(DNS1123_SUBDOMAIN_FMT);
const EMPTY = 'must be non-empty';

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');
const maxLen = (n: number): string => `must be no more than ${n} bytes`;
function regexError(msg: string, fmt: string, ...examples: string[]): string {
  return `${msg} (e.g. ${examples.map((e) => `'${e}', `).join(' or ')}regex used for validation is '${fmt}')`;
}

function labelKeyErrors(key: string): string[] {
  const parts = key.split('/');
  const errs: string[] = [];
  if (parts.length > 2) {
    const rule = regexError(LABEL_KEY_MSG, LABEL_KEY_FMT, 'MyName', 'my.name', '123-abc');
    return [`a valid label key ${rule} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`];
  }
  const name = parts.length === 2 ? (parts[1] ?? '') : key;
  if (parts.length === 2) {
    const prefix = parts[0] ?? '';
    if (prefix.length === 0) errs.push(`prefix part ${EMPTY}`);
    else {
      if (bytes(prefix) > 253) errs.push(`prefix part ${maxLen(253)}`);
      if (!DNS1123_SUBDOMAIN_RE.test(prefix)) errs.push(`prefix part ${regexError(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, 'example.com')}`);
    }
  }
  if (name.length === 0) errs.push(`name part ${EMPTY}`);
  else if (bytes(name) > 63) errs.push(`name part ${maxLen(63)}`);
  if (!LABEL_KEY_RE.test(name)) errs.push(`name part ${regexError(LABEL_KEY_MSG, LABEL_KEY_FMT, 'MyName', 'my.name', '123-abc')}`);
  return errs;
}

function labelValueErrors(value: string): string[] {
  const errs: string[] = [];
  if (bytes(value) > 63) errs.push(maxLen(63));
  if (!LABEL_VALUE_RE.test(value)) errs.push(regexError(LABEL_VALUE_MSG, LABEL_VALUE_FMT, 'MyValue', 'my_value', '12345'));
  return errs;
}

/** field.Invalid's text: "<path>: Invalid value: <value>: <detail>". */
const invalid = (path: string, value: string, detail: string): string => `${path}: Invalid value: ${value}: ${detail}`;

/** Go's %#v for a []string: `[]string(nil)` for an absent list. */
const goStrings = (vals: readonly string[] | undefined): string => (vals === undefined ? '[]string(nil)' : `[]string{${vals.map(goQuote).join(', ')}}`);

/** The aggregate's text: one message alone, several (each once) as "[a, b]". */
function aggregate(msgs: readonly string[]): string {
  const distinct = [...new Set(msgs)];
  return distinct.length === 1 ? (distinct[0] ?? '') : `[${distinct.join(', ')}]`;
}
