/**
 * Kubernetes objects as they arrive from outside the node - a file holding what
 * `kubectl get nodes,pods,pv,pvc,volumeattachments,csidrivers -A -o json` prints (a `List`), or
 * the API server's answers (src/adapters/node/clusterApi.ts), which carry the same field names -
 * checked by zod schemas: a malformed object is one {@link ClusterStateError} naming the item and
 * the field, never a guess. Untrusted input: test/property/clusterObjects.property.test.ts.
 *
 * The audit (src/audit/clusterState.ts) reduces these objects to one node's view; the API server
 * adapter only fetches and checks them, so neither imports the other.
 */
import { z } from 'zod';

/** Largest cluster state file read (a `kubectl get … -A -o json` of a big cluster fits). */
export const MAX_CLUSTER_STATE_BYTES = 256 * 1024 * 1024;

const meta = z.object({
  name: z.string(),
  namespace: z.string().optional(),
  uid: z.string().optional(),
  deletionTimestamp: z.unknown().optional(),
});

const nodeSchema = z.object({
  kind: z.literal('Node').optional(),
  metadata: meta,
  status: z
    .object({
      volumesInUse: z.array(z.string()).nullish(),
      volumesAttached: z.array(z.object({ name: z.string(), devicePath: z.string().optional() })).nullish(),
    })
    .nullish(),
});

/** metav1.Time as the API server writes it: RFC 3339 ("2026-01-01T00:00:00Z"); only its presence is read. */
const rfc3339 = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/, 'want an RFC 3339 time (2026-01-01T00:00:00Z)');
const volumeMode = z.enum(['Filesystem', 'Block']);
const volumeRef = z.object({ name: z.string() });
/** A container's volume use: the names kubelet's populator reads (GetPodVolumeNames). */
const container = z.object({ volumeMounts: z.array(volumeRef).nullish(), volumeDevices: z.array(volumeRef).nullish() });

const podSchema = z.object({
  kind: z.literal('Pod').optional(),
  metadata: meta.extend({ uid: z.string(), namespace: z.string(), deletionTimestamp: rfc3339.nullish() }),
  spec: z.object({
    nodeName: z.string().nullish(),
    volumes: z
      .array(
        z.object({
          name: z.string(),
          persistentVolumeClaim: z.object({ claimName: z.string() }).nullish(),
          csi: z.object({ driver: z.string() }).nullish(),
          ephemeral: z.unknown().optional(),
        }),
      )
      .nullish(),
    containers: z.array(container).nullish(),
    initContainers: z.array(container).nullish(),
    ephemeralContainers: z.array(container).nullish(),
  }),
  status: z.object({ phase: z.enum(['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown']).nullish() }).nullish(),
});

const csiPvSource = z.object({ driver: z.string(), volumeHandle: z.string() });

const pvSchema = z.object({
  kind: z.literal('PersistentVolume').optional(),
  metadata: meta,
  spec: z.object({
    csi: csiPvSource.nullish(),
    /** The attach/detach controller attaches a volume to a second node only when these allow it. */
    accessModes: z.array(z.string()).nullish(),
    /** kubelet mounts the PV for a claim only when claimRef.uid is the claim's metadata.uid. */
    claimRef: z.object({ namespace: z.string().nullish(), name: z.string().nullish(), uid: z.string().nullish() }).nullish(),
    volumeMode: volumeMode.nullish(),
  }),
});

const pvcSchema = z.object({
  kind: z.literal('PersistentVolumeClaim').optional(),
  metadata: meta.extend({ namespace: z.string(), deletionTimestamp: rfc3339.nullish() }),
  spec: z.object({ volumeName: z.string().nullish(), volumeMode: volumeMode.nullish() }).nullish(),
  status: z.object({ phase: z.enum(['Pending', 'Bound', 'Lost']).nullish() }).nullish(),
});

const vaSchema = z.object({
  kind: z.literal('VolumeAttachment').optional(),
  metadata: meta,
  spec: z.object({
    attacher: z.string(),
    nodeName: z.string(),
    source: z.object({
      persistentVolumeName: z.string().nullish(),
      inlineVolumeSpec: z.object({ csi: csiPvSource.nullish() }).nullish(),
    }),
  }),
  status: z.object({ attached: z.boolean().nullish() }).nullish(),
});

