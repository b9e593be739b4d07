/** `nodevol audit`: wiring of the read-only node audit to real files and the real mount table. */
import * as path from 'node:path';
import { Command, Option } from 'commander';
import { runAudit, unreadSources } from '../audit/audit.js';
import { exitCodeFor, EXIT_UNKNOWN } from '../audit/report.js';
import { realClock } from '../adapters/node/clock.js';
import { LIVE_MOUNTINFO, mountInfoFileSource } from '../adapters/node/mountInfoFile.js';
import { SyncReadFileSystem } from '../adapters/node/syncReadFs.js';
import { FeatureGate, FeatureGateError } from '../features/features.js';
import { errorCode, errorMessage } from '../host/fs.js';
import { DEFAULT_ROOT_DIR, KubeletLayout } from '../layout/layout.js';
import type { LoggingFormat } from '../logging/klog.js';
import { escapeMountPath, parseMountInfo } from '../mount/mountInfo.js';
import { rebaseMountPoints } from '../mount/rebase.js';
import { MountTableSnapshot } from '../mount/mountRefs.js';
import { readMountInfoText } from '../mount/mountTable.js';
import { renderJson, renderProm, renderTable, type AuditOutputFormat } from './auditOutput.js';
import { addLoggingOptions, collect, stderrLogger } from './flags.js';

interface AuditFlags {
  rootDir: string;
  mountinfo: string;
  mountinfoRootDir?: string;
  featureGates: string[];
  output: AuditOutputFormat;
  v: number;
  loggingFormat: LoggingFormat;
}

export function auditCommand(setExitCode: (code: number) => void): Command {
  const cmd = new Command('audit')
    .description(
      'Read-only check of a node: which CSI volumes kubelet tracks, which it recovers only with\n' +
        'CSIGlobalMountReconstruction, and which it will lose (orphaned). Never writes, mounts or calls a driver.',
    )
    .option('--root-dir <dir>', 'kubelet root directory', DEFAULT_ROOT_DIR)
    .option('--mountinfo <file>', 'mount table to read (a captured copy works too)', LIVE_MOUNTINFO)
    .option(
      '--mountinfo-root-dir <dir>',
      'the kubelet root dir as the mount table names it, when --root-dir is a copy or is mounted elsewhere (default: --root-dir)',
    )
    .option('--feature-gates <gates>', 'kubelet feature gates to evaluate with, e.g. CSIGlobalMountReconstruction=true', collect, [])
    .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'json', 'prom']).default('table'));
  addLoggingOptions(cmd);
  cmd.addHelpText(
    'after',
    '\nExit codes (node-problem-detector custom plugin convention):\n' +
      '  0  nothing orphaned and no failed reconstruction\n' +
      '  1  something is orphaned or fails reconstruction\n' +
      '  2  could not run (bad flags, unreadable root dir or mount table), or could read neither the pods dir nor the CSI plugin dir\n',
  );
  cmd.action(async (flags: AuditFlags) => {
    setExitCode(await audit(flags));
  });
  return cmd;
}

async function audit(flags: AuditFlags): Promise<number> {
  const stderr = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  const logger = stderrLogger(flags);

  let features: FeatureGate;
  try {
    const parsed = FeatureGate.parse(flags.featureGates);
    features = parsed.gate;
    for (const w of parsed.warnings) logger.warning(w);
  } catch (err) {
    if (err instanceof FeatureGateError) {
      stderr(`nodevol audit: invalid --feature-gates: ${err.message}`);
      return EXIT_UNKNOWN;
    }
    throw err;
  }

  // Synchronous reads: the walk's speed is the system calls' (README, Speed).
  const fs = new SyncReadFileSystem();
  const rootDir = path.resolve(flags.rootDir);
  let realRootDir: string;
  try {
    const st = await fs.stat(rootDir);
    if (st.type !== 'directory') throw new Error('not a directory');
    realRootDir = await fs.realpath(rootDir);
  } catch (err) {
    stderr(
      errorCode(err) === 'ENOENT'
        ? `nodevol audit: --root-dir ${rootDir} does not exist: pass this node's kubelet root dir with --root-dir, ` +
            'or look at the example node: nodevol audit --root-dir examples/node/kubelet --mountinfo examples/node/mountinfo --mountinfo-root-dir /var/lib/kubelet'
        : `nodevol audit: --root-dir ${rootDir}: ${errorMessage(err)}`,
    );
    return EXIT_UNKNOWN;
  }

  let mountTable: MountTableSnapshot;
  try {
    const text = await readMountInfoText(mountInfoFileSource(flags.mountinfo));
    const parsed = parseMountInfo(text, { strict: false, source: flags.mountinfo });
    mountTable = new MountTableSnapshot(
      flags.mountinfoRootDir === undefined ? parsed : rebaseMountPoints(parsed, path.posix.resolve(flags.mountinfoRootDir), realRootDir),
    );
  } catch (err) {
    stderr(`nodevol audit: --mountinfo ${flags.mountinfo}: ${errorMessage(err)}`);
    return EXIT_UNKNOWN;
  }
  for (const p of mountTable.problems) {
    logger.warning('Mount table line could not be parsed; kubelet would fail every mount-reference look-up', {
      file: flags.mountinfo,
      line: p.line,
      error: p.error,
    });
  }

  const layout = new KubeletLayout(realRootDir);
  const report = await runAudit({
    fs,
    // Paths in the mount table are real paths: walk the root dir by its real path so that they match.
    layout,
    realRootDir,
    displayRootDir: rootDir,
    mountTableSource: flags.mountinfo,
    features,
    logger,
    clock: realClock,
    mountTable,
    nowMs: Date.now(),
  });

  if (report.volumes.length > 0 && !namesPathUnder(mountTable, realRootDir)) {
    logger.warning('The mount table names no mount under the root dir: every volume reads as not mounted. If --root-dir is a copy of a node or is mounted elsewhere, pass --mountinfo-root-dir with the path the mount table uses', {
      rootDir: realRootDir,
      mountinfo: flags.mountinfo,
    });
  }

  let out: string;
  switch (flags.output) {
    case 'json':
      out = renderJson(report);
      break;
    case 'prom':
      out = await renderProm(report);
      break;
    case 'table':
      out = renderTable(report, process.stdout.isTTY && process.env['NO_COLOR'] === undefined);
      break;
  }
  process.stdout.write(out);
  const unread = unreadSources(report, layout);
  if (unread.length === 2) {
    stderr(`nodevol audit: could read neither ${unread[0] ?? ''} nor ${unread[1] ?? ''}: nothing was audited, the result says nothing about this node`);
    return EXIT_UNKNOWN;
  }
  if (unread.length === 1) {
    const trusted = unread[0] === layout.podsDir() ? `the global mounts under ${layout.csiPluginDir()} only (pod volumes unknown)` : `the pod volumes under ${layout.podsDir()} only (global mounts unknown)`;
    stderr(`nodevol audit: partial result: could not read ${unread[0] ?? ''}; the verdicts rest on ${trusted}`);
  }
  return exitCodeFor(report);
}

/** Whether some mount point of the table lies below `dir` (compared as the kernel escapes paths). */
function namesPathUnder(table: MountTableSnapshot, dir: string): boolean {
  const prefix = `${escapeMountPath(dir)}/`;
  return table.entries.some((e) => e.mountPoint.startsWith(prefix));
}
