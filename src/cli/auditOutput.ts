/**
 * Renderings of an audit report: kubectl-style `-o table|wide|json|yaml` (`--no-headers`), and
 * `-o prom`, Prometheus text for node_exporter's textfile collector and for the long-running
 * mode's /metrics. The table escapes every control character (src/cli/terminal.ts).
 */
// prom-client and yaml are loaded only by the formats that need them: `nodevol audit` in its
// default table format starts without either (ARCHITECTURE.md, "Start-up").
import type { Gauge, Registry } from 'prom-client';
import type { ClusterAudit, ClusterFinding } from '../audit/clusterFindings.js';
import { CLUSTER_FINDING_KINDS } from '../audit/findingKinds.js';
import type { AuditFailed, AuditReport, AuditVolume, SkipReason, Verdict } from '../audit/report.js';
import { escapeCell, escapeText } from './terminal.js';
import { importExternal } from '../adapters/node/importExternal.js';
import { AUDIT_FAILURE_REASONS, type AuditFailureReason, type AuditRunFailure } from './auditFailure.js';

export const AUDIT_OUTPUT_FORMATS = ['table', 'wide', 'json', 'yaml', 'prom', 'summary'] as const;
export type AuditOutputFormat = (typeof AUDIT_OUTPUT_FORMATS)[number];

/** The report with its `cluster` section when the cluster's view was known. */
export interface FullAuditReport extends AuditReport {
  readonly cluster?: ClusterAudit;
}

export function fullReport(report: AuditReport, cluster: ClusterAudit | undefined): FullAuditReport {
  return cluster === undefined ? report : { ...report, cluster };
}

export function renderJson(report: FullAuditReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}

export async function renderYaml(report: FullAuditReport): Promise<string> {
  const { stringify } = await importExternal<typeof import('yaml')>('yaml');
  return stringify(report, { lineWidth: 0 });
}

const VERDICTS: readonly Verdict[] = ['tracked', 'recovered', 'orphaned'];
const SKIP_REASONS: readonly SkipReason[] = [
  'no-globalmount',
  'unreadable-vol-data',
  'missing-driver-or-handle',
  'name-mismatch',
  'not-staged',
  'no-spec-vol-id',
  'legacy-layout',
  'unreadable-dir',
  'symlink',
  'interrupted-write',
];

/** Skip reasons that never make an `undescribed` finding: nothing can be mounted at such a path, or the volume is reported as orphaned. */
const NEVER_UNDESCRIBED: ReadonlySet<SkipReason> = new Set<SkipReason>(['symlink', 'unreadable-dir', 'not-staged', 'no-spec-vol-id']);

