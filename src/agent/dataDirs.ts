/**
 * kubelet's setupDataDirs: before the volume manager starts, the directories it reads exist
 * (`pods/`, `plugins/`, `plugins_registry/` under --root-dir, mode 0750), so that the first
 * start on a fresh root dir reconstructs an empty node instead of logging "cannot read pods/".
 * Existing directories are left as they are; nothing outside the root dir is created.
 */
import type { FileSystem } from '../ports/fs.js';
import type { KubeletLayout } from '../layout/layout.js';

/** kubelet's permission bits for its data dirs. */
export const DATA_DIR_MODE = 0o750;

/** Rejects with the failing path in the message when a dir cannot be created (e.g. a file is in the way). */
export async function setupDataDirs(fs: FileSystem, layout: KubeletLayout): Promise<void> {
  for (const dir of [layout.podsDir(), layout.pluginsDir(), layout.pluginsRegistryDir()]) {
    try {
      await fs.mkdir(dir, { recursive: true, mode: DATA_DIR_MODE });
    } catch (err) {
      throw new Error(`error creating data directory ${dir}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}
