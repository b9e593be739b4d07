// How kubelet classifies a failed CSI call (csi_client.go isFinalError, used by
// NodeStageVolume / NodePublishVolume to return an UncertainProgressError). An error that carries
// no gRPC status never reached the driver's answer: kubelet cannot know whether an earlier call
// for the volume is still in progress, so it counts it as uncertain ("be on the safe side").
import assert from 'node:assert/strict';
import * as path from 'node:path/posix';
import { describe, it } from 'node:test';
import { CsiCallError, GrpcStatus, isFinalCsiError, type CsiNodeClient } from '../../../src/ports/csi.js';
import { DRIVER, InMemoryNode, ROOT, csiPluginOf } from '../../support/inMemoryNode.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { isUncertainProgressError } from '../../../src/volume/util/errors.js';

/** The fake driver, except that `method` fails with `err` before reaching it. */
function failing(node: InMemoryNode, method: 'nodeStageVolume' | 'nodePublishVolume', err: Error): CsiNodeClient {
  const d = node.driver;
  return {
    nodeGetCapabilities: () => d.nodeGetCapabilities(),
    nodeStageVolume: (r) => (method === 'nodeStageVolume' ? Promise.reject(err) : d.nodeStageVolume(r)),
    nodeUnstageVolume: (r) => d.nodeUnstageVolume(r),
    nodePublishVolume: (r) => (method === 'nodePublishVolume' ? Promise.reject(err) : d.nodePublishVolume(r)),
    nodeUnpublishVolume: (r) => d.nodeUnpublishVolume(r),
  };
}

describe('csi_client.go isFinalError: an error without a gRPC status is uncertain', () => {
  it('a CsiCallError without a code (the call never got an answer) is not final', () => {
    assert.equal(isFinalCsiError(new CsiCallError('NodeStageVolume', undefined, 'CSI client for unix:///x is closed')), false);
  });

  it('an error that is not a CSI call error at all is not final', () => {
    assert.equal(isFinalCsiError(new Error('connection reset')), false);
    assert.equal(isFinalCsiError('a string'), false);
  });

  it('gRPC codes keep their classes: NOT_FOUND, INTERNAL final; UNAVAILABLE, ABORTED, DEADLINE_EXCEEDED uncertain', () => {
    const of = (code: number): boolean => isFinalCsiError(new CsiCallError('NodeStageVolume', code, 'x'));
    assert.deepEqual(
      [GrpcStatus.NOT_FOUND, GrpcStatus.INTERNAL, GrpcStatus.UNAVAILABLE, GrpcStatus.ABORTED, GrpcStatus.DEADLINE_EXCEEDED, GrpcStatus.CANCELLED, GrpcStatus.RESOURCE_EXHAUSTED].map(of),
      [true, true, false, false, false, false, false],
    );
  });

  it('MountDevice: a NodeStageVolume failing without a status is an UncertainProgressError and the staging dir and vol_data.json stay', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    const plugin = csiPluginOf(node, { client: failing(node, 'nodeStageVolume', new CsiCallError('NodeStageVolume', undefined, 'connection closed')) });
    const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1');
    const attacher = plugin.newDeviceMounter();
    const deviceMountPath = attacher.getDeviceMountPath(spec);
    const err = await attacher.mountDevice(spec, '', deviceMountPath, {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(isUncertainProgressError(err), `uncertain, got ${String(err)}`);
    assert.equal(await node.exists(deviceMountPath), true, 'the staging dir is kept (kubelet removes it only after a final error)');
    assert.equal(await node.exists(`${path.dirname(deviceMountPath)}/vol_data.json`), true);
  });

  it('SetUp: a NodePublishVolume failing with a plain error is an UncertainProgressError and the pod volume dir stays', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    const plugin = csiPluginOf(node, { client: failing(node, 'nodePublishVolume', new Error('socket hang up')) });
    const mounter = await plugin.newMounter(constructPVSourceSpec('pv-1', DRIVER, 'vol-1'), { uid: 'pod-a', namespace: 'default', name: 'pod-a' });
    const err = await mounter.setUp({}).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(isUncertainProgressError(err), `uncertain, got ${String(err)}`);
    assert.equal(await node.exists(`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1/vol_data.json`), true);
  });
});
