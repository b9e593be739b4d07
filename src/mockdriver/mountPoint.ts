/**
 * The mock driver's targeted mount-point check: is THIS path the root of a mount, asked of the
 * kernel about this path only, at a cost that does not depend on how many mounts the node has
 * (reading and parsing the whole of /proc/self/mountinfo per call made the driver's work grow
 * with the number of volumes).
 *
 * How: open the path and its parent directory (read-only, non-blocking so that a FIFO cannot
 * hold the call) and read each descriptor's `mnt_id` from /proc/self/fdinfo/<fd> (Linux >= 3.15).
 * A path is a mount point iff its mount differs from its parent's. Unlike a st_dev comparison,
 * this sees bind mounts of a directory of the same filesystem, which is what the mock driver
 * makes. Symlinks are resolved first (mount(8) follows them too); the mount table itself is
 * never read.
 */
import { constants, promises as fsp } from 'node:fs';
import * as posix from 'node:path/posix';

/** Thrown when the kernel does not report mnt_id (too old): the caller falls back to the mount table. */
export class MountIdUnavailableError extends Error {
  override readonly name = 'MountIdUnavailableError';
}

const FDINFO_MAX_BYTES = 4096;
const MNT_ID = /^mnt_id:\s*(\d+)\s*$/m;

/** The id of the mount `p` lies on (rejects with the open's errno, e.g. ENOENT). */
export async function mountIdOf(p: string): Promise<number> {
  const handle = await fsp.open(p, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const info = await fsp.open(`/proc/self/fdinfo/${handle.fd}`, constants.O_RDONLY);
    let text: string;
    try {
      const buf = Buffer.alloc(FDINFO_MAX_BYTES);
      const { bytesRead } = await info.read(buf, 0, FDINFO_MAX_BYTES, 0);
      text = buf.subarray(0, bytesRead).toString('utf8');
    } finally {
      await info.close();
    }
    const m = MNT_ID.exec(text);
    if (m?.[1] === undefined) throw new MountIdUnavailableError(`/proc/self/fdinfo has no mnt_id for ${p}`);
    return Number(m[1]);
  } finally {
    await handle.close();
  }
}

/** Whether `p` (after resolving symlinks) is the root of a mount. "/" always is. */
export async function isMountPointByMountId(p: string): Promise<boolean> {
  const real = await fsp.realpath(p);
  if (real === '/') return true;
  const [own, parent] = await Promise.all([mountIdOf(real), mountIdOf(posix.dirname(real))]);
  return own !== parent;
}
