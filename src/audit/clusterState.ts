/**
 * The cluster's view of one node, as the audit and `nodevol recover` use it: the Node's
 * `status.volumesInUse` / `volumesAttached`, the pods bound to the node, the claims and PVs they
 * name, the VolumeAttachments and the CSIDriver objects.
 *
 * Two sources give the same Kubernetes objects, checked by the schemas of src/api/clusterObjects.ts:
 * a file holding what `kubectl get nodes,pods,pv,pvc,volumeattachments,csidrivers -A -o json`
 * prints (a `List`: every object), and the API server (src/adapters/node/clusterApi.ts), from
 * which the audit reads the objects its findings need (./clusterReads.ts: the PVs,
 * VolumeAttachments and CSIDrivers of its node's volumes, every PV and VolumeAttachment only when
 * a volume may be attached elsewhere), so that the findings are the same from either.
 */
import { ClusterStateError, type ClusterObjects } from '../api/clusterObjects.js';
import { CSI_PLUGIN_NAME, csiVolumeName, getUniqueVolumeName } from '../layout/names.js';

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
