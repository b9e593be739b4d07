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
 * any path leaves the root dir or has a symlink in it, and when the driver's socket is missing.
 * One volume's failure stops only that volume. Every planned, done, failed and refused action
 * is a journal entry. A dry run (the default) makes no call and changes nothing.
 *
 * Engine code: it reaches files, the mount table and drivers only through ports.
 */
import * as path from 'node:path/posix';
import type { CsiNodeClient } from '../ports/csi.js';
import { errorMessage, type FileSystem } from '../ports/fs.js';
import type { KubeletLayout } from '../layout/layout.js';
import type { MountTable } from '../ports/mounter.js';
import { getMountRefs } from '../mount/mountRefs.js';
import { isDirMounted, removeMountDir } from '../volume/csi/csiUtil.js';
import { VOL_DATA_FILE_NAME } from '../volume/csi/volumeData.js';
import type { VolumeHost } from '../volume/volumeHost.js';
import { csiUniqueName, wantedVolumes, type ClusterState } from './clusterState.js';
import type { AuditReport, AuditVolume } from './report.js';

export type RecoverAction = 'NodeUnpublishVolume' | 'NodeUnstageVolume' | 'rmdir' | 'unlink' | 'refuse';
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

export interface VolumePlan {
  readonly uniqueName: string;
  readonly driver: string;
  readonly volumeHandle: string;
  readonly endpoint: string;
  /** Publish targets still bind-mounted from the global mount. */
  readonly targets: readonly string[];
  readonly deviceMountPath: string;
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
    const reason = await refusalOf(v, input, wanted, inUse, owners);
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
    volumes.push({ uniqueName: v.uniqueName, driver: v.driver, volumeHandle: handle, endpoint, targets: targets.sort(), deviceMountPath });
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

async function refusalOf(
  v: AuditVolume,
  input: PlanInput,
  wanted: ReturnType<typeof wantedVolumes>,
  inUse: ReadonlySet<string>,
  owners: ReadonlyMap<string, readonly string[]>,
): Promise<string | undefined> {
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
  const { socketPath } = input.endpointFor(v.driver);
  try {
    const st = await input.fs.lstat(socketPath);
    if (st.type !== 'other') return `driver socket ${socketPath} is not a socket`;
  } catch (err) {
    return `driver socket ${socketPath} is missing (${errorMessage(err)}): is the ${v.driver} node plugin running on this node?`;
  }
  return undefined;
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
  readonly refused: readonly Refusal[];
  readonly planned: readonly string[];
}

/** The paths removeMountDir removes for a mount path, in order. */
export function removalSteps(mountPath: string): { action: 'rmdir' | 'unlink'; path: string }[] {
  const volDir = path.dirname(mountPath);
  return [
    { action: 'rmdir', path: mountPath },
    { action: 'unlink', path: path.join(volDir, VOL_DATA_FILE_NAME) },
    { action: 'rmdir', path: volDir },
  ];
}

export async function executeRecovery(input: ExecuteInput): Promise<RecoverResult> {
  const { plan, host, journal } = input;
  const recovered: string[] = [];
  const failed: { uniqueName: string; error: string }[] = [];
  const planned: string[] = [];
  for (const r of plan.refusals) {
    journal({ time: input.nowIso(), volume: r.uniqueName, driver: r.driver, action: 'refuse', outcome: 'refused', reason: r.reason });
  }
  for (const v of plan.volumes) {
    const base = { volume: v.uniqueName, driver: v.driver };
    const entry = (e: Omit<RecoverJournalEntry, 'time' | 'volume' | 'driver'>): void => journal({ time: input.nowIso(), ...base, ...e });
    if (!input.act) {
      for (const t of v.targets) {
        entry({ action: 'NodeUnpublishVolume', outcome: 'planned', volumeId: v.volumeHandle, path: t, endpoint: v.endpoint });
        for (const s of removalSteps(t)) entry({ action: s.action, outcome: 'planned', path: s.path });
      }
      entry({ action: 'NodeUnstageVolume', outcome: 'planned', volumeId: v.volumeHandle, path: v.deviceMountPath, endpoint: v.endpoint });
      for (const s of removalSteps(v.deviceMountPath)) entry({ action: s.action, outcome: 'planned', path: s.path });
      planned.push(v.uniqueName);
      continue;
    }
    try {
      const client = input.clientFor(v.endpoint);
      for (const t of v.targets) {
        await step(() => client.nodeUnpublishVolume({ volumeId: v.volumeHandle, targetPath: t }), () =>
          entry({ action: 'NodeUnpublishVolume', outcome: 'ok', volumeId: v.volumeHandle, path: t, endpoint: v.endpoint }),
        (error) => entry({ action: 'NodeUnpublishVolume', outcome: 'failed', volumeId: v.volumeHandle, path: t, endpoint: v.endpoint, error }));
        await removeAfter(host, t, entry);
      }
      const caps = await client.nodeGetCapabilities();
      if (caps.includes('STAGE_UNSTAGE_VOLUME')) {
        await step(() => client.nodeUnstageVolume({ volumeId: v.volumeHandle, stagingTargetPath: v.deviceMountPath }), () =>
          entry({ action: 'NodeUnstageVolume', outcome: 'ok', volumeId: v.volumeHandle, path: v.deviceMountPath, endpoint: v.endpoint }),
        (error) => entry({ action: 'NodeUnstageVolume', outcome: 'failed', volumeId: v.volumeHandle, path: v.deviceMountPath, endpoint: v.endpoint, error }));
      } else {
        entry({ action: 'NodeUnstageVolume', outcome: 'skipped', volumeId: v.volumeHandle, path: v.deviceMountPath, reason: 'the driver has no STAGE_UNSTAGE_VOLUME capability (kubelet skips the call too)' });
      }
      await removeAfter(host, v.deviceMountPath, entry);
      recovered.push(v.uniqueName);
    } catch (err) {
      failed.push({ uniqueName: v.uniqueName, error: errorMessage(err) });
    }
  }
  return { recovered, failed, refused: plan.refusals, planned };
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

/** removeMountDir after a successful call; a path still mounted is a failure, never removed. */
async function removeAfter(host: VolumeHost, mountPath: string, entry: (e: Omit<RecoverJournalEntry, 'time' | 'volume' | 'driver'>) => void): Promise<void> {
  if (await isDirMounted(host, mountPath)) {
    const error = `${mountPath} is still a mount point after the driver reported success: left in place`;
    entry({ action: 'rmdir', outcome: 'failed', path: mountPath, error });
    throw new StepFailed(error);
  }
  try {
    await removeMountDir(host, mountPath);
  } catch (err) {
    entry({ action: 'rmdir', outcome: 'failed', path: mountPath, error: errorMessage(err) });
    throw err;
  }
  for (const s of removalSteps(mountPath)) entry({ action: s.action, outcome: 'ok', path: s.path });
}
