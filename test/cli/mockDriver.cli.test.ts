// nodevol mock-driver as a process: --volume / --block-volume provisioning and a clean SIGTERM.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import { NodeFileSystem } from '../../src/adapters/node/nodeFs.js';
import { mockVolumeId } from '../../src/mockdriver/volumeId.js';
import { readMockState } from '../../src/mockdriver/state.js';

const BIN = path.resolve(import.meta.dirname, '../../../bin/nodevol.js');

describe('nodevol mock-driver (process)', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('--mode accepts strict|lenient only: a bad value exits 2 naming the flag and the choices', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-mockcli-'));
    dirs.push(dir);
    const r = spawnSync(
      process.execPath,
      [BIN, 'mock-driver', '--mode', 'sloppy', '--endpoint', `unix://${dir}/csi.sock`, '--node-id', 'n', '--driver-name', 'mock.csi.nodevol.io', '--state-dir', `${dir}/state`],
      { encoding: 'utf8', timeout: 30_000 },
    );
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--mode <mode>.*'sloppy' is invalid.*strict, lenient/);
    const help = spawnSync(process.execPath, [BIN, 'mock-driver', '--help'], { encoding: 'utf8', timeout: 30_000 });
    assert.match(help.stdout, /--mode <mode>/);
    assert.match(help.stdout, /choices:\s+"strict",\s+"lenient",\s+default:\s+"strict"/);
  });

  it('provisions --volume and --block-volume at start, prints "NAME ID" lines, and exits 0 on SIGTERM', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-mockcli-'));
    dirs.push(dir);
    const child = spawn(
      process.execPath,
      [BIN, 'mock-driver', '--endpoint', `unix://${dir}/csi.sock`, '--node-id', 'node-1', '--driver-name', 'mock.csi.nodevol.io',
        '--state-dir', `${dir}/state`, '--volume', 'pv-a', '--block-volume', 'pv-b'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    try {
      let out = '';
      child.stdout.on('data', (b: Buffer) => (out += b.toString()));
      // Bounded wait for both lines (the driver answers its own CreateVolume over the socket).
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no provisioning output after 60 s; got ${JSON.stringify(out)}`)), 60_000);
        const check = (): void => {
          if (out.split('\n').filter((l) => l !== '').length >= 2) {
            clearTimeout(timer);
            resolve();
          }
        };
        child.stdout.on('data', check);
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`mock-driver exited early with ${String(code)}`));
        });
      });
      assert.deepEqual(out.trim().split('\n'), [`pv-a ${mockVolumeId('pv-a')}`, `pv-b ${mockVolumeId('pv-b')}`]);
      const state = await readMockState(new NodeFileSystem(), `${dir}/state`);
      assert.deepEqual(state.map((v) => [v.name, v.kind]).sort(), [['pv-a', 'mount'], ['pv-b', 'block']]);
      assert.ok((await stat(`${dir}/state/volumes/${mockVolumeId('pv-a')}`)).isDirectory());
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
      await assert.rejects(stat(`${dir}/csi.sock`), { code: 'ENOENT' }, 'the socket is removed');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
