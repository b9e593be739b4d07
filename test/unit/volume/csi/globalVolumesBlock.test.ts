// CSI ListGlobalVolumes, raw block walk (listGlobalBlockVolumes of csi_global_volumes.go in the
// latest revision of kubernetes PR #138454): the result order, each skip's reason, detail and
// identity, the symlinks it refuses to follow, and the volume it reports. The filesystem walk and
// the first block cases are in globalVolumes.test.ts.
import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { NodeFileSystem } from '../../../../src/adapters/node/nodeFs.js';
import type { DirEntry, FileSystem } from '../../../../src/ports/fs.js';
import { CsiPlugin } from '../../../../src/volume/csi/csiPlugin.js';
import type { GlobalVolumeListing } from '../../../../src/volume/csi/globalVolumes.js';
import { specName } from '../../../../src/volume/spec.js';
import { FaultyFs } from '../../../support/faultyFs.js';
import { volumeHost } from '../../../support/hosts.js';
import { NodeFixture } from '../../../support/nodeFixture.js';

const DRIVER = 'test-driver';

/** Hands every directory listing back in reverse order: the walk may not rely on the order the disk gives. */
class ReversedReaddirFs extends NodeFileSystem {
  override async readdir(p: string): Promise<DirEntry[]> {
    return (await super.readdir(p)).reverse();
  }
}

