// Gate CSIListGlobalVolumesWithoutStagingDir's SkippedGlobalDirs over the in-memory node's files:
// which directories KEP-6058's listing skipped it lists after all (a volume dir without its
// staging dir, an interrupted vol_data.json write finished from its temp file, a block volume
// whose staging dir is gone), with which spec; which leftovers it removes (an empty volume dir;
// one holding only an empty, unmounted globalmount and/or a complete temp file naming it), in
// which file calls; what it leaves alone (anything else, a mount, a dir not named by a hash, a
// dir a MountDevice works in); and that a removal that failed is retried by housekeeping until it
// is done or the dir is no leftover any more.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sha256Hex } from '../../../src/layout/names.js';
import { SkippedGlobalDirs } from '../../../src/nodevol/listGlobalVolumesWithoutStagingDir/skippedGlobalDirs.js';
import { VolumeDirClaims } from '../../../src/nodevol/listGlobalVolumesWithoutStagingDir/volumeDirClaims.js';
import type { SkippedGlobalDir } from '../../../src/volume/csi/globalVolumes.js';
import { encodeVolumeData, type VolumeData } from '../../../src/volume/csi/volumeData.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';
import { rootDirFault } from '../../support/rootDirFault.js';

const VOL_DIR = (handle: string): string => `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(handle)}`;
const DIR = VOL_DIR('vol-1');
const STAGING = `${DIR}/globalmount`;
const TEMP = `${DIR}/vol_data.json.tmp`;
const RECORD = `${DIR}/vol_data.json`;
const BLOCK_DIR = (specVolID: string): string => `${ROOT}/plugins/kubernetes.io/csi/volumeDevices/${specVolID}`;
const DATA: VolumeData = { driverName: DRIVER, specVolID: 'pv-1', volumeHandle: 'vol-1', volumeLifecycleMode: 'Persistent' };

const EMPTY_REMOVED = 'Removed an empty global volume directory left by an interrupted UnmountDevice';
const BEFORE_RECORD_REMOVED = 'Removed a global volume directory left by an interrupted MountDevice: no volume data file, so nothing was staged there';
const SYNC_FAILED = 'Could not sync the volume dir after finishing an interrupted write';

function setUp(): { node: InMemoryNode; fs: FaultyFs; claims: VolumeDirClaims; dirs: SkippedGlobalDirs; setFault: ReturnType<typeof rootDirFault> } {
  const node = new InMemoryNode();
  const setFault = rootDirFault(node);
  const fs = new FaultyFs(node.fs);
  const claims = new VolumeDirClaims();
  return { node, fs, claims, dirs: new SkippedGlobalDirs(volumeHostOf(node, { fs }), claims), setFault };
}

function text(data: VolumeData): string {
  return new TextDecoder().decode(encodeVolumeData(data));
}

function skipped(reason: SkippedGlobalDir['reason'], o: Partial<SkippedGlobalDir> = {}): SkippedGlobalDir {
  return { path: DIR, reason, detail: '', volumeMode: 'Filesystem', ...o };
}

/** The file system calls made since `from`, but the reads of the listing's checks (lstat, readdir, readFile). */
function changes(fs: FaultyFs, from = 0): string[] {
  return fs.calls.slice(from).filter((c) => !/^(lstat|readdir|readFile|realpath|stat) /.test(c));
}

function lines(node: InMemoryNode, msg: string): Readonly<Record<string, unknown>>[] {
  return node.logger.lines.filter((l) => l.msg === msg).map((l) => l.values);
}

