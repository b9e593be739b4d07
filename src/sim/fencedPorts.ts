/**
 * The fence between the engine and the simulated world: the ports one engine life runs on
 * (FileSystem, Mounter, ClusterView, the CSI client registry, the Clock), each a wrapper that
 * numbers the call and hands its effect to the scheduler instead of doing it. The effect lands on
 * the world, and the engine's promise settles, only when the scheduler runs that event, and only
 * while the life is alive: a crashed life's calls never land and never settle.
 *
 * The numbers are what a run's plan refers to (plan.ts): a crash lands just before a call (it
 * never starts) or just after it (its effect landed, the engine never hears), a SIGTERM just
 * before or after a call (which goes on: the runtime stops gracefully), a fault on the Nth
 * CSI call. A CSI call is sent as one event and answered as another (the answer can be lost in a
 * crash); the client gives up after kubelet's deadline while the driver may carry on.
 */
import type { FakeCsiDriver, FakeCsiFaultHandle } from '../adapters/memory/fakeCsiDriver.js';
import type { Clock } from '../ports/clock.js';
import type { ClusterView } from '../ports/cluster.js';
import { CsiCallError, GrpcStatus, grpcStatusName, type CsiDriverRegistry, type CsiMethod, type CsiNodeClient } from '../ports/csi.js';
import { errorCode, errorMessage, quietError, type FileSystem } from '../ports/fs.js';
import type { Mounter, MountTable } from '../ports/mounter.js';
import type { CsiRecord, PortCallRecord } from '../trace/simTrace.js';
import { planFaultRule, type CrashKind, type FaultKind, type Perturbation } from './plan.js';
import type { Domain, Scheduler } from './scheduler.js';
import type { SimWorld } from './world.js';

/** kubelet's CSI client timeout (csiTimeout, 2 minutes). */
export const CSI_CLIENT_TIMEOUT_MS = 120_000;

/** One engine life: its events' scheduler domain, and whether it still runs. */
export interface EngineLife {
  readonly id: number;
  readonly domain: Domain;
  alive: boolean;
}

export interface CrashPoint {
  readonly seq: number;
  readonly at: 'before' | 'after';
  /** Hash of everything a crash keeps: files (and what is durable), mounts, driver, cluster, scenario progress. */
  readonly state: string;
  /** Engine life the call belongs to. */
  readonly life: number;
}

/** One numbered call of a run: a port call, or a CSI call (with its index among the run's CSI calls). */
export interface CallRecord {
  readonly seq: number;
  /** `fs.mkdir /var/lib/kubelet/...`, `csi.NodeStageVolume vol-1`. */
  readonly label: string;
  readonly csiIndex?: number;
}

/** What the fence tells the run it fences. */
export interface FenceListener {
  /** The plan crashes the engine at this call: the current life ends. */
  crash(kind: Exclude<CrashKind, 'stop'>): void;
  /** The plan delivers a SIGTERM at this call: the current life stops gracefully, then exits. */
  sigterm(): void;
  /**
   * A call's effect landed, or a CSI call was sent or answered (the trace and the run's hash): a
   * PortCallRecord's fields, passed one by one, since a run without a full trace keeps none.
   */
  record(seq: number, life: number, port: PortCallRecord['port'], op: string, args: string, result: string): void;
  /** The CSI call of the current step, as sent and as answered. */
  csi(call: CsiRecord): void;
  /**
   * Something perturbed the engine now: a planned fault taken or answered, the answer to a call
   * that took a scenario's counted fault rule, an injected read error.
   */
  perturbed(): void;
  /** The engine removed a path (unlink, rmdir, the source of a rename). */
  removed(path: string): void;
  /**
   * The engine life starts an act of its loops: a CSI call, a mount or unmount, a volumesInUse
   * write (`what` names it). Called as the engine makes the call.
   */
  acts(life: EngineLife, what: string): void;
  /** The engine wrote volumesInUse. */
  inUseWritten(names: readonly string[]): void;
  /** A CSI call failed to the engine: its life owes an error line. */
  csiFailed(life: EngineLife, method: string): void;
  /** The hash of what a crash now would keep (for the crash points). */
  worldState(): string;
}

