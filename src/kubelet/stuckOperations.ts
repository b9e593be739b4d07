/**
 * "Stuck is visible" (nodevol addition; docs/reference/agent.md, "Stuck volumes"): a volume whose teardown keeps failing.
 *
 * Kubelet retries a failed UnmountDevice / TearDown forever with exponential backoff and logs each
 * failure ("Operation for … failed. No retries permitted until …", see operationLog.ts), but
 * nothing tells an operator that one volume has been refused for minutes: the volume stays staged
 * and in volumesInUse, safe but stuck. This tracker listens to the settled operations
 * (NestedPendingOperations.onComplete) and, for the teardown operations only:
 *
 * - after {@link STUCK_AFTER_MS} of continuous failure (checked at each failure, so at the first
 *   failure at or after one minute) logs ONE warning per volume operation and stuck episode,
 *   naming the volume, the driver, the driver's last error and gRPC code, the pod volume
 *   directories that still name the volume, and what an operator can do;
 * - keeps the gauge volume_manager_stuck_operations{plugin_name, operation_name} (a nodevol
 *   metric in kubelet's naming) equal to the number of such operations;
 * - persists them in a small bounded status file, `<root-dir>/nodevol/stuck-operations.json`
 *   (stuckOperationsFile.ts: atomic, durable, bounded), which `nodevol audit` reads to report
 *   the volume without anyone reading a log;
 * - on the next success of the same operation key, logs that it recovered and clears the episode.
 *   An episode whose operation is no longer retried at all (no failure for
 *   {@link STUCK_FORGET_AFTER_MS}: the volume left the actual state some other way) is dropped.
 *
 * No timer: time comes from the Clock port at each settled operation; every duration (stuck
 * after, forget after, the file refresh) is measured on its monotonic clock, and the wall clock
 * only stamps what is printed (the times in the status file and the log), so a wall clock
 * stepped by hours neither calls a volume stuck early nor postpones it. Listener-safe: observe()
 * never throws; its asynchronous work (the target look-up, the file) is awaited by settled().
 */
import * as posix from 'node:path/posix';
import type { StuckOperationMetrics } from '../ports/metrics.js';
import type { Clock } from '../ports/clock.js';
import { errorCode, errorMessage, type FileSystem } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import type { KubeletLayout } from '../layout/layout.js';
import { CSI_PLUGIN_NAME } from '../layout/names.js';
import type { OperationCompleteEvent } from '../operationexecutor/nestedPendingOperations.js';
import { OP } from '../operationexecutor/operationGenerator.js';
import { goDuration, grpcCodeOf, operationErrorText } from '../operationexecutor/operationLog.js';
import {
  cutStuckError,
  MAX_STUCK_ENTRIES,
  MAX_STUCK_TARGETS,
  removeStuckOperationsFile,
  STUCK_OPERATIONS_FILE_VERSION,
  stuckOperationsPath,
  writeStuckOperationsFile,
  type StuckOperation,
} from './stuckOperationsFile.js';

/** Continuous failure after which a teardown operation is called stuck. */
export const STUCK_AFTER_MS = 60_000;
/** An episode with no failure for this long is no longer retried: forgotten (> 2 x kubelet's 2m2s backoff cap). */
export const STUCK_FORGET_AFTER_MS = 5 * 60_000;
/** A failure that changes no episode's state (only its count) rewrites the file at most this often. */
export const STUCK_FILE_REFRESH_MS = 10_000;
/** The operations that take a volume (or a pod's use of it) down: the ones that can leave it stuck. */
export const TEARDOWN_OPERATIONS: ReadonlySet<string> = new Set([OP.unmount, OP.unmountDevice, OP.unmap, OP.unmapDevice]);

/** An episode's key: one per volume and pod (podName '' for a device operation). */
function episodeKey(volumeName: string, podName: string): string {
  return `${volumeName}\u0000${podName}`;
}

/** The CSI call behind each teardown operation, for messages. */
const CSI_CALL: Readonly<Record<string, string>> = {
  [OP.unmount]: 'NodeUnpublishVolume',
  [OP.unmap]: 'NodeUnpublishVolume',
  [OP.unmountDevice]: 'NodeUnstageVolume',
  [OP.unmapDevice]: 'NodeUnstageVolume',
};

