/**
 * volume.Spec: what kubelet knows of a volume, either a PersistentVolume or a pod's inline
 * volume (pkg/volume/plugins.go Spec). Only the fields nodevol uses are modelled.
 */

export type PersistentVolumeMode = 'Filesystem' | 'Block';
export type VolumeLifecycleMode = 'Persistent' | 'Ephemeral';

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
}

/** core/v1 CSIVolumeSource (inline ephemeral). */
export interface CSIVolumeSource {
  readonly driver: string;
  readonly readOnly?: boolean;
  readonly fsType?: string;
  readonly volumeAttributes?: Readonly<Record<string, string>>;
}

/** The parts of a core/v1 Volume (pod.spec.volumes[i]) a node uses. */
export interface InlineVolume {
  readonly name: string;
  readonly csi?: CSIVolumeSource;
}

export type Spec =
  | { readonly kind: 'persistent'; readonly persistentVolume: PersistentVolume; readonly readOnly: boolean }
  | { readonly kind: 'inline'; readonly volume: InlineVolume; readonly readOnly: boolean };

/** Spec.Name(): the PV name, or the pod-spec volume name for an inline volume. */
export function specName(spec: Spec): string {
  return spec.kind === 'persistent' ? spec.persistentVolume.name : spec.volume.name;
}

/** util.GetVolumeMode: Block only for a PV that says so; everything else is Filesystem. */
export function getVolumeMode(spec: Spec | undefined): PersistentVolumeMode {
  if (spec?.kind === 'persistent' && spec.persistentVolume.volumeMode === 'Block') return 'Block';
  return 'Filesystem';
}

/** The CSI source of a spec, with the handle when it is a PV. */
export function csiSourceOf(spec: Spec): { driver: string; volumeHandle: string | undefined } | undefined {
  if (spec.kind === 'persistent') {
    const csi = spec.persistentVolume.csi;
    return csi === undefined ? undefined : { driver: csi.driver, volumeHandle: csi.volumeHandle };
  }
  const csi = spec.volume.csi;
  return csi === undefined ? undefined : { driver: csi.driver, volumeHandle: undefined };
}

/** csi_plugin.go constructPVSourceSpec: a synthetic PV spec rebuilt from vol_data.json fields. */
export function constructPVSourceSpec(
  name: string,
  driver: string,
  volumeHandle: string,
  volumeMode: PersistentVolumeMode = 'Filesystem',
): Spec {
  return {
    kind: 'persistent',
    readOnly: false,
    persistentVolume: { name, volumeMode, csi: { driver, volumeHandle } },
  };
}

/** The inline spec ConstructVolumeSpec rebuilds for an ephemeral volume (no handle). */
export function constructInlineSpec(name: string, driver: string): Spec {
  return { kind: 'inline', readOnly: false, volume: { name, csi: { driver } } };
}
