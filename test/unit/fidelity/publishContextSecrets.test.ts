// publish_context and secrets, as kubelet reads them from the API server.
// publish_context is the VolumeAttachment's status.attachmentMetadata (csi_plugin.go
// getPublishContext; none when the CSIDriver says attachRequired: false); secrets come from the
// Secret a PV's nodeStageSecretRef / nodePublishSecretRef (an inline volume's nodePublishSecretRef,
// in the pod's namespace) names (csi_util.go getCredentialsFromSecret). Callers:
// csi_attacher.go MountDevice, csi_mounter.go SetUpAt, csi_block.go SetUpDevice / MapPodDevice.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CSIPersistentVolumeSource, Pod } from '../../../src/api/core.js';
import type { NodeCapability, NodePublishVolumeRequest, NodeStageVolumeRequest } from '../../../src/ports/csi.js';
import { getAttachmentName } from '../../../src/layout/names.js';
import { DRIVER, InMemoryNode, NODE, csiPluginOf } from '../../support/inMemoryNode.js';
import type { Spec } from '../../../src/volume/spec.js';
import { isOperationFinishedError, TransientOperationFailure } from '../../../src/volume/util/errors.js';

const publishes = (node: InMemoryNode): NodePublishVolumeRequest[] =>
  node.driver.callsOf('NodePublishVolume').map((c) => c.request as NodePublishVolumeRequest);
const stages = (node: InMemoryNode): NodeStageVolumeRequest[] => node.driver.callsOf('NodeStageVolume').map((c) => c.request as NodeStageVolumeRequest);
const VA = getAttachmentName('vol-1', DRIVER, NODE);

interface Options {
  readonly csi?: Partial<CSIPersistentVolumeSource>;
  readonly block?: boolean;
  readonly capabilities?: NodeCapability[];
  readonly attachRequired?: boolean;
  readonly metadata?: Record<string, string>;
  readonly secrets?: Record<string, Record<string, string>>;
}

function nodeWith(o: Options): InMemoryNode {
  const node = new InMemoryNode({
    ...(o.capabilities === undefined ? {} : { capabilities: o.capabilities }),
    ...(o.attachRequired === undefined ? {} : { attachRequired: o.attachRequired }),
  });
  node.addVolume('pv-1', 'vol-1', o.block === true ? { mode: 'Block' } : {});
  const pv = node.cluster.pvs.get('pv-1');
  assert.ok(pv?.csi);
  node.cluster.pvs.set('pv-1', { ...pv, csi: { ...pv.csi, ...o.csi } });
  if (o.metadata !== undefined) node.cluster.volumeAttachments.set(VA, { name: VA, attached: true, attachmentMetadata: o.metadata });
  for (const [key, data] of Object.entries(o.secrets ?? {})) node.cluster.secrets.set(key, data);
  return node;
}

/** A pod using pv-1, through the volume manager; steps until mounted, or `steps` times. */
async function mount(node: InMemoryNode, o: { block?: boolean; steps?: number } = {}): Promise<void> {
  node.addPod('pod-a', ['pv-1'], [], o.block === true ? { use: { 'vol-pv-1': 'device' } } : {});
  const vm = await node.startKubelet(false);
  if (o.steps !== undefined) {
    await node.steps(o.steps);
    await vm.waitForOperations();
    return;
  }
  await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
}

/** The failed MountVolume / MapVolume lines, their quoted error unquoted. */
function failures(node: InMemoryNode): string[] {
  return node.logger.lines.filter((l) => l.severity === 'E' && /^(volume_mount|map_volume)$/.test(String(l.values['operation']))).map((l) => l.msg.replaceAll('\\"', '"'));
}

