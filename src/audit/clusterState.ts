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

/**
 * How a pod's containers (init, regular and ephemeral) use one of its volumes: in volumeMounts,
 * in volumeDevices (raw block), or in neither (kubelet's populator skips such a volume).
 */
export type VolumeUse = 'mount' | 'device' | 'unused';

/** A pod volume backed by a claim. */
export interface ClusterPodClaim {
  /** spec.volumes[i].name */
  readonly volume: string;
  readonly claimName: string;
  readonly use: VolumeUse;
}

/** A pod as the audit needs it. */
export interface ClusterPod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly nodeName: string;
  /** Succeeded or Failed: kubelet no longer mounts its volumes, and unmounts them while the pod is listed. */
  readonly terminated: boolean;
  /**
   * metadata.deletionTimestamp is set: kubelet adds no new volume for it, but keeps those it has
   * until its containers stop (a terminal phase, or the pod leaves the list).
   */
  readonly terminating: boolean;
  /** Its claim-backed volumes, in spec.volumes order. */
  readonly claims: readonly ClusterPodClaim[];
}

export interface ClusterPv {
  readonly name: string;
  readonly driver?: string;
  readonly volumeHandle?: string;
  /** spec.claimRef.uid; undefined when the PV has no claimRef (not bound), '' when the claimRef carries no uid. */
  readonly claimRefUid?: string;
  /** spec.volumeMode; absent is Filesystem (kubelet's GetVolumeMode). */
  readonly volumeMode?: 'Filesystem' | 'Block';
}

