import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../../src/adapters/memory/memoryMounter.js';
import { FsError } from '../../../src/ports/fs.js';
import { getMountRefs } from '../../../src/mount/mountRefs.js';

const K = '/var/lib/kubelet';
const GLOBAL = `${K}/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/4e29aa01861d/globalmount`;
const POD = `${K}/pods/6f1c0000-4e5f/volumes/kubernetes.io~csi/pvc-3f2a9e0f/mount`;
const POD2 = `${K}/pods/7a2d0000-1b2c/volumes/kubernetes.io~csi/pvc-3f2a9e0f/mount`;

async function rejectsWith(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => err instanceof FsError && err.code === code);
}

async function node(...dirs: string[]): Promise<{ fs: MemFs; mounter: MemoryMounter }> {
  const fs = MemFs.create();
  for (const d of dirs) await fs.mkdir(d, { recursive: true, mode: 0o750 });
  return { fs, mounter: new MemoryMounter(fs) };
}

describe('MemoryMounter table', () => {
  it('starts with only the root filesystem, which round-trips through the strict parser', async () => {
    const { mounter } = await node();
    const table = await mounter.readMountTable();
    assert.equal(table.entries.length, 1);
    assert.deepEqual(
      table.entries.map((e) => [e.id, e.major, e.minor, e.root, e.mountPoint]),
      [[22, 8, 1, '/', '/']],
    );
  });

  it('a device mount gets a fresh 259:N device, root "/", the next id from 600 and the containing mount as parent', async () => {
    const { mounter } = await node(GLOBAL, '/mnt/other');
    await mounter.mount('/dev/fake/vol-1', GLOBAL, 'ext4', []);
    await mounter.mount('/dev/fake/vol-2', '/mnt/other', 'xfs', ['ro']);
    const [, first, second] = (await mounter.readMountTable()).entries;
    assert.deepEqual(
      [first?.id, first?.parentId, first?.major, first?.minor, first?.root, first?.mountPoint, first?.fsType, first?.source],
      [600, 22, 259, 1, '/', GLOBAL, 'ext4', '/dev/fake/vol-1'],
    );
    assert.deepEqual([second?.id, second?.major, second?.minor, second?.mountOptions[0]], [601, 259, 2, 'ro']);
  });

  it('mounting the same device twice shows the same major:minor, as one superblock does', async () => {
    const { mounter } = await node('/m1', '/m2');
    await mounter.mount('/dev/fake/v', '/m1', 'ext4', []);
    await mounter.mount('/dev/fake/v', '/m2', 'ext4', []);
    const [m1, m2] = mounter.entries().slice(1);
    assert.deepEqual([m1?.major, m1?.minor], [m2?.major, m2?.minor]);
  });

  it('a missing target is ENOENT and adds nothing', async () => {
    const { mounter } = await node();
    await rejectsWith(mounter.mount('/dev/fake/v', '/no/such/dir', 'ext4', []), 'ENOENT');
    assert.equal(mounter.entries().length, 1);
    assert.deepEqual(mounter.actions, []);
  });

  it('escapes a mount point with a space as \\040 and still answers isLikelyNotMountPoint for the plain path', async () => {
    const { mounter } = await node('/mnt/with space');
    await mounter.mount('/dev/fake/v', '/mnt/with space', 'ext4', []);
    assert.match(mounter.render(), / \/mnt\/with\\040space /);
    const table = await mounter.readMountTable();
    assert.equal(table.entries[1]?.mountPoint, '/mnt/with\\040space');
    assert.equal(await mounter.isLikelyNotMountPoint('/mnt/with space'), false);
  });

  it('records the canonical path when the target is reached through a symlink', async () => {
    const { fs, mounter } = await node('/real/dir');
    await fs.symlink('/real', '/alias');
    await mounter.mount('/dev/fake/v', '/alias/dir', 'ext4', []);
    assert.equal(mounter.entries()[1]?.mountPoint, '/real/dir');
    assert.equal(mounter.isMounted('/real/dir'), true);
  });
});

