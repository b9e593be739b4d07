/**
 * `nodevol mock-driver`: the mock CSI driver (src/mockdriver) as a process, for node e2e tests. It
 * serves csi.v1 Identity, Controller and Node on a unix socket and really bind-mounts (so it
 * needs root, or a user + mount namespace). SIGTERM/SIGINT close the server, remove the socket
 * and exit 0; an exit fault ends the process with code 3 and leaves the socket behind, like a
 * crash (the next start removes it). One driver per state dir: it holds the lock
 * `<state-dir>/lock/` (src/adapters/node/processLock.ts) while it runs, and a second one on the
 * same state dir does not start (exit 2); the end of the first, SIGKILL included, releases it.
 */
import { mkdirSync, realpathSync } from 'node:fs';
import * as path from 'node:path';
import { Command, Option } from 'commander';
import { unixSocketPath } from '../adapters/grpc/endpoint.js';
import { EXIT_FAULT_CODE } from '../mockdriver/callPipeline.js';
import { startMockDriver, type MockDriver } from '../mockdriver/mockDriver.js';
import { errorMessage } from '../ports/fs.js';
import type { LoggingFormat } from '../logging/klog.js';
import type { CsiNodeMode } from '../csi/nodeStateMachine.js';
import { addHelpAfter, addLoggingOptions, collect, stderrLogger } from './flags.js';
import { GrpcCsiClient } from '../adapters/grpc/client.js';
import { acquireProcessLock, describeBusyLock, type HeldLock } from '../adapters/node/processLock.js';

export const EXIT_MOCK_DRIVER_OK = 0;
export const EXIT_MOCK_DRIVER_USAGE = 2;
export const EXIT_MOCK_DRIVER_FAULT = EXIT_FAULT_CODE;
/** The lock dir in the state dir: one driver per state dir. */
export const MOCK_DRIVER_LOCK_DIR = 'lock';

interface MockDriverFlags {
  endpoint: string;
  nodeId: string;
  driverName: string;
  stateDir: string;
  faults?: string;
  journal?: string;
  volume: string[];
  blockVolume: string[];
  allowedRoot: string[];
  rootDir?: string;
  mode: CsiNodeMode;
  singleNodeMultiWriter?: boolean;
  v: number;
  loggingFormat: LoggingFormat;
}

export function mockDriverCommand(setExitCode: (code: number) => void): Command {
  const cmd = new Command('mock-driver')
    .description('Run a mock CSI driver (hostpath-like, real bind mounts) for node e2e tests, with fault injection and a call journal.')
    .requiredOption('--endpoint <unix:///abs/csi.sock>', 'unix socket to serve csi.v1 on (its directory is created)')
    .requiredOption('--node-id <id>', "NodeGetInfo's node_id")
    .requiredOption('--driver-name <name>', "GetPluginInfo's name, e.g. mock.csi.nodevol.io")
    .requiredOption('--state-dir <dir>', 'state.json and the volumes\' backing storage (created when missing)')
    .option('--faults <file>', 'fault rules (YAML or JSON), re-read when the file changes')
    .option('--journal <file>', 'append one JSON line per call to this file')
    .option('--volume <name>', 'provision a filesystem volume at start (CreateVolume; repeatable, idempotent); its id is printed', collect, [])
    .option('--block-volume <name>', 'provision a raw block volume at start (repeatable, idempotent)', collect, [])
    .option('--root-dir <dir>', 'the kubelet root dir: the default --allowed-root')
    .option('--single-node-multi-writer', 'NodeGetCapabilities also reports SINGLE_NODE_MULTI_WRITER (as csi-driver-host-path)')
    .option('--allowed-root <dir>', 'staging and target paths must lie below this dir, with no symlink below it (repeatable; default --root-dir)', collect, [])
    .addOption(
      new Option('--mode <mode>', 'strict: NodeUnstageVolume refused (FAILED_PRECONDITION) while the volume is published, like csi-driver-host-path; lenient: accepted')
        .choices(['strict', 'lenient'])
        .default('strict'),
    );
  addLoggingOptions(cmd);
  addHelpAfter(
    cmd,
    '\nExit codes:\n  0  stopped by SIGTERM/SIGINT (socket removed)\n  2  could not start: bad flags, endpoint, state dir, state.json; dir in use\n  3  an exit fault fired\n',
  );
  cmd.action(async (flags: MockDriverFlags) => {
    setExitCode(await runMockDriver(flags));
  });
  return cmd;
}

