/**
 * The idle cost of the cluster dir view with `watch` (the agent's): while nothing
 * changes a pass costs no syscall on node-status.json either; a change to it, or to the target of
 * a symlinked manifest, is seen without waiting for the safety-net full pass; a full pass that
 * finds nothing changed keeps objectsVersion (so the populator stays idle); and an unchanged
 * volumesInUse is not written again. Waits are bounded polls (inotify events are asynchronous).
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { ClusterDirView, FULL_PASS_INTERVAL_MS } from '../../src/adapters/node/clusterDir.js';
import { NodeFileSystem } from '../../src/adapters/node/nodeFs.js';
import { FaultyFs } from '../support/faultyFs.js';

function pod(name: string, claim = `c-${name}`): string {
  return `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: default, uid: uid-${name}}\nspec:\n  nodeName: node-1\n  volumes: [{name: data, persistentVolumeClaim: {claimName: ${claim}}}]\n`;
}

/** Polls `cond` until it holds, failing after 5 s. */
async function waitUntil(cond: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function setup(): { dir: string; fs: FaultyFs; v: ClusterDirView; clock: { now: number } } {
  const dir = mkdtempSync(join(tmpdir(), 'nodevol-idle-view-'));
  mkdirSync(join(dir, 'manifests'));
  for (const n of ['a', 'b']) writeFileSync(join(dir, 'manifests', `${n}.yaml`), pod(n));
  writeFileSync(join(dir, 'node-status.json'), JSON.stringify({ volumesAttached: [], volumesInUse: ['v-1'] }));
  const fs = new FaultyFs(new NodeFileSystem());
  const clock = { now: 0 };
  const v = new ClusterDirView({ dir, nodeName: 'node-1', fs, watch: true, now: () => clock.now });
  return { dir, fs, v, clock };
}

/**
 * Passes until one makes no call at all. The first pass creates the last good store in the
 * cluster dir: one event, one more lstat.
 */
async function settled(fs: FaultyFs, v: ClusterDirView): Promise<void> {
  await waitUntil(async () => {
    fs.calls.length = 0;
    await v.listPods();
    return fs.calls.length === 0;
  }, 'the events of the first pass to be consumed');
}

describe('cluster dir view, watching: idle costs nothing, changes are still seen', () => {
  it('no syscall at all per pass while nothing changes; an edited node-status.json is seen before the full pass', async () => {
    const { dir, fs, v } = setup();
    try {
      await settled(fs, v);
      for (let i = 0; i < 20; i++) await v.listPods();
      assert.deepEqual(fs.calls, [], 'no lstat of node-status.json, no readdir or stat of the manifests');
      writeFileSync(join(dir, 'node-status.json'), JSON.stringify({ volumesAttached: [], volumesInUse: ['v-2'] }));
      await waitUntil(async () => {
        await v.listPods();
        return (await v.getNodeStatus()).volumesInUse[0] === 'v-2';
      }, 'the new node status to be read');
    } finally {
      v.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a full pass that finds nothing changed keeps objectsVersion and the Pod objects; a changed file moves it', async () => {
    const { dir, fs, v, clock } = setup();
    try {
      const first = await v.listPods();
      const version = v.objectsVersion();
      clock.now += FULL_PASS_INTERVAL_MS;
      fs.calls.length = 0;
      const again = await v.listPods();
      assert.ok(fs.calls.some((c) => c.startsWith('readdir ')), 'the safety-net full pass ran');
      assert.equal(v.objectsVersion(), version, 'nothing changed: the same version');
      assert.equal(again, first, 'the same list');
      writeFileSync(join(dir, 'manifests', 'b.yaml'), pod('b', 'other'));
      await waitUntil(async () => {
        await v.listPods();
        return v.objectsVersion() !== version;
      }, 'the edit to move the version');
      const b = (await v.listPods()).find((p) => p.name === 'b');
      assert.equal(b?.volumes[0]?.persistentVolumeClaim?.claimName, 'other');
    } finally {
      v.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an edit of the target of a symlinked manifest is seen before the full pass', async () => {
    const { dir, v } = setup();
    const outside = mkdtempSync(join(tmpdir(), 'nodevol-idle-target-'));
    try {
      writeFileSync(join(outside, 'c.yaml'), pod('c'));
      symlinkSync(join(outside, 'c.yaml'), join(dir, 'manifests', 'c.yaml'));
      await waitUntil(async () => (await v.listPods()).some((p) => p.name === 'c'), 'the symlinked manifest to be read');
      writeFileSync(join(outside, 'c.yaml'), pod('c', 'edited'));
      await waitUntil(async () => (await v.listPods()).find((p) => p.name === 'c')?.volumes[0]?.persistentVolumeClaim?.claimName === 'edited', 'the edited target to be read');
    } finally {
      v.close();
      rmSync(dir, { recursive: true, force: true });
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('setVolumesInUse with the list already there writes nothing; a different list is written', async () => {
    const { dir, v } = setup();
    try {
      const file = join(dir, 'node-status.json');
      const ino = statSync(file).ino;
      await v.setVolumesInUse(['v-1']);
      assert.equal(statSync(file).ino, ino, 'not rewritten (an atomic write replaces the inode)');
      await v.setVolumesInUse(['v-1', 'v-3']);
      assert.notEqual(statSync(file).ino, ino, 'rewritten');
      assert.deepEqual((JSON.parse(readFileSync(file, 'utf8')) as { volumesInUse: string[] }).volumesInUse, ['v-1', 'v-3']);
      // Another writer changed it back: the same list as ours is written again, not skipped from a stale cache.
      writeFileSync(file, JSON.stringify({ volumesAttached: [], volumesInUse: [] }));
      await v.setVolumesInUse(['v-1', 'v-3']);
      assert.deepEqual((JSON.parse(readFileSync(file, 'utf8')) as { volumesInUse: string[] }).volumesInUse, ['v-1', 'v-3']);
    } finally {
      v.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('cluster dir view: one pass at a time', () => {
  it('listPods called while a pass runs waits for it: the passes never interleave (no watch: each call is a full pass)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodevol-one-pass-'));
    mkdirSync(join(dir, 'manifests'));
    for (const n of ['a', 'b', 'c']) writeFileSync(join(dir, 'manifests', `${n}.yaml`), pod(n));
    writeFileSync(join(dir, 'node-status.json'), JSON.stringify({ volumesAttached: [], volumesInUse: [] }));
    const fs = new FaultyFs(new NodeFileSystem());
    const v = new ClusterDirView({ dir, nodeName: 'node-1', fs, watch: false });
    try {
      await v.listPods(); // the first pass creates the last good store
      fs.calls.length = 0;
      const [first, second] = await Promise.all([v.listPods(), v.listPods()]);
      assert.deepEqual(first.map((p) => p.name), ['a', 'b', 'c']);
      assert.deepEqual(second.map((p) => p.name), ['a', 'b', 'c']);
      const manifests = join(dir, 'manifests');
      const pass = fs.calls.filter((c) => c === `readdir ${manifests}` || c.startsWith(`stat ${manifests}/`));
      // Each pass lists the dir, then stats every file; interleaved passes would list twice first.
      const one = [`readdir ${manifests}`, ...['a', 'b', 'c'].map((n) => `stat ${manifests}/${n}.yaml`)];
      assert.deepEqual(pass, [...one, ...one]);
    } finally {
      v.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('watching: callers that come during a pass share it; a new file is read and parsed once', async () => {
    const { dir, fs, v } = setup();
    try {
      await settled(fs, v);
      writeFileSync(join(dir, 'manifests', 'c.yaml'), pod('c'));
      const file = join(dir, 'manifests', 'c.yaml');
      await waitUntil(async () => {
        const lists = await Promise.all([v.listPods(), v.listPods(), v.listPods()]);
        return lists.every((pods) => pods.some((p) => p.name === 'c'));
      }, 'every concurrent caller to see the new pod');
      assert.equal(fs.calls.filter((c) => c === `readFile ${file}`).length, 1, 'read once, however many callers');
    } finally {
      v.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
