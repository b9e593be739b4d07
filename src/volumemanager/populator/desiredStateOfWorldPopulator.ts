/**
 * DesiredStateOfWorldPopulator (populator/desired_state_of_world_populator.go): fills the DSW
 * from the pods bound to this node - pod → used volume → spec (PVC → PV, or an inline CSI volume)
 * → unique volume name - and removes pods that are gone.
 *
 * When the cluster view cannot answer, the DSW keeps what it had and `hasAddedPods()` does not
 * become true: nothing is unmounted on the strength of an unanswered question.
 */
import type { Clock } from '../../ports/clock.js';
import type { ClusterView } from '../../ports/cluster.js';
import type { Pod, PodVolumeSource } from '../../api/core.js';
import { errorMessage, quietError } from '../../ports/fs.js';
import type { Logger } from '../../ports/logger.js';
import { getUniqueVolumeName, getUniqueVolumeNameWithPod, type UniquePodName } from '../../layout/names.js';
import type { VolumePluginMgr } from '../../volume/plugins.js';
import { specName, type Spec } from '../../volume/spec.js';
import type { ActualStateOfWorld } from '../cache/actualStateOfWorld.js';
import type { DesiredStateOfWorld } from '../cache/desiredStateOfWorld.js';

export interface DesiredStateOfWorldPopulator {
  /** One pass: list pods, add their volumes, remove pods no longer bound here. */
  populateOnce(): Promise<void>;
  /** True once a pass has listed the pods successfully. */
  hasAddedPods(): boolean;
  /**
   * True when the last pass had nothing to do: the cluster objects were those of a pass that
   * resolved every pod without an error. Until they change, every pass would be the same.
   */
  idle(): boolean;
}

export interface PopulatorDeps {
  readonly cluster: ClusterView;
  readonly dsw: DesiredStateOfWorld;
  /** For kubelet's check before removing a terminal pod's volume (PodRemovedFromVolume). */
  readonly asw: Pick<ActualStateOfWorld, 'podRemovedFromVolume'>;
  readonly plugins: VolumePluginMgr;
  readonly logger: Logger;
  /**
   * For the repeat interval of identical "Error processing volume" lines. Without a clock an
   * identical error is logged once, and again only after it changed or cleared.
   */
  readonly clock?: Clock;
}

/**
 * The same "Error processing volume" error for the same pod volume is logged at most once per
 * this interval (the populator retries every 100 ms); a different error, or the first one after
 * a success, is logged at once.
 */
export const POPULATOR_ERROR_REPEAT_MS = 60_000;

/** A pod whose every volume was added to the DSW (kubelet's processedPods), and from what. */
interface ProcessedPod {
  readonly pod: Pod;
  /** The cluster view's objectsVersion at that pass. */
  readonly version: number;
}

/** The last "Error processing volume" line written for one pod volume. */
interface LoggedVolumeError {
  readonly msg: string;
  readonly loggedAtMs: number;
  /** Identical failures since that line. */
  suppressed: number;
}

/**
 * kubelet asks its pod workers; nodevol, with no pod workers and no container runtime, reads the
 * Pod (docs/kubelet-fidelity.md, row 9a and "Not modelled": pod workers):
 * ShouldPodContainersBeTerminating ≈ being deleted or in a terminal phase.
 */
function containersTerminating(pod: Pod): boolean {
  return pod.deletionTimestamp !== undefined || runtimeRemoved(pod);
}

/**
 * ShouldPodRuntimeBeRemoved ≈ a terminal phase (Succeeded, Failed): kubelet writes one only once
 * every container stopped, so a pod being deleted that is still Running is still stopping.
 */
function runtimeRemoved(pod: Pod): boolean {
  return pod.phase === 'Succeeded' || pod.phase === 'Failed';
}

export function createDesiredStateOfWorldPopulator(deps: PopulatorDeps): DesiredStateOfWorldPopulator {
  return new Populator(deps);
}

