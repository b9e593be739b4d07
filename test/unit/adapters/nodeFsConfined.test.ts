/**
 * NodeFileSystem with `confineChangesTo`: every change beneath a root is made through directory
 * descriptors (adapters/node/beneath.ts), so a symlink below the root is never followed and a
 * change outside every root is refused. Real files in a temp dir; needs no root.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { NodeFileSystem } from '../../../src/adapters/node/nodeFs.js';
import { locate } from '../../../src/adapters/node/beneath.js';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { errorCode, pathExists, removeTreeOneFilesystem, type RemoveTreeOptions } from '../../../src/ports/fs.js';

/** dist/src, from this compiled test's place (dist/test/unit/adapters). */
const DIST_SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'src');

let base: string;
let root: string;
let outside: string;
let fs: NodeFileSystem;

/** Rejects with `code`, and a message naming `p` (never a /proc/self/fd path). */
async function rejectsWith(work: Promise<unknown>, code: string, p: string, also?: RegExp): Promise<void> {
  await assert.rejects(work, (err: unknown) => {
    assert.equal(errorCode(err), code, String(err));
    const msg = err instanceof Error ? err.message : '';
    assert.ok(msg.includes(p), `${msg} names ${p}`);
    assert.doesNotMatch(msg, /\/proc\/self\/fd/);
    if (also !== undefined) assert.match(msg, also);
    return true;
  });
}

beforeEach(() => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'nodevol-confined-')));
  root = path.join(base, 'root');
  outside = path.join(base, 'outside');
  mkdirSync(path.join(root, 'a', 'b'), { recursive: true });
  mkdirSync(path.join(outside, 'sub'), { recursive: true });
  writeFileSync(path.join(outside, 'f'), 'precious');
  writeFileSync(path.join(outside, 'sub', 'g'), 'precious too');
  // root/link -> outside: every change below root/link must be refused.
  symlinkSync(outside, path.join(root, 'link'));
  fs = new NodeFileSystem({ confineChangesTo: [root] });
});

afterEach(() => {
  rmSync(base, { recursive: true, force: true });
});

function outsideIntact(): void {
  assert.equal(readFileSync(path.join(outside, 'f'), 'utf8'), 'precious');
  assert.equal(readFileSync(path.join(outside, 'sub', 'g'), 'utf8'), 'precious too');
  assert.deepEqual(readdirSync(outside).sort(), ['f', 'sub']);
}

