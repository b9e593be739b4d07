// Fidelity review item 10: kubelet's createVolumeSpec refuses a claim being deleted or not Bound, a PV
// whose claimRef is missing or names another claim's uid, and a PV whose volumeMode does not
// match how the pod uses it (volumeMounts vs volumeDevices); the mode is the PV's, not the claim's.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AddPersistentVolumeOptions } from '../../../src/adapters/memory/fakeCluster.js';
import type { UniquePodName } from '../../../src/layout/names.js';
import type { PersistentVolumeMode } from '../../../src/api/core.js';
import { InMemoryNode, type PodUseOptions } from '../../support/inMemoryNode.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import type { NodePublishVolumeRequest } from '../../../src/ports/csi.js';

const POD = 'uid-1' as UniquePodName;

interface Case {
  readonly mode?: PersistentVolumeMode;
  readonly claim?: AddPersistentVolumeOptions;
  readonly use?: PodUseOptions['use'];
}

/** pod uid-1 using pv-1 (claim default/claim-pv-1) as the case says; 20 steps. */
async function run(c: Case): Promise<InMemoryNode> {
  const node = new InMemoryNode();
  const spec = constructPVSourceSpec('pv-1', node.driver.name, 'h1', c.mode ?? 'Filesystem');
  assert.ok(spec.kind === 'persistent');
  node.cluster.addPersistentVolume(spec.persistentVolume, { namespace: 'default', name: 'claim-pv-1' }, c.claim ?? {});
  node.addPod('uid-1', ['pv-1'], [], c.use === undefined ? {} : { use: c.use });
  await node.startKubelet(false);
  await node.steps(20);
  return node;
}

/** Refused with kubelet's text: no DSW entry, no driver call, the error line and the pod error. */
function assertRefused(node: InMemoryNode, text: string): void {
  const vm = node.kubelet;
  assert.deepEqual(vm.dsw.getVolumesToMount(), []);
  assert.deepEqual(node.driver.methods().filter((m) => m !== 'NodeGetCapabilities'), []);
  const lines = node.logger.lines.filter((l) => l.msg === 'Error processing volume');
  assert.equal(lines.length, 1);
  assert.equal((lines[0]?.values['err'] as Error).message, text);
  assert.deepEqual(lines[0]?.values['volumeName'], 'vol-pv-1');
  assert.deepEqual(vm.dsw.popPodErrors(POD), [text]);
}

const UID = 'uid-claim-default-claim-pv-1';

