/**
 * Which Kubernetes objects one node's audit reads from the API server: only those its findings
 * (src/audit/clusterFindings.ts) and `nodevol recover` (src/audit/recover.ts) look at, by name
 * wherever the name is known, so that what an audit costs the API server depends on its node, not
 * on the size of the cluster. The reads, in order:
 *
 * 1. GET its Node (volumesInUse, volumesAttached);
 * 2. LIST its pods (field selector spec.nodeName, the one field selector of the six kinds the API
 *    server supports beyond metadata.name);
 * 3. GET each claim those pods name, then each PersistentVolume those claims are bound to (what
 *    a pod on this node wants: `wantedBy`, and recover's refusals);
 * 4. for the volumes staged here (the global mounts the walk found; each names its driver and
 *    volume handle): GET each one's CSIDriver, then, for those whose driver attaches (or that are
 *    not in volumesInUse), GET its VolumeAttachment to this node by its name, which the
 *    attach/detach controller and kubelet both derive as csi-<sha256(handle + driver + node)>
 *    (src/layout/names.ts getAttachmentName), and GET the PersistentVolume it names (which
 *    resolves its handle: `at-risk`);
 * 5. LIST every VolumeAttachment and PersistentVolume of the cluster only when a staged volume
 *    could be attached to another node (`attached-elsewhere`): when its driver attaches and it is
 *    not proven attached to this node alone. Proven means: its VolumeAttachment here says
 *    attached, and the PersistentVolume it names allows no second node by the attach/detach
 *    controller's own rule (access modes given, none of them ReadWriteMany or ReadOnlyMany; the
 *    controller attaches such a volume to another node only once it is detached here, and it is
 *    not detached while that VolumeAttachment exists). A VolumeAttachment names no node but its
 *    own, and the API server supports no field selector on VolumeAttachments but metadata.name,
 *    so no read short of the whole list can find one to a node whose name is not known.
 *
 * So a healthy node reads 2 + (claims) + (their PVs) + (drivers) + (staged volumes) objects by
 * name, however large the cluster; a node where a volume has lost its attachment here, or whose
 * staged volume may be multi-attached, also pays the two cluster-wide lists, and its findings
 * are then computed from the same objects a `--cluster-state` file holds. What this does not
 * look for, by design (docs/operating.md#what-the-audit-costs-the-api-server): a
 * VolumeAttachment to this node under another name than the derived one, a second attachment the
 * controller's rule forbids (made outside it), and a VolumeAttachment of a driver whose CSIDriver
 * says attachRequired: false.
 *
 * `recover` refuses a volume that two PersistentVolumes name, which no read by name can rule out:
 * it asks for every PersistentVolume (`everyPersistentVolume`), listed once.
 *
 * Engine code: it reads through the {@link ClusterObjectReader} port only.
 */
import type {
  CSIDriverObject,
  ClusterObjects,
  PersistentVolumeClaimObject,
  PersistentVolumeObject,
  VolumeAttachmentObject,
} from '../api/clusterObjects.js';
import { getAttachmentName } from '../layout/names.js';
import type { ClusterObjectReader } from '../ports/cluster.js';
import { mapConcurrently } from '../ports/concurrency.js';
import type { AuditReport } from './report.js';

/** A volume staged on this node, as the findings look it up in the cluster. */
export interface StagedVolume {
  readonly uniqueName: string;
  readonly driver: string;
  readonly volumeHandle: string;
}

/** The staged volumes the findings check: those with a global mount and a volume handle. */
export function stagedVolumes(report: AuditReport): StagedVolume[] {
  return report.volumes.flatMap((v) => (v.global !== null && v.volumeHandle !== null ? [{ uniqueName: v.uniqueName, driver: v.driver, volumeHandle: v.volumeHandle }] : []));
}

export interface ClusterReadRequest {
  readonly nodeName: string;
  readonly staged: readonly StagedVolume[];
  /** List every PersistentVolume (recover: two PVs naming one volume make it refuse the volume). */
  readonly everyPersistentVolume?: boolean;
}

export interface ClusterRead {
  readonly objects: ClusterObjects;
  /** Why every VolumeAttachment and PersistentVolume was listed; undefined when they were not. */
  readonly listedBecause?: string;
  /** The reads made, by what they asked for (`get persistentvolume`, `list volumeattachments` …). */
  readonly reads: Readonly<Record<string, number>>;
}

/** GETs in flight at once. */
export const READ_CONCURRENCY = 4;

const MULTI_ATTACH_MODES = new Set(['ReadWriteMany', 'ReadOnlyMany']);

/**
 * Whether the attach/detach controller refuses to attach this PersistentVolume to a second node
 * while it is attached to one: its access modes are given and none allows several nodes (kubelet's
 * IsMultiAttachAllowed, pkg/volume/util).
 */
export function multiAttachForbidden(pv: PersistentVolumeObject): boolean {
  const modes = pv.spec.accessModes ?? [];
  return modes.length > 0 && !modes.some((m) => MULTI_ATTACH_MODES.has(m));
}

const byName = <T>(a: T, b: T): number => (a < b ? -1 : a > b ? 1 : 0);

