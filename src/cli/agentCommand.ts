/**
 * `nodevol agent`: the volume manager as a long-running process, standalone (no API server):
 * the cluster view comes from --cluster-dir, drivers from --csi-endpoint or their conventional
 * sockets, mounts from the real mount table. SIGTERM/SIGINT stop it cleanly (exit 0); SIGKILL at
 * any moment is safe, because the disk and the mount table are its only state.
 */
import * as path from 'node:path';
import { Command } from 'commander';
import { Registry } from 'prom-client';
import { realClock } from '../adapters/node/clock.js';
import { ClusterDirView } from '../adapters/node/clusterDir.js';
import { NodeFileSystem } from '../adapters/node/nodeFs.js';
import { NodeMounter } from '../adapters/node/nodeMounter.js';
import { withSyncStat } from '../adapters/node/syncReadFs.js';
import { startHttpServer, DEFAULT_METRICS_BIND_ADDRESS, parseBindAddress } from '../agent/httpServer.js';
import { DiscoveringDriverRegistry, parseCsiEndpointFlag } from '../adapters/grpc/driverDiscovery.js';
import { setupDataDirs } from '../agent/dataDirs.js';
import { limitYoungGeneration } from '../agent/idleMemory.js';
import { GrpcCsiDriverRegistry } from '../adapters/grpc/client.js';
import { observedRegistry } from '../csi/instrumented.js';
import { createAgentTracer, type AgentTracer } from '../agent/tracer.js';
import { bootId, openTraceFileSink, type TraceFileSink } from '../adapters/node/traceSink.js';
import { FeatureGate, FeatureGateError } from '../features/features.js';
import { errorMessage } from '../ports/fs.js';
import { KubeletLayout } from '../layout/layout.js';
import type { LoggingFormat } from '../logging/klog.js';
import { createStuckOperationMetrics } from '../adapters/prometheus/stuckOperationMetrics.js';
import { createVolumeManagerMetrics } from '../adapters/prometheus/volumeManagerMetrics.js';
import { createOrphanPodMetrics } from '../adapters/prometheus/orphanPodMetrics.js';
import { NODE_STATUS_UPDATE_PERIOD_MS } from '../volumemanager/volumeManager.js';
import { composeNode } from '../agent/node.js';
import type { CsiDriverRegistry } from '../ports/csi.js';
import { parseDuration } from './duration.js';
import { addHelpAfter, addLoggingOptions, collect, stderrLogger } from './flags.js';
import { withRootDirLock } from './rootDirLock.js';

export const EXIT_AGENT_OK = 0;
export const EXIT_AGENT_FAILED = 1;
export const EXIT_AGENT_USAGE = 2;
/** After the shutdown grace period, how long the HTTP server and driver connections get to close. */
const HARD_STOP_MARGIN_MS = 2_000;
/** Active resources (process.getActiveResourcesInfo) that hold a libuv thread-pool thread. */
const THREAD_POOL_REQUESTS: ReadonlySet<string> = new Set(['FSReqCallback', 'FSReqPromise', 'GetAddrInfoReqWrap', 'GetNameInfoReqWrap']);

interface AgentFlags {
  rootDir: string;
  nodeName: string;
  clusterDir: string;
  csiEndpoint: string[];
  featureGates: string[];
  metricsBindAddress: string;
  nodeStatusUpdateFrequency: string;
  shutdownGracePeriod: string;
  trace?: string;
  v: number;
  loggingFormat: LoggingFormat;
}

export function agentCommand(setExitCode: (code: number) => void): Command {
  const cmd = new Command('agent')
    .description('Run the volume manager: reconstruct, then mount, unmount and unstage CSI volumes for the pods in --cluster-dir.')
    .requiredOption('--root-dir <dir>', 'kubelet root directory (must exist)')
    .requiredOption('--node-name <name>', 'this node: pods whose spec.nodeName equals it are bound here')
    .requiredOption('--cluster-dir <dir>', 'cluster view on disk: manifests/*.yaml and node-status.json')
    .option('--csi-endpoint <driver=unix:///abs/csi.sock>', 'a CSI driver socket (repeatable); default <root-dir>/plugins/<driver>/csi.sock', collect, [])
    .option('--feature-gates <gates>', 'kubelet feature gates, e.g. CSIGlobalMountReconstruction=true', collect, [])
    .option('--metrics-bind-address <host:port>', 'where /metrics, /healthz and /readyz are served', DEFAULT_METRICS_BIND_ADDRESS)
    .option('--node-status-update-frequency <duration>', 'how often volumesInUse is written to node-status.json', `${NODE_STATUS_UPDATE_PERIOD_MS / 1000}s`)
    .option('--shutdown-grace-period <duration>', 'how long SIGTERM waits for in-flight operations', '30s')
    .option('--trace <file>', 'append what the agent does (CSI calls, files, mounts, volumesInUse, errors) as JSON lines, for nodevol timeline');
  addLoggingOptions(cmd);
  addHelpAfter(
    cmd,
    '\nExit codes: 0 stopped by SIGTERM/SIGINT; 1 failed while running; 2 could not start (bad flags, missing dirs, port in use, ' +
      'another nodevol agent or recover --yes holds the root dir); killed by SIGKILL (137) when a read stuck in a hung file system outlives the grace period + 2 s.\n',
  );
  cmd.action(async (flags: AgentFlags) => {
    setExitCode(await runAgent(flags));
  });
  return cmd;
}

