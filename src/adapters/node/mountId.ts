/**
 * The kernel's id of the mount a path lies on, for the mount-point check without the mount table:
 * the path is opened with O_PATH (which reads nothing from the filesystem and needs no permission
 * on the file itself) and `mnt_id` is read from /proc/self/fdinfo/<fd> (Linux >= 3.15). A
 * directory is a mount point iff its mount id differs from the one of `<dir>/..`: at the root of
 * a mount the kernel resolves ".." in the mount below, anywhere else in the same mount. That sees
 * bind mounts of the same filesystem (which st_dev does not) and costs two opens and two small
 * procfs reads instead of reading and parsing the whole table, which at a thousand volumes holds
 * two thousand lines.
 *
 * Only a directory can be checked this way (".." of a file is ENOTDIR); callers keep the table
 * for the rest, for "/", and wherever the kernel does not report mnt_id.
 */
import { closeSync, open, readFileSync } from 'node:fs';

import { fsPath } from './fsNames.js';

export interface MountIdProbe {
  /**
   * The mount id of the mount `path` lies on (symlinks followed, as stat does); undefined when the
   * kernel does not report one. Rejects with the open's error (ENOENT, EACCES on a parent …).
   */
  mountIdOf(path: string): Promise<number | undefined>;
}

/**
 * O_PATH on the architectures that use the generic Linux open flags (alpha, parisc and sparc do
 * not; there the probe is not offered and the mount table is used).
 */
const O_PATH = 0o10000000;
const GENERIC_FLAG_ARCHES: ReadonlySet<string> = new Set(['x64', 'arm64', 'arm', 'ia32', 'riscv64', 'ppc64', 'ppc', 's390x', 'loong64', 'mips', 'mipsel', 'mips64el']);

/** The probe over the running kernel, or undefined where O_PATH is not known (not Linux, other flag values). */
export function liveMountIdProbe(): MountIdProbe | undefined {
  if (process.platform !== 'linux' || !GENERIC_FLAG_ARCHES.has(process.arch)) return undefined;
  return { mountIdOf: mountIdOfPath };
}

function openPath(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    open(fsPath(path), O_PATH, (err, fd) => (err === null ? resolve(fd) : reject(err)));
  });
}

async function mountIdOfPath(path: string): Promise<number | undefined> {
  const fd = await openPath(path);
  try {
    // procfs answers from memory: a synchronous read never waits on a filesystem.
    return parseMountId(readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1'));
  } finally {
    closeSync(fd);
  }
}

/** The `mnt_id:` field of an fdinfo text; undefined when absent or not a number. */
export function parseMountId(fdinfo: string): number | undefined {
  const m = /^mnt_id:\s*(\d+)\s*$/m.exec(fdinfo);
  if (m === null) return undefined;
  const id = Number(m[1]);
  return Number.isSafeInteger(id) ? id : undefined;
}

/**
 * Whether the directory `dir` is the root of a mount, by mount ids; undefined when the probe
 * cannot tell ("/" itself, no mnt_id). Rejects with the probe's error.
 */
export async function isMountRootByMountId(probe: MountIdProbe, dir: string): Promise<boolean | undefined> {
  const trimmed = dir.replace(/\/+$/, '');
  if (trimmed === '') return undefined;
  // Not path.join: it would fold the ".." away instead of letting the kernel resolve it.
  const [own, parent] = await Promise.all([probe.mountIdOf(trimmed), probe.mountIdOf(`${trimmed}/..`)]);
  if (own === undefined || parent === undefined) return undefined;
  return own !== parent;
}
