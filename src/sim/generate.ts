/**
 * Generated workloads: a seeded generator of valid scenarios over what the scenario format can
 * say, for `nodevol explore --generate N`. The same seed and size give the same scenario.
 *
 * What a workload holds:
 * - drivers with and without STAGE_UNSTAGE_VOLUME, attachRequired or not, podInfoOnMount or not,
 *   strict (hostpath) or lenient, registering with kubelet at once or seconds to minutes after
 *   it after a reboot; the first one always stages and is attachable;
 * - Filesystem and Block persistent volumes, CSI inline ephemeral volumes (on a driver that
 *   sends pod info), volumes shared by several pods; volume handles are the ids `nodevol
 *   mock-driver --volume NAME` provisions, so a fault rule of a workload names the same volume in
 *   the simulator and against the real mock driver process;
 * - pods running from the start or added later, deleted, and re-created (a new pod with the
 *   same volumes, as a StatefulSet re-creates one: a new UID);
 * - kubelet restarts and node reboots, driver restarts; with `--crash stop|all` also a SIGTERM
 *   (kubelet's graceful stop, then its exit and restart; see {@link sigtermCase}); every fault kind of the one fault model
 *   (error codes, before or after the effect, delays, hangs, client timeouts, driver exits); lost,
 *   unreadable and corrupted (bad JSON) pod-local vol_data.json; the
 *   root dir's filesystem full (ENOSPC) or read-only (EROFS) for a while; a slow disk (every file
 *   call of the engine slow for a while), often over a restart or reboot with a pod added
 *   meanwhile; the API server unreachable for a while (sometimes over a restart); a cluster that
 *   signals no change (the populator's polling path); time advancing.
 *
 * - PV access modes (ReadWriteOncePod, ReadWriteMany, ReadOnlyMany, ReadWriteOnce) and drivers
 *   with SINGLE_NODE_MULTI_WRITER; in 1 workload in 20, a driver that never returns (`hang:
 *   forever`), exempt from `converges`. These come from random streams of their own drawn after
 *   every other draw: they change the workloads of the seeds they touch, not the draws before them.
 *
 * Every workload can end converged (but the volumes of a driver that never returns): each fault has a bounded count, a hang is followed by a
 * restart of its driver (or a reboot), and the steps end with the faults cleared. What the
 * generator leaves out is what KEP-6058 leaves to an operator (both copies of a volume's data
 * lost: the pod-local file of a volume that has no global one, a Block volume's only file).
 */
import { GrpcStatus } from '../ports/csi.js';
import { mockVolumeId } from '../mockdriver/volumeId.js';
import type { CsiFault } from '../csi/faults.js';
import { Prng } from './prng.js';
import { CLAIM_STATES, NODE_FAULT_METHODS, type Scenario, type ScenarioDriver, type ScenarioPod, type ScenarioStep, type ScenarioVolume, type VolumeAccessMode } from './scenario.js';

export type WorkloadSize = 'small' | 'medium' | 'large';
export const WORKLOAD_SIZES: readonly WorkloadSize[] = ['small', 'medium', 'large'];

interface SizeSpec {
  readonly drivers: number;
  readonly volumes: number;
  readonly pods: number;
  readonly steps: number;
}

/** Medium is the yardstick: 4 volumes, 3 pods, 2 drivers, about 15 steps. */
export const SIZES: Readonly<Record<WorkloadSize, SizeSpec>> = {
  small: { drivers: 1, volumes: 2, pods: 2, steps: 8 },
  medium: { drivers: 2, volumes: 4, pods: 3, steps: 15 },
  large: { drivers: 3, volumes: 8, pods: 6, steps: 30 },
};

const DRIVER_NAMES = ['a.csi.example.com', 'b.csi.example.com', 'c.csi.example.com'];

/** Codes a driver answers with, and how often the generator picks each. */
const FAULT_CODES: readonly [keyof typeof GrpcStatus, number][] = [
  ['UNAVAILABLE', 3],
  ['ABORTED', 2],
  ['DEADLINE_EXCEEDED', 2],
  ['INTERNAL', 2],
  ['FAILED_PRECONDITION', 1],
  ['RESOURCE_EXHAUSTED', 1],
];