/**
 * The agent's file system: it changes nothing outside its root dir and cluster dir (both real
 * paths), and nothing beneath them through a symlink, however the trees are raced
 * (adapters/node/beneath.ts; docs/security.md).
 */
export function agentFileSystem(realRootDir: string, realClusterDir: string): NodeFileSystem {
  return new NodeFileSystem({ confineChangesTo: [realRootDir, realClusterDir] });
}

/**
 * The agent holds the root dir's lock (rootDirLock.ts) for its lifetime: it does not start while
 * another agent or a `nodevol recover --yes` acts on the root dir. SIGKILL releases it too.
 */
async function runAgent(flags: AgentFlags): Promise<number> {
  return withRootDirLock(
    flags.rootDir,
    'nodevol agent',
    (locked) => runAgentHoldingRootDir(flags, locked),
    (why) => {
      process.stderr.write(`nodevol agent: --root-dir ${flags.rootDir}: ${why.message}\n`);
      return EXIT_AGENT_USAGE;
    },
  );
}

/** `lockedRootDir`: the real root dir whose lock is held (undefined: it did not resolve, and must not now). */
async function runAgentHoldingRootDir(flags: AgentFlags, lockedRootDir: string | undefined): Promise<number> {
  // A long-running process: its young generation stays small (agent/idleMemory.ts).
  limitYoungGeneration();
  const logger = stderrLogger(flags);
  const usage = (msg: string): number => {
    process.stderr.write(`nodevol agent: ${msg}\n`);
    return EXIT_AGENT_USAGE;
  };

  let features: FeatureGate;
  let statusPeriodMs: number;
  let graceMs: number;
  let bind;
  const endpoints: { driver: string; endpoint: string }[] = [];
  try {
    const parsed = FeatureGate.parse(flags.featureGates);
    features = parsed.gate;
    for (const w of parsed.warnings) logger.warning(w);
    statusPeriodMs = parseDuration(flags.nodeStatusUpdateFrequency);
    graceMs = parseDuration(flags.shutdownGracePeriod);
    bind = parseBindAddress(flags.metricsBindAddress);
    for (const e of flags.csiEndpoint) endpoints.push(parseCsiEndpointFlag(e));
  } catch (err) {
    return usage(err instanceof FeatureGateError ? `invalid --feature-gates: ${err.message}` : errorMessage(err));
  }

  // Reads only, until the roots are known; every change goes through `fs` below.
  const probe = new NodeFileSystem();
  const rootDir = path.resolve(flags.rootDir);
  let realRootDir: string;
  try {
    if ((await probe.stat(rootDir)).type !== 'directory') return usage(`--root-dir ${rootDir}: not a directory`);
    realRootDir = await probe.realpath(rootDir);
  } catch (err) {
    return usage(`--root-dir ${rootDir}: ${errorMessage(err)}`);
  }
  if (realRootDir !== lockedRootDir) return usage(`--root-dir ${rootDir}: changed while the agent started (${lockedRootDir ?? 'missing'}, now ${realRootDir})`);
  let clusterDir: string;
  try {
    const given = path.resolve(flags.clusterDir);
    if ((await probe.stat(given)).type !== 'directory') return usage(`--cluster-dir ${given}: not a directory`);
    clusterDir = await probe.realpath(given);
  } catch (err) {
    return usage(`--cluster-dir ${path.resolve(flags.clusterDir)}: ${errorMessage(err)}`);
  }
  const fs = agentFileSystem(realRootDir, clusterDir);

  const layout = new KubeletLayout(realRootDir);
  try {
    await setupDataDirs(fs, layout);
  } catch (err) {
    return usage(errorMessage(err));
  }
  const grpcRegistry = new GrpcCsiDriverRegistry();
  try {
    for (const e of endpoints) grpcRegistry.register(e.driver, e.endpoint);
  } catch (err) {
    return usage(`--csi-endpoint: ${errorMessage(err)}`);
  }
  const promRegistry = new Registry();
  const metrics = createVolumeManagerMetrics(promRegistry);
  // Its safety-net pass stats every manifest: synchronously, as the thread pool's hand-off costs more (syncReadFs.ts).
  const cluster = new ClusterDirView({ dir: clusterDir, nodeName: flags.nodeName, fs: withSyncStat(fs), logger, watch: true });
  const mounter = new NodeMounter({ fs, logger });
  let trace: { readonly sink: TraceFileSink; readonly tracer: AgentTracer } | undefined;
  if (flags.trace !== undefined) {
    let sink: TraceFileSink;
    try {
      sink = openTraceFileSink(path.resolve(flags.trace));
    } catch (err) {
      grpcRegistry.close();
      cluster.close();
      return usage(`--trace ${flags.trace}: ${errorMessage(err)}`);
    }
    const tracer = createAgentTracer({ sink: (e) => sink.write(e), nowMs: () => Date.now(), rootDir: realRootDir, mounter });
    trace = { sink, tracer };
  }
  if (trace !== undefined) {
    trace.tracer.started({
      pid: process.pid,
      bootId: bootId(),
      gates: Object.entries(features.snapshot())
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(','),
      previousTail: trace.sink.previousTail,
    });
    await trace.tracer.checkMounts();
  }
  const tracer = trace?.tracer;
  const tracedCluster = tracer === undefined ? cluster : tracer.cluster(cluster);
  if (tracer !== undefined) {
    // The trace starts from node.status as read, so that its first volumesInUse is a fact, not an
    // assumption; an unreadable status is left for the volume manager to report.
    await tracedCluster.getNodeStatus().catch(() => undefined);
  }
  const node = composeNode(
    {
      layout,
      realRootDir,
      nodeName: flags.nodeName,
      features,
      fs: tracer === undefined ? fs : tracer.fs(fs),
      logger: tracer === undefined ? logger : tracer.logger(logger),
      clock: realClock,
      mounter,
      csiDrivers: new DiscoveringDriverRegistry(grpcRegistry, layout, logger),
      cluster: tracedCluster,
    },
    {
      metrics: {
        volumeManager: metrics,
        stuckOperations: createStuckOperationMetrics(promRegistry),
        orphanPods: createOrphanPodMetrics(promRegistry),
      },
      nodeStatusUpdatePeriodMs: statusPeriodMs,
      shutdownGraceMs: graceMs,
      ...(tracer === undefined ? {} : { observeCsi: (registry: CsiDriverRegistry) => observedRegistry(registry, realClock, tracer.observeCsiCall) }),
    },
  );
  if (tracer !== undefined) node.vm.executor.onOperationComplete((e) => tracer.operation(e));
  const runtime = node.runtime;

  let http;
  try {
    http = await startHttpServer(bind, promRegistry, {
      health: () => runtime.health(),
      ready: () => runtime.isReady(),
    });
  } catch (err) {
    grpcRegistry.close();
    return usage(`--metrics-bind-address ${flags.metricsBindAddress}: ${errorMessage(err)}`);
  }
  // Listening before the start line is written: whoever reads it may send SIGTERM at once, and
  // without a listener that signal would end the process uncleanly.
  const stopped = new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  logger.info('Starting nodevol agent', {
    rootDir: realRootDir,
    nodeName: flags.nodeName,
    clusterDir,
    featureGates: features.snapshot(),
    metricsAddress: `${bind.host}:${http.port}`,
  });

  let failure: unknown;
  const started = node.start().catch((err: unknown) => {
    failure = err;
  });
  const signal = await Promise.race([stopped, started.then(() => (failure === undefined ? stopped : 'failure'))]);
  if (failure !== undefined) logger.error(failure, 'nodevol agent failed');
  else logger.info('Shutting down nodevol agent', { signal });
  // Whatever is stuck (a read on a hung file system holds a thread forever), the process ends
  // within the grace period and a short margin for the HTTP server and the driver connections.
  const exitCode = failure === undefined ? EXIT_AGENT_OK : EXIT_AGENT_FAILED;
  const hardStop = setTimeout(() => {
    logger.error(new Error(`still running ${graceMs + HARD_STOP_MARGIN_MS} ms after ${signal}`), 'nodevol agent did not stop cleanly; exiting');
    // process.exit() joins libuv's thread pool on the way out: a thread blocked in a hung file
    // system never returns, and the exit would hang for ever. With such a request still pending,
    // only a signal ends the process.
    const stuck = process.getActiveResourcesInfo().filter((r) => THREAD_POOL_REQUESTS.has(r));
    if (stuck.length > 0) {
      logger.error(new Error(`${stuck.length} request(s) still pending in the thread pool: ${stuck.join(', ')}`), 'A read is stuck in a hung file system and would hold the exit; exiting by SIGKILL');
      process.kill(process.pid, 'SIGKILL');
    }
    process.exit(exitCode);
  }, graceMs + HARD_STOP_MARGIN_MS);
  hardStop.unref();
  const { abandoned } = await runtime.stop();
  if (abandoned) logger.warning('Abandoned in-flight volume operations at shutdown; the next start reconstructs them');
  await http.close();
  grpcRegistry.close();
  cluster.close();
  if (trace !== undefined) {
    trace.tracer.stopped(signal);
    trace.sink.close();
  }
  return exitCode;
}
