/**
 * The driver call of a stage or publish, written once for its four callers: MountDevice
 * (csi_attacher.go), SetUp (csi_mounter.go SetUpAt), SetUpDevice and MapPodDevice (csi_block.go
 * stageVolumeForBlock / publishVolumeForBlock). In order:
 *  1. csi_client.go's access mode: one NodeGetCapabilities call for SINGLE_NODE_MULTI_WRITER,
 *     whose failure is a final error;
 *  2. NodeStageVolume / NodePublishVolume, whose error is classified as kubelet does: uncertain
 *     (it may still be in progress) or final;
 *  3. after a final error, the uncertainAfterFinishedError hook (nodevol: the driver's work shows
 *     at the path after all; kubelet's default changes nothing);
 *  4. then kubelet's removal of what the operation made, unless the onFinishedError hook keeps it;
 *     when that removal fails (kubelet only logs it), the afterFailedCleanup hook (nodevol: an
 *     uncertain error, so that what is left is torn down; kubelet's default: the error stands).
 *
 * Where the callers differ, the difference is a field of {@link DriverCall}, one per site:
 *
 * | | MountDevice | SetUp | SetUpDevice | MapPodDevice |
 * |---|---|---|---|---|
 * | `removal` (kubelet's) | removeMountDir of the staging path | removeMountDir of the target | cleanupOrphanDeviceFiles | none |
 * | `accessModeFailure` | `handled` | `handled` | `handled` | `returned` |
 * | `workShown.orNotEmpty` | no | no | yes (kubelet made the staging dir empty) | no |
 *
 * `accessModeFailure: 'returned'` is how nodevol's MapPodDevice has handled a failed access-mode
 * query so far (returned as it is, with no hook asked); the other sites handle it like a failed
 * call.
 */
import { errorMessage } from '../../ports/fs.js';
import type { CsiNodeClient, VolumeCapability } from '../../ports/csi.js';
import type { Spec } from '../spec.js';
import { isOperationFinishedError, UncertainProgressError } from '../util/errors.js';
import type { VolumeHost } from '../volumeHost.js';
import type { CsiHooks, FinishedErrorSite } from './csiHooks.js';
import { accessModeMapperFor, classifyCsiError, csiLog } from './csiUtil.js';

export interface DriverCall {
  /** kubelet's function, at the head of the error texts: `<caller> failed: …`. */
  readonly caller: 'attacher.MountDevice' | 'mounter.SetupAt' | 'blockMapper.stageVolumeForBlock' | 'blockMapper.publishVolumeForBlock';
  /** The volume, whose first access mode (ReadWriteOnce by default) is mapped. */
  readonly spec: Spec;
  /** Sends the call with the mapped access mode: builds the request and returns the call's promise. */
  readonly send: (accessMode: VolumeCapability['accessMode']) => Promise<void>;
  /** The staging path or the target. */
  readonly path: string;
  /** What uncertainAfterFinishedError is told: the operation, for its log line, and whether a non-empty dir counts as the driver's work. */
  readonly workShown: { readonly caller: string; readonly orNotEmpty?: boolean };
  /**
   * kubelet's removal of what the operation made after a final error (`remove`, resolving to
   * whether it succeeded: its failure is logged, not returned), with what the onFinishedError
   * hook sees, and the directory of the record it removes (`dataDir`, for afterFailedCleanup);
   * `none` where kubelet removes nothing.
   */
  readonly removal: ({ readonly remove: () => Promise<boolean>; readonly dataDir: string } & Omit<FinishedErrorSite, 'path'>) | 'none';
  /** A failed access-mode query: `handled` as a failed call is (steps 3 and 4), or `returned` as it is. */
  readonly accessModeFailure: 'handled' | 'returned';
}

/** Steps 1-4 above; rejects with the error the operation returns. */
export async function stageOrPublish(host: VolumeHost, hooks: CsiHooks, client: CsiNodeClient, call: DriverCall): Promise<void> {
  let mapped = false;
  try {
    const accessMode = await accessModeMapperFor(client).catch((err: unknown) => {
      throw new Error(csiLog(`${call.caller} failed: ${errorMessage(err)}`));
    });
    mapped = true;
    await call.send(accessMode(call.spec)).catch((err: unknown) => {
      throw classifyCsiError(err, `${call.caller} failed`);
    });
  } catch (err) {
    if (isOperationFinishedError(err) && (mapped || call.accessModeFailure === 'handled')) {
      const uncertain = await hooks.uncertainAfterFinishedError(host, err, call.path, call.workShown.caller, call.workShown.orNotEmpty === true ? { orNotEmpty: true } : undefined);
      if (uncertain !== undefined) throw uncertain;
      const { removal } = call;
      if (removal !== 'none') {
        const decision = hooks.onFinishedError?.({ operation: removal.operation, step: removal.step, path: call.path, args: removal.args }) ?? 'cleanup';
        if (decision === 'uncertain') throw new UncertainProgressError(errorMessage(err));
        if (decision === 'cleanup' && !(await removal.remove()) && hooks.afterFailedCleanup !== undefined) {
          const site = { operation: removal.operation, step: removal.step, path: call.path, args: removal.args, dataDir: removal.dataDir };
          if ((await hooks.afterFailedCleanup(site)) === 'uncertain') throw new UncertainProgressError(errorMessage(err));
        }
      }
    }
    throw err;
  }
}
