/** `nodevol audit`: wiring of the read-only node audit to real files and the real mount table. */
import { Command, Option } from 'commander';
import { EXIT_UNKNOWN } from '../audit/report.js';
import { LIVE_MOUNTINFO } from '../adapters/node/mountInfoFile.js';
import { DEFAULT_ROOT_DIR } from '../layout/layout.js';
import { addClusterOptions } from './auditCluster.js';
import {
  AUDIT_OUTPUT_FORMATS,
  fullReport,
  renderJson,
  renderProm,
  renderSummary,
  renderSummaryUnknown,
  renderTable,
  renderYaml,
  type AuditOutputFormat,
  type FullAuditReport,
} from './auditOutput.js';
import { auditExitCode, collectAudit, unreadMessage, type AuditRunFlags } from './auditRun.js';
import { addHelpAfter, addLoggingOptions, collect, examples, stderrLogger } from './flags.js';

interface AuditFlags extends AuditRunFlags {
  output: AuditOutputFormat;
  headers: boolean;
  interval?: string;
  metricsBindAddress: string;
}

/** Where the long-running audit serves /metrics unless told otherwise. */
export const DEFAULT_AUDIT_METRICS_BIND_ADDRESS = '127.0.0.1:10263';

export function auditCommand(setExitCode: (code: number) => void): Command {
  const cmd = new Command('audit')
    .description(
      'Read-only check of a node: which CSI volumes kubelet tracks, which it recovers only with ' +
        'CSIGlobalMountReconstruction, and which it will lose (orphaned). With the cluster\'s view ' +
        '(--cluster-state, --kubeconfig, or in a pod) also: at-risk, attached-elsewhere, pod-gone. ' +
        'Never writes, mounts or calls a driver.',
    )
    .option('--root-dir <dir>', 'kubelet root directory', DEFAULT_ROOT_DIR)
    .option('--mountinfo <file>', 'mount table to read (a captured copy works too)', LIVE_MOUNTINFO)
    .option(
      '--mountinfo-root-dir <dir>',
      'the kubelet root dir as the mount table names it, when --root-dir is a copy or is mounted elsewhere (default: --root-dir)',
    )
    .option('--feature-gates <gates>', 'kubelet feature gates to evaluate with, e.g. CSIGlobalMountReconstruction=true', collect, [])
    .option('--stuck-operations <file>', 'the agent\'s stuck operations status file (default: <root-dir>/nodevol/stuck-operations.json, read when present)')
    .addOption(new Option('-o, --output <format>', 'output format').choices([...AUDIT_OUTPUT_FORMATS]).default('table'))
    .option('--no-headers', 'table/wide: print the rows only (kubectl --no-headers)')
    .option('--interval <duration>', 'run forever, auditing every <duration> (e.g. 5m) and serving the findings on --metrics-bind-address')
    .option('--metrics-bind-address <host:port>', 'with --interval: where /metrics and /healthz are served', DEFAULT_AUDIT_METRICS_BIND_ADDRESS);
  addClusterOptions(cmd);
  addLoggingOptions(cmd);
  addHelpAfter(
    cmd,
    '\nExit codes (node-problem-detector custom plugin convention):\n' +
      '  0  nothing orphaned, no failed reconstruction, no cluster finding\n' +
      '  1  something is orphaned, fails reconstruction, is stuck (the agent\'s status file), or is at-risk / attached-elsewhere / pod-gone\n' +
      '  2  could not run (bad flags, unreadable root dir or mount table, cluster API error), or could read neither the pods dir nor the CSI plugin dir\n' +
      examples([
        ['What will kubelet lose on this node?', 'nodevol audit'],
        ['The same with the reason of each verdict', 'nodevol audit -o wide'],
        ['Against the cluster\'s view, from a file', 'kubectl get nodes,pods,pv,pvc,volumeattachments,csidrivers -A -o json > cluster.json\nnodevol audit --cluster-state cluster.json --node-name node-1'],
        ['From a container, with the host\'s mount table', 'nodevol audit --mountinfo /host/proc/1/mountinfo -o json'],
        ['As a Prometheus target (no textfile collector)', 'nodevol audit --interval 5m --metrics-bind-address 127.0.0.1:10263'],
      ]),
  );
  cmd.action(async (flags: AuditFlags) => {
    setExitCode(await audit(flags));
  });
  return cmd;
}

export async function renderAudit(report: FullAuditReport, flags: { output: AuditOutputFormat; headers: boolean }): Promise<string> {
  switch (flags.output) {
    case 'json':
      return renderJson(report);
    case 'yaml':
      return renderYaml(report);
    case 'prom':
      return renderProm(report);
    case 'summary':
      return renderSummary(report);
    case 'table':
    case 'wide':
      return renderTable(report, {
        color: process.stdout.isTTY && process.env['NO_COLOR'] === undefined,
        wide: flags.output === 'wide',
        noHeaders: !flags.headers,
      });
  }
}

async function audit(flags: AuditFlags): Promise<number> {
  const logger = stderrLogger(flags);
  if (flags.interval !== undefined) {
    const { serveAudit } = await import('./auditServe.js');
    return serveAudit(flags, flags.interval, flags.metricsBindAddress, logger);
  }
  const run = await collectAudit(flags, logger, 'audit');
  if (typeof run === 'string') {
    process.stderr.write(`${run}\n`);
    // node-problem-detector shows stdout only: without this line the condition has no message.
    if (flags.output === 'summary') process.stdout.write(renderSummaryUnknown(run));
    return EXIT_UNKNOWN;
  }
  const code = auditExitCode(run);
  const unread = unreadMessage(run, 'audit');
  // Nothing was audited: an "OK: 0 CSI volume(s)" line would contradict the exit code.
  if (code === EXIT_UNKNOWN && flags.output === 'summary') process.stdout.write(renderSummaryUnknown(unread ?? 'nothing was audited'));
  else process.stdout.write(await renderAudit(fullReport(run.report, run.cluster), flags));
  // kubectl get's table printers, on no row: this line on stderr (json and yaml print the empty report).
  if ((flags.output === 'table' || flags.output === 'wide') && run.report.volumes.length === 0 && code !== EXIT_UNKNOWN) process.stderr.write('No resources found\n');
  if (unread !== undefined) process.stderr.write(`${unread}\n`);
  return code;
}
