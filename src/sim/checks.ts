/**
 * The invariants of a simulation run (invariants.ts names them), checked against the world:
 *
 * - when a CSI call arrives at a driver ({@link checkArrival}): no NodeUnstageVolume while a
 *   running pod uses the volume or a target of it is published, no NodeUnpublishVolume of a
 *   running pod's target, no NodeStageVolume while an unstage of the volume still runs, no
 *   NodePublishVolume without a successful stage;
 * - when a NodePublishVolume finishes at a driver ({@link checkSinglePod}): a ReadWriteOncePod
 *   volume is published for one pod at most;
 * - when the engine removes a path ({@link checkRemoval}): nothing a driver still uses;
 * - when the engine writes volumesInUse ({@link checkInUseReported}): every attached volume that
 *   is staged or globally mounted is in it;
 * - convergence ({@link convergenceProblems}): the world is what the running pods want, and the
 *   node status says so.
 *
 * Each check only reads the world and returns what it found; the run records the violations.
 */
import type { CsiMethod } from '../ports/csi.js';
import type { FakeCsiRequest } from '../adapters/memory/fakeCsiDriver.js';
import { sha256Hex } from '../layout/names.js';
import { removalHits, type InvariantName } from './invariants.js';
import { isReadWriteOncePod } from './scenario.js';
import { ownsTarget, SIM_ROOT, uniqueName, type SimWorld } from './world.js';

/** A violated invariant, with what broke it. */
export interface Finding {
  readonly invariant: InvariantName;
  readonly message: string;
}

/** A CSI call arrives at a driver, before the world counts it among the calls running there. */
export function checkArrival(world: SimWorld, driverName: string, method: CsiMethod, volumeId: string, request: FakeCsiRequest): Finding[] {
  const out: Finding[] = [];
  const driver = world.drivers.get(driverName);
  if (driver === undefined) return out;
  const running = [...world.inFlight.values()].filter((f) => f.driver === driverName && f.volumeId === volumeId);
  const wanted = world.wanted().get(`${driverName}|${volumeId}`);
  const state = driver.volume(volumeId);
  const req = request as Readonly<Record<string, unknown>>;
  if (method === 'NodeUnstageVolume') {
    // The issue's words: "NodeUnstageVolume never arrives while a *running* pod wants the volume
    // or while the driver has a target of it published". A pod that wants the volume is running
    // once its SetUp of it succeeded (in any life of this run) or while a target of it is
    // published; before that (a pod waiting for its volumes, e.g. while MountDevice makes sure
    // an earlier unstage has ended, kubernetes#121357) an unstage takes nothing from it.
    const users = (wanted?.pods ?? []).filter((uid) => world.hasSetUp(driverName, volumeId, uid) || [...(state?.publishedAt ?? [])].some((t) => ownsTarget(uid, t)));
    if (users.length > 0) out.push({ invariant: 'no-unstage-in-use', message: `NodeUnstageVolume ${volumeId} arrived while pod ${users.join(',')} wants it` });
    else if (state !== undefined && state.publishedAt.size > 0) {
      out.push({ invariant: 'no-unstage-in-use', message: `NodeUnstageVolume ${volumeId} arrived while the driver has it published at ${[...state.publishedAt].sort().join(', ')}` });
    }
  }
  if (method === 'NodeUnpublishVolume') {
    const target = typeof req['targetPath'] === 'string' ? req['targetPath'] : '';
    const owner = [...world.running].find((uid) => target.includes(`/pods/${uid}/`) || target.endsWith(`/${uid}`));
    if (owner !== undefined && world.wantedByPod(owner, driverName, volumeId)) {
      out.push({ invariant: 'no-unstage-in-use', message: `NodeUnpublishVolume ${volumeId} arrived for running pod ${owner}'s target ${target}` });
    }
  }
  if (method === 'NodeStageVolume' && running.some((f) => f.method === 'NodeUnstageVolume')) {
    out.push({ invariant: 'stage-after-unstage', message: `NodeStageVolume ${volumeId} arrived while a NodeUnstageVolume of it is still running at the driver` });
  }
  if (method === 'NodePublishVolume') {
    // kubelet sends the staging path with every block publish, also to a driver without
    // STAGE_UNSTAGE (csi_block.go publishVolumeForBlock; the CSI field is optional then, and
    // such a driver ignores it): only a driver that stages can have been skipped.
    const staging = typeof req['stagingTargetPath'] === 'string' ? req['stagingTargetPath'] : '';
    const stages = world.scenario.drivers.find((x) => x.name === driverName)?.stageUnstage ?? true;
    if (stages && staging !== '' && state?.stagedAt !== staging) {
      out.push({ invariant: 'stage-after-unstage', message: `NodePublishVolume ${volumeId} arrived without a successful NodeStageVolume at ${staging}` });
    }
  }
  return out;
}

/**
 * A NodePublishVolume finished at a driver (whatever its answer: a fault after the effect
 * publishes too): a ReadWriteOncePod volume must not be published at the targets of two pods.
 */
