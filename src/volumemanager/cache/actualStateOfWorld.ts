/**
 * ActualStateOfWorld (pkg/kubelet/volumemanager/cache/actual_state_of_world.go): which volumes are attached to this node, whether their device is globally
 * mounted, and which pods have them mounted, each possibly "uncertain".
 *
 * Books only: no I/O, and every getter returns fresh copies, so a caller can never change the
 * state except through the Mark... methods. Missing pod / missing volume behaviour is stated on
 * each method.
 */
import { withoutStackTrace } from '../../ports/fs.js';
import type { UniquePodName, UniqueVolumeName } from '../../layout/names.js';
import { specName, type Spec } from '../../volume/spec.js';
import type { Attachability, DeviceMountState, VolumeMountState } from '../../operationexecutor/states.js';
import type { ActualStateOfWorldAttacherUpdater, ActualStateOfWorldMounterUpdater, AttachedVolume, MarkVolumeOpts, MountedVolume } from '../../operationexecutor/actualStateOfWorldUpdater.js';

/** DeviceMayBeMounted: globally mounted or uncertain. */
export function deviceMayBeMounted(v: AttachedVolume): boolean {
  return v.deviceMountState === 'DeviceGloballyMounted' || v.deviceMountState === 'DeviceMountUncertain';
}

/**
 * Thrown by podExistsInVolume for a volume not (yet) in the attached list. Expected: the
 * reconciler meets one on every pass for every volume still waiting to attach, and only
 * classifies it (isVolumeNotAttachedError), so it is built without a stack trace.
 */
export class VolumeNotAttachedError extends Error {
  override readonly name = 'VolumeNotAttachedError';
  constructor(readonly volumeName: string, readonly podName: string) {
    super(`volumeName=${JSON.stringify(volumeName)} does not exist in the list of attached volumes`);
  }
}
export function isVolumeNotAttachedError(err: unknown): err is VolumeNotAttachedError {
  return err instanceof VolumeNotAttachedError;
}

export class AswError extends Error {
  override readonly name = 'AswError';
}

export interface ActualStateOfWorld extends ActualStateOfWorldMounterUpdater, ActualStateOfWorldAttacherUpdater {
  /** Adds the volume with attachability Uncertain (or only updates devicePath if it exists). */
  addAttachUncertainReconstructedVolume(volumeName: UniqueVolumeName, spec: Spec, pluginName: string, devicePath: string): void;
  /**
   * Adds the pod as VolumeMountUncertain and records it as found during reconstruction. Returns
   * false (no change) when the volume is absent or the pod is already Mounted or Uncertain.
   */
  checkAndMarkVolumeAsUncertainViaReconstruction(opts: MarkVolumeOpts): boolean;
  /** Removes a volume with no pods; throws when pods remain. Absent volume: no-op. */
  deleteVolume(volumeName: UniqueVolumeName): void;
  /** Only while the device is Uncertain. Absent volume: no-op. */
  updateReconstructedDevicePath(volumeName: UniqueVolumeName, devicePath: string): void;
  /** Only while attachability is Uncertain. Absent volume: no-op. */
  updateReconstructedVolumeAttachability(volumeName: UniqueVolumeName, attachable: boolean): void;
  /**
   * Whether the pod has the volume mounted for sure. Throws VolumeNotAttachedError when the
   * volume is absent; false (with the devicePath) when the pod is absent or only Uncertain, so
   * that the reconciler mounts again.
   */
  podExistsInVolume(podName: UniquePodName, volumeName: UniqueVolumeName): { exists: boolean; devicePath: string };
  /** Whether the pod has no entry (Mounted or Uncertain) for the volume. */
  podRemovedFromVolume(podName: UniquePodName, volumeName: UniqueVolumeName): boolean;
  volumeExists(volumeName: UniqueVolumeName): boolean;
  volumeExistsWithSpecName(podName: UniquePodName, specName: string): boolean;
  getAttachedVolume(volumeName: UniqueVolumeName): AttachedVolume | undefined;
  getAttachedVolumes(): AttachedVolume[];
  /** Pods in state Mounted only. */
  getMountedVolumes(): MountedVolume[];
  /** Pods in state Mounted or Uncertain. */
  getAllMountedVolumes(): MountedVolume[];
  getPossiblyMountedVolumesForPod(podName: UniquePodName): MountedVolume[];
  /** Volumes with device state GloballyMounted. */
  getGloballyMountedVolumes(): AttachedVolume[];
  /** Volumes with no pod entries, whatever their device state. */
  getUnmountedVolumes(): AttachedVolume[];
  /** Grows with every change to the books; the same value means nothing changed (for caches of derived values). */
  generation(): number;
}

