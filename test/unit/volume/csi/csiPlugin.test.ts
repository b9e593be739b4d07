// CSI plugin reading side: naming (the cases of csi_attacher_test.go and csi_plugin_test.go),
// ConstructVolumeSpec and the KEP-6058 pod-local fallback through mount references (the cases of
// the PR's csi_util_test.go), each with the gate off and on.
import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { NodeFileSystem } from '../../../../src/adapters/node/nodeFs.js';
import { sha256Hex } from '../../../../src/layout/names.js';
import { CsiPlugin } from '../../../../src/volume/csi/csiPlugin.js';
import { findGlobalMountDataFromPodMount, NoGlobalMountError } from '../../../../src/volume/csi/globalMountFallback.js';
import { encodeVolumeData, type VolumeData } from '../../../../src/volume/csi/volumeData.js';
import { constructInlineSpec, constructPVSourceSpec, specName, type Spec } from '../../../../src/volume/spec.js';
import { FaultyFs } from '../../../support/faultyFs.js';
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

  // csi_plugin.go CanSupport: a PV with a CSI source or an inline volume with one; nothing else.
  it('CanSupport takes a PV or an inline volume with a CSI source, and neither without one', () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    assert.equal(p.canSupport(constructPVSourceSpec('pv', DRIVER, 'h')), true);
    assert.equal(p.canSupport(constructInlineSpec('x', DRIVER)), true);
    assert.equal(p.canSupport({ kind: 'persistent', readOnly: false, persistentVolume: { name: 'pv' } }), false);
    assert.equal(p.canSupport({ kind: 'inline', readOnly: false, volume: { name: 'x' } }), false);
  });

  // csi_plugin.go GetVolumeName checks no field: an empty driver or handle still names the volume
  // (the mount fails later, at the device mount path).
  it('GetVolumeName names a PV with an empty driver or handle', () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    assert.equal(p.getVolumeName(constructPVSourceSpec('pv-1', DRIVER, '')), `${DRIVER}^`);
    assert.equal(p.getVolumeName(constructPVSourceSpec('pv-1', '', 'vol-1')), '^vol-1');
  });

  // csi_plugin.go NewMounter: an inline volume without a CSI source has no driver to mount with.
  it('NewMounter of an inline volume with no CSI source is refused, naming the volume', async () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    await assert.rejects(p.newMounter({ kind: 'inline', readOnly: false, volume: { name: 'scratch' } }, { uid: 'pod-1', namespace: 'default', name: 'pod-1' }), {
      name: 'CsiSpecError',
      message: 'volume "scratch" has no CSI source',
    });
  });

  // csi_plugin.go NewMounter takes a PV's driver and handle as they are: one naming no driver or
  // no handle gets a mounter, and its mount fails later, as kubelet's does.
  it('NewMounter of a PV with an empty driver or handle builds a mounter all the same', async () => {
    const p = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    const pod = { uid: 'pod-1', namespace: 'default', name: 'pod-1' };
    for (const spec of [constructPVSourceSpec('pv-1', DRIVER, ''), constructPVSourceSpec('pv-1', '', 'vol-1')]) {
      const m = await p.newMounter(spec, pod);
      assert.equal(m.getPath(), `${fx.root}/pods/pod-1/volumes/kubernetes.io~csi/pv-1/mount`);
    }
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
    // csi_plugin.go ConstructVolumeSpec builds it with volume.NewSpecFromVolume, whose ReadOnly is false.
    assert.deepEqual(r.spec, { kind: 'inline', readOnly: false, volume: { name: 'scratch', csi: { driver: 'inline.csi' } } });
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

  // csi_plugin.go ConstructVolumeSpec reads the keys from a Go map: a missing key is "", not an
  // error (the reference's note: an empty specVolID gives a spec named "").
  it('a pod-local file naming nothing rebuilds a persistent spec with an empty name, driver and handle', async () => {
    const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, file: { data: {} } });
    const r = await new CsiPlugin(volumeHost(fx, { gateOn: false })).constructVolumeSpec('pv-1', dir);
    assert.deepEqual(r.spec, constructPVSourceSpec('', '', ''));
    assert.equal(r.seLinuxMountContext, '');
  });

  // Not from kubelet (which reads whatever the path leads to): nothing outside the root dir is read.
  // The walk says `parentsVerified: false` of a candidate it cannot vouch for; no options at all
  // means the same.
  for (const options of [undefined, { parentsVerified: false }]) {
    it(`a pod volume dir that is a symlink out of the root dir is refused when no walk vouched for it (options: ${JSON.stringify(options)})`, async () => {
      const outside = path.join(fx.base, 'elsewhere', 'pv-1');
      await mkdir(outside, { recursive: true });
      await writeFile(path.join(outside, 'vol_data.json'), encodeVolumeData({ driverName: DRIVER, volumeHandle: 'vol-1', specVolID: 'pv-1' }));
      const link = fx.layout.csiPodVolumeDir('pod-1', 'pv-1');
      await mkdir(path.dirname(link), { recursive: true });
      await symlink(outside, link);
      await assert.rejects(
        new CsiPlugin(volumeHost(fx, { gateOn: false })).constructVolumeSpec('pv-1', link, options),
        /plugin\.ConstructVolumeSpec failed loading volume data using \[.*\]: refusing to read .* outside the root dir/,
      );
    });
  }

  // The walk's word saves a realpath per candidate (a node's walk reconstructs thousands); the
  // root dir is the host's real path already, so it is never resolved either.
  it('a pod volume dir the walk vouched for is read without resolving it or the root dir', async () => {
    const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1' });
    const fs = new FaultyFs(new NodeFileSystem());
    const r = await new CsiPlugin(volumeHost(fx, { gateOn: false, fs })).constructVolumeSpec('pv-1', dir, { parentsVerified: true });
    assert.equal(specName(r.spec), 'pv-1');
    assert.deepEqual(fs.calls.filter((c) => c.startsWith('realpath ')), []);
  });

  it('a pod-local vol_data.json that is a symlink inside the root dir is resolved, and the root dir is not', async () => {
    const target = path.join(fx.root, 'elsewhere-inside.json');
    await writeFile(target, encodeVolumeData({ driverName: DRIVER, volumeHandle: 'vol-1', specVolID: 'pv-1' }));
    const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent' });
    await symlink(target, path.join(dir, 'vol_data.json'));
    const fs = new FaultyFs(new NodeFileSystem());
    const r = await new CsiPlugin(volumeHost(fx, { gateOn: false, fs })).constructVolumeSpec('pv-1', dir, { parentsVerified: true });
    assert.deepEqual(pvCsi(r.spec), { driver: DRIVER, volumeHandle: 'vol-1' });
    assert.deepEqual(fs.calls.filter((c) => c.startsWith('realpath ')), [`realpath ${dir}/vol_data.json`]);
  });

  for (const parentsVerified of [false, true]) {
    it(`a pod-local vol_data.json that is a symlink out of the root dir is refused (parents verified: ${parentsVerified})`, async () => {
      const outsideFile = path.join(fx.base, 'vol_data.json');
      await writeFile(outsideFile, encodeVolumeData({ driverName: DRIVER, volumeHandle: 'vol-1', specVolID: 'pv-1' }));
      const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent' });
      await symlink(outsideFile, path.join(dir, 'vol_data.json'));
      await assert.rejects(
        new CsiPlugin(volumeHost(fx, { gateOn: false })).constructVolumeSpec('pv-1', dir, { parentsVerified }),
        new RegExp(`refusing to read ${dir}/vol_data\\.json: it resolves to ${outsideFile}, outside the root dir`),
      );
    });
  }

  // csi_plugin.go NewUnmounter names the mount path (<pod volume dir>/mount) in its error.
  it('NewUnmounter with no pod-local file (gate off): the error names the mount path, then the cause', async () => {
    const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent' });
    await assert.rejects(new CsiPlugin(volumeHost(fx, { gateOn: false })).newUnmounter('pv-1', 'pod-1'), {
      name: 'CsiSpecError',
      message: `unmounter failed to load volume data file [${dir}/mount]: failed to open volume data file ${dir}/vol_data.json: ENOENT (no such file or directory)`,
    });
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

  // csi_plugin.go ConstructBlockVolumeSpec: missing keys are "" (Go map zero values).
  it('a block data file naming nothing rebuilds a Block PV spec with an empty name, driver and handle', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh', file: { data: {} } });
    const spec = await new CsiPlugin(volumeHost(fx, { gateOn: false })).constructBlockVolumeSpec('pod-1', 'block-pv', '/ignored');
    assert.deepEqual(spec, constructPVSourceSpec('', '', '', 'Block'));
  });

  it('resolves the block data file for the root dir check, but not the root dir, the host\'s real path already', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh' });
    const fs = new FaultyFs(new NodeFileSystem());
    const spec = await new CsiPlugin(volumeHost(fx, { gateOn: false, fs })).constructBlockVolumeSpec('pod-1', 'block-pv', '/ignored');
    assert.deepEqual(spec, constructPVSourceSpec('block-pv', DRIVER, 'bh', 'Block'));
    assert.deepEqual(fs.calls.filter((c) => c.startsWith('realpath ')), [`realpath ${path.join(fx.layout.csiBlockDataDir('block-pv'), 'vol_data.json')}`]);
  });

  it('a block data file that is a symlink out of the root dir is refused', async () => {
    const outsideFile = path.join(fx.base, 'vol_data.json');
    await writeFile(outsideFile, encodeVolumeData({ driverName: DRIVER, volumeHandle: 'bh', specVolID: 'block-pv' }));
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh', file: 'absent' });
    const link = path.join(fx.layout.csiBlockDataDir('block-pv'), 'vol_data.json');
    await symlink(outsideFile, link);
    await assert.rejects(
      new CsiPlugin(volumeHost(fx, { gateOn: false })).constructBlockVolumeSpec('pod-1', 'block-pv', '/m'),
      new RegExp(`failed to load block volume data for block-pv .*refusing to read ${link.replace(/\./g, '\\.')}: it resolves to ${outsideFile}, outside the root dir`),
    );
  });

  it('fails with the path when the block data file is missing', async () => {
    await assert.rejects(new CsiPlugin(volumeHost(fx, { gateOn: true })).constructBlockVolumeSpec('pod-1', 'nope', '/m'), /failed to load block volume data for nope/);
  });

  // csi_plugin.go NewBlockVolumeMapper: a raw block volume is a CSI PersistentVolume.
  it('NewBlockVolumeMapper of an inline volume: refused, saying what it needs', async () => {
    const plugin = new CsiPlugin(volumeHost(fx, { gateOn: false }));
    await assert.rejects(plugin.newBlockVolumeMapper(constructInlineSpec('scratch', DRIVER), { uid: 'pod-1', namespace: 'default', name: 'pod-1' }), {
      message: 'kubernetes.io/csi: block volume mapper requires a CSI PersistentVolume',
    });
  });
});