class Picker {
  constructor(private readonly rng: Prng) {}
  chance(p: number): boolean {
    return this.rng.next() < p;
  }
  int(lo: number, hi: number): number {
    return lo + this.rng.int(hi - lo + 1);
  }
  one<T>(items: readonly T[]): T {
    const x = items[this.rng.int(items.length)];
    if (x === undefined) throw new Error('picked from an empty list');
    return x;
  }
  weighted<T>(items: readonly (readonly [T, number])[]): T {
    const total = items.reduce((n, [, w]) => n + w, 0);
    let r = this.rng.next() * total;
    for (const [x, w] of items) {
      r -= w;
      if (r < 0) return x;
    }
    const last = items[items.length - 1];
    if (last === undefined) throw new Error('picked from an empty list');
    return last[0];
  }
  some<T>(items: readonly T[], lo: number, hi: number): T[] {
    const pool = [...items];
    const n = Math.min(pool.length, this.int(lo, hi));
    const out: T[] = [];
    for (let i = 0; i < n; i++) out.push(...pool.splice(this.rng.int(pool.length), 1));
    return out;
  }
}

/** What a workload may hold beyond the default draws. */
export interface GenerateOptions {
  /**
   * Draw a `sigterm` step (the explorer delivers SIGTERMs: `--crash stop|all`). Off by default, so
   * that a seed's workload is the same as before the step existed.
   */
  readonly sigterm?: boolean;
}

