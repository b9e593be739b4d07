/**
 * `nodevol audit`: a read-only check of a node. It runs kubelet's reconstruction decisions over
 * the kubelet root dir and the mount table with the given feature gates, always also walks the
 * CSI global mounts, and reports per volume whether kubelet tracks it, recovers it only through
 * CSIGlobalMountReconstruction, or loses it (orphaned: staged, and kubelet never learns of it).
 *
 * It never writes, never mounts and never calls a driver: it uses only the reading side of the
 * CSI plugin and the FileSystem port's read methods.
 */
import { CSIGlobalMountReconstruction, FeatureGate } from '../features/features.js';
import { errorMessage, escapeUndecodable, isNotExist, overrideFileSystem, type FileSystem } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import { BLOCK_STAGING_DIR_NAME, GLOBAL_MOUNT_DIR_NAME, type KubeletLayout } from '../layout/layout.js';
import { CSI_PLUGIN_NAME, csiVolumeName, getUniqueVolumeName } from '../layout/names.js';
import { MountInfoParseError } from '../mount/mountInfo.js';
import type { MountTable } from '../ports/mounter.js';
import { readOnlyVolumeHost } from '../agent/node.js';
import type { Clock } from '../ports/clock.js';
import { CsiPlugin } from '../volume/csi/csiPlugin.js';
import type { ListedGlobalVolume, SkippedGlobalDir } from '../volume/csi/globalVolumes.js';
import { findInterruptedVolumeDataWrite, VOL_DATA_FILE_NAME } from '../volume/csi/volumeData.js';
import { VolumePluginMgr } from '../volume/plugins.js';
import { csiSourceOf, specName } from '../volume/spec.js';
import type { VolumeHost } from '../volume/volumeHost.js';
import { getVolumesFromPodDir, type PodVolume } from '../volumemanager/reconciler/podVolumes.js';
import { reconstructVolumeSpec, type ReconstructedSpec } from '../volumemanager/reconciler/reconstructVolume.js';
import { stuckSection, type StuckOperationsInput } from './stuckFindings.js';
import type { AuditFailed, AuditGlobal, AuditPod, AuditReport, AuditSkipped, AuditUndescribed, AuditVolume, Verdict } from './report.js';

export interface AuditInput {
  readonly fs: FileSystem;
  readonly layout: KubeletLayout;
  /** The root dir with symlinks resolved (nothing outside it is read). */
  readonly realRootDir: string;
  readonly features: FeatureGate;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The mount table, parsed leniently: unparseable lines are listed in `problems`. */
  readonly mountTable: MountTable;
  /** Wall-clock time of the run, epoch ms. */
  readonly nowMs: number;
  /** Where the mount table came from, for error messages. */
  readonly mountTableSource?: string;
  /** The root dir as the user named it (reported as rootDir); default the layout's. */
  readonly displayRootDir?: string;
  /** The agent's stuck operations status file, when present (see stuckFindings.ts). */
  readonly stuckOperations?: StuckOperationsInput;
}

interface VolumeAgg {
  readonly uniqueName: string;
  driver: string;
  volumeHandle: string | null;
  specName: string;
  mode: 'Filesystem' | 'Block';
  lifecycle: 'Persistent' | 'Ephemeral';
  readonly pods: AuditPod[];
  global: AuditGlobal | null;
  /** Accepted by the global listing (kubelet finds it there when the gate is on). */
  listed: boolean;
  /** Pods that fail reconstruction now but whose fallback would succeed with the gate on. */
  readonly fallbackOnlyWithGate: string[];
}

