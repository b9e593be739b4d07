// csi_block.go cleanupOrphanDeviceFiles: publish/<spec> (must be empty), then staging/<spec>,
// then volumeDevices/<spec>, stopping at the first failure; its callers (SetUpDevice after a
// final NodeStageVolume error, TearDownDevice) log the failure at V(4) and carry on. Found by
// the explorer over generated workloads (every gate on): nodevol went on past a publish dir that
// still held a pod's target and removed the staging dir of a volume still in use.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CsiCallError, GrpcStatus, type CsiNodeClient } from '../../../src/ports/csi.js';
import { cleanupOrphanDeviceFiles } from '../../../src/volume/csi/csiBlock.js';
import { CSIListGlobalVolumesWithoutStagingDir, CSIUnstageCompletesBeforeRestage, FeatureGate } from '../../../src/features/features.js';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import { upstreamCsiHooks } from '../../../src/volume/csi/csiHooks.js';
import { UNSTAGE_MARKER_FILE_NAME } from '../../../src/volume/csi/csiUtil.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { isOperationFinishedError, isUncertainProgressError } from '../../../src/volume/util/errors.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { DRIVER, InMemoryNode, NODE, ROOT, csiPluginOf, volumeHostOf, type PluginHostOptions } from '../../support/inMemoryNode.js';

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

  it('a staging dir that is not empty: stops there, naming it; the volume dir stays', async () => {
    const node = new InMemoryNode();
    node.fs.writeRaw(`${BLOCK}/staging/pv-b/left`, '');
    node.fs.writeRaw(`${BLOCK}/pv-b/data/vol_data.json`, '{}');
    await node.startKubelet(true);
    const host = node.composed?.host;
    assert.ok(host !== undefined);
    await assert.rejects(cleanupOrphanDeviceFiles(host, 'pv-b'), /failed to remove volume staging path \[.*\/volumeDevices\/staging\/pv-b\]/);
    assert.ok(await node.exists(`${BLOCK}/pv-b/data/vol_data.json`));
  });

  it('a volume dir with something mounted under it: refused, naming it; nothing in it is removed', async () => {
    const node = new InMemoryNode();
    await node.fs.mkdir(`${BLOCK}/pv-b/dev/pod-b`, { recursive: true, mode: 0o750 });
    node.fs.writeRaw(`${BLOCK}/pv-b/data/vol_data.json`, '{}');
    await node.mounter.mount('/dev/other', `${BLOCK}/pv-b/dev/pod-b`, 'ext4', []);
    await node.startKubelet(true);
    const host = node.composed?.host;
    assert.ok(host !== undefined);
    await assert.rejects(cleanupOrphanDeviceFiles(host, 'pv-b'), /failed to remove volume directory \[.*\/volumeDevices\/pv-b\]: .*still mounted/);
    assert.ok(await node.exists(`${BLOCK}/pv-b/data/vol_data.json`));
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

  // csiHooks.ts: onFinishedError decides at every final-error site, and afterFailedCleanup is
  // asked only after a removal that failed. nodevol's gates answer neither 'uncertain' here, so
  // these hold the copy to the contract its hooks are written against.
  /** A plugin whose hooks clean up after a final error and answer uncertain after a failed cleanup, recording the data dirs asked about. */
  function pluginAskingAfterFailedCleanup(node: InMemoryNode, fs: FaultyFs, asked: string[]): CsiPlugin {
    return new CsiPlugin(volumeHostOf(node, { fs }), {
      ...upstreamCsiHooks,
      onFinishedError: () => 'cleanup',
      afterFailedCleanup: (site) => (asked.push(site.dataDir), Promise.resolve('uncertain')),
    });
  }

  it('onFinishedError answering uncertain: an UncertainProgressError with the same text, and nothing is removed', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
    const fs = new FaultyFs(node.fs).failOn('mkdir', `${BLOCK}/staging/pv-b`, 'EIO');
    const asked: string[] = [];
    const plugin = new CsiPlugin(volumeHostOf(node, { fs }), { ...upstreamCsiHooks, onFinishedError: (site) => (asked.push(`${site.operation} ${site.step}`), 'uncertain') });
    const mapper = await plugin.newBlockVolumeMapper(spec, pod);
    const err = await mapper.setUpDevice().then(
      () => assert.fail('SetUpDevice succeeded'),
      (e: unknown) => e,
    );
    assert.ok(isUncertainProgressError(err), String(err));
    assert.match(String(err), /blockMapper\.stageVolumeForBlock failed to create dir .*staging\/pv-b/);
    assert.deepEqual(asked, ['SetUpDevice MkdirAll']);
    assert.ok(await node.exists(`${BLOCK}/pv-b/data/vol_data.json`));
  });

  it('a cleanup that succeeds does not ask afterFailedCleanup: the final error as it is, volumeDevices/<spec> gone', async () => {
    const node = new InMemoryNode();
    const fs = new FaultyFs(node.fs).failOn('mkdir', `${BLOCK}/staging/pv-b`, 'EIO');
    const asked: string[] = [];
    const plugin = pluginAskingAfterFailedCleanup(node, fs, asked);
    const err = await setUpDeviceFails(node, plugin);
    assert.equal(isUncertainProgressError(err), false, String(err));
    assert.deepEqual(asked, []);
  });

  it('a cleanup that fails asks afterFailedCleanup with the data dir, and its uncertain makes the error uncertain', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
    // A file in publish/<spec> (a pod's target, as a restart leaves it) stops the cleanup there.
    node.fs.writeRaw(`${BLOCK}/publish/pv-b/pod-a`, '');
    const fs = new FaultyFs(node.fs).failOn('mkdir', `${BLOCK}/staging/pv-b`, 'EIO');
    const asked: string[] = [];
    const plugin = pluginAskingAfterFailedCleanup(node, fs, asked);
    const mapper = await plugin.newBlockVolumeMapper(spec, pod);
    const err = await mapper.setUpDevice().then(
      () => assert.fail('SetUpDevice succeeded'),
      (e: unknown) => e,
    );
    assert.ok(isUncertainProgressError(err), String(err));
    assert.deepEqual(asked, [`${BLOCK}/pv-b/data`]);
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

describe('csi_block.go TearDownDevice: NodeUnstageVolume only when staging/<spec> is there, then its removal, then cleanupOrphanDeviceFiles', () => {
  const spec = constructPVSourceSpec('pv-b', DRIVER, 'vol-b', 'Block');
  const pod = { uid: 'pod-b', namespace: 'default', name: 'pod-b', nodeName: NODE, volumes: [] };
  const STAGING = `${BLOCK}/staging/pv-b`;

  /**
   * pv-b's mapper built (its data file written) and, unless `stage` is false, SetUpDevice done:
   * the fake driver mounts its device at the staging path. No pod is published.
   */
  async function blockVolume(node: InMemoryNode, o: PluginHostOptions & { features?: FeatureGate; stage?: boolean } = {}): Promise<CsiPlugin> {
    node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
    const plugin = csiPluginOf(node, o);
    const mapper = await plugin.newBlockVolumeMapper(spec, pod);
    if (o.stage !== false) await mapper.setUpDevice();
    return plugin;
  }

  async function tearDownDevice(plugin: CsiPlugin): Promise<void> {
    const unmapper = await plugin.newBlockVolumeUnmapper('pv-b', 'pod-b');
    await unmapper.tearDownDevice(`${BLOCK}/pv-b/dev`, '');
  }

  it('staged: NodeUnstageVolume at staging/<spec>, then staging/<spec> and volumeDevices/<spec> go', async () => {
    const node = new InMemoryNode();
    const plugin = await blockVolume(node);
    await tearDownDevice(plugin);
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume').map((c) => [c.outcome, (c.request as { stagingTargetPath: string }).stagingTargetPath]), [['OK', STAGING]]);
    for (const d of ['staging/pv-b', 'pv-b']) assert.equal(await node.exists(`${BLOCK}/${d}`), false, d);
  });

  it('staging/<spec> gone: kubelet sends no NodeUnstageVolume and still removes volumeDevices/<spec>', async () => {
    const node = new InMemoryNode();
    const plugin = await blockVolume(node, { stage: false });
    await tearDownDevice(plugin);
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume'), []);
    assert.equal(await node.exists(`${BLOCK}/pv-b`), false);
  });

  it(`staging/<spec> gone, gate ${CSIListGlobalVolumesWithoutStagingDir}: NodeUnstageVolume is sent all the same`, async () => {
    const node = new InMemoryNode();
    const plugin = await blockVolume(node, { stage: false, features: FeatureGate.of({ [CSIListGlobalVolumesWithoutStagingDir]: true }) });
    await tearDownDevice(plugin);
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume').map((c) => (c.request as { stagingTargetPath: string }).stagingTargetPath), [STAGING]);
    assert.equal(await node.exists(`${BLOCK}/pv-b`), false);
  });

  it('staging/<spec> cannot be looked at (EIO): that error; no NodeUnstageVolume, nothing removed, the driver keeps it staged', async () => {
    const node = new InMemoryNode();
    const fs = new FaultyFs(node.fs);
    const plugin = await blockVolume(node, { fs });
    fs.failOn('lstat', STAGING, 'EIO');
    await assert.rejects(tearDownDevice(plugin), /lstat .*staging\/pv-b: EIO/);
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume'), []);
    assert.equal(node.driver.volume('vol-b')?.stagedAt, STAGING);
    for (const d of ['staging/pv-b', 'pv-b/data/vol_data.json']) assert.ok(await node.exists(`${BLOCK}/${d}`), d);
  });

  it('a driver without STAGE_UNSTAGE_VOLUME: no NodeUnstageVolume, kubelet logs the skip and removes staging/<spec> and volumeDevices/<spec>', async () => {
    const node = new InMemoryNode({ capabilities: [] });
    const plugin = await blockVolume(node);
    await node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
    await tearDownDevice(plugin);
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume'), []);
    assert.ok(node.logger.lines.some((l) => l.msg.includes('blockMapper.unstageVolumeForBlock STAGE_UNSTAGE_VOLUME capability not set. Skipping unstageVolumeForBlock')));
    for (const d of ['staging/pv-b', 'pv-b']) assert.equal(await node.exists(`${BLOCK}/${d}`), false, d);
  });

  it('NodeUnstageVolume fails: kubelet\'s text, staging/<spec> and the data file stay', async () => {
    const node = new InMemoryNode();
    const plugin = await blockVolume(node);
    node.driver.inject({ method: 'NodeUnstageVolume', code: GrpcStatus.INTERNAL, times: 1 });
    await assert.rejects(tearDownDevice(plugin), /blockMapper\.TearDownDevice failed: rpc error: code = INTERNAL/);
    for (const d of ['staging/pv-b', 'pv-b/data/vol_data.json']) assert.ok(await node.exists(`${BLOCK}/${d}`), d);
  });

  it('a driver whose NodeUnstageVolume removed staging/<spec> itself: the removal finds nothing to do, everything is gone', async () => {
    const node = new InMemoryNode();
    const d = node.driver;
    const client: CsiNodeClient = {
      nodeGetCapabilities: () => d.nodeGetCapabilities(),
      nodeStageVolume: (r) => d.nodeStageVolume(r),
      nodeUnstageVolume: async (r) => {
        await d.nodeUnstageVolume(r);
        await node.fs.rmdir(r.stagingTargetPath);
      },
      nodePublishVolume: (r) => d.nodePublishVolume(r),
      nodeUnpublishVolume: (r) => d.nodeUnpublishVolume(r),
    };
    const plugin = await blockVolume(node, { client });
    await tearDownDevice(plugin);
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume').map((c) => c.outcome), ['OK']);
    for (const p of ['staging/pv-b', 'pv-b']) assert.equal(await node.exists(`${BLOCK}/${p}`), false, p);
  });

  // nodevol's removal of the staging path (kubelet: a remove-all) never deletes under a mount.
  it('something still mounted under staging/<spec> after NodeUnstageVolume: refuses to remove it, naming every mount; the mounts, the dir and the data file stay', async () => {
    const node = new InMemoryNode();
    const plugin = await blockVolume(node);
    for (const m of ['leftover-1', 'leftover-2']) {
      await node.fs.mkdir(`${STAGING}/${m}`, { recursive: true, mode: 0o750 });
      await node.mounter.mount('/dev/other', `${STAGING}/${m}`, 'ext4', []);
    }
    await assert.rejects(tearDownDevice(plugin), /refusing to remove .*staging\/pv-b: still mounted at \S+\/staging\/pv-b\/leftover-[12], \S+\/staging\/pv-b\/leftover-[12]$/);
    for (const m of ['leftover-1', 'leftover-2']) assert.ok(node.mounter.isMounted(`${STAGING}/${m}`), m);
    for (const p of ['staging/pv-b/leftover-1', 'pv-b/data/vol_data.json']) assert.ok(await node.exists(`${BLOCK}/${p}`), p);
  });

  it('a file under staging/<spec> that cannot be looked at (EIO): that error, not a later one', async () => {
    const node = new InMemoryNode();
    const fs = new FaultyFs(node.fs);
    const plugin = await blockVolume(node, { fs });
    node.fs.writeRaw(`${STAGING}/f`, '');
    fs.failOn('lstat', `${STAGING}/f`, 'EIO');
    await assert.rejects(tearDownDevice(plugin), /lstat .*staging\/pv-b\/f: EIO/);
    assert.ok(await node.exists(`${BLOCK}/pv-b/data/vol_data.json`));
  });

  it('a tree 8 levels under staging/<spec> is removed; one 9 levels deep is refused and left whole', async () => {
    const eight = `${STAGING}/${'a/'.repeat(7)}f`;
    const node = new InMemoryNode();
    const plugin = await blockVolume(node);
    node.fs.writeRaw(eight, '');
    await tearDownDevice(plugin);
    for (const p of ['staging/pv-b', 'pv-b']) assert.equal(await node.exists(`${BLOCK}/${p}`), false, p);

    const nine = `${STAGING}/${'a/'.repeat(8)}f`;
    const node2 = new InMemoryNode();
    const plugin2 = await blockVolume(node2);
    node2.fs.writeRaw(nine, '');
    await assert.rejects(tearDownDevice(plugin2), /refusing to remove .*\/f: deeper than 8 levels/);
    for (const p of [nine, `${BLOCK}/pv-b/data/vol_data.json`]) assert.ok(await node2.exists(p), p);
  });

  it('a staging path that is a symlink: NodeUnstageVolume is refused, named in the error', async () => {
    const node = new InMemoryNode();
    const plugin = await blockVolume(node, { stage: false });
    await node.fs.mkdir(`${BLOCK}/staging`, { recursive: true, mode: 0o750 });
    await node.fs.symlink('/elsewhere', STAGING);
    await assert.rejects(tearDownDevice(plugin), /refusing to hand .*staging\/pv-b to NodeUnstageVolume/);
    assert.deepEqual(node.driver.callsOf('NodeUnstageVolume'), []);
  });

  describe(`gate ${CSIUnstageCompletesBeforeRestage}: the unstage is recorded in volumeDevices/<spec>/data while NodeUnstageVolume runs`, () => {
    const features = FeatureGate.of({ [CSIUnstageCompletesBeforeRestage]: true });

    it('the data dir gone: NodeUnstageVolume all the same, nothing recorded, nothing recreated', async () => {
      const node = new InMemoryNode();
      const plugin = await blockVolume(node, { features });
      const unmapper = await plugin.newBlockVolumeUnmapper('pv-b', 'pod-b');
      await node.fs.unlink(`${BLOCK}/pv-b/data/vol_data.json`);
      await node.fs.rmdir(`${BLOCK}/pv-b/data`);
      await unmapper.tearDownDevice(`${BLOCK}/pv-b/dev`, '');
      assert.deepEqual(node.driver.callsOf('NodeUnstageVolume').map((c) => c.outcome), ['OK']);
      for (const p of ['staging/pv-b', 'pv-b']) assert.equal(await node.exists(`${BLOCK}/${p}`), false, p);
    });

    it('the data dir replaced by a file: NodeUnstageVolume all the same, no record written or removed, TearDownDevice succeeds', async () => {
      const node = new InMemoryNode();
      const plugin = await blockVolume(node, { features });
      const unmapper = await plugin.newBlockVolumeUnmapper('pv-b', 'pod-b');
      await node.fs.unlink(`${BLOCK}/pv-b/data/vol_data.json`);
      await node.fs.rmdir(`${BLOCK}/pv-b/data`);
      node.fs.writeRaw(`${BLOCK}/pv-b/data`, '');
      await unmapper.tearDownDevice(`${BLOCK}/pv-b/dev`, '');
      assert.deepEqual(node.driver.callsOf('NodeUnstageVolume').map((c) => c.outcome), ['OK']);
      assert.equal(node.driver.volume('vol-b'), undefined);
      assert.equal(await node.exists(`${BLOCK}/staging/pv-b`), false);
    });

    it('the record cannot be written (its name is a directory): NodeUnstageVolume is not sent, the error names TearDownDevice', async () => {
      const node = new InMemoryNode();
      const plugin = await blockVolume(node, { features });
      await node.fs.mkdir(`${BLOCK}/pv-b/data/${UNSTAGE_MARKER_FILE_NAME}`, { recursive: true, mode: 0o750 });
      await assert.rejects(tearDownDevice(plugin), /blockMapper\.TearDownDevice refuses to record the unstage/);
      assert.deepEqual(node.driver.callsOf('NodeUnstageVolume'), []);
      assert.equal(node.driver.volume('vol-b')?.stagedAt, STAGING);
    });
  });
});

describe('csi_block.go UnmapPodDevice (unpublishVolumeForBlock): NodeUnpublishVolume at publish/<spec>/<podUID>', () => {
  const spec = constructPVSourceSpec('pv-b', DRIVER, 'vol-b', 'Block');
  const pod = { uid: 'pod-b', namespace: 'default', name: 'pod-b', nodeName: NODE, volumes: [] };

  async function published(node: InMemoryNode): Promise<CsiPlugin> {
    node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
    const plugin = csiPluginOf(node);
    const mapper = await plugin.newBlockVolumeMapper(spec, pod);
    await mapper.setUpDevice();
    await mapper.mapPodDevice();
    return plugin;
  }

  it("NodeUnpublishVolume fails: kubelet's text; the driver keeps the target published", async () => {
    const node = new InMemoryNode();
    const plugin = await published(node);
    node.driver.inject({ method: 'NodeUnpublishVolume', code: GrpcStatus.INTERNAL, times: 1 });
    const unmapper = await plugin.newBlockVolumeUnmapper('pv-b', 'pod-b');
    await assert.rejects(unmapper.unmapPodDevice(), /blockMapper\.unpublishVolumeForBlock failed: rpc error: code = INTERNAL/);
    assert.deepEqual([...(node.driver.volume('vol-b')?.publishedAt ?? [])], [`${BLOCK}/publish/pv-b/pod-b`]);
  });

  it('a publish dir that is a symlink: NodeUnpublishVolume is refused, named in the error, and not sent', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
    const plugin = csiPluginOf(node);
    await plugin.newBlockVolumeMapper(spec, pod);
    await node.fs.mkdir(`${BLOCK}/publish`, { recursive: true, mode: 0o750 });
    await node.fs.symlink('/elsewhere', `${BLOCK}/publish/pv-b`);
    const unmapper = await plugin.newBlockVolumeUnmapper('pv-b', 'pod-b');
    await assert.rejects(unmapper.unmapPodDevice(), /refusing to hand .*publish\/pv-b\/pod-b to NodeUnpublishVolume/);
    assert.deepEqual(node.driver.callsOf('NodeUnpublishVolume'), []);
  });
});