describe('publish_context from the VolumeAttachment (getPublishContext)', () => {
  it('filesystem: status.attachmentMetadata of VolumeAttachment csi-<sha256(handle, driver, node)> in NodeStageVolume and NodePublishVolume', async () => {
    const node = nodeWith({ metadata: { devicePath: '/dev/xvdf', lun: '3' } });
    await mount(node);
    assert.deepEqual(stages(node).map((r) => r.publishContext), [{ devicePath: '/dev/xvdf', lun: '3' }]);
    assert.deepEqual(publishes(node).map((r) => r.publishContext), [{ devicePath: '/dev/xvdf', lun: '3' }]);
  });

  it('raw block: the same in the block NodeStageVolume and NodePublishVolume (SetUpDevice / MapPodDevice)', async () => {
    const node = nodeWith({ block: true, metadata: { devicePath: '/dev/xvdg' } });
    await mount(node, { block: true });
    assert.deepEqual(stages(node).map((r) => r.publishContext), [{ devicePath: '/dev/xvdg' }]);
    assert.deepEqual(publishes(node).map((r) => r.publishContext), [{ devicePath: '/dev/xvdg' }]);
  });

  it('CSIDriver attachRequired: false (skipAttach): none, whatever a VolumeAttachment says', async () => {
    const node = nodeWith({ attachRequired: false, metadata: { devicePath: '/dev/xvdf' } });
    await mount(node);
    assert.deepEqual(stages(node).map((r) => r.publishContext), [{}]);
    assert.deepEqual(publishes(node).map((r) => r.publishContext), [{}]);
  });

  it('MountDevice of an attachable volume without its VolumeAttachment: a transient failure with the API error, nothing staged', async () => {
    const node = nodeWith({});
    node.cluster.synthesizeVolumeAttachments = false;
    const vm = await node.startKubelet(false);
    const attacher = vm.plugins.findDeviceMountablePluginByName('kubernetes.io/csi')?.newDeviceMounter();
    const pv = node.cluster.pvs.get('pv-1');
    assert.ok(attacher && pv);
    const spec: Spec = { kind: 'persistent', readOnly: false, persistentVolume: pv };
    const err = await attacher.mountDevice(spec, '', attacher.getDeviceMountPath(spec), {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof TransientOperationFailure, String(err));
    assert.equal(err.message, `volumeattachments.storage.k8s.io "${VA}" not found`);
    assert.deepEqual(stages(node), []);
  });

  it('MapVolume (block) without its VolumeAttachment: blockMapper.SetupDevice failed to get volume attachment, retried, nothing staged', async () => {
    const node = nodeWith({ block: true });
    node.cluster.synthesizeVolumeAttachments = false;
    await mount(node, { block: true, steps: 10 });
    assert.deepEqual(stages(node), []);
    const errs = failures(node);
    assert.ok(errs.length >= 2, JSON.stringify(errs));
    assert.ok(
      errs.every((e) => e.includes(`kubernetes.io/csi: blockMapper.SetupDevice failed to get volume attachment [id=${VA}]: volumeattachments.storage.k8s.io "${VA}" not found`)),
      JSON.stringify(errs),
    );
  });
});

describe('secrets from nodeStageSecretRef / nodePublishSecretRef (getCredentialsFromSecret)', () => {
  const refs = {
    nodeStageSecretRef: { name: 'stage-creds', namespace: 'kube-system' },
    nodePublishSecretRef: { name: 'publish-creds', namespace: 'shop' },
  };
  const secrets = { 'kube-system/stage-creds': { user: 'stager', password: 's3cret' }, 'shop/publish-creds': { token: 'p4ss' } };

  it('filesystem: the stage Secret in NodeStageVolume, the publish Secret in NodePublishVolume', async () => {
    const node = nodeWith({ csi: refs, secrets });
    await mount(node);
    assert.deepEqual(stages(node).map((r) => r.secrets), [{ user: 'stager', password: 's3cret' }]);
    assert.deepEqual(publishes(node).map((r) => r.secrets), [{ token: 'p4ss' }]);
  });

  it('raw block: the same (stageVolumeForBlock / publishVolumeForBlock)', async () => {
    const node = nodeWith({ block: true, csi: refs, secrets });
    await mount(node, { block: true });
    assert.deepEqual(stages(node).map((r) => r.secrets), [{ user: 'stager', password: 's3cret' }]);
    assert.deepEqual(publishes(node).map((r) => r.secrets), [{ token: 'p4ss' }]);
  });

  it('a driver without STAGE_UNSTAGE_VOLUME: the stage Secret is not even read (a missing one is no error)', async () => {
    const node = nodeWith({ capabilities: [], csi: { nodeStageSecretRef: { name: 'gone', namespace: 'kube-system' } } });
    await mount(node);
    assert.deepEqual(publishes(node).map((r) => r.secrets), [{}]);
  });

  it('a missing stage Secret: MountDevice fails as a transient failure naming it, retried, nothing staged; the value of no Secret is logged', async () => {
    const node = nodeWith({ csi: { nodeStageSecretRef: { name: 'gone', namespace: 'kube-system' }, nodePublishSecretRef: refs.nodePublishSecretRef }, secrets });
    await mount(node, { steps: 10 });
    assert.deepEqual(stages(node), []);
    const errs = failures(node);
    assert.ok(errs.length >= 2 && errs.every((e) => e.includes('fetching NodeStageSecretRef kube-system/gone failed: secrets "gone" not found')), JSON.stringify(errs));
    assert.ok(!JSON.stringify(node.logger.lines).includes('p4ss'));
  });

  it('a missing publish Secret: SetUp fails as a transient failure naming it; the volume stays staged, not published', async () => {
    const node = nodeWith({ csi: { nodePublishSecretRef: { name: 'gone', namespace: 'shop' } } });
    await mount(node, { steps: 10 });
    assert.equal(stages(node).length, 1);
    assert.deepEqual(publishes(node), []);
    const errs = failures(node);
    assert.ok(errs.length >= 2 && errs.every((e) => e.includes('fetching NodePublishSecretRef shop/gone failed: secrets "gone" not found')), JSON.stringify(errs));
  });

  it('an inline volume: its nodePublishSecretRef names a Secret in the pod\'s namespace', async () => {
    const node = new InMemoryNode();
    node.cluster.secrets.set('shop/inline-creds', { key: 'v' });
    const pod: Pod = { uid: 'pod-i', namespace: 'shop', name: 'pod-i', nodeName: NODE, volumes: [{ name: 'scratch', csi: { driver: DRIVER, nodePublishSecretRef: { name: 'inline-creds' } } }], volumeMounts: ['scratch'], volumeDevices: [] };
    node.cluster.addPod(pod);
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
    assert.deepEqual(publishes(node).map((r) => [r.secrets, r.publishContext]), [[{ key: 'v' }, {}]]);
  });
});

describe('raw block: what SetUpDevice / MapPodDevice read from the API server fails (csi_block.go)', () => {
  const pod = { uid: 'pod-a', namespace: 'default', name: 'pod-a', nodeName: NODE, volumes: [] };

  /** pv-1 (block) as the API server has it, its Secret references included. */
  function blockSpec(node: InMemoryNode): Spec {
    const pv = node.cluster.pvs.get('pv-1');
    assert.ok(pv);
    return { kind: 'persistent', readOnly: false, persistentVolume: pv };
  }

  const rejection = (p: Promise<unknown>): Promise<unknown> =>
    p.then(
      () => assert.fail('resolved'),
      (e: unknown) => e,
    );

  it('a missing stage Secret: SetUpDevice fails as a transient failure naming it; no NodeStageVolume', async () => {
    const node = nodeWith({ block: true, csi: { nodeStageSecretRef: { name: 'gone', namespace: 'kube-system' } } });
    const mapper = await csiPluginOf(node).newBlockVolumeMapper(blockSpec(node), pod);
    const err = await rejection(mapper.setUpDevice());
    assert.ok(err instanceof TransientOperationFailure, String(err));
    assert.equal(err.message, 'kubernetes.io/csi: failed to get NodeStageSecretRef kube-system/gone: secrets "gone" not found');
    assert.deepEqual(stages(node), []);
  });

  it('a missing publish Secret: MapPodDevice fails as a transient failure naming it; no NodePublishVolume', async () => {
    const node = nodeWith({ block: true, csi: { nodePublishSecretRef: { name: 'gone', namespace: 'shop' } } });
    const mapper = await csiPluginOf(node).newBlockVolumeMapper(blockSpec(node), pod);
    await mapper.setUpDevice();
    const err = await rejection(mapper.mapPodDevice());
    assert.ok(err instanceof TransientOperationFailure, String(err));
    assert.equal(err.message, 'kubernetes.io/csi: blockMapper.publishVolumeForBlock failed to get NodePublishSecretRef shop/gone: secrets "gone" not found');
    assert.deepEqual(publishes(node), []);
  });

  it('the CSIDriver cannot be read: SetUpDevice fails for good, naming the driver; nothing staged', async () => {
    const node = nodeWith({ block: true });
    const mapper = await csiPluginOf(node).newBlockVolumeMapper(blockSpec(node), pod);
    node.cluster.unreachable = 'connection refused';
    const err = await rejection(mapper.setUpDevice());
    assert.ok(isOperationFinishedError(err), String(err));
    assert.equal((err as Error).message, `kubernetes.io/csi: blockMapper.SetupDevice failed to check CSIDriver for ${DRIVER}: connection refused`);
    assert.deepEqual(stages(node), []);
  });

  it('the CSIDriver cannot be read for the pod information: MapPodDevice fails as a transient failure; nothing published', async () => {
    const node = nodeWith({ block: true });
    const mapper = await csiPluginOf(node).newBlockVolumeMapper(blockSpec(node), pod);
    await mapper.setUpDevice();
    // The first read (skipAttach) answers; the second (podInfoEnabled) finds the API server gone.
    const cluster = node.cluster;
    const read = cluster.getCSIDriver.bind(cluster);
    let reads = 0;
    cluster.getCSIDriver = (name) => (++reads === 1 ? read(name) : Promise.reject(new Error('connection refused')));
    const err = await rejection(mapper.mapPodDevice());
    assert.ok(err instanceof TransientOperationFailure, String(err));
    assert.equal(err.message, 'kubernetes.io/csi: blockMapper.publishVolumeForBlock failed to assemble volume attributes: connection refused');
    assert.deepEqual(publishes(node), []);
  });
});