/** The workload of a seed. */
export function generateScenario(seed: number, size: WorkloadSize = 'medium', options: GenerateOptions = {}): Scenario {
  const spec = SIZES[size];
  const pick = new Picker(new Prng(seed ^ 0x5bd1e995));

  const drivers: ScenarioDriver[] = [];
  for (let i = 0; i < spec.drivers; i++) {
    const name = DRIVER_NAMES[i] ?? `d${i}.csi.example.com`;
    drivers.push(
      i === 0
        ? { name, attachRequired: true, podInfoOnMount: true, stageUnstage: true, mode: pick.chance(0.5) ? 'strict' : 'lenient' }
        : {
            name,
            attachRequired: pick.chance(0.5),
            podInfoOnMount: pick.chance(0.7),
            stageUnstage: pick.chance(0.5),
            mode: pick.chance(0.5) ? 'strict' : 'lenient',
          },
    );
  }

  // After a real reboot the node plugin often registers after kubelet: seconds to minutes.
  for (const [i, d] of drivers.entries()) if (pick.chance(0.3)) drivers[i] = { ...d, registersAfterMs: pick.one([2, 10, 60, 180]) * 1000 };

  const volumes: ScenarioVolume[] = [];
  for (let i = 1; i <= spec.volumes; i++) {
    const driver = pick.one(drivers);
    const inline = driver.podInfoOnMount && pick.chance(0.2);
    const name = inline ? `scratch-${i}` : `pv-${i}`;
    volumes.push({ name, handle: mockVolumeId(name), driver: driver.name, volumeMode: !inline && pick.chance(0.25) ? 'Block' : 'Filesystem', inline });
  }
  const persistent = volumes.filter((v) => !v.inline);
  const inlineVolumes = volumes.filter((v) => v.inline);

  // Pods: each inline volume belongs to one pod; persistent volumes may be shared.
  const pods: { uid: string; volumes: string[]; unused?: string[]; running: boolean }[] = [];
  for (let i = 1; i <= spec.pods; i++) {
    pods.push({ uid: `pod-${i}`, volumes: pick.some(persistent, 1, Math.min(3, persistent.length)).map((v) => v.name), running: i === 1 || pick.chance(0.7) });
  }
  for (const v of inlineVolumes) pick.one(pods).volumes.push(v.name);
  for (const p of pods) if (p.volumes.length === 0 && persistent.length > 0) p.volumes.push(pick.one(persistent).name);

  const signals = !pick.chance(0.2);
  const steps: ScenarioStep[] = [{ kind: 'wait' }];
  const running = new Set(pods.filter((p) => p.running).map((p) => p.uid));
  const deleted: string[] = [];
  /** Drivers with a hang rule whose held call only a restart of the driver (or a reboot) ends. */
  const hung = new Set<string>();
  let faults = 0;
  let recreated = 0;
  const driverOf = (volume: string): ScenarioDriver | undefined => drivers.find((d) => d.name === volumes.find((v) => v.name === volume)?.driver);

  for (let n = 0; n < spec.steps; n++) {
    const notRunning = pods.filter((p) => !running.has(p.uid) && !deleted.includes(p.uid));
    const kinds: [string, number][] = [
      ['advance', 3],
      ['fault', 4],
      ['restart', 1],
      ['reboot', 1],
      ['restartDriver', 1],
      ['clearFaults', 1],
      ['fsFault', 1],
      ['slowDisk', 1],
      ['apiDown', 1],
    ];
    if (hung.size === 0) kinds.push(['wait', 2]);
    if (notRunning.length > 0) kinds.push(['addPod', 3]);
    if (running.size > 0) kinds.push(['deletePod', 3]);
    if (deleted.length > 0) kinds.push(['recreate', 1]);
    const fileTargets = [...running].flatMap((uid) =>
      (pods.find((p) => p.uid === uid)?.volumes ?? []).filter((name) => persistent.some((v) => v.name === name && v.volumeMode === 'Filesystem')).map((volume) => ({ pod: uid, volume })),
    );
    if (fileTargets.length > 0) kinds.push(['readError', 1], ['deleteFile', 1], ['corruptFile', 1]);
    switch (pick.weighted(kinds)) {
      case 'wait':
        steps.push({ kind: 'wait' });
        break;
      case 'advance':
        steps.push({ kind: 'advance', ms: pick.one([1, 2, 5, 10, 30, 60, 90]) * 1000 });
        break;
      case 'addPod': {
        const p = pick.one(notRunning);
        running.add(p.uid);
        steps.push({ kind: 'addPod', uid: p.uid });
        break;
      }
      case 'deletePod': {
        const uid = pick.one([...running]);
        running.delete(uid);
        deleted.push(uid);
        steps.push({ kind: 'deletePod', uid });
        // As a StatefulSet does: the pod comes back at once, a new pod with the same claims,
        // while its volumes may still be torn down.
        const old = pods.find((p) => p.uid === uid);
        const claims = (old?.volumes ?? []).filter((name) => !inlineVolumes.some((v) => v.name === name));
        if (claims.length > 0 && pick.chance(0.3)) {
          if (pick.chance(0.5)) steps.push({ kind: 'advance', ms: pick.one([1, 2, 5]) * 1000 });
          const next = `${uid}-r${++recreated}`;
          pods.push({ uid: next, volumes: claims, running: false });
          running.add(next);
          steps.push({ kind: 'addPod', uid: next });
        }
        break;
      }
      case 'recreate': {
        const old = pods.find((p) => p.uid === pick.one(deleted));
        if (old === undefined) break;
        const uid = `${old.uid}-r${++recreated}`;
        // A new pod wanting the same volumes: a new UID, its own inline volumes' names.
        pods.push({ uid, volumes: old.volumes.filter((name) => !inlineVolumes.some((v) => v.name === name)), running: false });
        if (pods[pods.length - 1]?.volumes.length === 0) {
          pods.pop();
          break;
        }
        running.add(uid);
        steps.push({ kind: 'addPod', uid });
        break;
      }
      case 'restart':
        steps.push({ kind: 'restart' });
        break;
      case 'reboot':
        steps.push({ kind: 'reboot' });
        hung.clear();
        break;
      case 'restartDriver': {
        const d = pick.one(drivers);
        steps.push({ kind: 'restartDriver', driver: d.name });
        hung.delete(d.name);
        break;
      }
      case 'clearFaults':
        steps.push({ kind: 'clearFaults' });
        break;
      case 'fsFault':
        steps.push({ kind: 'fsFault', code: pick.chance(0.6) ? 'ENOSPC' : 'EROFS', ms: pick.one([5, 10, 30, 60]) * 1000 });
        break;
      case 'slowDisk':
        // A slow disk, often over a restart or a reboot: reconstruction then takes seconds.
        steps.push({ kind: 'slowDisk', latencyMs: pick.one([50, 200, 1000]), ms: pick.one([10, 30, 60]) * 1000 });
        if (pick.chance(0.6)) {
          const kind = pick.chance(0.7) ? 'restart' : 'reboot';
          steps.push({ kind });
          if (kind === 'reboot') hung.clear();
          if (notRunning.length > 0 && pick.chance(0.5)) {
            const p = pick.one(notRunning);
            running.add(p.uid);
            steps.push({ kind: 'addPod', uid: p.uid });
          }
        }
        break;
      case 'readError': {
        const t = pick.one(fileTargets);
        steps.push({ kind: 'readError', pod: t.pod, volume: t.volume, code: pick.chance(0.7) ? 'EIO' : 'EACCES', times: pick.int(1, 5) });
        break;
      }
      case 'apiDown':
        // The API server unreachable for a while, sometimes over a restart (kubelet starts without it).
        steps.push({ kind: 'apiDown', ms: pick.one([5, 30, 90]) * 1000 });
        if (pick.chance(0.3)) steps.push({ kind: 'restart' });
        break;
      case 'corruptFile': {
        // As deleteFile: only where the global file still names the volume (a driver that stages).
        const targets = fileTargets.filter((t) => driverOf(t.volume)?.stageUnstage === true);
        if (targets.length === 0) break;
        const t = pick.one(targets);
        // Only bad JSON: a pod-local file naming another handle or driver is trusted by kubelet
        // (an expected finding with every gate on, test/unit/sim/nodeFaults.test.ts).
        steps.push({ kind: 'corruptFile', pod: t.pod, volume: t.volume, as: 'badJson' });
        break;
      }
      case 'deleteFile': {
        // Only where the global file still names the volume (a driver that stages).
        const targets = fileTargets.filter((t) => driverOf(t.volume)?.stageUnstage === true);
        if (targets.length === 0) break;
        const t = pick.one(targets);
        steps.push({ kind: 'deleteFile', pod: t.pod, volume: t.volume });
        break;
      }
      case 'fault': {
        const rule = generateFault(pick, persistent, drivers);
        faults++;
        if (rule.fault.hang === true) for (const d of rule.drivers) hung.add(d);
        steps.push({ kind: 'fault', fault: rule.fault });
        break;
      }
    }
  }
  // Every workload can heal: faults cleared, held calls ended by a restart of their driver.
  if (faults > 0) steps.push({ kind: 'clearFaults' });
  for (const d of [...hung].sort()) steps.push({ kind: 'restartDriver', driver: d });

  populatorCases(seed, pods, volumes, drivers, steps);
  accessModeCases(seed, drivers, volumes, pods, steps);
  neverReturningDriver(seed, volumes, steps);
  // ---- A new stream goes here: after every one above (their draws stay what they were) and
  // before the SIGTERM draw, which stays the very last. ----

  // Keep last: its own stream, drawn after every other, so that the rest of the workload is the
  // seed's workload without it.
  if (options.sigterm === true) sigtermCase(seed, steps);

  const finalPods: ScenarioPod[] = pods.map((p) => ({ uid: p.uid, volumes: p.volumes, ...(p.unused !== undefined ? { unused: p.unused } : {}), running: p.running }));
  return {
    name: `generated-${size}-${seed}`,
    description: `generated workload: seed ${seed}, size ${size}`,
    source: `generated:${size}:${seed}`,
    featureGates: {},
    // Some clusters signal no change (no watch): the populator polls.
    ...(signals ? {} : { clusterSignalsChanges: false }),
    drivers,
    volumes,
    pods: finalPods,
    steps,
  };
}

