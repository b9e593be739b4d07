/**
 * The ClusterView port over a directory, for `nodevol agent --cluster-dir DIR --node-name NAME`:
 *
 *   DIR/manifests/*.yaml|*.yml   Pod, PersistentVolumeClaim, PersistentVolume and CSIDriver
 *                                objects in standard Kubernetes YAML, several per file ("---").
 *   DIR/node-status.json         {"volumesAttached": [{"name", "devicePath"}], "volumesInUse": [...]}
 *
 * Every call re-reads the manifests (the FileSystem port has no mtimes to cache by), so a pod
 * whose manifest was deleted is gone on the next call. Files are read in name order; when two
 * objects of one kind share a name (or two pods a UID) the first wins and the other is reported.
 *
 * Bad input never stops the node: a file that cannot be read or parsed, or an object that fails
 * its schema, is skipped and reported through {@link ClusterDirView.problems} (the problems of
 * the latest read) and, once per new problem, the Logger; the message names the file, the
 * 0-based index of the YAML document in it, its line and the field path (e.g.
 * `spec.volumes[0].name`). Reads are bounded (file size, file count, document count, YAML
 * aliases). The manifests directory itself being unreadable is NOT skipped: every call rejects,
 * as with an unreachable API server, rather than report a node without pods.
 *
 * Validation follows the API server's rules for the fields nodevol uses, including the name
 * formats (DNS-1123 labels/subdomains, CSI driver names) since names end up in paths under the
 * kubelet root dir. A null field is treated as absent, as Kubernetes' JSON decoding does. A Pod
 * without metadata.uid gets a stable one derived from its namespace and name (see
 * {@link derivedPodUID}); note that a pod deleted and re-created under the same name then keeps
 * its UID, unlike on a real cluster.
 *
 * node-status.json: a missing, unreadable or invalid file makes getNodeStatus and
 * setVolumesInUse reject (an unreachable API server). setVolumesInUse rewrites only
 * volumesInUse, keeping every other field (read-modify-write), atomically: temp file in the same
 * directory, fsync, rename, fsync of the directory. Writes from one ClusterDirView are
 * serialised; a concurrent writer in another process can still lose an update between our read
 * and our rename (there is no file lock).
 */
import { createHash, randomBytes } from 'node:crypto';
import * as posix from 'node:path/posix';
import { resolve as resolvePath } from 'node:path';

import { LineCounter, parseAllDocuments, type Document } from 'yaml';
import { z } from 'zod';

import type { AttachedVolume, ClusterView, CSIDriverInfo, NodeStatus, PersistentVolumeClaim, Pod, PodVolumeSource } from '../../host/cluster.js';
import { errorCode, errorMessage, type FileSystem } from '../../host/fs.js';
import { discardLogger, type Logger } from '../../host/logger.js';
import type { CSIPersistentVolumeSource, CSIVolumeSource, PersistentVolume } from '../../volume/spec.js';
import { NodeFileSystem } from './nodeFs.js';

export const MANIFESTS_DIR_NAME = 'manifests';
export const NODE_STATUS_FILE_NAME = 'node-status.json';

export interface ClusterDirLimits {
  /** Largest manifest (and node-status.json) read, in bytes; default 1 MiB. */
  readonly maxFileBytes?: number;
  /** Most manifest files read per pass, in name order; default 1000. */
  readonly maxFiles?: number;
  /** Most YAML documents read per pass over all files; default 10000. */
  readonly maxDocuments?: number;
  /** Most alias expansions per document (YAML "billion laughs" guard); default 100. */
  readonly maxAliasCount?: number;
}

export const DEFAULT_CLUSTER_DIR_LIMITS: Required<ClusterDirLimits> = {
  maxFileBytes: 1024 * 1024,
  maxFiles: 1000,
  maxDocuments: 10_000,
  maxAliasCount: 100,
};

export interface ClusterDirOptions {
  /** The cluster directory (made absolute against the working directory). */
  readonly dir: string;
  /** This node's name: pods with spec.nodeName equal to it are bound here. */
  readonly nodeName: string;
  /** Default NodeFileSystem. */
  readonly fs?: FileSystem;
  readonly logger?: Logger;
  readonly limits?: ClusterDirLimits;
}

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

