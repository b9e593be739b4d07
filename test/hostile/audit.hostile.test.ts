/**
 * Hostile input, the audit's side (docs/security.md), as a whole `nodevol audit` process: it never hangs
 * on a FIFO (vol_data.json or --mountinfo), bounds the mount table it parses, and exits 2 when
 * it could read neither the pods dir nor the CSI plugin dir instead of calling the node healthy.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { MAX_MOUNTINFO_LINES } from '../../src/adapters/node/mountInfoFile.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');
const DRIVER = 'ebs.csi.example.com';

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * "Unreadable to an unprivileged user": as root, 0700 directories read by the CLI run as uid
 * 65534; as any other user (the unprivileged CI run), 0000 directories read by that user itself.
 */
const IS_ROOT = process.getuid?.() === 0;
const UNREADABLE = IS_ROOT ? 0o700 : 0o000;
const AS_OTHER = IS_ROOT ? { uid: 65534, gid: 65534 } : undefined;

/** Runs the CLI; a hang is a failure after 20 s (status null). */
function nodevol(args: readonly string[], as?: { uid: number; gid: number }): Run {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 20_000, ...(as ?? {}) });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

let tmp = '';
let root = '';
beforeEach(() => {
  tmp = mkdtempSync(path.join(tmpdir(), 'nodevol-hostile-audit-'));
  chmodSync(tmp, 0o755);
  root = path.join(tmp, 'kubelet');
  mkdirSync(path.join(root, 'pods'), { recursive: true });
  mkdirSync(path.join(root, 'plugins', 'kubernetes.io', 'csi'), { recursive: true });
});
afterEach(() => {
  for (const d of [path.join(root, 'pods'), path.join(root, 'plugins', 'kubernetes.io', 'csi')]) {
    try {
      chmodSync(d, 0o755);
    } catch {
      // replaced by a symlink or removed by the test
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

describe('hostile audit: nothing readable is not healthy', () => {
  it('pods dir and CSI plugin dir both leading out of the root: exit 2 naming both', () => {
    const outside = path.join(tmp, 'outside');
    mkdirSync(outside);
    rmSync(path.join(root, 'pods'), { recursive: true });
    symlinkSync(outside, path.join(root, 'pods'));
    rmSync(path.join(root, 'plugins', 'kubernetes.io', 'csi'), { recursive: true });
    symlinkSync(outside, path.join(root, 'plugins', 'kubernetes.io', 'csi'));
    const r = nodevol(['audit', '--root-dir', root, '-o', 'json']);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /could read neither .*\/pods nor .*\/plugins\/kubernetes\.io\/csi: nothing was audited/);
  });

  it('as an unprivileged user with pods/ and the CSI plugin dir unreadable: exit 2', () => {
    chmodSync(path.join(root, 'pods'), UNREADABLE);
    chmodSync(path.join(root, 'plugins', 'kubernetes.io', 'csi'), UNREADABLE);
    const r = nodevol(['audit', '--root-dir', root, '-o', 'json'], AS_OTHER);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /could read neither/);
  });

  it('one of the two unreadable: the result is partial and says which part it rests on', () => {
    chmodSync(path.join(root, 'pods'), UNREADABLE);
    const r = nodevol(['audit', '--root-dir', root, '-o', 'json'], AS_OTHER);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /partial result: could not read .*\/pods; the verdicts rest on the global mounts under .*\/plugins\/kubernetes\.io\/csi only \(pod volumes unknown\)/);
  });
});

describe('hostile audit: never hangs', () => {
  for (const gate of [false, true]) {
    it(`a FIFO as pod-local and global vol_data.json is refused by name (gate ${gate ? 'on' : 'off'})`, () => {
      const podVol = path.join(root, 'pods', 'pod-a', 'volumes', 'kubernetes.io~csi', 'pv-1');
      mkdirSync(path.join(podVol, 'mount'), { recursive: true });
      execFileSync('mkfifo', [path.join(podVol, 'vol_data.json')]);
      const volDir = path.join(root, 'plugins', 'kubernetes.io', 'csi', DRIVER, createHash('sha256').update('vol-1').digest('hex'));
      mkdirSync(path.join(volDir, 'globalmount'), { recursive: true });
      execFileSync('mkfifo', [path.join(volDir, 'vol_data.json')]);
      const r = nodevol(['audit', '--root-dir', root, '-o', 'json', `--feature-gates=CSIGlobalMountReconstruction=${gate}`]);
      assert.notEqual(r.status, null, 'the audit hung');
      assert.ok(r.status === 0 || r.status === 1, r.stderr);
      assert.match(r.stdout, /vol_data\.json is a FIFO, not a regular file/);
    });
  }

  it('a FIFO as --mountinfo is refused by name: exit 2', () => {
    const fifo = path.join(tmp, 'mountinfo');
    execFileSync('mkfifo', [fifo]);
    const r = nodevol(['audit', '--root-dir', root, '--mountinfo', fifo]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--mountinfo .*mountinfo: .*mountinfo is a FIFO, not a regular file; refusing to read it/);
  });

  it('a mount table of more short lines than the cap is refused with a clear error, in bounded memory', () => {
    const file = path.join(tmp, 'mountinfo');
    writeFileSync(file, '1 2 0:1 / /x rw - t s rw\n'.repeat(MAX_MOUNTINFO_LINES + 1));
    const r = nodevol(['audit', '--root-dir', root, '--mountinfo', file]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`has more than ${MAX_MOUNTINFO_LINES} lines; refusing to parse it`));
  });
});
