/**
 * nodevol's gates, each a folder of src/nodevol/ with its policy (ARCHITECTURE.md, "The kubelet
 * copy and nodevol's gates"). The order is the order of composition.
 */
import { durableBlockVolumePaths } from './durableBlockVolumePaths/index.js';
import { keepUncertainMountOnFinalError } from './keepUncertainMountOnFinalError/index.js';
import { listGlobalVolumesWithoutStagingDir } from './listGlobalVolumesWithoutStagingDir/index.js';
import type { NodevolGate } from './nodevolGate.js';
import { readWriteOncePodWaitsForUnreconstructedMounts } from './readWriteOncePodWaitsForUnreconstructedMounts/index.js';
import { retryReconstructionCleanup } from './retryReconstructionCleanup/index.js';
import { unpublishBeforeUnstageAfterReconstruction } from './unpublishBeforeUnstageAfterReconstruction/index.js';
import { unstageCompletesBeforeRestage } from './unstageCompletesBeforeRestage/index.js';

export const NODEVOL_GATES: readonly NodevolGate[] = [
  durableBlockVolumePaths,
  unstageCompletesBeforeRestage,
  retryReconstructionCleanup,
  unpublishBeforeUnstageAfterReconstruction,
  listGlobalVolumesWithoutStagingDir,
  keepUncertainMountOnFinalError,
  readWriteOncePodWaitsForUnreconstructedMounts,
];
