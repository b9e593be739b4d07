// What kubelet's CSI plugin sends the driver (csi_plugin.go NewMounter,
// csi_mounter.go SetUpAt, csi_attacher.go MountDevice, csi_client.go NodeStageVolume /
// NodePublishVolume and the access mode mappers). Each test reads the requests the driver got.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GrpcStatus, type NodeCapability, type NodePublishVolumeRequest, type NodeStageVolumeRequest } from '../../../src/ports/csi.js';
import type { Pod } from '../../../src/api/core.js';
import { DRIVER, InMemoryNode, NODE, csiPluginOf } from '../../support/inMemoryNode.js';
import { constructInlineSpec } from '../../../src/volume/spec.js';
import { TransientOperationFailure } from '../../../src/volume/util/errors.js';

const publishes = (node: InMemoryNode): NodePublishVolumeRequest[] =>
  node.driver.callsOf('NodePublishVolume').map((c) => c.request as NodePublishVolumeRequest);
const stages = (node: InMemoryNode): NodeStageVolumeRequest[] => node.driver.callsOf('NodeStageVolume').map((c) => c.request as NodeStageVolumeRequest);

interface PvOptions {
  readonly capabilities?: NodeCapability[];
  readonly accessModes?: string[];
  readonly csiReadOnly?: boolean;
  readonly claimReadOnly?: boolean;
  readonly fsGroup?: number;
}

/** One pod with one PV, mounted through the volume manager. */
async function mountPv(o: PvOptions): Promise<InMemoryNode> {
  const node = new InMemoryNode(o.capabilities === undefined ? {} : { capabilities: o.capabilities });
  node.addVolume('pv-1', 'vol-1');
  const pv = node.cluster.pvs.get('pv-1');
  assert.ok(pv?.csi);
  node.cluster.pvs.set('pv-1', {
    ...pv,
    ...(o.accessModes === undefined ? {} : { accessModes: o.accessModes }),
    csi: { ...pv.csi, ...(o.csiReadOnly === undefined ? {} : { readOnly: o.csiReadOnly }) },
  });
  const pod: Pod = {
    uid: 'pod-a',
    namespace: 'default',
    name: 'pod-a',
    nodeName: NODE,
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-pv-1', ...(o.claimReadOnly === undefined ? {} : { readOnly: o.claimReadOnly }) } }],
    volumeMounts: ['data'],
    volumeDevices: [],
    ...(o.fsGroup === undefined ? {} : { fsGroup: o.fsGroup }),
  };
  node.cluster.addPod(pod);
  const vm = await node.startKubelet(false);
  await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
  return node;
}

describe('NewMounter read-only flag for a PV (csi_plugin.go NewMounter: spec.ReadOnly only)', () => {
  const cases = [
    { csiReadOnly: true, claimReadOnly: false, expected: false },
    { csiReadOnly: false, claimReadOnly: true, expected: true },
    { csiReadOnly: true, claimReadOnly: true, expected: true },
  ];
  for (const c of cases) {
    it(`pv.spec.csi.readOnly=${c.csiReadOnly}, claim readOnly=${c.claimReadOnly}: NodePublishVolume readonly=${c.expected}`, async () => {
      const node = await mountPv(c);
      assert.deepEqual(publishes(node).map((r) => r.readonly), [c.expected]);
    });
  }
});

describe('volume_mount_group only with VOLUME_MOUNT_GROUP (SetUpAt / MountDevice NodeSupportsVolumeMountGroup)', () => {
  for (const capabilities of [['STAGE_UNSTAGE_VOLUME'], ['STAGE_UNSTAGE_VOLUME', 'VOLUME_MOUNT_GROUP']] as NodeCapability[][]) {
    const expected = capabilities.includes('VOLUME_MOUNT_GROUP') ? '1000' : '';
    it(`a pod with fsGroup 1000, driver [${capabilities.join(',')}]: volume_mount_group ${JSON.stringify(expected)} in stage and publish`, async () => {
      const node = await mountPv({ capabilities, fsGroup: 1000 });
      assert.deepEqual(stages(node).map((r) => r.volumeCapability.mount?.volumeMountGroup), [expected]);
      assert.deepEqual(publishes(node).map((r) => r.volumeCapability.mount?.volumeMountGroup), [expected]);
    });
  }
});

