/**
 * `nodevol agent --trace FILE`: what the agent does, as trace events (src/trace/events.ts),
 * one JSON line each, appended, so that `nodevol timeline FILE` draws a real node's run the way
 * the simulator's runs are drawn. The ports the engine already uses are decorated; the engine
 * does not know it is traced.
 *
 * - CSI calls: every call, with its request, answer and duration.
 * - Files: every change the engine makes through the FileSystem port (write, remove, mkdir,
 *   rmdir, rename).
 * - Mount table: the driver mounts, not kubelet, so the table is read after every CSI call and
 *   at start, and the mount points under the root dir that appeared or disappeared are recorded.
 * - node.status: what was read (the agent reads it once at start, before it writes) and every
 *   volumesInUse written, each with volumesAttached as last read. Nothing is assumed: until the
 *   first read, volumesAttached is left out; volumesInUse is only ever a list read or written.
 * - Errors and warnings logged, and what reconstruction found at start (src/trace/reconstruction.ts).
 * - Each agent life starts with a `step` line naming the process and the boot; a life that did
 *   not end with the stop line was killed: the next start records a `restart` (same boot) or a
 *   `reboot` (another boot id) first (the lines are src/trace/agentLife.ts).
 */
import type { ClusterView } from '../ports/cluster.js';
import type { NodeStatus } from '../api/core.js';
import { errorMessage, type FileSystem, type RemoveTreeOptions } from '../ports/fs.js';
import type { Logger, LogValues } from '../ports/logger.js';
import type { Mounter } from '../ports/mounter.js';
import { escapeMountPath } from '../mount/mountInfo.js';
import type { CsiCallObserver } from '../csi/instrumented.js';
import type { TraceEvent } from '../trace/events.js';
import { agentStartedStep, agentStoppedLine, lastAgentLife } from '../trace/agentLife.js';
import { reconstructionFinding } from '../trace/reconstruction.js';

export type TraceSink = (event: TraceEvent) => void;

export interface AgentTracer {
  readonly emit: TraceSink;
  readonly observeCsiCall: CsiCallObserver;
  fs(inner: FileSystem): FileSystem;
  cluster(inner: ClusterView): ClusterView;
  logger(inner: Logger): Logger;
  /** Records a settled volume manager operation (OperationExecutor.onOperationComplete). */
  operation(e: { readonly operationName: string; readonly key: { readonly volumeName: string; readonly podName: string }; readonly error: unknown; readonly durationMs: number }): void;
  /** Records the mount points under the root dir that changed since the last look. */
  checkMounts(): Promise<void>;
  /** The first lines of a life: a crash marker if the previous life was killed, then the start step. */
  started(info: { readonly pid: number; readonly bootId: string; readonly gates: string; readonly previousTail: string }): void;
  stopped(reason: string): void;
}