/** Prometheus text exposition of the report (metric names documented in docs/reference/audit.md). */
export async function renderProm(report: FullAuditReport): Promise<string> {
  const { Gauge, Registry } = await importExternal<typeof import('prom-client')>('prom-client');
  const registry = new Registry();
  const volumes = new Gauge({
    name: 'nodevol_audit_volumes',
    help: 'CSI volumes found by the last nodevol audit, by verdict for the feature gates it ran with.',
    labelNames: ['verdict'],
    registers: [registry],
  });
  for (const v of VERDICTS) volumes.set({ verdict: v }, report.volumes.filter((x) => x.verdict === v).length);

  const orphaned = new Gauge({
    name: 'nodevol_audit_orphaned_global_mounts',
    help: 'Staged CSI volumes kubelet will lose (verdict orphaned), by driver.',
    labelNames: ['driver'],
    registers: [registry],
  });
  for (const v of report.volumes) if (v.verdict === 'orphaned') orphaned.inc({ driver: v.driver });

  const skipped = new Gauge({
    name: 'nodevol_audit_skipped_dirs',
    help: 'Directories under the kubelet root dir the audit could not describe, by reason.',
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const r of SKIP_REASONS) skipped.set({ reason: r }, report.skipped.filter((s) => s.reason === r).length);

  const undescribed = new Gauge({
    name: 'nodevol_audit_undescribed_global_mounts',
    help: 'Mounted global mounts (staged devices) whose directory no vol_data.json describes, by reason: no kubelet rebuilds or unstages them.',
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const r of SKIP_REASONS.filter((x) => !NEVER_UNDESCRIBED.has(x))) undescribed.set({ reason: r }, report.undescribed.filter((u) => u.reason === r).length);

  new Gauge({
    name: 'nodevol_audit_failed_reconstructions',
    help: 'Pod volume directories whose reconstruction fails with the feature gates the audit ran with.',
    registers: [registry],
  }).set(report.failed.length);

  const gates = new Gauge({
    name: 'nodevol_audit_feature_gate',
    help: 'Feature gates the last audit evaluated kubelet with (1 enabled, 0 disabled).',
    labelNames: ['name'],
    registers: [registry],
  });
  for (const [name, on] of Object.entries(report.featureGates)) gates.set({ name }, on ? 1 : 0);

  new Gauge({
    name: 'nodevol_audit_last_run_timestamp_seconds',
    help: 'Unix time the last nodevol audit ran.',
    registers: [registry],
  }).set(Date.parse(report.timestamp) / 1000);

  const byDriver = new Gauge({
    name: 'nodevol_audit_driver_volumes',
    help: 'CSI volumes found by the last nodevol audit, by driver and verdict.',
    labelNames: ['driver', 'verdict'],
    registers: [registry],
  });
  for (const v of report.volumes) byDriver.inc({ driver: v.driver, verdict: v.verdict });

  if (report.stuckOperations !== undefined) {
    const stuck = new Gauge({
      name: 'nodevol_audit_stuck_volumes',
      help: 'Staged CSI volumes whose teardown the driver keeps refusing, per the agent\'s stuck operations status file, by driver.',
      labelNames: ['driver'],
      registers: [registry],
    });
    stuck.set({ driver: '' }, 0);
    for (const f of report.stuckOperations.findings) stuck.inc({ driver: f.driver });
  }

  if (report.cluster !== undefined) {
    const findings = new Gauge({
      name: 'nodevol_audit_cluster_findings',
      help: 'Findings of the last audit against the cluster (at-risk, attached-elsewhere, pod-gone), by driver.',
      labelNames: ['finding', 'driver'],
      registers: [registry],
    });
    for (const k of CLUSTER_FINDING_KINDS) findings.set({ finding: k, driver: '' }, 0);
    for (const f of report.cluster.findings) findings.inc({ finding: f.kind, driver: f.driver ?? '' });
  }

  lastRunSuccess(Gauge, registry).set(1);
  return registry.metrics();
}

function lastRunSuccess(GaugeClass: typeof Gauge, registry: Registry): Gauge {
  return new GaugeClass({
    name: 'nodevol_audit_last_run_success',
    help: 'Whether the last audit could run (1) or not (0: unreadable root dir or mount table, cluster API error); no verdict is served after a failed run.',
    registers: [registry],
  });
}

/**
 * What `-o prom` prints, and /metrics serves, after a run that could not complete: no verdict,
 * only the failure and, when a run failed (not before the first one), why: one series of
 * `nodevol_audit_last_run_failure_info` whose `reason` is one of {@link AUDIT_FAILURE_REASONS}.
 */
export async function renderPromFailure(nowMs: number, reason?: AuditFailureReason): Promise<string> {
  const { Gauge, Registry } = await importExternal<typeof import('prom-client')>('prom-client');
  const registry = new Registry();
  lastRunSuccess(Gauge, registry).set(0);
  new Gauge({ name: 'nodevol_audit_last_run_timestamp_seconds', help: 'Unix time the last nodevol audit ran.', registers: [registry] }).set(nowMs / 1000);
  if (reason !== undefined) {
    new Gauge({
      name: 'nodevol_audit_last_run_failure_info',
      help: `Why the last audit could not run (value 1; only after a failed run): reason is one of ${AUDIT_FAILURE_REASONS.join(', ')}.`,
      labelNames: ['reason'],
      registers: [registry],
    }).set({ reason }, 1);
  }
  return registry.metrics();
}

const COLORS: Record<Verdict, string> = { tracked: '\u001b[32m', recovered: '\u001b[33m', orphaned: '\u001b[31m' };
const RESET = '\u001b[0m';

export interface TableOptions {
  /** ANSI colours on the verdict column (a terminal without NO_COLOR). */
  readonly color: boolean;
  /** `-o wide`: a REASON column. */
  readonly wide: boolean;
  /** `--no-headers`. */
  readonly noHeaders: boolean;
}

function podName(cluster: ClusterAudit | undefined, uid: string): string {
  const p = cluster?.pods[uid];
  return p === undefined ? uid : `${p.namespace}/${p.name}`;
}

function clusterCell(cluster: ClusterAudit, v: AuditVolume): string {
  const kinds = cluster.findings
    .filter((f) => f.uniqueName === v.uniqueName && f.kind !== 'pod-gone')
    .map((f) => (f.kind === 'attached-elsewhere' ? `attached-elsewhere:${(f.nodes ?? []).join('+')}` : f.kind));
  if (kinds.length > 0) return kinds.join(',');
  return cluster.volumesInUse.includes(v.uniqueName) ? 'in-use' : '-';
}

/**
 * One row per volume, then failed candidates, skipped directories and cluster findings, then a
 * summary line. Every cell and line is escaped for the terminal.
 */
export function renderTable(report: FullAuditReport, options: TableOptions): string {
  const cluster = report.cluster;
  const header = ['VERDICT', 'WITH-GATE', 'DRIVER', 'VOLUME', 'MODE', 'PODS', 'GLOBAL-MOUNT'];
  if (cluster !== undefined) header.push('CLUSTER');
  if (options.wide) header.push('REASON');
  const rows: string[][] = [];
  for (const v of report.volumes) {
    const pods =
      v.pods.length === 0 ? '<none>' : v.pods.map((p) => `${podName(cluster, p.uid)}${p.dataSource === 'global-fallback' ? '(fallback)' : ''}`).join(',');
    const global = v.global === null ? '<none>' : v.global.mounted ? 'mounted' : 'not-mounted';
    const row = [v.verdict, v.verdictWithGate, v.driver, v.volumeHandle ?? v.specName, v.mode, pods, global];
    if (cluster !== undefined) row.push(clusterCell(cluster, v));
    if (options.wide) {
      const reasons = [
        ...v.reasons,
        ...(report.stuckOperations?.findings.filter((f) => f.uniqueName === v.uniqueName).map((f) => `stuck: ${f.reason}`) ?? []),
        ...(cluster?.findings.filter((f) => f.uniqueName === v.uniqueName && f.kind !== 'pod-gone').map((f) => f.reason) ?? []),
      ];
      row.push(reasons.map(escapeText).join('; '));
    }
    rows.push(row.map((c, i) => (options.wide && i === row.length - 1 ? c : escapeCell(c))));
  }
  // No row, no header: kubectl prints none (and says "No resources found" on stderr: auditCommand.ts).
  const all = options.noHeaders || rows.length === 0 ? rows : [header, ...rows];
  const widths = header.map((_, i) => Math.max(0, ...all.map((r) => (r[i] ?? '').length)));
  const lines = all.map((r, rowIndex) =>
    r
      .map((cell, i) => {
        const padded = i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0);
        const isData = options.noHeaders || rowIndex > 0;
        if (options.color && isData && i === 0) return `${COLORS[cell as Verdict]}${padded}${RESET}`;
        return padded;
      })
      .join('   ')
      .trimEnd(),
  );
  if (options.noHeaders) return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
  if (report.undescribed.length > 0) {
    lines.push('', 'UNDESCRIBED (mounted global mounts no vol_data.json describes: no kubelet rebuilds or unstages them)');
    for (const u of report.undescribed) {
      const who = u.driver !== undefined ? ` (${escapeText(u.driver)}${u.volumeHandle !== undefined ? `^${escapeText(u.volumeHandle)}` : ''})` : '';
      lines.push(`  ${u.reason}: ${escapeText(u.deviceMountPath)}${who}: ${escapeText(u.detail)}`);
    }
  }
  if (report.failed.length > 0) {
    lines.push('', 'FAILED RECONSTRUCTION');
    for (const f of report.failed) {
      const pod = cluster?.pods[f.podUID] === undefined ? '' : ` (pod ${podName(cluster, f.podUID)})`;
      lines.push(`  ${escapeText(f.path)}${escapeText(pod)}`, `    ${escapeText(failureCause(f))}`);
    }
  }
  if (report.skipped.length > 0) {
    lines.push('', 'SKIPPED');
    for (const s of report.skipped) lines.push(`  ${s.reason}: ${escapeText(s.path)}: ${escapeText(s.detail)}`);
  }
  const stuck = report.stuckOperations;
  if (stuck !== undefined && (stuck.findings.length > 0 || stuck.error !== undefined)) {
    lines.push('', `STUCK (from ${escapeText(stuck.source)}${stuck.writtenAt === null ? '' : `, written ${escapeText(stuck.writtenAt)}`})`);
    if (stuck.error !== undefined) lines.push(`  unreadable: ${escapeText(stuck.error)}`);
    for (const f of stuck.findings) lines.push(`  stuck: ${escapeText(f.uniqueName)}: ${escapeText(f.reason)}`);
  }
  if (cluster !== undefined && cluster.findings.length > 0) {
    lines.push('', `CLUSTER FINDINGS (node ${escapeText(cluster.nodeName)}, from ${escapeText(cluster.source)})`);
    for (const f of cluster.findings) lines.push(`  ${f.kind}: ${escapeText(findingSubject(f))}: ${escapeText(f.reason)}`);
  }
  const s = report.summary;
  // The KEP's gate always; nodevol's own gates (which the audit does not use) only when on.
  const gate = Object.entries(report.featureGates)
    .filter(([k, v]) => v || k === 'CSIGlobalMountReconstruction')
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  let summary = `${s.volumes} ${s.volumes === 1 ? 'volume' : 'volumes'}: ${s.tracked} tracked, ${s.recovered} recovered, ${s.orphaned} orphaned; ${s.failed} failed, ${s.skipped} skipped (feature gates: ${gate})`;
  if (s.undescribed > 0) summary += `; ${s.undescribed} undescribed`;
  if (s.stuck !== undefined) summary += `; ${s.stuck} stuck`;
  if (cluster !== undefined) {
    const n = (k: ClusterFinding['kind']): number => cluster.findings.filter((f) => f.kind === k).length;
    summary += `; cluster: ${n('at-risk')} at-risk, ${n('attached-elsewhere')} attached-elsewhere, ${n('pod-gone')} pod-gone`;
  }
  // Nothing at all: no summary either, as kubectl prints nothing on stdout; else no blank line first.
  if (lines.length === 0) return '';
  lines.push('', summary);
  return `${(lines[0] === '' ? lines.slice(1) : lines).join('\n')}\n`;
}

/**
 * A failed reconstruction's error without what its entry already says: kubelet's wrapper naming
 * the pod, the volume and the directory, and the directory before each file in it (the error
 * named the directory three times).
 */
function failureCause(f: AuditFailed): string {
  const wrapper = `could not construct volume information for pod ${f.podUID} volume ${JSON.stringify(f.specName)} (${f.path}): `;
  const cause = f.error.startsWith(wrapper) ? f.error.slice(wrapper.length) : f.error;
  return cause.split(`${f.path}/`).join('');
}

function findingSubject(f: ClusterFinding): string {
  if (f.kind === 'pod-gone') return `pod ${f.podUID ?? '?'}`;
  return f.uniqueName ?? '?';
}

/**
 * The longest `-o summary` line, in bytes: node-problem-detector's `max_output_length` in
 * deploy/npd (NPD cuts the output there, and a Node condition's message should be whole).
 */
export const SUMMARY_MAX_BYTES = 200;

const utf8 = new TextEncoder();
const byteLength = (s: string): number => utf8.encode(s).length;

/** `s` cut to at most `max` bytes, on a character boundary, ending in `…` when cut. */
export function cutToBytes(s: string, max: number): string {
  if (byteLength(s) <= max) return s;
  let out = '';
  let used = 0;
  const room = max - byteLength('…');
  for (const ch of s) {
    const n = byteLength(ch);
    if (used + n > room) break;
    out += ch;
    used += n;
  }
  return `${out}…`;
}

/**
 * `s` cut to at most `max` bytes by eliding its middle (`…`): the start (what failed) and the end
 * (why: `does not exist`, an errno) stay, a long path between them goes.
 */
export function cutMiddleToBytes(s: string, max: number): string {
  if (byteLength(s) <= max) return s;
  const chars = Array.from(s);
  const tailRoom = Math.floor((max - byteLength('…')) / 3);
  let tail = '';
  let tailBytes = 0;
  for (let i = chars.length - 1; i >= 0; i--) {
    const n = byteLength(chars[i] ?? '');
    if (tailBytes + n > tailRoom) break;
    tail = (chars[i] ?? '') + tail;
    tailBytes += n;
  }
  const head = cutToBytes(s, max - tailBytes);
  return `${head}${tail}`;
}

/** A count of the summary line, and the names it may show when there is room. */
interface SummaryPart {
  readonly head: string;
  readonly names: readonly string[];
  readonly total: number;
}

const namesText = (shown: readonly string[], total: number): string => (shown.length === 0 ? '' : ` (${shown.join(', ')}${total > shown.length ? ', …' : ''})`);

/**
 * `PROBLEM: ` and every count (always whole), then as many names as {@link SUMMARY_MAX_BYTES}
 * leaves room for, in order; a name too long for the room left is cut (`…`) rather than dropped
 * when it is the first of its count. Every piece is escaped for a terminal before it is measured.
 */
function fitProblemLine(parts: readonly SummaryPart[]): string {
  const heads = parts.map((p) => escapeText(p.head));
  const lineOf = (rendered: readonly string[]): string => `PROBLEM: ${rendered.join(', ')}`;
  const bare = lineOf(heads);
  if (byteLength(bare) > SUMMARY_MAX_BYTES) return cutToBytes(bare, SUMMARY_MAX_BYTES);
  const rendered = [...heads];
  parts.forEach((p, i) => {
    const shown: string[] = [];
    for (const raw of p.names) {
      const name = escapeText(raw);
      const withIt = [...rendered];
      withIt[i] = `${heads[i] ?? ''}${namesText([...shown, name], p.total)}`;
      const over = byteLength(lineOf(withIt)) - SUMMARY_MAX_BYTES;
      if (over <= 0) {
        shown.push(name);
        rendered[i] = withIt[i] ?? '';
        continue;
      }
      // The first name of a count, cut to the room left, if enough of it stays to recognise.
      const keep = byteLength(name) - over;
      if (shown.length === 0 && keep >= 16) {
        shown.push(cutToBytes(name, keep));
        rendered[i] = `${heads[i] ?? ''}${namesText(shown, p.total)}`;
      }
      break;
    }
  });
  return lineOf(rendered);
}

/**
 * `-o summary`: one line, for node-problem-detector's custom plugin (it shows the first line of
 * the output as the condition's message): "OK: …" or "PROBLEM: …" with every count and the first
 * names that fit, at most {@link SUMMARY_MAX_BYTES} bytes.
 */
export function renderSummary(report: FullAuditReport): string {
  const orphaned = report.volumes.filter((v) => v.verdict === 'orphaned');
  const findings = report.cluster?.findings ?? [];
  const parts: SummaryPart[] = [];
  if (orphaned.length > 0) {
    parts.push({ head: `${orphaned.length} orphaned`, names: orphaned.slice(0, 3).map((v) => `${v.driver}^${v.volumeHandle ?? v.specName}`), total: orphaned.length });
  }
  if (report.failed.length > 0) parts.push({ head: `${report.failed.length} fail reconstruction`, names: [], total: report.failed.length });
  if (report.undescribed.length > 0) {
    parts.push({ head: `${report.undescribed.length} undescribed global mount(s)`, names: report.undescribed.slice(0, 1).map((u) => u.deviceMountPath), total: report.undescribed.length });
  }
  const stuck = report.stuckOperations?.findings ?? [];
  if (stuck.length > 0) {
    parts.push({ head: `${stuck.length} stuck`, names: stuck.slice(0, 2).map((f) => f.uniqueName.replace(/^kubernetes\.io\/csi\//, '')), total: stuck.length });
  }
  for (const k of CLUSTER_FINDING_KINDS) {
    const n = findings.filter((f) => f.kind === k).length;
    if (n > 0) parts.push({ head: `${n} ${k}`, names: [], total: n });
  }
  const line =
    parts.length === 0
      ? escapeText(`OK: ${report.summary.volumes} CSI volume(s), none orphaned${report.cluster !== undefined ? ', no cluster finding' : ''}`)
      : fitProblemLine(parts);
  return `${line}\n`;
}

/**
 * `-o summary` when the audit could not run (exit 2): "UNKNOWN: <why>", one line on stdout of at
 * most {@link SUMMARY_MAX_BYTES} bytes, so that node-problem-detector (which reads stdout only) has
 * a message for the unknown condition: the failure's brief (no advice for a terminal). The stderr
 * line stays as it is.
 */
export function renderSummaryUnknown(failure: AuditRunFailure): string {
  const firstLine = failure.brief.split('\n')[0] ?? '';
  return `${cutMiddleToBytes(escapeText(`UNKNOWN: ${firstLine}`), SUMMARY_MAX_BYTES)}\n`;
}
