/**
 * The ClusterView port: what kubelet learns from the API server, reduced to what the volume
 * manager uses. Every method may reject (API server unreachable); the engine then unmounts and
 * unstages nothing that depends on the answer.
 */
import type { CSIVolumeSource, PersistentVolume, PersistentVolumeMode } from '../volume/spec.js';

export interface PodVolumeSource {
  /** pod.spec.volumes[i].name */
  readonly name: string;
  readonly persistentVolumeClaim?: { readonly claimName: string; readonly readOnly?: boolean };
  readonly csi?: CSIVolumeSource;
}

export interface Pod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly nodeName: string;
  readonly volumes: readonly PodVolumeSource[];
  /** Volume names the pod's containers use as raw block devices (volumeDevices). */
  readonly blockVolumeNames?: readonly string[];
  /** Pod fsGroup (securityContext.fsGroup), when set. */
  readonly fsGroup?: number;
  /** spec.serviceAccountName. */
  readonly serviceAccountName?: string;
}

export interface PersistentVolumeClaim {
  readonly namespace: string;
  readonly name: string;
  /** spec.volumeName: the bound PV; empty while unbound. */
  readonly volumeName: string;
  readonly volumeMode?: PersistentVolumeMode;
}

export interface CSIDriverInfo {
  readonly name: string;
  /** spec.attachRequired; kubelet treats a missing CSIDriver object as attach required. */
  readonly attachRequired: boolean;
  /** spec.podInfoOnMount: pod information goes into NodePublishVolume's volume_context (default false). */
  readonly podInfoOnMount?: boolean;
}

export interface AttachedVolume {
  readonly name: string;
  readonly devicePath: string;
}

export interface NodeStatus {
  readonly volumesAttached: readonly AttachedVolume[];
  readonly volumesInUse: readonly string[];
  /** The Node's metadata.labels (kubelet GetNodeLabels); absent when the view does not know them. */
  readonly labels?: Readonly<Record<string, string>>;
}

export interface ClusterView {
  /** Pods bound to this node (spec.nodeName), in no particular order. */
  listPods(): Promise<readonly Pod[]>;
  getPersistentVolumeClaim(namespace: string, name: string): Promise<PersistentVolumeClaim | undefined>;
  getPersistentVolume(name: string): Promise<PersistentVolume | undefined>;
  /** undefined when no CSIDriver object exists for the driver. */
  getCSIDriver(name: string): Promise<CSIDriverInfo | undefined>;
  /** This node's status; rejects when the API server cannot be reached. */
  getNodeStatus(): Promise<NodeStatus>;
  /** Writes node.status.volumesInUse. */
  setVolumesInUse(names: readonly string[]): Promise<void>;
  /**
   * Optional, like an informer's resource version: a value that changes whenever listPods or the
   * claim, volume or CSIDriver getters could answer differently than at the last listPods. The
   * populator skips re-resolving a pod it resolved under the same value from the same Pod object;
   * a view without it gets every pod resolved on every pass.
   */
  readonly objectsVersion?: () => number;
}

/** A cluster view that never answers: what the audit and reading-side code get. */
export const unreachableCluster: ClusterView = {
  listPods: () => Promise.reject(new Error('no API server: cluster view unavailable')),
  getPersistentVolumeClaim: () => Promise.reject(new Error('no API server: cluster view unavailable')),
  getPersistentVolume: () => Promise.reject(new Error('no API server: cluster view unavailable')),
  getCSIDriver: () => Promise.reject(new Error('no API server: cluster view unavailable')),
  getNodeStatus: () => Promise.reject(new Error('no API server: cluster view unavailable')),
  setVolumesInUse: () => Promise.reject(new Error('no API server: cluster view unavailable')),
};
