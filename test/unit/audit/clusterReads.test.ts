// The audit's reads of the API server (src/audit/clusterReads.ts), over an in-memory reader that
// records each call: what a node with staged volumes reads by name, when (and why) it lists the
// PVs and VolumeAttachments of the whole cluster, and that its findings are those of the whole
// view; and, asserted, the one case the reads by name do not look for.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseClusterList, type ClusterObjects } from '../../../src/api/clusterObjects.js';
import { clusterAudit } from '../../../src/audit/clusterFindings.js';
import { readClusterObjects, stagedVolumes, type ClusterReadRequest } from '../../../src/audit/clusterReads.js';
import { clusterStateFor } from '../../../src/audit/clusterState.js';
import { getAttachmentName } from '../../../src/layout/names.js';
import { reportOf, type StagedVolumeSpec } from '../../support/auditReports.js';
import { claim, csiDriver, list, node, persistentVolume, pod, volumeAttachment, type KubeObject } from '../../support/clusterObjects.js';
import { memoryClusterReader } from '../../support/memoryClusterReader.js';

const D = 'ebs.csi.example.com';
const NFS = 'nfs.csi.example.com';
const N = 'node-1';
const name = (handle: string, driver = D): string => `kubernetes.io/csi/${driver}^${handle}`;
const va = (handle: string, nodeName = N, driver = D): string => `getVolumeAttachment ${getAttachmentName(handle, driver, nodeName)}`;

function objectsOf(items: readonly KubeObject[]): ClusterObjects {
  return parseClusterList(JSON.stringify(list(items)), 'cluster.json');
}

/** A PV of `handle` with these access modes (the helper's default is ReadWriteOnce). */
function pvWith(pvName: string, handle: string, accessModes: readonly string[], driver = D): KubeObject {
  const pv = persistentVolume(pvName, driver, handle);
  return { ...pv, spec: { ...(pv['spec'] as Record<string, unknown>), accessModes } };
}

/** The view the audit had before it read by name: its node and pods, their claims, and every PV, VolumeAttachment and CSIDriver. */
function wholeView(o: ClusterObjects, nodeName = N): ClusterObjects {
  const pods = o.pods.filter((p) => p.spec.nodeName === nodeName);
  const claimKeys = new Set(pods.flatMap((p) => (p.spec.volumes ?? []).flatMap((v) => (v.persistentVolumeClaim ? [`${p.metadata.namespace}/${v.persistentVolumeClaim.claimName}`] : []))));
  return {
    nodes: o.nodes.filter((n) => n.metadata.name === nodeName),
    pods,
    claims: o.claims.filter((c) => claimKeys.has(`${c.metadata.namespace}/${c.metadata.name}`)),
    persistentVolumes: o.persistentVolumes,
    volumeAttachments: o.volumeAttachments,
    csiDrivers: o.csiDrivers,
  };
}

async function read(items: readonly KubeObject[], staged: readonly StagedVolumeSpec[], more: Partial<ClusterReadRequest> = {}) {
  const objects = objectsOf(items);
  const reader = memoryClusterReader(objects);
  const report = reportOf(staged);
  const result = await readClusterObjects(reader, { nodeName: N, staged: stagedVolumes(report), ...more });
  const findings = clusterAudit(report, clusterStateFor(result.objects, N, 'src'));
  const whole = clusterAudit(report, clusterStateFor(wholeView(objects), N, 'src'));
  return { result, calls: reader.calls, findings, whole };
}

/** Node 1 running pods app-<h> on claims c-<h> bound to pv-<h>, each attached here (VolumeAttachment, volumesAttached) and in use. */
function healthy(handles: readonly string[]): KubeObject[] {
  return [
    node(N, { volumesInUse: handles.map((h) => name(h)), volumesAttached: handles.map((h) => name(h)) }),
    node('node-2'),
    csiDriver(D),
    ...handles.flatMap((h) => [
      pod(`app-${h}`, { nodeName: N, claims: [`c-${h}`], uid: `uid-${h}` }),
      claim(`c-${h}`, `pv-${h}`),
      persistentVolume(`pv-${h}`, D, h, { namespace: 'default', name: `c-${h}` }),
      volumeAttachment(D, h, `pv-${h}`, N),
    ]),
  ];
}

