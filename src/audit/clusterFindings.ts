/**
 * What the audit adds when it knows the cluster's view (`--cluster-state`, or the API server):
 *
 * - **at-risk**: staged on this node, attached to it (node.status.volumesAttached or a
 *   VolumeAttachment), but absent from node.status.volumesInUse: the attach/detach controller
 *   may detach it now, while it is still staged here.
 * - **attached-elsewhere**: staged here while a VolumeAttachment says the volume is attached to
 *   another node: the double attach of kubernetes#121937 has happened.
 * - **pod-gone**: a pod volume directory whose pod no longer exists in the cluster.
 *
 * Each finding carries its reason. Pure: the report and the state in, findings out.
 */
import type { AuditReport } from './report.js';
import { wantedVolumes, type ClusterState, type PodRef } from './clusterState.js';

import type { ClusterFindingKind } from './findingKinds.js';
export { CLUSTER_FINDING_KINDS, type ClusterFindingKind } from './findingKinds.js';

export interface ClusterFinding {
  readonly kind: ClusterFindingKind;
  /** The volume (at-risk, attached-elsewhere; pod-gone when the dir reconstructs). */
  readonly uniqueName?: string;
  readonly driver?: string;
  /** pod-gone: the pod UID and its volume directory. */
  readonly podUID?: string;
  readonly path?: string;
  /** attached-elsewhere: the other node(s). */
  readonly nodes?: readonly string[];
  readonly reason: string;
}

/** The `cluster` section of `nodevol audit -o json` (present only when the cluster is known). */
export interface ClusterAudit {
  readonly source: string;
  readonly nodeName: string;
  readonly volumesInUse: readonly string[];
  readonly volumesAttached: readonly string[];
  /** Pod UID → namespace/name, for every pod the report names that the cluster knows. */
  readonly pods: Readonly<Record<string, { readonly namespace: string; readonly name: string }>>;
  /** Unique volume name → pods bound to this node that want it. */
  readonly wantedBy: Readonly<Record<string, readonly PodRef[]>>;
  readonly findings: readonly ClusterFinding[];
}

export function clusterAudit(report: AuditReport, state: ClusterState): ClusterAudit {
  const findings: ClusterFinding[] = [];
  const inUse = new Set(state.volumesInUse);
  const attachedHere = new Set(state.volumesAttached);

  for (const v of report.volumes) {
    if (v.global === null || v.volumeHandle === null) continue;
    const vas = state.volumeAttachments.filter((va) => va.attached && va.attacher === v.driver && va.volumeHandle === v.volumeHandle);
    const vaHere = vas.filter((va) => va.nodeName === state.nodeName);
    const elsewhere = vas.filter((va) => va.nodeName !== state.nodeName);
    const isAttachedHere = attachedHere.has(v.uniqueName) || vaHere.length > 0;
    if (isAttachedHere && !inUse.has(v.uniqueName)) {
      const how = [
        ...(attachedHere.has(v.uniqueName) ? ['node.status.volumesAttached'] : []),
        ...vaHere.map((va) => `VolumeAttachment ${va.name}`),
      ].join(' and ');
      const why =
        v.verdict === 'orphaned'
          ? 'kubelet will never add it back (verdict orphaned), so NodeUnstageVolume never runs'
          : `kubelet ${v.verdict === 'tracked' ? 'tracks' : 'recovers'} it and should report it again`;
      findings.push({
        kind: 'at-risk',
        uniqueName: v.uniqueName,
        driver: v.driver,
        reason: `staged at ${v.global.deviceMountPath} and attached to ${state.nodeName} (${how}) but absent from node.status.volumesInUse: the attach/detach controller may detach it now; ${why}`,
      });
    }
    if (elsewhere.length > 0) {
      const nodes = [...new Set(elsewhere.map((va) => va.nodeName))].sort();
      findings.push({
        kind: 'attached-elsewhere',
        uniqueName: v.uniqueName,
        driver: v.driver,
        nodes,
        reason: `staged here at ${v.global.deviceMountPath} while ${elsewhere.map((va) => `VolumeAttachment ${va.name} says it is attached to ${va.nodeName}`).join(', ')}: two nodes may write to one device (kubernetes#121937)`,
      });
    }
  }

  const seen = new Set<string>();
  const podDirs: { uid: string; path: string; uniqueName?: string; driver?: string }[] = [];
  for (const v of report.volumes) for (const p of v.pods) podDirs.push({ uid: p.uid, path: p.volumePath, uniqueName: v.uniqueName, driver: v.driver });
  for (const f of report.failed) podDirs.push({ uid: f.podUID, path: f.path });
  for (const d of podDirs) {
    if (state.podUIDs.has(d.uid) || seen.has(d.path)) continue;
    seen.add(d.path);
    findings.push({
      kind: 'pod-gone',
      podUID: d.uid,
      path: d.path,
      ...(d.uniqueName !== undefined ? { uniqueName: d.uniqueName } : {}),
      ...(d.driver !== undefined ? { driver: d.driver } : {}),
      reason: `pod ${d.uid} no longer exists in the cluster but its volume directory ${d.path} is still on this node`,
    });
  }

  const pods: Record<string, { namespace: string; name: string }> = {};
  for (const p of state.pods) pods[p.uid] = { namespace: p.namespace, name: p.name };
  const wanted = wantedVolumes(state);
  const wantedBy: Record<string, readonly PodRef[]> = {};
  for (const [name, refs] of [...wanted.byVolume].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) wantedBy[name] = refs;
  return {
    source: state.source,
    nodeName: state.nodeName,
    volumesInUse: state.volumesInUse,
    volumesAttached: state.volumesAttached,
    pods,
    wantedBy,
    findings,
  };
}
