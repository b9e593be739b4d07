/**
 * The cluster dir's manifests, one file at a time: {@link parseManifestFile} reads one file's
 * YAML documents, checks each object against its schema (clusterSchemas.ts; unknown kinds and
 * fields ignored) and turns the file into its objects and its problems, each problem naming the
 * file, document, line and field. Pure: no I/O, so a file is parsed once and its result cached
 * by the view (clusterDir.ts).
 *
 * Validation follows the API server's rules for the fields nodevol uses, including the name
 * formats (DNS-1123 labels/subdomains, CSI driver names) since names end up in paths under the
 * kubelet root dir. A null field is treated as absent, as Kubernetes' JSON decoding does. A Pod
 * without metadata.uid gets a stable one derived from its namespace and name (see
 * {@link derivedPodUID}); note that a pod deleted and re-created under the same name then keeps
 * its UID, unlike on a real cluster.
 */
import { LineCounter, parseAllDocuments, type Document } from 'yaml';

import type { CSIDriverInfo, PersistentVolumeClaim, Pod, SecretData, VolumeAttachmentInfo } from '../../api/core.js';
import { errorMessage } from '../../ports/fs.js';
import type { PersistentVolume } from '../../api/core.js';
import { isKnownKind, KIND_SCHEMAS, toCSIDriver, toPod, toPV, toPVC, toSecretData, toVolumeAttachment } from './clusterSchemas.js';

export { derivedPodUID, nodeStatusSchema } from './clusterSchemas.js';

/** One skipped file or object. */
export interface ManifestProblem {
  /** Absolute path of the file. */
  readonly file: string;
  /** 0-based index of the YAML document in the file, when the problem is one document's. */
  readonly document?: number;
  /** 1-based line of the document (or of the offending field) in the file, when known. */
  readonly line?: number;
  /** Path of the first offending field, e.g. `spec.volumes[0].name`. */
  readonly field?: string;
  /** Full text: file, document, object, field(s) and what is wrong. */
  readonly message: string;
}

/** A zod issue path as `spec.volumes[0].name` (odd keys quoted: `volumeAttributes["a.b/c"]`). */
export function formatFieldPath(path: readonly (string | number)[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (/^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(key)) out += out === '' ? key : `.${key}`;
    else out += `[${JSON.stringify(key)}]`;
  }
  return out === '' ? '(document)' : out;
}

/** Kubernetes' decoding treats a null field as absent: drop null-valued mapping keys, recursively. */
function dropNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(dropNulls);
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== null && v !== undefined) out[k] = dropNulls(v);
    return out;
  }
  return value;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The 1-based line of the YAML node at `path`, or of its nearest ancestor that exists. */
export function lineOf(doc: Document, lines: LineCounter, path: readonly (string | number)[]): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const node: unknown = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    if (isRecord(node) && Array.isArray(node.range) && typeof node.range[0] === 'number') return lines.linePos(node.range[0]).line;
  }
  return undefined;
}

const MAX_ISSUES_IN_MESSAGE = 5;

/** Where an object came from, for the problems a later merge may report about it. */
interface ObjectOrigin {
  readonly document: number;
  /** "Pod shop/web", "PersistentVolume pv-1", ... */
  readonly what: string;
  readonly nameLine?: number;
  readonly uidLine?: number;
}

/** One object of a file, converted to the ClusterView types. */
export type ManifestObject = ObjectOrigin &
  (
    | { readonly kind: 'Pod'; readonly pod: Pod }
    | { readonly kind: 'PersistentVolumeClaim'; readonly pvc: PersistentVolumeClaim }
    | { readonly kind: 'PersistentVolume'; readonly pv: PersistentVolume }
    | { readonly kind: 'CSIDriver'; readonly driver: CSIDriverInfo }
    | { readonly kind: 'Secret'; readonly namespace: string; readonly name: string; readonly data: SecretData }
    | { readonly kind: 'VolumeAttachment'; readonly attachment: VolumeAttachmentInfo }
  );

/** What one manifest file holds: its objects in document order, and what was wrong with it. */
export interface ParsedFile {
  readonly objects: readonly ManifestObject[];
  readonly problems: readonly ManifestProblem[];
  /** Non-empty YAML documents in the file. */
  readonly documents: number;
}

/**
 * Parses one manifest file. A file that is not UTF-8 or not YAML yields no object and one
 * problem; an object failing its schema is left out with a problem naming the file, document,
 * line and field, and the rest of the file is still read.
 */
