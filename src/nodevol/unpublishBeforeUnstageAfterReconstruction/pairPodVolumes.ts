/**
 * Gate CSIUnpublishBeforeUnstageAfterReconstruction (nodevol; docs/feature-gates.md):
 * pairs the pod volume directories that failed reconstruction with the volumes the KEP-6058
 * global listing recovered, so that each such target is NodeUnpublished before the volume's
 * NodeUnstageVolume - the KEP's known alpha gap.
 *
 * After a reboot the bind mount that the KEP's fallback pairs through is gone, so the pairing is
 * by name: kubelet names the pod volume directory of a PV after the PV (`volumes/kubernetes.io~csi/
 * <escaped PV name>`), and the global vol_data.json of a listed volume records that PV name
 * (specVolID). A directory pairs with every listed volume of its mode that claims its name (two
 * global mounts may claim one name: a PV deleted and re-created with another handle); it never
 * pairs when
 *  - the pod still exists and none of its PVC volumes is bound to that PV (for instance an inline
 *    ephemeral volume that happens to carry the PV's name: inline volumes are never paired with a
 *    PV), or the pod's claims cannot be read now (when the pods themselves cannot be listed, as
 *    with the API server down at a reboot, the directory is paired: see below why that is safe);
 *  - its `mount` directory is a mount point (a live mount is not this gate's to guess about; the
 *    KEP's fallback or upstream's cleanup handle it).
 *
 * Why a wrong pairing is harmless: the directory's `mount` is not a mount point, so the only
 * effect of the NodeUnpublishVolume is on the driver's record of that target path; CSI requires
 * NodeUnpublishVolume to be idempotent and a driver answers OK (or NotFound) for a target it never
 * published under that volume id. Then the directory, which holds nothing mounted and no record,
 * is removed as TearDown removes any.
 */
import * as path from 'node:path/posix';
import type { ClusterView } from '../../ports/cluster.js';
import type { Pod } from '../../api/core.js';
import { errorMessage, isNotExist, type DirEntry, type FileSystem } from '../../ports/fs.js';
import type { Logger } from '../../ports/logger.js';
import { POD_MOUNT_DIR_NAME, type KubeletLayout } from '../../layout/layout.js';
import { CSI_PLUGIN_NAME, escapeQualifiedName, type UniquePodName, type UniqueVolumeName } from '../../layout/names.js';
import type { Mounter } from '../../ports/mounter.js';
import type { PodVolume } from '../../volumemanager/reconciler/podVolumes.js';
import type { RegisteredGlobalVolume as ListedVolume } from '../../volumemanager/reconciler/reconstructHooks.js';

export interface PodVolumePairing {
  readonly podName: UniquePodName;
  /** The pod volume directory's name (the escaped PV name). */
  readonly innerVolumeSpecName: string;
  readonly listed: ListedVolume;
}

export interface PairingDeps {
  readonly cluster: ClusterView;
  readonly mounter: Mounter;
  readonly logger: Logger;
  readonly fs: FileSystem;
  readonly layout: KubeletLayout;
}

/** The PV name a listed volume's spec carries (specVolID), escaped as a directory name. */
function listedDirName(v: ListedVolume): string | undefined {
  return v.spec.kind === 'persistent' ? escapeQualifiedName(v.spec.persistentVolume.name) : undefined;
}

/**
 * Pairs `failed` candidates with `listed` volumes. Returns the pairings and the candidates left
 * unpaired (which keep upstream's cleanup).
 */
export async function pairFailedPodVolumesWithListed(
  deps: PairingDeps,
  failed: readonly PodVolume[],
  listed: readonly ListedVolume[],
): Promise<{ paired: PodVolumePairing[]; unpaired: PodVolume[] }> {
  const paired: PodVolumePairing[] = [];
  const unpaired: PodVolume[] = [];
  let pods: ReadonlyMap<string, Pod> | undefined;
  for (const candidate of failed) {
    const matches = listed.filter((v) => v.pluginName === candidate.pluginName && v.volumeMode === candidate.volumeMode && listedDirName(v) === candidate.volumeSpecName);
    if (matches.length === 0 || candidate.volumeMode !== 'Filesystem' || candidate.entryType !== 'directory') {
      unpaired.push(candidate);
      continue;
    }
    const refusal = await refuse(deps, candidate, matches, async () => (pods ??= await listPodsByUID(deps.cluster)));
    if (refusal !== undefined) {
      deps.logger.info('Not pairing a pod volume directory that could not be reconstructed with a listed volume', {
        podName: candidate.podName,
        volumeSpecName: candidate.volumeSpecName,
        reason: refusal,
      });
      unpaired.push(candidate);
      continue;
    }
    for (const listedVolume of matches) {
      paired.push({ podName: candidate.podName, innerVolumeSpecName: candidate.volumeSpecName, listed: listedVolume });
      deps.logger.v(2).info('Pod volume directory that could not be reconstructed is paired by PV name with a listed volume; it is unpublished before the volume is unstaged', {
        podName: candidate.podName,
        volumeSpecName: candidate.volumeSpecName,
        volumeName: listedVolume.volumeName,
      });
    }
  }
  return { paired, unpaired };
}

