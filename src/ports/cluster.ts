/**
 * The ClusterView port: what kubelet learns from the API server, reduced to what the volume
 * manager uses. Every method may reject (API server unreachable); the engine then unmounts and
 * unstages nothing that depends on the answer.
 */
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
