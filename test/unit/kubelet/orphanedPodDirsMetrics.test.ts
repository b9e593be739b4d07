// kubelet_orphan_pod_cleaned_volumes and kubelet_orphan_pod_cleaned_volumes_errors:
// after each sweep that ran, the orphaned pod dirs found and, of those, the ones left in place;
// a skipped sweep leaves the gauges as they were; the mount table is read only when some orphan
// may be removed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { setupDataDirs } from '../../../src/agent/dataDirs.js';
import { OrphanedPodDirsCleaner } from '../../../src/kubelet/orphanedPodDirs.js';
import { createOrphanPodMetrics, ORPHAN_POD_METRIC_NAMES, type OrphanPodMetrics } from '../../../src/adapters/prometheus/orphanPodMetrics.js';
import { InMemoryNode, ROOT } from '../../support/inMemoryNode.js';

class RecordingOrphanMetrics implements OrphanPodMetrics {
  readonly sweeps: [number, number][] = [];
  orphanPodSweep(orphans: number, errors: number): void {
    this.sweeps.push([orphans, errors]);
  }
}

function cleaner(node: InMemoryNode, metrics: OrphanPodMetrics, o: { ready?: boolean; inAsw?: readonly string[] } = {}): OrphanedPodDirsCleaner {
  return new OrphanedPodDirsCleaner({
    fs: node.fs,
    layout: node.layout,
    realRootDir: ROOT,
    mounter: node.mounter,
    cluster: node.cluster,
    logger: node.logger,
    sourcesReady: () => o.ready ?? true,
    knownPodUIDs: () => [],
    podsWithVolumesInActualState: () => new Set(o.inAsw ?? []),
    metrics,
  });
}

/** Counts the mount table reads of the node's mounter. */
function countTableReads(node: InMemoryNode): () => number {
  let reads = 0;
  const inner = node.mounter.readMountTable.bind(node.mounter);
  node.mounter.readMountTable = () => {
    reads++;
    return inner();
  };
  return () => reads;
}

describe('orphaned pod dir sweep metrics', () => {
  it('sets the orphans found and the ones kept after each sweep', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    node.fs.writeRaw(`${ROOT}/pods/gone-1/etc-hosts`, 'x');
    node.fs.writeRaw(`${ROOT}/pods/gone-2/volumes/kubernetes.io~csi/pv-1/vol_data.json`, '{}'); // kept: "not a directory"
    node.fs.writeRaw(`${ROOT}/pods/gone-3/etc-hosts`, 'x'); // kept: still in the actual state
    const metrics = new RecordingOrphanMetrics();
    const sweeper = cleaner(node, metrics, { inAsw: ['gone-3'] });
    const r = await sweeper.cleanupOrphanedPodDirs();
    assert.deepEqual(r.removed, ['gone-1']);
    assert.deepEqual(metrics.sweeps, [[3, 2]]);
    await sweeper.cleanupOrphanedPodDirs();
    assert.deepEqual(metrics.sweeps, [
      [3, 2],
      [2, 2],
    ]);
  });

  it('a skipped sweep sets nothing; a sweep of a clean root sets 0 and 0 without reading the mount table', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    const reads = countTableReads(node);
    const metrics = new RecordingOrphanMetrics();
    assert.equal((await cleaner(node, metrics, { ready: false }).cleanupOrphanedPodDirs()).skipped, 'pod sources not ready');
    node.cluster.unreachable = 'connection refused';
    assert.equal((await cleaner(node, metrics).cleanupOrphanedPodDirs()).skipped, 'pods not listed');
    assert.deepEqual(metrics.sweeps, []);
    node.cluster.unreachable = undefined;
    node.addPod('running', []);
    node.fs.writeRaw(`${ROOT}/pods/running/etc-hosts`, 'x');
    await cleaner(node, metrics).cleanupOrphanedPodDirs();
    assert.deepEqual(metrics.sweeps, [[0, 0]]);
    assert.equal(reads(), 0, 'no orphan: the mount table is not read');
    node.fs.writeRaw(`${ROOT}/pods/gone/etc-hosts`, 'x');
    await cleaner(node, metrics).cleanupOrphanedPodDirs();
    assert.equal(reads(), 1, 'an orphan that may be removed: read once');
  });

  it('registers kubelet\'s two gauges, at 0 before the first sweep', async () => {
    const registry = new Registry();
    const port = createOrphanPodMetrics(registry);
    const text0 = await registry.metrics();
    assert.match(text0, /^# TYPE kubelet_orphan_pod_cleaned_volumes gauge$/m);
    assert.match(text0, /^# TYPE kubelet_orphan_pod_cleaned_volumes_errors gauge$/m);
    assert.match(text0, /^# HELP kubelet_orphan_pod_cleaned_volumes \[ALPHA\] The total number of orphaned Pods whose volumes were cleaned in the last periodic sweep\.$/m);
    assert.match(text0, /^kubelet_orphan_pod_cleaned_volumes 0$/m);
    port.orphanPodSweep(4, 1);
    const text = await registry.metrics();
    assert.match(text, new RegExp(`^${ORPHAN_POD_METRIC_NAMES.cleanedVolumes} 4$`, 'm'));
    assert.match(text, new RegExp(`^${ORPHAN_POD_METRIC_NAMES.cleanedVolumesErrors} 1$`, 'm'));
  });
});