export interface FenceOptions {
  readonly plan: readonly Perturbation[];
  /** Record the world-state hash at every crash point (before/after each numbered call). */
  readonly recordCrashPoints?: boolean;
  /** Record every numbered call as it is made. */
  readonly recordCalls?: boolean;
}

/** The ports of one engine life. */
export interface FencedPorts {
  readonly fs: FileSystem;
  readonly mounter: Mounter;
  readonly cluster: ClusterView;
  readonly csiDrivers: CsiDriverRegistry;
  readonly clock: Clock;
}

const NEVER = (): Promise<never> => new Promise<never>(() => undefined);

/** `fs.lstat #`, per port and operation: a port call's event label without its seq, made once. */
const CALL_LABEL_PREFIXES = new Map<string, Map<string, string>>();
function callLabelPrefix(port: string, op: string): string {
  let byOp = CALL_LABEL_PREFIXES.get(port);
  if (byOp === undefined) CALL_LABEL_PREFIXES.set(port, (byOp = new Map<string, string>()));
  let prefix = byOp.get(op);
  if (prefix === undefined) byOp.set(op, (prefix = `${port}.${op} #`));
  return prefix;
}

export class Fence {
  #seq = 0;
  #csiCount = 0;
  readonly #calls: CallRecord[] = [];
  readonly #crashPoints: CrashPoint[] = [];
  /** The plan's crashes (a plan is fixed for the run), looked up at every call's two crash points. */
  readonly #crashes: readonly Extract<Perturbation, { kind: 'crash' }>[];

  constructor(
    private readonly sched: Scheduler,
    private readonly world: SimWorld,
    private readonly options: FenceOptions,
    private readonly listener: FenceListener,
  ) {
    this.#crashes = options.plan.filter((p): p is Extract<Perturbation, { kind: 'crash' }> => p.kind === 'crash');
  }

  /** Numbered calls so far (port and CSI calls). */
  get portCalls(): number {
    return this.#seq;
  }

  /** CSI calls so far. */
  get csiCalls(): number {
    return this.#csiCount;
  }

  /** With recordCalls: every numbered call, in order. */
  get calls(): readonly CallRecord[] {
    return this.#calls;
  }

  /** With recordCrashPoints: the world at every crash point. */
  get crashPoints(): readonly CrashPoint[] {
    return this.#crashPoints;
  }

  ports(life: EngineLife): FencedPorts {
    return {
      fs: this.#fs(life),
      mounter: this.#mounter(life),
      cluster: this.#cluster(life),
      csiDrivers: {
        client: (name) => {
          const d = this.world.drivers.get(name);
          // A node plugin that has not registered yet (after a reboot) is not in kubelet's list.
          return d === undefined || !this.world.registered(name) ? undefined : this.#csi(life, d);
        },
      },
      clock: {
        nowMs: () => this.sched.now,
        // The simulated node's wall clock never steps: virtual time is both.
        wallMs: () => this.sched.now,
        sleep: (ms) =>
          this.#portCall(life, 'clock', 'sleep', `${ms}ms`, () => new Promise<void>((resolve) => this.sched.timer(life.domain, ms, 'timer', `sleep ${ms}ms`, resolve))),
      },
    };
  }