class Populator implements DesiredStateOfWorldPopulator {
  /** Set iff some pass listed the pods successfully. */
  private added = false;
  /** The message of the listing failure last logged; cleared (and logged) on recovery. */
  private lastListError: string | undefined;
  /** By pod name, then pod volume name: the last error line written, while the volume keeps failing. */
  private readonly volumeErrors = new Map<UniquePodName, Map<string, LoggedVolumeError>>();
  /**
   * Pods resolved without an error, under which objects version. Such a pod is not resolved again
   * while the Pod object and the version stay the same: every answer would be the same, so the DSW
   * would be too. This keeps an idle pass from costing every pod's lookups (kubelet skips
   * processed pods too, until a pod sync asks to reprocess them).
   */
  private readonly processed = new Map<UniquePodName, ProcessedPod>();
  /**
   * The objects version of the last pass that resolved every pod without an error and removed the
   * pods that were gone: while the view reports it again, a pass has nothing to do.
   */
  private settledVersion: number | undefined;
  /** Whether the last pass returned at once for want of a change (see idle()). */
  private lastPassIdle = false;

  constructor(private readonly deps: PopulatorDeps) {}

  hasAddedPods(): boolean {
    return this.added;
  }

  idle(): boolean {
    return this.lastPassIdle;
  }

  async populateOnce(): Promise<void> {
    const { cluster, dsw, logger } = this.deps;
    this.lastPassIdle = false;
    let pods: readonly Pod[];
    try {
      pods = await cluster.listPods();
    } catch (err) {
      // Logged once per distinct failure: the populator retries every 100 ms.
      const msg = errorMessage(err);
      if (msg !== this.lastListError) {
        logger.error(err, 'Cannot reach the API server: not listing pods, keeping the desired state; nothing is unmounted on its account');
        this.lastListError = msg;
      }
      return;
    }
    if (this.lastListError !== undefined) {
      logger.info('API server reachable again: listing pods');
      this.lastListError = undefined;
    }
    const version = cluster.objectsVersion?.();
    if (version !== undefined && version === this.settledVersion) {
      this.lastPassIdle = true;
      return;
    }
    this.settledVersion = undefined;
    let settled = version !== undefined;
    const seen = new Map<UniquePodName, Pod>();
    for (const pod of [...pods].sort((a, b) => (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0))) {
      const podName = pod.uid as UniquePodName;
      seen.set(podName, pod);
      // findAndAddNewPods: "Do not (re)add volumes for pods that can't also be starting
      // containers"; before the first pass, only pods whose runtime should be removed are
      // skipped (a pod being deleted may still run containers after a restart).
      if (this.added ? containersTerminating(pod) : runtimeRemoved(pod)) continue;
      const done = this.processed.get(podName);
      if (done !== undefined && done.pod === pod && done.version === version) continue;
      let allAdded = true;
      for (const volume of pod.volumes) {
        // processPodVolumes: a volume no container mounts or uses as a device is skipped, with no
        // lookup and no error (GetPodVolumeNames gathers init, regular and ephemeral containers).
        if (!pod.volumeMounts.includes(volume.name) && !pod.volumeDevices.includes(volume.name)) {
          logger.v(4).info('Skipping unused volume', { pod: `${pod.namespace}/${pod.name}`, volumeName: volume.name });
          this.volumeErrors.get(podName)?.delete(volume.name);
          continue;
        }
        try {
          await this.addVolume(pod, podName, volume);
          this.volumeErrors.get(podName)?.delete(volume.name);
        } catch (err) {
          allAdded = false;
          // kubelet stores the bare error text (AddErrorToPod(uniquePodName, err.Error())).
          dsw.addErrorToPod(podName, errorMessage(err));
          this.logVolumeError(err, pod, podName, volume.name);
        }
      }
      if (allAdded && version !== undefined) this.processed.set(podName, { pod, version });
      else this.processed.delete(podName);
      if (!allAdded) settled = false;
    }
    for (const podName of this.volumeErrors.keys()) if (!seen.has(podName)) this.volumeErrors.delete(podName);
    for (const podName of this.processed.keys()) if (!seen.has(podName)) this.processed.delete(podName);
    if (!(await this.removeDeletedPods(seen))) settled = false;
    this.added = true;
    if (settled) this.settledVersion = version;
  }

