// `nodevol audit` against the cluster as a process: from a `--cluster-state` file (kubectl's
// List JSON) and from an API server (an in-test HTTP server on 127.0.0.1 answering real
// Kubernetes JSON), with -o table|wide|json|yaml and --no-headers.
// API errors are one line and exit 2, never a verdict.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import type { IncomingMessage, Server } from 'node:http';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { getAttachmentName } from '../../src/layout/names.js';
import { claim, csiDriver, list, node, persistentVolume, pod, volumeAttachment, type KubeObject } from '../support/clusterObjects.js';
import { fakeApiServer, writeKubeconfig, type FakeApiServerOptions } from '../support/fakeApiServer.js';
import { NodeFixture } from '../support/nodeFixture.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');
const DRIVER = 'ebs.csi.example.com';
const NAME = (handle: string): string => `kubernetes.io/csi/${DRIVER}^${handle}`;

interface Run {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

const apiServer = (objects: readonly KubeObject[], fail?: FakeApiServerOptions['fail']): ReturnType<typeof fakeApiServer> => fakeApiServer(objects, fail !== undefined ? { fail } : {});

/** Runs the CLI without blocking this process (the API server under test lives here). */
function nodevol(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const base: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete base['KUBERNETES_SERVICE_HOST'];
  if (env['NODE_NAME'] === undefined) delete base['NODE_NAME'];
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: base, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
      resolve({ status: code, stdout, stderr });
    });
  });
}

/** The cluster of story 1 after the kubelet restart: attached to node-1, no longer in volumesInUse; pod app on node-1 uses vol-2. */
function story1Cluster(): KubeObject[] {
  return [
    node('node-1', { volumesAttached: [NAME('vol-1'), NAME('vol-2')], volumesInUse: [NAME('vol-2')] }),
    pod('app', { nodeName: 'node-1', claims: ['data-2'], uid: 'uid-app' }),
    persistentVolume('pv-1', DRIVER, 'vol-1'),
    persistentVolume('pv-2', DRIVER, 'vol-2', { namespace: 'default', name: 'data-2' }),
    claim('data-2', 'pv-2'),
    volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-1'),
    volumeAttachment(DRIVER, 'vol-2', 'pv-2', 'node-1'),
    csiDriver(DRIVER),
  ];
}

interface JsonReport {
  readonly volumes: { readonly uniqueName: string; readonly verdict: string; readonly pods: { uid: string }[] }[];
  readonly cluster?: {
    readonly nodeName: string;
    readonly source: string;
    readonly findings: { kind: string; uniqueName?: string; reason: string }[];
    readonly pods: Record<string, { namespace: string; name: string }>;
    readonly wantedBy: Record<string, { namespace: string; name: string }[]>;
  };
}