describe('NodeFileSystem confined to a root: no change follows a symlink below it', () => {
  it('unlink and rmdir through a symlinked directory are refused (ELOOP, naming the symlink); nothing outside changes', async () => {
    const link = path.join(root, 'link');
    await rejectsWith(fs.unlink(path.join(link, 'f')), 'ELOOP', path.join(link, 'f'), new RegExp(`${link} is a symlink`));
    await rejectsWith(fs.unlink(path.join(link, 'sub', 'g')), 'ELOOP', path.join(link, 'sub', 'g'));
    await rejectsWith(fs.rmdir(path.join(link, 'sub')), 'ELOOP', path.join(link, 'sub'));
    outsideIntact();
  });

  it('the final component is never followed: unlink of a symlink removes the symlink, rmdir of one fails ENOTDIR', async () => {
    await rejectsWith(fs.rmdir(path.join(root, 'link')), 'ENOTDIR', path.join(root, 'link'));
    await fs.unlink(path.join(root, 'link'));
    assert.equal(existsSync(path.join(root, 'link')), false);
    outsideIntact();
  });

  it('writeFile through a symlinked directory, or onto a symlink, is refused and writes nothing', async () => {
    await rejectsWith(fs.writeFile(path.join(root, 'link', 'new'), new Uint8Array([1])), 'ELOOP', path.join(root, 'link', 'new'));
    symlinkSync(path.join(outside, 'f'), path.join(root, 'a', 'to-f'));
    await rejectsWith(fs.writeFile(path.join(root, 'a', 'to-f'), new Uint8Array([1])), 'ELOOP', path.join(root, 'a', 'to-f'), /refusing to write through it/);
    outsideIntact();
  });

  it('mkdir (recursive or not), symlink and rename through a symlinked directory are refused', async () => {
    await rejectsWith(fs.mkdir(path.join(root, 'link', 'x', 'y'), { recursive: true, mode: 0o750 }), 'ELOOP', path.join(root, 'link', 'x', 'y'));
    await rejectsWith(fs.mkdir(path.join(root, 'link', 'x'), { recursive: false, mode: 0o750 }), 'ELOOP', path.join(root, 'link', 'x'));
    await rejectsWith(fs.mkdir(path.join(root, 'link'), { recursive: true, mode: 0o750 }), 'ELOOP', path.join(root, 'link'));
    await rejectsWith(fs.symlink('/etc', path.join(root, 'link', 's')), 'ELOOP', path.join(root, 'link', 's'));
    writeFileSync(path.join(root, 'a', 'file'), 'x');
    await rejectsWith(fs.rename(path.join(root, 'a', 'file'), path.join(root, 'link', 'file')), 'ELOOP', path.join(root, 'a', 'file'));
    await rejectsWith(fs.rename(path.join(root, 'link', 'f'), path.join(root, 'a', 'stolen')), 'ELOOP', path.join(root, 'link', 'f'));
    assert.equal(readFileSync(path.join(root, 'a', 'file'), 'utf8'), 'x');
    outsideIntact();
  });

  it('a change outside every root is refused with EPERM naming the roots; a root itself is never removed', async () => {
    await rejectsWith(fs.unlink(path.join(outside, 'f')), 'EPERM', path.join(outside, 'f'), new RegExp(root));
    await rejectsWith(fs.writeFile(path.join(outside, 'n'), new Uint8Array()), 'EPERM', path.join(outside, 'n'));
    await rejectsWith(fs.rename(path.join(root, 'a', 'b'), path.join(outside, 'b')), 'EPERM', path.join(outside, 'b'));
    await rejectsWith(fs.rmdir(`${root}/..`), 'EPERM', `${root}/..`);
    await rejectsWith(fs.rmdir(root), 'EPERM', root, /confinement root itself/);
    outsideIntact();
    assert.equal(statSync(root).isDirectory(), true);
  });

  it("with elsewhere: 'by-path', a change outside the roots is made by path; beneath them it stays confined", async () => {
    const loose = new NodeFileSystem({ confineChangesTo: [root], elsewhere: 'by-path' });
    await loose.writeFile(path.join(outside, 'n'), new Uint8Array([7]));
    assert.deepEqual([...readFileSync(path.join(outside, 'n'))], [7]);
    await rejectsWith(loose.unlink(path.join(root, 'link', 'f')), 'ELOOP', path.join(root, 'link', 'f'));
  });
});