export interface StuckOperationTrackerOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics?: StuckOperationMetrics;
  /** Where to persist the stuck operations (the agent: the root dir's status file); none: memory only. */
  readonly statusFile?: { readonly fs: FileSystem; readonly realRootDir: string };
  /**
   * The publish targets / pod volume directories that still name a volume (bounded by the
   * caller), for the warning and the status file. Rejections are logged and ignored.
   */
  readonly findTargets?: (volumeName: string) => Promise<readonly string[]>;
  /** The root dir to name in the operator's hint (`nodevol audit --root-dir …`). */
  readonly rootDir?: string;
  /** Default {@link STUCK_AFTER_MS}. */
  readonly stuckAfterMs?: number;
}

interface Episode {
  readonly volumeName: string;
  readonly podName: string;
  operation: string;
  readonly driver: string;
  /** Monotonic (Clock.nowMs): what durations are measured with. */
  readonly firstFailureMs: number;
  lastFailureMs: number;
  /** Wall clock (Clock.wallMs) at the same moments: only printed. */
  readonly firstFailureWallMs: number;
  lastFailureWallMs: number;
  failures: number;
  lastError: string;
  grpcCode: string | undefined;
  /** Warned (and so counted stuck, in the metric and the file). */
  stuck: boolean;
  targets: readonly string[];
}

/** The driver of a CSI unique volume name `kubernetes.io/csi/<driver>^<handle>`; '' otherwise. */
export function driverOfVolume(volumeName: string): string {
  const prefix = `${CSI_PLUGIN_NAME}/`;
  if (!volumeName.startsWith(prefix)) return '';
  const rest = volumeName.slice(prefix.length);
  const caret = rest.indexOf('^');
  return caret > 0 ? rest.slice(0, caret) : '';
}

export class StuckOperationTracker {
  readonly #episodes = new Map<string, Episode>();
  readonly #o: StuckOperationTrackerOptions;
  readonly #stuckAfterMs: number;
  /** Asynchronous work started by observe(), awaited by settled(). */
  readonly #work = new Set<Promise<void>>();
  #writing: Promise<void> | undefined;
  #dirty = false;
  /** Whether the status file may exist (written by this life, or maybe by a previous one). */
  #fileMayExist = true;
  /** Clock time of the last status file write that was asked for by a count update. */
  #lastRefreshMs = Number.NEGATIVE_INFINITY;

  constructor(options: StuckOperationTrackerOptions) {
    this.#o = options;
    this.#stuckAfterMs = options.stuckAfterMs ?? STUCK_AFTER_MS;
  }

  /** The operations currently called stuck, sorted by volume, pod and operation. */
  stuck(): StuckOperation[] {
    return [...this.#episodes.values()]
      .filter((e) => e.stuck)
      .sort((a, b) => cmp(a.volumeName, b.volumeName) || cmp(a.podName, b.podName) || cmp(a.operation, b.operation))
      .map((e) => this.#entryOf(e));
  }

  /**
   * Removes a status file left by a previous life (its episodes are not this life's: the next
   * one is found again after a minute) and resets the gauge. Errors are logged.
   */
  async start(): Promise<void> {
    this.#publishMetric();
    this.#dirty = true;
    await this.#flush();
  }

  /** Resolves when the work started by observe() so far (target look-ups, file writes) is done. */
  async settled(): Promise<void> {
    while (this.#work.size > 0) await Promise.all([...this.#work]);
  }

  /** The listener: call it with every settled operation. Never throws. */
  observe(e: OperationCompleteEvent): void {
    try {
      this.#observe(e);
    } catch (err) {
      this.#o.logger.error(err, 'Stuck operation tracking failed');
    }
  }

  #observe(e: OperationCompleteEvent): void {
    const now = this.#o.clock.nowMs();
    const wallNow = this.#o.clock.wallMs();
    const key = episodeKey(e.key.volumeName, e.key.podName);
    let changed = this.#forgetAbandoned(now);
    const episode = this.#episodes.get(key);
    if (e.error === undefined) {
      if (episode !== undefined) {
        this.#episodes.delete(key);
        if (episode.stuck) {
          changed = true;
          this.#o.logger.info('Volume operation succeeded after being stuck', {
            volume: episode.volumeName,
            driver: episode.driver,
            operation: e.operationName,
            ...(episode.podName === '' ? {} : { pod: episode.podName }),
            stuckFor: goDuration(now - episode.firstFailureMs),
            failures: episode.failures,
          });
        }
      }
      if (changed) this.#changed();
      return;
    }
    if (!TEARDOWN_OPERATIONS.has(e.operationName)) {
      if (changed) this.#changed();
      return;
    }
    const errorText = cutStuckError(operationErrorText(e.error));
    const grpcCode = grpcCodeOf(e.error);
    let ep = episode;
    if (ep === undefined) {
      ep = {
        volumeName: e.key.volumeName,
        podName: e.key.podName,
        operation: e.operationName,
        driver: driverOfVolume(e.key.volumeName),
        firstFailureMs: now,
        lastFailureMs: now,
        firstFailureWallMs: wallNow,
        lastFailureWallMs: wallNow,
        failures: 0,
        lastError: '',
        grpcCode: undefined,
        stuck: false,
        targets: [],
      };
      this.#episodes.set(key, ep);
    }
    ep.operation = e.operationName;
    ep.lastFailureMs = now;
    ep.lastFailureWallMs = wallNow;
    ep.failures++;
    ep.lastError = errorText;
    ep.grpcCode = grpcCode;
    if (ep.stuck) {
      // Only the count and the error moved: refresh the file now and then, not at every failure
      // (a thousand stuck volumes fail every few seconds between them).
      if (now - this.#lastRefreshMs >= STUCK_FILE_REFRESH_MS) {
        this.#lastRefreshMs = now;
        changed = true;
      }
    } else if (now - ep.firstFailureMs >= this.#stuckAfterMs && this.#countStuck() < MAX_STUCK_ENTRIES) {
      ep.stuck = true;
      changed = true;
      this.#track(this.#warn(ep));
    }
    if (changed) this.#changed();
  }

