/**
 * kubelet's cleanupOrphanedPodDirs (pkg/kubelet/kubelet_volumes.go): the
 * directories of pods that are gone are removed once nothing is mounted in them and no volume is
 * left, so that a node returns to a clean root dir. The agent runs one sweep every housekeeping
 * period (kubelet: 2 s).
 *
 * A pod dir `<root>/pods/<uid>` is an orphan when its uid is neither a pod the API server binds
 * to this node nor a pod in the desired or actual state of world. For each orphan, in order:
 * 1. skipped (an "error pod") while the actual state still has a volume of the pod, while the
 *    mount table shows any mount at or under the pod dir, or while `volumeDevices/<plugin>/`
 *    still holds an entry (a block volume);
 * 2. the pod's volume dirs are removed with rmdir only - for CSI the `<volume>/mount` dir first
 *    (and nodevol's own `vol_data.json.tmp` of a SetUp cut short, see
 *    removeInterruptedVolumeDataWrite) - and then `volumes/` is removed directories-only: a
 *    regular file left there (a `vol_data.json` whose TearDown did not finish) fails it with
 *    "not a directory" and the pod is kept, as in kubelet;
 * 3. every other subdir is removed (files too) without crossing a mount point, then the pod dir.
 *
 * Both removals of whole trees (2's `volumes/`, 3's subdirs) go through the FileSystem port's
 * removeTreeOneFilesystem: on a real node, one directory descriptor per directory and every
 * removal relative to it, so a directory swapped for a symlink mid-sweep cannot send a removal
 * out of the tree (kubelet's RemoveAllOneFilesystem walks by path and can be sent out so).
 *
 * Safety beyond kubelet's own checks: nothing is swept before the cluster view answered (an
 * unanswered list is never read as "every pod is gone"); the mount table is read once per sweep
 * and a pod dir holding any mount is left whole; each directory is checked again right before it
 * is descended into (a mount point is refused: on a real node by comparing the mounts of the open
 * descriptors, elsewhere with isLikelyNotMountPoint); symlinks are removed, never followed; a pods
 * dir resolving outside the root dir is never swept.
 *
 * An idle node sweeps for next to nothing: after a sweep that found no orphan, the next ones
 * only stat the pods dir and return while it (its inode, mtime and ctime: an entry added or
 * removed), the cluster objects version and the generations of the desired and actual states
 * are all unchanged - nothing that makes a pod dir an orphan changed. Every
 * {@link MAX_QUIET_SWEEPS_SKIPPED}+1-th sweep runs whatever. Without an objects version, a
 * generation or a pods dir identity (the in-memory adapters), every sweep runs.
 */
import * as path from 'node:path/posix';
import type { ClusterView } from '../ports/cluster.js';
import { errorMessage, isNotExist, removeTreeOneFilesystem, type DirEntry, type FileSystem } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import type { OrphanPodMetrics } from '../ports/metrics.js';
import { VOLUME_DEVICES_DIR_NAME, VOLUMES_DIR_NAME, type KubeletLayout } from '../layout/layout.js';
import { escapeQualifiedName, CSI_PLUGIN_NAME } from '../layout/names.js';
import type { Mounter } from '../ports/mounter.js';
import type { MountTable } from '../ports/mounter.js';
import { resolvesInsideRoot } from '../layout/confinement.js';
import { VOL_DATA_FILE_NAME, VOL_DATA_TEMP_FILE_NAME } from '../volume/csi/volumeData.js';

/** rmdirIfUnmounted's refusal of a directory that is a mount point (the removal below must not descend into it). */
class MountPointRefusal extends Error {
  override readonly name = 'MountPointRefusal';
}

/** kubelet's housekeeping period, which runs the sweep. */
export const HOUSEKEEPING_PERIOD_MS = 2_000;

/** After a sweep that found no orphan, at most this many unchanged sweeps in a row are skipped. */
export const MAX_QUIET_SWEEPS_SKIPPED = 9;

/** How deep a removal descends before it gives up (a pod dir is a few levels deep). */
export const MAX_REMOVE_DEPTH = 32;

export interface OrphanedPodDirsDeps {
  readonly fs: FileSystem;
  readonly layout: KubeletLayout;
  /** The root dir with symlinks resolved: nothing outside it is removed. */
  readonly realRootDir: string;
  readonly mounter: Mounter;
  readonly cluster: ClusterView;
  readonly logger: Logger;
  /** Whether the populator has listed the pods at least once (kubelet's sources ready). */
  readonly sourcesReady: () => boolean;
  /** Pod uids the volume manager knows (desired state, actual state). */
  readonly knownPodUIDs: () => Iterable<string>;
  /**
   * The pods that still have a (possibly) mounted volume in the actual state. Asked once per
   * sweep, so that a sweep stays linear in the number of pod dirs and volumes.
   */
  readonly podsWithVolumesInActualState: () => ReadonlySet<string>;
  /** kubelet_orphan_pod_cleaned_volumes{,_errors}, set after each sweep that ran. */
  readonly metrics?: OrphanPodMetrics;
  /**
   * Changes whenever the pods the volume manager knows may have changed (the generations of its
   * states); undefined when it cannot tell. With the pods dir's identity and the cluster's
   * objects version, lets an unchanged sweep be skipped.
   */
  readonly knownPodsGeneration?: () => string | undefined;
}