export function parseManifestFile(file: string, bytes: Uint8Array, maxAliasCount: number): ParsedFile {
  const objects: ManifestObject[] = [];
  const problems: ManifestProblem[] = [];
  const fileProblem = (message: string, line?: number): ParsedFile => ({
    objects: [],
    problems: [{ file, ...(line !== undefined ? { line } : {}), message: `${file}${line !== undefined ? `:${line}` : ''}: ${message}; file skipped` }],
    documents: 0,
  });
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return fileProblem('not UTF-8 text');
  }
  const lines = new LineCounter();
  const docs: Document[] = [];
  try {
    for (const doc of parseAllDocuments(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: true, merge: true, logLevel: 'error' })) docs.push(doc);
  } catch (err) {
    return fileProblem(`YAML does not parse: ${errorMessage(err)}`);
  }
  for (const [i, doc] of docs.entries()) {
    const bad = doc.errors[0];
    if (bad !== undefined) return fileProblem(`YAML does not parse (document ${i}): ${bad.message.split('\n')[0] ?? ''}`, bad.linePos?.[0].line);
  }
  const values: unknown[] = [];
  try {
    for (const doc of docs) values.push(doc.toJS({ maxAliasCount }));
  } catch (err) {
    return fileProblem(`YAML cannot be loaded: ${errorMessage(err)}`);
  }
  let documents = 0;
  for (const [i, doc] of docs.entries()) {
    const value = values[i];
    if (value === null || value === undefined) continue; // an empty document ("---" at the end)
    documents++;
    const problem = (what: string, message: string, path?: readonly (string | number)[]): void => {
      problems.push(objectProblem(file, i, doc, lines, what, message, path));
    };
    const obj = toObject(dropNulls(value), i, doc, lines, problem);
    if (obj !== undefined) objects.push(obj);
  }
  return { objects, problems, documents };
}

/** A problem with one object, its message naming the file, line, document, object and field. */
export function objectProblem(file: string, index: number, doc: Document | undefined, lines: LineCounter | undefined, what: string, message: string, path?: readonly (string | number)[], knownLine?: number): ManifestProblem {
  const line = knownLine ?? (doc !== undefined && lines !== undefined ? lineOf(doc, lines, path ?? []) : undefined);
  const field = path !== undefined ? formatFieldPath(path) : undefined;
  return {
    file,
    document: index,
    ...(line !== undefined ? { line } : {}),
    ...(field !== undefined ? { field } : {}),
    message: `${file}${line !== undefined ? `:${line}` : ''}: document ${index}${what === '' ? '' : ` (${what})`}: ${message}; object skipped`,
  };
}

function toObject(
  value: unknown,
  index: number,
  doc: Document,
  lines: LineCounter,
  problem: (what: string, message: string, path?: readonly (string | number)[]) => void,
): ManifestObject | undefined {
  if (!isRecord(value)) {
    problem('', `not a Kubernetes object (a YAML mapping), found ${Array.isArray(value) ? 'a sequence' : typeof value}`);
    return undefined;
  }
  const kind = value.kind;
  if (typeof kind !== 'string' || kind === '') {
    problem('', 'field kind: a Kubernetes object needs a kind', ['kind']);
    return undefined;
  }
  if (!isKnownKind(kind)) return undefined; // not an object nodevol uses
  const meta = value.metadata;
  const rawName = isRecord(meta) && typeof meta.name === 'string' ? meta.name : undefined;
  const rawNs = isRecord(meta) && typeof meta.namespace === 'string' ? meta.namespace : undefined;
  const namespaced = kind === 'Pod' || kind === 'PersistentVolumeClaim' || kind === 'Secret';
  const what = `${kind}${rawName === undefined ? '' : ` ${namespaced ? `${rawNs ?? 'default'}/` : ''}${rawName}`}`;
  const result = KIND_SCHEMAS[kind].safeParse(value);
  if (!result.success) {
    const issues = result.error.issues;
    const first = issues[0];
    const text = issues
      .slice(0, MAX_ISSUES_IN_MESSAGE)
      .map((iss) => `field ${formatFieldPath(iss.path)}: ${iss.message}`)
      .join('; ');
    const more = issues.length > MAX_ISSUES_IN_MESSAGE ? `; and ${issues.length - MAX_ISSUES_IN_MESSAGE} more` : '';
    problem(what, `${text}${more}`, first?.path ?? []);
    return undefined;
  }
  const nameLine = lineOf(doc, lines, ['metadata', 'name']);
  const origin = { document: index, what, ...(nameLine !== undefined ? { nameLine } : {}) };
  const data = result.data;
  switch (data.kind) {
    case 'Pod': {
      const uidLine = lineOf(doc, lines, ['metadata', 'uid']);
      return { ...origin, ...(uidLine !== undefined ? { uidLine } : {}), kind: 'Pod', pod: toPod(data) };
    }
    case 'PersistentVolumeClaim':
      return { ...origin, kind: 'PersistentVolumeClaim', pvc: toPVC(data) };
    case 'PersistentVolume':
      return { ...origin, kind: 'PersistentVolume', pv: toPV(data) };
    case 'CSIDriver':
      return { ...origin, kind: 'CSIDriver', driver: toCSIDriver(data) };
    case 'Secret':
      return { ...origin, kind: 'Secret', namespace: data.metadata.namespace, name: data.metadata.name, data: toSecretData(data) };
    case 'VolumeAttachment':
      return { ...origin, kind: 'VolumeAttachment', attachment: toVolumeAttachment(data) };
  }
}