  /**
   * findAndRemoveDeletedPods, over every (volume, pod) of the DSW: a listed pod keeps its volumes
   * until its runtime should be removed (a terminal phase); a pod no longer listed has none
   * (nodevol sees no container runtime). A listed pod's volume the ASW does not hold mounted or
   * uncertain stays, as kubelet keeps it against a mount not yet recorded. Returns false when an
   * entry was kept on the ASW's account: the ASW can change with no change to the cluster.
   */
  private async removeDeletedPods(listed: ReadonlyMap<UniquePodName, Pod>): Promise<boolean> {
    const { dsw, asw, logger, plugins } = this.deps;
    let settled = true;
    // The entries are copies taken before the walk, as kubelet's: each (volume, pod) entry of an
    // attachable volume asks, so a volume of two pods is marked (and logged) twice in that pass.
    for (const entry of dsw.getVolumesToMount()) {
      const pod = listed.get(entry.podName);
      if (pod !== undefined && entry.pluginIsAttachable) {
        // A plugin that answers with no attachable plugin (and no error) turns the volume
        // non-attachable, for good; a failed lookup leaves the flag as it is.
        let attachable: boolean;
        try {
          attachable = (await plugins.findAttachablePluginBySpec(entry.spec)) !== undefined;
        } catch {
          attachable = true;
        }
        if (!attachable) {
          dsw.markVolumeAttachability(entry.volumeName, false);
          logger.info('Volume changes from attachable to non-attachable', { volumeName: entry.volumeName });
          continue;
        }
      }
      if (pod !== undefined && !runtimeRemoved(pod)) continue;
      if (pod !== undefined && asw.podRemovedFromVolume(entry.podName, entry.volumeName)) {
        logger
          .v(4)
          .info('Actual state does not yet have volume mount information and pod still exists in pod manager, skip removing volume from desired state', {
            pod: `${pod.namespace}/${pod.name}`,
            podUID: pod.uid,
            volumeName: entry.volumeName,
          });
        settled = false;
        continue;
      }
      logger.v(4).info('Removing volume from desired state', { pod: `${entry.pod.namespace}/${entry.pod.name}`, podUID: entry.pod.uid, volumeName: specName(entry.spec) });
      dsw.deletePodFromVolume(entry.podName, entry.volumeName);
      this.processed.delete(entry.podName);
    }
    return settled;
  }

  /** "Error processing volume", rate limited per pod volume and error text (see POPULATOR_ERROR_REPEAT_MS). */
  private logVolumeError(err: unknown, pod: Pod, podName: UniquePodName, volumeName: string): void {
    const msg = errorMessage(err);
    const nowMs = this.deps.clock?.nowMs() ?? 0;
    let byVolume = this.volumeErrors.get(podName);
    if (byVolume === undefined) {
      byVolume = new Map();
      this.volumeErrors.set(podName, byVolume);
    }
    const last = byVolume.get(volumeName);
    if (last !== undefined && last.msg === msg && (this.deps.clock === undefined || nowMs - last.loggedAtMs < POPULATOR_ERROR_REPEAT_MS)) {
      last.suppressed++;
      return;
    }
    const values: Record<string, unknown> = { pod: `${pod.namespace}/${pod.name}`, volumeName };
    if (last !== undefined && last.msg === msg) values['repeated'] = last.suppressed;
    this.deps.logger.error(err, 'Error processing volume', values);
    byVolume.set(volumeName, { msg, loggedAtMs: nowMs, suppressed: 0 });
  }