// ------------------------------------------------------------------------------------------
// Schemas (the fields nodevol uses; unknown fields are stripped, unknown kinds ignored).

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Pod UIDs become directory names under <root>/pods: one safe path segment. */
const POD_UID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const dnsLabel = z
  .string()
  .max(63, 'must be at most 63 characters')
  .regex(DNS1123_LABEL, 'must be a DNS-1123 label (lowercase letters, digits and "-", starting and ending with a letter or digit)');
const dnsSubdomain = z
  .string()
  .max(253, 'must be at most 253 characters')
  .regex(DNS1123_SUBDOMAIN, 'must be a DNS-1123 subdomain (lowercase letters, digits, "-" and ".", starting and ending with a letter or digit)');
/** ValidateCSIDriverName: at most 63 characters, a DNS-1123 subdomain once lowercased. */
const csiDriverName = z
  .string()
  .min(1, 'must not be empty')
  .max(63, 'must be at most 63 characters')
  .refine((s) => DNS1123_SUBDOMAIN.test(s.toLowerCase()), 'must be a CSI driver name (letters, digits, "-" and ".", starting and ending with a letter or digit)');
const podUID = z.string().regex(POD_UID, 'must be letters, digits, ".", "_" and "-" (at most 128, starting with a letter or digit)');
const stringMap = z.record(z.string());
const volumeMode = z.enum(['Filesystem', 'Block']);
const secretRef = z.object({ name: z.string().min(1), namespace: z.string().min(1) });

const csiInline = z.object({
  driver: csiDriverName,
  readOnly: z.boolean().optional(),
  fsType: z.string().optional(),
  volumeAttributes: stringMap.optional(),
});

const podVolume = z
  .object({
    name: dnsLabel,
    persistentVolumeClaim: z.object({ claimName: z.string().min(1, 'must not be empty'), readOnly: z.boolean().optional() }).optional(),
    csi: csiInline.optional(),
  })
  .refine((v) => v.persistentVolumeClaim === undefined || v.csi === undefined, {
    message: 'may not specify both persistentVolumeClaim and csi',
    path: ['csi'],
  });

const container = z.object({ volumeDevices: z.array(z.object({ name: z.string().min(1, 'must not be empty') })).optional() });

const podSchema = z.object({
  apiVersion: z.literal('v1'),
  kind: z.literal('Pod'),
  metadata: z.object({ name: dnsSubdomain, namespace: dnsLabel.default('default'), uid: podUID.optional() }),
  spec: z
    .object({
      nodeName: z.string().default(''),
      volumes: z.array(podVolume).default([]),
      securityContext: z.object({ fsGroup: z.number().int().min(0).max(2147483647).optional() }).optional(),
      containers: z.array(container).default([]),
      initContainers: z.array(container).default([]),
      ephemeralContainers: z.array(container).default([]),
    })
    .superRefine((spec, ctx) => {
      const seen = new Set<string>();
      spec.volumes.forEach((v, i) => {
        if (seen.has(v.name)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `duplicate volume name ${JSON.stringify(v.name)}`, path: ['volumes', i, 'name'] });
        seen.add(v.name);
      });
    }),
});

const pvcSchema = z.object({
  apiVersion: z.literal('v1'),
  kind: z.literal('PersistentVolumeClaim'),
  metadata: z.object({ name: dnsSubdomain, namespace: dnsLabel.default('default') }),
  spec: z.object({ volumeName: z.string().default(''), volumeMode: volumeMode.optional() }).default({}),
});

const pvSchema = z.object({
  apiVersion: z.literal('v1'),
  kind: z.literal('PersistentVolume'),
  metadata: z.object({ name: dnsSubdomain }),
  spec: z
    .object({
      csi: z
        .object({
          driver: csiDriverName,
          volumeHandle: z.string().min(1, 'must not be empty'),
          readOnly: z.boolean().optional(),
          fsType: z.string().optional(),
          volumeAttributes: stringMap.optional(),
          nodeStageSecretRef: secretRef.optional(),
          nodePublishSecretRef: secretRef.optional(),
        })
        .optional(),
      volumeMode: volumeMode.optional(),
      accessModes: z.array(z.string()).optional(),
      mountOptions: z.array(z.string()).optional(),
    })
    .default({}),
});

