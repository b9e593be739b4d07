/**
 * The lock of a kubelet root dir, `<root-dir>/nodevol/lock/` (src/adapters/node/processLock.ts):
 * `nodevol agent` holds it for its lifetime and `nodevol recover --yes` while it runs, so that two
 * nodevol processes never unstage, remove or stage in one root dir at once (one could remove
 * what the other just staged). A read-only command (the audit, a dry run) takes no lock.
 */
import { realpathSync } from 'node:fs';
import * as path from 'node:path';

import { decodeFsName, fsPath } from '../adapters/node/nodeFs.js';
import { acquireProcessLock, describeBusyLock, processLockHolder, type BusyLock, type HeldLock } from '../adapters/node/processLock.js';
import { STUCK_OPERATIONS_DIR_NAME } from '../kubelet/stuckOperationsFile.js';
import { errorMessage } from '../ports/fs.js';

/** The lock dir of a (real) root dir. */
export function rootDirLockDir(realRootDir: string): string {
  return path.posix.join(realRootDir, STUCK_OPERATIONS_DIR_NAME, 'lock');
}

/** The root dir's real path as the FileSystem adapters spell it, or undefined when it cannot be resolved (the command reports that itself). */
export function realRootDirOf(rootDir: string): string | undefined {
  try {
    return decodeFsName(realpathSync.native(fsPath(path.resolve(rootDir)), { encoding: 'buffer' }));
  } catch {
    return undefined;
  }
}

/** The lock held, who holds it instead, or why it could not be taken. */
export type RootDirLock = { readonly lock: HeldLock; readonly realRootDir: string } | { readonly busy: BusyLock } | { readonly error: string };

/** Takes the lock of `rootDir` for `command`; undefined when the root dir does not resolve. */
export async function lockRootDir(rootDir: string, command: string): Promise<RootDirLock | undefined> {
  const realRootDir = realRootDirOf(rootDir);
  if (realRootDir === undefined) return undefined;
  try {
    const taken = await acquireProcessLock({ base: realRootDir, dir: rootDirLockDir(realRootDir), command });
    return taken.held ? { lock: taken, realRootDir } : { busy: taken };
  } catch (err) {
    return { error: errorMessage(err) };
  }
}

/** Who holds the lock of `rootDir`, read-only; undefined when nobody does or it cannot be told. */
export async function rootDirLockHolder(rootDir: string): Promise<BusyLock | undefined> {
  const realRootDir = realRootDirOf(rootDir);
  if (realRootDir === undefined) return undefined;
  try {
    return await processLockHolder(realRootDir, rootDirLockDir(realRootDir));
  } catch {
    return undefined;
  }
}

/** Why the lock of a root dir was not taken: another process holds it, or it could not be taken at all. */
export type RootDirLockRefusal = { readonly busy: BusyLock; readonly message: string } | { readonly error: string; readonly message: string };

/**
 * Runs `run` holding the lock of `rootDir` for `command`, and releases it however `run` ends;
 * `refused` answers instead when the lock is held or cannot be taken (its `message` ends with
 * "one nodevol agent or recover --yes acts on a root dir at a time" when held). `run` gets the
 * real root dir whose lock is held, or undefined when the root dir did not resolve (the command
 * reports that itself; nothing is held then).
 */
export async function withRootDirLock<T>(
  rootDir: string,
  command: string,
  run: (lockedRealRootDir: string | undefined) => Promise<T>,
  refused: (why: RootDirLockRefusal) => T,
): Promise<T> {
  const taken = await lockRootDir(rootDir, command);
  if (taken !== undefined && !('lock' in taken)) {
    return refused(
      'busy' in taken
        ? { busy: taken.busy, message: `${describeBusyLock(taken.busy)}: one nodevol agent or recover --yes acts on a root dir at a time` }
        : { error: taken.error, message: taken.error },
    );
  }
  try {
    return await run(taken?.realRootDir);
  } finally {
    await taken?.lock.release();
  }
}