/**
 * Raw block: a listed block volume's publish targets are files of its own directory
 * (`volumeDevices/publish/<PV name>/<pod uid>`), so the pairing needs no name rule. Each target
 * of a pod the actual state does not have on the volume (its pod directory link was removed
 * before NodeUnpublishVolume, or could not be read) becomes a pod mount of it, unless the pod
 * still exists and none of its claims is bound to that PV. When that cannot be told (the pods or
 * the claims cannot be read, as when the API server is down at the restart) the target is paired:
 * it is the volume's own, so the pairing cannot be wrong by name.
 */
export async function pairPublishedBlockTargets(
  deps: PairingDeps,
  listed: readonly ListedVolume[],
  known: (podName: UniquePodName, volumeName: UniqueVolumeName) => boolean,
): Promise<PodVolumePairing[]> {
  const paired: PodVolumePairing[] = [];
  let pods: ReadonlyMap<string, Pod> | undefined;
  for (const v of listed) {
    if (v.volumeMode !== 'Block' || v.pluginName !== CSI_PLUGIN_NAME || v.spec.kind !== 'persistent') continue;
    const pvName = v.spec.persistentVolume.name;
    const publishDir = deps.layout.csiBlockPublishDir(pvName);
    let entries: DirEntry[];
    try {
      entries = await deps.fs.readdir(publishDir);
    } catch (err) {
      if (!isNotExist(err)) deps.logger.info('Could not read the publish directory of a listed block volume', { path: publishDir, err: errorMessage(err) });
      continue;
    }
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const podName = e.name as UniquePodName;
      if (e.type !== 'file' || known(podName, v.volumeName)) continue;
      let refusal: string | undefined;
      try {
        const pod = (pods ??= await listPodsByUID(deps.cluster)).get(podName);
        refusal = pod === undefined ? undefined : await claimRefusal(deps, pod, new Set([pvName]), { unreadableRefuses: false });
      } catch (err) {
        // The API server is down (a reboot often finds it so, and reconstruction runs once):
        // refusing would leave the target published while the volume is unstaged, the very gap
        // of this gate. The target is a file of the volume's own directory, so pairing it cannot
        // be a wrong pairing by name; a pod that still wants the volume has it set up again from
        // the uncertain mount (NodePublishVolume is idempotent).
        deps.logger.info('The pods could not be listed; a published block target is paired with its own listed volume', { podName, volumeName: v.volumeName, err: errorMessage(err) });
        refusal = undefined;
      }
      if (refusal !== undefined) {
        deps.logger.info('Not pairing a published block target with a listed volume', { podName, volumeName: v.volumeName, reason: refusal });
        continue;
      }
      paired.push({ podName, innerVolumeSpecName: pvName, listed: v });
      deps.logger.v(2).info('Published block target with no pod volume in the actual state is unpublished before the volume is unstaged', { podName, volumeName: v.volumeName });
    }
  }
  return paired;
}

async function listPodsByUID(cluster: ClusterView): Promise<ReadonlyMap<string, Pod>> {
  return new Map((await cluster.listPods()).map((p) => [p.uid, p]));
}

/** Why `candidate` must not be paired, or undefined. */
async function refuse(
  deps: PairingDeps,
  candidate: PodVolume,
  matches: readonly ListedVolume[],
  pods: () => Promise<ReadonlyMap<string, Pod>>,
): Promise<string | undefined> {
  const mountPath = path.join(candidate.volumePath, POD_MOUNT_DIR_NAME);
  try {
    if (!(await deps.mounter.isLikelyNotMountPoint(mountPath))) return `${mountPath} is a mount point`;
  } catch (err) {
    if (!isNotExist(err)) return `cannot tell whether ${mountPath} is a mount point: ${errorMessage(err)}`;
  }
  let pod: Pod | undefined;
  try {
    pod = (await pods()).get(candidate.podName);
  } catch (err) {
    // The API server is down (a reboot often finds it so; reconstruction runs once): refusing
    // would unstage the volume with the target published, the gap itself. Nothing is mounted at
    // the target (checked above), so even a wrong pairing is harmless (see the top of this file).
    deps.logger.info('The pods could not be listed; pairing a pod volume directory with no mount by PV name', {
      podName: candidate.podName,
      volumeSpecName: candidate.volumeSpecName,
      err: errorMessage(err),
    });
    return undefined;
  }
  if (pod === undefined) return undefined;
  return claimRefusal(deps, pod, new Set(matches.map((m) => (m.spec.kind === 'persistent' ? m.spec.persistentVolume.name : ''))));
}

/** The pod still exists: only a PVC volume of it bound to one of `pvNames` names the directory. */
async function claimRefusal(deps: PairingDeps, pod: Pod, pvNames: ReadonlySet<string>, opts = { unreadableRefuses: true }): Promise<string | undefined> {
  for (const v of pod.volumes) {
    if (v.persistentVolumeClaim === undefined) continue;
    try {
      const claim = await deps.cluster.getPersistentVolumeClaim(pod.namespace, v.persistentVolumeClaim.claimName);
      if (claim !== undefined && pvNames.has(claim.volumeName)) return undefined;
    } catch (err) {
      // A raw block target cannot be a wrong pairing by name (pairPublishedBlockTargets): an
      // unreadable claim does not refuse it.
      if (!opts.unreadableRefuses) return undefined;
      return `claim ${pod.namespace}/${v.persistentVolumeClaim.claimName} of pod ${pod.uid} could not be read: ${errorMessage(err)}`;
    }
  }
  return `pod ${pod.uid} still exists and none of its claims is bound to that PV (an inline volume of that name is never paired with a PV)`;
}
