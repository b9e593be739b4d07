// What one `nodevol audit --kubeconfig` costs the API server, counted at the fake API server: for
// a node with k staged volumes the requests and the bytes are the same in a cluster of 20 nodes
// and of 400 (3k + 3 requests when healthy: its Node, its pods, and by name its k claims, their k
// PVs, the CSIDriver and its k VolumeAttachments), and no list but its pods'. Only a volume that
// lost its VolumeAttachment here makes it list the PVs and VolumeAttachments of the cluster, and
// then its findings are those of the whole view. The same cluster as bench/apiCost.ts
// (test/support/apiCostCluster.ts), smaller.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { AUDITED, benchCluster, benchNode, type State } from '../support/apiCostCluster.js';
import { list } from '../support/clusterObjects.js';
import { fakeApiServer, requestKind, writeKubeconfig, type RecordedRequest } from '../support/fakeApiServer.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');
const K = 4;

interface Audit {
  readonly status: number;
  readonly findings: string[];
  readonly requests: readonly RecordedRequest[];
  readonly stderr: string;
}

function nodevol(args: readonly string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  delete env['NODE_NAME'];
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

const findingsOf = (stdout: string): string[] => ((JSON.parse(stdout) as { cluster?: { findings: { kind: string; uniqueName?: string }[] } }).cluster?.findings ?? []).map((f) => `${f.kind} ${f.uniqueName ?? ''}`).sort();

/** Audits node 1 of a cluster of `nodes` nodes × K pods in `state`, through the API server; and, with `file`, from the same objects as a --cluster-state file. */
async function audit(nodes: number, state: State, source: 'api' | 'file' = 'api', extra: readonly string[] = []): Promise<Audit> {
  const objects = benchCluster(nodes, K)(state);
  const { fx, mountinfo } = await benchNode(K, state);
  const api = await fakeApiServer(objects);
  try {
    const args = ['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '--node-name', AUDITED, '-o', 'json', ...extra];
    if (source === 'api') {
      const kubeconfig = path.join(fx.base, 'kubeconfig');
      await writeKubeconfig(kubeconfig, api.url);
      args.push('--kubeconfig', kubeconfig);
    } else {
      const file = path.join(fx.base, 'cluster.json');
      await writeFile(file, JSON.stringify(list(objects)));
      args.push('--cluster-state', file);
    }
    const r = await nodevol(args);
    assert.notEqual(r.status, 2, r.stderr);
    return { status: r.status, findings: findingsOf(r.stdout), requests: [...api.requests], stderr: r.stderr };
  } finally {
    await api.close();
    await fx.cleanup();
  }
}

const tally = (requests: readonly RecordedRequest[]): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const r of requests) out[requestKind(r)] = (out[requestKind(r)] ?? 0) + 1;
  return out;
};
const bytes = (requests: readonly RecordedRequest[]): number => requests.reduce((a, r) => a + r.bytes, 0);

