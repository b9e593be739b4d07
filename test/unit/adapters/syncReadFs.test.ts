// The audit's synchronous, read-only FileSystem: same answers and bounds as NodeFileSystem, and
// every write refused.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NodeFileSystem } from '../../../src/adapters/node/nodeFs.js';
import { SyncReadFileSystem, withSyncStat } from '../../../src/adapters/node/syncReadFs.js';
import { errorCode, type FileSystem } from '../../../src/ports/fs.js';

let dir = '';
const sync = new SyncReadFileSystem();
const async = new NodeFileSystem();

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'nodevol-syncfs-'));
  await mkdir(path.join(dir, 'd'));
  await writeFile(path.join(dir, 'd', 'small'), 'hello');
  await writeFile(path.join(dir, 'big'), Buffer.alloc(100, 1));
  await symlink(path.join(dir, 'd', 'small'), path.join(dir, 'link'));
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function code(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return errorCode(err);
  }
}

describe('SyncReadFileSystem', () => {
  it('answers readdir, lstat, stat, realpath and readlink as NodeFileSystem does', async () => {
    const sortByName = (xs: { name: string }[]) => xs.sort((a, b) => a.name.localeCompare(b.name));
    assert.deepEqual(sortByName(await sync.readdir(dir)), sortByName(await async.readdir(dir)));
    for (const p of ['d', 'd/small', 'link']) {
      assert.deepEqual(await sync.lstat(path.join(dir, p)), await async.lstat(path.join(dir, p)));
      assert.deepEqual(await sync.stat(path.join(dir, p)), await async.stat(path.join(dir, p)));
    }
    assert.equal(await sync.realpath(path.join(dir, 'link')), await async.realpath(path.join(dir, 'link')));
    assert.equal(await sync.readlink(path.join(dir, 'link')), path.join(dir, 'd', 'small'));
  });

  it('reads a file whole, and refuses one over the bound with EFBIG', async () => {
    assert.equal(Buffer.from(await sync.readFile(path.join(dir, 'd', 'small'), 5)).toString(), 'hello');
    assert.equal(await code(sync.readFile(path.join(dir, 'big'), 99)), 'EFBIG');
    assert.equal((await sync.readFile(path.join(dir, 'big'), 100)).length, 100);
  });

  it('reads /proc files (size 0) in chunks, still bounded', async () => {
    const text = Buffer.from(await sync.readFile('/proc/self/mountinfo', 1 << 24)).toString();
    assert.match(text, / - /);
    assert.equal(await code(sync.readFile('/proc/self/mountinfo', 10)), 'EFBIG');
  });

  it('follows a final symlink only when not told otherwise (O_NOFOLLOW gives ELOOP)', async () => {
    assert.equal(Buffer.from(await sync.readFile(path.join(dir, 'link'), 100)).toString(), 'hello');
    assert.equal(await code(sync.readFile(path.join(dir, 'link'), 100, { noFollow: true })), 'ELOOP');
  });

  it('keeps errno codes and rejects instead of throwing', async () => {
    const p = sync.readdir(path.join(dir, 'missing'));
    assert.ok(p instanceof Promise);
    assert.equal(await code(p), 'ENOENT');
    assert.equal(await code(sync.lstat(path.join(dir, 'd', 'small', 'x'))), 'ENOTDIR');
  });

  it('refuses every write with EROFS and changes nothing', async () => {
    const target = path.join(dir, 'new');
    for (const p of [
      sync.mkdir(target, { recursive: true, mode: 0o750 }),
      sync.writeFile(target, new Uint8Array([1])),
      sync.rename(path.join(dir, 'd', 'small'), target),
      sync.fsyncDir(dir),
      sync.rmdir(path.join(dir, 'd')),
      sync.unlink(path.join(dir, 'd', 'small')),
      sync.symlink('x', target),
    ]) {
      assert.equal(await code(p), 'EROFS');
    }
    assert.equal(await code(async.lstat(target)), 'ENOENT');
    assert.equal(await code(async.lstat(path.join(dir, 'd', 'small'))), 'ok');
  });
});

describe('withSyncStat (the agent\'s cluster dir)', () => {
  /** NodeFileSystem, recording which of its methods were called. */
  function recording(): { fs: FileSystem; calls: string[] } {
    const calls: string[] = [];
    const fs = new Proxy(async, {
      get(target, prop, receiver) {
        const v: unknown = Reflect.get(target, prop, receiver);
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          calls.push(String(prop));
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    return { fs, calls };
  }

  it('answers lstat, and stat of anything but a symlink, itself: NodeFileSystem\'s answers and errno codes, rejecting rather than throwing', async () => {
    const { fs, calls } = recording();
    const wrapped = withSyncStat(fs);
    for (const p of ['d', 'd/small', 'link']) {
      assert.deepEqual(await wrapped.lstat(path.join(dir, p)), await async.lstat(path.join(dir, p)));
    }
    for (const p of ['d', 'd/small']) {
      assert.deepEqual(await wrapped.stat(path.join(dir, p)), await async.stat(path.join(dir, p)));
    }
    const missing = wrapped.stat(path.join(dir, 'missing'));
    assert.ok(missing instanceof Promise);
    assert.equal(await code(missing), 'ENOENT');
    assert.deepEqual(calls, []);
  });

  it('stats a symlink\'s target through the wrapped file system (a hung target holds a thread-pool thread, not the agent)', async () => {
    const { fs, calls } = recording();
    const wrapped = withSyncStat(fs);
    assert.deepEqual(await wrapped.stat(path.join(dir, 'link')), await async.stat(path.join(dir, 'link')));
    assert.deepEqual(calls, ['stat']);
  });

  it('hands every other call, writes included, to the wrapped file system', async () => {
    const { fs, calls } = recording();
    const wrapped = withSyncStat(fs);
    const target = path.join(dir, 'written');
    await wrapped.writeFile(target, new TextEncoder().encode('x'));
    assert.equal(Buffer.from(await wrapped.readFile(target, 10)).toString(), 'x');
    await wrapped.rename(target, `${target}2`);
    await wrapped.unlink(`${target}2`);
    await wrapped.readdir(dir);
    await wrapped.realpath(path.join(dir, 'link'));
    await wrapped.readlink(path.join(dir, 'link'));
    await wrapped.mkdir(path.join(dir, 'm'), { recursive: true, mode: 0o750 });
    await wrapped.fsyncDir(path.join(dir, 'm'));
    await wrapped.rmdir(path.join(dir, 'm'));
    await wrapped.symlink('x', path.join(dir, 's'));
    await wrapped.unlink(path.join(dir, 's'));
    assert.deepEqual(calls, ['writeFile', 'readFile', 'rename', 'unlink', 'readdir', 'realpath', 'readlink', 'mkdir', 'fsyncDir', 'rmdir', 'symlink', 'unlink']);
  });
});
