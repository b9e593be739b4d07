// kubelet's orphaned pod dir cleanup: dirs of gone pods go once nothing is mounted or left in
// them; a dir that still holds a mount or a volume is never removed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setupDataDirs } from '../../../src/agent/dataDirs.js';
import { OrphanedPodDirsCleaner } from '../../../src/kubelet/orphanedPodDirs.js';
import { InMemoryNode, ROOT } from '../../support/inMemoryNode.js';

function cleaner(node: InMemoryNode, options: { sourcesReady?: () => boolean } = {}): OrphanedPodDirsCleaner {
  return new OrphanedPodDirsCleaner({
    fs: node.fs,
    layout: node.layout,
    realRootDir: ROOT,
    mounter: node.mounter,
    cluster: node.cluster,
    logger: node.logger,
    sourcesReady: options.sourcesReady ?? (() => node.vm?.populator.hasAddedPods() ?? true),
    knownPodUIDs: () => (node.vm === undefined ? [] : [...node.vm.dsw.getPods(), ...node.vm.asw.getAllMountedVolumes().map((m) => m.podName)]),
    podsWithVolumesInActualState: () => new Set(node.vm?.asw.getAllMountedVolumes().map((m) => m.podName) ?? []),
  });
}

const POD = `${ROOT}/pods/uid-1`;