export async function runAudit(auditInput: AuditInput): Promise<AuditReport> {
  // Every name the walk meets passes through readdir, realpath or readlink: noting there whether
  // one carries a byte that is not UTF-8 tells whether the report needs escaping at all.
  const names = observingNames(auditInput.fs);
  const input: AuditInput = { ...auditInput, fs: names.fs };
  const gateOn = input.features.enabled(CSIGlobalMountReconstruction);
  const host = makeHost(input, input.features);
  const plugins = new VolumePluginMgr([new CsiPlugin(host)]);
  // The same node seen with the gate on: used only to say what the gate would change.
  const hypotheticalPlugins = gateOn
    ? plugins
    : new VolumePluginMgr([new CsiPlugin(makeHost(input, withGate(input.features)))]);
  const csi = new CsiPlugin(host);

  const skipped: AuditSkipped[] = [];
  const undescribed: AuditUndescribed[] = [];
  const failed: AuditFailed[] = [];
  const volumes = new Map<string, VolumeAgg>();

  // 1. Pod directories: kubelet's only source of candidates without the gate.
  let candidates: readonly PodVolume[] = [];
  try {
    const walk = await getVolumesFromPodDir(input.fs, input.layout, input.logger.v(4), input.realRootDir);
    candidates = walk.volumes.filter((v) => v.pluginName === CSI_PLUGIN_NAME);
    for (const p of walk.problems) skipped.push({ path: p.path, reason: 'unreadable-dir', detail: p.error });
  } catch (err) {
    if (!isNotExist(err)) skipped.push({ path: input.layout.podsDir(), reason: 'unreadable-dir', detail: errorMessage(err) });
  }

  for (const candidate of candidates) {
    let reconstructed: ReconstructedSpec;
    try {
      reconstructed = await reconstructVolumeSpec(plugins, candidate);
    } catch (err) {
      const interrupted = await interruptedSetUp(input, candidate);
      if (interrupted !== undefined) {
        skipped.push(interrupted);
        continue;
      }
      let hypothetical: ReconstructedSpec | undefined;
      if (!gateOn) {
        try {
          hypothetical = await reconstructVolumeSpec(hypotheticalPlugins, candidate);
        } catch {
          hypothetical = undefined;
        }
      }
      failed.push({
        podUID: candidate.podName,
        specName: candidate.volumeSpecName,
        path: candidate.volumePath,
        error: errorMessage(err),
        recoverableWithGate: hypothetical !== undefined,
      });
      if (hypothetical !== undefined) aggFor(volumes, hypothetical, candidate).fallbackOnlyWithGate.push(candidate.podName);
      continue;
    }
    const agg = aggFor(volumes, reconstructed, candidate);
    agg.pods.push({
      uid: candidate.podName,
      specName: candidate.volumeSpecName,
      volumePath: candidate.volumePath,
      dataSource: reconstructed.dataSource,
      mounted: input.mountTable.isMountPoint(podPublishPath(input.layout, candidate, specName(reconstructed.spec))),
    });
  }

  // 2. Global mounts: always walked, whatever the gate, to say what the gate changes.
  try {
    const listing = await csi.listGlobalVolumesDetailed();
    for (const gv of listing.volumes) addListed(volumes, gv, input);
    for (const s of listing.skipped) {
      skipped.push({ path: s.path, reason: s.reason, detail: s.detail });
      if (!addUnlistable(volumes, s, input)) {
        const u = undescribedMount(s, input);
        if (u !== undefined) undescribed.push(u);
      }
    }
  } catch (err) {
    skipped.push({ path: input.layout.csiPluginDir(), reason: 'unreadable-dir', detail: errorMessage(err) });
  }

  const out: AuditVolume[] = [];
  for (const agg of volumes.values()) out.push(finish(agg, gateOn));
  out.sort((a, b) => cmp(a.uniqueName, b.uniqueName));
  failed.sort((a, b) => cmp(a.podUID, b.podUID) || cmp(a.specName, b.specName));
  skipped.sort((a, b) => cmp(a.path, b.path));
  undescribed.sort((a, b) => cmp(a.path, b.path));

  const count = (v: Verdict): number => out.filter((x) => x.verdict === v).length;
  const stuck = input.stuckOperations === undefined ? undefined : stuckSection(input.stuckOperations, out, failed, input.mountTable);
  const mayNeedEscaping =
    names.seen() ||
    UNDECODABLE.test(input.realRootDir) ||
    UNDECODABLE.test(input.displayRootDir ?? input.layout.rootDir) ||
    (stuck !== undefined && hasUndecodable(stuck));
  return escapeReport(mayNeedEscaping, {
    rootDir: input.displayRootDir ?? input.layout.rootDir,
    featureGates: input.features.snapshot(),
    volumes: out,
    failed,
    skipped,
    undescribed,
    summary: {
      volumes: out.length,
      tracked: count('tracked'),
      recovered: count('recovered'),
      orphaned: count('orphaned'),
      failed: failed.length,
      skipped: skipped.length,
      undescribed: undescribed.length,
      ...(stuck === undefined ? {} : { stuck: stuck.findings.length }),
    },
    mountTableProblems: input.mountTable.problems.map((p) => ({ line: p.line, error: p.error })),
    timestamp: new Date(input.nowMs).toISOString(),
    ...(stuck === undefined ? {} : { stuckOperations: stuck }),
  });
}