interface PodRecord {
  podName: UniquePodName;
  podUID: string;
  volumeSpec: Spec;
  outerVolumeSpecName: string;
  innerVolumeSpecName: string;
  volumeMountState: VolumeMountState;
  seLinuxMountContext: string;
}

interface VolumeRecord {
  readonly volumeName: UniqueVolumeName;
  spec: Spec;
  readonly pluginName: string;
  attachability: Attachability;
  deviceMountState: DeviceMountState;
  devicePath: string;
  deviceMountPath: string;
  /** undefined = not known yet. */
  seLinuxMountContext: string | undefined;
  /** Keyed by pod name; only pods in Mounted or Uncertain state are kept. */
  readonly mountedPods: Map<UniquePodName, PodRecord>;
}

export function createActualStateOfWorld(): ActualStateOfWorld {
  return new ActualStateOfWorldImpl();
}

class ActualStateOfWorldImpl implements ActualStateOfWorld {
  private readonly volumes = new Map<UniqueVolumeName, VolumeRecord>();
  /**
   * Index: pod → the volumes holding an entry for it (the same records as `volumes`), so that a
   * per-pod question costs the pod's volumes, not every volume on the node.
   */
  private readonly volumesByPod = new Map<UniquePodName, Map<UniqueVolumeName, VolumeRecord>>();
  /** `volumes` sorted by name; undefined after a volume was added or removed. */
  private sorted: VolumeRecord[] | undefined;
  /** Bumped by every method that may change the books. */
  private changes = 0;

  generation(): number {
    return this.changes;
  }
  /** volume → pod → podUID, for pods added by reconstruction and not yet mounted for sure. */
  private readonly foundDuringReconstruction = new Map<UniqueVolumeName, Map<UniquePodName, string>>();

  // ---- attach side ----

  markVolumeAsAttached(volumeName: UniqueVolumeName, spec: Spec, pluginName: string, devicePath: string, attachable: boolean): void {
    this.addVolume(volumeName, spec, pluginName, devicePath, attachable ? 'True' : 'False');
  }

  addAttachUncertainReconstructedVolume(volumeName: UniqueVolumeName, spec: Spec, pluginName: string, devicePath: string): void {
    this.addVolume(volumeName, spec, pluginName, devicePath, 'Uncertain');
  }

  /** A known volume only gets its devicePath overwritten: state, attachability and pods stay. */
  private addVolume(volumeName: UniqueVolumeName, spec: Spec, pluginName: string, devicePath: string, attachability: Attachability): void {
    this.changes++;
    const existing = this.volumes.get(volumeName);
    if (existing !== undefined) {
      existing.devicePath = devicePath;
      return;
    }
    this.sorted = undefined;
    this.volumes.set(volumeName, {
      volumeName,
      spec,
      pluginName,
      attachability,
      deviceMountState: 'DeviceNotMounted',
      devicePath,
      deviceMountPath: '',
      seLinuxMountContext: undefined,
      mountedPods: new Map(),
    });
  }

  markVolumeAsDetached(volumeName: UniqueVolumeName): void {
    this.deleteVolume(volumeName);
  }

  deleteVolume(volumeName: UniqueVolumeName): void {
    this.changes++;
    const v = this.volumes.get(volumeName);
    if (v === undefined) return;
    if (v.mountedPods.size > 0) {
      throw new AswError(`failed to DeleteVolume ${JSON.stringify(volumeName)}, it still has ${v.mountedPods.size} mountedPods`);
    }
    this.volumes.delete(volumeName);
    this.sorted = undefined;
    this.foundDuringReconstruction.delete(volumeName);
  }