/** The claim states kubelet's populator refuses (every one but Bound). */
const REFUSED_CLAIMS = CLAIM_STATES.filter((c) => c !== 'Bound');

/**
 * The cases kubelet's desired-state populator decides (docs/kubelet-fidelity.md rows 8 to 10),
 * added to a workload from a random stream of their own, so that the rest of the seed's workload
 * (its drivers, volumes, pods, steps and the picks behind them) is what it was without them:
 * - a pod volume no container uses (in spec.volumes only), with chance 1/4;
 * - a volume whose claim kubelet refuses (not Bound, being deleted, a PV claimRef of another
 *   uid), named by a pod, with chance 1/5;
 * - with chance 3/10, one deletePod step preceded by the pod turning terminal (Succeeded or
 *   Failed) or being marked for deletion (terminating) a few seconds before it leaves the list.
 */
function populatorCases(seed: number, pods: { uid: string; volumes: string[]; unused?: string[] }[], volumes: ScenarioVolume[], drivers: readonly ScenarioDriver[], steps: ScenarioStep[]): void {
  const side = new Picker(new Prng(seed ^ 0x27d4eb2f));
  const persistent = volumes.filter((v) => !v.inline);
  if (side.chance(0.25) && pods.length > 0) {
    const pod = side.one(pods);
    const candidates = persistent.filter((v) => !pod.volumes.includes(v.name));
    if (candidates.length > 0) pod.unused = [side.one(candidates).name];
  }
  if (side.chance(0.2) && pods.length > 0) {
    const name = `refused-${volumes.length + 1}`;
    volumes.push({ name, handle: mockVolumeId(name), driver: side.one(drivers).name, volumeMode: 'Filesystem', inline: false, claim: side.one(REFUSED_CLAIMS) });
    side.one(pods).volumes.push(name);
  }
  const deletes = steps.flatMap((st, i) => (st.kind === 'deletePod' ? [i] : []));
  if (side.chance(0.3) && deletes.length > 0) {
    const at = side.one(deletes);
    const st = steps[at];
    if (st?.kind !== 'deletePod') return;
    const before: ScenarioStep = side.chance(0.5) ? { kind: 'podPhase', uid: st.uid, phase: side.chance(0.5) ? 'Succeeded' : 'Failed' } : { kind: 'terminatePod', uid: st.uid };
    steps.splice(at, 0, before, { kind: 'advance', ms: side.one([1, 2, 5]) * 1000 });
  }
}

