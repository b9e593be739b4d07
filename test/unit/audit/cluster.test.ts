// The audit against the cluster's view: parsing kubectl's List JSON (errors name the item and
// the field), and the findings at-risk, attached-elsewhere and pod-gone, each with its reason.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
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
    assert.deepEqual(s.claims.get('default/data'), { uid: 'uid-data', volumeName: 'pv-1', phase: 'Bound', deleting: false });
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

  it('a claim that is missing or unbound makes the pod\'s wants unresolved, with kubelet\'s reason', () => {
    const s = state([node('node-1'), pod('app', { nodeName: 'node-1', claims: ['gone', 'pending'] }), claim('pending', '')]);
    assert.deepEqual(wantedVolumes(s).unresolved.map((u) => [u.claim, u.why]), [
      ['default/gone', 'failed to fetch PVC from API server: persistentvolumeclaims "gone" not found'],
      ['default/pending', 'PVC is not bound'],
    ]);
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
      persistentVolume('pv-1', DRIVER, 'vol-1', { namespace: 'default', name: 'data' }),
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

// The audit's "wanted" follows kubelet's desired-state populator (processPodVolumes,
// createVolumeSpec): podVolumeRules.cluster.json is a kubectl List with a pod volume no container
// uses, a terminal pod, a pod being deleted, and claims kubelet refuses.
describe('cluster state: what a pod wants, by kubelet\'s populator rules', () => {
  const FIXTURE = path.resolve(import.meta.dirname, '..', '..', '..', '..', 'test', 'unit', 'audit', 'fixtures', 'podVolumeRules.cluster.json');
  const fixtureState = async (): Promise<ClusterState> => clusterStateFor(parseClusterList(await readFile(FIXTURE, 'utf8'), 'rules.json'), 'node-1', 'rules.json');

  it('reads each container list\'s volumeMounts / volumeDevices, the phase, deletionTimestamp, the claim\'s phase and deletion, claimRef.uid and volumeMode', async () => {
    const s = await fixtureState();
    const app = s.pods.find((p) => p.name === 'app');
    assert.deepEqual(app?.claims, [
      { volume: 'data', claimName: 'data', use: 'mount' },
      { volume: 'raw', claimName: 'raw', use: 'device' },
      { volume: 'spare', claimName: 'spare', use: 'unused' },
    ]);
    assert.deepEqual(
      s.pods.map((p) => [p.name, p.terminated, p.terminating]),
      [['app', false, false], ['done', true, false], ['leaving', false, true], ['refused', false, false]],
    );
    assert.deepEqual(s.claims.get('default/deleting'), { uid: 'uid-default-deleting', volumeName: 'pv-deleting', phase: 'Bound', deleting: true });
    assert.equal(s.claims.get('default/pending')?.phase, 'Pending');
    assert.deepEqual(s.persistentVolumes.get('pv-stolen'), { name: 'pv-stolen', driver: DRIVER, volumeHandle: 'vol-stolen', claimRefUid: 'uid-of-an-earlier-claim', volumeMode: 'Filesystem' });
    assert.equal(s.persistentVolumes.get('pv-raw')?.volumeMode, 'Block');
  });

  it('wants a mounted volume, a device (init container), and a terminating pod\'s volume; not an unused one, not a terminal pod\'s', async () => {
    const wanted = wantedVolumes(await fixtureState());
    assert.deepEqual([...wanted.byVolume.keys()].sort(), [NAME('vol-data'), NAME('vol-leaving'), NAME('vol-raw')]);
    assert.deepEqual(wanted.byVolume.get(NAME('vol-leaving'))?.map((p) => p.name), ['leaving']);
  });

  it('a claim being deleted, not Bound, bound by a PV of another claim uid, or of the wrong mode is unresolved with kubelet\'s text', async () => {
    const wanted = wantedVolumes(await fixtureState());
    assert.deepEqual(wanted.unresolved.map((u) => [u.pod.name, u.claim, u.why]), [
      ['refused', 'default/deleting', 'PVC is being deleted'],
      ['refused', 'default/pending', 'PVC is not bound'],
      ['refused', 'default/stolen', 'found PV object pv-stolen but its pv.Spec.ClaimRef.UID uid-of-an-earlier-claim does not point to claim.UID uid-default-stolen'],
      ['refused', 'default/wrong-mode', 'volume d has volumeMode Block, but is specified in volumeMounts'],
    ]);
  });

  it('a PV without claimRef, a block PV mounted and a filesystem PV used as a device: kubelet\'s texts', () => {
    const s = state([
      node('node-1'),
      pod('app', { nodeName: 'node-1', claims: ['a', 'b', 'c'], devices: [2] }),
      claim('a', 'pv-a'),
      persistentVolume('pv-a', DRIVER, 'vol-a'),
      claim('b', 'pv-b'),
      persistentVolume('pv-b', DRIVER, 'vol-b', { namespace: 'default', name: 'b' }, 'Block'),
      claim('c', 'pv-c'),
      persistentVolume('pv-c', DRIVER, 'vol-c', { namespace: 'default', name: 'c' }),
    ]);
    assert.deepEqual(wantedVolumes(s).unresolved.map((u) => u.why), [
      'found PV object pv-a but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim',
      'volume vol-1 has volumeMode Block, but is specified in volumeMounts',
      'volume vol-2 has volumeMode Filesystem, but is specified in volumeDevices',
    ]);
  });

  it('a pod without volumeMounts (an older file) wants none of its volumes and looks none of them up', () => {
    const bare = pod('old', { nodeName: 'node-1', claims: ['data', 'missing'] });
    const spec = { ...(bare['spec'] as Record<string, unknown>), containers: [{ name: 'app', image: 'busybox' }] };
    const s = state([node('node-1'), { ...bare, spec }, claim('data', 'pv-1'), persistentVolume('pv-1', DRIVER, 'vol-1', { namespace: 'default', name: 'data' })]);
    const wanted = wantedVolumes(s);
    assert.equal(wanted.byVolume.size, 0);
    assert.deepEqual(wanted.unresolved, [], 'an unused volume\'s claim is not looked up: a missing one is no unresolved want');
  });

  it('a claim marked unused in one pod and mounted in another is wanted by the other only', () => {
    const s = state([
      node('node-1'),
      pod('idle', { nodeName: 'node-1', claims: ['data'], unused: [0] }),
      pod('busy', { nodeName: 'node-1', claims: ['data'] }),
      claim('data', 'pv-1'),
      persistentVolume('pv-1', DRIVER, 'vol-1', { namespace: 'default', name: 'data' }),
    ]);
    assert.deepEqual(wantedVolumes(s).byVolume.get(NAME('vol-1'))?.map((p) => p.name), ['busy']);
  });

  const badFields: [string, (o: KubeObject) => KubeObject, RegExp][] = [
    ['a pod deletionTimestamp that is no RFC 3339 time', (o) => ({ ...o, metadata: { ...o.metadata, deletionTimestamp: 'yesterday' } }), /^rules\.json: items\[0\]\.metadata\.deletionTimestamp: want an RFC 3339 time/],
    ['an unknown pod phase', (o) => ({ ...o, status: { phase: 'Done' } }), /^rules\.json: items\[0\]\.status\.phase: Invalid enum value/],
    ['volumeMounts that are not a list', (o) => ({ ...o, spec: { ...(o['spec'] as Record<string, unknown>), containers: [{ name: 'app', volumeMounts: 'data' }] } }), /^rules\.json: items\[0\]\.spec\.containers\[0\]\.volumeMounts: Expected array/],
    ['an init container volumeDevices entry without a name', (o) => ({ ...o, spec: { ...(o['spec'] as Record<string, unknown>), initContainers: [{ name: 'i', volumeDevices: [{ devicePath: '/dev/x' }] }] } }), /^rules\.json: items\[0\]\.spec\.initContainers\[0\]\.volumeDevices\[0\]\.name: Required/],
  ];
  for (const [what, change, want] of badFields) {
    it(`rejects ${what}, naming the item and the field`, () => {
      const text = JSON.stringify(list([change(pod('app', { nodeName: 'node-1', claims: ['data'] }))]));
      assert.throws(() => parseClusterList(text, 'rules.json'), (err: unknown) => err instanceof ClusterStateError && want.test(err.message));
    });
  }

  const badClaimFields: [string, KubeObject, RegExp][] = [
    ['a PV claimRef uid that is not a string', { ...persistentVolume('pv', DRIVER, 'h'), spec: { claimRef: { name: 'c', uid: 7 } } }, /^rules\.json: items\[0\]\.spec\.claimRef\.uid: Expected string, received number/],
    ['a PV volumeMode that is neither Filesystem nor Block', { ...persistentVolume('pv', DRIVER, 'h'), spec: { volumeMode: 'Raw' } }, /^rules\.json: items\[0\]\.spec\.volumeMode: Invalid enum value/],
    ['a claim phase kubelet does not know', { ...claim('c', 'pv'), status: { phase: 'Ready' } }, /^rules\.json: items\[0\]\.status\.phase: Invalid enum value/],
    ['a claim deletionTimestamp that is a number', claim('c', 'pv', 'default', { deletionTimestamp: 5 as unknown as string }), /^rules\.json: items\[0\]\.metadata\.deletionTimestamp: Expected string, received number/],
  ];
  for (const [what, obj, want] of badClaimFields) {
    it(`rejects ${what}, naming the item and the field`, () => {
      assert.throws(() => parseClusterList(JSON.stringify(list([obj])), 'rules.json'), (err: unknown) => err instanceof ClusterStateError && want.test(err.message));
    });
  }
});