  // ---- pod mounts ----

  markVolumeAsMounted(opts: MarkVolumeOpts): void {
    this.addPodToVolume({ ...opts, volumeMountState: 'VolumeMounted' });
  }

  markVolumeMountAsUncertain(opts: MarkVolumeOpts): void {
    this.addPodToVolume({ ...opts, volumeMountState: 'VolumeMountUncertain' });
  }

  /**
   * kubelet's AddPodToVolume. Throws when the volume is absent. A new pod, or one whose mount is
   * uncertain (a reconstructed record needs the newer information), gets a whole new record; a
   * mounted pod keeps its record and only its state changes. A pod reaching VolumeMounted leaves
   * foundDuringReconstruction.
   */
  private addPodToVolume(opts: MarkVolumeOpts): void {
    this.changes++;
    const v = this.volumes.get(opts.volumeName);
    if (v === undefined) {
      throw new AswError(`no volume with the name ${JSON.stringify(opts.volumeName)} exists in the list of attached volumes`);
    }
    const existing = v.mountedPods.get(opts.podName);
    if (existing === undefined || existing.volumeMountState === 'VolumeMountUncertain') {
      v.mountedPods.set(opts.podName, {
        podName: opts.podName,
        podUID: opts.podUID,
        volumeSpec: opts.volumeSpec ?? v.spec,
        outerVolumeSpecName: opts.outerVolumeSpecName,
        innerVolumeSpecName: opts.innerVolumeSpecName,
        volumeMountState: opts.volumeMountState,
        seLinuxMountContext: opts.seLinuxMountContext,
      });
      this.indexPod(opts.podName, v);
    } else {
      existing.volumeMountState = opts.volumeMountState;
    }
    if (opts.volumeMountState === 'VolumeMounted') {
      this.foundDuringReconstruction.get(opts.volumeName)?.delete(opts.podName);
    }
  }

  /** kubelet's DeletePodFromVolume: throws when the volume is absent; an absent pod is a no-op. */
  markVolumeAsUnmounted(podName: UniquePodName, volumeName: UniqueVolumeName): void {
    this.changes++;
    const v = this.volumes.get(volumeName);
    if (v === undefined) {
      throw new AswError(`no volume with the name ${JSON.stringify(volumeName)} exists in the list of attached volumes`);
    }
    v.mountedPods.delete(podName);
    this.unindexPod(podName, volumeName);
    this.foundDuringReconstruction.get(volumeName)?.delete(podName);
  }

  private indexPod(podName: UniquePodName, v: VolumeRecord): void {
    let byVolume = this.volumesByPod.get(podName);
    if (byVolume === undefined) {
      byVolume = new Map();
      this.volumesByPod.set(podName, byVolume);
    }
    byVolume.set(v.volumeName, v);
  }

  private unindexPod(podName: UniquePodName, volumeName: UniqueVolumeName): void {
    const byVolume = this.volumesByPod.get(podName);
    if (byVolume === undefined) return;
    byVolume.delete(volumeName);
    if (byVolume.size === 0) this.volumesByPod.delete(podName);
  }

  checkAndMarkVolumeAsUncertainViaReconstruction(opts: MarkVolumeOpts): boolean {
    this.changes++;
    const v = this.volumes.get(opts.volumeName);
    if (v === undefined) return false;
    const pod = v.mountedPods.get(opts.podName);
    if (pod !== undefined && (pod.volumeMountState === 'VolumeMounted' || pod.volumeMountState === 'VolumeMountUncertain')) return false;
    this.addPodToVolume({ ...opts, volumeMountState: 'VolumeMountUncertain' });
    let pods = this.foundDuringReconstruction.get(opts.volumeName);
    if (pods === undefined) {
      pods = new Map();
      this.foundDuringReconstruction.set(opts.volumeName, pods);
    }
    pods.set(opts.podName, opts.podUID);
    return true;
  }

  // ---- device ----

