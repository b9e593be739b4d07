/**
 * What the mock driver may touch. Every path it creates, mounts, unmounts or deletes is one the
 * CO handed it for a volume it knows, or the backing storage of such a volume under its state
 * dir; this module is the gate in front of each:
 *
 * - volume ids become path components under `<state-dir>/volumes/`: an id that is empty of
 *   meaning as a name (".", ".."), holds a path separator or NUL, or contains ".." is refused
 *   with INVALID_ARGUMENT;
 * - staging and target paths must be absolute and normalized, never "/" or a system directory
 *   (/etc, /usr, /proc, ...), and, when allowed roots are configured (`--allowed-root`, default
 *   the `--root-dir` kubelet root when given), strictly below one of them with no symlink in any
 *   component below it (a symlink swapped in would send a bind mount, an umount or a removal
 *   elsewhere). Refusals are INVALID_ARGUMENT naming the path and the rule.
 */
import * as posix from 'node:path/posix';

import { errorCode, errorMessage, type FileSystem } from '../ports/fs.js';
import { CsiStatusError } from '../adapters/grpc/server.js';
import { GrpcStatus } from '../ports/csi.js';
import { normalizeRoots } from '../adapters/node/beneath.js';

/** Directories a staging or target path may never be, nor (for the first group) lie under. */
const SYSTEM_TREES = ['/bin', '/boot', '/dev', '/etc', '/lib', '/lib32', '/lib64', '/libx32', '/proc', '/sbin', '/sys', '/usr'];
const SYSTEM_DIRS = ['/', '/home', '/media', '/mnt', '/opt', '/root', '/run', '/srv', '/tmp', '/var', '/var/lib', '/var/run'];

function invalid(details: string): CsiStatusError {
  return new CsiStatusError(GrpcStatus.INVALID_ARGUMENT, details);
}

/** Refuses a volume id that could escape `<state-dir>/volumes/` when used as a name there. */
export function checkVolumeId(volumeId: string): void {
  if (volumeId === '') return; // the handlers' own "missing" checks answer first
  if (volumeId.includes('/') || volumeId.includes('\\') || volumeId.includes('\0')) {
    throw invalid(`volume ID ${JSON.stringify(volumeId)} must not contain a path separator or NUL`);
  }
  if (volumeId === '.' || volumeId.includes('..')) throw invalid(`volume ID ${JSON.stringify(volumeId)} must not be "." or contain ".."`);
}

function isUnder(p: string, dir: string): boolean {
  return dir === '/' ? p !== '/' : p.startsWith(`${dir}/`);
}

/** Normalizes the allowed roots: absolute, no trailing slash, never "/" itself. */
export function normalizeAllowedRoots(roots: readonly string[]): string[] {
  return normalizeRoots(roots, 'allowed root');
}

/**
 * Checks a staging or target path the CO handed over. Resolves when it may be used; rejects
 * with INVALID_ARGUMENT otherwise.
 */
export async function checkCoPath(fs: FileSystem, p: string, what: string, allowedRoots: readonly string[]): Promise<void> {
  if (p === '') return;
  if (!posix.isAbsolute(p) || posix.normalize(p) !== p || (p.endsWith('/') && p !== '/')) {
    throw invalid(`${what} ${JSON.stringify(p)} must be an absolute, normalized path`);
  }
  if (SYSTEM_DIRS.includes(p) || SYSTEM_TREES.some((d) => p === d || isUnder(p, d))) {
    throw invalid(`${what} ${p} is a system directory; refusing to mount on, unmount or remove it`);
  }
  if (allowedRoots.length === 0) return;
  const root = allowedRoots.find((r) => isUnder(p, r));
  if (root === undefined) throw invalid(`${what} ${p} is not under an allowed root (${allowedRoots.join(', ')})`);
  let cur = root;
  for (const part of p.slice(root.length + 1).split('/')) {
    cur = posix.join(cur, part);
    let type: string;
    try {
      type = (await fs.lstat(cur)).type;
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return;
      throw invalid(`${what} ${p}: cannot check ${cur}: ${errorMessage(err)}`);
    }
    if (type === 'symlink') throw invalid(`${what} ${p}: ${cur} is a symlink; refusing to follow it`);
  }
}
