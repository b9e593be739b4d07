// deploy/monitoring and the prometheus-operator component: the alerts and the Grafana dashboard.
// The rules file and the PrometheusRule hold the same groups; promtool checks them (check rules)
// and runs their unit tests (test rules: each alert fires when it should, and not before); the
// dashboard is schema-checked (panels, layout, variables), each of its queries parses (promtool,
// as recording rules), and every metric the rules and the dashboard name is one `nodevol audit`
// exports and docs/reference/audit.md lists. Without promtool (Debian's package prometheus;
// .ci/run installs it) the promtool checks skip and say so; the rest runs.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { parse, stringify } from 'yaml';

import { AUDIT_FAILURE_REASONS } from '../../../src/cli/auditFailure.js';
import { renderProm, renderPromFailure, type FullAuditReport } from '../../../src/cli/auditOutput.js';
import { renderKustomization, type KubeObject } from '../../support/kustomize.js';
import { ruleGroupsSchema } from '../../support/prometheusOperator.js';
import { metricNamesIn } from '../../support/promql.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const RULES = path.join(REPO_ROOT, 'deploy', 'monitoring', 'nodevol-audit.rules.yaml');
const RULE_TESTS = path.join(REPO_ROOT, 'test', 'unit', 'deploy', 'nodevol-audit.rules.test.yaml');
const DASHBOARD = path.join(REPO_ROOT, 'deploy', 'monitoring', 'nodevol-audit.dashboard.json');

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
const noPromtool = promtool.status === 0 ? undefined : 'promtool is not installed (Debian package prometheus; .ci/run installs it): the rules and queries are not checked by promtool here';

