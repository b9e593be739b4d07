// CSI ListGlobalVolumes: the cases of TestListGlobalVolumes (filesystem walk) and
// TestListGlobalBlockVolumes (block walk) of kubernetes PR #138454's csi_global_volumes_test.go.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { symlink } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { csiVolumeName, getUniqueVolumeName, sha256Hex } from '../../../../src/layout/names.js';
import { CsiPlugin } from '../../../../src/volume/csi/csiPlugin.js';
import { specName } from '../../../../src/volume/spec.js';
import { NodeFixture } from '../../../support/nodeFixture.js';
import { RecordingLogger, volumeHost } from '../../../support/hosts.js';

const DRIVER = 'test-driver';

describe('CSI ListGlobalVolumes: filesystem walk', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });
  const plugin = (): CsiPlugin => new CsiPlugin(volumeHost(fx, { gateOn: true }));

  it('reports a staged volume with the handle its unstage needs', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const got = await plugin().listGlobalVolumes();
    assert.equal(got.length, 1);
    const gv = got[0]!;
    assert.equal(gv.deviceMountPath, gm);
    assert.equal(path.basename(path.dirname(gm)), sha256Hex('vol-1'));
    assert.equal(specName(gv.spec), 'pv-1');
    assert.equal(gv.volumeMode, 'Filesystem');
    assert.deepEqual(gv.spec.kind === 'persistent' ? gv.spec.persistentVolume.csi : undefined, { driver: DRIVER, volumeHandle: 'vol-1' });
    assert.equal(gv.spec.kind === 'persistent' ? gv.spec.persistentVolume.volumeMode : undefined, 'Filesystem');
  });

  it('keeps volumeDevices out of the driver walk', async () => {
    await fx.stage({ driver: 'volumeDevices', handle: 'vol-x' });
    await fx.stage({ driver: DRIVER, handle: 'vol-1' });
    const got = await plugin().listGlobalVolumes();
    assert.deepEqual(got.map((g) => g.deviceMountPath), [fx.layout.csiDeviceMountPath(DRIVER, 'vol-1')]);
  });

  it('skips what it cannot describe without hiding the rest', async () => {
    await fx.stage({ driver: DRIVER, handle: 'a-no-json', file: 'absent' });
    await fx.stage({ driver: DRIVER, handle: 'b-no-driver', file: { data: { volumeHandle: 'b-no-driver' } } });
    await fx.stage({ driver: DRIVER, handle: 'c-no-globalmount', globalMountDir: false });
    const good = await fx.stage({ driver: DRIVER, handle: 'z-good' });
    const listing = await plugin().listGlobalVolumesDetailed();
    assert.deepEqual(listing.volumes.map((v) => v.deviceMountPath), [good]);
    const reasons = new Map(listing.skipped.map((s) => [s.path, s.reason]));
    assert.equal(reasons.get(fx.layout.csiVolumeDir(DRIVER, 'a-no-json')), 'unreadable-vol-data');
    assert.equal(reasons.get(fx.layout.csiVolumeDir(DRIVER, 'b-no-driver')), 'missing-driver-or-handle');
    assert.equal(reasons.get(fx.layout.csiVolumeDir(DRIVER, 'c-no-globalmount')), 'no-globalmount');
  });

  it('names a directory holding only our vol_data.json.tmp (an atomic write cut short) interrupted-write, with what a complete temp file says', async () => {
    const bytes = `{"driverName":"${DRIVER}","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n`;
    await fx.stage({ driver: DRIVER, handle: 'vol-1', file: 'absent' });
    await fx.writeRaw(path.relative(fx.root, path.join(fx.layout.csiVolumeDir(DRIVER, 'vol-1'), 'vol_data.json.tmp')), bytes);
    await fx.stage({ driver: DRIVER, handle: 'vol-2', file: 'absent' });
    await fx.writeRaw(path.relative(fx.root, path.join(fx.layout.csiVolumeDir(DRIVER, 'vol-2'), 'vol_data.json.tmp')), bytes.slice(0, -1)); // cut short: no newline
    const listing = await plugin().listGlobalVolumesDetailed();
    assert.deepEqual(listing.volumes, []);
    const one = listing.skipped.find((x) => x.path === fx.layout.csiVolumeDir(DRIVER, 'vol-1'));
    const two = listing.skipped.find((x) => x.path === fx.layout.csiVolumeDir(DRIVER, 'vol-2'));
    assert.deepEqual([one?.reason, one?.driver, one?.volumeHandle, one?.specVolID], ['interrupted-write', DRIVER, 'vol-1', 'pv-1']);
    assert.match(one?.detail ?? '', /only .*vol_data\.json\.tmp \(naming driver "test-driver", handle "vol-1"\)/);
    assert.deepEqual([two?.reason, two?.driver], ['interrupted-write', undefined]);
    assert.match(two?.detail ?? '', /a partial write/);
    // Only listed with CSIListGlobalVolumesWithoutStagingDir: without it nothing is renamed.
    assert.deepEqual(await plugin().listGlobalVolumes(), []);
    assert.equal(existsSync(path.join(fx.layout.csiVolumeDir(DRIVER, 'vol-1'), 'vol_data.json')), false);
  });

  it('a symlink named vol_data.json.tmp is not ours: unreadable-vol-data, never followed', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', file: 'absent' });
    const target = await fx.writeRaw('elsewhere.json', `{"driverName":"${DRIVER}","volumeHandle":"vol-1"}\n`);
    await symlink(target, path.join(fx.layout.csiVolumeDir(DRIVER, 'vol-1'), 'vol_data.json.tmp'));
    const listing = await plugin().listGlobalVolumesDetailed();
    assert.deepEqual(listing.skipped.map((s) => s.reason), ['unreadable-vol-data']);
  });

  it('recovers a volume staged before this feature existed, named after its handle', async () => {
    await fx.stage({ driver: DRIVER, handle: 'old-vol', legacyFile: true });
    const p = plugin();
    const [gv] = await p.listGlobalVolumes();
    assert.ok(gv);
    assert.equal(specName(gv.spec), 'old-vol');
    assert.equal(getUniqueVolumeName(p.getPluginName(), p.getVolumeName(gv.spec)), `kubernetes.io/csi/${csiVolumeName(DRIVER, 'old-vol')}`);
    const detailed = await p.listGlobalVolumesDetailed();
    assert.equal(detailed.volumes[0]?.hasSpecVolID, false);
  });

  it('skips a directory whose volume data names another volume', async () => {
    await fx.stage({ driver: DRIVER, handle: 'real-handle', dirName: sha256Hex('some-other-handle') });
    const listing = await plugin().listGlobalVolumesDetailed();
    assert.equal(listing.volumes.length, 0);
    assert.equal(listing.skipped[0]?.reason, 'name-mismatch');
  });

  it('skips a directory whose volume data names another driver', async () => {
    await fx.stage({ driver: 'other-driver', handle: 'h1', driverDir: DRIVER });
    const listing = await plugin().listGlobalVolumesDetailed();
    assert.equal(listing.volumes.length, 0);
    assert.equal(listing.skipped[0]?.reason, 'name-mismatch');
    assert.match(listing.skipped[0]?.detail ?? '', /names driver "other-driver"/);
  });

  it('reports nothing when no volume was ever staged', async () => {
    assert.deepEqual(await plugin().listGlobalVolumes(), []);
  });

  it('reports a staged volume whose mount is gone after a reboot', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', mounted: false });
    assert.equal((await plugin().listGlobalVolumes()).length, 1);
  });

  it('recognises the pre-1.24 pv/<name> layout and never reports it as a volume', async () => {
    await fx.stage({ driver: 'pv', handle: 'vol-legacy', dirName: 'pvc-legacy', file: { data: { driverName: 'ebs.csi', volumeHandle: 'vol-legacy' } } });
    const listing = await plugin().listGlobalVolumesDetailed();
    assert.equal(listing.volumes.length, 0);
    assert.equal(listing.skipped[0]?.reason, 'legacy-layout');
    assert.equal(listing.skipped[0]?.volumeHandle, 'vol-legacy');
  });

  it('logs every skipped directory at V(4)', async () => {
    await fx.stage({ driver: DRIVER, handle: 'a', file: 'absent' });
    const logger = new RecordingLogger();
    await new CsiPlugin(volumeHost(fx, { gateOn: true, logger })).listGlobalVolumes();
    assert.deepEqual(logger.lines.map((l) => [l.level, l.msg]), [[4, 'Skipping a CSI global directory']]);
  });
});

