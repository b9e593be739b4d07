import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { FsError } from '../../../src/ports/fs.js';

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const dec = (b: Uint8Array): string => new TextDecoder().decode(b);

/** Asserts that `p` rejects with an FsError carrying `code` (and `path`, when given). */
async function rejectsWith(p: Promise<unknown>, code: string, path?: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof FsError, `expected an FsError, got ${String(err)}`);
    assert.equal(err.code, code);
    if (path !== undefined) assert.equal(err.path, path);
    return true;
  });
}

function sample(): MemFs {
  const fs = MemFs.create();
  fs.writeRaw('/a/b/file', 'hello');
  fs.writeRaw('/x/y/z', 'zz');
  return fs;
}

describe('MemFs lookups', () => {
  it('stat follows a symlink while lstat reports the link itself', async () => {
    const fs = sample();
    await fs.symlink('/a/b/file', '/a/link');
    const { type, size, mode, dev, ino } = await fs.stat('/a/link');
    assert.deepEqual({ type, size, mode, dev }, { type: 'file', size: 5, mode: 0o644, dev: 0 });
    assert.equal(ino, (await fs.lstat('/a/b/file')).ino, 'the target\'s inode');
    assert.equal((await fs.lstat('/a/link')).type, 'symlink');
  });

  it('readdir reports symlinks as symlinks without following them', async () => {
    const fs = sample();
    await fs.symlink('/a/b', '/a/dirlink');
    await fs.symlink('/nowhere', '/a/dangling');
    const entries = (await fs.readdir('/a')).sort((p, q) => p.name.localeCompare(q.name));
    assert.deepEqual(entries, [
      { name: 'b', type: 'directory' },
      { name: 'dangling', type: 'symlink' },
      { name: 'dirlink', type: 'symlink' },
    ]);
  });

  it('a missing path is ENOENT and a path through a file is ENOTDIR, both naming the path asked for', async () => {
    const fs = sample();
    await rejectsWith(fs.stat('/a/missing'), 'ENOENT', '/a/missing');
    await rejectsWith(fs.lstat('/a/b/file/inner'), 'ENOTDIR', '/a/b/file/inner');
    await rejectsWith(fs.readdir('/a/b/file'), 'ENOTDIR');
    await rejectsWith(fs.stat('/a/b/file/'), 'ENOTDIR');
  });

  it('realpath resolves relative link targets and ".." physically, like the kernel', async () => {
    const fs = sample();
    await fs.symlink('../../x/y', '/a/b/up');
    assert.equal(await fs.realpath('/a/b/up/z'), '/x/y/z');
    await fs.symlink('/x/y', '/a/ly');
    assert.equal(await fs.realpath('/a/ly/..'), '/x');
  });

  it('a symlink loop is ELOOP for stat and realpath', async () => {
    const fs = sample();
    await fs.symlink('/l2', '/l1');
    await fs.symlink('/l1', '/l2');
    await rejectsWith(fs.stat('/l1'), 'ELOOP');
    await rejectsWith(fs.realpath('/l1/x'), 'ELOOP');
  });

  it('readlink returns the stored target and is EINVAL on a non-link', async () => {
    const fs = sample();
    await fs.symlink('rel/target', '/a/rl');
    assert.equal(await fs.readlink('/a/rl'), 'rel/target');
    await rejectsWith(fs.readlink('/a/b/file'), 'EINVAL');
    await rejectsWith(fs.symlink('/x', '/a/rl'), 'EEXIST');
  });

  it('a relative path is refused with EINVAL', async () => {
    await rejectsWith(sample().stat('a/b'), 'EINVAL');
  });
});

