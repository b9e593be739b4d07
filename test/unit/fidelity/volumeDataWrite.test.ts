// csi_util.go saveVolumeData, as csi_attacher.go MountDevice uses it: the write of the global
// vol_data.json either succeeds or MountDevice fails with a final error and NodeStageVolume is
// not sent, whatever the file already holds (kubelet truncates and rewrites it). Read: the
// driver's calls, the error's class and the file's bytes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { isOperationFinishedError } from '../../../src/volume/util/errors.js';
import { DRIVER, InMemoryNode, csiPluginOf } from '../../support/inMemoryNode.js';
import { rootDirFault } from '../../support/rootDirFault.js';

describe('MountDevice: a failed write of vol_data.json is a final error, even when the file already holds the same bytes', () => {
  for (const fault of ['ENOSPC', 'EROFS'] as const) {
    it(`${fault}: MountDevice of a staged volume fails, NodeStageVolume is not sent again, the file is unchanged`, async () => {
      const node = new InMemoryNode();
      node.addVolume('pv-1', 'vol-1');
      const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1', 'Filesystem');
      const attacher = csiPluginOf(node).newDeviceMounter();
      const deviceMountPath = attacher.getDeviceMountPath(spec);
      await attacher.mountDevice(spec, '', deviceMountPath, {});
      assert.equal(node.driver.callsOf('NodeStageVolume').length, 1);
      const file = deviceMountPath.replace(/globalmount$/, 'vol_data.json');
      const before = new TextDecoder().decode(await node.fs.readFile(file, 1 << 16));

      const setFault = rootDirFault(node);
      setFault(fault);
      const err = await attacher.mountDevice(spec, '', deviceMountPath, {}).then(
        () => assert.fail('MountDevice succeeded'),
        (e: unknown) => e,
      );
      setFault(undefined);
      assert.ok(isOperationFinishedError(err), String(err));
      assert.match(String(err), /failed to save volume info data/);
      assert.equal(node.driver.callsOf('NodeStageVolume').length, 1);
      assert.equal(new TextDecoder().decode(await node.fs.readFile(file, 1 << 16)), before);
    });
  }
});