/** What the sweep asks of the volume manager (structural, so that this module needs none of it). */
export interface OrphanSweepVolumeManagerView {
  readonly populator: { hasAddedPods(): boolean };
  readonly dsw: { getPods(): Iterable<string>; generation?(): number };
  readonly asw: { getAllMountedVolumes(): ReadonlyArray<{ readonly podName: string }>; generation?(): number };
}

/**
 * The sweep wired to a volume manager the way kubelet's housekeeping sees it: sources ready once
 * the populator listed the pods; known pods are those of the desired and actual states. The
 * agent and the simulator both build their sweep here, so that both run the same housekeeping.
 */
export function orphanedPodDirsCleanerFor(
  vm: OrphanSweepVolumeManagerView,
  deps: Omit<OrphanedPodDirsDeps, 'sourcesReady' | 'knownPodUIDs' | 'podsWithVolumesInActualState' | 'knownPodsGeneration'>,
): OrphanedPodDirsCleaner {
  return new OrphanedPodDirsCleaner({
    ...deps,
    knownPodsGeneration: () => {
      const d = vm.dsw.generation?.();
      const a = vm.asw.generation?.();
      return d === undefined || a === undefined ? undefined : `${d}/${a}`;
    },
    sourcesReady: () => vm.populator.hasAddedPods(),
    knownPodUIDs: () => [...vm.dsw.getPods(), ...vm.asw.getAllMountedVolumes().map((m) => m.podName)],
    podsWithVolumesInActualState: () => new Set(vm.asw.getAllMountedVolumes().map((m) => m.podName)),
  });
}

/** One pod dir the sweep found orphaned but left in place, and why. */
export interface KeptOrphan {
  readonly podUID: string;
  readonly reason: string;
}

export interface OrphanSweepResult {
  /** Why nothing was swept, when nothing was: the sources were not ready or a read failed. */
  readonly skipped?: string;
  /** kubelet_orphan_pod_cleaned_volumes: orphaned pod dirs seen in this sweep. */
  readonly orphans: number;
  /** Pod uids whose dir was removed. */
  readonly removed: readonly string[];
  /** kubelet_orphan_pod_cleaned_volumes_errors counts these. */
  readonly kept: readonly KeptOrphan[];
}

export class OrphanedPodDirsCleaner {
  /** The kept pods' reasons of the last sweep, to log a change once rather than every 2 s. */
  private lastKeptSummary = '';
  /** What the last sweep that found no orphan started from; undefined after any other. */
  private quietAt: string | undefined;
  private skippedInARow = 0;

  constructor(private readonly deps: OrphanedPodDirsDeps) {}

  /** What makes a pod dir an orphan, in one string; undefined when some part cannot be told. */
  private async fingerprint(): Promise<string | undefined> {
    const version = this.deps.cluster.objectsVersion?.();
    const known = this.deps.knownPodsGeneration?.();
    if (version === undefined || known === undefined) return undefined;
    let st;
    try {
      st = await this.deps.fs.stat(this.deps.layout.podsDir());
    } catch {
      return undefined;
    }
    if (st.ino === undefined || st.mtimeMs === undefined || st.ctimeMs === undefined) return undefined;
    return `${version}/${known}/${st.dev}:${st.ino}:${st.mtimeMs}:${st.ctimeMs}`;
  }

  /** One sweep over `<root>/pods`. Never throws: what fails is reported in the result and logged. */
  async cleanupOrphanedPodDirs(): Promise<OrphanSweepResult> {
    if (!this.deps.sourcesReady()) return { skipped: 'pod sources not ready', orphans: 0, removed: [], kept: [] };
    return this.sweep(await this.quietFingerprint());
  }

  /**
   * The fingerprint to record if this sweep finds no orphan, or 'skip' when nothing changed
   * since the last such sweep (and not too many were skipped in a row).
   */
  private async quietFingerprint(): Promise<{ skip: true } | { skip: false; fp: string | undefined }> {
    if (this.deps.knownPodsGeneration === undefined) return { skip: false, fp: undefined };
    const fp = await this.fingerprint();
    if (fp !== undefined && fp === this.quietAt && this.skippedInARow < MAX_QUIET_SWEEPS_SKIPPED) {
      this.skippedInARow++;
      return { skip: true };
    }
    this.skippedInARow = 0;
    this.quietAt = undefined;
    return { skip: false, fp };
  }