describe('CSI ListGlobalVolumes: block walk, outcomes', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });
  const listing = (fs?: FileSystem): Promise<GlobalVolumeListing> =>
    new CsiPlugin(volumeHost(fx, fs === undefined ? { gateOn: true } : { gateOn: true, fs })).listGlobalVolumesDetailed();
  const blockDir = (): string => fx.layout.csiBlockDir();
  const dataPath = (spec: string): string => path.join(fx.layout.csiBlockDataDir(spec), 'vol_data.json');
  const volDir = (spec: string): string => fx.layout.csiBlockVolumeDir(spec);

  describe('order', () => {
    // Go's os.ReadDir returns the entries sorted by name, so kubelet lists in name order whatever
    // order the directory itself is read in.
    for (const [name, fs] of [
      ['as the disk reads them', undefined],
      ['read in reverse', new ReversedReaddirFs()],
    ] as const) {
      it(`reports volumes and skips in name order (${name})`, async () => {
        for (const spec of ['pv-c', 'pv-a', 'pv-b']) await fx.stageBlock({ specName: spec, driver: DRIVER, handle: `h-${spec}` });
        for (const spec of ['x-2', 'x-1']) await fx.stageBlock({ specName: spec, driver: DRIVER, handle: `h-${spec}`, staged: false });
        const l = await listing(fs);
        assert.deepEqual(l.volumes.map((v) => specName(v.spec)), ['pv-a', 'pv-b', 'pv-c']);
        assert.deepEqual(l.skipped.map((s) => s.path), [volDir('x-1'), volDir('x-2')]);
      });
    }
  });

  describe('the volumeDevices directory', () => {
    it('a volumeDevices that cannot be listed is one unreadable-dir skip; the filesystem volumes stand', async () => {
      const gm = await fx.stage({ driver: DRIVER, handle: 'fs-1' });
      await fx.writeRaw('plugins/kubernetes.io/csi/volumeDevices', 'not a directory');
      const l = await listing();
      assert.deepEqual(l.volumes.map((v) => v.deviceMountPath), [gm]);
      assert.equal(l.skipped.length, 1);
      const [s] = l.skipped;
      assert.deepEqual([s?.path, s?.reason, s?.volumeMode], [blockDir(), 'unreadable-dir', 'Block']);
      assert.match(s?.detail ?? '', /ENOTDIR/);
    });

    it('no volumeDevices at all is no skip', async () => {
      await fx.stage({ driver: DRIVER, handle: 'fs-1' });
      const l = await listing();
      assert.equal(l.volumes.length, 1);
      assert.deepEqual(l.skipped, []);
    });

    it('ignores a regular file beside the volume directories', async () => {
      await fx.stageBlock({ specName: 'pv-a', driver: DRIVER, handle: 'h-a' });
      await fx.writeRaw('plugins/kubernetes.io/csi/volumeDevices/stray.txt', 'x');
      const l = await listing();
      assert.deepEqual(l.volumes.map((v) => specName(v.spec)), ['pv-a']);
      assert.deepEqual(l.skipped, []);
    });

    it('never follows a symlinked volume directory', async () => {
      const real = await fx.stageBlock({ specName: 'pv-a', driver: DRIVER, handle: 'h-a' });
      await mkdir(fx.layout.csiBlockStagingPath('pv-link'), { recursive: true });
      await symlink(real, volDir('pv-link'));
      const l = await listing();
      assert.deepEqual(l.volumes.map((v) => v.volumeDir), [real]);
      assert.deepEqual(l.skipped, [
        { path: volDir('pv-link'), reason: 'symlink', detail: 'block volume directory is a symlink; not followed', volumeMode: 'Block' },
      ]);
    });
  });

  describe('staged or not (kubelet: staging/<spec> exists)', () => {
    it('names the missing staging path when there is no staging directory at all', async () => {
      await fx.stageBlock({ specName: 'pv-a', driver: DRIVER, handle: 'h-a', staged: false });
      const l = await listing();
      assert.deepEqual(l.volumes, []);
      assert.deepEqual(l.skipped, [
        {
          path: volDir('pv-a'),
          reason: 'not-staged',
          detail: `${path.join(blockDir(), 'staging', 'pv-a')} does not exist (unstaged, cleanup unfinished)`,
          volumeMode: 'Block',
        },
      ]);
    });

    it('a symlinked staging directory stages nothing: it is never followed', async () => {
      await fx.stageBlock({ specName: 'pv-a', driver: DRIVER, handle: 'h-a', staged: false });
      const elsewhere = path.join(fx.base, 'elsewhere-staging');
      await mkdir(path.join(elsewhere, 'pv-a'), { recursive: true });
      await symlink(elsewhere, path.join(blockDir(), 'staging'));
      const l = await listing();
      assert.deepEqual(l.volumes, []);
      assert.deepEqual(l.skipped, [
        {
          path: volDir('pv-a'),
          reason: 'not-staged',
          detail: `${path.join(blockDir(), 'staging')} is a symlink; not followed`,
          volumeMode: 'Block',
        },
      ]);
    });

    it('a staging that is a file stages nothing, and says so', async () => {
      await fx.stageBlock({ specName: 'pv-a', driver: DRIVER, handle: 'h-a', staged: false });
      await writeFile(path.join(blockDir(), 'staging'), '');
      const l = await listing();
      assert.deepEqual(l.volumes, []);
      assert.deepEqual(l.skipped, [{ path: volDir('pv-a'), reason: 'not-staged', detail: `${path.join(blockDir(), 'staging')} is not a directory`, volumeMode: 'Block' }]);
    });

    it('a staging directory that cannot be listed: not-staged, with the error as the detail', async () => {
      await fx.stageBlock({ specName: 'pv-a', driver: DRIVER, handle: 'h-a' });
      const stagingDir = path.join(blockDir(), 'staging');
      const l = await listing(new FaultyFs(new NodeFileSystem()).failOn('readdir', stagingDir, 'EACCES'));
      assert.deepEqual(l.volumes, []);
      assert.deepEqual(l.skipped, [{ path: volDir('pv-a'), reason: 'not-staged', detail: `readdir ${stagingDir}: EACCES`, volumeMode: 'Block' }]);
    });
  });

  describe('the data file', () => {
    it('an absent vol_data.json: unreadable-vol-data naming the file once', async () => {
      await fx.stageBlock({ specName: 'pv-a', driver: DRIVER, handle: 'h-a', file: 'absent' });
      const l = await listing();
      assert.deepEqual(l.skipped, [
        {
          path: volDir('pv-a'),
          reason: 'unreadable-vol-data',
          detail: `failed to open volume data file ${dataPath('pv-a')}: ENOENT (no such file or directory)`,
          volumeMode: 'Block',
        },
      ]);
    });

    it('refuses a data/ directory that is a symlink leading out of the root dir', async () => {
      const outside = path.join(fx.base, 'outside', 'data');
      await mkdir(outside, { recursive: true });
      await writeFile(path.join(outside, 'vol_data.json'), `{"driverName":"${DRIVER}","specVolID":"pv-a","volumeHandle":"h-a"}\n`);
      await mkdir(volDir('pv-a'), { recursive: true });
      await symlink(outside, fx.layout.csiBlockDataDir('pv-a'));
      await mkdir(fx.layout.csiBlockStagingPath('pv-a'), { recursive: true });
      const l = await listing();
      assert.deepEqual(l.volumes, []);
      assert.deepEqual(l.skipped, [
        {
          path: volDir('pv-a'),
          reason: 'unreadable-vol-data',
          detail: `refusing to read ${dataPath('pv-a')}: it resolves to ${path.join(outside, 'vol_data.json')}, outside the root dir ${fx.root}`,
          volumeMode: 'Block',
        },
      ]);
    });
  });

  describe('identity checks, with the identity the file carries', () => {
    // Each file's data, and the skip it must give; the skip carries the file's non-empty
    // driverName, volumeHandle and specVolID (identityOf) and nothing else.
    const cases: readonly { name: string; data: Record<string, string>; reason: string; detail: string }[] = [
      { name: 'no driverName: missing-driver-or-handle naming driverName', data: { volumeHandle: 'h-a', specVolID: 'pv-a' }, reason: 'missing-driver-or-handle', detail: 'field driverName is missing or empty' },
      { name: 'no volumeHandle: missing-driver-or-handle naming volumeHandle', data: { driverName: DRIVER, specVolID: 'pv-a' }, reason: 'missing-driver-or-handle', detail: 'field volumeHandle is missing or empty' },
      { name: 'empty strings are no identity', data: { driverName: '', volumeHandle: '', specVolID: '' }, reason: 'missing-driver-or-handle', detail: 'field driverName is missing or empty' },
      { name: 'no specVolID: no-spec-vol-id', data: { driverName: DRIVER, volumeHandle: 'h-a' }, reason: 'no-spec-vol-id', detail: 'field specVolID is missing or empty' },
      { name: 'a specVolID naming another directory: name-mismatch naming both directories', data: { driverName: DRIVER, volumeHandle: 'h-a', specVolID: 'pv-other' }, reason: 'name-mismatch', detail: 'field specVolID "pv-other" names directory pv-other, not pv-a' },
    ];
    for (const c of cases) {
      it(`${c.name}; the skip carries exactly the identity the file gives`, async () => {
        await fx.stageBlock({ specName: 'pv-a', driver: DRIVER, handle: 'h-a', file: { data: c.data } });
        const l = await listing();
        assert.deepEqual(l.volumes, []);
        const identity = Object.fromEntries(['driverName', 'volumeHandle', 'specVolID'].filter((k) => (c.data[k] ?? '') !== '').map((k) => [k === 'driverName' ? 'driver' : k, c.data[k]]));
        assert.deepEqual(l.skipped, [{ path: volDir('pv-a'), reason: c.reason, detail: `${dataPath('pv-a')}: ${c.detail}`, volumeMode: 'Block', ...identity }]);
      });
    }
  });

  // The root dir is the host's real path, resolved once when the host is made: each block data
  // file is resolved for the root dir check (a block walk vouches for no parent), the root dir never.
  it('resolves each block data file for the root dir check, and never the root dir', async () => {
    for (const spec of ['pv-a', 'pv-b']) await fx.stageBlock({ specName: spec, driver: DRIVER, handle: `h-${spec}` });
    const fs = new FaultyFs(new NodeFileSystem());
    const l = await listing(fs);
    assert.deepEqual(l.volumes.map((v) => specName(v.spec)), ['pv-a', 'pv-b']);
    const resolved = fs.calls.filter((c) => c.startsWith('realpath '));
    assert.ok(resolved.includes(`realpath ${dataPath('pv-a')}`) && resolved.includes(`realpath ${dataPath('pv-b')}`), resolved.join('\n'));
    assert.deepEqual(resolved.filter((c) => c === `realpath ${fx.root}`), []);
  });

  it('reports a staged block volume with no SELinux context, whatever its file says, and with its name', async () => {
    await fx.stageBlock({
      specName: 'pv-a',
      driver: DRIVER,
      handle: 'h-a',
      file: { data: { driverName: DRIVER, volumeHandle: 'h-a', specVolID: 'pv-a', seLinuxMountContext: 'system_u:object_r:container_file_t:s0' } },
    });
    const l = await listing();
    assert.deepEqual(l.skipped, []);
    assert.equal(l.volumes.length, 1);
    const { spec, ...rest } = l.volumes[0]!;
    assert.equal(specName(spec), 'pv-a');
    assert.deepEqual(rest, {
      seLinuxMountContext: '',
      deviceMountPath: fx.layout.csiGlobalMapPath('pv-a'),
      volumeMode: 'Block',
      volumeDir: volDir('pv-a'),
      hasSpecVolID: true,
    });
  });
});