  markDeviceAsMounted(volumeName: UniqueVolumeName, devicePath: string, deviceMountPath: string, seLinuxMountContext: string): void {
    this.setDeviceMountState(volumeName, 'DeviceGloballyMounted', devicePath, deviceMountPath, seLinuxMountContext);
  }

  markDeviceAsUncertain(volumeName: UniqueVolumeName, devicePath: string, deviceMountPath: string, seLinuxMountContext: string): void {
    this.setDeviceMountState(volumeName, 'DeviceMountUncertain', devicePath, deviceMountPath, seLinuxMountContext);
  }

  markDeviceAsUnmounted(volumeName: UniqueVolumeName): void {
    this.setDeviceMountState(volumeName, 'DeviceNotMounted', '', '', '');
  }

  /** Throws when the volume is absent. devicePath and SELinux context change only when non-empty. */
  private setDeviceMountState(
    volumeName: UniqueVolumeName,
    state: DeviceMountState,
    devicePath: string,
    deviceMountPath: string,
    seLinuxMountContext: string,
  ): void {
    this.changes++;
    const v = this.volumes.get(volumeName);
    if (v === undefined) {
      throw new AswError(`no volume with the name ${JSON.stringify(volumeName)} exists in the list of attached volumes`);
    }
    v.deviceMountState = state;
    v.deviceMountPath = deviceMountPath;
    if (devicePath !== '') v.devicePath = devicePath;
    if (seLinuxMountContext !== '') v.seLinuxMountContext = seLinuxMountContext;
  }

  getDeviceMountState(volumeName: UniqueVolumeName): DeviceMountState {
    return this.volumes.get(volumeName)?.deviceMountState ?? 'DeviceNotMounted';
  }

  getVolumeMountState(volumeName: UniqueVolumeName, podName: UniquePodName): VolumeMountState {
    return this.volumes.get(volumeName)?.mountedPods.get(podName)?.volumeMountState ?? 'VolumeNotMounted';
  }

  isVolumeReconstructed(volumeName: UniqueVolumeName, podName: UniquePodName): boolean {
    if (this.getVolumeMountState(volumeName, podName) !== 'VolumeMountUncertain') return false;
    return this.foundDuringReconstruction.get(volumeName)?.has(podName) ?? false;
  }

  isVolumeDeviceReconstructed(volumeName: UniqueVolumeName): boolean {
    return this.foundDuringReconstruction.has(volumeName);
  }

  isVolumeMountedElsewhere(volumeName: UniqueVolumeName, podName: UniquePodName): boolean {
    const v = this.volumes.get(volumeName);
    if (v === undefined) return false;
    // An uncertain mount counts as mounted until it is certain.
    for (const p of v.mountedPods.values()) if (p.podName !== podName && p.volumeMountState !== 'VolumeNotMounted') return true;
    return false;
  }

  updateReconstructedDevicePath(volumeName: UniqueVolumeName, devicePath: string): void {
    this.changes++;
    const v = this.volumes.get(volumeName);
    if (v === undefined || v.deviceMountState !== 'DeviceMountUncertain') return;
    v.devicePath = devicePath;
  }

  updateReconstructedVolumeAttachability(volumeName: UniqueVolumeName, attachable: boolean): void {
    this.changes++;
    const v = this.volumes.get(volumeName);
    if (v === undefined || v.attachability !== 'Uncertain') return;
    v.attachability = attachable ? 'True' : 'False';
  }

  // ---- queries ----

  podExistsInVolume(podName: UniquePodName, volumeName: UniqueVolumeName): { exists: boolean; devicePath: string } {
    const v = this.volumes.get(volumeName);
    if (v === undefined) throw withoutStackTrace(() => new VolumeNotAttachedError(volumeName, podName));
    const pod = v.mountedPods.get(podName);
    return { exists: pod !== undefined && pod.volumeMountState === 'VolumeMounted', devicePath: v.devicePath };
  }

  podRemovedFromVolume(podName: UniquePodName, volumeName: UniqueVolumeName): boolean {
    const state = this.getVolumeMountState(volumeName, podName);
    return state !== 'VolumeMounted' && state !== 'VolumeMountUncertain';
  }

