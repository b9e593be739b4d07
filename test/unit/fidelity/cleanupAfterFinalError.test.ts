// Kubelet's cleanup after a final error, and what it does when that cleanup itself fails:
// csi_mounter.go SetUpAt's and csi_attacher.go MountDevice's deferred removeMountDir (csi_util.go)
// and csi_block.go stageVolumeForBlock's cleanupOrphanDeviceFiles only log their own failure, and
// the operation's error stays the final one, so the operation generator marks nothing mounted and
// the files stay. Pinned with kubelet's hooks (every nodevol gate off); with gate
// CSIKeepUncertainMountOnFinalError the same failure is an uncertain error
// (docs/feature-gates.md, "A cleanup after a final error that fails"). Read: the error's class and
// text, the files left, the driver's calls and the log.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CSIKeepUncertainMountOnFinalError, FeatureGate } from '../../../src/features/features.js';
import { sha256Hex } from '../../../src/layout/names.js';
import { CsiCallError, GrpcStatus, type CsiNodeClient } from '../../../src/ports/csi.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { isOperationFinishedError, isUncertainProgressError } from '../../../src/volume/util/errors.js';
import { DRIVER, InMemoryNode, ROOT, csiPluginOf } from '../../support/inMemoryNode.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { rootDirFault } from '../../support/rootDirFault.js';

const POD_VOLUME_DIR = `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`;
const VOLUME_DIR = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex('vol-1')}`;
const BLOCK_DIR = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices`;
const POD = { uid: 'pod-a', namespace: 'default', name: 'pod-a' };

/** A node whose root dir turns read-only as `method` reaches the driver, which fails it with INTERNAL. */
function readOnlyAtCall(method: 'NodeStageVolume' | 'NodePublishVolume', mode: 'Filesystem' | 'Block' = 'Filesystem'): InMemoryNode {
  const node = new InMemoryNode();
  node.addVolume('pv-1', 'vol-1', { mode });
  const setFault = rootDirFault(node);
  node.driver.inject({ method, code: GrpcStatus.INTERNAL, times: 1 });
  node.driver.observer = {
    arrived: (_seq, m) => {
      if (m === method) setFault('EROFS');
    },
    finished: () => undefined,
  };
  return node;
}

const rejection = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => assert.fail('resolved'),
    (e: unknown) => e,
  );

const gateOn = FeatureGate.of({ [CSIKeepUncertainMountOnFinalError]: true });

describe('csi_mounter.go SetUpAt: the removeMountDir after a final NodePublishVolume error fails (EROFS)', () => {
  for (const on of [false, true]) {
    it(`${on ? 'gate on: an uncertain error, same text' : "kubelet: logged at error level, the final error returned"}; the pod volume dir and vol_data.json stay`, async () => {
      const node = readOnlyAtCall('NodePublishVolume');
      const plugin = csiPluginOf(node, on ? { features: gateOn } : {});
      const mounter = await plugin.newMounter(constructPVSourceSpec('pv-1', DRIVER, 'vol-1'), POD);
      const err = await rejection(mounter.setUp({}));
      assert.ok(on ? isUncertainProgressError(err) : isOperationFinishedError(err), String(err));
      assert.match(String(err), /mounter\.SetupAt failed: rpc error: code = INTERNAL/);
      assert.deepEqual(
        node.tree().filter((p) => p.startsWith(POD_VOLUME_DIR)),
        [`${POD_VOLUME_DIR}/`, `${POD_VOLUME_DIR}/vol_data.json`],
      );
      const logged = node.logger.lines.filter((l) => l.severity === 'E');
      assert.deepEqual(
        logged.map((l) => [l.msg, l.values['dir'], String(l.values['err'])]),
        [['kubernetes.io/csi: mounter.SetupAt failed to remove mount dir after a NodePublish() error', `${POD_VOLUME_DIR}/mount`, `Error: kubernetes.io/csi: failed to remove dir [${POD_VOLUME_DIR}/mount]: rmdir ${POD_VOLUME_DIR}/mount: EROFS`]],
      );
    });
  }
});

describe('csi_attacher.go MountDevice: the removeMountDir after a final NodeStageVolume error fails (EROFS)', () => {
  for (const on of [false, true]) {
    it(`${on ? 'gate on: an uncertain error' : 'kubelet: the final error'}; globalmount and the global vol_data.json stay`, async () => {
      const node = readOnlyAtCall('NodeStageVolume');
      const attacher = csiPluginOf(node, on ? { features: gateOn } : {}).newDeviceMounter();
      const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1');
      const err = await rejection(attacher.mountDevice(spec, '', attacher.getDeviceMountPath(spec), {}));
      assert.ok(on ? isUncertainProgressError(err) : isOperationFinishedError(err), String(err));
      assert.match(String(err), /attacher\.MountDevice failed: rpc error: code = INTERNAL/);
      assert.deepEqual(node.tree().filter((p) => p.startsWith(VOLUME_DIR)), [`${VOLUME_DIR}/`, `${VOLUME_DIR}/globalmount/`, `${VOLUME_DIR}/vol_data.json`]);
      assert.deepEqual(node.logger.lines.filter((l) => l.severity === 'E').map((l) => l.msg), ['kubernetes.io/csi: attacher.MountDevice failed to remove mount dir after error']);
    });
  }
});