export function checkSinglePod(world: SimWorld, driverName: string, volumeId: string): Finding[] {
  const vol = world.scenario.volumes.find((v) => !v.inline && v.driver === driverName && v.handle === volumeId);
  if (vol === undefined || !isReadWriteOncePod(vol)) return [];
  const targets = [...(world.drivers.get(driverName)?.volume(volumeId)?.publishedAt ?? [])].sort();
  const owners = world.scenario.pods.filter((p) => targets.some((t) => ownsTarget(p.uid, t))).map((p) => p.uid);
  if (owners.length < 2) return [];
  return [{ invariant: 'rwop-one-pod', message: `ReadWriteOncePod volume ${volumeId} is published for pods ${owners.join(', ')} at once (${targets.join(', ')})` }];
}

/**
 * A removal that takes what a driver still uses: the vol_data.json beside a path it has staged
 * or published (the only record that names the volume there), or the path itself while it is
 * still mounted. A path whose mount is already gone (a driver that unmounted, then failed to
 * remove the directory, still lists it) is only an empty directory: the next call makes it again.
 */
export function checkRemoval(world: SimWorld, removed: string): Finding[] {
  const out: Finding[] = [];
  const takes = (kept: string): boolean => removalHits(removed, kept) && (removed.endsWith('/vol_data.json') || world.mounter.isMounted(kept));
  for (const [name, d] of world.drivers) {
    for (const [id, st] of d.volumes()) {
      if (st.stagedAt !== undefined && takes(st.stagedAt)) {
        out.push({ invariant: 'nothing-removed-early', message: `${removed} removed while ${name} has ${id} staged at ${st.stagedAt}` });
      }
      for (const t of st.publishedAt) {
        if (takes(t)) out.push({ invariant: 'nothing-removed-early', message: `${removed} removed while ${name} has ${id} published at ${t}` });
      }
    }
  }
  return out;
}

/** The engine wrote volumesInUse: an attached volume still staged or globally mounted must be in it. */
export function checkInUseReported(world: SimWorld, written: readonly string[]): Finding[] {
  const out: Finding[] = [];
  const attached = new Set(world.cluster.volumesAttached.map((v) => v.name));
  const inUse = new Set(written);
  const globalMounts = new Set(world.mounter.entries().map((e) => e.mountPoint));
  for (const [name, d] of world.drivers) {
    for (const v of world.scenario.volumes) {
      if (v.inline || v.driver !== name) continue;
      const u = uniqueName(name, v.handle);
      if (!attached.has(u) || inUse.has(u)) continue;
      const staged = d.volume(v.handle)?.stagedAt !== undefined;
      const gm = `${SIM_ROOT}/plugins/kubernetes.io/csi/${name}/${sha256Hex(v.handle)}/globalmount`;
      if (staged || globalMounts.has(gm)) {
        out.push({ invariant: 'in-use-reported', message: `volumesInUse [${written.join(', ')}] written without ${u}, which is attached and ${staged ? 'staged at the driver' : 'globally mounted'}` });
      }
    }
  }
  return out;
}

/**
 * What keeps the run from having converged (none: converged): the engine is running, no call
 * runs at a driver, what the running pods want is staged and published (and mounted), nothing
 * else is, the directories of what went are gone, and volumesInUse lists exactly the wanted,
 * attached volumes. `quick` stops at the first group of problems found (the driver's answer
 * settles most runs; the directories are looked at one by one, a walk of the whole tree at
 * every change cost the simulator a fifth of its time).
 */
/** The first item of `items` that `test` accepts (Array.prototype.find without copying an iterable into an array first). */
function findOf<T>(items: Iterable<T>, test: (item: T) => boolean): T | undefined {
  for (const item of items) if (test(item)) return item;
  return undefined;
}

/** Whether `test` accepts some item of `items` (Array.prototype.some without the copy). */
function someOf<T>(items: Iterable<T>, test: (item: T) => boolean): boolean {
  for (const item of items) if (test(item)) return true;
  return false;
}