describe('MemFs bounded reads', () => {
  it('reads a file up to exactly maxBytes and refuses a larger one with EFBIG', async () => {
    const fs = sample();
    assert.equal(dec(await fs.readFile('/a/b/file', 5)), 'hello');
    await rejectsWith(fs.readFile('/a/b/file', 4), 'EFBIG', '/a/b/file');
  });

  it('with noFollow a final symlink is ELOOP, but symlinks before it are followed', async () => {
    const fs = sample();
    await fs.symlink('/a/b/file', '/a/flink');
    await fs.symlink('/a/b', '/a/dlink');
    await rejectsWith(fs.readFile('/a/flink', 100, { noFollow: true }), 'ELOOP');
    assert.equal(dec(await fs.readFile('/a/flink', 100)), 'hello');
    assert.equal(dec(await fs.readFile('/a/dlink/file', 100, { noFollow: true })), 'hello');
  });

  it('reading a directory is EISDIR and a missing file ENOENT', async () => {
    const fs = sample();
    await rejectsWith(fs.readFile('/a/b', 100), 'EISDIR');
    await rejectsWith(fs.readFile('/a/none', 100), 'ENOENT');
  });

  it('returns a copy: changing the result does not change the file', async () => {
    const fs = sample();
    const first = await fs.readFile('/a/b/file', 100);
    first[0] = 0;
    assert.equal(dec(await fs.readFile('/a/b/file', 100)), 'hello');
  });
});

describe('MemFs changes', () => {
  it('mkdir without recursive is EEXIST on an existing path and ENOENT without a parent', async () => {
    const fs = sample();
    await rejectsWith(fs.mkdir('/a/b', { recursive: false, mode: 0o750 }), 'EEXIST');
    await rejectsWith(fs.mkdir('/q/r', { recursive: false, mode: 0o750 }), 'ENOENT');
    await fs.mkdir('/a/c', { recursive: false, mode: 0o750 });
    const { type, size, mode, dev } = await fs.stat('/a/c');
    assert.deepEqual({ type, size, mode, dev }, { type: 'directory', size: 0, mode: 0o750, dev: 0 });
  });

  it('recursive mkdir creates the chain, accepts an existing directory, and refuses a file (EEXIST) or a path through one (ENOTDIR)', async () => {
    const fs = sample();
    await fs.mkdir('/p/q/r', { recursive: true, mode: 0o700 });
    await fs.mkdir('/p/q/r', { recursive: true, mode: 0o700 });
    assert.equal((await fs.stat('/p/q')).mode, 0o700);
    await rejectsWith(fs.mkdir('/a/b/file', { recursive: true, mode: 0o755 }), 'EEXIST');
    await rejectsWith(fs.mkdir('/a/b/file/sub', { recursive: true, mode: 0o755 }), 'ENOTDIR');
  });

  it('rmdir refuses a non-empty directory (ENOTEMPTY), a file or symlink (ENOTDIR) and a missing path (ENOENT)', async () => {
    const fs = sample();
    await fs.symlink('/x/y', '/x/link');
    await rejectsWith(fs.rmdir('/a'), 'ENOTEMPTY');
    await rejectsWith(fs.rmdir('/a/b/file'), 'ENOTDIR');
    await rejectsWith(fs.rmdir('/x/link'), 'ENOTDIR');
    await rejectsWith(fs.rmdir('/nothing'), 'ENOENT');
    await fs.unlink('/a/b/file');
    await fs.rmdir('/a/b');
    assert.deepEqual(fs.tree('/a'), []);
  });

  it('unlink removes files and symlinks (not their targets) and is EISDIR on a directory', async () => {
    const fs = sample();
    await fs.symlink('/x/y/z', '/x/zlink');
    await fs.unlink('/x/zlink');
    assert.deepEqual(fs.tree('/x'), ['/x/y/', '/x/y/z']);
    await rejectsWith(fs.unlink('/x/y'), 'EISDIR');
  });

  it('writeFile creates with mode 0644 by default, replaces content, and is EISDIR on a directory', async () => {
    const fs = sample();
    await fs.writeFile('/a/new', enc('one'));
    await fs.writeFile('/a/new', enc('two'));
    assert.equal(dec(await fs.readFile('/a/new', 10)), 'two');
    assert.equal((await fs.stat('/a/new')).mode, 0o644);
    await fs.writeFile('/a/secret', enc('s'), { mode: 0o600 });
    assert.equal((await fs.stat('/a/secret')).mode, 0o600);
    await rejectsWith(fs.writeFile('/a/b', enc('x')), 'EISDIR');
    await rejectsWith(fs.writeFile('/nope/f', enc('x')), 'ENOENT');
  });

  it('fsyncs are recorded in syncLog, and fsyncDir needs a directory', async () => {
    const fs = sample();
    await fs.writeFile('/a/tmp', enc('x'), { fsync: true });
    await fs.writeFile('/a/other', enc('x'));
    await fs.fsyncDir('/a');
    await rejectsWith(fs.fsyncDir('/a/tmp'), 'ENOTDIR');
    await rejectsWith(fs.fsyncDir('/gone'), 'ENOENT');
    assert.deepEqual(fs.syncLog, ['fsync /a/tmp', 'fsyncDir /a']);
  });

  it('rename replaces a file and an empty directory but refuses what Linux refuses', async () => {
    const fs = sample();
    fs.writeRaw('/r/f1', '1');
    fs.writeRaw('/r/f2', '2');
    await fs.rename('/r/f1', '/r/f2');
    assert.equal(dec(await fs.readFile('/r/f2', 10)), '1');
    await fs.mkdir('/r/empty', { recursive: false, mode: 0o755 });
    await fs.rename('/x/y', '/r/empty');
    assert.deepEqual(fs.tree('/r'), ['/r/empty/', '/r/empty/z', '/r/f2']);
    await rejectsWith(fs.rename('/r/f2', '/a'), 'EISDIR');
    await rejectsWith(fs.rename('/r/empty', '/a/b/file'), 'ENOTDIR');
    await rejectsWith(fs.rename('/r/empty', '/a'), 'ENOTEMPTY');
    await rejectsWith(fs.rename('/a', '/a/b/inside'), 'EINVAL');
    await rejectsWith(fs.rename('/missing', '/r/m'), 'ENOENT');
  });

  it('writing through a dangling symlink creates its target', async () => {
    const fs = sample();
    await fs.symlink('/x/created', '/a/dangling');
    await fs.writeFile('/a/dangling', enc('via link'));
    assert.equal(dec(await fs.readFile('/x/created', 100)), 'via link');
  });

  it('a path the busy check claims cannot be removed or renamed (EBUSY)', async () => {
    const fs = sample();
    fs.setBusyCheck((p) => p === '/x/y');
    await fs.unlink('/x/y/z');
    await rejectsWith(fs.rmdir('/x/y'), 'EBUSY');
    await rejectsWith(fs.rename('/x/y', '/x/w'), 'EBUSY');
    fs.setBusyCheck(undefined);
    await fs.rmdir('/x/y');
  });
});