describe('what an audit costs the API server', () => {
  it(`a healthy node with ${K} volumes: 3k + 3 requests, by name, the same in a cluster of 20 nodes and of 400`, async () => {
    const small = await audit(20, 'healthy');
    const large = await audit(400, 'healthy');
    for (const a of [small, large]) {
      assert.equal(a.status, 0, a.stderr);
      assert.deepEqual(a.findings, []);
      assert.deepEqual(tally(a.requests), {
        'GET nodes': 1,
        'LIST pods': 1,
        'GET persistentvolumeclaims': K,
        'GET persistentvolumes': K,
        'GET csidrivers': 1,
        'GET volumeattachments': K,
      });
    }
    assert.equal(large.requests.length, 3 * K + 3);
    assert.equal(bytes(large.requests), bytes(small.requests), 'the same answers, whatever the size of the cluster');
  });

  it('story 1 (a drained pod\'s volume still staged and attached here): at-risk, still by name only, the same at both sizes', async () => {
    const small = await audit(20, 'at-risk');
    const large = await audit(400, 'at-risk');
    for (const a of [small, large]) {
      assert.equal(a.status, 1, a.stderr);
      assert.deepEqual(a.findings, [`at-risk kubernetes.io/csi/ebs.csi.example.com^vol-1-${K}`]);
      // Its pod is gone, so its claim is not read; its PV is, through its VolumeAttachment.
      assert.deepEqual(tally(a.requests), {
        'GET nodes': 1,
        'LIST pods': 1,
        'GET persistentvolumeclaims': K - 1,
        'GET persistentvolumes': K,
        'GET csidrivers': 1,
        'GET volumeattachments': K,
      });
    }
    assert.equal(bytes(large.requests), bytes(small.requests));
  });

  it('a volume detached here and attached to another node: the cluster-wide lists are read, and the findings are those of the whole view', async () => {
    const fromApi = await audit(400, 'attached-elsewhere');
    const fromFile = await audit(400, 'attached-elsewhere', 'file');
    assert.equal(fromApi.status, 1, fromApi.stderr);
    assert.deepEqual(fromApi.findings, [`attached-elsewhere kubernetes.io/csi/ebs.csi.example.com^vol-1-${K}`]);
    assert.deepEqual(fromApi.findings, fromFile.findings);
    const t = tally(fromApi.requests);
    // 400 × K objects of each kind, 500 a page.
    assert.equal(t['LIST persistentvolumes'], Math.ceil((400 * K) / 500));
    assert.equal(t['LIST volumeattachments'], Math.ceil((400 * K) / 500));
  });

  it('-v 2 logs the reads of the run, and why the lists were read when they were', async () => {
    const healthy = await audit(20, 'healthy', 'api', ['-v', '2']);
    const lines = (a: Audit): string[] => a.stderr.split('\n').filter((l) => l.includes('Read the cluster\'s view'));
    assert.equal(lines(healthy).length, 1, healthy.stderr);
    assert.match(lines(healthy)[0] ?? '', /"get volumeattachment":4/);
    assert.doesNotMatch(lines(healthy)[0] ?? '', /listedEveryVolumeAttachmentBecause/);
    const elsewhere = await audit(20, 'attached-elsewhere', 'api', ['-v', '2']);
    assert.match(lines(elsewhere)[0] ?? '', new RegExp(`listedEveryVolumeAttachmentBecause=".*\\^vol-1-${K}: no VolumeAttachment csi-[0-9a-f]{64}"`));
  });

  it('every state gives the findings the whole view gives (the same objects as a --cluster-state file)', async () => {
    for (const state of ['healthy', 'at-risk'] as const) {
      const fromApi = await audit(20, state);
      const fromFile = await audit(20, state, 'file');
      assert.deepEqual(fromApi.findings, fromFile.findings, state);
      assert.equal(fromApi.status, fromFile.status, state);
    }
  });

  it('every request it makes, in every state, is one its ClusterRole (deploy/base/rbac.yaml) grants', async () => {
    const made = new Set<string>();
    for (const state of ['healthy', 'at-risk', 'attached-elsewhere'] as const) {
      for (const r of (await audit(20, state)).requests) {
        const [verb = '', resource = ''] = requestKind(r).split(' ');
        made.add(`${resource}:${verb.toLowerCase()}`);
      }
    }
    const granted = new Set<string>();
    for (const doc of parseAllDocuments(await readFile(path.join(REPO_ROOT, 'deploy', 'base', 'rbac.yaml'), 'utf8'))) {
      const o = doc.toJS() as { kind?: string; rules?: { resources: string[]; verbs: string[] }[] };
      if (o.kind !== 'ClusterRole') continue;
      for (const rule of o.rules ?? []) for (const res of rule.resources) for (const verb of rule.verbs) granted.add(`${res}:${verb}`);
    }
    assert.deepEqual([...made].filter((m) => !granted.has(m)), [], `granted: ${[...granted].join(', ')}`);
    assert.deepEqual([...granted].filter((g) => !made.has(g)).sort(), [], 'a grant the audit never uses');
  });
});