export function convergenceProblems(world: SimWorld, engine: { readonly running: boolean }, quick: boolean): string[] {
  const problems: string[] = [];
  if (!engine.running) problems.push('the engine is restarting');
  // A driver that never returns (`hang: forever`) is exempt: its calls, its volumes.
  const exempt = world.neverReturns;
  if (world.inFlightOwed() > 0) problems.push('CSI calls are still running at the driver');
  if (problems.length > 0 && quick) return problems;
  const wanted = world.wanted();
  for (const w of wanted.values()) {
    const d = world.drivers.get(w.driver);
    if (d === undefined || exempt.has(w.driver)) continue;
    if (w.vol.inline) {
      const uid = w.pods[0] ?? '';
      const published = someOf(d.volumes().values(), (st) => someOf(st.publishedAt, (t) => t.includes(`/pods/${uid}/`) && world.mounter.isMounted(t)));
      if (!published) problems.push(`inline volume ${w.vol.name} of pod ${uid} is not published`);
      continue;
    }
    const st = d.volume(w.handle);
    const stages = world.scenario.drivers.find((x) => x.name === w.driver)?.stageUnstage ?? true;
    // The driver's records survive a reboot; the mounts do not: both must be there.
    if (stages && (st?.stagedAt === undefined || !world.mounter.isMounted(st.stagedAt))) problems.push(`${w.handle} is wanted but not staged`);
    const publishedFor = (uid: string): boolean => {
      const target = st === undefined ? undefined : findOf(st.publishedAt, (t) => t.includes(`/pods/${uid}/`) || t.endsWith(`/${uid}`));
      return target !== undefined && world.mounter.isMounted(target);
    };
    // ReadWriteOncePod wanted by several running pods: kubelet sets it up for one of them and
    // refuses the others for as long as that one has it (on a real cluster the scheduler keeps
    // them apart); one of them is owed.
    if (isReadWriteOncePod(w.vol) && w.pods.length > 1) {
      if (!w.pods.some(publishedFor)) problems.push(`ReadWriteOncePod ${w.handle} is published for none of pods ${w.pods.join(', ')}`);
    } else for (const uid of w.pods) if (!publishedFor(uid)) problems.push(`${w.handle} is not published for pod ${uid}`);
  }
  for (const [name, d] of world.drivers) {
    if (exempt.has(name)) continue;
    for (const [id, st] of d.volumes()) {
      const isWanted = wanted.has(`${name}|${id}`) || someOf(wanted.values(), (w) => w.vol.inline && w.driver === name);
      if (!isWanted) problems.push(`${id} is unwanted but the driver still has it ${st.stagedAt !== undefined ? 'staged' : 'published'}`);
      else {
        for (const t of st.publishedAt) {
          const owner = findOf(world.running, (uid) => t.includes(`/pods/${uid}/`) || t.endsWith(`/${uid}`));
          if (owner === undefined) problems.push(`${id} is still published at ${t} for a pod that is gone`);
        }
      }
    }
  }
  if (quick && problems.length > 0) return problems;
  const mem = world.fs.mem;
  for (const v of world.scenario.volumes) {
    if (v.inline || exempt.has(v.driver) || wanted.has(`${v.driver}|${v.handle}`)) continue;
    const dir = `${SIM_ROOT}/plugins/kubernetes.io/csi/${v.driver}/${sha256Hex(v.handle)}`;
    if (mem.typeSync(dir) !== undefined) problems.push(`the directory of unwanted volume ${v.handle} is still there`);
  }
  for (const p of world.scenario.pods) {
    if (world.running.has(p.uid)) continue;
    // <root>/pods/<uid>/volumes/<plugin>/<volume>/: kubelet's pod cleanup (not the volume manager) removes the rest.
    const volumes = `${SIM_ROOT}/pods/${p.uid}/volumes`;
    const exemptName = (name: string): boolean => world.scenario.volumes.some((v) => v.name === name && exempt.has(v.driver));
    // A volume of the pod still published at a driver that never returns keeps the pod in the
    // actual state, and kubelet's orphan sweep skips such a pod (kubelet_volumes.go
    // cleanupOrphanedPodDirs, podVolumesExist): what only that sweep would remove (directories,
    // an interrupted vol_data.json.tmp) stays because of the exempt driver (generated workload
    // 6675: a restart between TearDown's unlink of vol_data.json and its rmdir of the volume dir).
    // A file the sweep cannot remove (vol_data.json) is a leftover all the same.
    const held = [...world.drivers].some(([name, d]) => exempt.has(name) && [...d.volumes()].some(([, st]) => [...st.publishedAt].some((t) => t.includes(`/pods/${p.uid}/`) || t.endsWith(`/${p.uid}`))));
    const sweepOnly = (dir: string): boolean =>
      (mem.namesSync(dir) ?? []).every((name) => {
        const type = mem.typeSync(`${dir}/${name}`);
        return type === 'directory' ? sweepOnly(`${dir}/${name}`) : name === 'vol_data.json.tmp';
      });
    const left = (mem.namesSync(volumes) ?? []).some((plugin) => (mem.namesSync(`${volumes}/${plugin}`) ?? []).some((name) => !exemptName(name) && !(held && sweepOnly(`${volumes}/${plugin}/${name}`))));
    if (left) problems.push(`pod ${p.uid} is gone but its volume directories are still there`);
  }
  if (quick && problems.length > 0) return problems;
  const attached = new Set(world.cluster.volumesAttached.map((v) => v.name));
  const want = [...wanted.values()]
    .filter((w) => !w.vol.inline && !exempt.has(w.driver) && (world.scenario.drivers.find((x) => x.name === w.driver)?.attachRequired ?? true))
    .map((w) => uniqueName(w.driver, w.handle))
    .filter((u) => attached.has(u))
    .sort();
  const exemptPrefixes = [...exempt].map((d) => `kubernetes.io/csi/${d}^`);
  const have = [...world.cluster.volumesInUse].filter((u) => !exemptPrefixes.some((p) => u.startsWith(p))).sort();
  if (want.join(',') !== have.join(',')) problems.push(`volumesInUse is [${have.join(', ')}], want [${want.join(', ')}]`);
  return problems;
}
