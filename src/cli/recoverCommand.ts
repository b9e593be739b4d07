/**
 * `nodevol recover`: wiring of src/audit/recover.ts to the real node. Runs the audit (the same
 * flags), requires the cluster's view, plans, and with `--yes` acts through each driver's own
 * socket. Dry run by default. Exit codes: 0 every orphaned volume recovered (or planned, or
 * none), 1 some refused or failed (a dry run: or --yes would refuse it, its driver's socket
 * missing), 2 could not run, 3 another nodevol agent or recover --yes holds the root dir
 * (rootDirLock.ts): nothing done.
 */
import { appendFileSync, closeSync, openSync } from 'node:fs';
import * as path from 'node:path';
import { Command, Option } from 'commander';
import { realClock } from '../adapters/node/clock.js';
import { NodeFileSystem } from '../adapters/node/nodeFs.js';
import { readOnlyVolumeHost } from '../agent/node.js';
import { executeRecovery, planRecovery, type RecoverJournalEntry } from '../audit/recover.js';
import { EXIT_OK, EXIT_PROBLEM, EXIT_UNKNOWN } from '../audit/report.js';
import type { GrpcCsiClient } from '../adapters/grpc/client.js';
import { unixEndpoint, unixSocketPath } from '../adapters/grpc/endpoint.js';
import { errorMessage } from '../ports/fs.js';
import { KubeletLayout } from '../layout/layout.js';
import type { MountTableSnapshot } from '../mount/mountRefs.js';
import { addClusterOptions } from './auditCluster.js';
import { addAuditRunOptions, collectAudit, readRunMountTable, type AuditRunFlags } from './auditRun.js';
import { addHelpAfter, addLoggingOptions, collect, examples, stderrLogger } from './flags.js';
import { describeBusyLock } from '../adapters/node/processLock.js';
import { rootDirLockHolder, withRootDirLock } from './rootDirLock.js';
import { escapeText } from './terminal.js';

/** Another nodevol agent or recover --yes holds the root dir: nothing was read or done. */
export const EXIT_RECOVER_BUSY = 3;

interface RecoverFlags extends AuditRunFlags {
  yes: boolean;
  csiEndpoint: string[];
  journal?: string;
  output: 'text' | 'json';
  timeout: string;
}

export function recoverCommand(setExitCode: (code: number) => void): Command {
  const cmd = new Command('recover')
    .description(
      'For the volumes the audit calls orphaned, do what KEP-6058\'s gate would: NodeUnpublishVolume for any ' +
        'target left, NodeUnstageVolume through the driver\'s own socket, then remove the global vol_data.json ' +
        'and directories, each only after success. Dry run unless --yes. Needs the cluster\'s view.',
    )
    .option('--yes', 'act (default: print the plan and change nothing)', false);
  addAuditRunOptions(cmd, {
    mountinfo: 'the mount table of the node\'s mount namespace: live with --yes (a captured copy for a dry run)',
    featureGates: 'feature gates the audit evaluates kubelet with (a volume the gate recovers is not orphaned)',
  })
    .option('--csi-endpoint <driver=unix:///abs/csi.sock>', 'a driver\'s socket; repeatable (default <root-dir>/plugins/<driver>/csi.sock)', collect, [])
    .option('--journal <file>', 'append the JSON-lines journal of every action to this file (created 0600)')
    .addOption(new Option('-o, --output <format>', 'text: the plan and the outcome; json: the journal lines').choices(['text', 'json']).default('text'))
    .option('--timeout <duration>', 'deadline of each CSI call', '2m');
  addClusterOptions(cmd);
  addLoggingOptions(cmd);
  addHelpAfter(
    cmd,
    '\nRefuses a volume that a pod on this node wants (per the cluster), that two PersistentVolumes name, that is in node.status.volumesInUse, ' +
      'that is raw block, or whose paths leave the root dir; with --yes also one whose driver socket is missing (the dry run shows its plan with a warning).\n' +
      '\nExit codes:\n  0  every orphaned volume recovered (dry run: planned), or nothing to do\n  1  some volume refused or failed (dry run: or --yes would refuse it: its driver socket is missing)\n  2  could not run (bad flags, unreadable root dir or mount table, no cluster view, cluster API error)\n' +
      '  3  --yes: another nodevol agent or recover --yes holds the root dir; nothing done\n' +
      examples([
        ['Print the plan (changes nothing)', 'nodevol recover --cluster-state cluster.json --node-name node-1'],
        [
          'The plan for the example node of a clone (no root)',
          'nodevol recover --root-dir examples/node/kubelet --mountinfo examples/node/mountinfo --mountinfo-root-dir /var/lib/kubelet --cluster-state examples/node/cluster.json --node-name node-1',
        ],
        ['Act, keeping a journal', 'nodevol recover --cluster-state cluster.json --node-name node-1 --yes --journal /var/log/nodevol-recover.jsonl'],
        ['In a pod with a service account, a driver socket elsewhere', 'nodevol recover --yes --csi-endpoint ebs.csi.aws.com=unix:///csi/csi.sock'],
      ]),
  );
  cmd.action(async (flags: RecoverFlags) => {
    setExitCode(await recover(flags));
  });
  return cmd;
}

