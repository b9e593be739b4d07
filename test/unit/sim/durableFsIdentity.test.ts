// The simulator's filesystem works for whoever runs it (`nodevol demo` as a non-root
// user once failed with `open /var/lib/kubelet/.keep: EACCES`). memfs owns new nodes by the identity
// the Volume is given but checks most accesses against the real process's: the two must agree.
// The test pretends to be another user (process.getuid/getgid replaced for its duration), so it
// fails without the fix even when the suite runs as root; test/cli/unprivileged.cli.test.ts runs
// the real commands as uid 65534.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { Node } from '@jsonjoy.com/fs-core';
import { Volume } from 'memfs';

import { MemFs } from '../../../src/adapters/memory/memFs.js';

import { FeatureGate } from '../../../src/features/features.js';
import { DurableFs, inodeMaker, simSuperblock } from '../../../src/sim/durableFs.js';
import { loadBuiltinScenario } from '../../../src/sim/scenario.js';
import { simulate } from '../../../src/sim/simulation.js';
import { SIM_ROOT } from '../../../src/sim/world.js';

const NOBODY = 65534;

/** Runs `op` (a promise or not) and records `what: ok`, its JSON result or the error's code. */
async function record(seen: string[], what: string, op: () => unknown): Promise<void> {
  try {
    const out = await op();
    seen.push(`${what}: ${out === undefined ? 'ok' : JSON.stringify(out)}`);
  } catch (err) {
    seen.push(`${what}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

describe('DurableFs as a non-root user', () => {
  const real = { getuid: process.getuid, getgid: process.getgid };
  beforeEach(() => {
    process.getuid = () => NOBODY;
    process.getgid = () => NOBODY;
  });
  afterEach(() => {
    process.getuid = real.getuid;
    process.getgid = real.getgid;
  });

  it('creates, writes, renames and removes below directories it made (0755 and 0750), and after a power cut', async () => {
    const fs = new DurableFs(() => 0);
    const data = new TextEncoder().encode('{}');
    fs.mem.writeRaw(`${SIM_ROOT}/.keep`, '');
    await fs.mkdir(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h`, { recursive: true, mode: 0o750 });
    await fs.writeFile(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/vol_data.json.tmp`, data, { mode: 0o640, fsync: true });
    await fs.rename(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/vol_data.json.tmp`, `${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/vol_data.json`);
    await fs.fsyncDir(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h`);
    await fs.writeFile(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/lost`, data);
    assert.equal(fs.powerCut(), true);
    await fs.writeFile(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/after-reboot`, data);
    await fs.unlink(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/after-reboot`);
    assert.equal(fs.readTextSync(`${SIM_ROOT}/plugins/kubernetes.io/csi/d/h/vol_data.json`), '{}');
  });

  it('plays a built-in scenario to the end', async () => {
    const r = await simulate({ scenario: loadBuiltinScenario('kep-story-1'), gates: FeatureGate.of({ CSIGlobalMountReconstruction: true }), seed: 1 });
    assert.equal(r.endReason, 'converged');
    assert.deepEqual(r.violations, []);
  });
});

