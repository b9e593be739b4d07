/**
 * Gate CSIKeepUncertainMountOnFinalError (docs/feature-gates.md): a final error of
 * NodeStageVolume or NodePublishVolume does not make kubelet forget a device or pod mount that
 * may be there. An uncertain one (found at reconstruction, a device only the global listing found
 * included; an earlier call timed out; an unstage or unpublish failed) stays uncertain and keeps
 * its staging dir / pod volume dir and vol_data.json; one whose staging path or target shows the
 * driver's work after the error (the driver did it, then failed) becomes uncertain
 * (uncertainIfDone.ts). Kubelet marks them not mounted (all but a reconstructed one) and removes
 * their records, so nothing unstages or unpublishes them when the pod goes and volumesInUse drops
 * a volume the driver still has staged.
 *
 * Hooks: operation_generator.go, the args of MountDevice, SetUpDevice and SetUp (mounterArgs:
 * whether the device or pod mount is uncertain, mounterArgs.ts) and markDeviceErrorState /
 * markVolumeErrorState (an uncertain one stays uncertain); the CSI plugin, after a final error of
 * the driver's call (uncertainAfterFinishedError), where kubelet removes what a failed
 * MountDevice, SetUp or SetUpDevice made (onFinishedError), and when that removal failed and left
 * the volume's vol_data.json (afterFailedCleanup: uncertain, uncertainIfRecordLeft.ts; kubelet
 * forgets the device or pod mount, and its files stay for ever).
 */
import { CSIKeepUncertainMountOnFinalError } from '../../features/features.js';
import type { FinishedErrorDecision, FinishedErrorSite } from '../../volume/csi/csiHooks.js';
import { csiLog } from '../../volume/csi/csiUtil.js';
import type { VolumeHost } from '../../volume/volumeHost.js';
import type { NodevolGate } from '../nodevolGate.js';
import './mounterArgs.js';
import { uncertainIfDone } from './uncertainIfDone.js';
import { uncertainIfRecordLeft } from './uncertainIfRecordLeft.js';

export const keepUncertainMountOnFinalError: NodevolGate = {
  name: CSIKeepUncertainMountOnFinalError,
  proofScenarios: ['listed-restage-fails', 'staged-then-failed', 'published-then-failed', 'block-publish-timeout-then-failed', 'publish-failed-cleanup-read-only'],
  doc: 'csikeepuncertainmountonfinalerror',
  create: (host) => ({
    operationGenerator: {
      // A final error of MountDevice / SetUpDevice keeps an uncertain device's staging dir and
      // record (it may be staged); one of SetUp keeps an uncertain pod mount's, which TearDown
      // unpublishes it with.
      mounterArgs: (step, vtm, asw, args) => {
        if (step === 'device') return asw.getDeviceMountState(vtm.volumeName) === 'DeviceMountUncertain' ? { ...args, keepStagingOnFinalError: true } : args;
        return asw.getVolumeMountState(vtm.volumeName, vtm.podName) === 'VolumeMountUncertain' ? { ...args, keepTargetOnFinalError: true } : args;
      },
      // A final error leaves any uncertain state uncertain.
      deviceStaysUncertain: () => true,
      volumeMountStaysUncertain: () => true,
    },
    csi: {
      uncertainAfterFinishedError: uncertainIfDone,
      onFinishedError: (site) => keepOrCleanUp(host, site),
      afterFailedCleanup: (site) => uncertainIfRecordLeft(host, site),
    },
  }),
};

function keepOrCleanUp(host: VolumeHost, { operation, step, path, args }: FinishedErrorSite): FinishedErrorDecision {
  const log = host.logger.v(2);
  if (operation === 'SetUp') {
    if (args.keepTargetOnFinalError !== true) return 'cleanup';
    // The driver may still have the target published (from before a reboot, or by a call that
    // timed out); its record is what TearDown unpublishes it with.
    log.info(csiLog('mounter.SetUpAt keeps the pod volume dir and its volume data after an error: the target may still be published'), { dir: path });
    return 'keep';
  }
  if (args.keepStagingOnFinalError !== true) return 'cleanup';
  // An uncertain device (found on disk at reconstruction, or an earlier call timed out) may be
  // staged; a file that could not be written says nothing about it. Uncertain: the device keeps
  // its state and its record (the old file is intact: the write is atomic).
  if (step === 'saveVolumeData') return 'uncertain';
  if (operation === 'MountDevice') {
    log.info(csiLog('attacher.MountDevice keeps the staging dir and its volume data after a final error: the device may still be staged'), { deviceMountPath: path });
  } else {
    log.info(csiLog('blockMapper.SetUpDevice keeps the staging dir and the volume data after a final error: the device may still be staged'), { stagingPath: path });
  }
  return 'keep';
}
