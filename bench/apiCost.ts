/**
 * API cost bench: what one `nodevol audit --kubeconfig …` of one node costs the API server of a
 * large cluster, counted at the server: requests, bytes of the answers' bodies, connections.
 *
 * The cluster (test/support/apiCostCluster.ts, served by test/support/fakeApiServer.ts on
 * 127.0.0.1, which answers real Kubernetes JSON and pages lists by `limit` as an API server does)
 * holds BENCH_API_NODES nodes (default 5,000), each with BENCH_API_PODS pods (default 10), each pod
 * with its own claim, a ReadWriteOnce CSI PersistentVolume and a VolumeAttachment to its node
 * (attached), and one CSIDriver. The audited node, node-00001, has its BENCH_API_PODS volumes
 * staged and published on disk (a NodeFixture), and is audited in three states: healthy, at-risk
 * (KEP-6058 story 1: a volume's pod drained away, the volume still staged and attached here) and
 * attached-elsewhere (that volume detached here and attached to node-00002).
 * Each state's findings are printed with its counts, so that two builds can be compared on the
 * same answers. BENCH_API_BASELINE=<dir> (a copy holding bin/nodevol.js and its dist/) runs that
 * build too, in the same run, side by side.
 *
 * A benchmark, not a test: it prints and exits 0; a broken setup (an audit that cannot run)
 * exits 1. test/cli/apiCost.cli.test.ts holds the bound on the request count as a test.
 *
 *   node dist/bench/apiCost.js
 *   BENCH_API_BASELINE=/tmp/nodevol-before node dist/bench/apiCost.js
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AUDITED, benchCluster, benchNode, STATES, type State } from '../test/support/apiCostCluster.js';
import type { KubeObject } from '../test/support/clusterObjects.js';
import { fakeApiServer, requestKind, writeKubeconfig } from '../test/support/fakeApiServer.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return n;
}

export interface AuditCost {
  readonly exit: number;
  readonly findings: string;
  readonly requests: number;
  readonly bytes: number;
  readonly connections: number;
  /** The audit process's wall time, start-up included (the walk of a 10-volume node is a few ms of it). */
  readonly wallMs: number;
  /** Requests by what they asked for (`GET pvc`, `LIST persistentvolumes` …). */
  readonly byKind: ReadonlyMap<string, { requests: number; bytes: number }>;
  readonly stderr: string;
}

function run(bin: string, args: readonly string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  delete env['NODE_NAME'];
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env, timeout: 600_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

/** One audit of node 1 by the build at `repo`, against `objects`: what the server saw. */
export async function auditCost(repo: string, objects: readonly KubeObject[], pods: number, state: State): Promise<AuditCost> {
  const api = await fakeApiServer(objects);
  const { fx, mountinfo } = await benchNode(pods, state);
  try {
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const started = performance.now();
    const r = await run(path.join(repo, 'bin', 'nodevol.js'), ['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '--kubeconfig', kubeconfig, '--node-name', AUDITED, '-o', 'json']);
    let findings = '(no report)';
    try {
      const report = JSON.parse(r.stdout) as { cluster?: { findings: { kind: string }[] } };
      const kinds = (report.cluster?.findings ?? []).map((f) => f.kind);
      findings = kinds.length === 0 ? 'none' : kinds.join(', ');
    } catch {
      // No JSON on stdout: the audit could not run; stderr says why.
    }
    const wallMs = performance.now() - started;
    const byKind = new Map<string, { requests: number; bytes: number }>();
    for (const q of api.requests) {
      const k = requestKind(q);
      const e = byKind.get(k) ?? { requests: 0, bytes: 0 };
      e.requests++;
      e.bytes += q.bytes;
      byKind.set(k, e);
    }
    return {
      exit: r.status,
      findings,
      requests: api.requests.length,
      bytes: api.requests.reduce((a, q) => a + q.bytes, 0),
      connections: api.acceptedSockets(),
      wallMs,
      byKind,
      stderr: r.stderr.trim(),
    };
  } finally {
    await api.close();
    await fx.cleanup();
  }
}

const bytesText = (n: number): string => (n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);

async function main(): Promise<void> {
  const nodes = positiveInt('BENCH_API_NODES', 5000);
  const pods = positiveInt('BENCH_API_PODS', 10);
  const baseline = process.env['BENCH_API_BASELINE'];
  if (baseline !== undefined && !existsSync(path.join(baseline, 'bin', 'nodevol.js'))) throw new Error(`BENCH_API_BASELINE=${baseline}: no bin/nodevol.js there`);
  const builds: [string, string][] = [...(baseline !== undefined ? [['baseline', baseline] as [string, string]] : []), ['this build', REPO]];
  const cluster = benchCluster(nodes, pods);
  console.log(`API cost of one audit of ${AUDITED} (${pods} volumes): ${nodes} nodes, ${nodes * pods} pods, claims, PVs and VolumeAttachments, 1 CSIDriver`);
  console.log('state                build        exit  findings                     requests  connections  bytes       audit wall');
  let broken = false;
  for (const state of STATES) {
    const objects = cluster(state);
    for (const [label, repo] of builds) {
      const c = await auditCost(repo, objects, pods, state);
      if (c.exit === 2 || c.exit < 0) {
        broken = true;
        console.log(`${state.padEnd(20)} ${label.padEnd(12)} ${String(c.exit).padEnd(5)} could not run: ${c.stderr.split('\n')[0] ?? ''}`);
        continue;
      }
      console.log(`${state.padEnd(20)} ${label.padEnd(12)} ${String(c.exit).padEnd(5)} ${c.findings.padEnd(28)} ${String(c.requests).padStart(8)}  ${String(c.connections).padStart(11)}  ${bytesText(c.bytes).padEnd(10)}  ${(c.wallMs / 1000).toFixed(2)} s`);
      const parts = [...c.byKind].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, e]) => `${k} ${e.requests} (${bytesText(e.bytes)})`);
      console.log(`${''.padEnd(40)}${parts.join(', ')}`);
    }
  }
  if (broken) process.exitCode = 1;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.stack : String(err));
    process.exitCode = 1;
  });
}