// The fallback helper on its own (csi_util.go findGlobalMountDataFromPodMount in the KEP-6058 PR):
// which reference it accepts, what the operator reads when none is acceptable (the error names
// every reference checked with the reason, and each skip is logged at V(4)), and that a reference
// outside the root dir is refused without touching it.
describe('CSI plugin: findGlobalMountDataFromPodMount', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  const SKIPS = {
    notGlobal: 'Mount reference is not a global mount, skipping',
    outside: 'Mount reference is outside the root dir, skipping',
    unreadable: 'Global mount reference has no readable volume data, skipping',
    incomplete: 'Global mount reference names no driver or volume handle, skipping',
  } as const;

  /** A mount at `mountPoint` (directory created) and a pod volume whose mount/ is a bind of it. */
  async function podBoundFrom(mountPoint: string): Promise<string> {
    await mkdir(mountPoint, { recursive: true });
    fx.mount({ mountPoint, root: '/', dev: fx.newDev() });
    return fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent', boundFrom: mountPoint });
  }

  async function writeVolData(dir: string, data: VolumeData): Promise<string> {
    const file = path.join(dir, 'vol_data.json');
    await writeFile(file, encodeVolumeData(data));
    return file;
  }

  /** Runs the helper expecting NoGlobalMountError; returns its message and the V(4) skip lines. */
  async function refused(dir: string, fs?: FaultyFs): Promise<{ message: string; skips: { msg: string; reference: unknown }[] }> {
    const logger = new RecordingLogger();
    const err = await findGlobalMountDataFromPodMount(volumeHost(fx, { gateOn: true, logger, ...(fs ? { fs } : {}) }), dir).then(
      () => assert.fail('expected NoGlobalMountError'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof NoGlobalMountError);
    assert.equal(err.name, 'NoGlobalMountError');
    for (const l of logger.lines) assert.equal(l.level, 4, l.msg);
    return { message: err.message, skips: logger.lines.map((l) => ({ msg: l.msg, reference: l.values['reference'] })) };
  }

  it('no reference at all: NoGlobalMountError naming the mount path and nothing else', async () => {
    const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent' });
    const { message, skips } = await refused(dir);
    assert.equal(message, `no global mount is bind mounted at ${dir}/mount`);
    assert.deepEqual(skips, []);
  });

  it('names every reference checked, in mount table order, with the reason each was skipped', async () => {
    const other = `${fx.root}/plugins/kubernetes.io/csi/${DRIVER}/aaaa/elsewhere`;
    const dir = await podBoundFrom(other);
    const src = fx.mountAt(other);
    assert.ok(src);
    const noData = await fx.mkdirRel(`plugins/kubernetes.io/csi/${DRIVER}/bbbb/globalmount`);
    fx.mount({ mountPoint: noData, root: src.root, dev: src.dev });
    const { message, skips } = await refused(dir);
    assert.equal(
      message,
      `no global mount is bind mounted at ${dir}/mount; references checked: ${other} (not a globalmount), ` +
        `${noData} (failed to open volume data file ${path.dirname(noData)}/vol_data.json: ENOENT (no such file or directory))`,
    );
    assert.deepEqual(skips, [
      { msg: SKIPS.notGlobal, reference: other },
      { msg: SKIPS.unreadable, reference: noData },
    ]);
  });

  for (const [what, data] of [
    ['no volumeHandle', { driverName: DRIVER, specVolID: 'pv-1' }],
    ['an empty volumeHandle', { driverName: DRIVER, volumeHandle: '', specVolID: 'pv-1' }],
    ['no driverName', { volumeHandle: 'vol-1', specVolID: 'pv-1' }],
    ['an empty driverName', { driverName: '', volumeHandle: 'vol-1', specVolID: 'pv-1' }],
  ] as const) {
    it(`a global vol_data.json with ${what} is skipped, not returned`, async () => {
      const gm = `${fx.root}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex('vol-1')}/globalmount`;
      const dir = await podBoundFrom(gm);
      await writeVolData(path.dirname(gm), data);
      const { message, skips } = await refused(dir);
      assert.equal(message, `no global mount is bind mounted at ${dir}/mount; references checked: ${gm} (no driverName or volumeHandle)`);
      assert.deepEqual(skips, [{ msg: SKIPS.incomplete, reference: gm }]);
    });
  }

  // A bind of the pod's filesystem outside the root dir, or a globalmount directly in the root dir
  // (its vol_data.json would be the root dir's own file), is no global mount of this kubelet: it
  // is refused by its place alone, and neither it nor the vol_data.json beside it reaches the file system port.
  for (const [what, where] of [
    ['outside the root dir', (fx: NodeFixture) => `${fx.base}/elsewhere/vol/globalmount`],
    ['a root dir sibling sharing its prefix', (fx: NodeFixture) => `${fx.root}-other/vol/globalmount`],
    ['directly in the root dir', (fx: NodeFixture) => `${fx.root}/globalmount`],
  ] as const) {
    it(`a globalmount reference ${what} is refused unread, with a complete vol_data.json beside it`, async () => {
      const gm = where(fx);
      const dir = await podBoundFrom(gm);
      await writeVolData(path.dirname(gm), { driverName: DRIVER, volumeHandle: 'vol-1', specVolID: 'pv-1' });
      const fs = new FaultyFs(new NodeFileSystem());
      const { message, skips } = await refused(dir, fs);
      assert.equal(message, `no global mount is bind mounted at ${dir}/mount; references checked: ${gm} (outside the root dir)`);
      assert.deepEqual(skips, [{ msg: SKIPS.outside, reference: gm }]);
      const touched = new Set([path.dirname(gm), gm, path.join(path.dirname(gm), 'vol_data.json')]);
      assert.deepEqual(
        fs.calls.filter((c) => touched.has(c.slice(c.indexOf(' ') + 1))),
        [],
      );
    });
  }

  it('a global vol_data.json that is a symlink out of the root dir is refused, and the file outside is never read', async () => {
    const outsideFile = await writeVolData(fx.base, { driverName: DRIVER, volumeHandle: 'vol-1', specVolID: 'pv-1' });
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', file: 'absent' });
    const link = path.join(path.dirname(gm), 'vol_data.json');
    await symlink(outsideFile, link);
    const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent', boundFrom: gm });
    const fs = new FaultyFs(new NodeFileSystem());
    const { message, skips } = await refused(dir, fs);
    assert.equal(
      message,
      `no global mount is bind mounted at ${dir}/mount; references checked: ${gm} ` +
        `(refusing to read ${link}: it resolves to ${outsideFile}, outside the root dir ${fx.root})`,
    );
    assert.deepEqual(skips, [{ msg: SKIPS.unreadable, reference: gm }]);
    assert.deepEqual(fs.calls.filter((c) => c.startsWith('readFile ')), []);
  });

  it('accepts a complete global mount, resolving only the file: the root dir is the host\'s real path, never resolved again', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const dir = await fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent', boundFrom: gm });
    const fs = new FaultyFs(new NodeFileSystem());
    const r = await findGlobalMountDataFromPodMount(volumeHost(fx, { gateOn: true, fs }), dir);
    assert.equal(r.dataDir, path.dirname(gm));
    assert.equal(r.data['volumeHandle'], 'vol-1');
    // The file is resolved for the root dir check; the root dir is not (one realpath per reference saved).
    assert.ok(fs.calls.includes(`realpath ${path.dirname(gm)}/vol_data.json`), fs.calls.join('\n'));
    assert.deepEqual(
      fs.calls.filter((c) => c === `realpath ${fx.root}`),
      [],
    );
  });
});
