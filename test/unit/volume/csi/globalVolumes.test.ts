// CSI ListGlobalVolumes: the cases of TestListGlobalVolumes (filesystem walk) and
// TestListGlobalBlockVolumes (block walk) of kubernetes PR #138454's csi_global_volumes_test.go.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, symlink } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { NodeFileSystem } from '../../../../src/adapters/node/nodeFs.js';
import type { DirEntry } from '../../../../src/ports/fs.js';
import { csiVolumeName, getUniqueVolumeName, sha256Hex } from '../../../../src/layout/names.js';
import { CsiPlugin } from '../../../../src/volume/csi/csiPlugin.js';
import { GlobalListingError, listCsiGlobalVolumes, type GlobalVolumeListing } from '../../../../src/volume/csi/globalVolumes.js';
import { encodeVolumeData } from '../../../../src/volume/csi/volumeData.js';
import { constructPVSourceSpec, specName } from '../../../../src/volume/spec.js';
import { FaultyFs } from '../../../support/faultyFs.js';
import { NodeFixture } from '../../../support/nodeFixture.js';
import { RecordingLogger, VerbosityRecorder, volumeHost, type HostOptions } from '../../../support/hosts.js';

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

  // A broken FUSE file system can list one name twice. The walk sorts by name as os.ReadDir
  // does, and keeps such entries in the order they were listed (as the pod dir walk does).
  it('keeps the listing order of entries a listing repeats under one name', async () => {
    const driverDir = fx.layout.csiDriverDir(DRIVER);
    await mkdir(path.join(driverDir, 'h'), { recursive: true });
    class RepeatingFs extends NodeFileSystem {
      override async readdir(p: string): Promise<DirEntry[]> {
        return p === driverDir ? [{ name: 'h', type: 'symlink' }, { name: 'h', type: 'directory' }] : super.readdir(p);
      }
    }
    const listing = await new CsiPlugin(volumeHost(fx, { gateOn: true, fs: new RepeatingFs() })).listGlobalVolumesDetailed();
    assert.deepEqual(
      listing.skipped.map((s) => [s.path, s.reason]),
      [
        [path.join(driverDir, 'h'), 'symlink'],
        [path.join(driverDir, 'h'), 'no-globalmount'],
      ],
    );
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

// The filesystem walk of ListGlobalVolumes (csi_global_volumes.go of kubernetes PR #138454:
// ListGlobalVolumes and describeGlobalVolume), outcome by outcome: what rejects, what is an empty
// listing, each skip reason with the detail the audit shows the operator, and the symlink and
// root-escape refusals nodevol adds to the walk.
describe('CSI ListGlobalVolumes: filesystem walk, skip reasons and refusals', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });
  const list = (o: Partial<HostOptions> = {}): Promise<GlobalVolumeListing> => listCsiGlobalVolumes(volumeHost(fx, { gateOn: true, ...o }));
  const failing = (method: 'lstat' | 'readdir', p: string, code: string): FaultyFs => new FaultyFs(new NodeFileSystem()).failOn(method, p, code);

  it('a CSI plugin directory that exists but cannot be read rejects with a GlobalListingError naming it', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1' });
    const dir = fx.layout.csiPluginDir();
    // Its lstat fails (EACCES on a parent, say): nothing below it is read.
    await assert.rejects(list({ fs: failing('lstat', dir, 'EACCES') }), (err: unknown) => {
      assert.ok(err instanceof GlobalListingError);
      assert.equal(err.name, 'GlobalListingError');
      assert.equal(err.message, `failed to read the CSI plugin directory ${dir}: lstat ${dir}: EACCES`);
      return true;
    });
    // Its listing fails: the same error (ListGlobalVolumes returns the ReadDir error).
    await assert.rejects(list({ fs: failing('readdir', dir, 'EACCES') }), (err: unknown) => {
      assert.ok(err instanceof GlobalListingError);
      assert.equal(err.message, `failed to read the CSI plugin directory ${dir}: readdir ${dir}: EACCES`);
      return true;
    });
  });

  it('a CSI plugin directory gone before it is listed is an empty listing, not an error', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1' });
    // Removed between its lstat and its readdir (a not-exist ReadDir error is "nothing staged").
    assert.deepEqual(await list({ fs: failing('readdir', fx.layout.csiPluginDir(), 'ENOENT') }), { volumes: [], skipped: [] });
  });

  it('an undecodable vol_data.json is skipped with the error loadVolumeData gives, naming the file once (its errors carry no code: no second prefix)', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', file: { raw: '{"driverName":"test-dr' } });
    const file = path.join(fx.layout.csiVolumeDir(DRIVER, 'vol-1'), 'vol_data.json');
    const [s] = (await list()).skipped;
    assert.equal(s?.reason, 'unreadable-vol-data');
    const detail = s?.detail ?? '';
    assert.equal(detail.split(file).length - 1, 1, detail);
    assert.match(detail, /unexpected EOF/);
  });

  it('a CSI plugin directory that resolves outside the root dir is refused whole: one symlink skip, nothing below it read', async () => {
    const outside = path.join(fx.base, 'outside-csi');
    await mkdir(path.join(outside, DRIVER, sha256Hex('vol-1'), 'globalmount'), { recursive: true });
    await fx.writeRaw(path.relative(fx.root, path.join(outside, DRIVER, sha256Hex('vol-1'), 'vol_data.json')), encodeVolumeData({ driverName: DRIVER, volumeHandle: 'vol-1' }));
    const dir = fx.layout.csiPluginDir();
    await mkdir(path.dirname(dir), { recursive: true });
    await symlink(outside, dir);
    assert.deepEqual(await list(), {
      volumes: [],
      skipped: [{ path: dir, reason: 'symlink', detail: `${dir} resolves outside the root dir ${fx.root}; not followed`, volumeMode: 'Filesystem' }],
    });
  });

  it('a symlinked driver directory and a symlinked volume directory are skipped as symlinks, never followed', async () => {
    const good = await fx.stage({ driver: DRIVER, handle: 'vol-1' });
    const driverLink = path.join(fx.layout.csiPluginDir(), 'a-linked-driver');
    await symlink(fx.layout.csiDriverDir(DRIVER), driverLink);
    const volLink = path.join(fx.layout.csiDriverDir(DRIVER), 'zz-linked-volume');
    await symlink(fx.layout.csiVolumeDir(DRIVER, 'vol-1'), volLink);
    const l = await list();
    assert.deepEqual(l.volumes.map((v) => v.deviceMountPath), [good]);
    assert.deepEqual(l.skipped, [
      { path: driverLink, reason: 'symlink', detail: 'driver directory is a symlink; not followed', volumeMode: 'Filesystem' },
      { path: volLink, reason: 'symlink', detail: 'volume directory is a symlink; not followed', volumeMode: 'Filesystem' },
    ]);
  });

  it('a stray file beside the driver directories or the volume directories is neither a volume nor a skip', async () => {
    const good = await fx.stage({ driver: DRIVER, handle: 'vol-1' });
    await fx.writeRaw('plugins/kubernetes.io/csi/README', 'not a driver\n');
    await fx.writeRaw(`plugins/kubernetes.io/csi/${DRIVER}/notes.txt`, 'not a volume\n');
    const l = await list();
    assert.deepEqual(l.volumes.map((v) => v.deviceMountPath), [good]);
    assert.deepEqual(l.skipped, []);
  });

  it('a missing globalmount is no-globalmount, saying so, with the identity its vol_data.json gives', async () => {
    const gm = fx.layout.csiDeviceMountPath(DRIVER, 'vol-1');
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', globalMountDir: false });
    assert.deepEqual((await list()).skipped, [
      {
        path: fx.layout.csiVolumeDir(DRIVER, 'vol-1'),
        reason: 'no-globalmount',
        detail: `${gm} does not exist (not staged, or MountDevice did not get that far)`,
        volumeMode: 'Filesystem',
        driver: DRIVER,
        volumeHandle: 'vol-1',
        specVolID: 'pv-1',
      },
    ]);
  });

  it('a globalmount that is a symlink is no-globalmount and never followed', async () => {
    const gm = fx.layout.csiDeviceMountPath(DRIVER, 'vol-1');
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', globalMountDir: false });
    await symlink(await fx.mkdirRel('elsewhere'), gm);
    const l = await list();
    assert.deepEqual(l.volumes, []);
    assert.deepEqual(l.skipped, [
      {
        path: fx.layout.csiVolumeDir(DRIVER, 'vol-1'),
        reason: 'no-globalmount',
        detail: `${gm} is a symlink; not followed`,
        volumeMode: 'Filesystem',
        driver: DRIVER,
        volumeHandle: 'vol-1',
        specVolID: 'pv-1',
      },
    ]);
  });

  it('missing-driver-or-handle names the field that is missing', async () => {
    await fx.stage({ driver: DRIVER, handle: 'h-no-driver', file: { data: { volumeHandle: 'h-no-driver' } } });
    await fx.stage({ driver: DRIVER, handle: 'h-no-handle', file: { data: { driverName: DRIVER } } });
    await fx.stage({ driver: DRIVER, handle: 'h-empty-handle', file: { data: { driverName: DRIVER, volumeHandle: '' } } });
    const l = await list();
    assert.deepEqual(l.volumes, []);
    const skip = (handle: string) => l.skipped.find((s) => s.path === fx.layout.csiVolumeDir(DRIVER, handle));
    const file = (handle: string) => path.join(fx.layout.csiVolumeDir(DRIVER, handle), 'vol_data.json');
    assert.deepEqual(skip('h-no-driver'), {
      path: fx.layout.csiVolumeDir(DRIVER, 'h-no-driver'),
      reason: 'missing-driver-or-handle',
      detail: `${file('h-no-driver')}: field driverName is missing or empty`,
      volumeMode: 'Filesystem',
      volumeHandle: 'h-no-driver',
    });
    for (const h of ['h-no-handle', 'h-empty-handle']) {
      assert.deepEqual(skip(h), {
        path: fx.layout.csiVolumeDir(DRIVER, h),
        reason: 'missing-driver-or-handle',
        detail: `${file(h)}: field volumeHandle is missing or empty`,
        volumeMode: 'Filesystem',
        driver: DRIVER,
      });
    }
  });

  it('name-mismatch says which name is wrong: the directory is not sha256 of the handle', async () => {
    // A directory named after another handle, and one that is no sha256 at all: both would be
    // unstaged at another path (UnmountDevice recomputes it from the spec).
    await fx.stage({ driver: DRIVER, handle: 'real-handle', dirName: sha256Hex('some-other-handle') });
    await fx.stage({ driver: DRIVER, handle: 'h2', dirName: 'not-a-sha256' });
    const l = await list();
    assert.deepEqual(l.volumes, []);
    assert.deepEqual(
      l.skipped.map((s) => [s.path, s.reason, s.detail]),
      [
        [path.join(fx.layout.csiDriverDir(DRIVER), 'not-a-sha256'), 'name-mismatch', `directory name is not sha256("h2") = ${sha256Hex('h2')}`],
        [path.join(fx.layout.csiDriverDir(DRIVER), sha256Hex('some-other-handle')), 'name-mismatch', `directory name is not sha256("real-handle") = ${sha256Hex('real-handle')}`],
      ].sort((a, b) => ((a[0] ?? '') < (b[0] ?? '') ? -1 : 1)),
    );
  });

  it('the pre-1.24 pv/<name> layout is legacy-layout, saying why, even with a vol_data.json.tmp and no vol_data.json', async () => {
    await fx.stage({ driver: 'pv', handle: 'vol-legacy', dirName: 'pvc-legacy', file: { data: { driverName: 'ebs.csi', volumeHandle: 'vol-legacy' } } });
    // Not nodevol's write (it never writes under pv/): no interrupted-write there.
    await fx.stage({ driver: 'pv', handle: 'vol-legacy-2', dirName: 'pvc-legacy-2', file: 'absent' });
    await fx.writeRaw('plugins/kubernetes.io/csi/pv/pvc-legacy-2/vol_data.json.tmp', encodeVolumeData({ driverName: 'ebs.csi', volumeHandle: 'vol-legacy-2' }));
    const l = await list();
    assert.deepEqual(l.volumes, []);
    const why = (name: string): string => `pre-1.24 staging directory plugins/kubernetes.io/csi/pv/${name}; kubelet >= 1.24 computes another path and never unstages it`;
    assert.deepEqual(l.skipped, [
      { path: path.join(fx.layout.csiDriverDir('pv'), 'pvc-legacy'), reason: 'legacy-layout', detail: why('pvc-legacy'), volumeMode: 'Filesystem', driver: 'ebs.csi', volumeHandle: 'vol-legacy' },
      { path: path.join(fx.layout.csiDriverDir('pv'), 'pvc-legacy-2'), reason: 'legacy-layout', detail: why('pvc-legacy-2'), volumeMode: 'Filesystem' },
    ]);
  });

  it('an interrupted write whose complete temp file names no driver and no handle says so with empty names', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', file: 'absent' });
    await fx.writeRaw(path.relative(fx.root, path.join(fx.layout.csiVolumeDir(DRIVER, 'vol-1'), 'vol_data.json.tmp')), encodeVolumeData({ specVolID: 'pv-1' }));
    const [s] = (await list()).skipped;
    assert.equal(s?.reason, 'interrupted-write');
    assert.match(s?.detail ?? '', /\(naming driver "", handle ""\)/);
  });

  it('a listed volume carries the file\'s SELinux context (empty when absent) and whether it named its spec', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await fx.stage({ driver: DRIVER, handle: 'vol-2', file: { data: { driverName: DRIVER, volumeHandle: 'vol-2', specVolID: 'pv-2', seLinuxMountContext: 'system_u:object_r:container_file_t:s0:c1,c2' } } });
    const byHandle = new Map((await list()).volumes.map((v) => [v.spec.kind === 'persistent' ? v.spec.persistentVolume.csi?.volumeHandle : undefined, v]));
    assert.deepEqual(byHandle.get('vol-1'), {
      spec: constructPVSourceSpec('pv-1', DRIVER, 'vol-1'),
      seLinuxMountContext: '',
      deviceMountPath: fx.layout.csiDeviceMountPath(DRIVER, 'vol-1'),
      volumeMode: 'Filesystem',
      volumeDir: fx.layout.csiVolumeDir(DRIVER, 'vol-1'),
      hasSpecVolID: true,
    });
    assert.equal(byHandle.get('vol-2')?.seLinuxMountContext, 'system_u:object_r:container_file_t:s0:c1,c2');
  });

  it('builds and logs the V(4) skip line only when V(4) is enabled; the skip is listed either way', async () => {
    await fx.stage({ driver: DRIVER, handle: 'a', file: 'absent' });
    const quiet = new VerbosityRecorder(2);
    assert.equal((await list({ logger: quiet })).skipped.length, 1);
    assert.deepEqual(quiet.messages(), []);
    const verbose = new VerbosityRecorder(4);
    const { skipped } = await list({ logger: verbose });
    assert.deepEqual(verbose.lines, [
      { level: 4, severity: 'I', msg: 'Skipping a CSI global directory', values: { path: skipped[0]?.path, reason: 'unreadable-vol-data', detail: skipped[0]?.detail } },
    ]);
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
