/**
 * `nodevol recover`: for the volumes the audit calls orphaned, what KEP-6058's gate would make
 * kubelet do, through the driver's own socket: NodeUnpublishVolume for every publish target
 * still bind-mounted from the global mount, NodeUnstageVolume, and then, only after each call
 * succeeded, kubelet's removeMountDir of the target and of the global mount (the directory,
 * the global vol_data.json and the volume directory, each only when no longer a mount point).
 *
 * Safety, in order: nothing is planned without the cluster's view; a volume is refused when two
 * or more PersistentVolumes name its driver and handle (which one it belongs to is ambiguous), when a
 * pod bound to this node wants it (or a pod's claim cannot be resolved, so that cannot be
 * proven), when it is in node.status.volumesInUse, when it is a raw block volume, when a
 * target belongs to a pod that still exists, when the mount table could not be parsed, when
 * any path leaves the root dir or has a symlink in it. A driver socket that is missing (or is
 * not a socket) does not hide the plan: the dry run shows the volume's whole plan with a warning,
 * and only --yes refuses the volume. One volume's failure stops only that volume. Every planned,
 * done, failed and refused action is a journal entry, naming only paths that exist. A dry run
 * (the default) makes no call and changes nothing.
 *
 * Paths: every path of the plan is one of this process' file system, under the root dir it
 * reads (removals, mount table look-ups); a CSI call names the path as the node's mount table
 * and its drivers name it (`nodeRootDir`, from --mountinfo-root-dir), which differs when the
 * root dir is the host's mounted elsewhere (in a debug container, say).
 *
 * Engine code: it reaches files, the mount table and drivers only through ports.
 */
import * as path from 'node:path/posix';
import type { CsiNodeClient } from '../ports/csi.js';
import { errorCode, errorMessage, type FileSystem } from '../ports/fs.js';
import type { KubeletLayout } from '../layout/layout.js';
import type { MountTable } from '../ports/mounter.js';
import { getMountRefs } from '../mount/mountRefs.js';
import { isDirMounted, isVolumeDataTempFile, removeMountDir, UNSTAGE_MARKER_FILE_NAME } from '../volume/csi/csiUtil.js';
import { VOL_DATA_FILE_NAME } from '../volume/csi/volumeData.js';
import type { VolumeHost } from '../volume/volumeHost.js';
import { csiUniqueName, wantedVolumes, type ClusterState } from './clusterState.js';
import type { AuditReport, AuditVolume } from './report.js';

/** `check`: a dry run's warning (a precondition --yes would refuse the volume for, with its reason). */
export type RecoverAction = 'NodeUnpublishVolume' | 'NodeUnstageVolume' | 'rmdir' | 'unlink' | 'refuse' | 'check';
export type RecoverOutcome = 'planned' | 'ok' | 'failed' | 'refused' | 'skipped';

/** One line of the JSON-lines journal. */
export interface RecoverJournalEntry {
  readonly time: string;
  readonly volume: string;
  readonly driver: string;
  readonly action: RecoverAction;
  readonly outcome: RecoverOutcome;
  readonly path?: string;
  readonly volumeId?: string;
  readonly endpoint?: string;
  readonly reason?: string;
  readonly error?: string;
}

/** One removal removeMountDir makes after a call succeeded. */
export interface RemovalStep {
  readonly action: 'rmdir' | 'unlink';
  readonly path: string;
}

export interface VolumePlan {
  readonly uniqueName: string;
  readonly driver: string;
  readonly volumeHandle: string;
  readonly endpoint: string;
  /** Publish targets still bind-mounted from the global mount. */
  readonly targets: readonly string[];
  readonly deviceMountPath: string;
  /** Each target and the global mount as the driver is told it (the node's naming, see `nodeRootDir`). */
  readonly callPaths: ReadonlyMap<string, string>;
  /** What removeMountDir would remove after the call on each target and the global mount: only what exists now. */
  readonly removals: ReadonlyMap<string, readonly RemovalStep[]>;
  /** Why --yes refuses the volume as things stand (its driver's socket); the dry run shows the plan with it. */
  readonly warning?: string;
}

