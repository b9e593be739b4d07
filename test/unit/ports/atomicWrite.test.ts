// writeFileAtomic: the one atomic, durable write of the FileSystem port (vol_data.json, the
// cluster dir's node-status.json and last-good copies, the mock driver's state, the e2e disk).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { atomicTempPath, FsError, writeFileAtomic } from '../../../src/ports/fs.js';
import { FaultyFs } from '../../support/faultyFs.js';

const DIR = '/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc';
const FILE = `${DIR}/vol_data.json`;
const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const dec = (b: Uint8Array): string => new TextDecoder().decode(b);

async function setup(): Promise<{ mem: MemFs; fs: FaultyFs }> {
  const mem = new MemFs();
  await mem.mkdir(DIR, { recursive: true, mode: 0o750 });
  return { mem, fs: new FaultyFs(mem) };
}

describe('writeFileAtomic', () => {
  it('writes <path>.tmp with fsync, renames it over the file, then fsyncs the directory', async () => {
    const { mem, fs } = await setup();
    await writeFileAtomic(fs, FILE, enc('{"a":"b"}\n'), { mode: 0o644 });
    assert.deepEqual(fs.calls, [`writeFile ${FILE}.tmp`, `rename ${FILE}.tmp`, `fsyncDir ${DIR}`]);
    assert.deepEqual(mem.syncLog, [`fsync ${FILE}.tmp`, `fsyncDir ${DIR}`]);
    assert.equal(dec(await mem.readFile(FILE, 100)), '{"a":"b"}\n');
    assert.equal((await mem.stat(FILE)).mode, 0o644);
    assert.deepEqual(await mem.readdir(DIR), [{ name: 'vol_data.json', type: 'file' }], 'no temp file left');
  });

  it('the temp name is deterministic; a writer id names the writer for files several processes replace', () => {
    assert.equal(atomicTempPath(FILE), `${FILE}.tmp`);
    assert.equal(atomicTempPath('/c/node-status.json', '4242'), '/c/node-status.json.4242.tmp');
  });

  it('with a writer id, the temp file carries it', async () => {
    const { fs } = await setup();
    await writeFileAtomic(fs, FILE, enc('x'), { mode: 0o600, writerId: '77' });
    assert.deepEqual(fs.calls, [`writeFile ${FILE}.77.tmp`, `rename ${FILE}.77.tmp`, `fsyncDir ${DIR}`]);
  });

  it('concurrent writes of one path in one process run one after the other; the last call wins', async () => {
    const { mem, fs } = await setup();
    await Promise.all(['1', '2', '3'].map((v) => writeFileAtomic(fs, FILE, enc(v), { mode: 0o644 })));
    const one = [`writeFile ${FILE}.tmp`, `rename ${FILE}.tmp`, `fsyncDir ${DIR}`];
    assert.deepEqual(fs.calls, [...one, ...one, ...one]);
    assert.equal(dec(await mem.readFile(FILE, 100)), '3');
  });

  it('a failed write does not block the next write of the same path', async () => {
    const { mem } = await setup();
    const fs = new FaultyFs(mem).failOn('rename', `${FILE}.a.tmp`, 'EIO');
    const first = writeFileAtomic(fs, FILE, enc('lost'), { mode: 0o644, writerId: 'a' });
    const second = writeFileAtomic(fs, FILE, enc('kept'), { mode: 0o644 });
    await assert.rejects(first, { code: 'EIO' });
    await second;
    assert.deepEqual(fs.calls, [
      `writeFile ${FILE}.a.tmp`, `rename ${FILE}.a.tmp`, `unlink ${FILE}.a.tmp`,
      `writeFile ${FILE}.tmp`, `rename ${FILE}.tmp`, `fsyncDir ${DIR}`,
    ]);
    assert.equal(dec(await mem.readFile(FILE, 100)), 'kept');
  });

  it('a failed rename removes the temp file, keeps the old file and rethrows the original error', async () => {
    const { mem } = await setup();
    await mem.writeFile(FILE, enc('old'));
    const fs = new FaultyFs(mem).failOn('rename', `${FILE}.tmp`, 'EIO');
    await assert.rejects(writeFileAtomic(fs, FILE, enc('new'), { mode: 0o644 }), (err: unknown) => err instanceof FsError && err.code === 'EIO');
    assert.deepEqual(fs.calls, [`writeFile ${FILE}.tmp`, `rename ${FILE}.tmp`, `unlink ${FILE}.tmp`]);
    assert.equal(dec(await mem.readFile(FILE, 100)), 'old');
    assert.deepEqual((await mem.readdir(DIR)).map((e) => e.name), ['vol_data.json']);
  });

  it('a stale temp file from a crash is overwritten by the next write', async () => {
    const { mem, fs } = await setup();
    await mem.writeFile(`${FILE}.tmp`, enc('half a wri'));
    await writeFileAtomic(fs, FILE, enc('whole'), { mode: 0o644 });
    assert.equal(dec(await mem.readFile(FILE, 100)), 'whole');
    assert.deepEqual((await mem.readdir(DIR)).map((e) => e.name), ['vol_data.json']);
  });

  it('a missing directory rejects with ENOENT and writes nothing', async () => {
    const { mem } = await setup();
    await assert.rejects(writeFileAtomic(mem, '/missing/file', enc('x'), { mode: 0o644 }), { code: 'ENOENT' });
    assert.equal(await mem.stat('/missing').then(() => true, () => false), false);
  });
});