function parseEndpoints(values: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const v of values) {
    const eq = v.indexOf('=');
    if (eq <= 0) throw new Error(`--csi-endpoint ${JSON.stringify(v)}: want DRIVER=unix:///abs/csi.sock`);
    const endpoint = v.slice(eq + 1);
    unixSocketPath(endpoint);
    out.set(v.slice(0, eq), endpoint);
  }
  return out;
}

/**
 * recover's file system: every removal it makes is beneath the root dir (a real path), through
 * directory descriptors, so a directory swapped for a symlink mid-run cannot send a removal
 * elsewhere (adapters/node/beneath.ts; docs/security.md).
 */
export function recoverFileSystem(realRootDir: string): NodeFileSystem {
  return new NodeFileSystem({ confineChangesTo: [realRootDir] });
}

/**
 * With --yes, recover holds the root dir's lock (rootDirLock.ts) from before it reads the node
 * until it is done: it does not act while a nodevol agent or another recover --yes acts on the
 * root dir (exit 3), and neither starts while it runs. A dry run takes no lock and writes
 * nothing; it says on stderr when --yes would be refused.
 */
async function recover(flags: RecoverFlags): Promise<number> {
  if (!flags.yes) {
    const holder = await rootDirLockHolder(flags.rootDir);
    if (holder !== undefined) process.stderr.write(`nodevol recover: note: ${describeBusyLock(holder)}: with --yes, recover would do nothing now (exit ${EXIT_RECOVER_BUSY})\n`);
    return recoverHoldingRootDir(flags, undefined);
  }
  return withRootDirLock(
    flags.rootDir,
    'nodevol recover --yes',
    (locked) => recoverHoldingRootDir(flags, locked),
    (why) => {
      if ('error' in why) {
        process.stderr.write(`nodevol recover: --root-dir ${flags.rootDir}: ${why.message}\n`);
        return EXIT_UNKNOWN;
      }
      process.stderr.write(`nodevol recover: --root-dir ${flags.rootDir}: ${why.message}; nothing done, run it again once that process has stopped\n`);
      return EXIT_RECOVER_BUSY;
    },
  );
}

