// CSI plugin reading side: naming (the cases of csi_attacher_test.go and csi_plugin_test.go),
// ConstructVolumeSpec and the KEP-6058 pod-local fallback through mount references (the cases of
// the PR's csi_util_test.go), each with the gate off and on.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { sha256Hex } from '../../../../src/layout/names.js';
import { CsiPlugin } from '../../../../src/volume/csi/csiPlugin.js';
import { constructInlineSpec, constructPVSourceSpec, specName, type Spec } from '../../../../src/volume/spec.js';
import { NodeFixture } from '../../../support/nodeFixture.js';
import { RecordingLogger, volumeHost } from '../../../support/hosts.js';

const DRIVER = 'ebs.csi.example.com';

function pvCsi(spec: Spec): { driver: string; volumeHandle: string } | undefined {
  return spec.kind === 'persistent' ? spec.persistentVolume.csi : undefined;
}

describe('CSI plugin: names and paths', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('GetVolumeName joins driver and handle with ^ for names with dots and dashes', () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    assert.equal(p.getVolumeName(constructPVSourceSpec('pv-1', 'test.csi-driver.io', 'vol-1.a')), 'test.csi-driver.io^vol-1.a');
  });

  it('GetVolumeName refuses an inline volume', () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    assert.throws(() => p.getVolumeName(constructInlineSpec('scratch', DRIVER)), /not a CSI PersistentVolume/);
  });

  it('GetDeviceMountPath is <plugins>/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount', () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    assert.equal(
      p.getDeviceMountPath(constructPVSourceSpec('pv', DRIVER, 'project/zone/test-vol1')),
      `${fx.root}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex('project/zone/test-vol1')}/globalmount`,
    );
  });

  it('GetDeviceMountPath fails for an inline spec, an empty handle, or no CSI source', () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    assert.throws(() => p.getDeviceMountPath(constructInlineSpec('x', DRIVER)));
    assert.throws(() => p.getDeviceMountPath(constructPVSourceSpec('pv', DRIVER, '')), /volume handle is empty/);
    assert.throws(
      () => p.getDeviceMountPath({ kind: 'persistent', readOnly: false, persistentVolume: { name: 'pv' } }),
      /has no CSI source/,
    );
  });

  it('CanDeviceMount is true for persistent and false for inline ephemeral volumes', () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    assert.equal(p.canDeviceMount(constructPVSourceSpec('pv', DRIVER, 'h')), true);
    assert.equal(p.canDeviceMount(constructInlineSpec('x', DRIVER)), false);
  });

  it('GetGlobalMapPath is volumeDevices/<spec>/dev', () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    assert.equal(p.getGlobalMapPath(constructPVSourceSpec('test.spec.1', DRIVER, 'h', 'Block')), `${fx.root}/plugins/kubernetes.io/csi/volumeDevices/test.spec.1/dev`);
  });
});