describe('NodeFileSystem confined to a root: ordinary changes behave as by path', () => {
  it('mkdir recursive makes every missing dir with the mode; an existing dir is fine; a file in the way is EEXIST/ENOTDIR', async () => {
    const deep = path.join(root, 'x', 'y', 'z');
    await fs.mkdir(deep, { recursive: true, mode: 0o700 });
    assert.equal(statSync(deep).isDirectory(), true);
    // 0o700 is within any umask's reach only by removal: the bits can only be 0o700 or fewer.
    assert.equal(statSync(path.join(root, 'x')).mode & 0o077, 0);
    await fs.mkdir(deep, { recursive: true, mode: 0o700 });
    await rejectsWith(fs.mkdir(deep, { recursive: false, mode: 0o700 }), 'EEXIST', deep);
    writeFileSync(path.join(root, 'file'), '');
    await rejectsWith(fs.mkdir(path.join(root, 'file'), { recursive: true, mode: 0o700 }), 'EEXIST', path.join(root, 'file'));
    await rejectsWith(fs.mkdir(path.join(root, 'file', 'below'), { recursive: true, mode: 0o700 }), 'ENOTDIR', path.join(root, 'file', 'below'));
    await rejectsWith(fs.mkdir(path.join(root, 'missing', 'below'), { recursive: false, mode: 0o700 }), 'ENOENT', path.join(root, 'missing', 'below'));
  });

  it('writeFile, rename, symlink, unlink and rmdir do what they say, with the errno codes of node:fs', async () => {
    const f = path.join(root, 'a', 'f');
    await fs.writeFile(f, new TextEncoder().encode('one'), { mode: 0o600, fsync: true });
    await fs.writeFile(f, new TextEncoder().encode('two'));
    assert.equal(readFileSync(f, 'utf8'), 'two');
    await fs.rename(f, path.join(root, 'a', 'b', 'g'));
    assert.equal(readFileSync(path.join(root, 'a', 'b', 'g'), 'utf8'), 'two');
    await fs.symlink('/dev/null', path.join(root, 'a', 's'));
    assert.equal(lstatSync(path.join(root, 'a', 's')).isSymbolicLink(), true);
    await rejectsWith(fs.rmdir(path.join(root, 'a')), 'ENOTEMPTY', path.join(root, 'a'));
    await rejectsWith(fs.unlink(path.join(root, 'a', 'nope')), 'ENOENT', path.join(root, 'a', 'nope'));
    await rejectsWith(fs.unlink(path.join(root, 'nope', 'x')), 'ENOENT', path.join(root, 'nope', 'x'));
    await fs.unlink(path.join(root, 'a', 's'));
    await fs.unlink(path.join(root, 'a', 'b', 'g'));
    await fs.rmdir(path.join(root, 'a', 'b'));
    await fs.rmdir(path.join(root, 'a'));
    assert.deepEqual(readdirSync(root), ['link']);
  });

  it('resizeFile makes a sparse file anew or grows one keeping its bytes, never through a symlink', async () => {
    const f = path.join(root, 'a', 'disk.img');
    await fs.resizeFile(f, 1 << 20, { create: true, mode: 0o600 });
    assert.equal(statSync(f).size, 1 << 20);
    assert.ok(statSync(f).blocks * 512 < 1 << 20, 'sparse');
    writeFileSync(f, 'keep');
    await fs.resizeFile(f, 4096, { create: false, mode: 0o600 });
    assert.equal(readFileSync(f).subarray(0, 4).toString(), 'keep');
    assert.equal(statSync(f).size, 4096);
    await rejectsWith(fs.resizeFile(path.join(root, 'link', 'disk.img'), 4096, { create: true, mode: 0o600 }), 'ELOOP', path.join(root, 'link', 'disk.img'));
    await rejectsWith(fs.resizeFile(path.join(root, 'a', 'missing.img'), 4096, { create: false, mode: 0o600 }), 'ENOENT', path.join(root, 'a', 'missing.img'));
    outsideIntact();
  });

  it('names that are not UTF-8 are changed byte for byte', async () => {
    const raw = Buffer.concat([Buffer.from(`${root}/`), Buffer.from([0x66, 0xff, 0x6f])]);
    mkdirSync(raw);
    const name = `${root}/f\uDCFFo`;
    await fs.writeFile(`${name}/x`, new Uint8Array([1]));
    await fs.unlink(`${name}/x`);
    await fs.rmdir(name);
    assert.deepEqual(readdirSync(root).sort(), ['a', 'link']);
  });

  it('locate picks the deepest root and never matches a sibling with the same prefix', () => {
    assert.deepEqual(locate(['/r', '/r/c'], '/r/c/d/e'), { root: '/r/c', parents: ['d'], name: 'e' });
    assert.equal(locate(['/r'], '/rx/y'), undefined);
    assert.equal(locate(['/r'], '/r/../etc/passwd'), undefined);
    assert.deepEqual(locate(['/r'], '/r/a//b/'), { root: '/r', parents: ['a'], name: 'b' });
    assert.deepEqual(locate(['/r'], '/r'), { root: '/r', parents: [], name: '' });
    assert.equal(locate(['/r'], 'r/a'), undefined);
  });
});

