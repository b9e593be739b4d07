// Before the states sync, the volumes the Node already lists in volumesInUse
// are marked reported in the desired state (kubelet_node_status.go tryUpdateNodeStatus calls
// MarkVolumesAsReportedInUse with the Node's list whether or not the volume manager wrote it).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UniquePodName, UniqueVolumeName } from '../../../src/layout/names.js';
import { InMemoryNode } from '../../support/inMemoryNode.js';
import { createDesiredStateOfWorld } from '../../../src/volumemanager/cache/desiredStateOfWorld.js';

describe('volumesInUse before the states sync', () => {
  it('a volume the Node already lists is reported in the DSW at once; nothing is written', async () => {
    const node = new InMemoryNode();
    const name = node.addVolume('pv-1', 'vol-1');
    const other = node.addVolume('pv-2', 'vol-2');
    node.addPod('pod-a', ['pv-1', 'pv-2']);
    node.cluster.volumesInUse = [name];
    const vm = await node.startKubelet(false);
    await vm.populateOnce();
    assert.equal(vm.reconciler.statesHaveBeenSynced(), false);
    assert.equal(await vm.syncNodeStatus(), undefined);
    const reported = Object.fromEntries(vm.dsw.getVolumesToMount().map((v) => [v.volumeName, v.reportedInUse]));
    assert.deepEqual(reported, { [name]: true, [other]: false });
    assert.deepEqual(node.cluster.volumesInUseHistory, [], 'nothing written before the sync');
  });
});

describe('DSW DeletePodFromVolume', () => {
  it('forgets the pod\'s errors even when the volume is absent (desired_state_of_world.go)', () => {
    const dsw = createDesiredStateOfWorld();
    const pod = 'pod-a' as UniquePodName;
    dsw.addErrorToPod(pod, 'PersistentVolumeClaim default/c not found');
    dsw.deletePodFromVolume(pod, 'kubernetes.io/csi/absent^v' as UniqueVolumeName);
    assert.deepEqual(dsw.popPodErrors(pod), []);
  });
});

// kubelet_node_status.go tryUpdateNodeStatus: the volumes are marked reported in use only from
// the Node the API server accepted (MarkVolumesAsReportedInUse after the patch succeeded). A
// volume marked reported before the attach/detach controller saw it in volumesInUse could be
// mounted while the controller still thinks it free to detach.
describe('volumesInUse: a failed node status write', () => {
  it('after the states synced: nothing marked reported, nothing returned, the error logged', async () => {
    const node = new InMemoryNode();
    const name = node.addVolume('pv-1', 'vol-1');
    node.addPod('pod-a', ['pv-1']);
    const vm = await node.startKubelet(false);
    await vm.populateOnce();
    await vm.reconcileOnce();
    assert.equal(vm.reconciler.statesHaveBeenSynced(), true);
    const written = node.cluster.volumesInUseHistory.length;
    const logged = node.logger.lines.length;
    node.cluster.unreachable = 'connection refused';
    assert.equal(await vm.syncNodeStatus(), undefined);
    assert.deepEqual(vm.dsw.getVolumesToMount().map((v) => [v.volumeName, v.reportedInUse]), [[name, false]]);
    assert.equal(node.cluster.volumesInUseHistory.length, written);
    const errors = node.logger.lines.slice(logged).filter((l) => l.severity === 'E');
    assert.deepEqual(errors.map((l) => [l.msg, (l.values['err'] as Error).message]), [['Failed to update node status volumesInUse', 'connection refused']]);
    // The next write that succeeds marks it.
    node.cluster.unreachable = undefined;
    assert.deepEqual(await vm.syncNodeStatus(), [name]);
    assert.deepEqual(vm.dsw.getVolumesToMount().map((v) => [v.volumeName, v.reportedInUse]), [[name, true]]);
  });

  it('before the states synced, an unreadable Node: nothing marked, nothing written, a V(4) line', async () => {
    const node = new InMemoryNode();
    const name = node.addVolume('pv-1', 'vol-1');
    node.addPod('pod-a', ['pv-1']);
    node.cluster.volumesInUse = [name];
    const vm = await node.startKubelet(false);
    await vm.populateOnce();
    node.cluster.unreachable = 'connection refused';
    assert.equal(await vm.syncNodeStatus(), undefined);
    assert.deepEqual(vm.dsw.getVolumesToMount().map((v) => [v.volumeName, v.reportedInUse]), [[name, false]]);
    assert.deepEqual(node.cluster.volumesInUseHistory, []);
    const line = node.logger.lines.find((l) => l.msg === 'Could not read the Node to mark its volumesInUse as reported');
    assert.deepEqual([line?.level, line?.severity, line?.values['err']], [4, 'I', 'connection refused']);
  });
});