describe('MemFs test helpers', () => {
  it('tree lists every path below the root, sorted, directories with a trailing slash, links not followed', async () => {
    const fs = MemFs.create();
    fs.writeRaw('/k/pods/u1/volumes/v/vol_data.json', '{}');
    fs.writeRaw('/k/plugins/a', '');
    await fs.mkdir('/k/empty', { recursive: false, mode: 0o755 });
    await fs.symlink('/k/pods', '/k/plink');
    assert.deepEqual(fs.tree('/k'), [
      '/k/empty/',
      '/k/plink',
      '/k/plugins/',
      '/k/plugins/a',
      '/k/pods/',
      '/k/pods/u1/',
      '/k/pods/u1/volumes/',
      '/k/pods/u1/volumes/v/',
      '/k/pods/u1/volumes/v/vol_data.json',
    ]);
    assert.deepEqual(fs.tree('/absent'), []);
  });

  it('writeRaw creates the missing parents and writes bytes or text', async () => {
    const fs = MemFs.create();
    fs.writeRaw('/deep/er/bin', Uint8Array.of(1, 2, 3));
    assert.deepEqual([...(await fs.readFile('/deep/er/bin', 3))], [1, 2, 3]);
    assert.equal((await fs.stat('/deep/er')).type, 'directory');
  });
});
