/**
 * The points of the CSI volume plugin (csi_attacher.go, csi_mounter.go, csi_block.go and
 * KEP-6058's global listing) where nodevol may decide differently from kubelet. The plugin is
 * kubelet's: it asks about no gate but KEP-6058's, and at each of these points it calls a hook
 * only when one is set. An absent hook is kubelet's behaviour. The hooks are implemented one
 * folder per gate in src/nodevol/ and composed once per node life (composeNode); which gate sets
 * which hook: ARCHITECTURE.md, "The kubelet copy and nodevol's gates".
 *
 * How a hook is called, so that the simulator's interleavings stay those of kubelet's path (a
 * microtask turn more or less reorders concurrent operations):
 * - an optional hook as `if (hooks.x !== undefined) await hooks.x(…)`, never `await hooks.x?.(…)`
 *   (which awaits undefined: one turn more when it is absent);
 * - a hook is the function the work is (or returns its promise), never an async wrapper of it;
 * - a synchronous decision stays synchronous;
 * - the one required hook sits where the path always awaited a check: its kubelet default
 *   returns a settled promise (one turn, as the awaited check that returned at once).
 */
import type { CsiNodeClient } from '../../ports/csi.js';
import type { GlobalVolume, MounterArgs } from '../plugins.js';
import type { UncertainProgressError } from '../util/errors.js';
import type { VolumeHost } from '../volumeHost.js';
import type { SkippedGlobalDir } from './globalVolumes.js';

/** A stage about to be sent: MountDevice (csi_attacher.go) or SetUpDevice (csi_block.go stageVolumeForBlock). */
export interface StageTarget {
  readonly volumeHandle: string;
  readonly stagingPath: string;
  /** The directory of the volume's vol_data.json: the volume dir; for raw block volumeDevices/<spec>/data. */
  readonly dataDir: string;
  readonly caller: 'attacher.MountDevice' | 'blockMapper.SetUpDevice';
}

/** A finished-operation error after which kubelet removes what the operation made. */
export interface FinishedErrorSite {
  /** kubelet's operation: MountDevice (csi_attacher.go), SetUp (csi_mounter.go), SetUpDevice (csi_block.go). */
  readonly operation: 'MountDevice' | 'SetUp' | 'SetUpDevice';
  /**
   * What failed: the write of the volume data file, the driver's call, a capability check before
   * it (SetUpDevice's STAGE_UNSTAGE_VOLUME, MountDevice's VOLUME_MOUNT_GROUP), or SetUpDevice's
   * MkdirAll of the staging path.
   */
  readonly step: 'saveVolumeData' | 'NodeStageVolume' | 'NodePublishVolume' | 'NodeGetCapabilities' | 'MkdirAll';
  /** The staging path, or the pod's target. */
  readonly path: string;
  /** The operation's mounter args, as the operation generator passed them. */
  readonly args: MounterArgs;
}

/**
 * What follows a finished-operation error: `cleanup`, kubelet's removal; `keep`, no removal and
 * kubelet's error; `uncertain`, no removal and an UncertainProgressError with the same text.
 */
export type FinishedErrorDecision = 'cleanup' | 'keep' | 'uncertain';

/**
 * A finished-operation error after which kubelet's removal ran and failed (kubelet only logs
 * that: csi_mounter.go SetUpAt's and csi_attacher.go MountDevice's deferred removeMountDir,
 * csi_block.go stageVolumeForBlock's cleanupOrphanDeviceFiles), so what the operation made may
 * still be there.
 */
export interface FailedCleanupSite extends FinishedErrorSite {
  /**
   * The directory of the operation's vol_data.json, which the removal would have deleted: the pod
   * volume dir (SetUp), the volume dir (MountDevice), volumeDevices/<spec>/data (SetUpDevice).
   */
  readonly dataDir: string;
}

/**
 * What follows a failed removal: `forget`, kubelet's (the operation's error stands, so the device
 * or pod mount is not mounted); `uncertain`, an UncertainProgressError with the same text, so
 * that the device or pod mount is torn down when no pod wants it.
 */