describe('CSI ListGlobalVolumes: block walk', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });
  const listing = () => new CsiPlugin(volumeHost(fx, { gateOn: true })).listGlobalVolumesDetailed();

  it('reports a staged block volume with the identity its teardown needs', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh-1' });
    await fx.mkdirRel('plugins/kubernetes.io/csi/volumeDevices/block-pv/dev');
    const { volumes } = await listing();
    assert.equal(volumes.length, 1);
    const gv = volumes[0]!;
    assert.equal(specName(gv.spec), 'block-pv');
    assert.equal(gv.volumeMode, 'Block');
    assert.equal(gv.spec.kind === 'persistent' ? gv.spec.persistentVolume.volumeMode : undefined, 'Block');
    assert.equal(gv.deviceMountPath, fx.layout.csiGlobalMapPath('block-pv'));
    assert.deepEqual(gv.spec.kind === 'persistent' ? gv.spec.persistentVolume.csi : undefined, { driver: DRIVER, volumeHandle: 'bh-1' });
  });

  it('reports a volume staged for a pod that never ran (no dev/ dir)', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh-1' });
    const { volumes } = await listing();
    assert.equal(volumes[0]?.deviceMountPath, path.join(fx.layout.csiBlockVolumeDir('block-pv'), 'dev'));
  });

  it('skips a volume directory with nothing staged', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh-1', staged: false });
    const l = await listing();
    assert.equal(l.volumes.length, 0);
    assert.equal(l.skipped[0]?.reason, 'not-staged');
  });

  it('leaves the staging and publish siblings out', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh-1' });
    await fx.writeRaw('plugins/kubernetes.io/csi/volumeDevices/publish/data/vol_data.json', '{"driverName":"d","volumeHandle":"h","specVolID":"publish"}');
    await fx.mkdirRel('plugins/kubernetes.io/csi/volumeDevices/staging/staging');
    await fx.mkdirRel('plugins/kubernetes.io/csi/volumeDevices/staging/publish');
    const l = await listing();
    assert.deepEqual(l.volumes.map((v) => specName(v.spec)), ['block-pv']);
    assert.equal(l.skipped.length, 0);
  });

  it('skips a directory whose volume data names another volume', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh-1', file: { data: { driverName: DRIVER, volumeHandle: 'bh-1', specVolID: 'another-pv' } } });
    const l = await listing();
    assert.equal(l.volumes.length, 0);
    assert.equal(l.skipped[0]?.reason, 'name-mismatch');
  });

  it('skips a directory whose volume data carries no name', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh-1', file: { data: { driverName: DRIVER, volumeHandle: 'bh-1' } } });
    const l = await listing();
    assert.equal(l.volumes.length, 0);
    assert.equal(l.skipped[0]?.reason, 'no-spec-vol-id');
    assert.equal(l.skipped[0]?.volumeHandle, 'bh-1');
  });

  it('refuses a specVolID that would leave the staging directory', async () => {
    await fx.stageBlock({
      specName: '..~..~etc',
      dirName: '..~..~etc',
      driver: DRIVER,
      handle: 'bh-1',
      file: { data: { driverName: DRIVER, volumeHandle: 'bh-1', specVolID: '../../etc' } },
    });
    const l = await listing();
    assert.equal(l.volumes.length, 0);
    assert.equal(l.skipped[0]?.reason, 'name-mismatch');
    assert.match(l.skipped[0]?.detail ?? '', /not a single path component/);
  });

  it('skips what it cannot describe without hiding the rest', async () => {
    await fx.stageBlock({ specName: 'a-no-data', driver: DRIVER, handle: 'x', file: 'absent' });
    await fx.stageBlock({ specName: 'b-no-driver', driver: DRIVER, handle: 'x', file: { data: { volumeHandle: 'x', specVolID: 'b-no-driver' } } });
    await fx.stageBlock({ specName: 'c-good', driver: DRIVER, handle: 'good' });
    const l = await listing();
    assert.deepEqual(l.volumes.map((v) => specName(v.spec)), ['c-good']);
    assert.deepEqual(l.skipped.map((s) => s.reason), ['unreadable-vol-data', 'missing-driver-or-handle']);
  });

  it('reports block and filesystem volumes together', async () => {
    await fx.stage({ driver: DRIVER, handle: 'fs-1' });
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh-1' });
    const l = await listing();
    assert.deepEqual(l.volumes.map((v) => v.volumeMode), ['Filesystem', 'Block']);
  });

  it('reports nothing when no block volume was ever staged', async () => {
    await fx.mkdirRel('plugins/kubernetes.io/csi');
    assert.deepEqual((await listing()).volumes, []);
  });
});
