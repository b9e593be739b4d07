// The simulator's filesystem stamps its times from the world's virtual clock. memfs stamps the
// host's: the orphaned pod dir sweep skips a sweep when its pods dir's mtime and ctime (with the
// cluster's and the states' versions) are those of the last sweep that found no orphan
// (src/kubelet/orphanedPodDirs.ts, quietFingerprint), so whether a sweep ran depended on whether
// the host's millisecond had turned between two changes, and the same seed could give another
// run: workloads 1..200 took 15,293,358 steps with the host clock frozen and 15,293,361 with it
// running (the same runs and states otherwise); with virtual times, 15,293,361 both ways.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Node } from '@jsonjoy.com/fs-core';

import { DurableFs, inodeMaker, simSuperblock } from '../../../src/sim/durableFs.js';

const DATA = new TextEncoder().encode('{}');

async function times(fs: DurableFs, path: string): Promise<[number | undefined, number | undefined]> {
  const st = await fs.lstat(path);
  return [st.mtimeMs, st.ctimeMs];
}

describe("DurableFs: an inode's times are the world's virtual now", () => {
  it('stamps a directory when an entry is made, renamed or removed in it, and a file when it is written, at virtual time', async () => {
    const now = { ms: 3_000 };
    const fs = new DurableFs(() => now.ms);
    assert.deepEqual(await times(fs, '/'), [3_000, 3_000], 'the root, made by memfs before the clock was given');

    now.ms = 5_000;
    await fs.mkdir('/r/pods/a', { recursive: true, mode: 0o750 });
    assert.deepEqual(await times(fs, '/r/pods'), [5_000, 5_000]);
    assert.deepEqual(await times(fs, '/r/pods/a'), [5_000, 5_000]);

    now.ms = 7_000;
    await fs.mkdir('/r/pods/b', { recursive: false, mode: 0o750 });
    assert.deepEqual(await times(fs, '/r/pods'), [7_000, 7_000]);
    assert.deepEqual(await times(fs, '/r/pods/a'), [5_000, 5_000], 'a sibling keeps its times');

    now.ms = 9_000;
    await fs.writeFile('/r/pods/b/f', DATA);
    assert.deepEqual(await times(fs, '/r/pods/b/f'), [9_000, 9_000]);
    assert.deepEqual(await times(fs, '/r/pods/b'), [9_000, 9_000]);
    assert.deepEqual(await times(fs, '/r/pods'), [7_000, 7_000], 'a change two levels down leaves the pods dir alone');

    now.ms = 11_000;
    await fs.rename('/r/pods/b/f', '/r/pods/b/g');
    assert.deepEqual(await times(fs, '/r/pods/b'), [11_000, 11_000]);

    now.ms = 13_000;
    await fs.rmdir('/r/pods/a');
    assert.deepEqual(await times(fs, '/r/pods'), [13_000, 13_000]);
    // Reading leaves the times a stat reports alone, and nothing is the host's.
    await fs.readFile('/r/pods/b/g', 1024);
    assert.deepEqual(await times(fs, '/r/pods/b/g'), [9_000, 9_000]);
  });

  it('gives two changes in one virtual instant one time, as two in one jiffy get on ext4', async () => {
    const now = { ms: 20_000 };
    const fs = new DurableFs(() => now.ms);
    await fs.mkdir('/r/pods', { recursive: true, mode: 0o750 });
    await fs.mkdir('/r/pods/a', { recursive: false, mode: 0o750 });
    const before = await fs.lstat('/r/pods');
    await fs.mkdir('/r/pods/b', { recursive: false, mode: 0o750 });
    const after = await fs.lstat('/r/pods');
    assert.deepEqual([after.ino, after.mtimeMs, after.ctimeMs], [before.ino, before.mtimeMs, before.ctimeMs]);
    now.ms = 20_001;
    await fs.rmdir('/r/pods/b');
    assert.deepEqual(await times(fs, '/r/pods'), [20_001, 20_001]);
  });

  it('gives the same times to the same operations whatever the host clock says, and a power cut keeps them virtual', async () => {
    const play = async (): Promise<Array<[number | undefined, number | undefined]>> => {
      const now = { ms: 1_000 };
      const fs = new DurableFs(() => now.ms);
      await fs.mkdir('/r/pods/a', { recursive: true, mode: 0o750 });
      now.ms = 1_500;
      await fs.writeFile('/r/pods/a/f', DATA, { fsync: true });
      await fs.fsyncDir('/r/pods/a');
      now.ms = 2_000;
      fs.powerCut();
      return [await times(fs, '/r/pods'), await times(fs, '/r/pods/a'), await times(fs, '/r/pods/a/f')];
    };
    const first = await play();
    assert.deepEqual(await play(), first);
    for (const [m, c] of first) assert.ok(m !== undefined && c !== undefined && m <= 2_000 && c <= 2_000, JSON.stringify(first));
  });

  it("makes an inode with the stamp's Date, and memfs' own constructor's when it is given none", () => {
    const at = new Date(42);
    const made = inodeMaker(Node, 1, 1)(5, 0o40755, () => at);
    assert.deepEqual([made.atime, made.mtime, made.ctime, made.btime].map((d) => d.getTime()), [42, 42, 42, 42]);
    const superblock = simSuperblock(1, 1, () => 77);
    const root = Object.values(superblock.inodes)[0];
    assert.ok(root !== undefined);
    assert.equal(root.mtime.getTime(), 77);
  });
});