/** The real path of an allowed root (the CO hands over real paths), or the absolute one when it does not exist yet. */
function realOrResolved(dir: string): string {
  try {
    return realpathSync(path.resolve(dir));
  } catch {
    return path.resolve(dir);
  }
}

async function runMockDriver(flags: MockDriverFlags): Promise<number> {
  const logger = stderrLogger(flags);
  const usage = (msg: string): number => {
    process.stderr.write(`nodevol mock-driver: ${msg}\n`);
    return EXIT_MOCK_DRIVER_USAGE;
  };
  try {
    unixSocketPath(flags.endpoint);
  } catch (err) {
    return usage(`--endpoint: ${errorMessage(err)}`);
  }
  if (flags.nodeId === '') return usage('--node-id must not be empty');
  if (flags.driverName === '') return usage('--driver-name must not be empty');
  if (flags.stateDir === '') return usage('--state-dir must not be empty');
  const file = (f: string | undefined): string | undefined => (f === undefined || f === '' ? undefined : path.resolve(f));
  const stateDir = path.resolve(flags.stateDir);
  let lock: HeldLock;
  try {
    mkdirSync(stateDir, { recursive: true, mode: 0o755 });
    const taken = await acquireProcessLock({ base: stateDir, dir: path.join(stateDir, MOCK_DRIVER_LOCK_DIR), command: 'nodevol mock-driver' });
    if (!taken.held) return usage(`--state-dir ${stateDir}: ${describeBusyLock(taken)}: two drivers on one state dir would overwrite each other's volume records`);
    lock = taken;
  } catch (err) {
    return usage(`--state-dir ${stateDir}: ${errorMessage(err)}`);
  }

  // Registered before the start, so a signal during it is not lost.
  let onSignal: ((signal: string) => void) | undefined;
  const pending: string[] = [];
  const handler = (signal: NodeJS.Signals): void => {
    if (onSignal === undefined) pending.push(signal);
    else onSignal(signal);
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  try {
    let driver: MockDriver;
    try {
      driver = await startMockDriver({
        endpoint: flags.endpoint,
        nodeId: flags.nodeId,
        driverName: flags.driverName,
        stateDir,
        faultsFile: file(flags.faults),
        allowedRoots: (flags.allowedRoot.length > 0 ? flags.allowedRoot : flags.rootDir !== undefined && flags.rootDir !== '' ? [flags.rootDir] : []).map(realOrResolved),
        journalFile: file(flags.journal),
        mode: flags.mode,
        singleNodeMultiWriter: flags.singleNodeMultiWriter === true,
        logger,
        exit: (code) => process.exit(code),
      });
    } catch (err) {
      logger.error(err, 'Cannot start the mock CSI driver');
      return EXIT_MOCK_DRIVER_USAGE;
    }
    try {
      await provision(flags.endpoint, flags.volume, flags.blockVolume);
    } catch (err) {
      logger.error(err, 'Cannot provision the volumes given with --volume / --block-volume');
      await driver.stop();
      return EXIT_MOCK_DRIVER_USAGE;
    }
    const signal = await new Promise<string>((resolve) => {
      const first = pending[0];
      if (first !== undefined) resolve(first);
      else onSignal = resolve;
    });
    logger.info('Shutting down the mock CSI driver', { signal });
    await driver.stop();
    return EXIT_MOCK_DRIVER_OK;
  } finally {
    process.off('SIGTERM', handler);
    process.off('SIGINT', handler);
    await lock.release();
  }
}

/** CreateVolume through the driver's own socket, as a provisioner would; prints "<name> <id>" lines. */
async function provision(endpoint: string, filesystem: readonly string[], block: readonly string[]): Promise<void> {
  if (filesystem.length === 0 && block.length === 0) return;
  const client = new GrpcCsiClient(endpoint);
  try {
    const accessMode = { mode: 'SINGLE_NODE_WRITER' } as const;
    const requests = [
      ...filesystem.map((name) => ({ name, cap: { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode } })),
      ...block.map((name) => ({ name, cap: { block: {}, accessMode } })),
    ];
    for (const { name, cap } of requests) {
      const res = await client.controller.createVolume({ name, volumeCapabilities: [cap] });
      process.stdout.write(`${name} ${res.volume?.volumeId ?? ''}\n`);
    }
  } finally {
    client.close();
  }
}