export interface Refusal {
  readonly uniqueName: string;
  readonly driver: string;
  readonly reason: string;
}

export interface RecoverPlan {
  readonly volumes: readonly VolumePlan[];
  readonly refusals: readonly Refusal[];
}

export interface PlanInput {
  readonly report: AuditReport;
  readonly state: ClusterState;
  readonly fs: FileSystem;
  readonly layout: KubeletLayout;
  /** The live mount table (strictly parsed), or the reason it could not be read. */
  readonly mountTable: MountTable | Error;
  /** unix:///abs/csi.sock of a driver: --csi-endpoint, else <root>/plugins/<driver>/csi.sock. */
  readonly endpointFor: (driver: string) => { readonly endpoint: string; readonly socketPath: string };
  /**
   * The root dir as the node's mount table and its drivers name it (--mountinfo-root-dir), when
   * it is not `layout.rootDir`: the paths a CSI call names are moved under it.
   */
  readonly nodeRootDir?: string;
}

/** Whether `p` exists and is exactly its own real path (no symlink anywhere in it) under the root. */
async function confined(fs: FileSystem, layout: KubeletLayout, p: string): Promise<boolean> {
  if (!layout.contains(p) || p === layout.rootDir || path.normalize(p) !== p) return false;
  try {
    return (await fs.realpath(p)) === p;
  } catch {
    return false;
  }
}

const POD_MOUNT = /^pods\/([^/]+)\/volumes\/kubernetes\.io~csi\/[^/]+\/mount$/;

export async function planRecovery(input: PlanInput): Promise<RecoverPlan> {
  const { report, state, fs, layout } = input;
  const volumes: VolumePlan[] = [];
  const refusals: Refusal[] = [];
  const wanted = wantedVolumes(state);
  const owners = persistentVolumesByVolume(state);
  const inUse = new Set(state.volumesInUse);
  const livePods = new Map(state.pods.map((p) => [p.uid, `${p.namespace}/${p.name}`]));

  for (const v of report.volumes) {
    if (v.verdict !== 'orphaned' || v.global === null) continue;
    const refuse = (reason: string): void => {
      refusals.push({ uniqueName: v.uniqueName, driver: v.driver, reason });
    };
    const reason = refusalOf(v, input, wanted, inUse, owners);
    if (reason !== undefined) {
      refuse(reason);
      continue;
    }
    const handle = v.volumeHandle ?? '';
    const deviceMountPath = v.global.deviceMountPath;
    if (!(await confined(fs, layout, path.dirname(deviceMountPath))) || !(await confined(fs, layout, deviceMountPath))) {
      refuse(`${deviceMountPath} is not a real path inside the root dir ${layout.rootDir} (a symlink in it, or missing)`);
      continue;
    }
    const table = input.mountTable as MountTable;
    let targets: string[] = [];
    if (table.isMountPoint(deviceMountPath)) {
      const refs = await getMountRefs(fs, table, deviceMountPath);
      targets = refs.filter((r) => r !== deviceMountPath);
    }
    const bad = targets.find((t) => !POD_MOUNT.test(path.relative(layout.rootDir, t)));
    if (bad !== undefined) {
      refuse(`the global mount is also mounted at ${bad}, which is not a pod's publish target under ${layout.podsDir()}: left to an operator`);
      continue;
    }
    const owner = targets.map((t) => POD_MOUNT.exec(path.relative(layout.rootDir, t))?.[1] ?? '').find((uid) => livePods.has(uid));
    if (owner !== undefined) {
      refuse(`it is still published to pod ${livePods.get(owner) ?? owner} (${owner}), which exists on this node`);
      continue;
    }
    let unconfined: string | undefined;
    for (const t of targets) if (!(await confined(fs, layout, t))) unconfined = t;
    if (unconfined !== undefined) {
      refuse(`publish target ${unconfined} is not a real path inside the root dir`);
      continue;
    }
    const { endpoint } = input.endpointFor(v.driver);
    const mounts = [...targets.sort(), deviceMountPath];
    const callPaths = new Map(mounts.map((m) => [m, nodePath(layout.rootDir, input.nodeRootDir, m)]));
    const removals = new Map<string, readonly RemovalStep[]>();
    for (const m of mounts) removals.set(m, await existingRemovalSteps(fs, m));
    const warning = await driverSocketProblem(v.driver, input);
    volumes.push({ uniqueName: v.uniqueName, driver: v.driver, volumeHandle: handle, endpoint, targets, deviceMountPath, callPaths, removals, ...(warning !== undefined ? { warning } : {}) });
  }
  return { volumes, refusals };
}

