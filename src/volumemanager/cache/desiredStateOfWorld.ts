/**
 * DesiredStateOfWorld (cache/desired_state_of_world.go; reference §7.5): the volumes the pods
 * bound to this node want mounted, keyed by unique volume name, then by pod.
 *
 * Books only: the populator resolves names and plugin properties (which needs the cluster view)
 * and hands them in; nothing here does I/O. Getters return copies.
 */
import type { UniquePodName, UniqueVolumeName } from '../../layout/names.js';
import { specName } from '../../volume/spec.js';
import type { PodToMount, VolumeToMount } from '../../operationexecutor/volumeToMount.js';

export interface AddPodToVolumeArgs extends PodToMount {
  readonly volumeName: UniqueVolumeName;
  readonly pluginName: string;
  readonly pluginIsAttachable: boolean;
  readonly pluginIsDeviceMountable: boolean;
}

export interface DesiredStateOfWorld {
  /** Adds (or refreshes) the pod under the volume, creating the volume if needed. */
  addPodToVolume(args: AddPodToVolumeArgs): void;
  /**
   * Forgets the pod's errors first (whatever else happens, as kubelet does); then an absent pod
   * or volume is a no-op. The volume goes when its last pod goes.
   */
  deletePodFromVolume(podName: UniquePodName, volumeName: UniqueVolumeName): void;
  /** Removes the pod from every volume. */
  deletePod(podName: UniquePodName): void;
  /** Sets reportedInUse for the named volumes and clears it for every other one. */
  markVolumesReportedInUse(reportedVolumes: readonly string[]): void;
  volumeExists(volumeName: UniqueVolumeName): boolean;
  podExistsInVolume(podName: UniquePodName, volumeName: UniqueVolumeName): boolean;
  /** Whether the pod has a volume whose spec is named specName. */
  volumeExistsWithSpecName(podName: UniquePodName, specName: string): boolean;
  /** Every (volume, pod) pair, sorted by volume then pod. */
  getVolumesToMount(): VolumeToMount[];
  getPods(): UniquePodName[];
  /** Errors met while resolving a pod's volumes (kubelet AddErrorToPod / PopPodErrors). */
  addErrorToPod(podName: UniquePodName, err: string): void;
  popPodErrors(podName: UniquePodName): string[];
}

interface VolumeRecord {
  readonly volumeName: UniqueVolumeName;
  readonly pluginName: string;
  pluginIsAttachable: boolean;
  pluginIsDeviceMountable: boolean;
  reportedInUse: boolean;
  readonly pods: Map<UniquePodName, PodToMount>;
}

export function createDesiredStateOfWorld(): DesiredStateOfWorld {
  return new DesiredStateOfWorldImpl();
}

const MAX_POD_ERRORS = 10;

class DesiredStateOfWorldImpl implements DesiredStateOfWorld {
  private readonly volumes = new Map<UniqueVolumeName, VolumeRecord>();
  private readonly podErrors = new Map<UniquePodName, string[]>();

  addPodToVolume(args: AddPodToVolumeArgs): void {
    let v = this.volumes.get(args.volumeName);
    if (v === undefined) {
      v = {
        volumeName: args.volumeName,
        pluginName: args.pluginName,
        pluginIsAttachable: args.pluginIsAttachable,
        pluginIsDeviceMountable: args.pluginIsDeviceMountable,
        reportedInUse: false,
        pods: new Map(),
      };
      this.volumes.set(args.volumeName, v);
    } else {
      v.pluginIsAttachable = args.pluginIsAttachable;
      v.pluginIsDeviceMountable = args.pluginIsDeviceMountable;
    }
    v.pods.set(args.podName, {
      podName: args.podName,
      pod: args.pod,
      spec: args.spec,
      outerVolumeSpecName: args.outerVolumeSpecName,
      seLinuxMountContext: args.seLinuxMountContext,
    });
  }

  deletePodFromVolume(podName: UniquePodName, volumeName: UniqueVolumeName): void {
    this.podErrors.delete(podName);
    const v = this.volumes.get(volumeName);
    if (v === undefined) return;
    v.pods.delete(podName);
    if (v.pods.size === 0) this.volumes.delete(volumeName);
  }

  deletePod(podName: UniquePodName): void {
    for (const name of [...this.volumes.keys()]) this.deletePodFromVolume(podName, name);
    this.podErrors.delete(podName);
  }

  markVolumesReportedInUse(reportedVolumes: readonly string[]): void {
    const reported = new Set(reportedVolumes);
    for (const v of this.volumes.values()) v.reportedInUse = reported.has(v.volumeName);
  }

  volumeExists(volumeName: UniqueVolumeName): boolean {
    return this.volumes.has(volumeName);
  }

  podExistsInVolume(podName: UniquePodName, volumeName: UniqueVolumeName): boolean {
    return this.volumes.get(volumeName)?.pods.has(podName) ?? false;
  }

  volumeExistsWithSpecName(podName: UniquePodName, name: string): boolean {
    for (const v of this.volumes.values()) {
      const p = v.pods.get(podName);
      if (p !== undefined && specName(p.spec) === name) return true;
    }
    return false;
  }

  getVolumesToMount(): VolumeToMount[] {
    const out: VolumeToMount[] = [];
    for (const v of [...this.volumes.values()].sort((a, b) => cmp(a.volumeName, b.volumeName))) {
      for (const p of [...v.pods.values()].sort((a, b) => cmp(a.podName, b.podName))) {
        out.push({
          ...p,
          volumeName: v.volumeName,
          pluginName: v.pluginName,
          pluginIsAttachable: v.pluginIsAttachable,
          pluginIsDeviceMountable: v.pluginIsDeviceMountable,
          reportedInUse: v.reportedInUse,
        });
      }
    }
    return out;
  }

  getPods(): UniquePodName[] {
    const pods = new Set<UniquePodName>();
    for (const v of this.volumes.values()) for (const p of v.pods.keys()) pods.add(p);
    return [...pods].sort(cmp);
  }

  addErrorToPod(podName: UniquePodName, err: string): void {
    const errs = this.podErrors.get(podName) ?? [];
    if (!errs.includes(err) && errs.length < MAX_POD_ERRORS) errs.push(err);
    this.podErrors.set(podName, errs);
  }

  popPodErrors(podName: UniquePodName): string[] {
    const errs = this.podErrors.get(podName) ?? [];
    this.podErrors.delete(podName);
    return errs;
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
