// The orphaned pod dir sweep on an idle node: after a sweep that found no orphan, the
// next sweeps skip the pods dir listing while nothing that makes a pod dir an orphan changed (the
// pods dir's entries, the cluster objects version, the desired and actual states), and a new
// orphan, a changed objects version or generation is swept at once. On a real file system (the
// in-memory one has no inode or times, so there every sweep runs).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { NodeFileSystem } from '../../../src/adapters/node/nodeFs.js';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../../src/adapters/memory/memoryMounter.js';
import type { ClusterView } from '../../../src/ports/cluster.js';
import { discardLogger } from '../../../src/ports/logger.js';
import { MAX_QUIET_SWEEPS_SKIPPED, OrphanedPodDirsCleaner } from '../../../src/kubelet/orphanedPodDirs.js';
import { KubeletLayout } from '../../../src/layout/layout.js';
import { FaultyFs } from '../../support/faultyFs.js';

function setup(): { root: string; fs: FaultyFs; sweeper: OrphanedPodDirsCleaner; state: { version: number; generation: number } } {
  const root = mkdtempSync(join(tmpdir(), 'nodevol-orphans-idle-'));
  mkdirSync(join(root, 'pods', 'known-1'), { recursive: true });
  const fs = new FaultyFs(new NodeFileSystem());
  const state = { version: 1, generation: 1 };
  const cluster: ClusterView = {
    listPods: () => Promise.resolve([]),
    objectsVersion: () => state.version,
    getPersistentVolumeClaim: () => Promise.resolve(undefined),
    getPersistentVolume: () => Promise.resolve(undefined),
    getCSIDriver: () => Promise.resolve(undefined),
    getNodeStatus: () => Promise.resolve({ volumesAttached: [], volumesInUse: [] }),
    setVolumesInUse: () => Promise.resolve(),
  };
  const sweeper = new OrphanedPodDirsCleaner({
    fs,
    layout: new KubeletLayout(root),
    realRootDir: root,
    mounter: new MemoryMounter(MemFs.create()),
    cluster,
    logger: discardLogger,
    sourcesReady: () => true,
    knownPodUIDs: () => ['known-1'],
    podsWithVolumesInActualState: () => new Set(),
    knownPodsGeneration: () => String(state.generation),
  });
  return { root, fs, sweeper, state };
}

const listings = (fs: FaultyFs): number => fs.calls.filter((c) => c.startsWith('readdir ') && c.endsWith('/pods')).length;

describe('orphaned pod dir sweep on an idle node', () => {
  it('skips the listing while nothing changed, at most MAX_QUIET_SWEEPS_SKIPPED times in a row', async () => {
    const { root, fs, sweeper } = setup();
    try {
      assert.equal((await sweeper.cleanupOrphanedPodDirs()).orphans, 0);
      fs.calls.length = 0;
      const results = [];
      for (let i = 0; i < MAX_QUIET_SWEEPS_SKIPPED + 1; i++) results.push(await sweeper.cleanupOrphanedPodDirs());
      assert.equal(results.filter((r) => r.skipped !== undefined).length, MAX_QUIET_SWEEPS_SKIPPED);
      assert.equal(listings(fs), 1, 'one full sweep after the skipped ones');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('a new pod dir, a new objects version or a new generation is swept at the next sweep', async () => {
    const { root, sweeper, state } = setup();
    try {
      await sweeper.cleanupOrphanedPodDirs();
      assert.ok((await sweeper.cleanupOrphanedPodDirs()).skipped !== undefined, 'quiet: skipped');
      mkdirSync(join(root, 'pods', 'gone-1'));
      const r = await sweeper.cleanupOrphanedPodDirs();
      assert.deepEqual(r.removed, ['gone-1'], 'the new orphan is removed at once');
      assert.equal(existsSync(join(root, 'pods', 'gone-1')), false);
      await sweeper.cleanupOrphanedPodDirs(); // quiet again after the removal
      assert.ok((await sweeper.cleanupOrphanedPodDirs()).skipped !== undefined);
      state.version++;
      assert.equal((await sweeper.cleanupOrphanedPodDirs()).skipped, undefined, 'a new objects version: swept');
      assert.ok((await sweeper.cleanupOrphanedPodDirs()).skipped !== undefined);
      state.generation++;
      assert.equal((await sweeper.cleanupOrphanedPodDirs()).skipped, undefined, 'a new generation: swept');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
