/**
 * Confinement to the root dir: whether a path, with every symlink resolved through the
 * FileSystem port, stays inside a directory. Everything nodevol reads or removes under
 * --root-dir is checked with these before it is followed.
 */
import { errorCode, errorMessage, type FileSystem } from '../ports/fs.js';

/** Whether the real path `real` is `root` or below it (both already resolved). */
export function isInsideDir(real: string, root: string): boolean {
  if (real === root) return true;
  const prefix = root.endsWith('/') ? root : `${root}/`;
  return real.startsWith(prefix);
}

/**
 * Whether `dir` resolves (every symlink followed) to `realRoot` or below it; false when it cannot
 * be resolved. Checking only that `dir` itself is not a symlink is not enough: any ancestor
 * between the root dir and `dir` (pods/, plugins/kubernetes.io/csi, ...) may be one.
 */
export async function resolvesInsideRoot(fs: FileSystem, dir: string, realRoot: string): Promise<boolean> {
  try {
    return isInsideDir(await fs.realpath(dir), realRoot);
  } catch {
    return false;
  }
}

/**
 * Why `dir` may not be walked from inside the root dir, in words naming the cause, or undefined
 * when it resolves to `realRoot` or below it: a symlink loop is "too many levels of symbolic
 * links (ELOOP)", not an escape from the root dir.
 */
export async function rootEscapeReason(fs: FileSystem, dir: string, realRoot: string): Promise<string | undefined> {
  let real: string;
  try {
    real = await fs.realpath(dir);
  } catch (err) {
    const code = errorCode(err);
    if (code === 'ELOOP') return `${dir}: too many levels of symbolic links (ELOOP); not followed`;
    return `${dir} cannot be resolved: ${code ?? errorMessage(err)}; not followed`;
  }
  return isInsideDir(real, realRoot) ? undefined : `${dir} resolves outside the root dir ${realRoot}; not followed`;
}