/**
 * Names that are not UTF-8 reach the report as lone surrogates (see escapeUndecodable); every
 * string of the report shows their bytes as `\xNN` instead, so no output drops or mangles them.
 */
function escapeReport(mayNeedEscaping: boolean, report: AuditReport): AuditReport {
  // Almost no node has such a name: then nothing is rebuilt.
  if (!mayNeedEscaping) return report;
  const escape = (v: unknown): unknown => {
    if (typeof v === 'string') return escapeUndecodable(v);
    if (Array.isArray(v)) return v.map(escape);
    if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, escape(x)]));
    return v;
  };
  return escape(report) as AuditReport;
}

/**
 * `fs`, noting whether a name it returned (readdir, realpath, readlink) carries a byte that is
 * not UTF-8. Names reach the report only through these (paths are built from them).
 */
function observingNames(fs: FileSystem): { readonly fs: FileSystem; seen(): boolean } {
  let seen = false;
  const note = (s: string): string => {
    if (!seen && UNDECODABLE.test(s)) seen = true;
    return s;
  };
  const wrapped = overrideFileSystem(fs, {
    readdir: async (p) => {
      const entries = await fs.readdir(p);
      if (!seen) for (const e of entries) note(e.name);
      return entries;
    },
    realpath: async (p) => note(await fs.realpath(p)),
    readlink: async (p) => note(await fs.readlink(p)),
  });
  return { fs: wrapped, seen: () => seen };
}

/** Whether some string in `v` carries a byte that is not UTF-8 (see escapeUndecodable). */
function hasUndecodable(v: unknown): boolean {
  if (typeof v === 'string') return UNDECODABLE.test(v);
  if (typeof v !== 'object' || v === null) return false;
  if (Array.isArray(v)) {
    for (const x of v) if (hasUndecodable(x)) return true;
    return false;
  }
  for (const k in v) if (hasUndecodable((v as Record<string, unknown>)[k])) return true;
  return false;
}
const UNDECODABLE = /[\uDC80-\uDCFF]/;

/**
 * The two sources every verdict rests on - the pods dir and the CSI plugin dir - that could not
 * be read (unreadable, or leading out of the root dir). Both: the audit saw nothing and its
 * "healthy" would be a lie. One: the result is partial (see the CLI's message).
 */
export function unreadSources(report: AuditReport, layout: KubeletLayout): string[] {
  const sources = [layout.podsDir(), layout.csiPluginDir()];
  return sources.filter((p) => report.skipped.some((s) => s.path === p));
}

function makeHost(input: AuditInput, features: FeatureGate): VolumeHost {
  const table = input.mountTable;
  // kubelet parses mountinfo strictly: one bad line fails every look-up.
  const load = (): Promise<MountTable> => {
    const first = table.problems[0];
    if (first !== undefined) {
      return Promise.reject(new MountInfoParseError('mount table', first.line, first.text, first.error));
    }
    return Promise.resolve(table);
  };
  return readOnlyVolumeHost(
    { layout: input.layout, realRootDir: input.realRootDir, nodeName: '', features },
    { fs: input.fs, clock: input.clock, logger: input.logger, loadMountTable: load },
  );
}

function withGate(features: FeatureGate): FeatureGate {
  return FeatureGate.of({ ...features.snapshot(), [CSIGlobalMountReconstruction]: true });
}

/** The aggregate of a unique volume name, created with `init` on first sight. */
function aggOf(volumes: Map<string, VolumeAgg>, name: string, init: () => Omit<VolumeAgg, 'uniqueName' | 'pods' | 'global' | 'listed' | 'fallbackOnlyWithGate'>): VolumeAgg {
  let agg = volumes.get(name);
  if (agg === undefined) {
    agg = { uniqueName: name, ...init(), pods: [], global: null, listed: false, fallbackOnlyWithGate: [] };
    volumes.set(name, agg);
  }
  return agg;
}