  private async sweep(quiet: { skip: true } | { skip: false; fp: string | undefined }): Promise<OrphanSweepResult> {
    const { fs, layout, logger } = this.deps;
    const none = (skipped: string): OrphanSweepResult => ({ skipped, orphans: 0, removed: [], kept: [] });
    if (quiet.skip) return none('nothing changed since a sweep that found no orphan');
    const fp = quiet.fp;

    const known = new Set<string>();
    try {
      for (const pod of await this.deps.cluster.listPods()) known.add(pod.uid);
    } catch (err) {
      logger.v(4).info('Not cleaning up orphaned pod dirs: the pods could not be listed', { err: errorMessage(err) });
      return none('pods not listed');
    }
    for (const uid of this.deps.knownPodUIDs()) known.add(uid);

    const podsDir = layout.podsDir();
    if (!(await resolvesInsideRoot(this.deps.fs, podsDir, this.deps.realRootDir))) {
      return none(`${podsDir} missing or outside the root dir`);
    }
    let entries: DirEntry[];
    try {
      entries = await fs.readdir(podsDir);
    } catch (err) {
      if (!isNotExist(err)) logger.error(err, 'Could not read the pods dir or the mount table; not cleaning up orphaned pod dirs');
      return none(errorMessage(err));
    }
    const candidates = entries
      .filter((entry) => entry.type === 'directory' && !known.has(entry.name))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    if (candidates.length === 0) {
      this.quietAt = fp;
      this.logKept([]);
      this.deps.metrics?.orphanPodSweep(0, 0);
      return { orphans: 0, removed: [], kept: [] };
    }
    const withVolumes = this.deps.podsWithVolumesInActualState();
    // Read only when some pod dir may be removed: a node with no orphan (the usual case, every
    // 2 s) never parses its mount table here.
    let table: MountTable | undefined;
    if (candidates.some((entry) => !withVolumes.has(entry.name))) {
      try {
        table = await this.deps.mounter.readMountTable();
      } catch (err) {
        logger.error(err, 'Could not read the pods dir or the mount table; not cleaning up orphaned pod dirs');
        return none(errorMessage(err));
      }
    }

    let orphans = 0;
    const removed: string[] = [];
    const kept: KeptOrphan[] = [];
    for (const entry of candidates) {
      orphans++;
      const reason =
        withVolumes.has(entry.name) || table === undefined
          ? 'volumes of the pod are still in the actual state of world'
          : await this.cleanupPodDir(entry.name, table);
      if (reason === undefined) {
        removed.push(entry.name);
        logger.v(3).info('Orphaned pod found, removing', { podUID: entry.name });
      } else {
        kept.push({ podUID: entry.name, reason });
        logger.v(3).info('Orphaned pod found, but not removed', { podUID: entry.name, reason });
      }
    }
    this.logKept(kept);
    this.deps.metrics?.orphanPodSweep(orphans, kept.length);
    return { orphans, removed, kept };
  }

  /** Removes one orphaned pod dir; returns why it was kept, or undefined once it is gone. */
  private async cleanupPodDir(podUID: string, table: MountTable): Promise<string | undefined> {
    const { fs, layout } = this.deps;
    const podDir = layout.podDir(podUID);
    const mounts = table.mountsUnder(podDir);
    if (mounts.length > 0) return `the pod dir still holds ${mounts.length} mount(s), e.g. ${mounts[0] ?? ''}`;
    try {
      const blockVolumes = await entriesTwoLevelsDown(fs, path.join(podDir, VOLUME_DEVICES_DIR_NAME));
      if (blockVolumes > 0) return `${VOLUME_DEVICES_DIR_NAME} still holds ${blockVolumes} volume(s)`;
      await this.removeOrphanedPodVolumeDirs(podDir);
      for (const sub of await fs.readdir(podDir)) {
        const subPath = path.join(podDir, sub.name);
        // Never removed wholesale: removeOrphanedPodVolumeDirs had to remove it, directories only.
        if (sub.name === VOLUMES_DIR_NAME) return `${subPath} was found after it was removed`;
        await removeTreeOneFilesystem(fs, (p) => this.deps.mounter.isLikelyNotMountPoint(p), subPath, { directoriesOnly: false, maxDepth: MAX_REMOVE_DEPTH });
      }
      await fs.rmdir(podDir);
    } catch (err) {
      return errorMessage(err);
    }
    return undefined;
  }

