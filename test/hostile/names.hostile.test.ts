/**
 * Hostile input (docs/security.md): exact words for a symlink loop (ELOOP, not "outside the root dir") and for
 * names that are not UTF-8 (their bytes shown escaped, never dropped or reported as ENOENT).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { NodeFileSystem } from '../../src/adapters/node/nodeFs.js';
import { escapeUndecodable } from '../../src/ports/fs.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');

let tmp = '';
let root = '';
beforeEach(() => {
  tmp = mkdtempSync(path.join(tmpdir(), 'nodevol-hostile-names-'));
  root = path.join(tmp, 'kubelet');
  mkdirSync(path.join(root, 'pods'), { recursive: true });
  mkdirSync(path.join(root, 'plugins', 'kubernetes.io', 'csi'), { recursive: true });
});
afterEach(() => {
  rmSync(tmp, { recursive: true, force: true });
});

function audit(): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, 'audit', '--root-dir', root, '-o', 'json'], { encoding: 'utf8', timeout: 20_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A directory whose name is the bytes "bad-" 0xff 0xfe (not UTF-8), made with a Buffer path. */
function badDir(parent: string): void {
  mkdirSync(Buffer.concat([Buffer.from(`${parent}/bad-`), Buffer.from([0xff, 0xfe])]));
}

describe('hostile names: not UTF-8', () => {
  it('NodeFileSystem lists such a name and can walk into it; escapeUndecodable shows the bytes', async () => {
    badDir(tmp);
    mkdirSync(Buffer.concat([Buffer.from(`${tmp}/bad-`), Buffer.from([0xff, 0xfe]), Buffer.from('/inner')]));
    const fs = new NodeFileSystem();
    const entry = (await fs.readdir(tmp)).find((e) => e.name.startsWith('bad-'));
    assert.ok(entry !== undefined);
    assert.equal(entry.type, 'directory');
    assert.equal(escapeUndecodable(entry.name), 'bad-\\xff\\xfe');
    assert.deepEqual((await fs.readdir(path.join(tmp, entry.name))).map((e) => e.name), ['inner'], 'not ENOENT');
    assert.equal((await fs.lstat(path.join(tmp, entry.name, 'inner'))).type, 'directory');
    assert.equal(escapeUndecodable(await fs.realpath(path.join(tmp, entry.name))), `${tmp}/bad-\\xff\\xfe`);
  });

  it('the audit reports a global dir named with such bytes by its escaped bytes, not as missing', () => {
    const driverDir = path.join(root, 'plugins', 'kubernetes.io', 'csi', 'ebs.csi.example.com');
    mkdirSync(driverDir);
    badDir(driverDir);
    const bad = Buffer.concat([Buffer.from(`${driverDir}/bad-`), Buffer.from([0xff, 0xfe])]);
    mkdirSync(Buffer.concat([bad, Buffer.from('/globalmount')]));
    writeFileSync(Buffer.concat([bad, Buffer.from('/vol_data.json')]), '{"driverName":"ebs.csi.example.com","volumeHandle":"vol-1","specVolID":"pv-1"}');
    const r = audit();
    assert.ok(r.status === 0 || r.status === 1, r.stderr);
    assert.ok(r.stdout.includes('bad-\\\\xff\\\\xfe'), r.stdout);
    assert.ok(!r.stdout.includes('\ufffd'), 'no replacement character');
    assert.ok(!/bad-[^"]*globalmount does not exist/.test(r.stdout), r.stdout);
  });
});

describe('hostile names: symlink loops', () => {
  it('a pods dir that is a symlink loop is reported as ELOOP, not as outside the root dir', () => {
    rmSync(path.join(root, 'pods'), { recursive: true });
    symlinkSync('loop-b', path.join(root, 'pods'));
    symlinkSync('pods', path.join(root, 'loop-b'));
    const r = audit();
    assert.match(r.stdout, /pods: too many levels of symbolic links \(ELOOP\); not followed/);
    assert.doesNotMatch(r.stdout, /outside the root dir/);
  });

  it('a CSI plugin dir that is a symlink loop is reported as ELOOP', () => {
    const csi = path.join(root, 'plugins', 'kubernetes.io', 'csi');
    rmSync(csi, { recursive: true });
    symlinkSync('csi2', csi);
    symlinkSync('csi', path.join(root, 'plugins', 'kubernetes.io', 'csi2'));
    const r = audit();
    assert.match(r.stdout, /csi: too many levels of symbolic links \(ELOOP\); not followed/);
  });
});