/** The names of the PersistentVolumes naming each CSI volume (driver and handle), by unique volume name, sorted. */
function persistentVolumesByVolume(state: ClusterState): ReadonlyMap<string, readonly string[]> {
  const out = new Map<string, string[]>();
  for (const pv of state.persistentVolumes.values()) {
    if (pv.driver === undefined || pv.volumeHandle === undefined) continue;
    const name = csiUniqueName(pv.driver, pv.volumeHandle);
    out.set(name, [...(out.get(name) ?? []), pv.name]);
  }
  for (const names of out.values()) names.sort();
  return out;
}

/** "a and b", "a, b and c". */
function andList(items: readonly string[]): string {
  return items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1] ?? ''}`;
}

function refusalOf(
  v: AuditVolume,
  input: PlanInput,
  wanted: ReturnType<typeof wantedVolumes>,
  inUse: ReadonlySet<string>,
  owners: ReadonlyMap<string, readonly string[]>,
): string | undefined {
  if (v.mode === 'Block') return 'raw block volumes are not handled by nodevol recover (unmap and unstage them with the agent and the gate on)';
  if (v.volumeHandle === null) return 'no volume handle';
  const pvs = owners.get(v.uniqueName) ?? [];
  if (pvs.length > 1) {
    return `PersistentVolumes ${andList(pvs)} ${pvs.length === 2 ? 'both' : 'all'} name driver ${v.driver} volume handle ${v.volumeHandle}: which one the staged volume belongs to is ambiguous, so no claim on it can be ruled out; fix the PersistentVolumes, or clean it up by hand`;
  }
  const pods = wanted.byVolume.get(v.uniqueName);
  if (pods !== undefined && pods.length > 0) {
    return `a pod on node ${input.state.nodeName} wants it per the cluster: ${pods.map((p) => `${p.namespace}/${p.name}`).join(', ')}`;
  }
  const unresolved = wanted.unresolved[0];
  if (unresolved !== undefined) {
    return `cannot prove no pod on node ${input.state.nodeName} wants it: pod ${unresolved.pod.namespace}/${unresolved.pod.name} uses claim ${unresolved.claim} (${unresolved.why})`;
  }
  if (inUse.has(v.uniqueName)) return `it is in node.status.volumesInUse of ${input.state.nodeName}: kubelet still reports it in use`;
  if (input.mountTable instanceof Error) return `the mount table could not be read strictly (${input.mountTable.message}): whether it is mounted cannot be proven`;
  return undefined;
}

/** Why the driver cannot be called through its socket now, or undefined when the socket is there. */
async function driverSocketProblem(driver: string, input: PlanInput): Promise<string | undefined> {
  const { socketPath } = input.endpointFor(driver);
  try {
    const st = await input.fs.lstat(socketPath);
    if (st.type !== 'other') return `driver socket ${socketPath} is not a socket: --yes refuses this volume until the ${driver} node plugin listens there`;
  } catch (err) {
    // The socket's path is in each call line below ("via unix://…"): not repeated here, so the line stays short.
    return `no driver socket (${errorCode(err) ?? errorMessage(err)}): --yes refuses this volume until the ${driver} node plugin runs on this node`;
  }
  return undefined;
}

/** `p` (under `rootDir`) as the node names it when the node names the root dir `nodeRootDir`. */
export function nodePath(rootDir: string, nodeRootDir: string | undefined, p: string): string {
  if (nodeRootDir === undefined || nodeRootDir === rootDir) return p;
  const rel = path.relative(rootDir, p);
  return rel === '' ? nodeRootDir : path.join(nodeRootDir, rel);
}

export interface ExecuteInput {
  readonly plan: RecoverPlan;
  /** The host removeMountDir runs with: a writable FileSystem and a mounter reading the live table. */
  readonly host: VolumeHost;
  readonly clientFor: (endpoint: string) => CsiNodeClient;
  /** false: dry run, every step is journalled as planned and nothing is called or removed. */
  readonly act: boolean;
  readonly journal: (e: RecoverJournalEntry) => void;
  readonly nowIso: () => string;
}

export interface RecoverResult {
  readonly recovered: readonly string[];
  readonly failed: readonly { readonly uniqueName: string; readonly error: string }[];
  /** The plan's refusals, and with --yes the volumes refused for their warning. */
  readonly refused: readonly Refusal[];
  readonly planned: readonly string[];
  /** Dry run: the planned volumes --yes would refuse as things stand (their warning). */
  readonly warned: readonly string[];
}

/**
 * What removeMountDir removes for a mount path, in its order, as far as it exists now: the
 * directory, the volume dir's vol_data.json, the temp file of an interrupted vol_data.json write
 * and the unstage marker (removed with the volume dir), and the volume dir.
 */
export async function existingRemovalSteps(fs: FileSystem, mountPath: string): Promise<RemovalStep[]> {
  const volDir = path.dirname(mountPath);
  const exists = async (p: string): Promise<boolean> => {
    try {
      await fs.lstat(p);
      return true;
    } catch {
      return false;
    }
  };
  const steps: RemovalStep[] = [];
  if (await exists(mountPath)) steps.push({ action: 'rmdir', path: mountPath });
  const dataFile = path.join(volDir, VOL_DATA_FILE_NAME);
  if (await exists(dataFile)) steps.push({ action: 'unlink', path: dataFile });
  let entries: Awaited<ReturnType<FileSystem['readdir']>> = [];
  try {
    entries = await fs.readdir(volDir);
  } catch {
    // No volume dir (or unreadable): nothing more to name; the removal reports its own error.
  }
  for (const e of [...entries].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    if (e.type === 'file' && (isVolumeDataTempFile(e.name) || e.name === UNSTAGE_MARKER_FILE_NAME)) steps.push({ action: 'unlink', path: path.join(volDir, e.name) });
  }
  if (await exists(volDir)) steps.push({ action: 'rmdir', path: volDir });
  return steps;
}

export async function executeRecovery(input: ExecuteInput): Promise<RecoverResult> {
  const { plan, host, journal } = input;
  const recovered: string[] = [];
  const failed: { uniqueName: string; error: string }[] = [];
  const planned: string[] = [];
  const warned: string[] = [];
  const refused: Refusal[] = [...plan.refusals];
  for (const r of plan.refusals) {
    journal({ time: input.nowIso(), volume: r.uniqueName, driver: r.driver, action: 'refuse', outcome: 'refused', reason: r.reason });
  }
  for (const v of plan.volumes) {
    const base = { volume: v.uniqueName, driver: v.driver };
    const entry = (e: Omit<RecoverJournalEntry, 'time' | 'volume' | 'driver'>): void => journal({ time: input.nowIso(), ...base, ...e });
    const callPath = (p: string): string => v.callPaths.get(p) ?? p;
    if (input.act && v.warning !== undefined) {
      refused.push({ uniqueName: v.uniqueName, driver: v.driver, reason: v.warning });
      entry({ action: 'refuse', outcome: 'refused', reason: v.warning });
      continue;
    }
    if (!input.act) {
      if (v.warning !== undefined) {
        entry({ action: 'check', outcome: 'failed', reason: v.warning });
        warned.push(v.uniqueName);
      }
      for (const t of v.targets) {
        entry({ action: 'NodeUnpublishVolume', outcome: 'planned', volumeId: v.volumeHandle, path: callPath(t), endpoint: v.endpoint });
        for (const s of v.removals.get(t) ?? []) entry({ action: s.action, outcome: 'planned', path: s.path });
      }
      entry({ action: 'NodeUnstageVolume', outcome: 'planned', volumeId: v.volumeHandle, path: callPath(v.deviceMountPath), endpoint: v.endpoint });
      for (const s of v.removals.get(v.deviceMountPath) ?? []) entry({ action: s.action, outcome: 'planned', path: s.path });
      planned.push(v.uniqueName);
      continue;
    }
    try {
      const client = input.clientFor(v.endpoint);
      for (const t of v.targets) {
        const targetPath = callPath(t);
        await step(() => client.nodeUnpublishVolume({ volumeId: v.volumeHandle, targetPath }), () =>
          entry({ action: 'NodeUnpublishVolume', outcome: 'ok', volumeId: v.volumeHandle, path: targetPath, endpoint: v.endpoint }),
        (error) => entry({ action: 'NodeUnpublishVolume', outcome: 'failed', volumeId: v.volumeHandle, path: targetPath, endpoint: v.endpoint, error }));
        await removeAfter(host, t, entry);
      }
      const caps = await client.nodeGetCapabilities();
      const stagingTargetPath = callPath(v.deviceMountPath);
      if (caps.includes('STAGE_UNSTAGE_VOLUME')) {
        await step(() => client.nodeUnstageVolume({ volumeId: v.volumeHandle, stagingTargetPath }), () =>
          entry({ action: 'NodeUnstageVolume', outcome: 'ok', volumeId: v.volumeHandle, path: stagingTargetPath, endpoint: v.endpoint }),
        (error) => entry({ action: 'NodeUnstageVolume', outcome: 'failed', volumeId: v.volumeHandle, path: stagingTargetPath, endpoint: v.endpoint, error }));
      } else {
        entry({ action: 'NodeUnstageVolume', outcome: 'skipped', volumeId: v.volumeHandle, path: stagingTargetPath, reason: 'the driver has no STAGE_UNSTAGE_VOLUME capability (kubelet skips the call too)' });
      }
      await removeAfter(host, v.deviceMountPath, entry);
      recovered.push(v.uniqueName);
    } catch (err) {
      failed.push({ uniqueName: v.uniqueName, error: errorMessage(err) });
    }
  }
  return { recovered, failed, refused, planned, warned };
}

class StepFailed extends Error {}

async function step(call: () => Promise<void>, ok: () => void, fail: (error: string) => void): Promise<void> {
  try {
    await call();
  } catch (err) {
    fail(errorMessage(err));
    throw new StepFailed(errorMessage(err));
  }
  ok();
}

/**
 * removeMountDir after a successful call; a path still mounted is a failure, never removed. The
 * journal names what existed once the call returned (a driver may remove its target itself):
 * each removed path ok, and on an error the first path still there failed.
 */
async function removeAfter(host: VolumeHost, mountPath: string, entry: (e: Omit<RecoverJournalEntry, 'time' | 'volume' | 'driver'>) => void): Promise<void> {
  if (await isDirMounted(host, mountPath)) {
    const error = `${mountPath} is still a mount point after the driver reported success: left in place`;
    entry({ action: 'rmdir', outcome: 'failed', path: mountPath, error });
    throw new StepFailed(error);
  }
  const steps = await existingRemovalSteps(host.fs, mountPath);
  let failure: Error | undefined;
  try {
    await removeMountDir(host, mountPath);
  } catch (err) {
    failure = err instanceof Error ? err : new Error(String(err));
  }
  if (failure === undefined) {
    for (const s of steps) entry({ action: s.action, outcome: 'ok', path: s.path });
    return;
  }
  const left = new Set((await existingRemovalSteps(host.fs, mountPath)).map((s) => s.path));
  const stuck = steps.find((s) => left.has(s.path)) ?? { action: 'rmdir' as const, path: mountPath };
  for (const s of steps) {
    if (s === stuck) break;
    entry({ action: s.action, outcome: 'ok', path: s.path });
  }
  entry({ action: stuck.action, outcome: 'failed', path: stuck.path, error: errorMessage(failure) });
  throw failure;
}