  /**
   * removeOrphanedPodVolumeDirs: rmdir each volume dir (for CSI its `mount` dir first), then
   * remove `volumes/` keeping to directories: any file left fails it.
   */
  private async removeOrphanedPodVolumeDirs(podDir: string): Promise<void> {
    const { fs } = this.deps;
    const volumesDir = path.join(podDir, VOLUMES_DIR_NAME);
    let plugins: DirEntry[];
    try {
      plugins = await fs.readdir(volumesDir);
    } catch (err) {
      if (isNotExist(err)) return;
      throw err;
    }
    const csiDirName = escapeQualifiedName(CSI_PLUGIN_NAME);
    for (const plugin of plugins) {
      if (plugin.type !== 'directory') continue; // left for the directories-only removal to refuse
      const pluginDir = path.join(volumesDir, plugin.name);
      for (const volume of await fs.readdir(pluginDir)) {
        if (volume.type !== 'directory') continue;
        const volumeDir = path.join(pluginDir, volume.name);
        if (plugin.name === csiDirName) {
          await this.rmdirIfUnmounted(path.join(volumeDir, 'mount'));
          await this.removeInterruptedVolumeDataWrite(volumeDir);
        }
        await this.rmdirIfUnmounted(volumeDir);
      }
    }
    await removeTreeOneFilesystem(fs, (p) => this.deps.mounter.isLikelyNotMountPoint(p), volumesDir, { directoriesOnly: true, maxDepth: MAX_REMOVE_DEPTH });
  }

  /**
   * nodevol's own leftover, which kubelet never has: SetUp writes the pod-local vol_data.json
   * atomically (`vol_data.json.tmp`, then a rename) before NodePublishVolume, so a kubelet killed
   * between the two leaves a CSI pod volume dir holding that temp file and no vol_data.json -
   * nothing was published from it. Without the temp file the dir is what kubelet's own sweep
   * removes; with it, "not a directory" would keep the pod dir for ever. Only a regular file of
   * exactly that name, in a CSI pod volume dir that is not a mount point and holds no
   * vol_data.json, is removed; anything else is left for the directories-only removal to refuse.
   */
  private async removeInterruptedVolumeDataWrite(volumeDir: string): Promise<void> {
    const { fs, mounter, logger } = this.deps;
    let entries: DirEntry[];
    try {
      entries = await fs.readdir(volumeDir);
    } catch {
      return;
    }
    const temp = entries.find((e) => e.name === VOL_DATA_TEMP_FILE_NAME);
    if (temp === undefined || temp.type !== 'file' || entries.some((e) => e.name === VOL_DATA_FILE_NAME)) return;
    const tempPath = path.join(volumeDir, temp.name);
    try {
      if (!(await mounter.isLikelyNotMountPoint(volumeDir))) return;
      await fs.unlink(tempPath);
      logger.v(3).info('Removed the temp file of an interrupted vol_data.json write from an orphaned pod volume dir', { path: tempPath });
    } catch (err) {
      if (!isNotExist(err)) logger.v(3).info('Could not remove the temp file of an interrupted vol_data.json write', { path: tempPath, err: errorMessage(err) });
    }
  }

  /** rmdir of an empty, unmounted directory; a missing or non-empty one stays as it is (kubelet logs and goes on). */
  private async rmdirIfUnmounted(dir: string): Promise<void> {
    try {
      if (!(await this.deps.mounter.isLikelyNotMountPoint(dir))) throw new MountPointRefusal(`${dir} is a mount point`);
      await this.deps.fs.rmdir(dir);
    } catch (err) {
      // Told by its class: an rmdir error names its path, which may hold any words (a root dir
      // under "/srv/mount point/" made every ENOTEMPTY look like this refusal).
      if (err instanceof MountPointRefusal) throw err;
      // ENOTEMPTY and friends: the directories-only removal below explains what is left.
    }
  }

  /** kubelet's aggregate error line, written when the set of kept pods changes (not every sweep). */
  private logKept(kept: readonly KeptOrphan[]): void {
    const summary = kept.map((k) => `${k.podUID}: ${k.reason}`).join('\n');
    if (summary === this.lastKeptSummary) return;
    this.lastKeptSummary = summary;
    const last = kept[kept.length - 1];
    if (last === undefined) return;
    this.deps.logger.error(undefined, 'There were many similar errors. Turn up verbosity to see them.', {
      err: `orphaned pod ${JSON.stringify(last.podUID)} found, but failed to clean up: ${last.reason}`,
      numErrs: kept.length,
    });
  }
}

/** Entries of the subdirs of `dir` (volumeDevices/<plugin>/<entry>); 0 when `dir` is missing. */
async function entriesTwoLevelsDown(fs: FileSystem, dir: string): Promise<number> {
  let plugins: DirEntry[];
  try {
    plugins = await fs.readdir(dir);
  } catch (err) {
    if (isNotExist(err)) return 0;
    throw err;
  }
  let n = 0;
  for (const plugin of plugins) {
    // A file or symlink directly under volumeDevices/ is not a volume: RemoveAll takes it.
    if (plugin.type === 'directory') n += (await fs.readdir(path.join(dir, plugin.name))).length;
  }
  return n;
}
