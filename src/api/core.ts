/**
 * Kubernetes object types (core/v1 and storage/v1), reduced to the fields a node's volume
 * manager uses: the vocabulary shared by the ClusterView port (src/ports/cluster.ts), the volume
 * specs (src/volume/spec.ts) and the adapters that read manifests or the API server. Types only:
 * no behaviour, no imports.
 */

export type PersistentVolumeMode = 'Filesystem' | 'Block';

export interface SecretReference {
  readonly name: string;
  readonly namespace: string;
}

/** core/v1 CSIPersistentVolumeSource */
export interface CSIPersistentVolumeSource {
  readonly driver: string;
  readonly volumeHandle: string;
  readonly readOnly?: boolean;
  readonly fsType?: string;
  readonly volumeAttributes?: Readonly<Record<string, string>>;
  readonly nodeStageSecretRef?: SecretReference;
  readonly nodePublishSecretRef?: SecretReference;
}

/** core/v1 NodeSelectorRequirement (label requirements only; matchFields is not modelled). */
export interface NodeSelectorRequirement {
  readonly key: string;
  readonly operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist' | 'Gt' | 'Lt';
  readonly values?: readonly string[];
}

/** core/v1 VolumeNodeAffinity: the PV can be used on a node matching any of the terms. */
export interface VolumeNodeAffinity {
  readonly required?: { readonly nodeSelectorTerms: readonly { readonly matchExpressions?: readonly NodeSelectorRequirement[] }[] };
}

/** The parts of core/v1 PersistentVolume a node uses. */
export interface PersistentVolume {
  readonly name: string;
  readonly csi?: CSIPersistentVolumeSource;
  readonly volumeMode?: PersistentVolumeMode;
  readonly accessModes?: readonly string[];
  readonly mountOptions?: readonly string[];
  /** spec.nodeAffinity, checked by MountVolume / MapVolume against the node's labels. */
  readonly nodeAffinity?: VolumeNodeAffinity;
  /**
   * spec.claimRef: the claim the PV is bound to. kubelet mounts the PV for a claim only when its
   * uid is the claim's (namespace and name are not compared); absent means not yet bound.
   */
  readonly claimRef?: { readonly namespace: string; readonly name: string; readonly uid: string };
}

/** core/v1 CSIVolumeSource (inline ephemeral). */
export interface CSIVolumeSource {
  readonly driver: string;
  readonly readOnly?: boolean;
  readonly fsType?: string;
  readonly volumeAttributes?: Readonly<Record<string, string>>;
  /** A Secret in the pod's namespace (LocalObjectReference). */
  readonly nodePublishSecretRef?: { readonly name: string };
}

export interface PodVolumeSource {
  /** pod.spec.volumes[i].name */
  readonly name: string;
  readonly persistentVolumeClaim?: { readonly claimName: string; readonly readOnly?: boolean };
  readonly csi?: CSIVolumeSource;
}

/** core/v1 PodPhase. */
export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';

export interface Pod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly nodeName: string;
  readonly volumes: readonly PodVolumeSource[];
  /**
   * The spec.volumes names some container (init, regular or ephemeral) lists in volumeMounts:
   * what kubelet's populator reads through GetPodVolumeNames. A volume in neither this list nor
   * volumeDevices is unused, and kubelet skips it.
   */
  readonly volumeMounts: readonly string[];
  /** The spec.volumes names some container (init, regular or ephemeral) lists in volumeDevices (raw block). */
  readonly volumeDevices: readonly string[];
  /**
   * status.phase; absent reads as not terminal, as kubelet reads an empty phase. Succeeded and
   * Failed are terminal: the pod's containers have stopped.
   */
  readonly phase?: PodPhase;
  /** metadata.deletionTimestamp (RFC 3339), when the pod is being deleted; only its presence matters. */
  readonly deletionTimestamp?: string;
  /** Pod fsGroup (securityContext.fsGroup), when set. */
  readonly fsGroup?: number;
  /** spec.serviceAccountName. */
  readonly serviceAccountName?: string;
}

export interface PersistentVolumeClaim {
  readonly namespace: string;
  readonly name: string;
  /** metadata.uid, which the bound PV's claimRef.uid must name. */
  readonly uid: string;
  /** spec.volumeName: the bound PV; empty while unbound. */
  readonly volumeName: string;
  /** spec.volumeMode; the node takes the mode from the PV and never reads this one (as kubelet). */
  readonly volumeMode?: PersistentVolumeMode;
  /** status.phase: kubelet mounts only a Bound claim. */
  readonly phase: 'Pending' | 'Bound' | 'Lost';
  /** metadata.deletionTimestamp (RFC 3339), when the claim is being deleted: kubelet refuses it. */
  readonly deletionTimestamp?: string;
}

/** storage/v1 VolumeLifecycleMode. */
export type CSIVolumeLifecycleMode = 'Persistent' | 'Ephemeral';

/** storage/v1 TokenRequest: a service account token kubelet requests for NodePublishVolume. */
export interface CSITokenRequest {
  /** The token's audience; '' means the API server's own audiences. */
  readonly audience: string;
  readonly expirationSeconds?: number;
}

export interface CSIDriverInfo {
  readonly name: string;
  /** spec.attachRequired; kubelet treats a missing CSIDriver object as attach required. */
  readonly attachRequired: boolean;
  /** spec.podInfoOnMount: pod information goes into NodePublishVolume's volume_context (default false). */
  readonly podInfoOnMount?: boolean;
  /**
   * spec.volumeLifecycleModes: the modes SetUp accepts. Absent means what the API server defaults
   * it to, [Persistent].
   */
  readonly volumeLifecycleModes?: readonly CSIVolumeLifecycleMode[];
  /** spec.tokenRequests: service account tokens for NodePublishVolume's volume_context. */
  readonly tokenRequests?: readonly CSITokenRequest[];
  /** spec.requiresRepublish (default false). */
  readonly requiresRepublish?: boolean;
  /**
   * spec.serviceAccountTokenInSecrets (Kubernetes 1.35, default false): the tokens go into
   * NodePublishVolume's secrets instead of its volume_context.
   */
  readonly serviceAccountTokenInSecrets?: boolean;
}

/** What kubelet asks the API server for (authentication/v1 TokenRequest spec, bound to a pod). */
export interface ServiceAccountTokenRequest {
  readonly namespace: string;
  readonly serviceAccountName: string;
  /** [audience], or none for the API server's own audiences. */
  readonly audiences: readonly string[];
  readonly expirationSeconds?: number;
  /** spec.boundObjectRef: the pod (apiVersion v1, kind Pod). */
  readonly boundPod: { readonly name: string; readonly uid: string };
}

/** authentication/v1 TokenRequestStatus. */
export interface TokenRequestStatus {
  readonly token: string;
  /** RFC 3339, as metav1.Time marshals it ("2026-01-01T00:00:00Z"). */
  readonly expirationTimestamp: string;
}

/** The parts of storage/v1 VolumeAttachment kubelet's CSI plugin reads. */
export interface VolumeAttachmentInfo {
  /** csi-<sha256(handle + driver + node)> */
  readonly name: string;
  /** status.attached */
  readonly attached: boolean;
  /** status.attachmentMetadata: the publish_context of NodeStageVolume / NodePublishVolume. */
  readonly attachmentMetadata: Readonly<Record<string, string>>;
}

/** core/v1 Secret data, each value as kubelet hands it to a driver (string(bytes)). */
export type SecretData = Readonly<Record<string, string>>;

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
