// The audit against the cluster's view: parsing kubectl's List JSON (errors name the item and
// the field), and the findings at-risk, attached-elsewhere and pod-gone, each with its reason.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { runAudit } from '../../../src/audit/audit.js';
import { clusterAudit, type ClusterAudit } from '../../../src/audit/clusterFindings.js';
import { ClusterStateError, parseClusterList } from '../../../src/api/clusterObjects.js';
import { clusterStateFor, wantedVolumes, type ClusterState } from '../../../src/audit/clusterState.js';
import { claim, csiDriver, list, node, persistentVolume, pod, typedList, volumeAttachment, type KubeObject } from '../../support/clusterObjects.js';
import { auditInput } from '../../support/hosts.js';
import { NodeFixture } from '../../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';
const NAME = (handle: string): string => `kubernetes.io/csi/${DRIVER}^${handle}`;

function state(items: readonly KubeObject[], nodeName = 'node-1'): ClusterState {
  return clusterStateFor(parseClusterList(JSON.stringify(list(items)), 'cluster.json'), nodeName, 'cluster.json');
}

describe('cluster state: parsing kubectl get -o json', () => {
  it('reduces a List of the six kinds to this node, ignoring other kinds and other nodes\' pods', () => {
    const s = state([
      node('node-1', { volumesInUse: [NAME('vol-2')], volumesAttached: [NAME('vol-1'), NAME('vol-2')] }),
      node('node-2'),
      pod('app', { nodeName: 'node-1', claims: ['data'] }),
      pod('other', { nodeName: 'node-2', claims: ['data'] }),
      persistentVolume('pv-1', DRIVER, 'vol-1', { namespace: 'default', name: 'data' }),
      claim('data', 'pv-1'),
      volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-1'),
      csiDriver(DRIVER),
      { kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'x' } },
    ]);
    assert.equal(s.nodeName, 'node-1');
    assert.deepEqual(s.volumesInUse, [NAME('vol-2')]);
    assert.deepEqual(s.volumesAttached, [NAME('vol-1'), NAME('vol-2')]);
    assert.deepEqual(s.pods.map((p) => `${p.namespace}/${p.name}`), ['default/app']);
    assert.ok(s.podUIDs.has('uid-default-other'), 'every pod UID is known, whatever its node');
    assert.equal(s.claims.get('default/data'), 'pv-1');
    assert.deepEqual(s.volumeAttachments.map((va) => [va.nodeName, va.driver, va.volumeHandle, va.attached]), [['node-1', DRIVER, 'vol-1', true]]);
    assert.equal(s.csiDrivers.get(DRIVER), true);
    assert.deepEqual([...wantedVolumes(s).byVolume], [[NAME('vol-1'), [{ uid: 'uid-default-app', namespace: 'default', name: 'app' }]]]);
  });

  it('accepts a typed list (kubectl get pods -o json prints a List; the API server a PodList)', () => {
    const objects = parseClusterList(JSON.stringify(typedList('NodeList', 'v1', [Object.fromEntries(Object.entries(node('node-1')).filter(([k]) => k !== 'kind')) as KubeObject])), 'nodes.json');
    assert.equal(objects.nodes.length, 1);
  });

  const bad: [string, unknown, RegExp][] = [
    ['not JSON', '{', /^cluster\.json: not JSON/],
    ['not a List', { kind: 'Pod', apiVersion: 'v1', metadata: { name: 'x' } }, /^cluster\.json\.kind: want List/],
    ['a pod without a uid', list([{ kind: 'Pod', apiVersion: 'v1', metadata: { name: 'p', namespace: 'default' }, spec: {} }]), /^cluster\.json: items\[0\]\.metadata\.uid: Required/],
    ['a node whose volumesInUse is not a list', list([{ kind: 'Node', apiVersion: 'v1', metadata: { name: 'n' }, status: { volumesInUse: 'x' } }]), /^cluster\.json: items\[0\]\.status\.volumesInUse: Expected array/],
    ['a VolumeAttachment without an attacher', list([{ kind: 'VolumeAttachment', apiVersion: 'storage.k8s.io/v1', metadata: { name: 'va' }, spec: { nodeName: 'n', source: {} } }]), /items\[0\]\.spec\.attacher: Required/],
  ];
  for (const [what, value, want] of bad) {
    it(`rejects ${what} with an error naming the item and the field`, () => {
      assert.throws(
        () => parseClusterList(typeof value === 'string' ? value : JSON.stringify(value), 'cluster.json'),
        (err: unknown) => err instanceof ClusterStateError && want.test(err.message),
      );
    });
  }

  it('a node missing from the state is an error naming it (no verdict without its status)', () => {
    assert.throws(() => state([node('node-2')], 'node-1'), /node "node-1" not found \(nodes there: node-2\); set --node-name/);
  });

  it('a claim that is missing or unbound makes the pod\'s wants unresolved', () => {
    const s = state([node('node-1'), pod('app', { nodeName: 'node-1', claims: ['gone', 'pending'] }), claim('pending', '')]);
    assert.deepEqual(wantedVolumes(s).unresolved.map((u) => [u.claim, u.why]), [['default/gone', 'claim not found'], ['default/pending', 'claim not bound']]);
  });

  it('a terminated pod wants nothing', () => {
    const s = state([node('node-1'), pod('done', { nodeName: 'node-1', claims: ['data'], phase: 'Succeeded' }), claim('data', 'pv-1'), persistentVolume('pv-1', DRIVER, 'vol-1')]);
    assert.equal(wantedVolumes(s).byVolume.size, 0);
  });
});

