// csi_block.go cleanupOrphanDeviceFiles: publish/<spec> (must be empty), then staging/<spec>,
// then volumeDevices/<spec>, stopping at the first failure; its callers (SetUpDevice after a
// final NodeStageVolume error, TearDownDevice) log the failure at V(4) and carry on. Found by
// the explorer over generated workloads (every gate on): nodevol went on past a publish dir that
// still held a pod's target and removed the staging dir of a volume still in use.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CsiCallError, GrpcStatus, type CsiNodeClient } from '../../../src/ports/csi.js';
import { cleanupOrphanDeviceFiles } from '../../../src/volume/csi/csiBlock.js';
import { FeatureGate } from '../../../src/features/features.js';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { isOperationFinishedError } from '../../../src/volume/util/errors.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { DRIVER, InMemoryNode, NODE, ROOT, csiPluginOf } from '../../support/inMemoryNode.js';

const BLOCK = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices`;

describe('raw block orphan file cleanup (csi_block.go cleanupOrphanDeviceFiles)', () => {
  for (const gateOn of [false, true]) {
    it(`gate ${gateOn ? 'on' : 'off'}: a final NodeStageVolume error while a pod's publish target is still there leaves staging/<spec> in place; the retry stages into it`, async () => {
      const node = new InMemoryNode({ volumeLocks: true });
      node.addVolume('pv-b', 'blk-1', { mode: 'Block' });
      node.addPod('pod-a', ['pv-b']);
      const vm = await node.startKubelet(gateOn);
      await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
      // A kubelet restart: the volume is still staged and published; the first restage fails for good.
      node.crashKubelet();
      node.driver.inject({ method: 'NodeStageVolume', code: GrpcStatus.FAILED_PRECONDITION, times: 1 });
      const mark = node.logger.lines.length;
      const vm2 = await node.startKubelet(gateOn);
      await node.stepUntil(() => node.driver.callsOf('NodeStageVolume').some((c) => c.outcome === 'FAILED_PRECONDITION'));
      await node.steps(1);
      assert.ok(await node.exists(`${BLOCK}/publish/pv-b/pod-a`), "the pod's publish target is there");
      assert.ok(await node.exists(`${BLOCK}/staging/pv-b`), 'the staging dir stays: the cleanup stopped at the publish dir');
      assert.ok(await node.exists(`${BLOCK}/pv-b/data/vol_data.json`), 'and the volume dir with its data file');
      const cleanup = node.logger.lines.slice(mark).filter((l) => l.msg.startsWith('Failed to clean up block volume directory'));
      assert.ok(cleanup.length > 0 && cleanup.every((l) => l.level === 4 && l.severity === 'I'), JSON.stringify(cleanup));
      assert.match(cleanup[0]?.msg ?? '', /failed to remove publish directory \[.*\/volumeDevices\/publish\/pv-b\]/);
      await node.stepUntil(() => node.driver.callsOf('NodeStageVolume').at(-1)?.outcome === 'OK');
      await node.stepUntil(() => vm2.asw.getMountedVolumes().length === 1);
      assert.equal(node.driver.volume('blk-1')?.stagedAt, `${BLOCK}/staging/pv-b`);
    });
  }

  it('with nothing published any more it removes all three', async () => {
    const node = new InMemoryNode();
    for (const d of [`${BLOCK}/publish/pv-b`, `${BLOCK}/staging/pv-b`, `${BLOCK}/pv-b/dev`]) await node.fs.mkdir(d, { recursive: true, mode: 0o750 });
    node.fs.writeRaw(`${BLOCK}/pv-b/data/vol_data.json`, '{}');
    await node.startKubelet(true);
    const host = node.composed?.host;
    assert.ok(host !== undefined);
    await cleanupOrphanDeviceFiles(host, 'pv-b');
    for (const d of ['publish/pv-b', 'staging/pv-b', 'pv-b']) assert.equal(await node.exists(`${BLOCK}/${d}`), false, d);
  });
});

describe('csi_block.go SetUpDevice: a final error of stageVolumeForBlock before NodeStageVolume runs cleanupOrphanDeviceFiles', () => {
  const spec = constructPVSourceSpec('pv-b', DRIVER, 'vol-b', 'Block');
  const pod = { uid: 'pod-b', namespace: 'default', name: 'pod-b', nodeName: NODE, volumes: [] };

  async function setUpDeviceFails(node: InMemoryNode, plugin: CsiPlugin): Promise<unknown> {
    node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
    const mapper = await plugin.newBlockVolumeMapper(spec, pod);
    assert.ok(await node.exists(`${BLOCK}/pv-b/data/vol_data.json`), 'NewBlockVolumeMapper wrote the data file');
    const err = await mapper.setUpDevice().then(
      () => assert.fail('SetUpDevice succeeded'),
      (e: unknown) => e,
    );
    assert.ok(isOperationFinishedError(err), String(err));
    assert.deepEqual(node.driver.callsOf('NodeStageVolume'), []);
    for (const d of ['pv-b', 'staging/pv-b', 'publish/pv-b']) assert.equal(await node.exists(`${BLOCK}/${d}`), false, d);
    return err;
  }

  it('the STAGE_UNSTAGE_VOLUME check fails: final, kubelet\'s text, and volumeDevices/<spec> with its data file is gone', async () => {
    const node = new InMemoryNode();
    const d = node.driver;
    const client: CsiNodeClient = {
      nodeGetCapabilities: () => Promise.reject(new CsiCallError('NodeGetCapabilities', GrpcStatus.INTERNAL, 'boom')),
      nodeStageVolume: (r) => d.nodeStageVolume(r),
      nodeUnstageVolume: (r) => d.nodeUnstageVolume(r),
      nodePublishVolume: (r) => d.nodePublishVolume(r),
      nodeUnpublishVolume: (r) => d.nodeUnpublishVolume(r),
    };
    const err = await setUpDeviceFails(node, csiPluginOf(node, { client }));
    assert.match(String(err), /blockMapper\.stageVolumeForBlock failed to check STAGE_UNSTAGE_VOLUME capability: .*boom/);
  });

  it('MkdirAll of the staging path fails: final, kubelet\'s text, and volumeDevices/<spec> with its data file is gone', async () => {
    const node = new InMemoryNode();
    const fs = new FaultyFs(node.fs).failOn('mkdir', `${BLOCK}/staging/pv-b`, 'EIO');
    const err = await setUpDeviceFails(node, csiPluginOf(node, { fs }));
    assert.match(String(err), /blockMapper\.stageVolumeForBlock failed to create dir .*staging\/pv-b/);
  });

  it('gate CSIKeepUncertainMountOnFinalError, an uncertain device (keepStagingOnFinalError): the same MkdirAll failure keeps the data file', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
    const fs = new FaultyFs(node.fs).failOn('mkdir', `${BLOCK}/staging/pv-b`, 'EIO');
    const plugin = csiPluginOf(node, { fs, features: FeatureGate.of({ CSIKeepUncertainMountOnFinalError: true }) });
    const mapper = await plugin.newBlockVolumeMapper(spec, pod);
    await assert.rejects(mapper.setUpDevice({ keepStagingOnFinalError: true }), /failed to create dir/);
    assert.ok(await node.exists(`${BLOCK}/pv-b/data/vol_data.json`));
  });
});
