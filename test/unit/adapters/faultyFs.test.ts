// FaultyFs, the fault-injecting FileSystem test double, behaves like the real ports: an injected
// failure is a rejected promise carrying an FsError, never a synchronous throw, so the engine's
// own error handling (ignoreNotExist in removeMountDir) sees it exactly as it sees a real one.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as path from 'node:path';

import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { NodeFileSystem } from '../../../src/adapters/node/nodeFs.js';
import { FsError, type FileSystem } from '../../../src/ports/fs.js';
import { removeMountDir } from '../../../src/volume/csi/csiUtil.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { volumeHost } from '../../support/hosts.js';
import { NodeFixture } from '../../support/nodeFixture.js';

const P = '/x/y';
const calls: readonly [keyof FileSystem, (fs: FileSystem) => Promise<unknown>][] = [
  ['readdir', (fs) => fs.readdir(P)],
  ['lstat', (fs) => fs.lstat(P)],
  ['stat', (fs) => fs.stat(P)],
  ['realpath', (fs) => fs.realpath(P)],
  ['readFile', (fs) => fs.readFile(P, 10)],
  ['mkdir', (fs) => fs.mkdir(P, { recursive: true, mode: 0o750 })],
  ['writeFile', (fs) => fs.writeFile(P, new Uint8Array(1))],
  ['rename', (fs) => fs.rename(P, '/x/z')],
  ['fsyncDir', (fs) => fs.fsyncDir(P)],
  ['rmdir', (fs) => fs.rmdir(P)],
  ['unlink', (fs) => fs.unlink(P)],
  ['symlink', (fs) => fs.symlink('/t', P)],
  ['readlink', (fs) => fs.readlink(P)],
];

describe('FaultyFs', () => {
  for (const [method, call] of calls) {
    it(`an injected fault on ${method} is a rejected promise with an FsError naming the path, not a throw`, async () => {
      const fs = new FaultyFs(new MemFs()).failOn(method, P, 'EIO');
      let result: Promise<unknown> | undefined;
      assert.doesNotThrow(() => {
        result = call(fs);
      });
      await assert.rejects(result!, (err: unknown) => err instanceof FsError && err.code === 'EIO' && err.path === P && err.syscall === method);
      assert.deepEqual(fs.calls, [`${method} ${P}`]);
    });
  }

  it("'*' fails every method on the path; other paths reach the inner filesystem", async () => {
    const inner = new MemFs();
    await inner.mkdir('/ok', { recursive: true, mode: 0o755 });
    const fs = new FaultyFs(inner).failOn('*', P, 'EACCES');
    await assert.rejects(fs.stat(P), { code: 'EACCES' });
    await assert.rejects(fs.readdir(P), { code: 'EACCES' });
    assert.equal((await fs.stat('/ok')).type, 'directory');
  });

  describe('through the engine: removeMountDir (csi_mounter.go)', () => {
    let fx: NodeFixture;
    before(async () => {
      fx = await NodeFixture.create();
    });
    after(async () => {
      await fx.cleanup();
    });

    it('an injected ENOENT on the vol_data.json unlink is absorbed by ignoreNotExist, like a real one', async () => {
      const dmp = await fx.stage({ driver: 'd.example.com', handle: 'enoent', mounted: false });
      const dataFile = path.join(path.dirname(dmp), 'vol_data.json');
      const volDir = path.dirname(dmp);
      const fs = new FaultyFs(new NodeFileSystem()).failOn('unlink', dataFile, 'ENOENT').failOn('rmdir', volDir, 'ENOENT');
      await removeMountDir(volumeHost(fx, { gateOn: false, fs }), dmp);
      assert.deepEqual(fs.calls.filter((c) => !c.startsWith('stat ') && !c.startsWith('lstat ')).slice(-3), [
        `rmdir ${dmp}`,
        `unlink ${dataFile}`,
        `rmdir ${volDir}`,
      ]);
    });

    it('an injected EIO on the same unlink fails removeMountDir naming the file', async () => {
      const dmp = await fx.stage({ driver: 'd.example.com', handle: 'eio', mounted: false });
      const dataFile = path.join(path.dirname(dmp), 'vol_data.json');
      const fs = new FaultyFs(new NodeFileSystem()).failOn('unlink', dataFile, 'EIO');
      await assert.rejects(
        removeMountDir(volumeHost(fx, { gateOn: false, fs }), dmp),
        (err: unknown) => err instanceof Error && err.message.includes(`failed to delete volume data file [${dataFile}]`) && err.message.includes('EIO'),
      );
    });
  });
});