  volumeExists(volumeName: UniqueVolumeName): boolean {
    return this.volumes.has(volumeName);
  }

  /** Matches the pod's volumeSpec.Name(), as kubelet does. */
  volumeExistsWithSpecName(podName: UniquePodName, name: string): boolean {
    for (const v of this.volumesByPod.get(podName)?.values() ?? []) {
      const pod = v.mountedPods.get(podName);
      if (pod !== undefined && specName(pod.volumeSpec) === name) return true;
    }
    return false;
  }

  getAttachedVolume(volumeName: UniqueVolumeName): AttachedVolume | undefined {
    const v = this.volumes.get(volumeName);
    return v === undefined ? undefined : attachedVolumeOf(v);
  }

  getAttachedVolumes(): AttachedVolume[] {
    return this.sortedVolumes().map(attachedVolumeOf);
  }

  getMountedVolumes(): MountedVolume[] {
    return this.mountedWhere((s) => s === 'VolumeMounted');
  }

  getAllMountedVolumes(): MountedVolume[] {
    return this.mountedWhere(isPossiblyMounted);
  }

  getPossiblyMountedVolumesForPod(podName: UniquePodName): MountedVolume[] {
    const volumes = [...(this.volumesByPod.get(podName)?.values() ?? [])].sort((a, b) => cmp(a.volumeName, b.volumeName));
    const out: MountedVolume[] = [];
    for (const v of volumes) {
      const p = v.mountedPods.get(podName);
      if (p !== undefined && isPossiblyMounted(p.volumeMountState)) out.push(mountedVolumeOf(v, p));
    }
    return out;
  }

  getGloballyMountedVolumes(): AttachedVolume[] {
    return this.getAttachedVolumes().filter((v) => v.deviceMountState === 'DeviceGloballyMounted');
  }

  getUnmountedVolumes(): AttachedVolume[] {
    return this.sortedVolumes()
      .filter((v) => v.mountedPods.size === 0)
      .map(attachedVolumeOf);
  }

  private mountedWhere(pred: (s: VolumeMountState) => boolean): MountedVolume[] {
    const out: MountedVolume[] = [];
    for (const v of this.sortedVolumes()) {
      const pods = v.mountedPods.size === 1 ? v.mountedPods.values() : [...v.mountedPods.values()].sort((a, b) => cmp(a.podName, b.podName));
      for (const p of pods) {
        if (pred(p.volumeMountState)) out.push(mountedVolumeOf(v, p));
      }
    }
    return out;
  }

  /**
   * Sorted by name so that every pass of the reconciler is deterministic. The sort is kept until a
   * volume is added or removed (callers only read the array).
   */
  private sortedVolumes(): readonly VolumeRecord[] {
    this.sorted ??= [...this.volumes.values()].sort((a, b) => cmp(a.volumeName, b.volumeName));
    return this.sorted;
  }
}

function isPossiblyMounted(s: VolumeMountState): boolean {
  return s === 'VolumeMounted' || s === 'VolumeMountUncertain';
}

function mountedVolumeOf(v: VolumeRecord, p: PodRecord): MountedVolume {
  return {
    podName: p.podName,
    podUID: p.podUID,
    volumeName: v.volumeName,
    innerVolumeSpecName: p.innerVolumeSpecName,
    outerVolumeSpecName: p.outerVolumeSpecName,
    pluginName: v.pluginName,
    volumeSpec: p.volumeSpec,
    volumeMountState: p.volumeMountState,
    seLinuxMountContext: p.seLinuxMountContext,
    deviceMountPath: v.deviceMountPath,
  };
}

function attachedVolumeOf(v: VolumeRecord): AttachedVolume {
  return {
    volumeName: v.volumeName,
    volumeSpec: v.spec,
    pluginName: v.pluginName,
    pluginIsAttachable: v.attachability === 'True',
    attachability: v.attachability,
    deviceMountState: v.deviceMountState,
    devicePath: v.devicePath,
    deviceMountPath: v.deviceMountPath,
    seLinuxMountContext: v.seLinuxMountContext,
  };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