  private async addVolume(pod: Pod, podName: UniquePodName, volume: PodVolumeSource): Promise<void> {
    const { plugins, dsw } = this.deps;
    const spec = await this.specFor(pod, volume);
    if (spec === undefined) return;
    const plugin = plugins.findPluginBySpec(spec);
    const attachable = (await plugins.findAttachablePluginBySpec(spec)) !== undefined;
    const deviceMountable = plugins.findDeviceMountablePluginBySpec(spec) !== undefined;
    const volumeName =
      deviceMountable || attachable
        ? getUniqueVolumeName(plugin.getPluginName(), plugin.getVolumeName(spec))
        : getUniqueVolumeNameWithPod(plugin.getPluginName(), podName, specName(spec));
    dsw.addPodToVolume({
      podName,
      pod,
      spec,
      outerVolumeSpecName: volume.name,
      // kubelet's GetMountSELinuxLabel answers '' on a node without SELinux; nodevol computes no
      // label (docs/kubelet-fidelity.md, "Not modelled": SELinux).
      seLinuxMountContext: '',
      volumeName,
      pluginName: plugin.getPluginName(),
      pluginIsAttachable: attachable,
      pluginIsDeviceMountable: deviceMountable,
    });
  }

  /**
   * createVolumeSpec: the spec of a pod volume, with kubelet's checks in kubelet's order and texts
   * (getPVCExtractPV, getPVSpec, then the volume mode against the pod's use); undefined for volume
   * types nodevol has no plugin for. Inline CSI volumes get none of the checks, as in kubelet.
   */
  private async specFor(pod: Pod, volume: PodVolumeSource): Promise<Spec | undefined> {
    const claim = volume.persistentVolumeClaim;
    if (claim !== undefined) {
      const key = `${pod.namespace}/${claim.claimName}`;
      // Met on every pass while a claim is not bound yet; logged and stored by its message alone.
      const fail = (msg: string): Error => quietError(`error processing PVC ${key}: ${msg}`);
      const pvc = await this.deps.cluster.getPersistentVolumeClaim(pod.namespace, claim.claimName);
      if (pvc === undefined) throw fail(`failed to fetch PVC from API server: persistentvolumeclaims ${JSON.stringify(claim.claimName)} not found`);
      if (pvc.deletionTimestamp !== undefined) throw fail('PVC is being deleted');
      if (pvc.phase !== 'Bound') throw fail('PVC is not bound');
      if (pvc.volumeName === '') throw fail('PVC has empty pvc.Spec.VolumeName');
      const pv = await this.deps.cluster.getPersistentVolume(pvc.volumeName);
      if (pv === undefined) throw fail(`failed to fetch PV ${pvc.volumeName} from API server: persistentvolumes ${JSON.stringify(pvc.volumeName)} not found`);
      if (pv.claimRef === undefined) throw fail(`found PV object ${pv.name} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim`);
      if (pv.claimRef.uid !== pvc.uid) throw fail(`found PV object ${pv.name} but its pv.Spec.ClaimRef.UID ${pv.claimRef.uid} does not point to claim.UID ${pvc.uid}`);
      // The mode is the PV's (GetVolumeMode: nil is Filesystem); the claim's is not read.
      const mode = pv.volumeMode ?? 'Filesystem';
      if (pod.volumeMounts.includes(volume.name) && mode !== 'Filesystem') throw new Error(`volume ${volume.name} has volumeMode ${mode}, but is specified in volumeMounts`);
      if (pod.volumeDevices.includes(volume.name) && mode !== 'Block') throw new Error(`volume ${volume.name} has volumeMode ${mode}, but is specified in volumeDevices`);
      return { kind: 'persistent', persistentVolume: pv, readOnly: claim.readOnly ?? false };
    }
    if (volume.csi !== undefined) return { kind: 'inline', volume: { name: volume.name, csi: volume.csi }, readOnly: volume.csi.readOnly ?? false };
    return undefined;
  }
}