/** `lockedRootDir`: with --yes, the real root dir whose lock is held (undefined: it did not resolve). */
async function recoverHoldingRootDir(flags: RecoverFlags, lockedRootDir: string | undefined): Promise<number> {
  const fail = (msg: string): number => {
    process.stderr.write(`${msg}\n`);
    return EXIT_UNKNOWN;
  };
  const logger = stderrLogger(flags);
  let endpoints: Map<string, string>;
  let timeoutMs: number;
  try {
    endpoints = parseEndpoints(flags.csiEndpoint);
    const { parseDuration } = await import('./duration.js');
    timeoutMs = parseDuration(flags.timeout);
  } catch (err) {
    return fail(`nodevol recover: ${errorMessage(err)}`);
  }
  let journalFd: number | undefined;
  if (flags.journal !== undefined) {
    try {
      journalFd = openSync(path.resolve(flags.journal), 'a', 0o600);
    } catch (err) {
      return fail(`nodevol recover: --journal ${flags.journal}: ${errorMessage(err)}`);
    }
  }
  try {
    // A volume two PersistentVolumes name is refused, which only the whole list can rule out:
    // read it when there is an orphaned volume to plan for.
    const run = await collectAudit(flags, logger, 'recover', { everyPersistentVolume: (report) => report.volumes.some((v) => v.verdict === 'orphaned' && v.global !== null) });
    if (typeof run === 'string') return fail(run);
    if (flags.yes && run.realRootDir !== lockedRootDir) return fail(`nodevol recover: --root-dir ${flags.rootDir} changed while recover started (${lockedRootDir ?? 'missing'}, now ${run.realRootDir}): nothing done`);
    if (run.state === undefined) {
      return fail('nodevol recover: the cluster\'s view is required (--cluster-state FILE, --kubeconfig FILE, or run in a pod with a service account): without it no volume can be proven unwanted');
    }
    const fs = recoverFileSystem(run.realRootDir);
    const layout = new KubeletLayout(run.realRootDir);
    // Rebased as the audit's (--mountinfo-root-dir): every look-up is by a path of this file system.
    const loadTable = (): Promise<MountTableSnapshot> => readRunMountTable(flags, run.realRootDir, { strict: true });
    let table: MountTableSnapshot | Error;
    try {
      table = await loadTable();
    } catch (err) {
      table = err instanceof Error ? err : new Error(String(err));
    }
    const endpointFor = (driver: string): { endpoint: string; socketPath: string } => {
      const given = endpoints.get(driver);
      const endpoint = given ?? unixEndpoint(layout.driverSocketPath(driver));
      return { endpoint, socketPath: unixSocketPath(endpoint) };
    };
    const plan = await planRecovery({
      report: run.report,
      state: run.state,
      fs,
      layout,
      mountTable: table,
      endpointFor,
      // The driver is told each path as the node names it.
      ...(flags.mountinfoRootDir !== undefined ? { nodeRootDir: path.posix.resolve(flags.mountinfoRootDir) } : {}),
    });

    // Reads a fresh table for every check; recover itself never mounts or unmounts: the driver does.
    const host = readOnlyVolumeHost(
      { layout, realRootDir: run.realRootDir, nodeName: run.state.nodeName, features: run.features },
      { fs, clock: realClock, logger, loadMountTable: loadTable },
    );
    // Loaded only here: --help and the other commands never load gRPC.
    const { GrpcCsiClient: Client } = await import('../adapters/grpc/client.js');
    const clients = new Map<string, GrpcCsiClient>();
    const lines: string[] = [];
    const journal = (e: RecoverJournalEntry): void => {
      const line = JSON.stringify(e);
      if (journalFd !== undefined) appendFileSync(journalFd, `${line}\n`);
      if (flags.output === 'json') process.stdout.write(`${line}\n`);
      else lines.push(escapeText(describeEntry(e, flags.yes)));
    };
    let result;
    try {
      result = await executeRecovery({
        plan,
        host,
        act: flags.yes,
        journal,
        nowIso: () => new Date().toISOString(),
        clientFor: (endpoint) => {
          let c = clients.get(endpoint);
          if (c === undefined) {
            c = new Client(endpoint, { timeoutMs });
            clients.set(endpoint, c);
          }
          return c;
        },
      });
    } finally {
      for (const c of clients.values()) c.close();
    }
    if (flags.output === 'text') {
      const out: string[] = [];
      if (plan.volumes.length === 0 && plan.refusals.length === 0) out.push('Nothing to recover: the audit finds no orphaned volume.');
      out.push(...lines);
      const n = plan.volumes.length;
      if (!flags.yes && n > 0) {
        const warned = result.warned.length;
        out.push(
          '',
          `Dry run: ${n} volume(s) planned, nothing changed.` +
            (warned > 0 ? ` With --yes, ${warned} of them would be refused as things stand (see each warning).` : '') +
            ' Run again with --yes to act.',
        );
      }
      if (flags.yes && (n > 0 || result.refused.length > 0)) {
        out.push('', `${result.recovered.length} recovered, ${result.failed.length} failed, ${result.refused.length} refused.`);
      }
      process.stdout.write(`${out.join('\n')}\n`);
    }
    return result.failed.length > 0 || result.refused.length > 0 || result.warned.length > 0 ? EXIT_PROBLEM : EXIT_OK;
  } finally {
    if (journalFd !== undefined) closeSync(journalFd);
  }
}

function describeEntry(e: RecoverJournalEntry, act: boolean): string {
  const subject = e.volume;
  switch (e.action) {
    case 'refuse':
      return `refused ${subject}: ${e.reason ?? ''}`;
    case 'check':
      return `${subject}: warning: ${e.reason ?? ''}`;
    case 'NodeUnpublishVolume':
    case 'NodeUnstageVolume': {
      const pathField = e.action === 'NodeUnpublishVolume' ? 'target_path' : 'staging_target_path';
      const call = `${e.action} volume_id=${e.volumeId ?? ''} ${pathField}=${e.path ?? ''}${e.endpoint !== undefined ? ` via ${e.endpoint}` : ''}`;
      if (e.outcome === 'planned') return `${subject}: would call ${call}`;
      if (e.outcome === 'skipped') return `${subject}: skipped ${call}: ${e.reason ?? ''}`;
      return `${subject}: ${call}: ${e.outcome === 'ok' ? 'OK' : `FAILED: ${e.error ?? ''}`}`;
    }
    case 'rmdir':
    case 'unlink': {
      const verb = e.action === 'rmdir' ? 'remove directory' : 'remove file';
      if (e.outcome === 'planned') return `${subject}: would ${verb} ${e.path ?? ''}${act ? '' : ' (once the call above succeeded)'}`;
      return `${subject}: ${verb} ${e.path ?? ''}: ${e.outcome === 'ok' ? 'OK' : `FAILED: ${e.error ?? ''}`}`;
    }
  }
}
