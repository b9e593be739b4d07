// What kubelet's raw block path sends the driver (csi_block.go
// stageVolumeForBlock / publishVolumeForBlock over csi_client.go NodeStageVolume /
// NodePublishVolume). Each test reads the requests the driver got through the volume manager.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { NodeCapability, NodePublishVolumeRequest, NodeStageVolumeRequest } from '../../../src/ports/csi.js';
import type { Pod } from '../../../src/api/core.js';
import { InMemoryNode, NODE } from '../../support/inMemoryNode.js';

const publishes = (node: InMemoryNode): NodePublishVolumeRequest[] =>
  node.driver.callsOf('NodePublishVolume').map((c) => c.request as NodePublishVolumeRequest);
const stages = (node: InMemoryNode): NodeStageVolumeRequest[] => node.driver.callsOf('NodeStageVolume').map((c) => c.request as NodeStageVolumeRequest);

interface BlockPvOptions {
  readonly capabilities?: NodeCapability[];
  readonly accessModes?: string[];
  readonly podInfoOnMount?: boolean;
  readonly volumeAttributes?: Record<string, string>;
}

/** One pod using one raw block PV (volumeDevices), mapped through the volume manager. */
async function mapBlockPv(o: BlockPvOptions): Promise<InMemoryNode> {
  const node = new InMemoryNode({
    ...(o.capabilities === undefined ? {} : { capabilities: o.capabilities }),
    ...(o.podInfoOnMount === undefined ? {} : { podInfoOnMount: o.podInfoOnMount }),
  });
  node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
  const pv = node.cluster.pvs.get('pv-b');
  assert.ok(pv?.csi);
  node.cluster.pvs.set('pv-b', {
    ...pv,
    ...(o.accessModes === undefined ? {} : { accessModes: o.accessModes }),
    csi: { ...pv.csi, ...(o.volumeAttributes === undefined ? {} : { volumeAttributes: o.volumeAttributes }) },
  });
  const pod: Pod = {
    uid: 'pod-b',
    namespace: 'ns-1',
    name: 'pod-b',
    nodeName: NODE,
    serviceAccountName: 'sa-b',
    volumes: [{ name: 'dev', persistentVolumeClaim: { claimName: 'claim-pv-b' } }],
    volumeMounts: [],
    volumeDevices: ['dev'],
  };
  node.cluster.pvcs.set('ns-1/claim-pv-b', { namespace: 'ns-1', name: 'claim-pv-b', uid: pv.claimRef?.uid ?? '', volumeName: 'pv-b', volumeMode: 'Block', phase: 'Bound' });
  node.cluster.addPod(pod);
  const vm = await node.startKubelet(false);
  await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
  return node;
}

describe('raw block access mode: csi_client.go getNodeV1AccessModeMapper for every NodeStageVolume / NodePublishVolume', () => {
  const cases: { mode: string; snmw: boolean; expected: string }[] = [
    { mode: 'ReadWriteOnce', snmw: false, expected: 'SINGLE_NODE_WRITER' },
    { mode: 'ReadWriteOncePod', snmw: false, expected: 'SINGLE_NODE_WRITER' },
    { mode: 'ReadWriteOnce', snmw: true, expected: 'SINGLE_NODE_MULTI_WRITER' },
    { mode: 'ReadWriteOncePod', snmw: true, expected: 'SINGLE_NODE_SINGLE_WRITER' },
    { mode: 'ReadWriteMany', snmw: true, expected: 'MULTI_NODE_MULTI_WRITER' },
  ];
  for (const c of cases) {
    it(`block ${c.mode}, driver ${c.snmw ? 'with' : 'without'} SINGLE_NODE_MULTI_WRITER: ${c.expected} in stage and publish`, async () => {
      const capabilities: NodeCapability[] = c.snmw ? ['STAGE_UNSTAGE_VOLUME', 'SINGLE_NODE_MULTI_WRITER'] : ['STAGE_UNSTAGE_VOLUME'];
      const node = await mapBlockPv({ capabilities, accessModes: [c.mode] });
      assert.deepEqual(stages(node).map((r) => [r.volumeCapability.block !== undefined, r.volumeCapability.accessMode.mode]), [[true, c.expected]]);
      assert.deepEqual(publishes(node).map((r) => [r.volumeCapability.block !== undefined, r.volumeCapability.accessMode.mode]), [[true, c.expected]]);
    });
  }
});

describe('raw block pod information: csi_block.go publishVolumeForBlock (podInfoEnabled, getPodInfoAttrs)', () => {
  it('CSIDriver podInfoOnMount: NodePublishVolume gets the pod keys and csi.storage.k8s.io/ephemeral=false over the PV attributes; NodeStageVolume does not', async () => {
    const node = await mapBlockPv({ podInfoOnMount: true, volumeAttributes: { tier: 'gold' } });
    assert.deepEqual(publishes(node).map((r) => r.volumeContext), [
      {
        tier: 'gold',
        'csi.storage.k8s.io/pod.name': 'pod-b',
        'csi.storage.k8s.io/pod.namespace': 'ns-1',
        'csi.storage.k8s.io/pod.uid': 'pod-b',
        'csi.storage.k8s.io/serviceAccount.name': 'sa-b',
        'csi.storage.k8s.io/ephemeral': 'false',
      },
    ]);
    assert.deepEqual(stages(node).map((r) => r.volumeContext), [{ tier: 'gold' }]);
  });

  it('CSIDriver without podInfoOnMount: the PV attributes only', async () => {
    const node = await mapBlockPv({ podInfoOnMount: false, volumeAttributes: { tier: 'gold' } });
    assert.deepEqual(publishes(node).map((r) => r.volumeContext), [{ tier: 'gold' }]);
  });
});

describe('csi_block.go publishVolumeForBlock: the staging path is always sent, and MapPodDevice asks no capability', () => {
  it('a driver without STAGE_UNSTAGE_VOLUME: NodePublishVolume carries volumeDevices/staging/<spec>; the only capability calls are SetUpDevice\'s and the access mode\'s', async () => {
    const node = await mapBlockPv({ capabilities: [] });
    assert.deepEqual(publishes(node).map((r) => r.stagingTargetPath), ['/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pv-b']);
    assert.deepEqual(node.driver.methods(), ['NodeGetCapabilities', 'NodeGetCapabilities', 'NodePublishVolume']);
  });

  it('a driver with STAGE_UNSTAGE_VOLUME: one capability call before NodePublishVolume (the access mode)', async () => {
    const node = await mapBlockPv({});
    assert.deepEqual(publishes(node).map((r) => r.stagingTargetPath), ['/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pv-b']);
    assert.deepEqual(node.driver.methods(), ['NodeGetCapabilities', 'NodeGetCapabilities', 'NodeStageVolume', 'NodeGetCapabilities', 'NodePublishVolume']);
  });
});