describe('access mode mapping (csi_client.go asCSIAccessModeV1 / asSingleNodeMultiWriterCapableCSIAccessModeV1)', () => {
  const cases: { mode: string; snmw: boolean; expected: string }[] = [
    { mode: 'ReadWriteOnce', snmw: false, expected: 'SINGLE_NODE_WRITER' },
    { mode: 'ReadWriteOncePod', snmw: false, expected: 'SINGLE_NODE_WRITER' },
    { mode: 'ReadWriteOnce', snmw: true, expected: 'SINGLE_NODE_MULTI_WRITER' },
    { mode: 'ReadWriteOncePod', snmw: true, expected: 'SINGLE_NODE_SINGLE_WRITER' },
    { mode: 'ReadOnlyMany', snmw: true, expected: 'MULTI_NODE_READER_ONLY' },
    { mode: 'ReadWriteMany', snmw: false, expected: 'MULTI_NODE_MULTI_WRITER' },
  ];
  for (const c of cases) {
    it(`${c.mode}, driver ${c.snmw ? 'with' : 'without'} SINGLE_NODE_MULTI_WRITER: ${c.expected} in stage and publish`, async () => {
      const capabilities: NodeCapability[] = c.snmw ? ['STAGE_UNSTAGE_VOLUME', 'SINGLE_NODE_MULTI_WRITER'] : ['STAGE_UNSTAGE_VOLUME'];
      const node = await mountPv({ capabilities, accessModes: [c.mode] });
      assert.deepEqual(stages(node).map((r) => r.volumeCapability.accessMode.mode), [c.expected]);
      assert.deepEqual(publishes(node).map((r) => r.volumeCapability.accessMode.mode), [c.expected]);
    });
  }

  it('NodeGetCapabilities calls: MountDevice asks 3 times (stage, mount group, access mode), SetUp of a PV 3 times', async () => {
    const node = await mountPv({});
    const methods = node.driver.methods();
    assert.deepEqual(methods, [
      'NodeGetCapabilities', 'NodeGetCapabilities', 'NodeGetCapabilities', 'NodeStageVolume',
      'NodeGetCapabilities', 'NodeGetCapabilities', 'NodeGetCapabilities', 'NodePublishVolume',
    ]);
  });
});

const POD = { uid: 'pod-a', namespace: 'default', name: 'pod-a', serviceAccountName: 'sa-1' };

describe('inline ephemeral SetUp (SetUpAt, podInfoEnabled / getPodInfoAttrs)', () => {
  for (const podInfoOnMount of [false, true]) {
    it(`CSIDriver podInfoOnMount=${podInfoOnMount}: pod keys and csi.storage.k8s.io/ephemeral ${podInfoOnMount ? 'sent' : 'not sent'}`, async () => {
      const node = new InMemoryNode({ podInfoOnMount });
      const mounter = await csiPluginOf(node).newMounter(
        { kind: 'inline', readOnly: false, volume: { name: 'scratch', csi: { driver: DRIVER, volumeAttributes: { size: '1Mi' } } } },
        POD,
      );
      // Without the ephemeral key this test driver takes the volume for a persistent one and
      // refuses the missing staging path, as a real driver would: the request is what counts.
      await mounter.setUp({}).catch(() => undefined);
      assert.deepEqual(
        publishes(node).map((r) => r.volumeContext),
        [
          podInfoOnMount
            ? {
                size: '1Mi',
                'csi.storage.k8s.io/pod.name': 'pod-a',
                'csi.storage.k8s.io/pod.namespace': 'default',
                'csi.storage.k8s.io/pod.uid': 'pod-a',
                'csi.storage.k8s.io/serviceAccount.name': 'sa-1',
                'csi.storage.k8s.io/ephemeral': 'true',
              }
            : { size: '1Mi' },
        ],
      );
    });
  }

  it('a PV gets the pod keys too, with csi.storage.k8s.io/ephemeral=false', async () => {
    const node = await mountPv({});
    assert.equal(publishes(node)[0]?.volumeContext['csi.storage.k8s.io/ephemeral'], 'false');
    assert.equal(publishes(node)[0]?.volumeContext['csi.storage.k8s.io/pod.uid'], 'pod-a');
  });

  it('no STAGE_UNSTAGE_VOLUME check for an inline volume: 2 NodeGetCapabilities calls (mount group, access mode), none failing it as final', async () => {
    const node = new InMemoryNode();
    await (await csiPluginOf(node).newMounter(constructInlineSpec('scratch', DRIVER), POD)).setUp({});
    assert.deepEqual(node.driver.methods(), ['NodeGetCapabilities', 'NodeGetCapabilities', 'NodePublishVolume']);

    // The first capability question of an inline SetUp is VOLUME_MOUNT_GROUP: its failure is transient.
    const other = new InMemoryNode();
    other.driver.inject({ method: 'NodeGetCapabilities', code: GrpcStatus.UNAVAILABLE, times: 1 });
    await assert.rejects(
      (await csiPluginOf(other).newMounter(constructInlineSpec('scratch', DRIVER), POD)).setUp({}),
      (err: unknown) => err instanceof TransientOperationFailure && /VOLUME_MOUNT_GROUP/.test(err.message),
    );
  });
});
