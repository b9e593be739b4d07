/**
 * After a final NodeStageVolume / NodePublishVolume error: whether the driver's work shows at the
 * staging path or target anyway (gate CSIKeepUncertainMountOnFinalError).
 */
import { errorMessage, isNotExist } from '../../ports/fs.js';
import { csiLog, isDirMounted } from '../../volume/csi/csiUtil.js';
import { UncertainProgressError } from '../../volume/util/errors.js';
import type { VolumeHost } from '../../volume/volumeHost.js';

/**
 * Whether `p` shows that the driver did the work anyway: it is a mount point, or (a raw block
 * staging dir, `orNotEmpty`) holds anything, since kubelet made it empty. When that cannot be
 * told (the check itself fails) it counts as shown: the cost is one idempotent call later.
 * Returns the error to throw instead (uncertain, same text), or undefined when nothing shows.
 */
export async function uncertainIfDone(host: VolumeHost, err: unknown, p: string, caller: string, opts: { readonly orNotEmpty?: boolean } = {}): Promise<UncertainProgressError | undefined> {
  let shown: boolean;
  try {
    shown = (await isDirMounted(host, p)) || (opts.orNotEmpty === true && (await holdsAnything(host, p)));
  } catch {
    shown = true;
  }
  if (!shown) return undefined;
  host.logger.info(csiLog(`${caller} failed, but the driver's work is there: uncertain, the path and its record stay`), { path: p, err: errorMessage(err) });
  return new UncertainProgressError(errorMessage(err));
}

/** Whether directory `p` has any entry; a missing one has none. */
async function holdsAnything(host: VolumeHost, p: string): Promise<boolean> {
  try {
    return (await host.fs.readdir(p)).length > 0;
  } catch (err) {
    if (isNotExist(err)) return false;
    throw err;
  }
}