function aggFor(volumes: Map<string, VolumeAgg>, r: ReconstructedSpec, candidate: PodVolume): VolumeAgg {
  return aggOf(volumes, r.uniqueVolumeName, () => {
    const src = csiSourceOf(r.spec);
    return {
      driver: src?.driver ?? '',
      volumeHandle: src?.volumeHandle ?? null,
      specName: specName(r.spec),
      mode: candidate.volumeMode,
      lifecycle: r.spec.kind === 'inline' ? 'Ephemeral' : 'Persistent',
    };
  });
}

function addListed(volumes: Map<string, VolumeAgg>, gv: ListedGlobalVolume, input: AuditInput): void {
  const src = csiSourceOf(gv.spec);
  if (src?.volumeHandle === undefined) return;
  const name = getUniqueVolumeName(CSI_PLUGIN_NAME, csiVolumeName(src.driver, src.volumeHandle));
  const agg = aggOf(volumes, name, () => ({
    driver: src.driver,
    volumeHandle: src.volumeHandle ?? null,
    specName: specName(gv.spec),
    mode: gv.volumeMode,
    lifecycle: 'Persistent',
  }));
  agg.listed = true;
  agg.global = {
    deviceMountPath: gv.deviceMountPath,
    mounted: globalMounted(input, gv.volumeMode, gv.deviceMountPath, specName(gv.spec)),
    hasSpecVolID: gv.hasSpecVolID,
  };
}

/**
 * A staged block volume the listing refuses for want of specVolID: still a volume kubelet loses.
 * Whether `s` was taken as such a volume.
 */
function addUnlistable(volumes: Map<string, VolumeAgg>, s: SkippedGlobalDir, input: AuditInput): boolean {
  if (s.reason !== 'no-spec-vol-id' || s.driver === undefined || s.volumeHandle === undefined) return false;
  const name = getUniqueVolumeName(CSI_PLUGIN_NAME, csiVolumeName(s.driver, s.volumeHandle));
  const dirName = s.path.slice(s.path.lastIndexOf('/') + 1);
  const deviceMountPath = `${s.path}/dev`;
  const driver = s.driver;
  const volumeHandle = s.volumeHandle;
  const agg = aggOf(volumes, name, () => ({ driver, volumeHandle, specName: dirName, mode: 'Block', lifecycle: 'Persistent' }));
  agg.global ??= { deviceMountPath, mounted: globalMounted(input, 'Block', deviceMountPath, dirName), hasSpecVolID: false };
  return true;
}

/**
 * A CSI pod volume dir that holds nodevol's `vol_data.json.tmp` and no `vol_data.json`, with
 * nothing mounted in it: SetUp's atomic write cut short before its rename, so before
 * NodePublishVolume - nothing was published from it. Not a failed reconstruction: the agent's
 * orphaned pod dir sweep removes it once the pod is gone (and a SetUp of a pod that still wants
 * the volume writes the file again). A kubelet never writes such a file.
 */
async function interruptedSetUp(input: AuditInput, candidate: PodVolume): Promise<AuditSkipped | undefined> {
  if (candidate.volumeMode !== 'Filesystem') return undefined;
  if (input.mountTable.isMountPoint(candidate.volumePath) || input.mountTable.mountsUnder(candidate.volumePath).length > 0) return undefined;
  const found = await findInterruptedVolumeDataWrite(input.fs, candidate.volumePath);
  if (found === undefined) return undefined;
  return {
    path: candidate.volumePath,
    reason: 'interrupted-write',
    detail: `no ${VOL_DATA_FILE_NAME}, only ${found.tempPath}: SetUp's atomic write was cut short before its rename, before NodePublishVolume; nothing is mounted here and the agent's orphaned pod dir sweep removes it`,
  };
}

/**
 * A skipped global directory whose staging path is mounted: the device is staged and nothing on
 * disk tells a kubelet which volume it is (the global listing
 * needs the driver and the handle from the global vol_data.json). A directory that is a symlink is never followed, so nothing is mounted at its path.
 */