const csiDriverSchema = z.object({
  kind: z.literal('CSIDriver').optional(),
  metadata: meta,
  spec: z.object({ attachRequired: z.boolean().nullish() }).nullish(),
});

export type NodeObject = z.infer<typeof nodeSchema>;
export type PodObject = z.infer<typeof podSchema>;
export type PersistentVolumeObject = z.infer<typeof pvSchema>;
export type PersistentVolumeClaimObject = z.infer<typeof pvcSchema>;
export type VolumeAttachmentObject = z.infer<typeof vaSchema>;
export type CSIDriverObject = z.infer<typeof csiDriverSchema>;

/** A cluster object (or the List holding them) that does not match its schema; the message names the item and the field. */
export class ClusterStateError extends Error {
  override readonly name = 'ClusterStateError';
}

/** The raw objects of each kind, before they are reduced to a {@link ClusterState}. */
export interface ClusterObjects {
  readonly nodes: readonly NodeObject[];
  readonly pods: readonly PodObject[];
  readonly persistentVolumes: readonly PersistentVolumeObject[];
  readonly claims: readonly PersistentVolumeClaimObject[];
  readonly volumeAttachments: readonly VolumeAttachmentObject[];
  readonly csiDrivers: readonly CSIDriverObject[];
}

function fieldPath(base: string, path: readonly (string | number)[]): string {
  let out = base;
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : `.${p}`;
  return out;
}

/** Validates one object with `schema`; the error names `where` and the field. */
export function parseObject<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new ClusterStateError(`${fieldPath(where, issue?.path ?? [])}: ${issue?.message ?? 'invalid'}`);
}

export const schemas = {
  node: nodeSchema as z.ZodType<NodeObject>,
  pod: podSchema as z.ZodType<PodObject>,
  persistentVolume: pvSchema as z.ZodType<PersistentVolumeObject>,
  claim: pvcSchema as z.ZodType<PersistentVolumeClaimObject>,
  volumeAttachment: vaSchema as z.ZodType<VolumeAttachmentObject>,
  csiDriver: csiDriverSchema as z.ZodType<CSIDriverObject>,
};

const listSchema = z.object({
  kind: z.string(),
  metadata: z.object({ continue: z.string().nullish(), remainingItemCount: z.number().nullish() }).passthrough().nullish(),
  items: z.array(z.object({ kind: z.string().optional() }).passthrough()).nullish(),
});

/**
 * The list metadata that says whether a list answer is the whole list: `continue` (the token
 * of the next page) and `remainingItemCount` (how many objects the next pages hold).
 */
export interface ListPageMeta {
  /** '' on the last (or only) page. */
  readonly continueToken: string;
  readonly remainingItemCount?: number;
}

