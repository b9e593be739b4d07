/**
 * Renderings of an audit report: kubectl-style `-o table|json`, and `-o prom`, Prometheus text
 * for node_exporter's textfile collector.
 */
import type { AuditReport, SkipReason, Verdict } from '../audit/report.js';

export type AuditOutputFormat = 'table' | 'json' | 'prom';

export function renderJson(report: AuditReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
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
];

/** Prometheus text exposition of the report (metric names documented in README.md). */
export async function renderProm(report: AuditReport): Promise<string> {
  // Loaded here, not at the top: only `-o prom` pays for prom-client's start-up.
  const { Gauge, Registry } = await import('prom-client');
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

  return registry.metrics();
}

const COLORS: Record<Verdict, string> = { tracked: '\u001b[32m', recovered: '\u001b[33m', orphaned: '\u001b[31m' };
const RESET = '\u001b[0m';

/** One row per volume, then failed candidates and skipped directories, then a summary line. */
export function renderTable(report: AuditReport, color: boolean): string {
  const rows: string[][] = [['VERDICT', 'WITH-GATE', 'DRIVER', 'VOLUME', 'MODE', 'PODS', 'GLOBAL-MOUNT']];
  for (const v of report.volumes) {
    const pods = v.pods.length === 0 ? '<none>' : v.pods.map((p) => `${p.uid}${p.dataSource === 'global-fallback' ? '(fallback)' : ''}`).join(',');
    const global = v.global === null ? '<none>' : v.global.mounted ? 'mounted' : 'not-mounted';
    rows.push([v.verdict, v.verdictWithGate, v.driver, v.volumeHandle ?? v.specName, v.mode, pods, global]);
  }
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  const lines = rows.map((r, rowIndex) =>
    r
      .map((cell, i) => {
        const padded = i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0);
        if (color && rowIndex > 0 && i === 0) return `${COLORS[cell as Verdict]}${padded}${RESET}`;
        return padded;
      })
      .join('   ')
      .trimEnd(),
  );
  if (report.volumes.length === 0) lines.push('No CSI volumes found.');
  if (report.failed.length > 0) {
    lines.push('', 'FAILED RECONSTRUCTION');
    for (const f of report.failed) lines.push(`  pod ${f.podUID} volume ${f.specName}: ${f.error}`);
  }
  if (report.skipped.length > 0) {
    lines.push('', 'SKIPPED');
    for (const s of report.skipped) lines.push(`  ${s.reason}: ${s.path}: ${s.detail}`);
  }
  const s = report.summary;
  const gate = Object.entries(report.featureGates)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  lines.push(
    '',
    `${s.volumes} volumes: ${s.tracked} tracked, ${s.recovered} recovered, ${s.orphaned} orphaned; ${s.failed} failed, ${s.skipped} skipped (feature gates: ${gate})`,
  );
  return `${lines.join('\n')}\n`;
}