export type FailedCleanupDecision = 'forget' | 'uncertain';

/** The CSI plugin's hooks. Absent: kubelet. */
export interface CsiHooks {
  // ---- csi_attacher.go MountDevice ----
  /**
   * First of all: a claim on the volume dir (`<driver>/<sha256(handle)>`) for the whole call,
   * ended when MountDevice returns. A function when the claim is taken at once, else a promise of
   * it.
   */
  readonly beginMountDevice?: (volumeDir: string) => (() => void) | Promise<() => void>;
  // ---- MountDevice (a driver with STAGE_UNSTAGE_VOLUME) and csi_block.go SetUpDevice ----
  /** After the stage secrets, before anything in the volume dir changes; rejects to stop the stage. */
  readonly beforeNodeStageVolume?: (host: VolumeHost, client: CsiNodeClient, target: StageTarget) => Promise<void>;
  // ---- csi_block.go ----
  /** SetUpDevice: right after MkdirAll of the staging path. */
  readonly stagingPathCreated?: (host: VolumeHost, stagingPath: string) => Promise<void>;
  /** MapPodDevice: after MkdirAll of the publish dir, before NodePublishVolume at `publishPath`. */
  readonly publishPathParentCreated?: (host: VolumeHost, publishPath: string) => Promise<void>;
  /** TearDownDevice: NodeUnstageVolume also when the staging path is gone (kubelet skips it). */
  readonly unstageWhenStagingPathGone?: boolean;
  // ---- finished-operation errors of NodeStageVolume / NodePublishVolume ----
  /**
   * After a finished-operation error of the driver's call at `path`: the error to return instead
   * (uncertain), or undefined for kubelet's. REQUIRED: awaited on every such error (the kubelet
   * default, {@link upstreamCsiHooks}, resolves to undefined at once).
   */
  readonly uncertainAfterFinishedError: (
    host: VolumeHost,
    err: unknown,
    path: string,
    caller: string,
    opts?: { readonly orNotEmpty?: boolean },
  ) => Promise<UncertainProgressError | undefined>;
  /** Where kubelet removes what a failed operation made: whether it does. Synchronous. Absent: `cleanup`. */
  readonly onFinishedError?: (site: FinishedErrorSite) => FinishedErrorDecision;
  /**
   * After kubelet's removal that followed a finished-operation error failed (it was logged, as
   * kubelet logs it): whether the error becomes uncertain. Called only then. Absent: `forget`.
   */
  readonly afterFailedCleanup?: (site: FailedCleanupSite) => Promise<FailedCleanupDecision>;
  // ---- UnmountDevice / TearDownDevice ----
  /** Around NodeUnstageVolume: recorded before it is sent, until it returned OK. */
  readonly nodeUnstageVolumeRecord?: {
    /** TearDownDevice only: whether the block data dir exists (without it nothing is recorded). */
    readonly dataDirExists: (host: VolumeHost, dataDir: string) => Promise<boolean>;
    readonly started: (host: VolumeHost, dataDir: string, caller: string) => Promise<void>;
    readonly ended: (host: VolumeHost, dataDir: string) => Promise<void>;
  };
  /**
   * UnmountDevice found no vol_data.json in the volume dir and returns success, as kubelet does
   * ("skipped because volume data file does not exist"); called with that volume dir first.
   */
  readonly volumeDataMissingAtUnmountDevice?: (volumeDir: string) => Promise<void>;
  // ---- KEP-6058 ListGlobalVolumes ----
  /** For each directory the listing skipped, in the listing's order: a volume to list after all, or undefined. */
  readonly globalDirSkipped?: (skipped: SkippedGlobalDir) => Promise<GlobalVolume | undefined>;
}

/** Kubelet's CSI plugin: no optional hook, and the required one changes nothing (a settled promise: one turn). */
export const upstreamCsiHooks: CsiHooks = {
  uncertainAfterFinishedError: () => Promise.resolve(undefined),
};