describe('removeTree: the tree removal made through directory descriptors', () => {
  it('removes files, symlinks (never followed) and nested directories; the root itself and what links point at stay', async () => {
    const tree = path.join(root, 'a');
    writeFileSync(path.join(tree, 'b', 'file'), 'x');
    symlinkSync(outside, path.join(tree, 'b', 'to-outside'));
    symlinkSync(path.join(outside, 'f'), path.join(tree, 'to-f'));
    mkdirSync(path.join(tree, 'c', 'd', 'e'), { recursive: true });
    await fs.removeTree(tree, { directoriesOnly: false, maxDepth: 32 });
    assert.equal(existsSync(tree), false);
    outsideIntact();
    await rejectsWith(fs.removeTree(root, { directoriesOnly: false, maxDepth: 32 }), 'EPERM', root);
    await rejectsWith(fs.removeTree(path.join(root, 'gone'), { directoriesOnly: false, maxDepth: 32 }), 'ENOENT', path.join(root, 'gone'));
  });

  it('a symlink named as the tree is removed itself; a symlinked parent is refused', async () => {
    await rejectsWith(fs.removeTree(path.join(root, 'link', 'sub'), { directoriesOnly: false, maxDepth: 32 }), 'ELOOP', path.join(root, 'link', 'sub'));
    await fs.removeTree(path.join(root, 'link'), { directoriesOnly: false, maxDepth: 32 });
    assert.equal(existsSync(path.join(root, 'link')), false);
    outsideIntact();
  });

  it('directoriesOnly refuses a file or symlink, naming it, and the depth bound names the directory: the words of the walk by path', async () => {
    writeFileSync(path.join(root, 'a', 'b', 'file'), 'x');
    await assert.rejects(fs.removeTree(path.join(root, 'a'), { directoriesOnly: true, maxDepth: 32 }), { message: `cannot delete ${root}/a/b/file: not a directory` });
    assert.equal(readFileSync(path.join(root, 'a', 'b', 'file'), 'utf8'), 'x');
    mkdirSync(path.join(root, 'deep', '1', '2', '3'), { recursive: true });
    await assert.rejects(fs.removeTree(path.join(root, 'deep'), { directoriesOnly: false, maxDepth: 2 }), { message: `${root}/deep/1/2/3: deeper than 2 levels; not removed` });
    await fs.removeTree(path.join(root, 'deep'), { directoriesOnly: true, maxDepth: 3 });
    assert.equal(existsSync(path.join(root, 'deep')), false);
  });

  it('the same outcomes as the walk by path (the in-memory adapters and the simulator) for the same trees', async () => {
    const cases: { name: string; build: (dir: string) => void; options: RemoveTreeOptions }[] = [
      { name: 'files and dirs', build: (d) => { mkdirSync(path.join(d, 'x', 'y'), { recursive: true }); writeFileSync(path.join(d, 'x', 'f'), '1'); }, options: { directoriesOnly: false, maxDepth: 8 } },
      { name: 'dirs only, all dirs', build: (d) => mkdirSync(path.join(d, 'x', 'y', 'z'), { recursive: true }), options: { directoriesOnly: true, maxDepth: 8 } },
      { name: 'dirs only, one file', build: (d) => { mkdirSync(path.join(d, 'x')); writeFileSync(path.join(d, 'x', 'f'), '1'); }, options: { directoriesOnly: true, maxDepth: 8 } },
      { name: 'too deep', build: (d) => mkdirSync(path.join(d, 'x', 'y', 'z'), { recursive: true }), options: { directoriesOnly: false, maxDepth: 1 } },
      { name: 'a symlink inside', build: (d) => { mkdirSync(path.join(d, 'x')); symlinkSync('/etc', path.join(d, 'x', 's')); }, options: { directoriesOnly: false, maxDepth: 8 } },
    ];
    for (const c of cases) {
      const real = path.join(root, 't');
      mkdirSync(real);
      c.build(real);
      const mem = MemFs.create();
      await copyInto(mem, real, '/r/t');
      const outcome = async (run: () => Promise<void>, listing: () => Promise<string[]>): Promise<string> => {
        const err = await run().then(() => undefined, (e: unknown) => (e instanceof Error ? e.message : String(e)));
        return `${(err ?? 'ok').replaceAll(real, '<t>').replaceAll('/r/t', '<t>')} | ${(await listing()).join(',')}`;
      };
      const viaDescriptors = await outcome(() => fs.removeTree(real, c.options), () => Promise.resolve(existsSync(real) ? listTree(real) : []));
      const byPath = await outcome(
        () => removeTreeOneFilesystem(mem, () => Promise.resolve(true), '/r/t', c.options),
        async () => ((await pathExists(mem, '/r/t')) ? memTree(mem, '/r/t') : []),
      );
      assert.equal(viaDescriptors, byPath, c.name);
      rmSync(real, { recursive: true, force: true });
    }
  });

  it('a mount point below is refused, never descended into (root: a bind mount in a private mount namespace)', { skip: process.getuid?.() === 0 ? false : 'needs root for a bind mount in a private mount namespace' }, () => {
    const tree = path.join(root, 'a');
    const mnt = path.join(tree, 'b');
    writeFileSync(path.join(outside, 'sub', 'keep'), 'k');
    const script = [
      `import { NodeFileSystem } from ${JSON.stringify(pathToFileURL(path.join(DIST_SRC, 'adapters', 'node', 'nodeFs.js')).href)};`,
      `import { execFileSync } from 'node:child_process';`,
      `execFileSync('mount', ['--bind', ${JSON.stringify(path.join(outside, 'sub'))}, ${JSON.stringify(mnt)}]);`,
      `const fs = new NodeFileSystem({ confineChangesTo: [${JSON.stringify(root)}] });`,
      `await fs.removeTree(${JSON.stringify(tree)}, { directoriesOnly: false, maxDepth: 8 }).then(() => console.log('removed'), (e) => console.log(e.message));`,
    ].join('\n');
    const r = spawnSync('unshare', ['--mount', '--propagation', 'private', process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), `cannot delete directory ${mnt}: it is a mount point`);
    assert.equal(readFileSync(path.join(outside, 'sub', 'keep'), 'utf8'), 'k');
    outsideIntact();
  });
});