export async function readClusterObjects(reader: ClusterObjectReader, req: ClusterReadRequest): Promise<ClusterRead> {
  const reads: Record<string, number> = {};
  const count = (what: string): void => {
    reads[what] = (reads[what] ?? 0) + 1;
  };
  const { nodeName } = req;

  count('get node');
  const node = await reader.getNode(nodeName);
  count('list pods');
  const pods = await reader.listPodsOnNode(nodeName);

  const claimKeys = new Set<string>();
  for (const p of pods) for (const v of p.spec.volumes ?? []) if (v.persistentVolumeClaim?.claimName !== undefined) claimKeys.add(`${p.metadata.namespace}/${v.persistentVolumeClaim.claimName}`);
  const claimed = await mapConcurrently([...claimKeys].sort(byName), READ_CONCURRENCY, (key) => {
    const slash = key.indexOf('/');
    count('get persistentvolumeclaim');
    return reader.getPersistentVolumeClaim(key.slice(0, slash), key.slice(slash + 1));
  });
  const claims = claimed.filter((c): c is PersistentVolumeClaimObject => c !== undefined);

  /** PV name → the object, or null when the API server has none of that name. */
  const pvs = new Map<string, PersistentVolumeObject | null>();
  let everyPv: readonly PersistentVolumeObject[] | undefined;
  const listPvs = async (): Promise<readonly PersistentVolumeObject[]> => {
    count('list persistentvolumes');
    everyPv = await reader.listPersistentVolumes();
    for (const pv of everyPv) pvs.set(pv.metadata.name, pv);
    return everyPv;
  };
  const readPvs = async (names: Iterable<string>): Promise<void> => {
    const missing = [...new Set(names)].filter((n) => n !== '' && !pvs.has(n)).sort(byName);
    if (everyPv !== undefined) return; // listed: a name not in the list does not exist
    await mapConcurrently(missing, READ_CONCURRENCY, async (name) => {
      count('get persistentvolume');
      pvs.set(name, (await reader.getPersistentVolume(name)) ?? null);
    });
  };
  if (req.everyPersistentVolume === true) await listPvs();
  await readPvs(claims.map((c) => c.spec?.volumeName ?? ''));

  // The staged volumes, once each.
  const staged = [...new Map(req.staged.map((v) => [v.uniqueName, v])).values()];
  const drivers = [...new Set(staged.map((v) => v.driver))].sort(byName);
  const driverObjects = await mapConcurrently(drivers, READ_CONCURRENCY, (d) => {
    count('get csidriver');
    return reader.getCSIDriver(d);
  });
  const csiDrivers = driverObjects.filter((d): d is CSIDriverObject => d !== undefined);
  // kubelet's default for a driver without a CSIDriver object: it attaches.
  const attaches = new Map(drivers.map((d, i) => [d, driverObjects[i]?.spec?.attachRequired ?? true]));

  const inUse = new Set(node.status?.volumesInUse ?? []);
  const needAttachment = staged.filter((v) => attaches.get(v.driver) === true || !inUse.has(v.uniqueName));
  const here = await mapConcurrently(needAttachment, READ_CONCURRENCY, (v) => {
    count('get volumeattachment');
    return reader.getVolumeAttachment(getAttachmentName(v.volumeHandle, v.driver, nodeName));
  });
  const attachmentHere = new Map<string, VolumeAttachmentObject>();
  needAttachment.forEach((v, i) => {
    const va = here[i];
    if (va !== undefined) attachmentHere.set(v.uniqueName, va);
  });
  await readPvs([...attachmentHere.values()].map((va) => va.spec.source.persistentVolumeName ?? ''));

  /** Why `v` could be attached to another node, or undefined when it is proven attached here alone. */
  const mayBeElsewhere = (v: StagedVolume): string | undefined => {
    if (attaches.get(v.driver) !== true) return undefined;
    const va = attachmentHere.get(v.uniqueName);
    const name = getAttachmentName(v.volumeHandle, v.driver, nodeName);
    if (va === undefined) return `${v.uniqueName}: no VolumeAttachment ${name}`;
    if (va.status?.attached !== true || va.spec.attacher !== v.driver || va.spec.nodeName !== nodeName) return `${v.uniqueName}: VolumeAttachment ${name} does not say attached to ${nodeName} by ${v.driver}`;
    const pvName = va.spec.source.persistentVolumeName ?? '';
    const pv = pvs.get(pvName);
    if (pvName === '' || pv === undefined || pv === null) return `${v.uniqueName}: VolumeAttachment ${name} names no PersistentVolume that exists`;
    if (pv.spec.csi?.driver !== v.driver || pv.spec.csi.volumeHandle !== v.volumeHandle) return `${v.uniqueName}: PersistentVolume ${pvName} names another volume`;
    if (!multiAttachForbidden(pv)) return `${v.uniqueName}: PersistentVolume ${pvName} may be attached to several nodes (access modes ${(pv.spec.accessModes ?? []).join(', ') || 'none'})`;
    return undefined;
  };
  const listedBecause = staged.map(mayBeElsewhere).find((why) => why !== undefined);

  let volumeAttachments: readonly VolumeAttachmentObject[] = [...attachmentHere.values()];
  if (listedBecause !== undefined) {
    count('list volumeattachments');
    const [vas] = await Promise.all([reader.listVolumeAttachments(), everyPv === undefined ? listPvs() : Promise.resolve(everyPv)]);
    volumeAttachments = vas;
  }
  const persistentVolumes = everyPv ?? [...pvs.values()].filter((pv): pv is PersistentVolumeObject => pv !== null);
  return {
    objects: { nodes: [node], pods, claims, persistentVolumes, volumeAttachments, csiDrivers },
    ...(listedBecause !== undefined ? { listedBecause } : {}),
    reads,
  };
}