const csiDriverSchema = z.object({
  apiVersion: z.enum(['storage.k8s.io/v1', 'storage.k8s.io/v1beta1']),
  kind: z.literal('CSIDriver'),
  metadata: z.object({ name: csiDriverName }),
  spec: z.object({ attachRequired: z.boolean().default(true), podInfoOnMount: z.boolean().default(false) }).default({}),
});

const KIND_SCHEMAS = {
  Pod: podSchema,
  PersistentVolumeClaim: pvcSchema,
  PersistentVolume: pvSchema,
  CSIDriver: csiDriverSchema,
} as const;
type KnownKind = keyof typeof KIND_SCHEMAS;

function isKnownKind(kind: string): kind is KnownKind {
  return Object.hasOwn(KIND_SCHEMAS, kind);
}

const nodeStatusSchema = z.object({
  volumesAttached: z.array(z.object({ name: z.string().min(1, 'must not be empty'), devicePath: z.string().default('') })).default([]),
  volumesInUse: z.array(z.string()).default([]),
});

// ------------------------------------------------------------------------------------------

/**
 * The UID given to a Pod manifest without metadata.uid: the first 32 hex digits of
 * sha256("<namespace>/<name>") in UUID form (8-4-4-4-12, 36 characters). Stable across reads
 * and restarts, distinct per namespace/name.
 */
export function derivedPodUID(namespace: string, name: string): string {
  const h = createHash('sha256').update(`${namespace}/${name}`, 'utf8').digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
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

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The 1-based line of the YAML node at `path`, or of its nearest ancestor that exists. */
function lineOf(doc: Document, lines: LineCounter, path: readonly (string | number)[]): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const node: unknown = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    if (isRecord(node) && Array.isArray(node.range) && typeof node.range[0] === 'number') return lines.linePos(node.range[0]).line;
  }
  return undefined;
}

interface Snapshot {
  readonly pods: readonly Pod[];
  readonly pvcs: ReadonlyMap<string, PersistentVolumeClaim>;
  readonly pvs: ReadonlyMap<string, PersistentVolume>;
  readonly drivers: ReadonlyMap<string, CSIDriverInfo>;
  readonly problems: readonly ManifestProblem[];
}

/** Collects the objects of one pass, first one of a name winning. */
class SnapshotBuilder {
  readonly pods: Pod[] = [];
  readonly podKeys = new Set<string>();
  readonly podUIDs = new Map<string, string>();
  readonly pvcs = new Map<string, PersistentVolumeClaim>();
  readonly pvs = new Map<string, PersistentVolume>();
  readonly drivers = new Map<string, CSIDriverInfo>();
  readonly problems: ManifestProblem[] = [];
  documents = 0;

  build(): Snapshot {
    return { pods: this.pods, pvcs: this.pvcs, pvs: this.pvs, drivers: this.drivers, problems: this.problems };
  }
}

function toPod(obj: z.infer<typeof podSchema>): Pod {
  const { metadata, spec } = obj;
  const volumes: PodVolumeSource[] = spec.volumes.map((v) => {
    const pvc = v.persistentVolumeClaim;
    return {
      name: v.name,
      ...(pvc !== undefined ? { persistentVolumeClaim: { claimName: pvc.claimName, ...(pvc.readOnly !== undefined ? { readOnly: pvc.readOnly } : {}) } } : {}),
      ...(v.csi !== undefined ? { csi: toCsiInline(v.csi) } : {}),
    };
  });
  const blockVolumeNames = [...new Set([...spec.containers, ...spec.initContainers, ...spec.ephemeralContainers].flatMap((c) => (c.volumeDevices ?? []).map((d) => d.name)))];
  const fsGroup = spec.securityContext?.fsGroup;
  return {
    uid: metadata.uid ?? derivedPodUID(metadata.namespace, metadata.name),
    namespace: metadata.namespace,
    name: metadata.name,
    nodeName: spec.nodeName,
    volumes,
    ...(blockVolumeNames.length > 0 ? { blockVolumeNames } : {}),
    ...(fsGroup !== undefined ? { fsGroup } : {}),
  };
}

