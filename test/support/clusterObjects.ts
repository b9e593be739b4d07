/**
 * Kubernetes objects as the API server returns them (and as `kubectl get … -o json` prints
 * them), for tests of the audit against the cluster: Node, Pod, PersistentVolume,
 * PersistentVolumeClaim, VolumeAttachment, CSIDriver, and the List that holds them.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { createHash } from 'node:crypto';

export type KubeObject = Record<string, unknown> & { readonly kind: string; readonly apiVersion: string; readonly metadata: Record<string, unknown> };

function meta(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, uid: `uid-${name}`, resourceVersion: '1', creationTimestamp: '2026-11-30T10:00:00Z', ...extra };
}

export function node(name: string, status: { volumesInUse?: string[]; volumesAttached?: string[] } = {}): KubeObject {
  return {
    kind: 'Node',
    apiVersion: 'v1',
    metadata: meta(name, { labels: { 'kubernetes.io/hostname': name } }),
    spec: { podCIDR: '10.244.0.0/24' },
    status: {
      conditions: [{ type: 'Ready', status: 'True', lastHeartbeatTime: '2026-11-30T10:00:00Z', lastTransitionTime: '2026-11-30T10:00:00Z', reason: 'KubeletReady', message: 'kubelet is posting ready status' }],
      ...(status.volumesInUse !== undefined ? { volumesInUse: status.volumesInUse } : {}),
      ...(status.volumesAttached !== undefined ? { volumesAttached: status.volumesAttached.map((n) => ({ name: n, devicePath: '' })) } : {}),
    },
  };
}

export interface PodSpecOptions {
  readonly namespace?: string;
  readonly uid?: string;
  readonly nodeName: string;
  readonly claims?: readonly string[];
  readonly phase?: string;
  /** metadata.deletionTimestamp: the pod is being deleted. */
  readonly deletionTimestamp?: string;
  /** The claims (by index in `claims`) no container mounts: in spec.volumes only. */
  readonly unused?: readonly number[];
  /** The claims (by index in `claims`) an init container uses as a raw block device (volumeDevices) instead of mounting. */
  readonly devices?: readonly number[];
}

export function pod(name: string, o: PodSpecOptions): KubeObject {
  const namespace = o.namespace ?? 'default';
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: meta(name, { namespace, uid: o.uid ?? `uid-${namespace}-${name}`, ...(o.deletionTimestamp !== undefined ? { deletionTimestamp: o.deletionTimestamp } : {}) }),
    spec: {
      nodeName: o.nodeName,
      containers: [
        {
          name: 'app',
          image: 'busybox',
          volumeMounts: (o.claims ?? []).flatMap((c, i) => (o.unused?.includes(i) === true || o.devices?.includes(i) === true ? [] : [{ name: `vol-${i}`, mountPath: `/data/${c}` }])),
        },
      ],
      ...(o.devices !== undefined ? { initContainers: [{ name: 'init', image: 'busybox', volumeDevices: o.devices.map((i) => ({ name: `vol-${i}`, devicePath: `/dev/xvd${i}` })) }] } : {}),
      volumes: [
        ...(o.claims ?? []).map((c, i) => ({ name: `vol-${i}`, persistentVolumeClaim: { claimName: c } })),
        { name: 'kube-api-access', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } },
      ],
    },
    status: { phase: o.phase ?? 'Running' },
  };
}

/**
 * A CSI PV; with `claim`, bound to it: claimRef names the claim and carries its uid (by default
 * `uid-<name>`, the uid {@link claim} gives it), as the PV controller writes it.
 */
export function persistentVolume(name: string, driver: string, volumeHandle: string, claim?: { namespace: string; name: string; uid?: string }, volumeMode = 'Filesystem'): KubeObject {
  return {
    kind: 'PersistentVolume',
    apiVersion: 'v1',
    metadata: meta(name),
    spec: {
      accessModes: ['ReadWriteOnce'],
      capacity: { storage: '1Gi' },
      csi: { driver, volumeHandle, fsType: 'ext4' },
      persistentVolumeReclaimPolicy: 'Delete',
      volumeMode,
      ...(claim !== undefined ? { claimRef: { kind: 'PersistentVolumeClaim', namespace: claim.namespace, name: claim.name, uid: claim.uid ?? `uid-${claim.name}` } } : {}),
    },
    status: { phase: claim !== undefined ? 'Bound' : 'Available' },
  };
}

/** A claim (uid `uid-<name>`), Bound when it names a PV; `o` overrides its phase or marks it being deleted. */
export function claim(name: string, volumeName: string, namespace = 'default', o: { phase?: string; deletionTimestamp?: string } = {}): KubeObject {
  return {
    kind: 'PersistentVolumeClaim',
    apiVersion: 'v1',
    metadata: meta(name, { namespace, ...(o.deletionTimestamp !== undefined ? { deletionTimestamp: o.deletionTimestamp } : {}) }),
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } }, volumeName, volumeMode: 'Filesystem' },
    status: { phase: o.phase ?? (volumeName === '' ? 'Pending' : 'Bound') },
  };
}

/** The VolumeAttachment the external-attacher manages: named csi-<sha256(handle+driver+node)>. */
export function volumeAttachment(driver: string, volumeHandle: string, pvName: string, nodeName: string, attached = true): KubeObject {
  const name = `csi-${createHash('sha256').update(`${volumeHandle}${driver}${nodeName}`).digest('hex')}`;
  return {
    kind: 'VolumeAttachment',
    apiVersion: 'storage.k8s.io/v1',
    metadata: meta(name),
    spec: { attacher: driver, nodeName, source: { persistentVolumeName: pvName } },
    status: { attached },
  };
}

export function csiDriver(name: string, attachRequired = true): KubeObject {
  return { kind: 'CSIDriver', apiVersion: 'storage.k8s.io/v1', metadata: meta(name), spec: { attachRequired, podInfoOnMount: false } };
}

/** What `kubectl get nodes,pods,pv,pvc,volumeattachments,csidrivers -A -o json` prints. */
export function list(items: readonly KubeObject[]): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '' }, items };
}

/** A typed list as the API server returns it for one resource (e.g. PodList). */
export function typedList(kind: string, apiVersion: string, items: readonly KubeObject[]): Record<string, unknown> {
  return { kind, apiVersion, metadata: { resourceVersion: '12345' }, items };
}