export function createAgentTracer(options: {
  readonly sink: TraceSink;
  /**
   * The wall clock every event is stamped with. Spans (CSI calls, operations) end at the wall time
   * they are recorded and start their monotonic duration before, so a wall clock stepped during a
   * call never draws one that ends before it starts.
   */
  readonly nowMs: () => number;
  readonly rootDir: string;
  readonly mounter: Mounter;
}): AgentTracer {
  const { sink, nowMs, mounter } = options;
  const rootPrefix = `${escapeMountPath(options.rootDir)}/`;
  /** Mount points under the root dir at the last look (escaped), with their sources. */
  let mounts: Map<string, string> | undefined;
  /** volumesAttached as last read (sorted); undefined until the first read. */
  let attached: readonly string[] | undefined;
  /** volumesInUse as last read or written; undefined until then. */
  let lastInUse: readonly string[] | undefined;
  let checking: Promise<void> = Promise.resolve();

  const emit: TraceSink = (e) => {
    try {
      sink(e);
    } catch {
      // A trace that cannot be written never stops the agent.
    }
  };

  const checkMounts = (): Promise<void> => {
    checking = checking.then(async () => {
      let table;
      try {
        table = await mounter.readMountTable();
      } catch {
        return;
      }
      const now = new Map<string, string>();
      for (const e of table.entries) if (e.mountPoint.startsWith(rootPrefix)) now.set(e.mountPoint, e.source);
      const t = nowMs();
      if (mounts !== undefined) {
        for (const [target, source] of now) if (!mounts.has(target)) emit({ kind: 'mount', t, action: 'mount', target, source });
        for (const target of mounts.keys()) if (!now.has(target)) emit({ kind: 'mount', t, action: 'unmount', target });
      } else {
        for (const [target, source] of now) emit({ kind: 'mount', t, action: 'mount', target, source });
      }
      mounts = now;
    });
    return checking;
  };

  const fileChange = (action: Extract<TraceEvent, { kind: 'file' }>['action'], path: string, call: () => Promise<void>): Promise<void> =>
    call().then(() => emit({ kind: 'file', t: nowMs(), action, path }));

  const logLine = (severity: 'W' | 'E', msg: string, values: LogValues | undefined, err?: unknown): void => {
    const detail = err === undefined ? '' : `: ${errorMessage(err)}`;
    const keys = values === undefined ? '' : Object.entries(values).map(([k, v]) => ` ${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join('');
    emit({ kind: 'log', t: nowMs(), severity, message: `${msg}${detail}${keys}` });
  };

  return {
    emit,
    observeCsiCall: (c) => {
      // c.startMs/endMs are monotonic readings; the call ended just now.
      const end = nowMs();
      emit({
        kind: 'csi',
        t: end - (c.endMs - c.startMs),
        end,
        method: c.method,
        volumeId: c.volumeId,
        outcome: c.code,
        ...(c.error === undefined ? {} : { details: c.error }),
        ...(c.request === undefined ? {} : { request: c.request }),
      });
      if (c.method !== 'NodeGetCapabilities') void checkMounts();
    },
    fs: (inner) => {
      const removeTree = inner.removeTree?.bind(inner);
      return {
        ...(removeTree === undefined ? {} : { removeTree: (p: string, o: RemoveTreeOptions) => fileChange('remove', p, () => removeTree(p, o)) }),
        readdir: (p) => inner.readdir(p),
        lstat: (p) => inner.lstat(p),
        stat: (p) => inner.stat(p),
        realpath: (p) => inner.realpath(p),
        readFile: (p, max, o) => inner.readFile(p, max, o),
        readlink: (p) => inner.readlink(p),
        fsyncDir: (p) => inner.fsyncDir(p),
        mkdir: (p, o) => fileChange('mkdir', p, () => inner.mkdir(p, o)),
        writeFile: (p, d, o) => fileChange('write', p, () => inner.writeFile(p, d, o)),
        rename: (from, to) => fileChange('rename', to, () => inner.rename(from, to)),
        rmdir: (p) => fileChange('rmdir', p, () => inner.rmdir(p)),
        unlink: (p) => fileChange('remove', p, () => inner.unlink(p)),
        symlink: (target, p) => fileChange('write', p, () => inner.symlink(target, p)),
      };
    },
    cluster: (inner) => ({
      listPods: () => inner.listPods(),
      getPersistentVolumeClaim: (ns, name) => inner.getPersistentVolumeClaim(ns, name),
      getPersistentVolume: (name) => inner.getPersistentVolume(name),
      getCSIDriver: (name) => inner.getCSIDriver(name),
      ...(inner.objectsVersion === undefined ? {} : { objectsVersion: () => inner.objectsVersion?.() ?? 0 }),
      ...(inner.onChange === undefined ? {} : { onChange: (listener: () => void) => inner.onChange?.(listener) }),
      ...(inner.signalsEveryChange === undefined ? {} : { signalsEveryChange: () => inner.signalsEveryChange?.() ?? false }),
      ...(inner.getVolumeAttachment === undefined ? {} : { getVolumeAttachment: inner.getVolumeAttachment.bind(inner) }),
      ...(inner.getSecret === undefined ? {} : { getSecret: inner.getSecret.bind(inner) }),
      ...(inner.requestServiceAccountToken === undefined ? {} : { requestServiceAccountToken: inner.requestServiceAccountToken.bind(inner) }),
      getNodeStatus: async (): Promise<NodeStatus> => {
        const status = await inner.getNodeStatus();
        const names = status.volumesAttached.map((v) => v.name).sort();
        const inUse = [...status.volumesInUse];
        if (!sameList(names, attached) || !sameList(inUse, lastInUse)) {
          attached = names;
          lastInUse = inUse;
          emit({ kind: 'status', t: nowMs(), volumesInUse: [...inUse], volumesAttached: [...names], source: 'read' });
        }
        return status;
      },
      setVolumesInUse: async (names) => {
        await inner.setVolumesInUse(names);
        if (sameList(names, lastInUse)) return;
        lastInUse = [...names];
        emit({ kind: 'status', t: nowMs(), volumesInUse: [...names], ...(attached === undefined ? {} : { volumesAttached: [...attached] }), source: 'written' });
      },
    }),
    logger: (inner) =>
      tracedLogger(inner, logLine, (msg, values) => {
        const finding = reconstructionFinding(msg, values);
        if (finding !== undefined) emit({ kind: 'reconstruct', t: nowMs(), ...finding });
      }),
    operation: (e) => {
      const end = nowMs();
      emit({
        kind: 'operation',
        t: end - e.durationMs,
        end,
        name: e.operationName,
        volumeName: e.key.volumeName,
        podName: e.key.podName,
        ...(e.error === undefined ? {} : { error: errorMessage(e.error) }),
      });
    },
    checkMounts,
    started: ({ pid, bootId, gates, previousTail }) => {
      const t = nowMs();
      const previous = lastAgentLife(previousTail);
      if (previous !== undefined && !previous.stopped) {
        emit({
          kind: 'crash',
          t,
          crash: previous.bootId !== undefined && previous.bootId !== bootId ? 'reboot' : 'restart',
          detail: `the previous agent (${previous.label}) ended without stopping`,
        });
      }
      emit(agentStartedStep(t, { pid, bootId, gates }));
    },
    stopped: (reason) => emit(agentStoppedLine(nowMs(), reason)),
  };
}

function sameList(a: readonly string[], b: readonly string[] | undefined): boolean {
  return b !== undefined && a.length === b.length && a.every((x, i) => x === b[i]);
}

function tracedLogger(inner: Logger, record: (severity: 'W' | 'E', msg: string, values: LogValues | undefined, err?: unknown) => void, found: (msg: string, values: LogValues | undefined) => void): Logger {
  return {
    info: (msg, values) => {
      found(msg, values);
      inner.info(msg, values);
    },
    warning: (msg, values) => {
      record('W', msg, values);
      inner.warning(msg, values);
    },
    error: (err, msg, values) => {
      record('E', msg, values, err);
      inner.error(err, msg, values);
    },
    // Recorded whatever the verbosity: reconstruction's findings are V(2) lines.
    v: (level) => tracedLogger(inner.v(level), record, found),
    enabled: (level) => inner.enabled(level),
  };
}