function toCsiInline(c: z.infer<typeof csiInline>): CSIVolumeSource {
  return {
    driver: c.driver,
    ...(c.readOnly !== undefined ? { readOnly: c.readOnly } : {}),
    ...(c.fsType !== undefined ? { fsType: c.fsType } : {}),
    ...(c.volumeAttributes !== undefined ? { volumeAttributes: c.volumeAttributes } : {}),
  };
}

function toPV(obj: z.infer<typeof pvSchema>): PersistentVolume {
  const { csi, volumeMode: mode, accessModes, mountOptions } = obj.spec;
  let source: CSIPersistentVolumeSource | undefined;
  if (csi !== undefined) {
    source = {
      driver: csi.driver,
      volumeHandle: csi.volumeHandle,
      ...(csi.readOnly !== undefined ? { readOnly: csi.readOnly } : {}),
      ...(csi.fsType !== undefined ? { fsType: csi.fsType } : {}),
      ...(csi.volumeAttributes !== undefined ? { volumeAttributes: csi.volumeAttributes } : {}),
      ...(csi.nodeStageSecretRef !== undefined ? { nodeStageSecretRef: csi.nodeStageSecretRef } : {}),
      ...(csi.nodePublishSecretRef !== undefined ? { nodePublishSecretRef: csi.nodePublishSecretRef } : {}),
    };
  }
  return {
    name: obj.metadata.name,
    ...(source !== undefined ? { csi: source } : {}),
    ...(mode !== undefined ? { volumeMode: mode } : {}),
    ...(accessModes !== undefined ? { accessModes } : {}),
    ...(mountOptions !== undefined ? { mountOptions } : {}),
  };
}

const MAX_ISSUES_IN_MESSAGE = 5;

export class ClusterDirView implements ClusterView {
  readonly dir: string;
  readonly nodeName: string;
  readonly #fs: FileSystem;
  readonly #logger: Logger;
  readonly #limits: Required<ClusterDirLimits>;
  #problems: readonly ManifestProblem[] = [];
  /** Messages of the problems already logged (those of the latest pass). */
  #logged = new Set<string>();
  #writes: Promise<void> = Promise.resolve();
  /** The manifests as of the latest listPods (undefined before the first). */
  #latest: Snapshot | undefined;
  /** Bytes of the last read of each manifest file that parsed without a problem. */
  readonly #lastGood = new Map<string, Uint8Array>();

  constructor(options: ClusterDirOptions) {
    if (options.nodeName === '') throw new Error('cluster dir: the node name must not be empty');
    this.dir = resolvePath(options.dir);
    this.nodeName = options.nodeName;
    this.#fs = options.fs ?? new NodeFileSystem();
    this.#logger = options.logger ?? discardLogger;
    this.#limits = { ...DEFAULT_CLUSTER_DIR_LIMITS, ...options.limits };
  }

  get manifestsDir(): string {
    return posix.join(this.dir, MANIFESTS_DIR_NAME);
  }

  get nodeStatusFile(): string {
    return posix.join(this.dir, NODE_STATUS_FILE_NAME);
  }

  /** The problems found by the latest read of the manifests (empty before the first). */
  problems(): readonly ManifestProblem[] {
    return this.#problems;
  }

  /**
   * The pods bound to this node, from a fresh read of the manifests. The cluster dir stands for
   * the API server as a whole: while node-status.json cannot be read, this rejects too, so that
   * an unreachable API server never looks like a node whose pods are all gone.
   */
  async listPods(): Promise<readonly Pod[]> {
    await this.#readNodeStatus();
    const snap = await this.#read();
    this.#latest = snap;
    return snap.pods.filter((p) => p.nodeName === this.nodeName);
  }

  // The getters below answer from the snapshot of the latest listPods (an informer cache): the
  // populator lists pods and then resolves their volumes against that same view.