describe('CSI plugin: ConstructVolumeSpec', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  for (const gateOn of [false, true]) {
    it(`rebuilds a persistent spec from the pod-local file (gate ${gateOn ? 'on' : 'off'})`, async () => {
      const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1' });
      const r = await new CsiPlugin(volumeHost(fx, { gateOn })).constructVolumeSpec('pv-1', dir);
      assert.equal(specName(r.spec), 'pv-1');
      assert.deepEqual(pvCsi(r.spec), { driver: DRIVER, volumeHandle: 'vol-1' });
      assert.equal(r.spec.kind === 'persistent' ? r.spec.persistentVolume.volumeMode : undefined, 'Filesystem');
      assert.equal(r.dataSource, 'pod-local');
    });
  }

  it('rebuilds an inline ephemeral spec named specVolID', async () => {
    const dir = await fx.podVolume({ uid: 'pod-1', specName: 'scratch', driver: 'inline.csi', ephemeral: true });
    const r = await new CsiPlugin(volumeHost(fx, { gateOn: false })).constructVolumeSpec('scratch', dir);
    assert.deepEqual(r.spec, constructInlineSpec('scratch', 'inline.csi'));
  });

  it('carries the SELinux mount context from the file', async () => {
    const dir = await fx.podVolume({
      uid: 'pod-1',
      specName: 'pv-1',
      driver: DRIVER,
      file: { data: { driverName: DRIVER, volumeHandle: 'h', specVolID: 'pv-1', seLinuxMountContext: 'system_u:object_r:container_file_t:s0:c1,c2' } },
    });
    const r = await new CsiPlugin(volumeHost(fx, { gateOn: false })).constructVolumeSpec('pv-1', dir);
    assert.equal(r.seLinuxMountContext, 'system_u:object_r:container_file_t:s0:c1,c2');
  });

  describe('pod-local fallback through the mount table', () => {
    async function lostPodLocal(opts: { globalSpecVolID?: string; legacyFile?: boolean; bind?: boolean; podSpecName?: string } = {}) {
      const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: opts.globalSpecVolID ?? 'pv-1', legacyFile: opts.legacyFile ?? false });
      const dir = await fx.podVolume({
        uid: 'pod-1',
        specName: opts.podSpecName ?? 'pv-1',
        driver: DRIVER,
        handle: 'vol-1',
        file: 'absent',
        ...(opts.bind ?? true ? { boundFrom: gm } : {}),
      });
      return { gm, dir };
    }

    it('gate off: a missing pod-local file fails with the original error', async () => {
      const { dir } = await lostPodLocal();
      await assert.rejects(
        new CsiPlugin(volumeHost(fx, { gateOn: false })).constructVolumeSpec('pv-1', dir),
        /plugin\.ConstructVolumeSpec failed loading volume data using \[.*vol_data\.json\]/,
      );
    });

    it('gate on: follows the bind mount to the global mount and rebuilds the spec', async () => {
      const { dir } = await lostPodLocal();
      const logger = new RecordingLogger();
      const r = await new CsiPlugin(volumeHost(fx, { gateOn: true, logger })).constructVolumeSpec('pv-1', dir);
      assert.equal(specName(r.spec), 'pv-1');
      assert.deepEqual(pvCsi(r.spec), { driver: DRIVER, volumeHandle: 'vol-1' });
      assert.equal(r.dataSource, 'global-fallback');
      const line = logger.lines.find((l) => l.msg === 'plugin.ConstructVolumeSpec recovered vol_data from global mount');
      assert.equal(line?.level, 2);
    });

    it('gate on: a global file without specVolID is named after the pod directory', async () => {
      const { dir } = await lostPodLocal({ legacyFile: true });
      const r = await new CsiPlugin(volumeHost(fx, { gateOn: true })).constructVolumeSpec('pv-1', dir);
      assert.equal(specName(r.spec), 'pv-1');
    });

    it('gate on: a global file whose specVolID names another volume is refused', async () => {
      const { dir } = await lostPodLocal({ globalSpecVolID: 'pv-other' });
      await assert.rejects(
        new CsiPlugin(volumeHost(fx, { gateOn: true })).constructVolumeSpec('pv-1', dir),
        /holds volume data for "pv-other", not "pv-1": refusing it/,
      );
    });

    it('gate on: no mount reference is reported, not guessed (after a reboot)', async () => {
      const { dir } = await lostPodLocal({ bind: false });
      await assert.rejects(
        new CsiPlugin(volumeHost(fx, { gateOn: true })).constructVolumeSpec('pv-1', dir),
        /fallback to the global mount failed: .*no global mount is bind mounted/,
      );
    });

    it('gate on: an inline volume does not pair with a PV of the same name on another device', async () => {
      await fx.stage({ driver: DRIVER, handle: 'vol-data', specVolID: 'data' });
      const dir = await fx.podVolume({ uid: 'pod-1', specName: 'data', driver: 'inline.csi', ephemeral: true, file: 'absent' });
      fx.mount({ mountPoint: `${dir}/mount`, root: '/', dev: fx.newDev() });
      await assert.rejects(new CsiPlugin(volumeHost(fx, { gateOn: true })).constructVolumeSpec('data', dir), /no global mount is bind mounted/);
    });

    it('gate on: a mount reference with no volume data is skipped and the real global dir chosen', async () => {
      const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
      const src = fx.mountAt(gm);
      assert.ok(src);
      // Another bind of the same device and root, listed before the real one, with no vol_data.json.
      const decoy = await fx.mkdirRel('plugins/kubernetes.io/csi/decoy/aaaa/globalmount');
      fx.mount({ mountPoint: decoy, root: src.root, dev: src.dev }, { first: true });
      const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent', boundFrom: gm });
      const r = await new CsiPlugin(volumeHost(fx, { gateOn: true })).constructVolumeSpec('pv-1', dir);
      assert.deepEqual(pvCsi(r.spec), { driver: DRIVER, volumeHandle: 'vol-1' });
    });

    it('gate on: a corrupt pod-local file falls back the same way', async () => {
      const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
      const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: { raw: '{"driverName": 42' }, boundFrom: gm });
      const r = await new CsiPlugin(volumeHost(fx, { gateOn: true })).constructVolumeSpec('pv-1', dir);
      assert.equal(r.dataSource, 'global-fallback');
    });

    it('gate on: an unparseable mount table fails the fallback with both errors', async () => {
      const { dir } = await lostPodLocal();
      const host = volumeHost(fx, { gateOn: true, mountInfo: `${fx.mountInfo()}garbage line\n` });
      await assert.rejects(new CsiPlugin(host).constructVolumeSpec('pv-1', dir), /failed loading volume data.*fallback to the global mount failed/s);
    });
  });
});

describe('CSI plugin: ConstructBlockVolumeSpec', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('rebuilds a Block PV spec from volumeDevices/<spec>/data/vol_data.json', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh' });
    const spec = await new CsiPlugin(volumeHost(fx, { gateOn: false })).constructBlockVolumeSpec('pod-1', 'block-pv', '/ignored');
    assert.deepEqual(spec, constructPVSourceSpec('block-pv', DRIVER, 'bh', 'Block'));
  });

  it('fails with the path when the block data file is missing', async () => {
    await assert.rejects(new CsiPlugin(volumeHost(fx, { gateOn: true })).constructBlockVolumeSpec('pod-1', 'nope', '/m'), /failed to load block volume data for nope/);
  });
});
