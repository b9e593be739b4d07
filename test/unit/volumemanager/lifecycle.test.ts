// The volume manager end to end in memory: mount, unmount, two pods, inline volumes, raw block.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InMemoryNode, ROOT } from '../../support/inMemoryNode.js';
import { sha256Hex } from '../../../src/layout/names.js';

const G = (h: string): string => `${ROOT}/plugins/kubernetes.io/csi/csi.example.com/${sha256Hex(h)}/globalmount`;

describe('volume manager: lifecycle', () => {
  for (const gateOn of [false, true]) {
    const g = `(gate ${gateOn ? 'on' : 'off'})`;

    it(`a pod's PV is staged, then published, and reported in use ${g}`, async () => {
      const node = new InMemoryNode();
      const name = node.addVolume('pv-1', 'vol-1');
      node.addPod('pod-a', ['pv-1']);
      await node.startKubelet(gateOn);
      await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
      assert.deepEqual(node.driver.methods().filter((m) => m !== 'NodeGetCapabilities'), ['NodeStageVolume', 'NodePublishVolume']);
      assert.ok(node.mounter.isMounted(G('vol-1')));
      assert.ok(node.mounter.isMounted(`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1/mount`));
      const globalData = new TextDecoder().decode(await node.fs.readFile(`${ROOT}/plugins/kubernetes.io/csi/csi.example.com/${sha256Hex('vol-1')}/vol_data.json`, 1 << 16));
      assert.equal(globalData, '{"driverName":"csi.example.com","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n');
      await node.steps(2);
      assert.deepEqual(node.cluster.volumesInUse, [name]);
    });

    it(`deleting the pod unpublishes, then unstages, and removes every directory ${g}`, async () => {
      const node = new InMemoryNode();
      const name = node.addVolume('pv-1', 'vol-1');
      node.addPod('pod-a', ['pv-1']);
      await node.startKubelet(gateOn);
      await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
      node.cluster.deletePod('pod-a');
      await node.stepUntil(() => !node.kubelet.asw.volumeExists(name as never));
      await node.steps(1);
      assert.deepEqual(node.driver.methods().filter((m) => m !== 'NodeGetCapabilities'), [
        'NodeStageVolume',
        'NodePublishVolume',
        'NodeUnpublishVolume',
        'NodeUnstageVolume',
      ]);
      assert.deepEqual(node.mounter.entries().map((e) => e.mountPoint), ['/']);
      // Like kubelet, the per-driver and per-plugin parents stay; everything of the volume is gone.
      assert.deepEqual(node.tree().filter((p) => p.includes('csi.example.com/') || p.includes('kubernetes.io~csi/')), [
        `${ROOT}/plugins/kubernetes.io/csi/csi.example.com/`,
        `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/`,
      ]);
      assert.deepEqual(node.cluster.volumesInUse, []);
    });
  }
});