  async getPersistentVolumeClaim(namespace: string, name: string): Promise<PersistentVolumeClaim | undefined> {
    return (await this.#snapshot()).pvcs.get(`${namespace}/${name}`);
  }

  async getPersistentVolume(name: string): Promise<PersistentVolume | undefined> {
    return (await this.#snapshot()).pvs.get(name);
  }

  async getCSIDriver(name: string): Promise<CSIDriverInfo | undefined> {
    return (await this.#snapshot()).drivers.get(name);
  }

  async #snapshot(): Promise<Snapshot> {
    if (this.#latest !== undefined) return this.#latest;
    await this.#readNodeStatus();
    this.#latest = await this.#read();
    return this.#latest;
  }

  async getNodeStatus(): Promise<NodeStatus> {
    const { status } = await this.#readNodeStatus();
    return {
      volumesAttached: status.volumesAttached.map((v): AttachedVolume => ({ name: v.name, devicePath: v.devicePath })),
      volumesInUse: [...status.volumesInUse],
    };
  }

  /** Replaces volumesInUse in node-status.json, keeping every other field; atomic. */
  setVolumesInUse(names: readonly string[]): Promise<void> {
    const list = [...names];
    const write = this.#writes.then(() => this.#writeVolumesInUse(list));
    this.#writes = write.catch(() => undefined);
    return write;
  }

  // ---------------------------------------------------------------- node status

  async #readNodeStatus(): Promise<{ raw: Record<string, unknown>; status: z.infer<typeof nodeStatusSchema> }> {
    const file = this.nodeStatusFile;
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(await this.#fs.readFile(file, this.#limits.maxFileBytes));
    } catch (err) {
      throw new Error(`cluster dir: cannot read the node status ${file}: ${errorMessage(err)}`, { cause: err });
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new Error(`cluster dir: the node status ${file} is not valid JSON: ${errorMessage(err)}`, { cause: err });
    }
    if (!isRecord(raw)) throw new Error(`cluster dir: the node status ${file} must be a JSON object`);
    const parsed = nodeStatusSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue === undefined ? '' : ` field ${formatFieldPath(issue.path)}: ${issue.message}`;
      throw new Error(`cluster dir: the node status ${file} is invalid:${where}`);
    }
    return { raw, status: parsed.data };
  }

  async #writeVolumesInUse(names: string[]): Promise<void> {
    const { raw } = await this.#readNodeStatus();
    const file = this.nodeStatusFile;
    // Write next to the real file, so a symlinked node-status.json stays a symlink.
    const real = await this.#fs.realpath(file);
    const mode = (await this.#fs.stat(real)).mode;
    const updated = { ...raw, volumesInUse: names };
    const data = new TextEncoder().encode(`${JSON.stringify(updated, null, 2)}\n`);
    const dir = posix.dirname(real);
    const tmp = posix.join(dir, `.${posix.basename(real)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      await this.#fs.writeFile(tmp, data, { mode, fsync: true });
      await this.#fs.rename(tmp, real);
    } catch (err) {
      await this.#fs.unlink(tmp).catch(() => undefined);
      throw new Error(`cluster dir: cannot write the node status ${file}: ${errorMessage(err)}`, { cause: err });
    }
    await this.#fs.fsyncDir(dir);
  }

  // ---------------------------------------------------------------- manifests

  async #read(): Promise<Snapshot> {
    const b = new SnapshotBuilder();
    const dir = this.manifestsDir;
    let names: string[];
    try {
      names = (await this.#fs.readdir(dir))
        .filter((e) => (e.type === 'file' || e.type === 'symlink') && !e.name.startsWith('.') && /\.ya?ml$/.test(e.name))
        .map((e) => e.name)
        .sort((a, c) => (a < c ? -1 : a > c ? 1 : 0));
    } catch (err) {
      throw new Error(`cluster dir: cannot list the manifests in ${dir}: ${errorMessage(err)}`, { cause: err });
    }
    if (names.length > this.#limits.maxFiles) {
      b.problems.push({
        file: dir,
        message: `${dir}: ${names.length} manifest files, more than the limit of ${this.#limits.maxFiles}; only the first ${this.#limits.maxFiles} in name order are read, from ${names[this.#limits.maxFiles] ?? ''} on nothing is`,
      });
      names = names.slice(0, this.#limits.maxFiles);
    }
    for (const name of names) {
      if (b.documents >= this.#limits.maxDocuments) {
        const file = posix.join(dir, name);
        b.problems.push({ file, message: `${file}: not read: the limit of ${this.#limits.maxDocuments} YAML documents was reached` });
        continue;
      }
      await this.#readFile(b, posix.join(dir, name));
    }
    const snap = b.build();
    this.#report(snap.problems);
    return snap;
  }

  #report(problems: readonly ManifestProblem[]): void {
    this.#problems = problems;
    const current = new Set(problems.map((p) => p.message));
    for (const p of problems) {
      if (this.#logged.has(p.message)) continue;
      this.#logger.error(new Error(p.message), 'Skipping a cluster manifest', {
        file: p.file,
        ...(p.document !== undefined ? { document: p.document } : {}),
        ...(p.line !== undefined ? { line: p.line } : {}),
        ...(p.field !== undefined ? { field: p.field } : {}),
      });
    }
    for (const m of this.#logged) if (!current.has(m)) this.#logger.v(2).info('Cluster manifest problem resolved', { problem: m });
    this.#logged = current;
  }

