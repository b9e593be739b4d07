/**
 * The picture of deploy/monitoring/nodevol-audit.dashboard.json in docs/operating.md ("Grafana"),
 * made without Grafana and without a network:
 *
 * 1. six hours of made-up series for four nodes (below), in the metric names and labels
 *    `nodevol audit` exports, written as OpenMetrics and turned into a TSDB by
 *    `promtool tsdb create-blocks-from openmetrics`;
 * 2. a real Prometheus (Debian's `prometheus`) on that TSDB, listening on 127.0.0.1 only;
 * 3. each panel's own queries run against it (`query_range` for time series, `query` for stats
 *    and tables; the node variable at "All", as Grafana sends `.*`);
 * 4. each panel drawn as SVG where its gridPos puts it (24 columns, 30 px a row), with its title,
 *    unit and thresholds, and the page screenshotted in headless Chromium (puppeteer-core).
 *
 *   node dist/scripts/dashboardPicture.js [OUT.png]     (default docs/images/nodevol-audit-dashboard.png)
 *
 * Needs promtool and prometheus (Debian's prometheus package) and chromium. The sample nodes:
 * node-1 healthy (12 tracked volumes); node-2 drained and rebooted 4 h ago, leaving 2 volumes
 * orphaned, one of them cleaned up by `nodevol recover` 1 h ago; node-3 with a volume at risk
 * for 20 minutes 2 h ago, then attached elsewhere; node-4 whose audit fails (mountinfo) for the
 * last 90 minutes; node-5 whose audit hung 50 minutes ago (it still serves its last run).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..');
const DASHBOARD = path.join(REPO_ROOT, 'deploy', 'monitoring', 'nodevol-audit.dashboard.json');

const HOURS = 6;
const STEP_S = 60;

interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly values: (number | undefined)[];
}

/** The made-up series: one value a minute over HOURS, undefined where a series has no sample. */
function sampleSeries(endS: number): { samples: Sample[]; times: number[] } {
  const n = (HOURS * 3600) / STEP_S + 1;
  const times = Array.from({ length: n }, (_, i) => endS - (n - 1 - i) * STEP_S);
  const minutesAgo = (t: number): number => (endS - t) / 60;
  const samples: Sample[] = [];
  const add = (name: string, labels: Record<string, string>, f: (ago: number) => number | undefined): void => {
    samples.push({ name, labels, values: times.map((t) => f(minutesAgo(t))) });
  };
  const nodes = ['node-1', 'node-2', 'node-3', 'node-4', 'node-5'];
  nodes.forEach((node, i) => {
    const base = { instance: `10.0.0.${i + 1}:10263`, job: 'nodevol-audit', node };
    const failing = (ago: number): boolean => node === 'node-4' && ago < 90;
    // node-5's audit hung 50 minutes ago: its last run's values and timestamp stay served.
    const hungAt = (ago: number): number => (node === 'node-5' ? Math.max(ago, 50) : ago);
    const orphaned = (ago: number): number => (node === 'node-2' && ago <= 240 ? (ago > 60 ? 2 : 1) : 0);
    const atRisk = (ago: number): number => (node === 'node-3' && ago <= 120 && ago > 100 ? 1 : 0);
    const elsewhere = (ago: number): number => (node === 'node-3' && ago <= 100 ? 1 : 0);
    const verdict = (v: string) => (ago: number): number | undefined => {
      if (failing(ago)) return undefined;
      const tracked = node === 'node-1' ? 12 : node === 'node-2' ? (ago > 240 ? 9 : 7) : node === 'node-3' ? 5 : node === 'node-4' ? 8 : 6;
      return v === 'tracked' ? tracked : v === 'orphaned' ? orphaned(ago) : 0;
    };
    for (const v of ['tracked', 'recovered', 'orphaned']) add('nodevol_audit_volumes', { ...base, verdict: v }, verdict(v));
    add('nodevol_audit_orphaned_global_mounts', { ...base, driver: 'ebs.csi.aws.com' }, (ago) => (!failing(ago) && orphaned(ago) > 0 ? orphaned(ago) : undefined));
    for (const [finding, f] of [['at-risk', atRisk], ['attached-elsewhere', elsewhere], ['pod-gone', (): number => 0]] as const) {
      add('nodevol_audit_cluster_findings', { ...base, finding, driver: '' }, (ago) => (!failing(ago) ? 0 : undefined));
      add('nodevol_audit_cluster_findings', { ...base, finding, driver: 'ebs.csi.aws.com' }, (ago) => (!failing(ago) && f(ago) > 0 ? f(ago) : undefined));
    }
    add('nodevol_audit_undescribed_global_mounts', { ...base, reason: 'unreadable-vol-data' }, (ago) => (!failing(ago) ? (node === 'node-2' && ago <= 240 && ago > 200 ? 1 : 0) : undefined));
    add('nodevol_audit_stuck_volumes', { ...base, driver: '' }, (ago) => (!failing(ago) ? 0 : undefined));
    add('nodevol_audit_failed_reconstructions', base, (ago) => (!failing(ago) ? (node === 'node-2' && ago <= 240 && ago > 180 ? 1 : 0) : undefined));
    add('nodevol_audit_last_run_success', base, (ago) => (failing(ago) ? 0 : 1));
    add('nodevol_audit_last_run_failure_info', { ...base, reason: 'mountinfo' }, (ago) => (failing(ago) ? 1 : undefined));
    // A run every 5 minutes (node-5's last one 50 minutes ago).
    add('nodevol_audit_last_run_timestamp_seconds', base, (ago) => Math.floor((endS - hungAt(ago) * 60) / 300) * 300);
  });
  return { samples, times };
}