function runPromtool(args: readonly string[]): { status: number | null; out: string } {
  const r = spawnSync('promtool', args, { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleGroups {
  groups: { name: string; rules: Rule[] }[];
}

const rulesFile = (): RuleGroups => ruleGroupsSchema.parse(parse(readFileSync(RULES, 'utf8')));
const prometheusRule = (): KubeObject => {
  const o = renderKustomization(path.join(REPO_ROOT, 'deploy', 'overlays', 'prometheus-operator')).find((x) => x.kind === 'PrometheusRule');
  assert.ok(o !== undefined, 'no PrometheusRule in deploy/overlays/prometheus-operator');
  return o;
};

/** A report with every optional section, so that `-o prom` registers every gauge it can. */
const FULL_REPORT: FullAuditReport = {
  rootDir: '/var/lib/kubelet',
  featureGates: { CSIGlobalMountReconstruction: false },
  volumes: [],
  failed: [],
  skipped: [],
  undescribed: [],
  summary: { volumes: 0, tracked: 0, recovered: 0, orphaned: 0, failed: 0, skipped: 0, undescribed: 0, stuck: 0 },
  mountTableProblems: [],
  timestamp: '2026-12-01T00:00:00.000Z',
  stuckOperations: { source: '/s', writtenAt: null, findings: [], stale: 0 },
  cluster: { source: 'cluster.json', nodeName: 'node-1', volumesInUse: [], volumesAttached: [], pods: {}, wantedBy: {}, findings: [] },
};

/** Every metric `nodevol audit` exports (a full run, a failed run of each reason). */
async function exportedMetrics(): Promise<Set<string>> {
  const names = new Set<string>();
  const texts = [await renderProm(FULL_REPORT), ...(await Promise.all(AUDIT_FAILURE_REASONS.map((r) => renderPromFailure(0, r))))];
  for (const t of texts) for (const m of t.matchAll(/^# TYPE (\S+) /gm)) names.add(m[1]!);
  return names;
}

/** The metric names of the `-o prom` table of docs/reference/audit.md. */
function documentedMetrics(): Set<string> {
  const doc = readFileSync(path.join(REPO_ROOT, 'docs', 'reference', 'audit.md'), 'utf8');
  const section = doc.slice(doc.indexOf('### `-o prom`'), doc.indexOf('## Long-running'));
  return new Set([...section.matchAll(/^\| `(nodevol_\w+)` \|/gm)].map((m) => m[1]!));
}

/** Every metric an expression names is exported and documented. */
function checkNames(exprs: readonly { what: string; expr: string }[], exported: ReadonlySet<string>, documented: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  for (const { what, expr } of exprs) {
    const names = metricNamesIn(expr);
    if (names.length === 0) problems.push(`${what}: names no metric: ${expr}`);
    for (const n of names) {
      if (!exported.has(n)) problems.push(`${what}: ${n} is not a metric nodevol audit exports`);
      else if (!documented.has(n)) problems.push(`${what}: ${n} is not in docs/reference/audit.md's -o prom table`);
    }
  }
  return problems;
}

describe('deploy/monitoring: the alerts', () => {
  it('the PrometheusRule of the prometheus-operator component holds exactly the groups of the rules file', () => {
    assert.deepEqual(prometheusRule()['spec'], rulesFile());
  });

  it('alerts for orphaned, at-risk and attached-elsewhere volumes and for an audit failing, not running or absent', () => {
    const alerts = rulesFile().groups.flatMap((g) => g.rules.map((r) => r.alert));
    assert.deepEqual(alerts.sort(), ['NodevolAuditAbsent', 'NodevolAuditFailing', 'NodevolAuditNotRunning', 'NodevolVolumeAtRisk', 'NodevolVolumeAttachedElsewhere', 'NodevolVolumeOrphaned']);
    for (const r of rulesFile().groups.flatMap((g) => g.rules)) {
      assert.ok(['warning', 'critical'].includes(r.labels?.['severity'] ?? ''), `${r.alert}: severity`);
      assert.ok((r.annotations?.['summary'] ?? '') !== '' && (r.annotations?.['description'] ?? '') !== '', `${r.alert}: summary and description`);
    }
  });

  it('every metric the rules name is one nodevol audit exports and docs/reference/audit.md lists', async () => {
    const exprs = rulesFile().groups.flatMap((g) => g.rules.map((r) => ({ what: r.alert ?? r.record ?? '?', expr: r.expr })));
    assert.deepEqual(checkNames(exprs, await exportedMetrics(), documentedMetrics()), []);
  });

  it('the name check can fail: an unknown metric, an undocumented one, none', () => {
    const problems = checkNames(
      [
        { what: 'a', expr: 'sum by (driver) (nodevol_audit_volumez{verdict="orphaned"}) > 0' },
        { what: 'b', expr: 'nodevol_audit_volumes > 0' },
        { what: 'c', expr: 'vector(1)' },
      ],
      new Set(['nodevol_audit_volumes']),
      new Set(),
    );
    assert.deepEqual(problems, [
      'a: nodevol_audit_volumez is not a metric nodevol audit exports',
      "b: nodevol_audit_volumes is not in docs/reference/audit.md's -o prom table",
      'c: names no metric: vector(1)',
    ]);
  });

  it('every alert has a unit test in which it fires', () => {
    const tests = parse(readFileSync(RULE_TESTS, 'utf8')) as { rule_files: string[]; tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[] };
    assert.deepEqual(tests.rule_files.map((f) => path.resolve(path.dirname(RULE_TESTS), f)), [RULES]);
    const firing = new Set(tests.tests.flatMap((t) => (t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
    const quiet = new Set(tests.tests.flatMap((t) => (t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length === 0).map((a) => a.alertname)));
    for (const alert of rulesFile().groups.flatMap((g) => g.rules.map((r) => r.alert ?? ''))) {
      assert.ok(firing.has(alert), `${alert}: no test in which it fires`);
      assert.ok(quiet.has(alert), `${alert}: no test in which it stays quiet`);
    }
  });

  it('promtool check rules accepts the rules file and the PrometheusRule\'s groups', { skip: noPromtool }, () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nodevol-rules-'));
    try {
      const fromCr = path.join(dir, 'prometheusrule.yaml');
      writeFileSync(fromCr, stringify(prometheusRule()['spec']));
      for (const f of [RULES, fromCr]) {
        const r = runPromtool(['check', 'rules', f]);
        assert.equal(r.status, 0, r.out);
        assert.match(r.out, /SUCCESS: 6 rules found/);
      }
      // It can fail: a broken expression.
      const broken = path.join(dir, 'broken.yaml');
      writeFileSync(broken, stringify({ groups: [{ name: 'x', rules: [{ alert: 'X', expr: 'sum(nodevol_audit_volumes' }] }] }));
      assert.notEqual(runPromtool(['check', 'rules', broken]).status, 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('promtool test rules: each alert fires when it should and not before', { skip: noPromtool }, () => {
    const r = runPromtool(['test', 'rules', RULE_TESTS]);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /SUCCESS/);
  });
});

interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  datasource: { type: string; uid: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets: { refId: string; expr: string; legendFormat?: string; instant?: boolean; format?: string }[];
}
interface Dashboard {
  title: string;
  uid: string;
  schemaVersion: number;
  time: { from: string; to: string };
  templating: { list: { name: string; type: string; query: unknown; allValue?: string }[] };
  panels: Panel[];
}

const dashboard = (): Dashboard => JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
/** A panel's query with the dashboard's variables replaced as Grafana would with "All" selected. */
const concrete = (expr: string): string => expr.replace(/\$instance\b|\$\{instance\}/g, '.*');

describe('deploy/monitoring: the Grafana dashboard', () => {
  it('is a dashboard: title, uid, schema version, time range, variables, panels', () => {
    const d = dashboard();
    assert.equal(typeof d.title, 'string');
    assert.match(d.uid, /^[a-zA-Z0-9_-]{1,40}$/);
    assert.ok(Number.isInteger(d.schemaVersion) && d.schemaVersion >= 36, `schemaVersion ${d.schemaVersion}`);
    assert.deepEqual(d.templating.list.map((v) => [v.name, v.type]), [['datasource', 'datasource'], ['instance', 'query']]);
    assert.ok(d.panels.length >= 8);
  });

  it('every panel has a unique id, a known type, a title, its place on the 24-column grid (no overlap), the datasource variable and queries', () => {
    const d = dashboard();
    const vars = new Set(d.templating.list.map((v) => v.name));
    const ids = new Set<number>();
    const cells = new Map<string, string>();
    for (const p of d.panels) {
      assert.ok(Number.isInteger(p.id) && !ids.has(p.id), `panel id ${p.id}`);
      ids.add(p.id);
      assert.ok(['stat', 'timeseries', 'table'].includes(p.type), `${p.title}: type ${p.type}`);
      assert.ok(p.title.length > 0 && (p.description ?? '').length > 0, `panel ${p.id}: title and description`);
      const g = p.gridPos;
      assert.ok([g.x, g.y, g.w, g.h].every((n) => Number.isInteger(n) && n >= 0) && g.w > 0 && g.h > 0 && g.x + g.w <= 24, `${p.title}: gridPos ${JSON.stringify(g)}`);
      for (let x = g.x; x < g.x + g.w; x++) {
        for (let y = g.y; y < g.y + g.h; y++) {
          const other = cells.get(`${x},${y}`);
          assert.equal(other, undefined, `${p.title} overlaps ${other ?? ''}`);
          cells.set(`${x},${y}`, p.title);
        }
      }
      assert.deepEqual(p.datasource, { type: 'prometheus', uid: '${datasource}' });
      assert.ok(p.targets.length > 0, `${p.title}: no query`);
      assert.equal(new Set(p.targets.map((t) => t.refId)).size, p.targets.length, `${p.title}: refIds`);
      for (const t of p.targets) {
        for (const m of t.expr.matchAll(/\$\{?(\w+)/g)) assert.ok(vars.has(m[1]!), `${p.title}: $${m[1]} is not a variable of the dashboard`);
      }
    }
  });

  it('every metric its queries name is one nodevol audit exports and docs/reference/audit.md lists', async () => {
    const exprs = dashboard().panels.flatMap((p) => p.targets.map((t) => ({ what: `${p.title} ${t.refId}`, expr: t.expr })));
    const variable = dashboard().templating.list.find((v) => v.name === 'instance')?.query as { query: string };
    exprs.push({ what: 'variable instance', expr: variable.query.replace(/^label_values\(([^,]+),.*\)$/, '$1') });
    assert.deepEqual(checkNames(exprs, await exportedMetrics(), documentedMetrics()), []);
  });

  it('every query parses (promtool check rules, each query as a recording rule)', { skip: noPromtool }, () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nodevol-dashboard-'));
    try {
      const rules = dashboard().panels.flatMap((p) => p.targets.map((t) => ({ record: `nodevol_dashboard:panel_${p.id}_${t.refId}`, expr: concrete(t.expr) })));
      const file = path.join(dir, 'dashboard-queries.yaml');
      writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules }] }));
      const r = runPromtool(['check', 'rules', file]);
      assert.equal(r.status, 0, r.out);
      assert.match(r.out, new RegExp(`SUCCESS: ${rules.length} rules found`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