// The simulator's memfs superblock answers access checks for its one user without asking the
// process each time (src/sim/durableFs.ts, oneUserSuperblock) and makes its own inodes: the same
// inode numbers, modes and refusals as memfs' own superblock for the same calls.
describe("DurableFs' inodes", () => {
  async function play(fs: MemFs): Promise<string[]> {
    const seen: string[] = [];
    const data = new TextEncoder().encode('x');
    const step = (what: string, op: () => unknown): Promise<void> => record(seen, what, op);
    await step('mkdir /a', () => fs.mkdir('/a', { recursive: false, mode: 0o755 }));
    await step('write /a/f1', () => fs.writeFile('/a/f1', data, { mode: 0o644 }));
    await step('write /a/f2', () => fs.writeFile('/a/f2', data, { mode: 0o600 }));
    await step('unlink /a/f1', () => fs.unlink('/a/f1'));
    await step('write /a/f3', () => fs.writeFile('/a/f3', data, { mode: 0o640 }));
    await step('mkdir /a/ro', () => fs.mkdir('/a/ro', { recursive: false, mode: 0o500 }));
    await step('write /a/ro/x', () => fs.writeFile('/a/ro/x', data));
    await step('mkdir /a/none', () => fs.mkdir('/a/none', { recursive: false, mode: 0o000 }));
    await step('readdir /a/none', () => fs.readdir('/a/none'));
    await step('write /a/none/y', () => fs.writeFile('/a/none/y', data));
    await step('write /a/f4', () => fs.writeFile('/a/f4', data));
    // Names a path split must keep: a leading dot, two, three, a trailing one.
    for (const name of ['.keep', '..data', '...', 'x.']) await step(`write /a/${name}`, () => fs.writeFile(`/a/${name}`, data));
    await step('mkdir /a/sub', () => fs.mkdir('/a/sub', { recursive: false, mode: 0o750 }));
    await step('rename /a/f3 -> /a/sub/f3', () => fs.rename('/a/f3', '/a/sub/f3'));
    await step('rename /a/sub -> /a/moved', () => fs.rename('/a/sub', '/a/moved'));
    await step('symlink /a/l -> ../a/moved', () => fs.symlink('../a/moved', '/a/l'));
    await step('read /a/l/f3', () => fs.readFile('/a/l/f3', 16));
    await step('rmdir /a/moved', () => fs.rmdir('/a/moved'));
    await step('unlink /a/moved/f3', () => fs.unlink('/a/moved/f3'));
    await step('rmdir /a/moved again', () => fs.rmdir('/a/moved'));
    await step('mkdir -p /b/c/d', () => fs.mkdir('/b/c/d', { recursive: true, mode: 0o700 }));
    seen.push(`readdir /a: ${(await fs.readdir('/a')).map((e) => `${e.name}:${e.type}`).join(' ')}`);
    for (const p of ['/', '/a', '/a/f2', '/a/ro', '/a/none', '/a/f4', '/a/.keep', '/a/..data', '/a/...', '/a/x.', '/a/l', '/b/c/d']) {
      const st = await fs.lstat(p);
      seen.push(`${p}: ino ${st.ino} ${st.type} ${st.mode.toString(8)} ${st.size}`);
    }
    seen.push(...fs.tree('/b'));
    return seen;
  }

  it("numbers, modes and refusals are memfs' own, as root and as another user", async () => {
    const real = { getuid: process.getuid, getgid: process.getgid };
    try {
      for (const user of [0, NOBODY]) {
        process.getuid = () => user;
        process.getgid = () => user;
        const theirs = await play(new MemFs(new Volume()));
        const ours = await play(new DurableFs(() => 0).mem);
        assert.deepEqual(ours, theirs, `as uid ${user}`);
        // The read-only directories refuse; a directory with a file in it stays.
        assert.ok(theirs.includes('write /a/ro/x: EACCES'), theirs.join('\n'));
        assert.ok(theirs.includes('rmdir /a/moved: ENOTEMPTY'), theirs.join('\n'));
      }
    } finally {
      process.getuid = real.getuid;
      process.getgid = real.getgid;
    }
  });
});

// The simulator's superblock through memfs' own API, with the paths MemFs never hands it (".",
// "..", "//", relative symlink targets): the general path split, and "." and ".." in every
// directory, as memfs' own superblock has them.
describe("the simulator's memfs superblock", () => {
  async function play(vol: Volume): Promise<string[]> {
    const seen: string[] = [];
    const step = (what: string, op: () => unknown): Promise<void> => record(seen, what, op);
    await step('mkdir /a', () => vol.mkdirSync('/a'));
    await step('mkdir /a/./b', () => vol.mkdirSync('/a/./b'));
    await step('write /a/b/../f', () => vol.writeFileSync('/a/b/../f', 'x'));
    await step('write //a//g', () => vol.writeFileSync('//a//g', 'y'));
    await step('write /a/.h', () => vol.writeFileSync('/a/.h', 'z'));
    await step('write /a/b/..i', () => vol.writeFileSync('/a/b/..i', 'w'));
    await step('readdir /a/.', () => vol.readdirSync('/a/.'));
    await step('readdir /a/b/', () => vol.readdirSync('/a/b/'));
    await step('read /a/./b/../f', () => vol.readFileSync('/a/./b/../f', 'utf8'));
    await step('symlink /a/l -> b/..', () => vol.symlinkSync('b/..', '/a/l'));
    await step('read /a/l/g', () => vol.readFileSync('/a/l/g', 'utf8'));
    await step('rename /a/b -> /a/c', () => vol.renameSync('/a/b', '/a/c'));
    for (const p of ['/', '/a', '/a/.', '/a/c', '/a/c/.', '/a/c/..', '/a/c/..i', '/a/l/c', '/a/l/..', '/a/..', '/a/f/']) {
      await step(`stat ${p}`, () => {
        const st = vol.statSync(p);
        return [st.ino, st.nlink, st.mode.toString(8)];
      });
    }
    await step('rmdir /a/c', () => vol.rmdirSync('/a/c'));
    await step('unlink /a/c/..i', () => vol.unlinkSync('/a/c/..i'));
    await step('rmdir /a/c/', () => vol.rmdirSync('/a/c/'));
    await step('stat /a', () => vol.statSync('/a').nlink);
    return seen;
  }

  it("answers memfs' own superblock's answers for paths that are not clean", async () => {
    const uid = process.getuid?.() ?? 0;
    const gid = process.getgid?.() ?? 0;
    const theirs = await play(new Volume());
    assert.deepEqual(await play(new Volume(simSuperblock(uid, gid))), theirs);
    // The walk went through "." and "..": the file written below b/.. is in /a; ".." after a
    // symlink is the path's (the path is resolved before the walk), not the symlink target's.
    assert.ok(theirs.includes('read /a/./b/../f: "x"'), theirs.join('\n'));
    assert.equal(theirs.find((l) => l.startsWith('stat /a/l/..:')), theirs.find((l) => l.startsWith('stat /a:'))?.replace('stat /a:', 'stat /a/l/..:'));
  });

  it("leaves the atime of the directories a lookup passes (memfs' own sets it to now)", () => {
    const sb = simSuperblock(process.getuid?.() ?? 0, process.getgid?.() ?? 0);
    const vol = new Volume(sb);
    vol.mkdirSync('/a/b', { recursive: true });
    vol.writeFileSync('/a/b/f', 'x');
    const dirs = ['/', '/a', '/a/b'].map((p) => sb.getResolvedLinkOrThrow(p).getNode());
    for (const node of dirs) node.atime = new Date(0);
    assert.equal(vol.readFileSync('/a/b/f', 'utf8'), 'x');
    vol.statSync('/a/b/f');
    assert.deepEqual(dirs.map((n) => n.atime.getTime()), [0, 0, 0]);
  });
});