describe('csi_block.go stageVolumeForBlock: the cleanupOrphanDeviceFiles after a final NodeStageVolume error fails (EROFS)', () => {
  for (const on of [false, true]) {
    it(`${on ? 'gate on: an uncertain error' : 'kubelet: logged at V(4), the final error'}; the block data file stays`, async () => {
      const node = readOnlyAtCall('NodeStageVolume', 'Block');
      const mapper = await csiPluginOf(node, on ? { features: gateOn } : {}).newBlockVolumeMapper(constructPVSourceSpec('pv-1', DRIVER, 'vol-1', 'Block'), POD);
      const err = await rejection(mapper.setUpDevice({}));
      assert.ok(on ? isUncertainProgressError(err) : isOperationFinishedError(err), String(err));
      assert.match(String(err), /blockMapper\.stageVolumeForBlock failed: rpc error: code = INTERNAL/);
      assert.ok(await node.exists(`${BLOCK_DIR}/pv-1/data/vol_data.json`));
      assert.ok(node.logger.lines.some((l) => l.level === 4 && l.msg.startsWith('Failed to clean up block volume directory')));
    });
  }
});

describe('kubelet: a cleanup after a final error that succeeds removes everything, gate or not (the hook is not asked)', () => {
  for (const on of [false, true]) {
    it(`SetUp, ${on ? 'gate on' : 'kubelet'}: a final NodePublishVolume error on a writable root dir leaves nothing and stays final`, async () => {
      const node = new InMemoryNode();
      node.addVolume('pv-1', 'vol-1');
      node.driver.inject({ method: 'NodePublishVolume', code: GrpcStatus.INTERNAL, times: 1 });
      const mounter = await csiPluginOf(node, on ? { features: gateOn } : {}).newMounter(constructPVSourceSpec('pv-1', DRIVER, 'vol-1'), POD);
      const err = await rejection(mounter.setUp({}));
      assert.ok(isOperationFinishedError(err), String(err));
      assert.deepEqual(node.tree().filter((p) => p.startsWith(POD_VOLUME_DIR)), []);
      assert.deepEqual(node.driver.calls.map((c) => `${c.method} ${c.outcome}`).filter((c) => !c.startsWith('NodeGetCapabilities')), ['NodePublishVolume INTERNAL']);
    });
  }
});

describe('gate on: a failed cleanup that leaves no vol_data.json keeps kubelet\'s error (nothing to tear down from)', () => {
  it('SetUp: the write of vol_data.json fails on a read-only root dir, and so does the cleanup: not uncertain, only the pod volume dir stays', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    await node.fs.mkdir(POD_VOLUME_DIR, { recursive: true, mode: 0o750 });
    const mounter = await csiPluginOf(node, { features: gateOn }).newMounter(constructPVSourceSpec('pv-1', DRIVER, 'vol-1'), POD);
    rootDirFault(node)('EROFS');
    const err = await rejection(mounter.setUp({}));
    assert.ok(!isUncertainProgressError(err), String(err));
    assert.match(String(err), /mounter\.SetUpAt failed to save volume info data/);
    assert.deepEqual(node.tree().filter((p) => p.startsWith(POD_VOLUME_DIR)), [`${POD_VOLUME_DIR}/`]);
    assert.deepEqual(node.logger.lines.filter((l) => l.severity === 'E').map((l) => l.msg), ['kubernetes.io/csi: mounter.SetUpAt failed to remove mount dir after error']);
    assert.deepEqual(node.driver.callsOf('NodePublishVolume'), []);
  });

  it('MountDevice: the same for the global vol_data.json: the final error, globalmount stays', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    await node.fs.mkdir(`${VOLUME_DIR}/globalmount`, { recursive: true, mode: 0o750 });
    const attacher = csiPluginOf(node, { features: gateOn }).newDeviceMounter();
    const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1');
    rootDirFault(node)('EROFS');
    const err = await rejection(attacher.mountDevice(spec, '', attacher.getDeviceMountPath(spec), {}));
    assert.ok(isOperationFinishedError(err), String(err));
    assert.match(String(err), /failed to save volume info data/);
    assert.deepEqual(node.tree().filter((p) => p.startsWith(VOLUME_DIR)), [`${VOLUME_DIR}/`, `${VOLUME_DIR}/globalmount/`]);
    assert.deepEqual(node.logger.lines.filter((l) => l.severity === 'E').map((l) => l.msg), ['kubernetes.io/csi: attacher.MountDevice failed to remove mount dir after error']);
    assert.deepEqual(node.driver.callsOf('NodeStageVolume'), []);
  });
});

