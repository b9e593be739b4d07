// csi_attacher.go MountDevice, its VOLUME_MOUNT_GROUP check failing: the transient error is
// returned, but the deferred cleanup looks at the raw error of NodeSupportsVolumeMountGroup (a
// finished one) and runs removeMountDir: the staging dir, vol_data.json and the volume dir go,
// whether or not this call made them, unless the staging dir is a mount point. Read: the files
// left, the driver's calls, the error's class, volumesInUse.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { sha256Hex } from '../../../src/layout/names.js';
import { CsiCallError, GrpcStatus, type CsiNodeClient } from '../../../src/ports/csi.js';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { TransientOperationFailure } from '../../../src/volume/util/errors.js';
import { DRIVER, InMemoryNode, ROOT, csiPluginOf } from '../../support/inMemoryNode.js';

const VOL_DIR = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex('vol-1')}`;

/** The fake driver, except that its second NodeGetCapabilities call (MountDevice's VOLUME_MOUNT_GROUP check) fails UNAVAILABLE. */
function secondCapabilityCallFails(node: InMemoryNode): CsiNodeClient {
  const d = node.driver;
  let n = 0;
  return {
    nodeGetCapabilities: () => (++n === 2 ? Promise.reject(new CsiCallError('NodeGetCapabilities', GrpcStatus.UNAVAILABLE, 'x')) : d.nodeGetCapabilities()),
    nodeStageVolume: (r) => d.nodeStageVolume(r),
    nodeUnstageVolume: (r) => d.nodeUnstageVolume(r),
    nodePublishVolume: (r) => d.nodePublishVolume(r),
    nodeUnpublishVolume: (r) => d.nodeUnpublishVolume(r),
  };
}

async function mountDeviceFails(node: InMemoryNode, plugin: CsiPlugin, args: { keepStagingOnFinalError?: boolean } = {}): Promise<void> {
  const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1', 'Filesystem');
  const attacher = plugin.newDeviceMounter();
  await assert.rejects(attacher.mountDevice(spec, '', attacher.getDeviceMountPath(spec), args), (err: unknown) => {
    assert.ok(err instanceof TransientOperationFailure, String(err));
    assert.match(String(err), /VOLUME_MOUNT_GROUP/);
    return true;
  });
  assert.deepEqual(node.driver.callsOf('NodeStageVolume'), []);
}

describe('csi_attacher.go MountDevice: a failed VOLUME_MOUNT_GROUP check runs removeMountDir', () => {
  it('a volume dir this call made: globalmount, vol_data.json and the volume dir are gone; the driver dir stays', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    await mountDeviceFails(node, csiPluginOf(node, { client: secondCapabilityCallFails(node) }));
    assert.deepEqual(node.tree().filter((p) => p.includes(sha256Hex('vol-1'))), []);
    assert.ok(await node.exists(`${ROOT}/plugins/kubernetes.io/csi/${DRIVER}`));
  });

  it('a volume dir that was there before, not mounted: removed too (kubelet does not tell them apart)', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    await node.fs.mkdir(`${VOL_DIR}/globalmount`, { recursive: true, mode: 0o750 });
    node.fs.writeRaw(`${VOL_DIR}/vol_data.json`, `{"driverName":"${DRIVER}","volumeHandle":"vol-1"}\n`);
    await mountDeviceFails(node, csiPluginOf(node, { client: secondCapabilityCallFails(node) }));
    assert.deepEqual(node.tree().filter((p) => p.includes(sha256Hex('vol-1'))), []);
  });

  it('globalmount a mount point: everything stays', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    await node.fs.mkdir(`${VOL_DIR}/globalmount`, { recursive: true, mode: 0o750 });
    await node.mounter.mount('/dev/x', `${VOL_DIR}/globalmount`, 'ext4', []);
    await mountDeviceFails(node, csiPluginOf(node, { client: secondCapabilityCallFails(node) }));
    assert.ok(await node.exists(`${VOL_DIR}/vol_data.json`));
    assert.ok(node.mounter.isMounted(`${VOL_DIR}/globalmount`));
  });

  it('gate CSIKeepUncertainMountOnFinalError, an uncertain device (keepStagingOnFinalError): everything stays', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    const plugin = csiPluginOf(node, { client: secondCapabilityCallFails(node), features: FeatureGate.of({ CSIKeepUncertainMountOnFinalError: true }) });
    await mountDeviceFails(node, plugin, { keepStagingOnFinalError: true });
    assert.ok(await node.exists(`${VOL_DIR}/vol_data.json`));
    assert.ok(await node.exists(`${VOL_DIR}/globalmount`));
  });

  it('through the volume manager, every nodevol gate off: the pod goes before a retry, and nothing of the volume is left', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    node.addPod('pod-a', ['pv-1']);
    let podWanted = true;
    let failed = 0;
    node.driver.observer = {
      arrived: (_seq, method) => {
        if (podWanted && method === 'NodeGetCapabilities' && node.tree().includes(`${VOL_DIR}/vol_data.json`)) {
          node.driver.inject({ method: 'NodeGetCapabilities', code: GrpcStatus.UNAVAILABLE, times: 1 });
        }
      },
      finished: (call) => {
        if (call.method === 'NodeGetCapabilities' && call.outcome === 'UNAVAILABLE') failed++;
      },
    };
    await node.startKubelet(FeatureGate.of({ CSIGlobalMountReconstruction: true }));
    await node.stepUntil(() => failed >= 1);
    podWanted = false;
    node.cluster.deletePod('pod-a');
    await node.steps(30);
    assert.deepEqual(node.driver.calls.filter((c) => c.method !== 'NodeGetCapabilities'), []);
    assert.deepEqual(node.tree().filter((p) => p.includes(sha256Hex('vol-1'))), []);
    assert.deepEqual(node.cluster.volumesInUse, []);
  });
});