  #countStuck(): number {
    let n = 0;
    for (const e of this.#episodes.values()) if (e.stuck) n++;
    return n;
  }

  /** Drops episodes whose operation has not failed for STUCK_FORGET_AFTER_MS; true if a stuck one went. */
  #forgetAbandoned(now: number): boolean {
    let changed = false;
    for (const [key, ep] of this.#episodes) {
      if (now - ep.lastFailureMs < STUCK_FORGET_AFTER_MS) continue;
      this.#episodes.delete(key);
      if (!ep.stuck) continue;
      changed = true;
      this.#o.logger.info('Stuck volume operation is no longer retried; forgetting it', {
        volume: ep.volumeName,
        driver: ep.driver,
        operation: ep.operation,
        lastFailure: new Date(ep.lastFailureWallMs).toISOString(),
      });
    }
    return changed;
  }

  async #warn(ep: Episode): Promise<void> {
    if (this.#o.findTargets !== undefined) {
      try {
        ep.targets = (await this.#o.findTargets(ep.volumeName)).slice(0, MAX_STUCK_TARGETS);
      } catch (err) {
        this.#o.logger.error(err, 'Cannot list the pod volume directories of a stuck volume', { volume: ep.volumeName });
      }
      // The operation may have succeeded (or the episode been forgotten) while the look-up ran:
      // its "succeeded after being stuck" line is then already out, and a warning now would
      // tell an operator that a recovered volume is stuck.
      if (this.#episodes.get(episodeKey(ep.volumeName, ep.podName)) !== ep) return;
    }
    const now = this.#o.clock.nowMs();
    this.#o.logger.warning(this.#warningText(ep), {
      volume: ep.volumeName,
      driver: ep.driver,
      operation: ep.operation,
      ...(ep.podName === '' ? {} : { pod: ep.podName }),
      failingFor: goDuration(now - ep.firstFailureMs),
      failures: ep.failures,
      lastError: ep.lastError,
      ...(ep.grpcCode === undefined ? {} : { grpcCode: ep.grpcCode }),
      targets: ep.targets.join(','),
    });
    this.#changed();
  }

  /** The warning's sentence: what is refused, and what an operator can do about it. */
  #warningText(ep: Episode): string {
    const call = CSI_CALL[ep.operation] ?? ep.operation;
    const audit = `nodevol audit${this.#o.rootDir === undefined ? '' : ` --root-dir ${this.#o.rootDir}`}`;
    const driver = ep.driver === '' ? 'the volume plugin' : `driver ${ep.driver}`;
    const device = ep.operation === OP.unmountDevice || ep.operation === OP.unmapDevice;
    const head = `Volume ${ep.volumeName} is stuck: ${call} has failed for over ${goDuration(this.#stuckAfterMs)} (${ep.failures} attempts), ${driver} answers ${ep.grpcCode ?? 'an error'}; it stays staged and in volumesInUse until it succeeds.`;
    const where =
      ep.targets.length > 0
        ? ` Pod volume directories still naming it: ${ep.targets.join(', ')}.`
        : device
          ? ' No pod volume directory still names it.'
          : '';
    const todo = device
      ? ` If the driver says the volume is still published, a publish target was left behind (often a pod directory that could not be reconstructed after a reboot): NodeUnpublishVolume it with the driver's tools, then the next retry unstages; \`${audit}\` lists this volume as stuck with the directories that name it.`
      : ` Check the driver's logs for the target; \`${audit}\` lists this volume as stuck.`;
    return head + where + todo;
  }

  #entryOf(e: Episode): StuckOperation {
    return {
      volumeName: e.volumeName,
      driver: e.driver,
      podName: e.podName,
      operation: e.operation,
      firstFailure: new Date(e.firstFailureWallMs).toISOString(),
      lastFailure: new Date(e.lastFailureWallMs).toISOString(),
      failures: e.failures,
      lastError: e.lastError,
      ...(e.grpcCode === undefined ? {} : { grpcCode: e.grpcCode }),
      targets: e.targets,
    };
  }

  #changed(): void {
    this.#publishMetric();
    this.#dirty = true;
    if (this.#writing === undefined) this.#track(this.#flush());
  }

  #publishMetric(): void {
    if (this.#o.metrics === undefined) return;
    const counts = new Map<string, { pluginName: string; operationName: string; count: number }>();
    for (const e of this.#episodes.values()) {
      if (!e.stuck) continue;
      const pluginName = e.driver === '' ? 'N/A' : `${CSI_PLUGIN_NAME}:${e.driver}`;
      const k = `${pluginName}\u0000${e.operation}`;
      const c = counts.get(k);
      if (c === undefined) counts.set(k, { pluginName, operationName: e.operation, count: 1 });
      else c.count++;
    }
    try {
      this.#o.metrics.setStuckOperations([...counts.values()]);
    } catch (err) {
      this.#o.logger.error(err, 'Cannot update the stuck operations gauge');
    }
  }

  #track(p: Promise<void>): void {
    const tracked = p.catch((err: unknown) => this.#o.logger.error(err, 'Stuck operation tracking failed')).finally(() => this.#work.delete(tracked));
    this.#work.add(tracked);
  }

  /** Writes the status file until it reflects the latest state (one write at a time). */
  async #flush(): Promise<void> {
    if (this.#writing !== undefined) return this.#writing;
    const run = async (): Promise<void> => {
      while (this.#dirty) {
        this.#dirty = false;
        await this.#writeStatusFile();
      }
    };
    this.#writing = run().finally(() => {
      this.#writing = undefined;
    });
    return this.#writing;
  }

  async #writeStatusFile(): Promise<void> {
    const target = this.#o.statusFile;
    if (target === undefined) return;
    const entries = this.stuck();
    try {
      if (entries.length === 0) {
        // Nothing stuck: no file, and a root dir as clean as kubelet leaves it.
        if (!this.#fileMayExist) return;
        await removeStuckOperationsFile(target.fs, target.realRootDir);
        this.#fileMayExist = false;
        return;
      }
      await writeStuckOperationsFile(target.fs, target.realRootDir, { version: STUCK_OPERATIONS_FILE_VERSION, writtenAt: new Date(this.#o.clock.wallMs()).toISOString(), entries });
      this.#fileMayExist = true;
    } catch (err) {
      this.#o.logger.error(err, 'Cannot write the stuck operations status file; nodevol audit will not see them', { file: stuckOperationsPath(target.realRootDir), err: errorMessage(err) });
    }
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The pod volume directories on disk that name a CSI volume by its spec name (filesystem:
 * pods/<uid>/volumes/kubernetes.io~csi/<spec>; block: pods/<uid>/volumeDevices/kubernetes.io~csi/<spec>),
 * at most `limit`: the publish targets a driver may still hold after a reboot, whether or not
 * the volume manager could reconstruct them. One readdir of pods/ and two lstats per pod; a
 * symlink is not a directory here. Sorted by path.
 */
export async function podVolumeDirsNaming(fs: FileSystem, layout: KubeletLayout, specName: string, limit = MAX_STUCK_TARGETS): Promise<string[]> {
  let pods: string[];
  try {
    pods = (await fs.readdir(layout.podsDir())).filter((e) => e.type === 'directory').map((e) => e.name).sort();
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return [];
    throw err;
  }
  const out: string[] = [];
  for (const uid of pods) {
    const device = layout.csiPodDeviceMapPath(uid, specName);
    for (const dir of [layout.csiPodVolumeDir(uid, specName), posix.join(device.dir, device.name)]) {
      try {
        if ((await fs.lstat(dir)).type === 'directory') out.push(dir);
      } catch {
        // not there (or unreadable): not a target we can name
      }
      if (out.length >= limit) return out;
    }
  }
  return out;
}