/** A checked page of a list answer: its items (not yet checked one by one) and where the list goes on. */
export interface ListPage extends ListPageMeta {
  readonly items: readonly unknown[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Checks one page of a list answer from the API server (a PodList, a PersistentVolumeList, ...):
 * an object with an `items` array (`null` is empty) and, optionally, `metadata.continue` and
 * `metadata.remainingItemCount`. `where` names the answer (e.g. `list pods: PodList`); anything
 * else is one {@link ClusterStateError} naming it and the field.
 *
 * The continue token is read as `metadata.continue` (the JSON field) or `metadata._continue`
 * (the property @kubernetes/client-node deserializes it to, `continue` being a reserved word).
 */
export function readListPage(value: unknown, where: string): ListPage {
  if (!isRecord(value)) throw new ClusterStateError(`${where}: want a list object, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`);
  if (!('items' in value) || value['items'] === undefined) throw new ClusterStateError(`${where}.items: missing: not a list answer`);
  const items = value['items'];
  if (items !== null && !Array.isArray(items)) throw new ClusterStateError(`${where}.items: want an array, got ${typeof items}`);
  const metadata = value['metadata'];
  if (metadata !== undefined && metadata !== null && !isRecord(metadata)) throw new ClusterStateError(`${where}.metadata: want an object`);
  const token = metadata?.['continue'] ?? metadata?.['_continue'];
  if (token !== undefined && token !== null && typeof token !== 'string') throw new ClusterStateError(`${where}.metadata.continue: want a string, got ${typeof token}`);
  const remaining = metadata?.['remainingItemCount'];
  if (remaining !== undefined && remaining !== null && (typeof remaining !== 'number' || !Number.isSafeInteger(remaining) || remaining < 0)) {
    throw new ClusterStateError(`${where}.metadata.remainingItemCount: want a non-negative integer, got ${JSON.stringify(remaining)}`);
  }
  return { items: items ?? [], continueToken: token ?? '', ...(typeof remaining === 'number' ? { remainingItemCount: remaining } : {}) };
}

/**
 * Refuses a list answer that says it is one page of a longer list (a non-empty
 * `metadata.continue`, or `metadata.remainingItemCount` > 0): read as the whole list, the
 * objects on the other pages would be taken as absent - a pod that wants a volume on page 2
 * would not want it. `where` names the answer.
 */
export function requireWholeList(meta: ListPageMeta, where: string): void {
  if (meta.continueToken !== '') {
    throw new ClusterStateError(`${where}.metadata.continue: set: this is one page of a longer list, not the whole list (fetch it whole, e.g. kubectl get without --chunk-size=N limits)`);
  }
  if ((meta.remainingItemCount ?? 0) > 0) {
    throw new ClusterStateError(`${where}.metadata.remainingItemCount: ${meta.remainingItemCount ?? 0} more objects are on pages not read: not the whole list`);
  }
}

/**
 * Parses the JSON of `kubectl get nodes,pods,pv,pvc,volumeattachments,csidrivers -A -o json`:
 * a `List` (or any `…List`) whose items carry their `kind`. Kinds other than the six are
 * ignored. `source` names the file in errors.
 */
export function parseClusterList(text: string, source: string): ClusterObjects {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ClusterStateError(`${source}: not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const list = parseObject(listSchema, json, source);
  if (list.kind !== 'List' && !list.kind.endsWith('List')) {
    throw new ClusterStateError(`${source}.kind: want List (kubectl get … -o json), got ${JSON.stringify(list.kind)}`);
  }
  // Present in every list (Go's encoder writes `null` for a nil slice, read as empty): a list
  // without the field is not a list, and must not be read as "no objects".
  if (list.items === undefined) throw new ClusterStateError(`${source}.items: Required`);
  // A file cannot be asked for the next page: one page of a longer list is no answer.
  requireWholeList({ continueToken: list.metadata?.continue ?? '', ...(typeof list.metadata?.remainingItemCount === 'number' ? { remainingItemCount: list.metadata.remainingItemCount } : {}) }, source);
  const itemKind = list.kind === 'List' ? undefined : list.kind.slice(0, -'List'.length);
  const out = { nodes: [] as NodeObject[], pods: [] as PodObject[], persistentVolumes: [] as PersistentVolumeObject[], claims: [] as PersistentVolumeClaimObject[], volumeAttachments: [] as VolumeAttachmentObject[], csiDrivers: [] as CSIDriverObject[] };
  (list.items ?? []).forEach((item, i) => {
    const where = `${source}: items[${i}]`;
    switch (item.kind ?? itemKind) {
      case 'Node':
        out.nodes.push(parseObject(schemas.node, item, where));
        break;
      case 'Pod':
        out.pods.push(parseObject(schemas.pod, item, where));
        break;
      case 'PersistentVolume':
        out.persistentVolumes.push(parseObject(schemas.persistentVolume, item, where));
        break;
      case 'PersistentVolumeClaim':
        out.claims.push(parseObject(schemas.claim, item, where));
        break;
      case 'VolumeAttachment':
        out.volumeAttachments.push(parseObject(schemas.volumeAttachment, item, where));
        break;
      case 'CSIDriver':
        out.csiDrivers.push(parseObject(schemas.csiDriver, item, where));
        break;
      case undefined:
      default:
        break;
    }
  });
  return out;
}
