// kubelet's orphaned pod dir cleanup: dirs of gone pods go once nothing is mounted or left in
// them; a dir that still holds a mount or a volume is never removed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setupDataDirs } from '../../../src/agent/dataDirs.js';
import { OrphanedPodDirsCleaner, orphanedPodDirsCleanerFor, type OrphanSweepVolumeManagerView } from '../../../src/kubelet/orphanedPodDirs.js';
import { FakeCluster } from '../../../src/adapters/memory/fakeCluster.js';
import { FsError, overrideFileSystem, type FileStat, type FileSystem } from '../../../src/ports/fs.js';
import type { Mounter } from '../../../src/ports/mounter.js';
import { KubeletLayout } from '../../../src/layout/layout.js';
import { InMemoryNode, ROOT } from '../../support/inMemoryNode.js';

function cleaner(node: InMemoryNode, options: { sourcesReady?: () => boolean; fs?: FileSystem; mounter?: Mounter } = {}): OrphanedPodDirsCleaner {
  return new OrphanedPodDirsCleaner({
    fs: options.fs ?? node.fs,
    layout: node.layout,
    realRootDir: ROOT,
    mounter: options.mounter ?? node.mounter,
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

  describe('what is never removed (kubelet_volumes.go cleanupOrphanedPodDirs, and nodevol\'s own confinement)', () => {
    const ready = { sourcesReady: () => true };
    /** `node.fs` whose readdir of `dir` fails with `code`. */
    const failingReaddir = (node: InMemoryNode, dir: string, code: string): FileSystem =>
      overrideFileSystem(node.fs, { readdir: (p) => (p === dir ? Promise.reject(new FsError(code, p, 'readdir')) : node.fs.readdir(p)) });

    it('a pods dir resolving outside the root dir is not swept at all', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      await node.fs.rmdir(`${ROOT}/pods`);
      node.fs.writeRaw('/elsewhere/pods/uid-1/etc-hosts', 'x');
      await node.fs.symlink('/elsewhere/pods', `${ROOT}/pods`);
      const r = await cleaner(node, ready).cleanupOrphanedPodDirs();
      assert.deepEqual(r, { skipped: `${ROOT}/pods missing or outside the root dir`, orphans: 0, removed: [], kept: [] });
      assert.equal(await node.exists('/elsewhere/pods/uid-1/etc-hosts'), true);
    });

    it('an entry of the pods dir that is not a directory (a symlink, a file) is not a pod dir: never followed nor removed', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${ROOT}/precious/etc-hosts`, 'x');
      node.fs.writeRaw(`${ROOT}/precious/containers/app/0`, 'x');
      await node.fs.symlink(`${ROOT}/precious`, `${ROOT}/pods/uid-link`);
      node.fs.writeRaw(`${ROOT}/pods/stray`, 'x');
      const r = await cleaner(node, ready).cleanupOrphanedPodDirs();
      assert.deepEqual(r, { orphans: 0, removed: [], kept: [] });
      assert.equal(await node.exists(`${ROOT}/precious/etc-hosts`), true);
      assert.equal(await node.exists(`${ROOT}/precious/containers/app/0`), true);
      assert.equal(await node.exists(`${ROOT}/pods/stray`), true);
    });

    it('a volumes dir that is back after its removal (a SetUp racing the sweep) is kept whole, never removed with its files', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      await node.fs.mkdir(`${POD}/volumes/kubernetes.io~csi/pv-1/mount`, { recursive: true, mode: 0o750 });
      const fs = overrideFileSystem(node.fs, {
        rmdir: async (p) => {
          await node.fs.rmdir(p);
          if (p === `${POD}/volumes`) node.fs.writeRaw(`${POD}/volumes/kubernetes.io~csi/pv-2/vol_data.json`, '{}');
        },
      });
      const r = await cleaner(node, { ...ready, fs }).cleanupOrphanedPodDirs();
      assert.deepEqual(r.kept, [{ podUID: 'uid-1', reason: `${POD}/volumes was found after it was removed` }]);
      assert.equal(await node.exists(`${POD}/volumes/kubernetes.io~csi/pv-2/vol_data.json`), true);
    });

    it('a symlink under volumes/ (as a plugin dir or as a CSI volume dir) is never followed: what it points at stays', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      await node.fs.mkdir(`${ROOT}/precious-a/mount`, { recursive: true, mode: 0o750 });
      await node.fs.mkdir(`${ROOT}/precious-b/vol`, { recursive: true, mode: 0o750 });
      await node.fs.mkdir(`${POD}/volumes/kubernetes.io~csi`, { recursive: true, mode: 0o750 });
      await node.fs.symlink(`${ROOT}/precious-a`, `${POD}/volumes/kubernetes.io~csi/pv-x`);
      await node.fs.symlink(`${ROOT}/precious-b`, `${POD}/volumes/kubernetes.io~link`);
      const r = await cleaner(node, ready).cleanupOrphanedPodDirs();
      assert.equal(r.kept.length, 1);
      assert.match(r.kept[0]?.reason ?? '', /not a directory/);
      assert.equal(await node.exists(`${ROOT}/precious-a/mount`), true);
      assert.equal(await node.exists(`${ROOT}/precious-b/vol`), true);
    });

    // An unreadable volumeDevices/ (a block volume may be there) or volumes/ keeps the pod dir
    // whole: nothing else of it is removed first.
    for (const [unreadable, inside] of [
      ['volumeDevices', 'volumeDevices/kubernetes.io~csi/pv-b'],
      ['volumes', 'volumes/kubernetes.io~csi/pv-1/mount'],
    ] as const) {
      it(`an unreadable ${unreadable}/ keeps the pod dir whole`, async () => {
        const node = new InMemoryNode();
        await setupDataDirs(node.fs, node.layout);
        await node.fs.mkdir(`${POD}/${inside}`, { recursive: true, mode: 0o750 });
        node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
        const r = await cleaner(node, { ...ready, fs: failingReaddir(node, `${POD}/${unreadable}`, 'EIO') }).cleanupOrphanedPodDirs();
        assert.equal(r.kept.length, 1);
        assert.match(r.kept[0]?.reason ?? '', /EIO/);
        assert.equal(await node.exists(`${POD}/etc-hosts`), true);
      });
    }

    it('a file directly under volumeDevices/ is not a block volume: the pod dir is removed', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${POD}/volumeDevices/stray`, 'x');
      const r = await cleaner(node, ready).cleanupOrphanedPodDirs();
      assert.deepEqual(r.removed, ['uid-1']);
      assert.equal(await node.exists(POD), false);
    });

    it('a mount table that cannot be read: nothing swept, an error logged, the sweep does not throw', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
      node.mounter.readMountTable = () => Promise.reject(new FsError('EIO', '/proc/self/mountinfo', 'open'));
      const r = await cleaner(node, ready).cleanupOrphanedPodDirs();
      assert.equal(r.removed.length, 0);
      assert.match(r.skipped ?? '', /EIO/);
      assert.equal(node.logger.lines.filter((l) => l.severity === 'E' && l.msg.startsWith('Could not read the pods dir or the mount table')).length, 1);
      assert.equal(await node.exists(`${POD}/etc-hosts`), true);
    });
  });

  describe('orphanedPodDirsCleanerFor: the volume manager\'s pods are known (kubelet_volumes.go, the desired and actual states)', () => {
    function view(s: { dsw: string[]; asw: string[]; dswGen?: () => number; aswGen?: () => number }): OrphanSweepVolumeManagerView {
      return {
        populator: { hasAddedPods: () => true },
        dsw: { getPods: () => s.dsw, ...(s.dswGen === undefined ? {} : { generation: s.dswGen }) },
        asw: { getAllMountedVolumes: () => s.asw.map((podName) => ({ podName })), ...(s.aswGen === undefined ? {} : { generation: s.aswGen }) },
      };
    }
    function sweeperFor(node: InMemoryNode, vm: OrphanSweepVolumeManagerView, cluster = node.cluster) {
      return orphanedPodDirsCleanerFor(vm, { fs: node.fs, layout: node.layout, realRootDir: ROOT, mounter: node.mounter, cluster, logger: node.logger });
    }

    it('a pod only in the desired state (not listed by the API server) is not an orphan', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
      const r = await sweeperFor(node, view({ dsw: ['uid-1'], asw: [] })).cleanupOrphanedPodDirs();
      assert.deepEqual(r, { orphans: 0, removed: [], kept: [] });
      assert.equal(await node.exists(`${POD}/etc-hosts`), true);
    });

    for (const missing of ['desired', 'actual'] as const) {
      it(`without a generation of the ${missing} state, no sweep is skipped: a pod leaving the states is swept at once`, async () => {
        const node = new InMemoryNode();
        await setupDataDirs(node.fs, node.layout);
        node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
        const s = { dsw: [] as string[], asw: ['uid-1'], ...(missing === 'desired' ? { aswGen: () => 1 } : { dswGen: () => 1 }) };
        const sweeper = sweeperFor(node, view(s), new FakeCluster({ watch: true }));
        assert.deepEqual(await sweeper.cleanupOrphanedPodDirs(), { orphans: 0, removed: [], kept: [] });
        s.asw = [];
        assert.deepEqual((await sweeper.cleanupOrphanedPodDirs()).removed, ['uid-1']);
        assert.equal(await node.exists(POD), false);
      });
    }
  });

  describe('what the sweep reports and logs', () => {
    const ready = { sourcesReady: () => true };

    it('a skipped sweep reports nothing removed, nothing kept, and why', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
      assert.deepEqual(await cleaner(node, { sourcesReady: () => false }).cleanupOrphanedPodDirs(), { skipped: 'pod sources not ready', orphans: 0, removed: [], kept: [] });
      node.cluster.unreachable = 'connection refused';
      assert.deepEqual(await cleaner(node, ready).cleanupOrphanedPodDirs(), { skipped: 'pods not listed', orphans: 0, removed: [], kept: [] });
    });

    it('a pod dir holding a mount is kept with the count and the first mount point as the reason', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${ROOT}/elsewhere/data/file`, 'x');
      await node.fs.mkdir(`${POD}/volumes/kubernetes.io~csi/pv-1/mount`, { recursive: true, mode: 0o750 });
      await node.mounter.mount(`${ROOT}/elsewhere/data`, `${POD}/volumes/kubernetes.io~csi/pv-1/mount`, '', ['bind']);
      const r = await cleaner(node, ready).cleanupOrphanedPodDirs();
      assert.deepEqual(r.kept, [{ podUID: 'uid-1', reason: `the pod dir still holds 1 mount(s), e.g. ${POD}/volumes/kubernetes.io~csi/pv-1/mount` }]);
    });

    it('the aggregate error line is written when the kept pods change, not at every sweep of one cleaner', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${POD}/volumes/kubernetes.io~csi/pv-1/vol_data.json`, '{}');
      const sweeper = cleaner(node, ready);
      const errors = (): number => node.logger.lines.filter((l) => l.msg.startsWith('There were many similar errors')).length;
      await sweeper.cleanupOrphanedPodDirs();
      await sweeper.cleanupOrphanedPodDirs();
      assert.equal(errors(), 1);
      node.fs.writeRaw(`${ROOT}/pods/uid-2/volumes/kubernetes.io~csi/pv-2/vol_data.json`, '{}');
      await sweeper.cleanupOrphanedPodDirs();
      assert.equal(errors(), 2);
    });

    it('a pods dir that cannot be listed: nothing swept, an error logged (none for a pods dir gone meanwhile)', async () => {
      for (const [code, logged] of [['EIO', 1], ['ENOENT', 0]] as const) {
        const node = new InMemoryNode();
        await setupDataDirs(node.fs, node.layout);
        node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
        const fs = overrideFileSystem(node.fs, { readdir: (p) => (p === `${ROOT}/pods` ? Promise.reject(new FsError(code, p, 'readdir')) : node.fs.readdir(p)) });
        const r = await cleaner(node, { ...ready, fs }).cleanupOrphanedPodDirs();
        assert.equal(r.removed.length, 0, code);
        assert.match(r.skipped ?? '', new RegExp(code), code);
        assert.equal(node.logger.lines.filter((l) => l.severity === 'E').length, logged, code);
        assert.equal(await node.exists(`${POD}/etc-hosts`), true, code);
      }
    });

    it('orphans are handled in name order, whatever order the file system lists the pods dir in', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      const listed = ['uid-b', 'uid-d', 'uid-a', 'uid-c'];
      for (const uid of listed) node.fs.writeRaw(`${ROOT}/pods/${uid}/etc-hosts`, 'x');
      const fs = overrideFileSystem(node.fs, {
        readdir: async (p) => {
          const entries = await node.fs.readdir(p);
          return p === `${ROOT}/pods` ? entries.sort((a, b) => listed.indexOf(a.name) - listed.indexOf(b.name)) : entries;
        },
      });
      const r = await cleaner(node, { ...ready, fs }).cleanupOrphanedPodDirs();
      assert.deepEqual(r.removed, ['uid-a', 'uid-b', 'uid-c', 'uid-d']);
    });

    it('the mount table is not read when every orphan still has volumes in the actual state', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
      let reads = 0;
      const inner = node.mounter.readMountTable.bind(node.mounter);
      node.mounter.readMountTable = () => {
        reads++;
        return inner();
      };
      const sweeper = new OrphanedPodDirsCleaner({
        fs: node.fs, layout: node.layout, realRootDir: ROOT, mounter: node.mounter, cluster: node.cluster, logger: node.logger,
        sourcesReady: () => true, knownPodUIDs: () => [], podsWithVolumesInActualState: () => new Set(['uid-1']),
      });
      assert.equal((await sweeper.cleanupOrphanedPodDirs()).kept.length, 1);
      assert.equal(reads, 0);
    });

    it('a root dir whose path says "mount point": a CSI volume dir without its mount dir is still removed', async () => {
      const node = new InMemoryNode();
      const root = '/srv/mount point/kubelet';
      const layout = new KubeletLayout(root);
      await setupDataDirs(node.fs, layout);
      await node.fs.mkdir(`${root}/pods/uid-1/volumes/kubernetes.io~csi/pv-1`, { recursive: true, mode: 0o750 });
      const r = await new OrphanedPodDirsCleaner({
        fs: node.fs, layout, realRootDir: root, mounter: node.mounter, cluster: node.cluster, logger: node.logger,
        sourcesReady: () => true, knownPodUIDs: () => [], podsWithVolumesInActualState: () => new Set(),
      }).cleanupOrphanedPodDirs();
      assert.deepEqual(r, { orphans: 1, removed: ['uid-1'], kept: [] });
    });

    it('a root dir whose path says "mount point": an ordinary ENOTEMPTY is no mount point refusal, the pod dir goes', async () => {
      // The refusal is told by its class, not by words of its message: a file system error names
      // its path, and the root dir's own path may hold any words.
      for (const root of ['/srv/plain/kubelet', '/srv/mount point/kubelet']) {
        const node = new InMemoryNode();
        const layout = new KubeletLayout(root);
        await setupDataDirs(node.fs, layout);
        await node.fs.mkdir(`${root}/pods/uid-1/volumes/kubernetes.io~empty-dir/cache/sub`, { recursive: true, mode: 0o750 });
        const r = await new OrphanedPodDirsCleaner({
          fs: node.fs, layout, realRootDir: root, mounter: node.mounter, cluster: node.cluster, logger: node.logger,
          sourcesReady: () => true, knownPodUIDs: () => [], podsWithVolumesInActualState: () => new Set(),
        }).cleanupOrphanedPodDirs();
        assert.deepEqual(r, { orphans: 1, removed: ['uid-1'], kept: [] }, root);
        assert.equal(await node.exists(`${root}/pods/uid-1`), false, root);
      }
    });

    it('a temp file of an interrupted write that cannot be removed is logged (a gone one is not); the pod dir is kept', async () => {
      const VOL = `${POD}/volumes/kubernetes.io~csi/pv-1`;
      for (const [code, logged] of [['EACCES', 1], ['ENOENT', 0]] as const) {
        const node = new InMemoryNode();
        await setupDataDirs(node.fs, node.layout);
        node.fs.writeRaw(`${VOL}/vol_data.json.tmp`, '{}');
        const fs = overrideFileSystem(node.fs, { unlink: (p) => (p === `${VOL}/vol_data.json.tmp` ? Promise.reject(new FsError(code, p, 'unlink')) : node.fs.unlink(p)) });
        const r = await cleaner(node, { ...ready, fs }).cleanupOrphanedPodDirs();
        assert.equal(r.kept.length, 1, code);
        assert.equal(node.logger.lines.filter((l) => l.msg === 'Could not remove the temp file of an interrupted vol_data.json write').length, logged, code);
        assert.equal(await node.exists(`${VOL}/vol_data.json.tmp`), true, code);
      }
    });
  });

  describe('a mount appearing after the mount table was read (the table is read once per sweep)', () => {
    const VOL = `${POD}/volumes/kubernetes.io~csi/pv-1`;
    /** The node's mounter, its table frozen as it is now. */
    async function staleTable(node: InMemoryNode): Promise<void> {
      const before = await node.mounter.readMountTable();
      node.mounter.readMountTable = () => Promise.resolve(before);
    }

    it('a CSI pod volume dir become a mount point: its temp file is not removed, the pod dir is kept', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${VOL}/vol_data.json.tmp`, '{}');
      node.fs.writeRaw(`${ROOT}/elsewhere/data/file`, 'x');
      await staleTable(node);
      await node.mounter.mount(`${ROOT}/elsewhere/data`, VOL, '', ['bind']);
      const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
      assert.deepEqual(r.kept, [{ podUID: 'uid-1', reason: `${VOL} is a mount point` }]);
      assert.equal(await node.exists(`${VOL}/vol_data.json.tmp`), true);
    });

    it('a CSI mount dir become a mount point is refused by name, never rmdir-ed', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      await node.fs.mkdir(`${VOL}/mount`, { recursive: true, mode: 0o750 });
      await node.fs.mkdir(`${ROOT}/elsewhere/empty`, { recursive: true, mode: 0o750 });
      await staleTable(node);
      await node.mounter.mount(`${ROOT}/elsewhere/empty`, `${VOL}/mount`, '', ['bind']);
      const r = await cleaner(node, { sourcesReady: () => true }).cleanupOrphanedPodDirs();
      assert.deepEqual(r.kept, [{ podUID: 'uid-1', reason: `${VOL}/mount is a mount point` }]);
      assert.equal(await node.exists(`${VOL}/mount`), true);
    });
  });

  describe('an idle node\'s skipped sweeps need every part of the fingerprint', () => {
    /** A sweep that skips when the fingerprint allows, over `fs`, with these parts. */
    function quietCleaner(node: InMemoryNode, o: { fs?: FileSystem; version: boolean; generation: boolean; known: string[] }): OrphanedPodDirsCleaner {
      return new OrphanedPodDirsCleaner({
        fs: o.fs ?? node.fs, layout: node.layout, realRootDir: ROOT, mounter: node.mounter,
        cluster: o.version ? new FakeCluster({ watch: true }) : node.cluster,
        logger: node.logger, sourcesReady: () => true, knownPodUIDs: () => o.known, podsWithVolumesInActualState: () => new Set(),
        knownPodsGeneration: () => (o.generation ? '1' : undefined),
      });
    }
    /** `node.fs` whose stat of the pods dir lacks `field`. */
    function statWithout(node: InMemoryNode, field: 'ino' | 'mtimeMs' | 'ctimeMs'): FileSystem {
      return overrideFileSystem(node.fs, {
        stat: async (p) => {
          const st = await node.fs.stat(p);
          if (p !== `${ROOT}/pods`) return st;
          return Object.fromEntries(Object.entries(st).filter(([k]) => k !== field)) as unknown as FileStat;
        },
      });
    }
    const cases: [string, (node: InMemoryNode) => { fs?: FileSystem; version: boolean; generation: boolean }][] = [
      ['no objects version', () => ({ version: false, generation: true })],
      ['no generation', () => ({ version: true, generation: false })],
      ['no inode', (node) => ({ fs: statWithout(node, 'ino'), version: true, generation: true })],
      ['no mtime', (node) => ({ fs: statWithout(node, 'mtimeMs'), version: true, generation: true })],
      ['no ctime', (node) => ({ fs: statWithout(node, 'ctimeMs'), version: true, generation: true })],
    ];
    for (const [what, parts] of cases) {
      it(`${what}: no sweep is skipped`, async () => {
        const node = new InMemoryNode();
        await setupDataDirs(node.fs, node.layout);
        node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
        const o = { ...parts(node), known: ['uid-1'] };
        const sweeper = quietCleaner(node, o);
        assert.deepEqual(await sweeper.cleanupOrphanedPodDirs(), { orphans: 0, removed: [], kept: [] });
        o.known = [];
        assert.deepEqual((await sweeper.cleanupOrphanedPodDirs()).removed, ['uid-1']);
      });
    }
    it('with every part (the control): the unchanged sweep is skipped', async () => {
      const node = new InMemoryNode();
      await setupDataDirs(node.fs, node.layout);
      node.fs.writeRaw(`${POD}/etc-hosts`, 'x');
      const o = { version: true, generation: true, known: ['uid-1'] };
      const sweeper = quietCleaner(node, o);
      await sweeper.cleanupOrphanedPodDirs();
      o.known = [];
      assert.deepEqual(await sweeper.cleanupOrphanedPodDirs(), { skipped: 'nothing changed since a sweep that found no orphan', orphans: 0, removed: [], kept: [] });
    });
  });
});
