/**
 * The ClusterView port: what kubelet learns from the API server, reduced to what the volume
 * manager uses. Every method may reject (API server unreachable); the engine then unmounts and
 * unstages nothing that depends on the answer.
 *
 * The ClusterObjectReader port: the audit's reads of the Kubernetes objects themselves, one
 * request each (see {@link ClusterObjectReader}).
 */
import type {
  CSIDriverObject,
  NodeObject,
  PersistentVolumeClaimObject,
  PersistentVolumeObject,
  PodObject,
  VolumeAttachmentObject,
} from '../api/clusterObjects.js';
import type {
  CSIDriverInfo,
  NodeStatus,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  SecretData,
  ServiceAccountTokenRequest,
  TokenRequestStatus,
  VolumeAttachmentInfo,
} from '../api/core.js';

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
   * The VolumeAttachment of that name (undefined: not found), for the publish_context of an
   * attachable volume. A view without this method holds no VolumeAttachments (the simulator's):
   * the publish_context is then empty.
   */
  readonly getVolumeAttachment?: (name: string) => Promise<VolumeAttachmentInfo | undefined>;
  /**
   * The data of a Secret (undefined: not found), for a PV's nodeStageSecretRef /
   * nodePublishSecretRef or an inline volume's nodePublishSecretRef. A view without this method
   * holds no Secrets: a volume that names one fails to mount, as kubelet's does when the Secret
   * cannot be read.
   */
  readonly getSecret?: (namespace: string, name: string) => Promise<SecretData | undefined>;
  /**
   * A TokenRequest for a pod's service account (kubelet's service account token getter), for
   * CSIDrivers with tokenRequests. Rejects when the token cannot be issued; a view without this
   * method cannot issue tokens at all, and SetUp of such a driver's volumes fails as kubelet's
   * does when its TokenRequest fails.
   */
  readonly requestServiceAccountToken?: (request: ServiceAccountTokenRequest) => Promise<TokenRequestStatus>;
  /**
   * Optional, like an informer's resource version: a value that changes whenever listPods or the
   * claim, volume or CSIDriver getters could answer differently than at the last listPods. The
   * populator skips re-resolving a pod it resolved under the same value from the same Pod object;
   * a view without it gets every pod resolved on every pass.
   */
  readonly objectsVersion?: () => number;
  /**
   * Optional, for a view that watches its sources: calls `listener` whenever a watched source
   * changed (listPods may then answer differently). `signalsEveryChange()` tells whether, right
   * now, every change is signalled that way; while it is false, only asking tells.
   */
  readonly onChange?: (listener: () => void) => void;
  readonly signalsEveryChange?: () => boolean;
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

/**
 * The Kubernetes objects the audit reads from the API server, each checked by the schemas of
 * src/api/clusterObjects.ts, one request per call (a list: every page of it). The audit decides
 * which to make (src/audit/clusterReads.ts); src/adapters/node/clusterApi.ts makes them. Every
 * method may reject: the audit then gives no verdict. `undefined` is "not found" (HTTP 404).
 */
export interface ClusterObjectReader {
  /** Where the objects come from, for messages (the API server's URL). */
  readonly source: string;
  /** GET nodes/<name>; not found rejects (no verdict without the node's status). */
  getNode(name: string): Promise<NodeObject>;
  /** LIST pods with the field selector spec.nodeName=<nodeName>. */
  listPodsOnNode(nodeName: string): Promise<readonly PodObject[]>;
  getPersistentVolumeClaim(namespace: string, name: string): Promise<PersistentVolumeClaimObject | undefined>;
  getPersistentVolume(name: string): Promise<PersistentVolumeObject | undefined>;
  getVolumeAttachment(name: string): Promise<VolumeAttachmentObject | undefined>;
  getCSIDriver(name: string): Promise<CSIDriverObject | undefined>;
  /** Every PersistentVolume of the cluster. */
  listPersistentVolumes(): Promise<readonly PersistentVolumeObject[]>;
  /** Every VolumeAttachment of the cluster. */
  listVolumeAttachments(): Promise<readonly VolumeAttachmentObject[]>;
}
