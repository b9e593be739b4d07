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