describe('SkippedGlobalDirs.volumeDataMissingAtUnmountDevice: the empty volume dir a failed last rmdir left', () => {
  it('empty: removed at once, with a V(2) line', async () => {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    await t.dirs.volumeDataMissingAtUnmountDevice(DIR);
    assert.equal(t.node.fs.typeSync(DIR), undefined);
    assert.deepEqual(changes(t.fs), [`rmdir ${DIR}`]);
    assert.deepEqual(lines(t.node, EMPTY_REMOVED), [{ path: DIR }]);
    assert.equal(t.node.logger.lines.find((l) => l.msg === EMPTY_REMOVED)?.level, 2);
  });

  it('not named by a hash, not empty, or a mount point: kept, and no housekeeping pass looks at it again', async () => {
    const t = setUp();
    const odd = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/not-a-hash`;
    await t.node.fs.mkdir(odd, { recursive: true, mode: 0o750 });
    await t.dirs.volumeDataMissingAtUnmountDevice(odd);
    assert.deepEqual(t.fs.calls, [], 'not even read');
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    t.node.fs.writeRaw(`${DIR}/notes`, 'x');
    await t.dirs.volumeDataMissingAtUnmountDevice(DIR);
    const mounted = VOL_DIR('vol-2');
    await t.node.fs.mkdir(mounted, { recursive: true, mode: 0o750 });
    await t.node.mounter.mount('/dev/fake/vol-2', mounted, 'ext4', []);
    await t.dirs.volumeDataMissingAtUnmountDevice(mounted);
    assert.equal(t.node.fs.typeSync(odd), 'directory');
    assert.equal(t.node.fs.typeSync(DIR), 'directory');
    assert.equal(t.node.fs.typeSync(mounted), 'directory');
    assert.deepEqual(changes(t.fs), []);
    const mark = t.fs.calls.length;
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(t.fs.calls.slice(mark), []);
  });

  it('gone already: done, nothing left for housekeeping', async () => {
    const t = setUp();
    await t.dirs.volumeDataMissingAtUnmountDevice(DIR);
    assert.deepEqual(t.fs.calls, [`readdir ${DIR}`]);
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(t.fs.calls, [`readdir ${DIR}`]);
  });

  it('the rmdir fails (a read-only root dir): kept, and each housekeeping pass tries again until it is removed, then no more', async () => {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    t.setFault('EROFS');
    await t.dirs.volumeDataMissingAtUnmountDevice(DIR);
    assert.equal(t.node.fs.typeSync(DIR), 'directory');
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(changes(t.fs), [`rmdir ${DIR}`, `rmdir ${DIR}`]);
    assert.equal(t.node.fs.typeSync(DIR), 'directory');
    t.setFault(undefined);
    await t.dirs.removeLeftoverGlobalDirs();
    assert.equal(t.node.fs.typeSync(DIR), undefined);
    assert.deepEqual(lines(t.node, EMPTY_REMOVED), [{ path: DIR }]);
    const mark = t.fs.calls.length;
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(t.fs.calls.slice(mark), []);
  });

  it('the dir cannot be read (EACCES): kept and retried', async () => {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    t.fs.failOn('readdir', DIR, 'EACCES');
    await t.dirs.volumeDataMissingAtUnmountDevice(DIR);
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(t.fs.calls, [`readdir ${DIR}`, `readdir ${DIR}`]);
    assert.equal(t.node.fs.typeSync(DIR), 'directory');
  });

  it('a MountDevice works in the dir: kept, and the first housekeeping pass after it ended removes it', async () => {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    const claim = t.claims.claimForMountDevice(DIR);
    assert.equal(typeof claim, 'function');
    await t.dirs.volumeDataMissingAtUnmountDevice(DIR);
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(t.fs.calls, [], 'not even read while the MountDevice works');
    if (typeof claim === 'function') claim();
    await t.dirs.removeLeftoverGlobalDirs();
    assert.equal(t.node.fs.typeSync(DIR), undefined);
    // The removal's claim ended: a MountDevice can claim the dir again at once.
    assert.equal(typeof t.claims.claimForMountDevice(DIR), 'function');
  });
});

describe('SkippedGlobalDirs.volumeWithoutStagingDir: a volume dir without its staging dir', () => {
  it('named by its vol_data.json and lying where MountDevice puts it: listed, the spec named after specVolID, or the handle without one', async () => {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    const listed = await t.dirs.volumeWithoutStagingDir(skipped('no-globalmount', { driver: DRIVER, volumeHandle: 'vol-1', specVolID: 'pv-1' }));
    assert.deepEqual(listed, { spec: constructPVSourceSpec('pv-1', DRIVER, 'vol-1'), seLinuxMountContext: '', deviceMountPath: STAGING, volumeMode: 'Filesystem' });
    const noSpec = await t.dirs.volumeWithoutStagingDir(skipped('no-globalmount', { driver: DRIVER, volumeHandle: 'vol-1' }));
    assert.deepEqual(noSpec?.spec, constructPVSourceSpec('vol-1', DRIVER, 'vol-1'));
    assert.deepEqual(changes(t.fs), []);
  });

  it('no driver or no handle, a dir of another volume, a staging path there after all or that cannot be looked at: not listed, not removed', async () => {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('no-globalmount', { driver: DRIVER })), undefined);
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('no-globalmount', { volumeHandle: 'vol-1' })), undefined);
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('no-globalmount', { driver: DRIVER, volumeHandle: 'vol-2' })), undefined);
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('no-globalmount', { driver: 'other.example.com', volumeHandle: 'vol-1' })), undefined);
    assert.deepEqual(t.fs.calls, [], 'the path is checked first');
    t.fs.failOn('lstat', STAGING, 'EACCES');
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('no-globalmount', { driver: DRIVER, volumeHandle: 'vol-1' })), undefined);
    const other = setUp();
    await other.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    await other.node.fs.symlink('/elsewhere', STAGING); // there after all: a symlink, not this rule's case
    assert.equal(await other.dirs.volumeWithoutStagingDir(skipped('no-globalmount', { driver: DRIVER, volumeHandle: 'vol-1' })), undefined);
    assert.equal(t.node.fs.typeSync(DIR), 'directory');
    assert.deepEqual(changes(t.fs), []);
  });

  it('neither driver nor handle (no vol_data.json): the empty dir is removed, nothing listed', async () => {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('no-globalmount')), undefined);
    assert.equal(t.node.fs.typeSync(DIR), undefined);
    assert.deepEqual(lines(t.node, EMPTY_REMOVED), [{ path: DIR }]);
  });
});

describe('SkippedGlobalDirs.volumeWithoutStagingDir: a block volume whose staging dir is gone', () => {
  async function blockDir(t: ReturnType<typeof setUp>, specVolID: string, data: VolumeData): Promise<void> {
    await t.node.fs.mkdir(`${BLOCK_DIR(specVolID)}/data`, { recursive: true, mode: 0o750 });
    t.node.fs.writeRaw(`${BLOCK_DIR(specVolID)}/data/vol_data.json`, text(data));
  }

  it('its record names driver, handle and the spec of this very dir: listed as Block, with the global map path', async () => {
    const t = setUp();
    await blockDir(t, 'pv-1', DATA);
    const listed = await t.dirs.volumeWithoutStagingDir({ path: BLOCK_DIR('pv-1'), reason: 'not-staged', detail: '', volumeMode: 'Block' });
    assert.deepEqual(listed, { spec: constructPVSourceSpec('pv-1', DRIVER, 'vol-1', 'Block'), seLinuxMountContext: '', deviceMountPath: `${BLOCK_DIR('pv-1')}/dev`, volumeMode: 'Block' });
    assert.deepEqual(changes(t.fs), []);
    // The record is resolved for the root dir check; the root dir, the host's real path, is not.
    assert.deepEqual(t.fs.calls.filter((c) => c.startsWith('realpath ')), [`realpath ${BLOCK_DIR('pv-1')}/data/vol_data.json`]);
  });

  it('a record without driver, handle or spec, naming another dir, or unreadable: not listed', async () => {
    const t = setUp();
    const at = (specVolID: string): SkippedGlobalDir => ({ path: BLOCK_DIR(specVolID), reason: 'not-staged', detail: '', volumeMode: 'Block' });
    await blockDir(t, 'pv-a', { specVolID: 'pv-a', volumeHandle: 'vol-1' });
    await blockDir(t, 'pv-b', { driverName: DRIVER, specVolID: 'pv-b' });
    await blockDir(t, 'pv-c', { driverName: DRIVER, volumeHandle: 'vol-1' });
    await blockDir(t, 'pv-d', { ...DATA, specVolID: 'pv-other' });
    await blockDir(t, 'pv-e', { ...DATA, driverName: '', specVolID: 'pv-e' });
    await blockDir(t, 'pv-f', { ...DATA, volumeHandle: '', specVolID: 'pv-f' });
    await blockDir(t, 'pv-g', { ...DATA, specVolID: '' });
    for (const id of ['pv-a', 'pv-b', 'pv-c', 'pv-d', 'pv-e', 'pv-f', 'pv-g', 'pv-missing']) assert.equal(await t.dirs.volumeWithoutStagingDir(at(id)), undefined, id);
    assert.equal(await t.dirs.volumeWithoutStagingDir({ ...at('pv-a'), volumeMode: 'Filesystem' }), undefined);
    assert.deepEqual(changes(t.fs), []);
  });

  it('a record that is a symlink leading out of the root dir is not read; a Filesystem skip is never listed as Block', async () => {
    const t = setUp();
    t.node.fs.writeRaw('/elsewhere/vol_data.json', text(DATA));
    await t.node.fs.mkdir(`${BLOCK_DIR('pv-1')}/data`, { recursive: true, mode: 0o750 });
    await t.node.fs.symlink('/elsewhere/vol_data.json', `${BLOCK_DIR('pv-1')}/data/vol_data.json`);
    assert.equal(await t.dirs.volumeWithoutStagingDir({ path: BLOCK_DIR('pv-1'), reason: 'not-staged', detail: '', volumeMode: 'Block' }), undefined);
    await blockDir(t, 'pv-2', { ...DATA, specVolID: 'pv-2' });
    assert.equal(await t.dirs.volumeWithoutStagingDir({ path: BLOCK_DIR('pv-2'), reason: 'not-staged', detail: '', volumeMode: 'Filesystem' }), undefined);
  });

  it('other reasons, or the right reason in the other mode: not listed, nothing touched', async () => {
    const t = setUp();
    await blockDir(t, 'pv-1', DATA);
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    t.node.fs.writeRaw(TEMP, text(DATA));
    for (const s of [
      skipped('interrupted-write', { volumeMode: 'Block' }),
      skipped('unreadable-vol-data', { volumeMode: 'Block' }),
      skipped('not-staged'),
      skipped('name-mismatch'),
      { path: BLOCK_DIR('pv-1'), reason: 'symlink' as const, detail: '', volumeMode: 'Block' as const },
    ]) {
      assert.equal(await t.dirs.volumeWithoutStagingDir(s), undefined, `${s.reason} ${s.volumeMode}`);
    }
    assert.deepEqual(changes(t.fs), []);
    assert.equal(t.node.fs.typeSync(TEMP), 'file');
  });
});

describe('SkippedGlobalDirs.volumeWithoutStagingDir: an interrupted vol_data.json write', () => {
  it('a complete temp file naming this dir: renamed onto vol_data.json, the dir fsynced, listed with its spec and SELinux context', async () => {
    const t = setUp();
    await t.node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
    t.node.fs.writeRaw(TEMP, text({ ...DATA, seLinuxMountContext: 'system_u:object_r:container_file_t:s0:c1,c2' }));
    const listed = await t.dirs.volumeWithoutStagingDir(skipped('interrupted-write'));
    assert.deepEqual(listed, { spec: constructPVSourceSpec('pv-1', DRIVER, 'vol-1'), seLinuxMountContext: 'system_u:object_r:container_file_t:s0:c1,c2', deviceMountPath: STAGING, volumeMode: 'Filesystem' });
    assert.deepEqual(changes(t.fs), [`rename ${TEMP}`, `fsyncDir ${DIR}`]);
    assert.equal(t.node.fs.typeSync(RECORD), 'file');
    assert.equal(t.node.fs.typeSync(TEMP), undefined);
  });

  it('without specVolID or SELinux context: the spec is named after the handle, the context empty', async () => {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    t.node.fs.writeRaw(TEMP, text({ driverName: DRIVER, volumeHandle: 'vol-1' }));
    const listed = await t.dirs.volumeWithoutStagingDir(skipped('interrupted-write'));
    assert.deepEqual(listed, { spec: constructPVSourceSpec('vol-1', DRIVER, 'vol-1'), seLinuxMountContext: '', deviceMountPath: STAGING, volumeMode: 'Filesystem' });
  });

  it('the fsync of the dir fails: listed all the same, the failure said', async () => {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    t.node.fs.writeRaw(TEMP, text(DATA));
    t.fs.failOn('fsyncDir', DIR, 'EIO');
    const listed = await t.dirs.volumeWithoutStagingDir(skipped('interrupted-write'));
    assert.equal(listed?.deviceMountPath, STAGING);
    assert.equal(lines(t.node, SYNC_FAILED).length, 1);
    assert.equal(lines(t.node, SYNC_FAILED)[0]?.['path'], DIR);
  });

  it('a temp file naming another dir, without a driver or a handle, partial, or a vol_data.json beside it: left alone', async () => {
    for (const [name, bytes, record] of [
      ['another volume', text({ ...DATA, volumeHandle: 'vol-2' }), false],
      ['no driver', text({ volumeHandle: 'vol-1', specVolID: 'pv-1' }), false],
      ['no handle', text({ driverName: DRIVER, specVolID: 'pv-1' }), false],
      ['empty driver', text({ ...DATA, driverName: '' }), false],
      ['empty handle', text({ ...DATA, volumeHandle: '' }), false],
      ['partial', text(DATA).slice(0, 30), false],
      ['record beside it', text(DATA), true],
    ] as const) {
      const t = setUp();
      await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
      t.node.fs.writeRaw(TEMP, bytes);
      if (record) t.node.fs.writeRaw(RECORD, text(DATA));
      assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('interrupted-write')), undefined, name);
      assert.deepEqual(changes(t.fs), [], name);
      assert.equal(t.node.fs.typeSync(TEMP), 'file', name);
    }
  });

  it('a temp file with an empty handle, in the dir an empty handle hashes to: left alone', async () => {
    const t = setUp();
    const dir = VOL_DIR('');
    await t.node.fs.mkdir(dir, { recursive: true, mode: 0o750 });
    t.node.fs.writeRaw(`${dir}/vol_data.json.tmp`, text({ ...DATA, volumeHandle: '' }));
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('interrupted-write', { path: dir })), undefined);
    assert.deepEqual(changes(t.fs), []);
  });

  it('the rename fails (a read-only root dir): not listed; the dir is removed once writable, by housekeeping', async () => {
    const t = setUp();
    await t.node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
    t.node.fs.writeRaw(TEMP, text(DATA));
    t.setFault('EROFS');
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('interrupted-write')), undefined);
    assert.equal(t.node.fs.typeSync(TEMP), 'file');
    t.setFault(undefined);
    const mark = t.fs.calls.length;
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(changes(t.fs, mark), [`unlink ${TEMP}`, `rmdir ${STAGING}`, `rmdir ${DIR}`]);
    assert.equal(t.node.fs.typeSync(DIR), undefined);
    assert.deepEqual(lines(t.node, BEFORE_RECORD_REMOVED), [{ path: DIR, stagingDir: 'empty', tempFile: 'complete, never renamed' }]);
  });
});

describe('SkippedGlobalDirs: a volume dir left before its record (unreadable-vol-data; the housekeeping retries)', () => {
  async function removal(setUpDir: (t: ReturnType<typeof setUp>) => Promise<void> | void): Promise<{ t: ReturnType<typeof setUp>; calls: string[] }> {
    const t = setUp();
    await t.node.fs.mkdir(DIR, { recursive: true, mode: 0o750 });
    await setUpDir(t);
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('unreadable-vol-data')), undefined);
    return { t, calls: changes(t.fs) };
  }

  it('only an empty, unmounted globalmount: it and the dir are removed, said with the staging dir', async () => {
    const { t, calls } = await removal((t) => t.node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 }));
    assert.deepEqual(calls, [`rmdir ${STAGING}`, `rmdir ${DIR}`]);
    assert.deepEqual(lines(t.node, BEFORE_RECORD_REMOVED), [{ path: DIR, stagingDir: 'empty' }]);
  });

  it('only a complete temp file naming the dir: unlinked, then the dir removed, said with the temp file', async () => {
    const { t, calls } = await removal((t) => t.node.fs.writeRaw(TEMP, text(DATA)));
    assert.deepEqual(calls, [`unlink ${TEMP}`, `rmdir ${DIR}`]);
    assert.deepEqual(lines(t.node, BEFORE_RECORD_REMOVED), [{ path: DIR, tempFile: 'complete, never renamed' }]);
  });

  it('nothing in it: the empty-dir rule', async () => {
    const { t, calls } = await removal(() => undefined);
    assert.deepEqual(calls, [`rmdir ${DIR}`]);
    assert.deepEqual(lines(t.node, EMPTY_REMOVED), [{ path: DIR }]);
  });

  it('anything else: kept (another file, a globalmount that is a file, not empty or mounted, a partial temp file)', async () => {
    for (const [name, make] of [
      ['another file', (t: ReturnType<typeof setUp>) => t.node.fs.writeRaw(`${DIR}/notes`, 'x')],
      ['another file beside an empty globalmount', async (t: ReturnType<typeof setUp>) => {
        await t.node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
        t.node.fs.writeRaw(`${DIR}/notes`, 'x');
      }],
      ['globalmount a file', (t: ReturnType<typeof setUp>) => t.node.fs.writeRaw(STAGING, '')],
      ['globalmount not empty', (t: ReturnType<typeof setUp>) => t.node.fs.writeRaw(`${STAGING}/data`, 'x')],
      ['globalmount mounted', async (t: ReturnType<typeof setUp>) => {
        await t.node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
        await t.node.mounter.mount('/dev/fake/vol-1', STAGING, 'ext4', []);
      }],
      ['a partial temp file', (t: ReturnType<typeof setUp>) => t.node.fs.writeRaw(TEMP, text(DATA).slice(0, 30))],
      ['a temp file naming another dir, beside an empty globalmount', async (t: ReturnType<typeof setUp>) => {
        await t.node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
        t.node.fs.writeRaw(TEMP, text({ ...DATA, volumeHandle: 'vol-2' }));
      }],
    ] as const) {
      const { t, calls } = await removal(make);
      assert.deepEqual(calls, [], name);
      assert.equal(t.node.fs.typeSync(DIR), 'directory', name);
      // Kept is no leftover: housekeeping does not look again.
      const mark = t.fs.calls.length;
      await t.dirs.removeLeftoverGlobalDirs();
      assert.deepEqual(t.fs.calls.slice(mark), [], name);
    }
  });

  it('not named by a hash: kept, not even read', async () => {
    const t = setUp();
    const odd = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/not-a-hash`;
    await t.node.fs.mkdir(`${odd}/globalmount`, { recursive: true, mode: 0o750 });
    assert.equal(await t.dirs.volumeWithoutStagingDir({ path: odd, reason: 'unreadable-vol-data', detail: '', volumeMode: 'Filesystem' }), undefined);
    assert.deepEqual(t.fs.calls, []);
  });

  it('a removal that fails half-way (the dir\'s rmdir, EBUSY) is retried by each housekeeping pass: then the empty-dir rule', async () => {
    const t = setUp();
    await t.node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
    t.fs.failOn('rmdir', DIR, 'EBUSY');
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('unreadable-vol-data')), undefined);
    assert.equal(t.node.fs.typeSync(STAGING), undefined);
    assert.equal(t.node.fs.typeSync(DIR), 'directory');
    // Retried: the dir is empty now, so the empty-dir rule (read, read again, rmdir), which fails again.
    let mark = t.fs.calls.length;
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(t.fs.calls.slice(mark), [`readdir ${DIR}`, `readdir ${DIR}`, `rmdir ${DIR}`]);
    mark = t.fs.calls.length;
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(t.fs.calls.slice(mark), [`readdir ${DIR}`, `readdir ${DIR}`, `rmdir ${DIR}`], 'and again at the next pass');
  });

  it('gone by the time it is looked at: done', async () => {
    const t = setUp();
    assert.equal(await t.dirs.volumeWithoutStagingDir(skipped('unreadable-vol-data')), undefined);
    const mark = t.fs.calls.length;
    await t.dirs.removeLeftoverGlobalDirs();
    assert.deepEqual(t.fs.calls.slice(mark), []);
  });
});