/** How often a persistent volume's PV gets each access mode (ReadWriteOnce: the PV names none). */
const ACCESS_MODE_WEIGHTS: readonly (readonly [VolumeAccessMode, number])[] = [
  ['ReadWriteOnce', 6],
  ['ReadWriteOncePod', 2],
  ['ReadWriteMany', 1],
  ['ReadOnlyMany', 1],
];

/**
 * Access modes, from a random stream of their own (drawn after every other one, so the rest of
 * the workload's draws are what they were): each driver reports SINGLE_NODE_MULTI_WRITER with
 * chance 1/2 (kubelet then sends SINGLE_NODE_MULTI_WRITER / SINGLE_NODE_SINGLE_WRITER for
 * ReadWriteOnce / ReadWriteOncePod), and each persistent volume's PV is ReadWriteOnce (6 in 10,
 * written as no access mode), ReadWriteOncePod (2 in 10), ReadWriteMany or ReadOnlyMany (1 in 10
 * each). A volume drawn ReadWriteOncePod that two running pods ever want at once stays
 * ReadWriteOnce (the draw is made all the same): after a reboot the engine sets it up for
 * neither, a known finding (docs/explorer.md, "Access modes and a driver that never returns");
 * a pod and its replacement (one deleted, then the other added) do get it.
 */
function accessModeCases(seed: number, drivers: ScenarioDriver[], volumes: ScenarioVolume[], pods: readonly { uid: string; volumes: readonly string[]; running: boolean }[], steps: readonly ScenarioStep[]): void {
  const side = new Picker(new Prng(seed ^ 0x165667b1));
  for (const [i, d] of drivers.entries()) if (side.chance(0.5)) drivers[i] = { ...d, singleNodeMultiWriter: true };
  const together = wantedTogether(pods, steps);
  for (const [i, v] of volumes.entries()) {
    if (v.inline) continue;
    const mode = side.weighted(ACCESS_MODE_WEIGHTS);
    if (mode === 'ReadWriteOncePod' && together.has(v.name)) continue;
    if (mode !== 'ReadWriteOnce') volumes[i] = { ...v, accessModes: [mode] };
  }
}

/** The volumes two running pods want at the same time at some step (no pod or volume drawn). */
function wantedTogether(pods: readonly { uid: string; volumes: readonly string[]; running: boolean }[], steps: readonly ScenarioStep[]): Set<string> {
  const running = new Set(pods.filter((p) => p.running).map((p) => p.uid));
  const out = new Set<string>();
  const look = (): void => {
    const count = new Map<string, number>();
    for (const p of pods) if (running.has(p.uid)) for (const v of p.volumes) count.set(v, (count.get(v) ?? 0) + 1);
    for (const [v, n] of count) if (n > 1) out.add(v);
  };
  look();
  for (const st of steps) {
    if (st.kind === 'addPod') running.add(st.uid);
    else if (st.kind === 'deletePod' || st.kind === 'podPhase') running.delete(st.uid);
    look();
  }
  return out;
}