// The simulator's superblock makes its inodes without memfs' Node constructor, which asks the
// process for its uid and gid for every inode (src/sim/durableFs.ts, inodeMaker): the same fields,
// in the same order, as the constructor's, and the constructor itself for an inode it cannot copy.
describe("the simulator's inodes, made without memfs' constructor", () => {
  const uid = 1234;
  const gid = 5678;

  it("have the constructor's fields, in its order, with their own fan-out and times; the process is not asked", () => {
    const real = { getuid: process.getuid, getgid: process.getgid };
    const theirs = new Node(7, 0o40755, uid, gid);
    const make = inodeMaker(Node, uid, gid);
    let asked = 0;
    process.getuid = () => {
      asked++;
      return 0;
    };
    process.getgid = () => {
      asked++;
      return 0;
    };
    let ours: Node;
    let other: Node;
    try {
      ours = make(7, 0o40755);
      other = make(8, 0o100644);
    } finally {
      process.getuid = real.getuid;
      process.getgid = real.getgid;
    }
    assert.equal(asked, 0);
    assert.ok(ours instanceof Node);
    assert.deepEqual(Object.keys(ours), Object.keys(theirs));
    const plain = (n: Node): Record<string, unknown> => Object.fromEntries(Object.entries(n).filter(([, v]) => !(v instanceof Date) && typeof v !== 'object'));
    assert.deepEqual(plain(ours), plain(theirs));
    assert.deepEqual([ours.uid, ours.gid, ours.ino, ours.mode, ours.nlink, ours.getSize()], [uid, gid, 7, 0o40755, 1, 0]);
    assert.deepEqual([other.ino, other.mode], [8, 0o100644]);
    // Nothing shared that a write could change for both: its own fan-out and times.
    const fanOut = (n: Node): unknown => Object.getOwnPropertyDescriptor(n, 'changes')?.value;
    assert.notEqual(fanOut(ours), fanOut(other));
    assert.equal((fanOut(ours) as object).constructor, (fanOut(theirs) as object).constructor);
    assert.notEqual(ours.mtime, other.mtime);
    assert.ok(ours.mtime instanceof Date && Math.abs(ours.mtime.getTime() - Date.now()) < 60_000);
    // A write to one inode leaves the other's bytes alone.
    ours.setString('abc');
    assert.equal(ours.getString(), 'abc');
    assert.equal(other.getString(), '');
  });

  it('falls back to the constructor when an inode holds a field of any other kind', () => {
    class Richer extends Node {
      extra = { shared: true };
    }
    const make = inodeMaker(Richer, uid, gid);
    const a = make(1, 0o100644);
    const b = make(2, 0o100644);
    assert.ok(a instanceof Richer && b instanceof Richer);
    assert.notEqual(a.extra, b.extra);
    assert.deepEqual([a.ino, b.ino, a.uid], [1, 2, uid]);
  });
});