function undescribedMount(s: SkippedGlobalDir, input: AuditInput): AuditUndescribed | undefined {
  if (s.reason === 'symlink' || s.reason === 'unreadable-dir' || s.reason === 'not-staged') return undefined;
  const base = s.path.slice(s.path.lastIndexOf('/') + 1);
  const deviceMountPath = s.volumeMode === 'Filesystem' ? `${s.path}/${GLOBAL_MOUNT_DIR_NAME}` : `${input.layout.csiBlockDir()}/${BLOCK_STAGING_DIR_NAME}/${base}`;
  const mounted = s.volumeMode === 'Filesystem' ? input.mountTable.isMountPoint(deviceMountPath) : input.mountTable.mountsUnder(deviceMountPath).length > 0;
  if (!mounted) return undefined;
  return {
    path: s.path,
    deviceMountPath,
    mode: s.volumeMode,
    reason: s.reason,
    detail: s.detail,
    ...(s.driver !== undefined ? { driver: s.driver } : {}),
    ...(s.volumeHandle !== undefined ? { volumeHandle: s.volumeHandle } : {}),
  };
}

function globalMounted(input: AuditInput, mode: 'Filesystem' | 'Block', deviceMountPath: string, name: string): boolean {
  if (mode === 'Filesystem') return input.mountTable.isMountPoint(deviceMountPath);
  return input.mountTable.mountsUnder(input.layout.csiBlockStagingPath(name)).length > 0;
}

function podPublishPath(layout: KubeletLayout, candidate: PodVolume, name: string): string {
  return candidate.volumeMode === 'Block'
    ? layout.csiBlockPublishPath(name, candidate.podName)
    : `${candidate.volumePath}/mount`;
}

function finish(agg: VolumeAgg, gateOn: boolean): AuditVolume {
  agg.pods.sort((a, b) => cmp(a.uid, b.uid));
  const podLocal = agg.pods.filter((p) => p.dataSource === 'pod-local');
  const viaFallback = agg.pods.filter((p) => p.dataSource === 'global-fallback');
  const reasons: string[] = [];

  let verdict: Verdict;
  if (podLocal.length > 0) verdict = 'tracked';
  else if (gateOn && (viaFallback.length > 0 || agg.listed)) verdict = 'recovered';
  else verdict = 'orphaned';
  let verdictWithGate: Verdict;
  if (podLocal.length > 0) verdictWithGate = 'tracked';
  else if (viaFallback.length > 0 || agg.listed || agg.fallbackOnlyWithGate.length > 0) verdictWithGate = 'recovered';
  else verdictWithGate = 'orphaned';

  for (const p of podLocal) reasons.push(`reconstructed from the pod-local vol_data.json of pod ${p.uid}`);
  for (const p of viaFallback) {
    reasons.push(`pod ${p.uid}: pod-local vol_data.json unreadable; rebuilt from the global mount it is bind mounted from (CSIGlobalMountReconstruction)`);
  }
  for (const uid of agg.fallbackOnlyWithGate) {
    reasons.push(
      `pod ${uid}: pod-local vol_data.json unreadable; reconstruction fails, only TearDown is attempted and the global mount leaks (kubernetes#101791, #101911)`,
    );
  }
  const g = agg.global;
  if (podLocal.length === 0 && viaFallback.length === 0 && g !== null) {
    if (agg.listed && gateOn) {
      reasons.push(`staged at ${g.deviceMountPath} with no pod directory naming it; the global mount listing (CSIGlobalMountReconstruction) registers it as uncertain and it is unstaged if no pod wants it`);
    } else if (agg.listed) {
      reasons.push(
        `staged at ${g.deviceMountPath} but no pod directory names it: kubelet never reconstructs it, drops it from volumesInUse and never calls NodeUnstageVolume (kubernetes#121937)`,
      );
    } else {
      reasons.push(`staged at ${g.deviceMountPath} but its volume data carries no specVolID: the global listing refuses it and no pod directory names it`);
    }
  }
  if (verdict === 'orphaned' && verdictWithGate === 'recovered') reasons.push('enabling CSIGlobalMountReconstruction would recover it');
  if (g !== null && !g.mounted && verdict !== 'tracked') {
    reasons.push('the global mount is not in the mount table (node rebooted?): NodeUnstageVolume is still owed to the driver');
  }

  return {
    uniqueName: agg.uniqueName,
    driver: agg.driver,
    volumeHandle: agg.volumeHandle,
    specName: agg.specName,
    mode: agg.mode,
    lifecycle: agg.lifecycle,
    pods: agg.pods,
    global: agg.global,
    verdict,
    verdictWithGate,
    reasons,
  };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