/**
 * A driver that never returns, in 1 workload in 20, from a random stream of its own (after the
 * access modes' draws): a `hang: forever` rule for one node call of one persistent volume
 * (kubelet accepts its claim), at a random place among the steps. Neither a restart of the driver
 * nor clearFaults ends it; `converges` exempts that volume's driver, the safety invariants do not.
 */
function neverReturningDriver(seed: number, volumes: readonly ScenarioVolume[], steps: ScenarioStep[]): void {
  const side = new Picker(new Prng(seed ^ 0x3c6ef372));
  if (!side.chance(0.05)) return;
  const candidates = volumes.filter((v) => !v.inline && (v.claim ?? 'Bound') === 'Bound');
  if (candidates.length === 0) return;
  const volume = side.one(candidates);
  const fault: CsiFault = { method: side.one(NODE_FAULT_METHODS), volumeId: volume.handle, hang: true, forever: true };
  steps.splice(side.int(1, steps.length), 0, { kind: 'fault', fault });
}

/** Grace periods a generated `sigterm` step gives besides the agent's default (30 s). */
const SIGTERM_GRACES_MS: readonly number[] = [1_000, 5_000, 60_000];

/**
 * A SIGTERM to kubelet (only when the explorer delivers SIGTERMs), from a random stream of its
 * own: with chance 3/5 one `sigterm` step, after the first step (the first convergence), at any
 * later place, often right after a pod is deleted or added (its teardown or setup then in flight),
 * half the time with the agent's grace period, else with a shorter or a longer one.
 */
function sigtermCase(seed: number, steps: ScenarioStep[]): void {
  const side = new Picker(new Prng(seed ^ 0xc2b2ae35));
  if (!side.chance(0.6) || steps.length === 0) return;
  const podSteps = steps.flatMap((st, i) => (st.kind === 'deletePod' || st.kind === 'addPod' ? [i + 1] : []));
  const at = podSteps.length > 0 && side.chance(0.5) ? side.one(podSteps) : side.int(1, steps.length);
  const graceMs = side.chance(0.5) ? undefined : side.one(SIGTERM_GRACES_MS);
  steps.splice(at, 0, graceMs === undefined ? { kind: 'sigterm' } : { kind: 'sigterm', graceMs });
}

/** One fault rule, and the drivers it goes to. */
function generateFault(pick: Picker, persistent: readonly ScenarioVolume[], drivers: readonly ScenarioDriver[]): { fault: CsiFault; drivers: string[] } {
  const method = pick.one(NODE_FAULT_METHODS);
  const volume = persistent.length > 0 && pick.chance(0.6) ? pick.one(persistent) : undefined;
  const base: { method: CsiFault['method']; volumeId?: string; times: number } = { method, times: pick.int(1, 3), ...(volume === undefined ? {} : { volumeId: volume.handle }) };
  const to = volume === undefined ? drivers.map((d) => d.name) : [volume.driver];
  const kind = pick.weighted<string>([
    ['code', 5],
    ['afterEffect', 2],
    ['delay', 3],
    ['clientTimeout', 2],
    ['hang', 1],
    ['exit', 1],
  ]);
  const code = GrpcStatus[pick.weighted(FAULT_CODES)];
  switch (kind) {
    case 'code':
      return { fault: { ...base, code }, drivers: to };
    case 'afterEffect':
      return { fault: { ...base, code, afterEffect: true }, drivers: to };
    case 'delay':
      return { fault: { ...base, delayMs: pick.one([1, 5, 30, 90, 150]) * 1000 }, drivers: to };
    case 'clientTimeout':
      // Timed out at the client, still running at the driver (kubernetes#121357's shape).
      return { fault: { ...base, delayMs: pick.one([10, 30, 90, 180]) * 1000, clientTimeoutMs: pick.one([2, 5, 60, 120]) * 1000 }, drivers: to };
    case 'hang':
      return { fault: { ...base, times: 1, hang: true }, drivers: to };
    default:
      return { fault: { ...base, times: 1, exit: true }, drivers: to };
  }
}
