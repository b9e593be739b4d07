// The plugin framework (pkg/volume/plugins.go): Find helpers and the optional interfaces.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import {
  isAttachableVolumePlugin,
  isBlockVolumePlugin,
  isDeviceMountablePlugin,
  isGlobalVolumeListerPlugin,
  PluginNotFoundError,
  VolumePluginMgr,
  type VolumePlugin,
} from '../../../src/volume/plugins.js';
import { constructInlineSpec, constructPVSourceSpec, type Spec } from '../../../src/volume/spec.js';
import { NodeFixture } from '../../support/nodeFixture.js';
import { volumeHost } from '../../support/hosts.js';

/** A plugin that implements only VolumePlugin (like NFS: no global mount to list). */
const plainPlugin: VolumePlugin = {
  getPluginName: () => 'example.com/plain',
  canSupport: (spec: Spec) => spec.kind === 'inline' && spec.volume.csi === undefined,
  getVolumeName: () => 'x',
  constructVolumeSpec: () => Promise.reject(new Error('not used')),
  newMounter: () => Promise.reject(new Error('not used')),
  newUnmounter: () => Promise.reject(new Error('not used')),
};

describe('volume plugin manager', () => {
  it('FindGlobalVolumeListerPlugins returns only the plugins implementing GlobalVolumeListerPlugin', async () => {
    const fx = await NodeFixture.create();
    try {
      const csi = new CsiPlugin(volumeHost(fx, { gateOn: true }));
      const mgr = new VolumePluginMgr([plainPlugin, csi]);
      assert.deepEqual(mgr.findGlobalVolumeListerPlugins(), [csi]);
      assert.equal(isGlobalVolumeListerPlugin(plainPlugin), false);
      assert.equal(isDeviceMountablePlugin(plainPlugin), false);
      assert.equal(isBlockVolumePlugin(csi), true);
      assert.deepEqual(new VolumePluginMgr([plainPlugin]).findGlobalVolumeListerPlugins(), []);
    } finally {
      await fx.cleanup();
    }
  });

  it('FindDeviceMountablePluginBySpec checks CanDeviceMount; by name it does not', async () => {
    const fx = await NodeFixture.create();
    try {
      const csi = new CsiPlugin(volumeHost(fx, { gateOn: false }));
      const mgr = new VolumePluginMgr([csi]);
      assert.equal(mgr.findDeviceMountablePluginBySpec(constructPVSourceSpec('pv', 'd', 'h')), csi);
      assert.equal(mgr.findDeviceMountablePluginBySpec(constructInlineSpec('scratch', 'd')), undefined);
      assert.equal(mgr.findDeviceMountablePluginByName('kubernetes.io/csi'), csi);
    } finally {
      await fx.cleanup();
    }
  });

  it('unknown plugin names and unsupported specs are errors, and a name cannot be registered twice', async () => {
    const fx = await NodeFixture.create();
    try {
      const csi = new CsiPlugin(volumeHost(fx, { gateOn: false }));
      const mgr = new VolumePluginMgr([csi]);
      assert.throws(() => mgr.findPluginByName('missing-plugin'), PluginNotFoundError);
      assert.throws(() => mgr.findPluginBySpec({ kind: 'inline', readOnly: false, volume: { name: 'v' } }), /no volume plugin matched/);
      assert.throws(() => new VolumePluginMgr([csi, csi]), /registered twice/);
    } finally {
      await fx.cleanup();
    }
  });

  // plugins.go FindPluginByName / FindPluginBySpec: the error texts name what was looked for.
  it('FindPluginByName and FindPluginBySpec errors: the missing name, or every matching plugin joined by ","', () => {
    const other: VolumePlugin = { ...plainPlugin, getPluginName: () => 'example.com/other' };
    const mgr = new VolumePluginMgr([plainPlugin, other]);
    const spec: Spec = { kind: 'inline', readOnly: false, volume: { name: 'v' } };
    assert.throws(() => mgr.findPluginByName('missing-plugin'), (err: unknown) => {
      assert.ok(err instanceof PluginNotFoundError);
      assert.equal(String(err), 'PluginNotFoundError: no volume plugin matched name: missing-plugin');
      return true;
    });
    assert.throws(() => mgr.findPluginBySpec(spec), (err: unknown) => {
      assert.ok(err instanceof PluginNotFoundError);
      assert.equal(err.message, 'multiple volume plugins matched: example.com/plain,example.com/other');
      return true;
    });
    // One match is returned.
    assert.equal(new VolumePluginMgr([plainPlugin]).findPluginBySpec(spec), plainPlugin);
  });

  it('a plugin without attachable is not found by the attachable Find helpers', async () => {
    const mgr = new VolumePluginMgr([plainPlugin]);
    assert.equal(isAttachableVolumePlugin(plainPlugin), false);
    assert.equal(mgr.findAttachablePluginByName('example.com/plain'), undefined);
    assert.equal(await mgr.findAttachablePluginBySpec({ kind: 'inline', readOnly: false, volume: { name: 'v' } }), undefined);
  });

  it('GlobalVolumeListerPlugin needs both globalVolumeLister and DeviceMountableVolumePlugin', () => {
    // A lister that cannot device-mount has no global mount to report; a device-mountable plugin
    // that does not list is not a lister.
    const listerOnly = { ...plainPlugin, getPluginName: () => 'example.com/lister-only', globalVolumeLister: true, listGlobalVolumes: () => Promise.resolve([]) };
    const mountableOnly = { ...plainPlugin, getPluginName: () => 'example.com/mountable-only', deviceMountable: true };
    const both = { ...listerOnly, getPluginName: () => 'example.com/both', deviceMountable: true };
    const mgr = new VolumePluginMgr([listerOnly, mountableOnly, both]);
    assert.deepEqual(
      mgr.findGlobalVolumeListerPlugins().map((p) => p.getPluginName()),
      ['example.com/both'],
    );
    assert.equal(isGlobalVolumeListerPlugin(listerOnly), false);
    assert.equal(isGlobalVolumeListerPlugin(mountableOnly), false);
  });
});
