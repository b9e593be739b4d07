/**
 * Root-dir confinement of the paths the volume plugins hand to a driver or to umount (docs/security.md):
 * a path must be a normalized path strictly under the root dir, with no symlink component below
 * the root. Errors are CsiPathError (its historical name: CSI is the only plugin); `log` adds the
 * caller's log prefix.
 */
import * as path from 'node:path/posix';

import { errorMessage, escapeUndecodable, isNotExist } from '../../ports/fs.js';
import type { VolumeHost } from '../volumeHost.js';

export class CsiPathError extends Error {
  override readonly name = 'CsiPathError';
}

/** Refuses any path outside the root dir: nodevol never removes what it did not prove safe. */
export function assertPathUnderRoot(host: VolumeHost, p: string, log: (msg: string) => string = (m) => m): void {
  const normalized = path.normalize(p);
  if (normalized !== p || !host.layout.contains(p) || p === host.layout.rootDir) {
    throw new CsiPathError(log(`refusing to touch ${JSON.stringify(p)}: not a normalized path under the root dir ${host.layout.rootDir}`));
  }
}

/**
 * Proves that `p` lies inside the root dir with no symlink in any component below it, before it
 * is handed to a driver (NodeUnpublish/NodeUnstage) or to umount: a driver's umount follows a
 * symlink, so a pod volume dir whose `mount` points elsewhere would unmount whatever is there.
 * Components that do not exist end the walk (nothing below them can be a symlink). Throws a
 * CsiPathError naming the symlink, and the caller calls nothing.
 */
export async function assertPathConfined(host: VolumeHost, p: string, what: string, log: (msg: string) => string = (m) => m): Promise<void> {
  if (/[\uDC80-\uDCFF]/.test(p)) {
    // CSI paths are protobuf strings: bytes that are not UTF-8 would reach the driver mangled.
    throw new CsiPathError(log(`refusing to hand ${escapeUndecodable(p)} to ${what}: the path is not valid UTF-8 and cannot be sent over CSI as it is`));
  }
  assertPathUnderRoot(host, p, log);
  // One realpath instead of an lstat per component: with the root dir a real path (the agent
  // resolves it at start), a path that is its own real path has no symlink anywhere below it. Any
  // other answer (a symlink, a missing component, an error, a root that is not real) takes the
  // walk, which names what it found.
  try {
    if ((await host.fs.realpath(p)) === p) return;
  } catch {
    // The walk decides.
  }
  const root = host.layout.rootDir;
  let cur = root;
  for (const part of p.slice(root.length + (root.endsWith('/') ? 0 : 1)).split('/')) {
    cur = path.join(cur, part);
    let type: string;
    try {
      type = (await host.fs.lstat(cur)).type;
    } catch (err) {
      if (isNotExist(err)) return;
      throw new CsiPathError(log(`refusing to hand ${p} to ${what}: cannot check ${cur}: ${errorMessage(err)}`));
    }
    if (type === 'symlink') {
      throw new CsiPathError(
        log(`refusing to hand ${p} to ${what}: ${cur} is a symlink (paths given to a driver or to umount must lie inside the root dir ${root} with no symlink component)`),
      );
    }
  }
}