  /**
   * Reads one manifest file into the snapshot. A file that cannot be read or parsed cleanly
   * falls back to its last good contents when there are any: a pod whose manifest breaks while
   * it runs must not look deleted, or its volumes would be torn down under it.
   */
  async #readFile(b: SnapshotBuilder, file: string): Promise<void> {
    let bytes: Uint8Array | undefined;
    let readProblem: string | undefined;
    try {
      bytes = await this.#fs.readFile(file, this.#limits.maxFileBytes);
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ENOENT') {
        this.#lastGood.delete(file); // removed since the listing: a deleted manifest
        return;
      }
      readProblem = code === 'EFBIG' ? `refused: larger than the limit of ${this.#limits.maxFileBytes} bytes` : `cannot read: ${errorMessage(err)}`;
    }
    let probe: SnapshotBuilder | undefined;
    if (bytes !== undefined) {
      probe = new SnapshotBuilder();
      this.#parseFile(probe, file, bytes);
      if (probe.problems.length === 0) {
        this.#lastGood.set(file, bytes);
        this.#parseFile(b, file, bytes);
        return;
      }
    }
    const lastGood = this.#lastGood.get(file);
    if (lastGood !== undefined) {
      const why = readProblem ?? 'it has problems';
      b.problems.push({ file, message: `${file}: ${why}; using its last good contents until it is fixed` });
      if (probe !== undefined) b.problems.push(...probe.problems);
      this.#parseFile(b, file, lastGood);
      return;
    }
    if (bytes === undefined) {
      b.problems.push({ file, message: `${file}: ${readProblem ?? 'cannot read'}; file skipped` });
      return;
    }
    this.#parseFile(b, file, bytes);
  }

  /** Parses one file's bytes into `b`, problems included. */
  #parseFile(b: SnapshotBuilder, file: string, bytes: Uint8Array): void {
    const fileProblem = (message: string, line?: number): void => {
      b.problems.push({ file, ...(line !== undefined ? { line } : {}), message: `${file}${line !== undefined ? `:${line}` : ''}: ${message}; file skipped` });
    };
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      fileProblem('not UTF-8 text');
      return;
    }
    const lines = new LineCounter();
    const docs: Document[] = [];
    try {
      for (const doc of parseAllDocuments(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: true, merge: true })) docs.push(doc);
    } catch (err) {
      fileProblem(`YAML does not parse: ${errorMessage(err)}`);
      return;
    }
    for (const [i, doc] of docs.entries()) {
      const bad = doc.errors[0];
      if (bad !== undefined) {
        fileProblem(`YAML does not parse (document ${i}): ${bad.message.split('\n')[0] ?? ''}`, bad.linePos?.[0].line);
        return;
      }
    }
    const values: unknown[] = [];
    try {
      for (const doc of docs) values.push(doc.toJS({ maxAliasCount: this.#limits.maxAliasCount }));
    } catch (err) {
      fileProblem(`YAML cannot be loaded: ${errorMessage(err)}`);
      return;
    }
    for (const [i, doc] of docs.entries()) {
      if (b.documents >= this.#limits.maxDocuments) {
        b.problems.push({ file, document: i, message: `${file}: documents from ${i} on not read: the limit of ${this.#limits.maxDocuments} YAML documents was reached` });
        return;
      }
      const value = values[i];
      if (value === null || value === undefined) continue; // an empty document ("---" at the end)
      b.documents++;
      this.#addObject(b, file, i, doc, lines, dropNulls(value));
    }
  }

  #addObject(b: SnapshotBuilder, file: string, index: number, doc: Document, lines: LineCounter, value: unknown): void {
    const docLine = lineOf(doc, lines, []);
    const problem = (what: string, message: string, path?: readonly (string | number)[]): void => {
      const line = path !== undefined ? lineOf(doc, lines, path) : docLine;
      const field = path !== undefined ? formatFieldPath(path) : undefined;
      b.problems.push({
        file,
        document: index,
        ...(line !== undefined ? { line } : {}),
        ...(field !== undefined ? { field } : {}),
        message: `${file}${line !== undefined ? `:${line}` : ''}: document ${index}${what === '' ? '' : ` (${what})`}: ${message}; object skipped`,
      });
    };
    if (!isRecord(value)) {
      problem('', `not a Kubernetes object (a YAML mapping), found ${Array.isArray(value) ? 'a sequence' : typeof value}`);
      return;
    }
    const kind = value.kind;
    if (typeof kind !== 'string' || kind === '') {
      problem('', 'field kind: a Kubernetes object needs a kind', ['kind']);
      return;
    }
    if (!isKnownKind(kind)) return; // not an object nodevol uses
    const meta = value.metadata;
    const rawName = isRecord(meta) && typeof meta.name === 'string' ? meta.name : undefined;
    const rawNs = isRecord(meta) && typeof meta.namespace === 'string' ? meta.namespace : undefined;
    const what = `${kind}${rawName === undefined ? '' : ` ${kind === 'Pod' || kind === 'PersistentVolumeClaim' ? `${rawNs ?? 'default'}/` : ''}${rawName}`}`;
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
      return;
    }
    const data = result.data;
    switch (data.kind) {
      case 'Pod': {
        const pod = toPod(data);
        const key = `${pod.namespace}/${pod.name}`;
        const other = b.podUIDs.get(pod.uid);
        if (b.podKeys.has(key)) problem(what, `a Pod ${key} was already read from an earlier file or document`, ['metadata', 'name']);
        else if (other !== undefined) problem(what, `metadata.uid ${pod.uid} is already the UID of Pod ${other}`, ['metadata', 'uid']);
        else {
          b.podKeys.add(key);
          b.podUIDs.set(pod.uid, key);
          b.pods.push(pod);
        }
        return;
      }
      case 'PersistentVolumeClaim': {
        const { metadata, spec } = data;
        const key = `${metadata.namespace}/${metadata.name}`;
        if (b.pvcs.has(key)) problem(what, `a PersistentVolumeClaim ${key} was already read from an earlier file or document`, ['metadata', 'name']);
        else b.pvcs.set(key, { namespace: metadata.namespace, name: metadata.name, volumeName: spec.volumeName, ...(spec.volumeMode !== undefined ? { volumeMode: spec.volumeMode } : {}) });
        return;
      }
      case 'PersistentVolume': {
        if (b.pvs.has(data.metadata.name)) problem(what, `a PersistentVolume ${data.metadata.name} was already read from an earlier file or document`, ['metadata', 'name']);
        else b.pvs.set(data.metadata.name, toPV(data));
        return;
      }
      case 'CSIDriver': {
        const name = data.metadata.name;
        if (b.drivers.has(name)) problem(what, `a CSIDriver ${name} was already read from an earlier file or document`, ['metadata', 'name']);
        else b.drivers.set(name, { name, attachRequired: data.spec.attachRequired, podInfoOnMount: data.spec.podInfoOnMount });
        return;
      }
    }
  }
}