describe('MemoryMounter bind mounts and GetMountRefs', () => {
  it('after stage and publish, GetMountRefs of the pod target is the staging path and vice versa', async () => {
    const { fs, mounter } = await node(GLOBAL, POD, POD2);
    await mounter.mount('/dev/fake/vol-1', GLOBAL, 'ext4', []);
    await mounter.mount(GLOBAL, POD, '', ['bind']);
    await mounter.mount(GLOBAL, POD2, '', ['bind']);
    const table = await mounter.readMountTable();
    assert.deepEqual(await getMountRefs(fs, table, POD), [GLOBAL, POD2]);
    assert.deepEqual(await getMountRefs(fs, table, GLOBAL), [POD, POD2]);
    const pod = table.entries.find((e) => e.mountPoint === POD);
    assert.deepEqual([pod?.major, pod?.minor, pod?.root, pod?.fsType, pod?.source], [259, 1, '/', 'ext4', '/dev/fake/vol-1']);
  });

  it('a bind mount of a subdirectory gets that subdirectory as root and is not a reference of the global mount', async () => {
    const { fs, mounter } = await node(GLOBAL, '/subpath/0');
    await mounter.mount('/dev/fake/vol-1', GLOBAL, 'ext4', []);
    await fs.mkdir(`${GLOBAL}/app`, { recursive: false, mode: 0o755 });
    await mounter.mount(`${GLOBAL}/app`, '/subpath/0', '', ['bind']);
    const table = await mounter.readMountTable();
    assert.equal(table.entries.at(-1)?.root, '/app');
    assert.deepEqual(await getMountRefs(fs, table, GLOBAL), []);
    assert.deepEqual(await getMountRefs(fs, table, `${GLOBAL}/app`), ['/subpath/0']);
  });

  it('a bind mount of a path on the root filesystem gets the path as root on 8:1', async () => {
    const { mounter } = await node('/srv/data', '/mnt/b');
    await mounter.mount('/srv/data', '/mnt/b', '', ['bind']);
    const e = mounter.entries().at(-1);
    assert.deepEqual([e?.major, e?.minor, e?.root], [8, 1, '/srv/data']);
  });

  it('a bind mount of a bind mount keeps the device and the original root', async () => {
    const { mounter } = await node(GLOBAL, '/a', '/b');
    await mounter.mount('/dev/fake/v', GLOBAL, 'ext4', []);
    await mounter.mount(GLOBAL, '/a', '', ['bind']);
    await mounter.mount('/a', '/b', '', ['bind']);
    const e = mounter.entries().at(-1);
    assert.deepEqual([e?.major, e?.minor, e?.root], [259, 1, '/']);
  });

  it('refuses to bind a directory onto a file (ENOTDIR)', async () => {
    const { fs, mounter } = await node('/dir');
    fs.writeRaw('/file', '');
    await rejectsWith(mounter.mount('/dir', '/file', '', ['bind']), 'ENOTDIR');
    await rejectsWith(mounter.mount('/dev/fake/v', '/file', 'ext4', []), 'ENOTDIR');
  });
});

describe('MemoryMounter unmount, checks and reboot', () => {
  it('unmount removes the most recent mount at the target, and a path that is not mounted is EINVAL', async () => {
    const { mounter } = await node('/m');
    await mounter.mount('/dev/fake/a', '/m', 'ext4', []);
    await mounter.mount('/dev/fake/b', '/m', 'ext4', []);
    await mounter.unmount('/m');
    assert.deepEqual(mounter.entries().map((e) => e.source), ['/dev/sda1', '/dev/fake/a']);
    await mounter.unmount('/m');
    await rejectsWith(mounter.unmount('/m'), 'EINVAL');
    await rejectsWith(mounter.unmount('/absent'), 'ENOENT');
    assert.deepEqual(mounter.actions, ['mount /dev/fake/a /m', 'mount /dev/fake/b /m', 'unmount /m', 'unmount /m']);
  });

  it('isLikelyNotMountPoint is false only at a mount point and rejects a missing path with ENOENT', async () => {
    const { mounter } = await node('/m/sub');
    await mounter.mount('/dev/fake/a', '/m', 'ext4', []);
    assert.equal(await mounter.isLikelyNotMountPoint('/m'), false);
    assert.equal(await mounter.isLikelyNotMountPoint('/m/sub'), true);
    await rejectsWith(mounter.isLikelyNotMountPoint('/m/none'), 'ENOENT');
  });

  it('failNextUnmount fails exactly one unmount of that target, leaving the mount in place', async () => {
    const { mounter } = await node('/m');
    await mounter.mount('/dev/fake/a', '/m', 'ext4', []);
    mounter.failNextUnmount('/m', 'EBUSY');
    await rejectsWith(mounter.unmount('/m'), 'EBUSY');
    assert.equal(mounter.isMounted('/m'), true);
    await mounter.unmount('/m');
    assert.equal(mounter.isMounted('/m'), false);
  });

  it('a mount point in a MemFs cannot be removed until it is unmounted', async () => {
    const { fs, mounter } = await node('/m');
    await mounter.mount('/dev/fake/a', '/m', 'ext4', []);
    await rejectsWith(fs.rmdir('/m'), 'EBUSY');
    await mounter.unmount('/m');
    await fs.rmdir('/m');
  });

  it('reboot drops every mount but "/", so the staging path has no references any more', async () => {
    const { fs, mounter } = await node(GLOBAL, POD);
    await mounter.mount('/dev/fake/vol-1', GLOBAL, 'ext4', []);
    await mounter.mount(GLOBAL, POD, '', ['bind']);
    mounter.reboot();
    assert.deepEqual(mounter.entries().map((e) => e.mountPoint), ['/']);
    const table = await mounter.readMountTable();
    assert.deepEqual(await getMountRefs(fs, table, GLOBAL), []);
    assert.equal(await mounter.isLikelyNotMountPoint(GLOBAL), true);
    assert.equal(mounter.actions.at(-1), 'reboot');
    await fs.rmdir(POD);
  });

  it('entries() returns copies that do not change the table', async () => {
    const { mounter } = await node('/m');
    await mounter.mount('/dev/fake/a', '/m', 'ext4', ['ro']);
    const copy = mounter.entries();
    (copy[1]?.options as string[]).push('changed');
    assert.deepEqual(mounter.entries()[1]?.options, ['ro']);
  });
});
