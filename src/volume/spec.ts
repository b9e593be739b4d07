/**
 * volume.Spec: what kubelet knows of a volume, either a PersistentVolume or a pod's inline
 * volume (pkg/volume/plugins.go Spec). Only the fields nodevol uses are modelled.
 */
import type { CSIVolumeLifecycleMode, CSIVolumeSource, PersistentVolume, PersistentVolumeMode } from '../api/core.js';

export type VolumeLifecycleMode = CSIVolumeLifecycleMode;

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
