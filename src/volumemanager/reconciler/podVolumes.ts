/**
 * getVolumesFromPodDir (reconstruct_common.go): every reconstruction candidate
 * under <root>/pods. For each pod directory, each plugin directory under volumes/ (Filesystem)
 * and volumeDevices/ (Block), every child - file, directory or symlink - is a candidate; nothing
 * checks that a mount exists.
 */
import { errorMessage, type DirEntry, type FileSystem, type FileType } from '../../ports/fs.js';
import type { Logger } from '../../ports/logger.js';
import { VOLUME_DEVICES_DIR_NAME, VOLUMES_DIR_NAME, type KubeletLayout } from '../../layout/layout.js';
import { joinName } from '../../layout/joinName.js';
import { unescapeQualifiedName, type UniquePodName } from '../../layout/names.js';
import type { PersistentVolumeMode } from '../../api/core.js';
import { rootEscapeReason } from '../../layout/confinement.js';
import { mapConcurrently } from '../../ports/concurrency.js';

/**
 * How many reconstruction reads run at once (libuv's thread pool has four threads by default).
 * Reconstruction reads a thousand pod directories and volume data files at start: one awaited
 * file system call at a time leaves the thread pool idle while readiness waits.
 */
export const RECONSTRUCTION_CONCURRENCY = 16;

/** podVolume: one reconstruction candidate. */
export interface PodVolume {
  readonly podName: UniquePodName;
  /** The directory entry name: the escaped spec name. */
  readonly volumeSpecName: string;
  readonly volumePath: string;
  /** Unescaped plugin name, e.g. kubernetes.io/csi. */
  readonly pluginName: string;
  readonly volumeMode: PersistentVolumeMode;
  /** Type of the candidate entry itself (a symlink is never followed by the walk). */
  readonly entryType: FileType;
  /**
   * The walk reached this directory from a pods dir checked to lie inside the root dir, through
   * real directories only: reading inside it needs no further symlink resolution.
   */
  readonly parentsVerified: boolean;
}

/** A directory the walk could not read (kubelet logs these and goes on). */
export interface PodDirProblem {
  readonly path: string;
  readonly error: string;
}

export interface PodDirWalk {
  readonly volumes: readonly PodVolume[];
  readonly problems: readonly PodDirProblem[];
}

const SUBDIRS: ReadonlyArray<readonly [string, PersistentVolumeMode]> = [
  [VOLUMES_DIR_NAME, 'Filesystem'],
  [VOLUME_DEVICES_DIR_NAME, 'Block'],
];

/** Rejects only when <root>/pods itself cannot be read (kubelet then skips reconstruction). */
export async function getVolumesFromPodDir(
  fs: FileSystem,
  layout: KubeletLayout,
  logger: Logger,
  realRootDir?: string,
): Promise<PodDirWalk> {
  const podsDir = layout.podsDir();
  const volumes: PodVolume[] = [];
  const problems: PodDirProblem[] = [];
  const escape = realRootDir === undefined ? undefined : await rootEscapeReason(fs, podsDir, realRootDir);
  if (escape !== undefined) {
    // Never listed: pods/ (or an ancestor) is a symlink leading out of the root dir, or a loop.
    await fs.lstat(podsDir); // a missing pods dir rejects with ENOENT, as readdir would
    const err = new Error(escape);
    problems.push({ path: podsDir, error: err.message });
    logger.error(err, 'Could not read directory', { path: podsDir });
    return { volumes, problems };
  }
  const pods = sortByName(await fs.readdir(podsDir)).filter((p) => p.type === 'directory');
  // kubelet skips a pod whose volumes dir cannot be read without a word (it may not exist), and
  // logs an unreadable plugin dir as an error; nodevol records both as problems for the audit.
  // The pod directories are read concurrently; what each found is recorded (and logged) in name
  // order, as a walk one directory at a time would.
  const v5 = logger.enabled(5);
  const walks = await mapConcurrently(pods, RECONSTRUCTION_CONCURRENCY, (pod) => walkPodDir(fs, joinName(podsDir, pod.name), pod.name as UniquePodName, realRootDir !== undefined));
  for (const walk of walks) {
    for (const e of walk.events) {
      if (e.kind === 'volume') {
        if (v5) logger.v(5).info('Volume path from volume plugin directory', { podName: e.volume.podName, volumePath: e.volume.volumePath });
        volumes.push(e.volume);
      } else if (e.kind === 'problem') {
        problems.push({ path: e.path, error: errorMessage(e.err) });
      } else if (e.kind === 'pluginProblem') {
        problems.push({ path: e.path, error: errorMessage(e.err) });
        logger.error(e.err, 'Could not read volume plugin directory', { volumePluginPath: e.path });
      } else {
        logger.v(4).info('Not following a symlinked volumes directory', { path: e.path });
      }
    }
  }
  if (logger.enabled(4)) {
    for (const v of volumes) logger.v(4).info('Get volume from pod directory', { path: podsDir, volume: v.volumePath });
  }
  return { volumes, problems };
}

/** What the walk of one pod directory found, in the order a sequential walk meets it. */
type WalkEvent =
  | { readonly kind: 'volume'; readonly volume: PodVolume }
  | { readonly kind: 'problem'; readonly path: string; readonly err: unknown }
  | { readonly kind: 'pluginProblem'; readonly path: string; readonly err: unknown }
  | { readonly kind: 'symlinkedVolumesDir'; readonly path: string };

async function walkPodDir(fs: FileSystem, podDir: string, podName: UniquePodName, confined: boolean): Promise<{ events: WalkEvent[] }> {
  const events: WalkEvent[] = [];
  let podEntries: DirEntry[];
  try {
    podEntries = await fs.readdir(podDir);
  } catch (err) {
    events.push({ kind: 'problem', path: podDir, err });
    return { events };
  }
  for (const [sub, volumeMode] of SUBDIRS) {
    const subDir = joinName(podDir, sub);
    const subEntry = podEntries.find((e) => e.name === sub);
    if (subEntry === undefined) continue;
    if (subEntry.type !== 'directory') {
      // Never followed: a symlink here could lead out of the root dir (a nodevol refusal).
      events.push({ kind: 'problem', path: subDir, err: new Error(`${subDir} is a ${subEntry.type}, not a directory; not followed`) });
      if (subEntry.type === 'symlink') events.push({ kind: 'symlinkedVolumesDir', path: subDir });
      continue;
    }
    let plugins: DirEntry[];
    try {
      plugins = sortByName(await fs.readdir(subDir)).filter((p) => p.type === 'directory' || p.type === 'symlink');
    } catch (err) {
      events.push({ kind: 'problem', path: subDir, err });
      continue;
    }
    for (const plugin of plugins) {
      const pluginDir = joinName(subDir, plugin.name);
      if (plugin.type === 'symlink') {
        events.push({ kind: 'pluginProblem', path: pluginDir, err: new Error(`${pluginDir} is a symlink; not followed`) });
        continue;
      }
      let children: DirEntry[];
      try {
        children = sortByName(await fs.readdir(pluginDir));
      } catch (err) {
        events.push({ kind: 'pluginProblem', path: pluginDir, err });
        continue;
      }
      const pluginName = unescapeQualifiedName(plugin.name);
      for (const child of children) {
        events.push({
          kind: 'volume',
          volume: {
            podName,
            volumeSpecName: child.name,
            volumePath: joinName(pluginDir, child.name),
            pluginName,
            volumeMode,
            entryType: child.type,
            parentsVerified: confined && child.type === 'directory',
          },
        });
      }
    }
  }
  return { events };
}

function sortByName(entries: DirEntry[]): DirEntry[] {
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