describe('populator: claim and PV checks (fidelity review item 10)', () => {
  it('refuses a claim being deleted', async () => {
    assertRefused(await run({ claim: { claimDeleting: true } }), 'error processing PVC default/claim-pv-1: PVC is being deleted');
  });

  for (const phase of ['Pending', 'Lost'] as const) {
    it(`refuses a claim whose phase is ${phase} though it names a PV`, async () => {
      assertRefused(await run({ claim: { claimPhase: phase } }), 'error processing PVC default/claim-pv-1: PVC is not bound');
    });
  }

  it('refuses a PV without claimRef', async () => {
    assertRefused(
      await run({ claim: { claimRefUid: null } }),
      'error processing PVC default/claim-pv-1: found PV object pv-1 but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim',
    );
  });

  it("refuses a PV whose claimRef.uid is another claim's", async () => {
    assertRefused(
      await run({ claim: { claimRefUid: 'uid-other' } }),
      `error processing PVC default/claim-pv-1: found PV object pv-1 but its pv.Spec.ClaimRef.UID uid-other does not point to claim.UID ${UID}`,
    );
  });

  it('refuses a Block PV the pod mounts', async () => {
    assertRefused(await run({ mode: 'Block', use: { 'vol-pv-1': 'mount' } }), 'volume vol-pv-1 has volumeMode Block, but is specified in volumeMounts');
  });

  it('refuses a Filesystem PV the pod uses as a device', async () => {
    assertRefused(await run({ use: { 'vol-pv-1': 'device' } }), 'volume vol-pv-1 has volumeMode Filesystem, but is specified in volumeDevices');
  });

  it('names a missing claim and a missing PV with kubelet\'s texts', async () => {
    const node = new InMemoryNode();
    node.addPod('uid-1', ['pv-1']);
    await node.startKubelet(false);
    await node.steps(3);
    assert.deepEqual(node.kubelet.dsw.popPodErrors(POD), ['error processing PVC default/claim-pv-1: failed to fetch PVC from API server: persistentvolumeclaims "claim-pv-1" not found']);
    node.cluster.pvcs.set('default/claim-pv-1', { namespace: 'default', name: 'claim-pv-1', uid: UID, volumeName: 'pv-gone', phase: 'Bound' });
    await node.steps(3);
    assert.deepEqual(node.kubelet.dsw.popPodErrors(POD), ['error processing PVC default/claim-pv-1: failed to fetch PV pv-gone from API server: persistentvolumes "pv-gone" not found']);
  });

  it('takes the mode from the PV, not the claim: a Block claim bound to a Filesystem PV is mounted', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'h1');
    const pvc = node.cluster.pvcs.get('default/claim-pv-1');
    assert.ok(pvc !== undefined);
    node.cluster.pvcs.set('default/claim-pv-1', { ...pvc, volumeMode: 'Block' });
    node.addPod('uid-1', ['pv-1']);
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
    assert.deepEqual(node.driver.callsOf('NodePublishVolume').length, 1);
  });

  it('refuses a Bound claim that names no PV, with its own text and without a PV lookup', async () => {
    // desired_state_of_world_populator.go getPVCExtractPV: its last check, before getPVSpec is asked.
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'h1');
    const pvc = node.cluster.pvcs.get('default/claim-pv-1');
    assert.ok(pvc !== undefined);
    node.cluster.pvcs.set('default/claim-pv-1', { ...pvc, volumeName: '' });
    let pvLookups = 0;
    const inner = node.cluster.getPersistentVolume.bind(node.cluster);
    Object.assign(node.cluster, { getPersistentVolume: (name: string) => (pvLookups++, inner(name)) });
    node.addPod('uid-1', ['pv-1']);
    await node.startKubelet(false);
    await node.steps(20);
    assertRefused(node, 'error processing PVC default/claim-pv-1: PVC has empty pvc.Spec.VolumeName');
    assert.equal(pvLookups, 0);
  });

  it('takes a PV without volumeMode as Filesystem (GetVolumeMode): the pod that mounts it gets it', async () => {
    const node = new InMemoryNode();
    const volumeName = node.addVolume('pv-1', 'h1');
    const pv = node.cluster.pvs.get('pv-1');
    assert.ok(pv !== undefined);
    const withoutMode = { ...pv };
    delete withoutMode.volumeMode;
    node.cluster.pvs.set('pv-1', withoutMode);
    node.addPod('uid-1', ['pv-1'], [], { use: { 'vol-pv-1': 'mount' } });
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
    assert.deepEqual(vm.dsw.getVolumesToMount().map((v) => v.volumeName), [volumeName]);
    assert.deepEqual(vm.dsw.popPodErrors(POD), []);
  });

  it('a claim or inline CSI volume that does not say readOnly is read-write (kubelet reads an unset field as false)', async () => {
    // desired_state_of_world_populator.go createVolumeSpec: the claim source's ReadOnly goes to
    // getPVSpec, an inline volume keeps its CSI source's; an unset Go bool is false.
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'h1');
    node.addPod('uid-1', ['pv-1'], ['scratch']);
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 2);
    assert.deepEqual(Object.fromEntries(vm.dsw.getVolumesToMount().map((v) => [v.outerVolumeSpecName, v.spec.readOnly])), { 'vol-pv-1': false, scratch: false });
    assert.deepEqual(
      node.driver.callsOf('NodePublishVolume').map((c) => (c.request as NodePublishVolumeRequest).readonly),
      [false, false],
    );
  });
});
