/**
 * The two facts gate CSIKeepUncertainMountOnFinalError adds to kubelet's MounterArgs (index.ts's
 * mounterArgs hook sets them, its onFinishedError hook reads them): the volume/plugins.ts copy
 * declares kubelet's fields only. Like kubelet's own MounterArgs.ReconstructedVolume, they carry
 * an actual-state fact the operation generator knows into the plugin.
 */
declare module '../../volume/plugins.js' {
  interface MounterArgs {
    /** MountDevice / SetUpDevice of an uncertain device: a final error keeps its staging dir and its record. */
    readonly keepStagingOnFinalError?: boolean;
    /** SetUp of an uncertain pod mount: an error keeps its pod volume dir and its vol_data.json. */
    readonly keepTargetOnFinalError?: boolean;
  }
}

export {};