/** A PersistentVolumeClaim as kubelet's populator checks it. */
export interface ClusterClaim {
  /** metadata.uid ('' when absent). */
  readonly uid: string;
  /** spec.volumeName: the bound PV ('' while unbound). */
  readonly volumeName: string;
  /** status.phase; undefined when absent (kubelet reads it as not Bound). */
  readonly phase?: 'Pending' | 'Bound' | 'Lost';
  /** metadata.deletionTimestamp is set. */
  readonly deleting: boolean;
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
  /** PVC `namespace/name` → the claim. */
  readonly claims: ReadonlyMap<string, ClusterClaim>;
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
    const claimRef = pv.spec.claimRef ?? undefined;
    const mode = pv.spec.volumeMode ?? undefined;
    pvs.set(pv.metadata.name, {
      name: pv.metadata.name,
      ...(csi !== undefined ? { driver: csi.driver, volumeHandle: csi.volumeHandle } : {}),
      ...(claimRef !== undefined ? { claimRefUid: claimRef.uid ?? '' } : {}),
      ...(mode !== undefined ? { volumeMode: mode } : {}),
    });
  }
  const claims = new Map<string, ClusterClaim>();
  for (const c of objects.claims) {
    const phase = c.status?.phase ?? undefined;
    claims.set(`${c.metadata.namespace}/${c.metadata.name}`, {
      uid: c.metadata.uid ?? '',
      volumeName: c.spec?.volumeName ?? '',
      ...(phase !== undefined ? { phase } : {}),
      deleting: c.metadata.deletionTimestamp !== undefined && c.metadata.deletionTimestamp !== null,
    });
  }
  const pods: ClusterPod[] = [];
  const podUIDs = new Set<string>();
  for (const p of objects.pods) {
    podUIDs.add(p.metadata.uid);
    if ((p.spec.nodeName ?? '') !== nodeName) continue;
    const phase = p.status?.phase ?? '';
    const containers = [...(p.spec.initContainers ?? []), ...(p.spec.containers ?? []), ...(p.spec.ephemeralContainers ?? [])];
    const mounted = new Set(containers.flatMap((c) => (c.volumeMounts ?? []).map((m) => m.name)));
    const devices = new Set(containers.flatMap((c) => (c.volumeDevices ?? []).map((d) => d.name)));
    pods.push({
      uid: p.metadata.uid,
      namespace: p.metadata.namespace,
      name: p.metadata.name,
      nodeName,
      terminated: phase === 'Succeeded' || phase === 'Failed',
      terminating: p.metadata.deletionTimestamp !== undefined && p.metadata.deletionTimestamp !== null,
      claims: (p.spec.volumes ?? []).flatMap((v): ClusterPodClaim[] => {
        const claimName = v.persistentVolumeClaim?.claimName;
        if (claimName === undefined) return [];
        // A name in both lists is refused by the API server; kubelet checks the mount first.
        const use: VolumeUse = mounted.has(v.name) ? 'mount' : devices.has(v.name) ? 'device' : 'unused';
        return [{ volume: v.name, claimName, use }];
      }),
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

/**
 * Why kubelet's populator refuses a claim-backed pod volume (createVolumeSpec: getPVCExtractPV,
 * getPVSpec, then the volume mode against the pod's use), in its order and with its texts, or
 * undefined when it would add the volume. `key` is the claim's `namespace/name`.
 */
export function claimRefusal(state: ClusterState, key: string, claimName: string, c: ClusterPodClaim): string | undefined {
  const pvc = state.claims.get(key);
  if (pvc === undefined) return `failed to fetch PVC from API server: persistentvolumeclaims ${JSON.stringify(claimName)} not found`;
  if (pvc.deleting) return 'PVC is being deleted';
  if (pvc.phase !== 'Bound') return 'PVC is not bound';
  if (pvc.volumeName === '') return 'PVC has empty pvc.Spec.VolumeName';
  const pv = state.persistentVolumes.get(pvc.volumeName);
  if (pv === undefined) return `failed to fetch PV ${pvc.volumeName} from API server: persistentvolumes ${JSON.stringify(pvc.volumeName)} not found`;
  if (pv.claimRefUid === undefined) return `found PV object ${pv.name} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim`;
  if (pv.claimRefUid !== pvc.uid) return `found PV object ${pv.name} but its pv.Spec.ClaimRef.UID ${pv.claimRefUid} does not point to claim.UID ${pvc.uid}`;
  const mode = pv.volumeMode ?? 'Filesystem';
  if (c.use === 'mount' && mode !== 'Filesystem') return `volume ${c.volume} has volumeMode ${mode}, but is specified in volumeMounts`;
  if (c.use === 'device' && mode !== 'Block') return `volume ${c.volume} has volumeMode ${mode}, but is specified in volumeDevices`;
  return undefined;
}

/**
 * Volumes the pods bound to this node want, through their claims and PVs, by kubelet's
 * populator's rules: a terminated pod (Succeeded, Failed) wants nothing; a volume no container
 * mounts or uses as a device is not wanted (and not looked up); a claim kubelet refuses (not
 * found, being deleted, not Bound, its PV missing, unbound or bound to another claim uid, or a
 * volume mode that does not match the pod's use) is `unresolved` with kubelet's reason. A pod
 * being deleted still wants its volumes: kubelet keeps them until its containers stop.
 */
export function wantedVolumes(state: ClusterState): WantedVolumes {
  const byVolume = new Map<string, PodRef[]>();
  const unresolved: { pod: PodRef; claim: string; why: string }[] = [];
  for (const pod of state.pods) {
    if (pod.terminated) continue;
    const ref: PodRef = { uid: pod.uid, namespace: pod.namespace, name: pod.name };
    for (const c of pod.claims) {
      if (c.use === 'unused') continue;
      const key = `${pod.namespace}/${c.claimName}`;
      const why = claimRefusal(state, key, c.claimName, c);
      if (why !== undefined) {
        unresolved.push({ pod: ref, claim: key, why });
        continue;
      }
      const pv = state.persistentVolumes.get(state.claims.get(key)?.volumeName ?? '');
      if (pv?.driver === undefined || pv.volumeHandle === undefined) continue; // not a CSI volume
      const name = csiUniqueName(pv.driver, pv.volumeHandle);
      const list = byVolume.get(name) ?? [];
      if (!list.some((p) => p.uid === ref.uid)) list.push(ref);
      byVolume.set(name, list);
    }
  }
  return { byVolume, unresolved };
}