describe('csi_block.go SetUpDevice: the cleanupOrphanDeviceFiles after a final error before NodeStageVolume fails', () => {
  const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1', 'Block');

  /** pv-1's block mapper on a node where MkdirAll of the staging path fails (EIO): a final error before NodeStageVolume. */
  async function mkdirFails(on: boolean, fs: FaultyFs, node: InMemoryNode): Promise<unknown> {
    node.addVolume('pv-1', 'vol-1', { mode: 'Block' });
    fs.failOn('mkdir', `${BLOCK_DIR}/staging/pv-1`, 'EIO');
    const mapper = await csiPluginOf(node, { fs, ...(on ? { features: gateOn } : {}) }).newBlockVolumeMapper(spec, POD);
    const err = await rejection(mapper.setUpDevice({}));
    assert.match(String(err), /blockMapper\.stageVolumeForBlock failed to create dir .*staging\/pv-1: .*EIO/);
    assert.deepEqual(node.driver.callsOf('NodeStageVolume'), []);
    return err;
  }

  for (const on of [false, true]) {
    it(`a pod's target still in publish/<spec> stops the cleanup, the data file stays: ${on ? 'gate on: an uncertain error' : 'kubelet: the final error'}`, async () => {
      const node = new InMemoryNode();
      node.fs.writeRaw(`${BLOCK_DIR}/publish/pv-1/pod-z`, '');
      const err = await mkdirFails(on, new FaultyFs(node.fs), node);
      assert.ok(on ? isUncertainProgressError(err) : isOperationFinishedError(err), String(err));
      assert.ok(await node.exists(`${BLOCK_DIR}/pv-1/data/vol_data.json`));
      assert.ok(node.logger.lines.some((l) => l.level === 4 && l.msg.startsWith('Failed to clean up block volume directory')));
    });
  }

  it('gate on: a cleanup that failed after the data file went keeps the final error (nothing to tear down from)', async () => {
    const node = new InMemoryNode();
    const fs = new FaultyFs(node.fs).failOn('rmdir', `${BLOCK_DIR}/pv-1`, 'EIO');
    const err = await mkdirFails(true, fs, node);
    assert.ok(isOperationFinishedError(err), String(err));
    assert.equal(await node.exists(`${BLOCK_DIR}/pv-1/data/vol_data.json`), false);
    assert.ok(await node.exists(`${BLOCK_DIR}/pv-1`));
  });

  it('gate on: a cleanup that succeeds leaves nothing and keeps the final error', async () => {
    const node = new InMemoryNode();
    const err = await mkdirFails(true, new FaultyFs(node.fs), node);
    assert.ok(isOperationFinishedError(err), String(err));
    assert.deepEqual(node.tree().filter((p) => p.startsWith(`${BLOCK_DIR}/`)), [`${BLOCK_DIR}/`]);
  });
});

describe("gate on: a final error of the block driver's call with the driver's work left behind is uncertain (uncertainIfDone)", () => {
  const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1', 'Block');

  /** The fake driver, but for `override`. */
  function clientOf(node: InMemoryNode, override: Partial<CsiNodeClient>): CsiNodeClient {
    const d = node.driver;
    return {
      nodeGetCapabilities: () => d.nodeGetCapabilities(),
      nodeStageVolume: (r) => d.nodeStageVolume(r),
      nodeUnstageVolume: (r) => d.nodeUnstageVolume(r),
      nodePublishVolume: (r) => d.nodePublishVolume(r),
      nodeUnpublishVolume: (r) => d.nodeUnpublishVolume(r),
      ...override,
    };
  }

  it('SetUpDevice: NodeStageVolume left a file in the staging dir kubelet made empty (not a mount): uncertain, logged as SetUpDevice', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1', { mode: 'Block' });
    const client = clientOf(node, {
      nodeStageVolume: (r) => {
        node.fs.writeRaw(`${r.stagingTargetPath}/dev-link`, '');
        return Promise.reject(new CsiCallError('NodeStageVolume', GrpcStatus.INTERNAL, 'half done'));
      },
    });
    const mapper = await csiPluginOf(node, { client, features: gateOn }).newBlockVolumeMapper(spec, POD);
    const err = await rejection(mapper.setUpDevice({}));
    assert.ok(isUncertainProgressError(err), String(err));
    assert.ok(await node.exists(`${BLOCK_DIR}/staging/pv-1/dev-link`));
    assert.ok(node.logger.lines.some((l) => l.msg === "kubernetes.io/csi: blockMapper.SetUpDevice failed, but the driver's work is there: uncertain, the path and its record stay"));
  });

  it('MapPodDevice: NodePublishVolume published the target, then failed: uncertain, logged as MapPodDevice', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1', { mode: 'Block' });
    const d = node.driver;
    const client = clientOf(node, {
      nodePublishVolume: async (r) => {
        await d.nodePublishVolume(r);
        throw new CsiCallError('NodePublishVolume', GrpcStatus.INTERNAL, 'half done');
      },
    });
    const mapper = await csiPluginOf(node, { client, features: gateOn }).newBlockVolumeMapper(spec, POD);
    await mapper.setUpDevice({});
    const err = await rejection(mapper.mapPodDevice());
    assert.ok(isUncertainProgressError(err), String(err));
    assert.ok(node.logger.lines.some((l) => l.msg === "kubernetes.io/csi: blockMapper.MapPodDevice failed, but the driver's work is there: uncertain, the path and its record stay"));
  });
});
