/**
 * The cluster's view of one node, as the audit and `nodevol recover` use it: the Node's
 * `status.volumesInUse` / `volumesAttached`, the pods bound to the node, the claims and PVs they
 * name, every VolumeAttachment and the CSIDriver objects.
 *
 * Two sources build it from the same Kubernetes JSON: a file holding what
 * `kubectl get nodes,pods,pv,pvc,volumeattachments,csidrivers -A -o json` prints (a `List`), and
 * the API server (src/adapters/node/clusterApi.ts), whose objects have the same field names.
 * Both go through the zod schemas below, so a malformed object is one error naming the item and
 * the field, never a guess.
 */
import { z } from 'zod';
import { CSI_PLUGIN_NAME, csiVolumeName, getUniqueVolumeName } from '../layout/names.js';

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

const podSchema = z.object({
  kind: z.literal('Pod').optional(),
  metadata: meta.extend({ uid: z.string(), namespace: z.string() }),
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
  }),
  status: z.object({ phase: z.string().nullish() }).nullish(),
});

const csiPvSource = z.object({ driver: z.string(), volumeHandle: z.string() });

const pvSchema = z.object({
  kind: z.literal('PersistentVolume').optional(),
  metadata: meta,
  spec: z.object({
    csi: csiPvSource.nullish(),
    claimRef: z.object({ namespace: z.string().nullish(), name: z.string().nullish() }).nullish(),
  }),
});

const pvcSchema = z.object({
  kind: z.literal('PersistentVolumeClaim').optional(),
  metadata: meta.extend({ namespace: z.string() }),
  spec: z.object({ volumeName: z.string().nullish() }).nullish(),
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

/** A pod as the audit needs it. */
export interface ClusterPod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly nodeName: string;
  /** Succeeded or Failed: kubelet no longer mounts its volumes. */
  readonly terminated: boolean;
  readonly claimNames: readonly string[];
}

export interface ClusterPv {
  readonly name: string;
  readonly driver?: string;
  readonly volumeHandle?: string;
}

export interface ClusterVolumeAttachment {
  readonly name: string;
  readonly attacher: string;
  readonly nodeName: string;
  readonly pvName?: string;
  /** The CSI source of the PV (or of the inline spec), when known. */
  readonly driver?: string;
  readonly volumeHandle?: string;
  readonly attached: boolean;
}

/** Everything the cluster says about one node. */
export interface ClusterState {
  /** Where it came from, for messages: the file path or the API server URL. */
  readonly source: string;
  readonly nodeName: string;
  readonly volumesInUse: readonly string[];
  readonly volumesAttached: readonly string[];
  /** Pods bound to this node. */
  readonly pods: readonly ClusterPod[];
  /** Every pod UID known (any node): a pod volume dir whose UID is absent belongs to a gone pod. */
  readonly podUIDs: ReadonlySet<string>;
  /** PVC `namespace/name` → bound PV name ('' while unbound). */
  readonly claims: ReadonlyMap<string, string>;
  readonly persistentVolumes: ReadonlyMap<string, ClusterPv>;
  readonly volumeAttachments: readonly ClusterVolumeAttachment[];
  /** CSIDriver name → spec.attachRequired (default true, as kubelet). */
  readonly csiDrivers: ReadonlyMap<string, boolean>;
}

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
  items: z.array(z.object({ kind: z.string().optional() }).passthrough()).nullish(),
});

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

/**
 * Reduces the objects to this node's {@link ClusterState}. Throws when the node itself is not
 * among them: without its status no verdict about attachment can be right.
 */