  #noteCrashPoint(life: EngineLife, seq: number, at: 'before' | 'after'): boolean {
    if (this.options.recordCrashPoints === true) this.#crashPoints.push({ seq, at, state: this.listener.worldState(), life: life.id });
    let hit: Extract<Perturbation, { kind: 'crash' }> | undefined;
    for (const p of this.#crashes) {
      if (p.seq === seq && p.at === at) {
        hit = p;
        break;
      }
    }
    if (hit === undefined) return false;
    // A SIGTERM ends nothing at once: the call goes on (before) or its answer reaches the engine
    // (after), while the runtime stops within its grace period.
    if (hit.crash === 'stop') {
      this.listener.sigterm();
      return false;
    }
    this.listener.crash(hit.crash);
    return true;
  }

  #portCall<T>(life: EngineLife, port: PortCallRecord['port'], op: string, args: string, effect: () => Promise<T>): Promise<T> {
    if (!life.alive) return NEVER();
    const seq = ++this.#seq;
    if (this.options.recordCalls === true) this.#calls.push({ seq, label: `${port}.${op} ${args}` });
    if (this.#noteCrashPoint(life, seq, 'before')) return NEVER();
    // A slow disk (scenario `slowDisk`): a file call completes that much later.
    const latency = port === 'fs' ? this.world.fileCallLatencyMs() : 0;
    return new Promise<T>((resolve, reject) => {
      // The call's answer: recorded, then handed to the engine unless a crash point took it.
      const landed = (result: string): boolean => {
        this.listener.record(seq, life.id, port, op, args, result);
        return !this.#noteCrashPoint(life, seq, 'after') && life.alive;
      };
      const ok = (value: T): void => {
        if (landed('ok')) resolve(value);
      };
      const failed = (err: unknown): void => {
        if (landed(errorCode(err) ?? errorMessage(err))) reject(err instanceof Error ? err : new Error(String(err)));
      };
      // One microtask after the effect settles, as an await of it would be (the order of the
      // engine's continuations is the run's, so it must not change); an effect that throws
      // lands at once.
      const land = (): Promise<void> => {
        let pending: Promise<T>;
        try {
          pending = effect();
        } catch (err) {
          failed(err);
          return Promise.resolve();
        }
        return pending.then(ok, failed);
      };
      const label = callLabelPrefix(port, op);
      if (latency > 0) this.sched.timer(life.domain, latency, 'port-call', label, land, seq);
      else this.sched.ready(life.domain, 'port-call', label, land, seq);
    });
  }

  #fs(life: EngineLife): FileSystem {
    const fs = this.world.fs;
    const read = <T>(op: string, p: string, f: () => Promise<T>): Promise<T> => this.#portCall(life, 'fs', op, p, f);
    const write = (op: string, p: string, f: () => Promise<void>): Promise<void> =>
      this.#portCall(life, 'fs', op, p, async () => {
        await f();
        this.world.changed();
      });
    const remove = (op: string, p: string, f: () => Promise<void>): Promise<void> =>
      write(op, p, async () => {
        await f();
        this.listener.removed(p);
      });
    return {
      readdir: (p) => read('readdir', p, () => fs.readdir(p)),
      lstat: (p) => read('lstat', p, () => fs.lstat(p)),
      stat: (p) => read('stat', p, () => fs.stat(p)),
      realpath: (p) => read('realpath', p, () => fs.realpath(p)),
      readFile: (p, max, o) =>
        read('readFile', p, () => {
          const injected = this.world.takeReadError(p);
          if (injected === undefined) return fs.readFile(p, max, o);
          this.listener.perturbed();
          return Promise.reject(injected);
        }),
      readlink: (p) => read('readlink', p, () => fs.readlink(p)),
      mkdir: (p, o) => write('mkdir', p, () => fs.mkdir(p, o)),
      writeFile: (p, d, o) => write(o?.fsync === true ? 'writeFile+fsync' : 'writeFile', p, () => fs.writeFile(p, d, o)),
      rename: (a, b) =>
        write('rename', `${a} -> ${b}`, async () => {
          await fs.rename(a, b);
          this.listener.removed(a);
        }),
      fsyncDir: (p) => read('fsyncDir', p, () => fs.fsyncDir(p)),
      rmdir: (p) => remove('rmdir', p, () => fs.rmdir(p)),
      unlink: (p) => remove('unlink', p, () => fs.unlink(p)),
      symlink: (t, p) => write('symlink', p, () => fs.symlink(t, p)),
    };
  }

  #mounter(life: EngineLife): Mounter {
    const m = this.world.mounter;
    return {
      isLikelyNotMountPoint: (p) => this.#portCall(life, 'mount', 'isLikelyNotMountPoint', p, () => m.isLikelyNotMountPoint(p)),
      mount: (s, t, f, o) => {
        if (life.alive) this.listener.acts(life, `mount ${t}`);
        return this.#portCall(life, 'mount', 'mount', `${s} ${t}`, () => m.mount(s, t, f, o));
      },
      unmount: (t) => {
        if (life.alive) this.listener.acts(life, `unmount ${t}`);
        return this.#portCall(life, 'mount', 'unmount', t, () => m.unmount(t));
      },
      readMountTable: (): Promise<MountTable> => this.#portCall(life, 'mount', 'readMountTable', '', () => m.readMountTable()),
    };
  }

  #cluster(life: EngineLife): ClusterView {
    const c = this.world.cluster;
    // An unreachable API server (scenario `apiDown`) fails every request, as a refused connection does.
    const call = <T>(op: string, args: string, f: () => Promise<T>): Promise<T> =>
      this.#portCall(life, 'cluster', op, args, () => (this.world.apiReachable() ? f() : Promise.reject(quietError(`${op}: dial tcp 127.0.0.1:6443: connect: connection refused`))));
    // A cluster without a watch (scenario clusterSignalsChanges: false): no change is signalled.
    const signals = this.world.scenario.clusterSignalsChanges !== false;
    return {
      // Served synchronously, as an informer's cache is: no port call, and a dead life hears nothing.
      objectsVersion: () => c.objectsVersion?.() ?? 0,
      onChange: (listener) => {
        if (!signals) return;
        c.onChange?.(() => {
          if (life.alive) listener();
        });
      },
      signalsEveryChange: () => signals,
      listPods: () => call('listPods', '', () => c.listPods()),
      getPersistentVolumeClaim: (ns, n) => call('getPersistentVolumeClaim', `${ns}/${n}`, () => c.getPersistentVolumeClaim(ns, n)),
      getPersistentVolume: (n) => call('getPersistentVolume', n, () => c.getPersistentVolume(n)),
      getCSIDriver: (n) => call('getCSIDriver', n, () => c.getCSIDriver(n)),
      getVolumeAttachment: (n) => call('getVolumeAttachment', n, () => c.getVolumeAttachment(n)),
      getSecret: (ns, n) => call('getSecret', `${ns}/${n}`, () => c.getSecret(ns, n)),
      requestServiceAccountToken: (r) => call('requestServiceAccountToken', `${r.namespace}/${r.serviceAccountName}`, () => c.requestServiceAccountToken(r)),
      getNodeStatus: () => call('getNodeStatus', '', () => c.getNodeStatus()),
      setVolumesInUse: (names) => {
        if (life.alive) this.listener.acts(life, `volumesInUse [${names.join(', ')}] written`);
        return call('setVolumesInUse', names.join(','), async () => {
          const before = c.volumesInUse.join(',');
          await c.setVolumesInUse(names);
          if (before !== names.join(',')) this.world.changed();
          this.listener.inUseWritten(names);
        });
      },
    };
  }

  #csi(life: EngineLife, driver: FakeCsiDriver): CsiNodeClient {
    const call = <T>(method: CsiMethod, volumeId: string, request: Readonly<Record<string, unknown>>, invoke: () => Promise<T>): Promise<T> => {
      if (!life.alive) return NEVER();
      this.listener.acts(life, `${method}${volumeId === '' ? '' : ` ${volumeId}`} sent`);
      const seq = ++this.#seq;
      const index = ++this.#csiCount;
      if (this.options.recordCalls === true) this.#calls.push({ seq, label: `csi.${method} ${volumeId}`, csiIndex: index });
      if (this.#noteCrashPoint(life, seq, 'before')) return NEVER();
      const fault = this.options.plan.find((p) => p.kind === 'fault' && p.csiCall === index);
      return new Promise<T>((resolve, reject) => {
        this.sched.ready(life.domain, 'csi-send', `${method} ${volumeId} #${seq}`, () => {
          const sentMs = this.sched.now;
          // A planned fault applies to this call or to none: the driver takes its faults when a
          // call arrives (synchronously, inside invoke()); one this call did not take (refused
          // ABORTED as busy, or an earlier scenario fault matched first) is withdrawn below, so
          // that it never lands on a later call.
          const planned = fault !== undefined && fault.kind === 'fault' ? this.#injectPlanFault(driver, method, volumeId, fault.fault) : undefined;
          this.listener.record(seq, life.id, 'csi', method, volumeId, 'sent');
          this.listener.csi({ seq, driver: driver.name, method, volumeId, request: { ...request } });
          const settle = (code: string, deliver: () => void): void => {
            // The answer travels back to the engine as its own event: it may be lost in a crash.
            this.sched.ready(life.domain, 'csi-reply', `${method} ${volumeId} #${seq} -> ${code}`, () => {
              if (method === 'NodePublishVolume' && code === 'OK') this.world.noteSetUp(driver.name, volumeId, request);
              this.listener.csi({ seq, driver: driver.name, method, volumeId, request: { ...request }, code, durationMs: this.sched.now - sentMs });
              this.listener.record(seq, life.id, 'csi', method, volumeId, code);
              // A fault reaches the engine with this answer, not when the call arrived: a hang
              // answers DEADLINE_EXCEEDED only after kubelet's 2-minute client deadline, a
              // clientTimeout rule after its own, and the operation's backoff (up to 2m2s) starts
              // then. The stuck window counts from here.
              if (tookFault) this.listener.perturbed();
              if (this.#noteCrashPoint(life, seq, 'after') || !life.alive) return;
              if (code !== 'OK' && method !== 'NodeGetCapabilities') this.listener.csiFailed(life, method);
              deliver();
            });
          };
          const pending = invoke();
          const tookPlanned = planned !== undefined && planned.remaining() === 0;
          planned?.remove();
          // A scenario's fault rule the call took perturbs at its answer too, when the rule has a
          // count: one without (it lasts until clearFaults) or a driver that never returns would
          // perturb at every retry, and a run that never ends is no answer.
          const scenarioRule = driver.lastTakenFault;
          const tookFault = tookPlanned || (scenarioRule !== undefined && scenarioRule.times !== undefined && scenarioRule.forever !== true);
          // The client's deadline (kubelet's csiTimeout): a call the driver has not answered by
          // then fails DEADLINE_EXCEEDED at the client, while the driver may carry on with it.
          let answered = false;
          const deadline = this.sched.timer(life.domain, CSI_CLIENT_TIMEOUT_MS, 'timer', `${method} ${volumeId} #${seq} deadline`, () => {
            if (answered) return;
            answered = true;
            settle('DEADLINE_EXCEEDED', () => reject(new CsiCallError(method, GrpcStatus.DEADLINE_EXCEEDED, `context deadline exceeded after ${CSI_CLIENT_TIMEOUT_MS} ms`)));
          });
          const answer = (code: string, deliver: () => void): void => {
            // A dead life hears nothing; an answer after the deadline reaches no one.
            if (answered || !life.alive) return;
            answered = true;
            this.sched.cancel(deadline);
            settle(code, deliver);
          };
          pending.then(
            (v) => answer('OK', () => resolve(v)),
            (err: unknown) => {
              const code = err instanceof CsiCallError && err.code !== undefined ? grpcStatusName(err.code) : 'UNKNOWN';
              answer(code, () => reject(err instanceof Error ? err : new Error(String(err))));
            },
          );
        });
      });
    };
    return {
      nodeGetCapabilities: () => call('NodeGetCapabilities', '', {}, () => driver.nodeGetCapabilities()),
      nodeStageVolume: (req) => call('NodeStageVolume', req.volumeId, { ...req }, () => driver.nodeStageVolume(req)),
      nodeUnstageVolume: (req) => call('NodeUnstageVolume', req.volumeId, { ...req }, () => driver.nodeUnstageVolume(req)),
      nodePublishVolume: (req) => call('NodePublishVolume', req.volumeId, { ...req }, () => driver.nodePublishVolume(req)),
      nodeUnpublishVolume: (req) => call('NodeUnpublishVolume', req.volumeId, { ...req }, () => driver.nodeUnpublishVolume(req)),
    };
  }

  #injectPlanFault(driver: FakeCsiDriver, method: CsiMethod, volumeId: string, fault: FaultKind): FakeCsiFaultHandle {
    this.listener.perturbed();
    return driver.inject(planFaultRule(fault, method, volumeId));
  }
}