function openMetrics(samples: readonly Sample[], times: readonly number[]): string {
  const lines: string[] = [];
  const byName = new Map<string, Sample[]>();
  for (const s of samples) byName.set(s.name, [...(byName.get(s.name) ?? []), s]);
  for (const [name, series] of byName) {
    lines.push(`# TYPE ${name} gauge`);
    for (const s of series) {
      const labels = Object.entries(s.labels).map(([k, v]) => `${k}="${v}"`).join(',');
      s.values.forEach((v, i) => {
        if (v !== undefined) lines.push(`${name}{${labels}} ${v} ${times[i] ?? 0}`);
      });
    }
  }
  lines.push('# EOF');
  return `${lines.join('\n')}\n`;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function waitReady(url: string, prom: ChildProcess, log: () => string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (prom.exitCode !== null) throw new Error(`prometheus exited (${prom.exitCode}): ${log()}`);
    try {
      if ((await fetch(`${url}/-/ready`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`prometheus not ready within 30 s: ${log()}`);
}

interface Target {
  refId: string;
  expr: string;
  legendFormat?: string;
  instant?: boolean;
  format?: string;
}
interface Panel {
  id: number;
  type: 'stat' | 'timeseries' | 'table';
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  targets: Target[];
  fieldConfig?: { defaults?: { unit?: string; thresholds?: { steps: { color: string; value: number | null }[] } } };
  transformations?: { id: string; options: { renameByName?: Record<string, string> } }[];
}
interface PromSeries {
  metric: Record<string, string>;
  value?: [number, string];
  values?: [number, string][];
}

/** An instant query at `at`, or a range query over `at` (one point a STEP_S). */
async function query(url: string, expr: string, at: number | { start: number; end: number }): Promise<PromSeries[]> {
  const params = new URLSearchParams({ query: expr.replace(/\$instance\b/g, '.*') });
  const range = typeof at === 'number' ? undefined : at;
  if (typeof at === 'number') params.set('time', String(at));
  else {
    params.set('start', String(at.start));
    params.set('end', String(at.end));
    params.set('step', String(STEP_S));
  }
  const res = await fetch(`${url}/api/v1/${range === undefined ? 'query' : 'query_range'}?${params.toString()}`);
  const body = (await res.json()) as { status: string; error?: string; data?: { result: PromSeries[] } };
  if (body.status !== 'success') throw new Error(`${expr}: ${body.error ?? res.status}`);
  return body.data?.result ?? [];
}

const COLORS: Record<string, string> = { green: '#56a64b', red: '#e02f44', blue: '#3274d9' };
const PALETTE = ['#7eb26d', '#eab839', '#6ed0e0', '#ef843c', '#e24d42', '#1f78c1', '#ba43a9'];
const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function legend(t: Target, metric: Record<string, string>): string {
  return (t.legendFormat ?? '').replace(/\{\{\s*(\w+)\s*\}\}/g, (_, k: string) => metric[k] ?? '') || JSON.stringify(metric);
}

function fmt(v: number, unit: string | undefined): string {
  if (unit === 's') return v >= 3600 ? `${(v / 3600).toFixed(1)} h` : v >= 60 ? `${Math.round(v / 60)} min` : `${Math.round(v)} s`;
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

async function drawPanel(url: string, p: Panel, start: number, end: number, cellW: number): Promise<string> {
  const unit = p.fieldConfig?.defaults?.unit;
  const w = p.gridPos.w * cellW - 8;
  const h = p.gridPos.h * 30 - 8;
  const box = (cls: string, style = ''): string =>
    `<div class="panel ${cls}" style="left:${p.gridPos.x * cellW + 4}px;top:${p.gridPos.y * 30 + 4}px;width:${w}px;height:${h}px;${style}">`;
  const title = `<div class="title">${esc(p.title)}</div>`;
  if (p.type === 'stat') {
    const r = await query(url, p.targets[0]?.expr ?? '', end);
    const v = Number(r[0]?.value?.[1] ?? 'NaN');
    const steps = p.fieldConfig?.defaults?.thresholds?.steps ?? [];
    const color = steps.filter((s) => s.value === null || v >= s.value).at(-1)?.color ?? 'blue';
    return `${box('stat', `background:${COLORS[color] ?? color}`)}${title}<div class="big">${esc(fmt(v, unit))}</div></div>`;
  }
  const head = box(p.type);
  if (p.type === 'table') {
    const t = p.targets[0];
    const r = await query(url, t?.expr ?? '', end);
    const rename = p.transformations?.find((x) => x.id === 'organize')?.options.renameByName ?? {};
    const cols = Object.keys(rename);
    const rows = r.map((s) => cols.map((c) => (c === 'Value' ? (s.value?.[1] ?? '') : (s.metric[c] ?? ''))));
    const table = `<table><tr>${cols.map((c) => `<th>${esc(rename[c] ?? c)}</th>`).join('')}</tr>${rows.map((row) => `<tr>${row.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('')}</table>`;
    return `${head}${title}${rows.length === 0 ? '<div class="none">No data</div>' : table}</div>`;
  }
  const lines: { name: string; pts: [number, number][] }[] = [];
  for (const t of p.targets) {
    for (const s of await query(url, t.expr, { start, end })) lines.push({ name: legend(t, s.metric), pts: (s.values ?? []).map(([x, y]) => [x, Number(y)]) });
  }
  const plotW = w - 90;
  const plotH = h - 84;
  const maxY = Math.max(1, ...lines.flatMap((l) => l.pts.map(([, y]) => y)));
  const X = (x: number): number => 50 + ((x - start) / (end - start)) * plotW;
  const Y = (y: number): number => 8 + plotH - (y / maxY) * plotH;
  const paths = lines
    .map((l, i) => {
      const segs: string[] = [];
      let prev: number | undefined;
      for (const [x, y] of l.pts) {
        segs.push(`${prev !== undefined && x - prev <= STEP_S * 1.5 ? 'L' : 'M'}${X(x).toFixed(1)},${Y(y).toFixed(1)}`);
        prev = x;
      }
      return `<path d="${segs.join('')}" fill="none" stroke="${PALETTE[i % PALETTE.length] ?? '#888'}" stroke-width="2"/>`;
    })
    .join('');
  const ticks = [0, 0.5, 1].map((f) => `<text x="44" y="${Y(maxY * f) + 4}" text-anchor="end">${esc(fmt(maxY * f, unit))}</text><line x1="50" x2="${50 + plotW}" y1="${Y(maxY * f)}" y2="${Y(maxY * f)}" class="grid"/>`).join('');
  const hours = Array.from({ length: HOURS + 1 }, (_, i) => start + i * 3600).map((t) => `<text x="${X(t)}" y="${plotH + 24}" text-anchor="middle">${new Date(t * 1000).toISOString().slice(11, 16)}</text>`).join('');
  const keys = lines.map((l, i) => `<span><i style="background:${PALETTE[i % PALETTE.length] ?? '#888'}"></i>${esc(l.name)}</span>`).join('');
  return `${head}${title}<svg width="${w - 8}" height="${plotH + 30}">${ticks}${hours}${paths}</svg><div class="legend">${keys}</div></div>`;
}

async function main(): Promise<void> {
  const out = path.resolve(process.argv[2] ?? path.join(REPO_ROOT, 'docs', 'images', 'nodevol-audit-dashboard.png'));
  for (const tool of ['promtool', 'prometheus']) {
    if (spawnSync(tool, ['--version']).status !== 0) throw new Error(`${tool} is not installed (Debian package prometheus)`);
  }
  const work = mkdtempSync(path.join(tmpdir(), 'nodevol-dashboard-'));
  let prom: ChildProcess | undefined;
  try {
    // Whole hours: the picture does not depend on the minute it was made in.
    const end = Math.floor(Date.now() / 1000 / 3600) * 3600;
    const start = end - HOURS * 3600;
    const { samples, times } = sampleSeries(end);
    const om = path.join(work, 'samples.om');
    writeFileSync(om, openMetrics(samples, times));
    const tsdb = path.join(work, 'tsdb');
    const blocks = spawnSync('promtool', ['tsdb', 'create-blocks-from', 'openmetrics', om, tsdb], { encoding: 'utf8' });
    if (blocks.status !== 0) throw new Error(`promtool tsdb create-blocks-from: ${blocks.stderr}`);
    const config = path.join(work, 'prometheus.yml');
    writeFileSync(config, 'global:\n  evaluation_interval: 1m\n');
    const port = await freePort();
    let log = '';
    prom = spawn('prometheus', [`--config.file=${config}`, `--storage.tsdb.path=${tsdb}`, `--web.listen-address=127.0.0.1:${port}`, '--storage.tsdb.retention.time=30d'], { stdio: ['ignore', 'ignore', 'pipe'] });
    prom.stderr?.on('data', (c: Buffer) => {
      log = (log + c.toString()).slice(-4000);
    });
    const url = `http://127.0.0.1:${port}`;
    await waitReady(url, prom, () => log);

    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { title: string; panels: Panel[] };
    const width = 1600;
    const cellW = width / 24;
    const bottom = Math.max(...dashboard.panels.map((p) => p.gridPos.y + p.gridPos.h)) * 30;
    // Prometheus evaluates at `end`: the sample data's last minute.
    const panels = await Promise.all(dashboard.panels.map((p) => drawPanel(url, p, start, end, cellW)));
    const html = `<!doctype html><meta charset="utf-8"><style>
      body{margin:0;background:#111217;color:#ccccdc;font:13px sans-serif}
      header{padding:10px 12px;font-size:17px;color:#fff}
      header small{color:#8e8e9e;font-size:12px;margin-left:12px}
      main{position:relative;height:${bottom + 8}px;width:${width}px}
      .panel{position:absolute;box-sizing:border-box;background:#181b1f;border:1px solid #2c3235;border-radius:3px;padding:6px 8px;overflow:hidden}
      .stat .title{color:#fff}.title{font-weight:600;margin-bottom:4px}
      .big{font-size:44px;font-weight:600;color:#fff;text-align:center;margin-top:6px}
      svg text{fill:#8e8e9e;font-size:11px}.grid{stroke:#2c3235}
      .legend span{margin-right:14px;white-space:nowrap}.legend i{display:inline-block;width:12px;height:3px;margin-right:5px;vertical-align:middle}
      table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #2c3235}th{color:#6e9fff}
      .none{color:#8e8e9e;text-align:center;margin-top:40px}
    </style><header>${esc(dashboard.title)}<small>Node: All · last 6 hours · sample data (scripts/dashboardPicture.ts), queries run by Prometheus</small></header><main>${panels.join('')}</main>`;
    const page = path.join(work, 'dashboard.html');
    writeFileSync(page, html);

    const { launch } = await import('puppeteer-core');
    const browser = await launch({ executablePath: process.env['CHROME_PATH'] ?? '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
    try {
      const tab = await browser.newPage();
      // Nothing but the page itself: no request leaves the machine.
      await tab.setRequestInterception(true);
      tab.on('request', (r) => void (r.url().startsWith('file:') ? r.continue() : r.abort()));
      await tab.setViewport({ width, height: bottom + 60 });
      await tab.goto(pathToFileURL(page).href, { waitUntil: 'load' });
      mkdirSync(path.dirname(out), { recursive: true });
      await tab.screenshot({ path: out, fullPage: true });
    } finally {
      await browser.close();
    }
    process.stdout.write(`${out}: ${dashboard.panels.length} panels, ${samples.length} sample series\n`);
  } finally {
    prom?.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