function listTree(dir: string): string[] {
  const out: string[] = [];
  const walk = (p: string, rel: string): void => {
    for (const name of readdirSync(p).sort()) {
      const child = path.join(p, name);
      const st = lstatSync(child);
      out.push(`${rel}${name}${st.isDirectory() ? '/' : ''}`);
      if (st.isDirectory()) walk(child, `${rel}${name}/`);
    }
  };
  walk(dir, '');
  return out;
}

async function memTree(mem: MemFs, dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (p: string, rel: string): Promise<void> => {
    for (const e of (await mem.readdir(p)).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      out.push(`${rel}${e.name}${e.type === 'directory' ? '/' : ''}`);
      if (e.type === 'directory') await walk(`${p}/${e.name}`, `${rel}${e.name}/`);
    }
  };
  await walk(dir, '');
  return out;
}

async function copyInto(mem: MemFs, from: string, to: string): Promise<void> {
  await mem.mkdir(to, { recursive: true, mode: 0o755 });
  for (const name of readdirSync(from)) {
    const p = path.join(from, name);
    const st = lstatSync(p);
    if (st.isSymbolicLink()) await mem.symlink(readlinkSync(p), `${to}/${name}`);
    else if (st.isDirectory()) await copyInto(mem, p, `${to}/${name}`);
    else await mem.writeFile(`${to}/${name}`, readFileSync(p));
  }
}