describe('nodevol audit against the cluster (process)', () => {
  let fx: NodeFixture;
  let mountinfo: string;
  let clusterFile: string;
  let server: Server | undefined;
  beforeEach(async () => {
    fx = await NodeFixture.create();
    // vol-1: story 1 (staged, no pod dir). vol-2: tracked, published to pod app.
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const gm2 = await fx.stage({ driver: DRIVER, handle: 'vol-2', specVolID: 'pv-2' });
    await fx.podVolume({ uid: 'uid-app', specName: 'pv-2', driver: DRIVER, handle: 'vol-2', boundFrom: gm2 });
    mountinfo = await fx.writeMountInfo();
    clusterFile = path.join(fx.base, 'cluster.json');
    await writeFile(clusterFile, JSON.stringify(list(story1Cluster())));
  });
  afterEach(async () => {
    server?.close();
    server = undefined;
    await fx.cleanup();
  });
  const audit = (...extra: string[]): Promise<Run> => nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, ...extra]);

  it('--cluster-state: story 1 is at-risk (exit 1); -o json has the cluster section with the reason', async () => {
    const r = await audit('--cluster-state', clusterFile, '--node-name', 'node-1', '-o', 'json');
    assert.equal(r.status, 1, r.stderr);
    const report = JSON.parse(r.stdout) as JsonReport;
    assert.equal(report.cluster?.nodeName, 'node-1');
    assert.equal(report.cluster.source, clusterFile);
    assert.deepEqual(report.cluster.findings.map((f) => [f.kind, f.uniqueName]), [['at-risk', NAME('vol-1')]]);
    assert.match(report.cluster.findings[0]!.reason, /absent from node\.status\.volumesInUse: the attach\/detach controller may detach it now/);
    assert.deepEqual(report.cluster.pods['uid-app'], { namespace: 'default', name: 'app' });
    assert.deepEqual(report.cluster.wantedBy[NAME('vol-2')], [{ uid: 'uid-app', namespace: 'default', name: 'app' }]);
  });

  it('-o table names pods namespace/name and adds a CLUSTER column; -o wide adds the REASON column', async () => {
    const t = await audit('--cluster-state', clusterFile, '--node-name', 'node-1');
    assert.equal(t.status, 1, t.stderr);
    const [header, ...rows] = t.stdout.split('\n');
    assert.match(header!, /^VERDICT +WITH-GATE +DRIVER +VOLUME +MODE +PODS +GLOBAL-MOUNT +CLUSTER$/);
    assert.match(rows[0]!, /^orphaned +recovered +ebs\.csi\.example\.com +vol-1 +Filesystem +<none> +mounted +at-risk$/);
    assert.match(rows[1]!, /^tracked +tracked +ebs\.csi\.example\.com +vol-2 +Filesystem +default\/app +mounted +in-use$/);
    assert.match(t.stdout, /\nCLUSTER FINDINGS \(node node-1, from .*cluster\.json\)\n {2}at-risk: kubernetes\.io\/csi\/ebs\.csi\.example\.com\^vol-1: staged at /);
    assert.match(t.stdout, /; cluster: 1 at-risk, 0 attached-elsewhere, 0 pod-gone\n$/);

    const w = await audit('--cluster-state', clusterFile, '--node-name', 'node-1', '-o', 'wide');
    const [wHeader, wRow] = w.stdout.split('\n');
    assert.match(wHeader!, / +CLUSTER +REASON$/);
    assert.match(wRow!, /at-risk +staged at .* but no pod directory names it: kubelet never reconstructs it.*; staged at .* absent from node\.status\.volumesInUse/);
  });

  it('--no-headers prints the rows only; -o yaml is the JSON report as YAML', async () => {
    const n = await audit('--cluster-state', clusterFile, '--node-name', 'node-1', '--no-headers');
    const lines = n.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 2, n.stdout);
    assert.match(lines[0]!, /^orphaned /);
    const j = await audit('--cluster-state', clusterFile, '--node-name', 'node-1', '-o', 'json');
    const y = await audit('--cluster-state', clusterFile, '--node-name', 'node-1', '-o', 'yaml');
    assert.equal(y.status, 1);
    const fromYaml = parseYaml(y.stdout) as Record<string, unknown>;
    const fromJson = JSON.parse(j.stdout) as Record<string, unknown>;
    delete fromYaml['timestamp'];
    delete fromJson['timestamp'];
    assert.deepEqual(fromYaml, fromJson);
  });

  it('--node-name defaults to $NODE_NAME', async () => {
    const r = await nodevol(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '--cluster-state', clusterFile, '-o', 'json'], { NODE_NAME: 'node-1' });
    assert.equal(r.status, 1, r.stderr);
    assert.equal((JSON.parse(r.stdout) as JsonReport).cluster?.nodeName, 'node-1');
  });

  it('a cluster state that does not parse, or lacks the node, is one line and exit 2 with nothing on stdout', async () => {
    await writeFile(path.join(fx.base, 'bad.json'), JSON.stringify(list([{ kind: 'Pod', apiVersion: 'v1', metadata: { name: 'p', namespace: 'default' }, spec: {} }])));
    for (const [file, node_, want] of [
      [path.join(fx.base, 'bad.json'), 'node-1', /items\[0\]\.metadata\.uid: Required/],
      [clusterFile, 'node-9', /node "node-9" not found/],
      [path.join(fx.base, 'missing.json'), 'node-1', /missing\.json: .*ENOENT/],
    ] as const) {
      const r = await audit('--cluster-state', file, '--node-name', node_);
      assert.equal(r.status, 2, r.stderr);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, want);
    }
  });

  it('--cluster-state with --kubeconfig is an error (exit 2)', async () => {
    const r = await audit('--cluster-state', clusterFile, '--kubeconfig', clusterFile, '--node-name', 'node-1');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /exclusive/);
  });

  it('--kubeconfig: the same findings from an API server, read with GET only, pods by field selector, the rest by name', async () => {
    const api = await apiServer(story1Cluster());
    server = api.server;
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1', '-o', 'json');
    assert.equal(r.status, 1, r.stderr);
    const report = JSON.parse(r.stdout) as JsonReport;
    assert.equal(report.cluster?.source, api.url);
    assert.deepEqual(report.cluster.findings.map((f) => [f.kind, f.uniqueName]), [['at-risk', NAME('vol-1')]]);
    assert.deepEqual(report.cluster.pods['uid-app'], { namespace: 'default', name: 'app' });
    assert.ok(api.requests.every((q) => q.method === 'GET'), JSON.stringify(api.requests));
    assert.ok(api.requests.every((q) => q.authorization === 'Bearer test-token'));
    // Both volumes are attached here (their VolumeAttachments, by name) and ReadWriteOnce: no list
    // of PVs or VolumeAttachments, whatever the size of the cluster.
    assert.deepEqual(api.requests.map((q) => q.path).sort(), [
      '/api/v1/namespaces/default/persistentvolumeclaims/data-2',
      '/api/v1/nodes/node-1',
      '/api/v1/persistentvolumes/pv-1',
      '/api/v1/persistentvolumes/pv-2',
      '/api/v1/pods',
      `/apis/storage.k8s.io/v1/csidrivers/${DRIVER}`,
      `/apis/storage.k8s.io/v1/volumeattachments/${getAttachmentName('vol-1', DRIVER, 'node-1')}`,
      `/apis/storage.k8s.io/v1/volumeattachments/${getAttachmentName('vol-2', DRIVER, 'node-1')}`,
    ].sort());
    assert.equal(api.requests.find((q) => q.path === '/api/v1/pods')?.query['fieldSelector'], 'spec.nodeName=node-1');
  });

  it('--kubeconfig: attached-elsewhere from a VolumeAttachment to another node', async () => {
    const objects = [...story1Cluster().filter((o) => !(o.kind === 'VolumeAttachment' && (o['spec'] as { source: { persistentVolumeName: string } }).source.persistentVolumeName === 'pv-1')), node('node-2'), volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-2')];
    const api = await apiServer(objects);
    server = api.server;
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1', '-o', 'json');
    const report = JSON.parse(r.stdout) as JsonReport;
    assert.deepEqual(report.cluster?.findings.map((f) => f.kind).sort(), ['at-risk', 'attached-elsewhere']);
    assert.equal(r.status, 1);
  });

  for (const [what, fail, want] of [
    ['403 on list pods (RBAC)', (req: IncomingMessage) => ((req.url ?? '').startsWith('/api/v1/pods') ? { code: 403, reason: 'Forbidden', message: 'pods is forbidden: User "system:serviceaccount:kube-system:nodevol" cannot list resource "pods" in API group "" at the cluster scope' } : undefined), /HTTP 403: pods is forbidden: User/],
    ['404 on the node', (req: IncomingMessage) => ((req.url ?? '').startsWith('/api/v1/nodes/') ? { code: 404, reason: 'NotFound', message: 'nodes "node-1" not found' } : undefined), /get node node-1: HTTP 404: nodes "node-1" not found/],
    ['500 on a volumeattachment', (req: IncomingMessage) => ((req.url ?? '').includes('volumeattachments') ? { code: 500, reason: 'InternalError', message: 'etcdserver: request timed out' } : undefined), /get volumeattachment csi-[0-9a-f]{64}: HTTP 500: etcdserver: request timed out/],
  ] as const) {
    it(`an API error (${what}) is one line on stderr and exit 2, never a verdict`, async () => {
      const api = await apiServer(story1Cluster(), fail);
      server = api.server;
      const kubeconfig = path.join(fx.base, 'kubeconfig');
      await writeKubeconfig(kubeconfig, api.url);
      for (const output of ['json', 'table']) {
        const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1', '-o', output);
        assert.equal(r.status, 2, r.stdout);
        assert.equal(r.stdout, '');
        assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
        assert.match(r.stderr, /^nodevol audit: cluster API: http:\/\/127\.0\.0\.1:\d+: /);
        assert.match(r.stderr, want);
      }
    });
  }

  it('--kubeconfig: every list is followed through its pages (metadata.continue): a pod on page 2 is a pod', async () => {
    // Every list one object per page: the pod app (the one that wants vol-2) is on page 2.
    const objects = [pod('other', { nodeName: 'node-1', uid: 'uid-other' }), ...story1Cluster()];
    const api = await fakeApiServer(objects, { pageSize: 1 });
    server = api.server;
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1', '-o', 'json');
    assert.equal(r.status, 1, r.stderr);
    const report = JSON.parse(r.stdout) as JsonReport;
    assert.deepEqual(report.cluster?.pods['uid-app'], { namespace: 'default', name: 'app' });
    assert.deepEqual(report.cluster.wantedBy[NAME('vol-2')], [{ uid: 'uid-app', namespace: 'default', name: 'app' }]);
    assert.deepEqual(report.cluster.findings.map((f) => [f.kind, f.uniqueName]), [['at-risk', NAME('vol-1')]]);
    const podPages = api.requests.filter((q) => q.path === '/api/v1/pods');
    assert.deepEqual(podPages.map((q) => [q.query['limit'], q.query['continue'], q.query['fieldSelector']]), [
      ['500', undefined, 'spec.nodeName=node-1'],
      ['500', '1', 'spec.nodeName=node-1'],
    ]);
  });

  it('--kubeconfig: the cluster-wide lists, when a staged volume has no VolumeAttachment here, are followed through their pages too', async () => {
    // vol-1 detached from node-1 and attached to node-2: its VolumeAttachment to node-2 is on the last page.
    const objects = [
      ...story1Cluster().filter((o) => !(o.kind === 'VolumeAttachment' && (o['spec'] as { source: { persistentVolumeName: string } }).source.persistentVolumeName === 'pv-1')),
      node('node-2'),
      volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-2'),
    ];
    const api = await fakeApiServer(objects, { pageSize: 1 });
    server = api.server;
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1', '-o', 'json');
    assert.equal(r.status, 1, r.stderr);
    const report = JSON.parse(r.stdout) as JsonReport;
    assert.deepEqual(report.cluster?.findings.map((f) => [f.kind, f.uniqueName]).sort(), [['at-risk', NAME('vol-1')], ['attached-elsewhere', NAME('vol-1')]]);
    assert.equal(api.requests.filter((q) => q.path === '/api/v1/persistentvolumes').length, 2, 'two PVs, one a page');
    assert.equal(api.requests.filter((q) => q.path === '/apis/storage.k8s.io/v1/volumeattachments').length, 2, 'two VolumeAttachments, one a page');
  });

  it('--kubeconfig: an expired continue token (410) reads the list again whole, once', async () => {
    const objects = [pod('other', { nodeName: 'node-1', uid: 'uid-other' }), ...story1Cluster()];
    const api = await fakeApiServer(objects, {
      pageSize: 1,
      fail: (req) => ((req.url ?? '').startsWith('/api/v1/pods?') && (req.url ?? '').includes('continue=') ? { code: 410, reason: 'Expired', message: 'The provided continue parameter is too old' } : undefined),
    });
    server = api.server;
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    // pageSize applies whatever the limit: the list read whole is again one page with a token,
    // which expires again: the second 410 is an error, not a loop.
    const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1', '-o', 'json');
    assert.equal(r.status, 2, r.stdout);
    assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /list pods \(fieldSelector spec\.nodeName=node-1\) \(page 2\): HTTP 410: The provided continue parameter is too old/);
    const podPages = api.requests.filter((q) => q.path === '/api/v1/pods').map((q) => [q.query['limit'], q.query['continue']]);
    assert.deepEqual(podPages, [['500', undefined], ['500', '1'], [undefined, undefined], [undefined, '1']]);
  });

  it('--kubeconfig: after an expired token, the list read whole in one answer is used', async () => {
    let expired = 0;
    const objects = [pod('other', { nodeName: 'node-1', uid: 'uid-other' }), ...story1Cluster()];
    const api = await fakeApiServer(objects, {
      // The first page (with a limit) holds nothing but a token, which has expired when used.
      answer: (req) => (/^\/api\/v1\/pods\?.*limit=/.test(req.url ?? '') && !(req.url ?? '').includes('continue=') ? { kind: 'PodList', apiVersion: 'v1', metadata: { continue: 'gone' }, items: [] } : undefined),
      fail: (req) => {
        if (!(req.url ?? '').includes('continue=gone')) return undefined;
        expired++;
        return { code: 410, reason: 'Expired', message: 'too old' };
      },
    });
    server = api.server;
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1', '-o', 'json');
    assert.equal(r.status, 1, r.stderr);
    assert.equal(expired, 1);
    const report = JSON.parse(r.stdout) as JsonReport;
    assert.deepEqual(report.cluster?.wantedBy[NAME('vol-2')], [{ uid: 'uid-app', namespace: 'default', name: 'app' }]);
    assert.deepEqual(api.requests.filter((q) => q.path === '/api/v1/pods').map((q) => [q.query['limit'], q.query['continue']]), [['500', undefined], ['500', 'gone'], [undefined, undefined]]);
  });

  for (const [what, body, want] of [
    ['without items', { kind: 'PodList', apiVersion: 'v1', metadata: {} }, /list pods \(fieldSelector spec\.nodeName=node-1\): PodList\.items: missing: not a list answer/],
    ['with items not an array', { kind: 'PodList', apiVersion: 'v1', metadata: {}, items: 'x' }, /list pods .*: PodList\.items: want an array/],
    ['that is an array', [], /list pods .*: PodList: want a list object, got an array/],
    ['that is null', null, /list pods .*: PodList: want a list object, got null/],
    ['whose last page still counts remaining items', { kind: 'PodList', apiVersion: 'v1', metadata: { remainingItemCount: 3 }, items: [] }, /PodList page 1\.metadata\.remainingItemCount: 3 objects remain but metadata\.continue is empty/],
    ['whose continue token repeats', { kind: 'PodList', apiVersion: 'v1', metadata: { continue: 'again' }, items: [] }, /PodList page 2\.metadata\.continue: the same token again/],
  ] as const) {
    it(`--kubeconfig: a list answer ${what} is one line naming the list and the field, exit 2`, async () => {
      const api = await fakeApiServer(story1Cluster(), { answer: (req) => ((req.url ?? '').startsWith('/api/v1/pods?') ? body : undefined) });
      server = api.server;
      const kubeconfig = path.join(fx.base, 'kubeconfig');
      await writeKubeconfig(kubeconfig, api.url);
      const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1');
      assert.equal(r.status, 2, r.stdout);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /^nodevol audit: cluster API: http:\/\/127\.0\.0\.1:\d+: /);
      assert.match(r.stderr, want);
    });
  }

  it('--kubeconfig: an object is checked as the server sent it (a string where a list belongs is not read as its characters)', async () => {
    const api = await fakeApiServer(story1Cluster(), {
      answer: (req) => ((req.url ?? '').startsWith('/api/v1/nodes/') ? { ...node('node-1'), status: { volumesInUse: NAME('vol-1') } } : undefined),
    });
    server = api.server;
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1');
    assert.equal(r.status, 2, r.stdout);
    assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /: node node-1\.status\.volumesInUse: Expected array, received string/);
  });

  it('--cluster-state: one page of a longer list (metadata.continue, remainingItemCount) is no answer: one line, exit 2', async () => {
    for (const [metadata, want] of [
      [{ continue: 'eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ' }, /cluster\.json\.metadata\.continue: set: this is one page of a longer list/],
      [{ remainingItemCount: 2 }, /cluster\.json\.metadata\.remainingItemCount: 2 more objects are on pages not read/],
    ] as const) {
      await writeFile(clusterFile, JSON.stringify({ ...list(story1Cluster()), metadata }));
      const r = await audit('--cluster-state', clusterFile, '--node-name', 'node-1');
      assert.equal(r.status, 2, r.stdout);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, want);
    }
    await writeFile(clusterFile, JSON.stringify({ kind: 'List', apiVersion: 'v1', metadata: {} }));
    const r = await audit('--cluster-state', clusterFile, '--node-name', 'node-1');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /cluster\.json\.items: Required/);
  });

  it('an API server that is not there is one line and exit 2', async () => {
    const api = await apiServer([]);
    const url = api.url;
    await new Promise<void>((resolve) => api.server.close(() => resolve()));
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, url);
    const r = await audit('--kubeconfig', kubeconfig, '--node-name', 'node-1');
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /cluster API: .*get node node-1: .*(ECONNREFUSED|connect)/);
  });

  it('a kubeconfig that cannot be read is one line and exit 2', async () => {
    const r = await audit('--kubeconfig', path.join(fx.base, 'nope'), '--node-name', 'node-1');
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /--kubeconfig .*nope: .*ENOENT/);
  });
});