describe('cleanupOrphanedPodDirs', () => {
  it('removes the dir of a deleted pod once its volume is torn down: the root is clean again', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    node.addVolume('pv-1', 'h1');
    node.addPod('uid-1', ['pv-1']);
    node.fs.writeRaw(`${POD}/etc-hosts`, '127.0.0.1 localhost\n');
    node.fs.writeRaw(`${POD}/containers/app/0123`, '');
    await node.startKubelet(true);
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
    const sweeper = cleaner(node);

    // Running pod: never an orphan.
    assert.deepEqual((await sweeper.cleanupOrphanedPodDirs()).orphans, 0);

    node.cluster.deletePod('uid-1');
    // The pod has left the desired state, but its volume is still mounted: the dir stays.
    await node.kubelet.populateOnce();
    const during = await sweeper.cleanupOrphanedPodDirs();
    assert.deepEqual(during.removed, []);
    assert.equal(await node.exists(`${POD}/etc-hosts`), true);

    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 0 && node.kubelet.asw.getAttachedVolumes().every((v) => v.deviceMountState !== 'DeviceGloballyMounted'));
    await node.steps(2);
    const after = await sweeper.cleanupOrphanedPodDirs();
    assert.deepEqual(after.removed, ['uid-1']);
    assert.equal(await node.exists(POD), false);
    assert.deepEqual(node.tree().filter((p) => p.startsWith(`${ROOT}/pods/`)), [`${ROOT}/pods/`]);
  });

  it('never removes a pod dir that still holds a mount, whatever the actual state says', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    node.fs.writeRaw(`${ROOT}/elsewhere/data/file`, 'x');
    node.fs.writeRaw(`${POD}/volumes/kubernetes.io~csi/pv-1/mount/.keep`, '');
    await node.mounter.mount(`${ROOT}/elsewhere/data`, `${POD}/volumes/kubernetes.io~csi/pv-1/mount`, '', ['bind']);
    const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
    assert.equal(r.orphans, 1);
    assert.match(r.kept[0]?.reason ?? '', /still holds 1 mount/);
    assert.equal(await node.exists(`${POD}/volumes/kubernetes.io~csi/pv-1/mount/.keep`), true);
    assert.equal(await node.exists(`${ROOT}/elsewhere/data/file`), true);
  });

  it('keeps a pod dir whose volume dir still has its vol_data.json (kubelet: "not a directory")', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    node.fs.writeRaw(`${POD}/volumes/kubernetes.io~csi/pv-1/vol_data.json`, '{}');
    node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
    const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
    assert.match(r.kept[0]?.reason ?? '', /vol_data\.json: not a directory/);
    assert.equal(await node.exists(`${POD}/volumes/kubernetes.io~csi/pv-1/vol_data.json`), true);
    assert.equal(await node.exists(`${POD}/etc-hosts`), true, 'nothing else removed before the volumes are gone');
    // The aggregate error line is written once, not every sweep.
    await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
    const errors = node.logger.lines.filter((l) => l.msg.startsWith('There were many similar errors'));
    assert.equal(errors.length, 2); // one per cleaner instance
  });

  it('keeps a pod dir with a block volume entry under volumeDevices', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    await node.fs.mkdir(`${POD}/volumeDevices/kubernetes.io~csi`, { recursive: true, mode: 0o750 });
    await node.fs.symlink(`${ROOT}/plugins/kubernetes.io/csi/volumeDevices/pv-b/dev/uid-1`, `${POD}/volumeDevices/kubernetes.io~csi/pv-b`);
    const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
    assert.match(r.kept[0]?.reason ?? '', /volumeDevices still holds 1 volume/);
    assert.equal(await node.exists(`${POD}/volumeDevices/kubernetes.io~csi/pv-b`), true);
  });

  it('removes symlinks without following them', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    node.fs.writeRaw(`${ROOT}/precious/file`, 'x');
    await node.fs.mkdir(`${POD}/plugins`, { recursive: true, mode: 0o750 });
    await node.fs.symlink(`${ROOT}/precious`, `${POD}/plugins/link`);
    await node.fs.mkdir(`${POD}/volumes/kubernetes.io~csi/pv-1/mount`, { recursive: true, mode: 0o750 });
    const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
    assert.deepEqual(r.removed, ['uid-1']);
    assert.equal(await node.exists(POD), false);
    assert.equal(await node.exists(`${ROOT}/precious/file`), true);
  });

  it('sweeps nothing before the pod sources are ready or while the pods cannot be listed', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
    assert.equal((await cleaner(node, { sourcesReady: () => false }).cleanupOrphanedPodDirs()).skipped, 'pod sources not ready');
    node.cluster.unreachable = 'connection refused';
    assert.equal((await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs()).skipped, 'pods not listed');
    assert.equal(await node.exists(`${POD}/etc-hosts`), true);
  });

  it('keeps an orphan whose volumes are still in the actual state, even with nothing mounted', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
    const sweeper = new OrphanedPodDirsCleaner({
      fs: node.fs,
      layout: node.layout,
      realRootDir: ROOT,
      mounter: node.mounter,
      cluster: node.cluster,
      logger: node.logger,
      sourcesReady: () => true,
      knownPodUIDs: () => [],
      podsWithVolumesInActualState: () => new Set(['uid-1']),
    });
    const r = await sweeper.cleanupOrphanedPodDirs();
    assert.deepEqual(r.kept, [{ podUID: 'uid-1', reason: 'volumes of the pod are still in the actual state of world' }]);
    assert.equal(await node.exists(`${POD}/etc-hosts`), true);
  });

  it('leaves the dirs of known pods alone', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    node.addPod('uid-1', []);
    node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
    const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
    assert.equal(r.orphans, 0);
    assert.equal(await node.exists(`${POD}/etc-hosts`), true);
  });

  describe('nodevol\'s own temp file (vol_data.json.tmp: SetUp\'s atomic write cut short before its rename)', () => {
    const VOL = `${POD}/volumes/kubernetes.io~csi/pv-1`;
    const TEMP = `${VOL}/vol_data.json.tmp`;
    const BYTES = '{"attachmentID":"csi-x","driverName":"csi.example.com","nodeName":"node-1","specVolID":"pv-1","volumeHandle":"h1","volumeLifecycleMode":"Persistent"}\n';

    it('alone in a CSI pod volume dir: removed, and the pod dir with it (once, not a warning every sweep for ever)', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      await node.fs.mkdir(`${VOL}/mount`, { recursive: true, mode: 0o750 });
      node.fs.writeRaw(TEMP, BYTES);
      node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
      const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
      assert.deepEqual(r.kept, []);
      assert.deepEqual(r.removed, ['uid-1']);
      assert.equal(await node.exists(POD), false);
    });

    it('beside a vol_data.json (a TearDown not finished): kept as kubelet keeps it, the temp file untouched', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${VOL}/vol_data.json`, BYTES);
      node.fs.writeRaw(TEMP, BYTES);
      const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
      assert.equal(r.kept.length, 1);
      assert.equal(await node.exists(TEMP), true);
      assert.equal(await node.exists(`${VOL}/vol_data.json`), true);
    });

    it('not ours: a symlink of that name, the name under another plugin, or another name, is never removed', async () => {
      for (const [what, make, keep] of [
        ['a symlink', async (n: InMemoryNode) => {
          n.fs.writeRaw(`${ROOT}/precious.json`, BYTES);
          await n.fs.mkdir(VOL, { recursive: true, mode: 0o750 });
          await n.fs.symlink(`${ROOT}/precious.json`, TEMP);
        }, TEMP],
        ['another plugin', (n: InMemoryNode) => {
          n.fs.writeRaw(`${POD}/volumes/kubernetes.io~empty-dir/cache/vol_data.json.tmp`, BYTES);
          return Promise.resolve();
        }, `${POD}/volumes/kubernetes.io~empty-dir/cache/vol_data.json.tmp`],
        ['another name', (n: InMemoryNode) => {
          n.fs.writeRaw(`${VOL}/vol_data.json.1234.tmp`, BYTES);
          return Promise.resolve();
        }, `${VOL}/vol_data.json.1234.tmp`],
      ] as const) {
        const node = new InMemoryNode();
        await setupDataDirs(node.fs, node.layout);
        await make(node);
        const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
        assert.equal(r.kept.length, 1, what);
        assert.match(r.kept[0]?.reason ?? '', /not a directory/, what);
        assert.equal(await node.exists(keep), true, what);
        if (what === 'a symlink') assert.equal(await node.exists(`${ROOT}/precious.json`), true);
      }
    });
  });

  it('end to end: kubelet killed between SetUp\'s temp file and its rename, the pod deleted meanwhile: the agent\'s sweep removes the pod dir', async () => {
    const node = new InMemoryNode();
    await setupDataDirs(node.fs, node.layout);
    node.addVolume('pv-1', 'h1');
    node.addPod('uid-1', ['pv-1']);
    await node.startKubelet(true);
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
    // The state the crash leaves: the target not published yet, the write not renamed.
    node.crashKubelet();
    const vol = `${POD}/volumes/kubernetes.io~csi/pv-1`;
    await node.driver.nodeUnpublishVolume({ volumeId: 'h1', targetPath: `${vol}/mount` });
    await node.fs.rename(`${vol}/vol_data.json`, `${vol}/vol_data.json.tmp`);
    node.cluster.deletePod('uid-1');
    await node.startKubelet(true);
    const sweeper = cleaner(node);
    let swept = false;
    for (let i = 0; i < 60 && !swept; i++) {
      await node.step();
      swept = (await sweeper.cleanupOrphanedPodDirs()).removed.includes('uid-1');
    }
    assert.equal(swept, true, node.tree().join('\n'));
    assert.equal(await node.exists(POD), false);
  });
});