describe('audit against the cluster: findings', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  async function findings(items: readonly KubeObject[], gateOn = false): Promise<ClusterAudit> {
    const report = await runAudit(auditInput(fx, { gateOn }));
    return clusterAudit(report, state(items));
  }

  it('at-risk: staged, in volumesAttached, not in volumesInUse (story 1 after the kubelet restart)', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const c = await findings([node('node-1', { volumesAttached: [NAME('vol-1')], volumesInUse: [] }), persistentVolume('pv-1', DRIVER, 'vol-1')]);
    assert.deepEqual(c.findings.map((f) => [f.kind, f.uniqueName, f.driver]), [['at-risk', NAME('vol-1'), DRIVER]]);
    assert.match(c.findings[0]!.reason, /attached to node-1 \(node\.status\.volumesAttached\) but absent from node\.status\.volumesInUse: the attach\/detach controller may detach it now; kubelet will never add it back \(verdict orphaned\)/);
  });

  it('at-risk through a VolumeAttachment to this node alone', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const va = volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-1');
    const c = await findings([node('node-1'), persistentVolume('pv-1', DRIVER, 'vol-1'), va]);
    assert.deepEqual(c.findings.map((f) => f.kind), ['at-risk']);
    assert.ok(c.findings[0]!.reason.includes(`VolumeAttachment ${String(va.metadata['name'])}`), c.findings[0]!.reason);
  });

  it('not at-risk while it is in volumesInUse, nor when nothing says it is attached', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await fx.stage({ driver: DRIVER, handle: 'vol-2', specVolID: 'pv-2' });
    const c = await findings([node('node-1', { volumesAttached: [NAME('vol-1')], volumesInUse: [NAME('vol-1')] }), persistentVolume('pv-1', DRIVER, 'vol-1'), persistentVolume('pv-2', DRIVER, 'vol-2')]);
    assert.deepEqual(c.findings, []);
  });

  it('not at-risk: a VolumeAttachment that is not attached yet, or of another driver', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const c = await findings([
      node('node-1'),
      persistentVolume('pv-1', DRIVER, 'vol-1'),
      volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-1', false),
      { ...volumeAttachment('other.csi', 'vol-1', 'pv-1', 'node-1'), spec: { attacher: 'other.csi', nodeName: 'node-1', source: { persistentVolumeName: 'pv-1' } } },
    ]);
    assert.deepEqual(c.findings, []);
  });

  for (const gateOn of [false, true]) {
    it(`attached-elsewhere: staged here while a VolumeAttachment says attached to node-2 (gate ${gateOn ? 'on' : 'off'})`, async () => {
      await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
      const c = await findings([node('node-1'), node('node-2'), persistentVolume('pv-1', DRIVER, 'vol-1'), volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-2')], gateOn);
      assert.deepEqual(c.findings.map((f) => [f.kind, f.uniqueName, f.nodes]), [['attached-elsewhere', NAME('vol-1'), ['node-2']]]);
      assert.match(c.findings[0]!.reason, /staged here at .*globalmount while VolumeAttachment csi-[0-9a-f]{64} says it is attached to node-2: two nodes may write to one device/);
    });
  }

  it('pod-gone: a pod volume dir whose pod UID the cluster does not know; a live pod gets its namespace/name', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await fx.podVolume({ uid: 'uid-default-app', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm });
    await fx.podVolume({ uid: 'gone-uid', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm });
    await fx.podVolume({ uid: 'gone-2', specName: 'pv-9', driver: DRIVER, file: { raw: '' } }); // fails reconstruction: still a dir of a gone pod
    const c = await findings([
      node('node-1', { volumesInUse: [NAME('vol-1')], volumesAttached: [NAME('vol-1')] }),
      pod('app', { nodeName: 'node-1', claims: ['data'] }),
      claim('data', 'pv-1'),
      persistentVolume('pv-1', DRIVER, 'vol-1'),
    ]);
    assert.deepEqual(c.findings.map((f) => [f.kind, f.podUID, f.path]).sort(), [
      ['pod-gone', 'gone-2', fx.layout.csiPodVolumeDir('gone-2', 'pv-9')],
      ['pod-gone', 'gone-uid', fx.layout.csiPodVolumeDir('gone-uid', 'pv-1')],
    ]);
    assert.match(c.findings.find((f) => f.podUID === 'gone-uid')!.reason, /pod gone-uid no longer exists in the cluster but its volume directory .* is still on this node/);
    assert.deepEqual(c.pods['uid-default-app'], { namespace: 'default', name: 'app' });
    assert.deepEqual(c.wantedBy[NAME('vol-1')], [{ uid: 'uid-default-app', namespace: 'default', name: 'app' }]);
  });
});
