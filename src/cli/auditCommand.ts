/** `nodevol audit`: wiring of the read-only node audit to real files and the real mount table. */
import { Command, Option } from 'commander';
import { EXIT_UNKNOWN } from '../audit/report.js';
import { addClusterOptions } from './auditCluster.js';
import {
  AUDIT_OUTPUT_FORMATS,
  fullReport,
  renderJson,
  renderProm,
  renderPromFailure,
  renderSummary,
  renderSummaryUnknown,
  renderTable,
  renderYaml,
  type AuditOutputFormat,
  type FullAuditReport,
} from './auditOutput.js';
import { errorMessage } from '../ports/fs.js';
import { AuditRunFailure } from './auditFailure.js';
import { addAuditRunOptions, auditExitCode, collectAuditRun, nothingReadFailure, unreadMessage, type AuditRunFlags } from './auditRun.js';
import { addHelpAfter, addLoggingOptions, examples, stderrLogger } from './flags.js';
import type { Logger } from '../ports/logger.js';

interface AuditFlags extends AuditRunFlags {
  output: AuditOutputFormat;
  headers: boolean;
  interval?: string;
  metricsBindAddress: string;
  outputFile?: string;
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
    );
  addAuditRunOptions(cmd)
    .option('--stuck-operations <file>', 'the agent\'s stuck operations status file (default: <root-dir>/nodevol/stuck-operations.json, read when present)')
    .addOption(new Option('-o, --output <format>', 'output format').choices([...AUDIT_OUTPUT_FORMATS]).default('table'))
    .option('--no-headers', 'table/wide: print the rows only (kubectl --no-headers)')
    .option(
      '--output-file <file>',
      'with -o prom: write the output to <file> instead of stdout, atomically (a temp file in its directory, then a rename), also when the audit cannot run (nodevol_audit_last_run_success 0)',
    )
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
        ['For node_exporter\'s textfile collector (cron)', 'nodevol audit -o prom --output-file /var/lib/node_exporter/textfile/nodevol.prom'],
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
  if (flags.outputFile !== undefined) {
    const misuse =
      flags.output !== 'prom'
        ? `-o ${flags.output}: --output-file is for -o prom (node_exporter's textfile collector); redirect the other formats`
        : flags.interval !== undefined
          ? '--interval: --output-file is for a single run (--interval serves /metrics)'
          : undefined;
    if (misuse !== undefined) {
      process.stderr.write(`nodevol audit: ${misuse}\n`);
      return EXIT_UNKNOWN;
    }
  }
  if (flags.interval !== undefined) {
    const { serveAudit } = await import('./auditServe.js');
    return serveAudit(flags, flags.interval, flags.metricsBindAddress, logger);
  }
  const { text, code } = await auditOnce(flags, logger);
  if (flags.outputFile === undefined) {
    if (text !== undefined) process.stdout.write(text);
    return code;
  }
  try {
    // Loaded only here: the audit's start-up stays what it was without the flag.
    const { writeOutputFile } = await import('./outputFile.js');
    await writeOutputFile(flags.outputFile, text ?? '');
  } catch (err) {
    process.stderr.write(`nodevol audit: --output-file ${flags.outputFile}: ${errorMessage(err)}\n`);
    return EXIT_UNKNOWN;
  }
  return code;
}

/** One run: what to print (nothing for a failed run in a format that has no rendering of it) and the exit code. */
async function auditOnce(flags: AuditFlags, logger: Logger): Promise<{ text: string | undefined; code: number }> {
  const run = await collectAuditRun(flags, logger, 'audit');
  if (run instanceof AuditRunFailure) return failedRun(run, flags.output);
  const nothing = nothingReadFailure(run, 'audit');
  if (nothing !== undefined) return failedRun(nothing, flags.output);
  const unread = unreadMessage(run, 'audit');
  const text = await renderAudit(fullReport(run.report, run.cluster), flags);
  // kubectl get's table printers, on no row: this line on stderr (json and yaml print the empty report).
  if ((flags.output === 'table' || flags.output === 'wide') && run.report.volumes.length === 0) process.stderr.write('No resources found\n');
  if (unread !== undefined) process.stderr.write(`${unread}\n`);
  return { text, code: auditExitCode(run) };
}

/** A run that could not complete: its line on stderr; on stdout only what a format says of a failure. */
async function failedRun(failure: AuditRunFailure, output: AuditOutputFormat): Promise<{ text: string | undefined; code: number }> {
  process.stderr.write(`${failure.message}\n`);
  // node-problem-detector shows stdout only: without this line the condition has no message.
  if (output === 'summary') return { text: renderSummaryUnknown(failure), code: EXIT_UNKNOWN };
  // Prometheus must see the failure too: success 0 and why; never an empty file, never a verdict.
  if (output === 'prom') return { text: await renderPromFailure(Date.now(), failure.reason), code: EXIT_UNKNOWN };
  return { text: undefined, code: EXIT_UNKNOWN };
}