describe('the audit\'s reads of the API server', () => {
  it('a healthy node reads its node, its pods, and by name its claims, their PVs, the CSIDriver and its VolumeAttachments; no list', async () => {
    const { result, calls, findings, whole } = await read(healthy(['a', 'b']), [
      { driver: D, handle: 'a', pods: ['uid-a'] },
      { driver: D, handle: 'b', pods: ['uid-b'] },
    ]);
    assert.deepEqual(calls, [
      `getNode ${N}`,
      `listPodsOnNode ${N}`,
      'getPersistentVolumeClaim default/c-a',
      'getPersistentVolumeClaim default/c-b',
      'getPersistentVolume pv-a',
      'getPersistentVolume pv-b',
      `getCSIDriver ${D}`,
      va('a'),
      va('b'),
    ]);
    assert.equal(result.listedBecause, undefined);
    assert.deepEqual(result.reads, { 'get node': 1, 'list pods': 1, 'get persistentvolumeclaim': 2, 'get persistentvolume': 2, 'get csidriver': 1, 'get volumeattachment': 2 });
    assert.deepEqual(findings, whole);
    assert.deepEqual(findings.findings, []);
  });

  it('story 1 (a drained pod\'s volume, still attached here, out of volumesInUse): at-risk by name, naming its VolumeAttachment, no list', async () => {
    const items = healthy(['a', 'b']).filter((o) => !(o.kind === 'Pod' && o.metadata['name'] === 'app-b'));
    items[0] = node(N, { volumesInUse: [name('a')], volumesAttached: [name('a'), name('b')] });
    const { result, calls, findings, whole } = await read(items, [
      { driver: D, handle: 'a', pods: ['uid-a'] },
      { driver: D, handle: 'b', verdict: 'orphaned' },
    ]);
    assert.equal(result.listedBecause, undefined);
    assert.ok(calls.includes('getPersistentVolume pv-b'), 'the PV its VolumeAttachment names, which resolves its handle');
    assert.deepEqual(findings, whole);
    assert.deepEqual(findings.findings.map((f) => [f.kind, f.uniqueName]), [['at-risk', name('b')]]);
    assert.match(findings.findings[0]?.reason ?? '', new RegExp(`VolumeAttachment ${getAttachmentName('b', D, N)}`));
  });

  it('a volume with no VolumeAttachment here lists every VolumeAttachment and PV, and finds it attached elsewhere', async () => {
    const items = healthy(['a', 'b']).filter((o) => !(o.kind === 'VolumeAttachment' && (o['spec'] as { nodeName: string; source: { persistentVolumeName: string } }).source.persistentVolumeName === 'pv-b'));
    items.push(volumeAttachment(D, 'b', 'pv-b', 'node-2'));
    const { result, calls, findings, whole } = await read(items, [
      { driver: D, handle: 'a', pods: ['uid-a'] },
      { driver: D, handle: 'b', verdict: 'orphaned' },
    ]);
    assert.equal(result.listedBecause, `${name('b')}: no VolumeAttachment ${getAttachmentName('b', D, N)}`);
    assert.deepEqual(calls.filter((c) => c.startsWith('list')), [`listPodsOnNode ${N}`, 'listVolumeAttachments', 'listPersistentVolumes']);
    assert.deepEqual(findings, whole);
    assert.ok(findings.findings.some((f) => f.kind === 'attached-elsewhere' && f.uniqueName === name('b') && f.nodes?.join() === 'node-2'));
  });

  it('a VolumeAttachment here that does not say attached, a PV that allows several nodes or names no access mode: listed, with the reason', async () => {
    for (const [what, change, why] of [
      ['not attached', (items: KubeObject[]) => items.map((o) => (o.kind === 'VolumeAttachment' ? { ...o, status: { attached: false } } : o)), /VolumeAttachment csi-[0-9a-f]+ does not say attached to node-1/],
      ['ReadWriteMany', (items: KubeObject[]) => items.map((o) => (o.kind === 'PersistentVolume' ? pvWith('pv-a', 'a', ['ReadWriteMany']) : o)), /PersistentVolume pv-a may be attached to several nodes \(access modes ReadWriteMany\)/],
      ['ReadOnlyMany beside ReadWriteOnce', (items: KubeObject[]) => items.map((o) => (o.kind === 'PersistentVolume' ? pvWith('pv-a', 'a', ['ReadWriteOnce', 'ReadOnlyMany']) : o)), /access modes ReadWriteOnce, ReadOnlyMany/],
      ['no access mode', (items: KubeObject[]) => items.map((o) => (o.kind === 'PersistentVolume' ? pvWith('pv-a', 'a', []) : o)), /access modes none/],
      ['a PV of another volume', (items: KubeObject[]) => items.map((o) => (o.kind === 'PersistentVolume' ? persistentVolume('pv-a', D, 'other') : o)), /PersistentVolume pv-a names another volume/],
      ['a PV that is gone', (items: KubeObject[]) => items.filter((o) => o.kind !== 'PersistentVolume'), /names no PersistentVolume that exists/],
    ] as const) {
      const { result, calls, findings, whole } = await read(change(healthy(['a'])), [{ driver: D, handle: 'a', pods: ['uid-a'] }]);
      assert.match(result.listedBecause ?? '(not listed)', why, what);
      assert.ok(calls.includes('listVolumeAttachments'), what);
      assert.deepEqual(findings, whole, what);
    }
  });

  it('a ReadWriteOncePod PV attached here is single-attach: no list', async () => {
    const items = healthy(['a']).map((o) => (o.kind === 'PersistentVolume' ? pvWith('pv-a', 'a', ['ReadWriteOncePod']) : o));
    const { result } = await read(items, [{ driver: D, handle: 'a', pods: ['uid-a'] }]);
    assert.equal(result.listedBecause, undefined);
  });

  it('a driver whose CSIDriver says attachRequired: false: no VolumeAttachment read for a volume in use, one for a volume out of it (at-risk), no list', async () => {
    const items: KubeObject[] = [
      node(N, { volumesInUse: [name('n1', NFS)] }),
      csiDriver(NFS, false),
      pod('web', { nodeName: N, claims: ['c-n1'], uid: 'uid-web' }),
      claim('c-n1', 'pv-n1'),
      persistentVolume('pv-n1', NFS, 'n1', { namespace: 'default', name: 'c-n1' }),
    ];
    const { result, calls, findings, whole } = await read(items, [
      { driver: NFS, handle: 'n1', pods: ['uid-web'] },
      { driver: NFS, handle: 'n2', verdict: 'orphaned' },
    ]);
    assert.equal(result.listedBecause, undefined);
    assert.deepEqual(calls.filter((c) => c.startsWith('getVolumeAttachment')), [va('n2', N, NFS)]);
    assert.deepEqual(findings, whole);
  });

  it('a driver without a CSIDriver object attaches (kubelet\'s default): its VolumeAttachments are read', async () => {
    const items = healthy(['a']).filter((o) => o.kind !== 'CSIDriver');
    const { result, calls } = await read(items, [{ driver: D, handle: 'a', pods: ['uid-a'] }]);
    assert.ok(calls.includes(va('a')));
    assert.equal(result.listedBecause, undefined);
  });

  it('each object is read once: a PV both a claim and a VolumeAttachment name, a volume staged twice, a driver of several volumes', async () => {
    const { calls } = await read(healthy(['a', 'b']), [
      { driver: D, handle: 'a', pods: ['uid-a'] },
      { driver: D, handle: 'a', pods: ['uid-a'] },
      { driver: D, handle: 'b', pods: ['uid-b'] },
    ]);
    assert.equal(new Set(calls).size, calls.length, calls.join('\n'));
  });

  it('recover (everyPersistentVolume): the PVs are listed once and never read by name, also when the VolumeAttachments are listed', async () => {
    const items = healthy(['a', 'b']).filter((o) => !(o.kind === 'VolumeAttachment' && (o['spec'] as { source: { persistentVolumeName: string } }).source.persistentVolumeName === 'pv-b'));
    const { result, calls } = await read(items, [{ driver: D, handle: 'a', pods: ['uid-a'] }, { driver: D, handle: 'b', verdict: 'orphaned' }], { everyPersistentVolume: true });
    assert.deepEqual(calls.filter((c) => c.includes('PersistentVolume ') || c === 'listPersistentVolumes'), ['listPersistentVolumes']);
    assert.equal(result.objects.persistentVolumes.length, 2);
    assert.ok(calls.includes('listVolumeAttachments'));
  });

  it('a node with no staged volume reads no CSIDriver and no VolumeAttachment', async () => {
    const { calls } = await read(healthy(['a']), []);
    assert.deepEqual(calls, [`getNode ${N}`, `listPodsOnNode ${N}`, 'getPersistentVolumeClaim default/c-a', 'getPersistentVolume pv-a']);
  });

  it('not looked for (docs/operating.md): a second attachment the controller\'s rule forbids, made beside an attached ReadWriteOnce VolumeAttachment here', async () => {
    // An RWO volume attached here AND to node-2: the attach/detach controller never does this
    // (it attaches an RWO volume to a second node only once it is detached here); the whole view
    // sees it, the reads by name do not.
    const items = [...healthy(['a']), volumeAttachment(D, 'a', 'pv-a', 'node-2')];
    const { result, findings, whole } = await read(items, [{ driver: D, handle: 'a', pods: ['uid-a'] }]);
    assert.equal(result.listedBecause, undefined);
    assert.deepEqual(whole.findings.map((f) => f.kind), ['attached-elsewhere']);
    assert.deepEqual(findings.findings, []);
  });
});