export function clusterStateFor(objects: ClusterObjects, nodeName: string, source: string): ClusterState {
  const node = objects.nodes.find((n) => n.metadata.name === nodeName);
  if (node === undefined) {
    const names = objects.nodes.map((n) => n.metadata.name).slice(0, 5);
    throw new ClusterStateError(`${source}: node ${JSON.stringify(nodeName)} not found (nodes there: ${names.length === 0 ? 'none' : names.join(', ')}); set --node-name`);
  }
  const pvs = new Map<string, ClusterPv>();
  for (const pv of objects.persistentVolumes) {
    const csi = pv.spec.csi ?? undefined;
    pvs.set(pv.metadata.name, { name: pv.metadata.name, ...(csi !== undefined ? { driver: csi.driver, volumeHandle: csi.volumeHandle } : {}) });
  }
  const claims = new Map<string, string>();
  for (const c of objects.claims) claims.set(`${c.metadata.namespace}/${c.metadata.name}`, c.spec?.volumeName ?? '');
  const pods: ClusterPod[] = [];
  const podUIDs = new Set<string>();
  for (const p of objects.pods) {
    podUIDs.add(p.metadata.uid);
    if ((p.spec.nodeName ?? '') !== nodeName) continue;
    const phase = p.status?.phase ?? '';
    pods.push({
      uid: p.metadata.uid,
      namespace: p.metadata.namespace,
      name: p.metadata.name,
      nodeName,
      terminated: phase === 'Succeeded' || phase === 'Failed',
      claimNames: (p.spec.volumes ?? []).flatMap((v) => (v.persistentVolumeClaim?.claimName !== undefined ? [v.persistentVolumeClaim.claimName] : [])),
    });
  }
  const volumeAttachments = objects.volumeAttachments.map((va): ClusterVolumeAttachment => {
    const pvName = va.spec.source.persistentVolumeName ?? undefined;
    const csi = pvName !== undefined ? pvs.get(pvName) : va.spec.source.inlineVolumeSpec?.csi ?? undefined;
    return {
      name: va.metadata.name,
      attacher: va.spec.attacher,
      nodeName: va.spec.nodeName,
      ...(pvName !== undefined ? { pvName } : {}),
      ...(csi?.driver !== undefined ? { driver: csi.driver } : {}),
      ...(csi?.volumeHandle !== undefined ? { volumeHandle: csi.volumeHandle } : {}),
      attached: va.status?.attached === true,
    };
  });
  const csiDrivers = new Map<string, boolean>();
  for (const d of objects.csiDrivers) csiDrivers.set(d.metadata.name, d.spec?.attachRequired ?? true);
  return {
    source,
    nodeName,
    volumesInUse: node.status?.volumesInUse ?? [],
    volumesAttached: (node.status?.volumesAttached ?? []).map((a) => a.name),
    pods,
    podUIDs,
    claims,
    persistentVolumes: pvs,
    volumeAttachments,
    csiDrivers,
  };
}

/** kubelet's unique name of a CSI PV: kubernetes.io/csi/<driver>^<handle>. */
export function csiUniqueName(driver: string, volumeHandle: string): string {
  return getUniqueVolumeName(CSI_PLUGIN_NAME, csiVolumeName(driver, volumeHandle));
}

export interface PodRef {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
}

/** What the pods bound to the node want, by unique volume name, and the claims that resolve to nothing. */
export interface WantedVolumes {
  readonly byVolume: ReadonlyMap<string, readonly PodRef[]>;
  /** A pod's claim that names no PV the state knows: which volume it wants cannot be proven. */
  readonly unresolved: readonly { readonly pod: PodRef; readonly claim: string; readonly why: string }[];
}

/** Volumes the pods bound to this node (not terminated) want, through their claims and PVs. */
export function wantedVolumes(state: ClusterState): WantedVolumes {
  const byVolume = new Map<string, PodRef[]>();
  const unresolved: { pod: PodRef; claim: string; why: string }[] = [];
  for (const pod of state.pods) {
    if (pod.terminated) continue;
    const ref: PodRef = { uid: pod.uid, namespace: pod.namespace, name: pod.name };
    for (const claim of pod.claimNames) {
      const key = `${pod.namespace}/${claim}`;
      const pvName = state.claims.get(key);
      if (pvName === undefined || pvName === '') {
        unresolved.push({ pod: ref, claim: key, why: pvName === undefined ? 'claim not found' : 'claim not bound' });
        continue;
      }
      const pv = state.persistentVolumes.get(pvName);
      if (pv === undefined) {
        unresolved.push({ pod: ref, claim: key, why: `PersistentVolume ${pvName} not found` });
        continue;
      }
      if (pv.driver === undefined || pv.volumeHandle === undefined) continue; // not a CSI volume
      const name = csiUniqueName(pv.driver, pv.volumeHandle);
      const list = byVolume.get(name) ?? [];
      list.push(ref);
      byVolume.set(name, list);
    }
  }
  return { byVolume, unresolved };
}
