/**
 * Gate CSIUnpublishBeforeUnstageAfterReconstruction (docs/feature-gates.md), with KEP-6058's gate:
 * the pod volume directories that failed reconstruction and carry the PV name of a volume the
 * global listing registered become uncertain pod mounts of it (pairPodVolumes.ts: the pairing
 * rule, and why a wrong pairing is harmless), so that the reconciler's UnmountVolume (TearDown,
 * NodeUnpublishVolume) runs for each before the volume's UnmountDevice (NodeUnstageVolume); they
 * leave kubelet's one-shot cleanup list. An unmount whose pod-local vol_data.json is lost builds
 * its unmounter from the spec the actual state holds, rather than never running.
 *
 * Hooks: reconstruct.go reconstructVolumes after the pod directories were walked
 * (afterPodVolumesWalked); operation_generator.go GenerateUnmountVolumeFunc when NewUnmounter
 * failed (unmounterAfterNewUnmounterError).
 */
import { CSIGlobalMountReconstruction, CSIUnpublishBeforeUnstageAfterReconstruction, type FeatureGate } from '../../features/features.js';
import type { UniquePodName, UniqueVolumeName } from '../../layout/names.js';
import type { UnmountTarget } from '../../operationexecutor/actualStateOfWorldUpdater.js';
import { CsiUnmounter } from '../../volume/csi/csiMounter.js';
import { CsiPlugin, driverAndHandle } from '../../volume/csi/csiPlugin.js';
import type { VolumePlugin, VolumeUnmounter } from '../../volume/plugins.js';
import type { VolumeHost } from '../../volume/volumeHost.js';
import type { PodVolume } from '../../volumemanager/reconciler/podVolumes.js';
import type { PodVolumesWalked } from '../../volumemanager/reconciler/reconstructHooks.js';
import type { NodevolGate } from '../nodevolGate.js';
import { pairFailedPodVolumesWithListed, pairPublishedBlockTargets } from './pairPodVolumes.js';

export const unpublishBeforeUnstageAfterReconstruction: NodevolGate = {
  name: CSIUnpublishBeforeUnstageAfterReconstruction,
  proofScenarios: ['alpha-gap'],
  doc: 'csiunpublishbeforeunstageafterreconstruction',
  create: (host, features) => ({
    reconstruct: { afterPodVolumesWalked: (walked) => pairFailedWithListed(host, features, walked) },
    operationGenerator: { unmounterAfterNewUnmounterError: (plugin, target, err) => unmounterFromSpec(host, plugin, target, err) },
  }),
};

/** Pairs the failed candidates with the registered volumes; resolves to the candidates left unpaired. */
async function pairFailedWithListed(host: VolumeHost, features: FeatureGate, { failed, registered, fromPodDirs, asw }: PodVolumesWalked): Promise<readonly PodVolume[]> {
  if (!features.enabled(CSIGlobalMountReconstruction) || registered.length === 0) return failed;
  const deps = { cluster: host.cluster, mounter: host.mounter, logger: host.logger, fs: host.fs, layout: host.layout };
  const { paired, unpaired } = await pairFailedPodVolumesWithListed(deps, failed, registered);
  const known = (podName: UniquePodName, volumeName: UniqueVolumeName): boolean =>
    asw.getPossiblyMountedVolumesForPod(podName).some((m) => m.volumeName === volumeName) || paired.some((p) => p.podName === podName && p.listed.volumeName === volumeName);
  // Block volumes whose pod directory named them were reconstructed before this; updateStates
  // runs after, so the pod walk's findings count as known too.
  const walked = new Set([...fromPodDirs].flatMap(([name, pods]) => pods.map((p) => `${p.volume.podName}|${name}`)));
  paired.push(...(await pairPublishedBlockTargets(deps, registered, (p, v) => known(p, v) || walked.has(`${p}|${v}`))));
  for (const { podName, innerVolumeSpecName, listed } of paired) {
    asw.checkAndMarkVolumeAsUncertainViaReconstruction({
      podName,
      podUID: podName,
      volumeName: listed.volumeName,
      volumeSpec: listed.spec,
      outerVolumeSpecName: '',
      innerVolumeSpecName,
      pluginName: listed.pluginName,
      volumeMountState: 'VolumeMountUncertain',
      seLinuxMountContext: listed.seLinuxMountContext,
    });
  }
  return unpaired;
}

/**
 * The pod-local record is gone, but the actual state holds the volume's spec (a mount of this
 * life, or a pod directory paired with a listed volume at reconstruction): the CSI unmounter is
 * built from that spec (a PV's CSI source, or an inline volume's driver with the handle kubelet
 * derives from the pod), so that TearDown runs rather than never.
 */
function unmounterFromSpec(host: VolumeHost, plugin: VolumePlugin, target: UnmountTarget, err: unknown): VolumeUnmounter | undefined {
  if (target.volumeSpec === undefined || !(plugin instanceof CsiPlugin)) return undefined;
  const unmounter = new CsiUnmounter(host, { ...driverAndHandle(target.volumeSpec, target.podUID), specName: target.innerVolumeSpecName, podUID: target.podUID });
  host.logger.info('UnmountVolume: the pod volume record is unreadable, tearing down with the spec from the actual state', {
    volumeName: target.volumeName,
    podName: target.podName,
    err: err instanceof Error ? err.message : String(err),
  });
  return unmounter;
}
