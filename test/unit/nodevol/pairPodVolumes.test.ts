// Gate CSIUnpublishBeforeUnstageAfterReconstruction's pairing rule (pairPodVolumes.ts) over the
// in-memory node's files, mounts and API server: which failed pod volume directories pair with
// which listed volumes (by the PV name, plugin and mode; every listed volume claiming the name; a
// directory only, never a mount point; a pod that still exists only through a claim bound to that
// PV; the pods unreadable: paired), which raw block publish targets pair with their own listed
// volume (files only, in name order, not those `known`; a pod that still exists only through a
// bound claim, an unreadable claim or pod list not refusing), and how often the pods are listed.
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import type { Pod } from '../../../src/api/core.js';
import type { UniquePodName, UniqueVolumeName } from '../../../src/layout/names.js';
import { pairFailedPodVolumesWithListed, pairPublishedBlockTargets, type PairingDeps } from '../../../src/nodevol/unpublishBeforeUnstageAfterReconstruction/pairPodVolumes.js';
import type { ClusterView } from '../../../src/ports/cluster.js';
import type { FileSystem } from '../../../src/ports/fs.js';
import type { Mounter } from '../../../src/ports/mounter.js';
import { constructInlineSpec, constructPVSourceSpec } from '../../../src/volume/spec.js';
import type { PodVolume } from '../../../src/volumemanager/reconciler/podVolumes.js';
import type { RegisteredGlobalVolume } from '../../../src/volumemanager/reconciler/reconstructHooks.js';
import { FsError } from '../../../src/ports/fs.js';
import { DRIVER, InMemoryNode } from '../../support/inMemoryNode.js';
import { failedPodVolumeDir, intercept, listedVolume, writeBlockPublishTarget } from '../../support/reconstructionFixtures.js';

const P = 'pod-p' as UniquePodName;
const Q = 'pod-q' as UniquePodName;

const FS1 = listedVolume('pv-fs1', 'Filesystem');
/** The same PV name staged under another handle (a PV deleted and re-created). */
const FS1_AGAIN = listedVolume('pv-fs1', 'Filesystem', { handle: 'handle-again' });
const FS2 = listedVolume('pv-fs2', 'Filesystem');
const BLK1 = listedVolume('pv-blk1', 'Block');
const BLK2 = listedVolume('pv-blk2', 'Block');

interface Fixture {
  node: InMemoryNode;
  deps: PairingDeps;
  podListings: number;
  /** When set, listPods / getPersistentVolumeClaim reject with it. */
  listFails: string | undefined;
  claimFails: string | undefined;
}

function fixture(): Fixture {
  const node = new InMemoryNode();
  const cluster: ClusterView = intercept<ClusterView>(node.cluster, {
    listPods: () => {
      f.podListings++;
      return f.listFails === undefined ? node.cluster.listPods() : Promise.reject(new Error(f.listFails));
    },
    getPersistentVolumeClaim: (ns, name) => (f.claimFails === undefined ? node.cluster.getPersistentVolumeClaim(ns, name) : Promise.reject(new Error(f.claimFails))),
  });
  const f: Fixture = {
    node,
    deps: { cluster, mounter: node.mounter, logger: node.logger, fs: node.fs, layout: node.layout },
    podListings: 0,
    listFails: undefined,
    claimFails: undefined,
  };
  return f;
}

/** A pod that still exists, with a PVC volume per claim name (each bound to the PV named, or missing when undefined) and inline volumes. */
function addPod(f: Fixture, uid: string, claims: Readonly<Record<string, string | undefined>>, inline: readonly string[] = []): Pod {
  for (const [claim, pv] of Object.entries(claims)) {
    if (pv !== undefined) f.node.cluster.pvcs.set(`default/${claim}`, { namespace: 'default', name: claim, uid: `uid-${claim}`, volumeName: pv, phase: 'Bound' });
  }
  const volumes = [...Object.keys(claims).map((c) => ({ name: `vol-${c}`, persistentVolumeClaim: { claimName: c } })), ...inline.map((name) => ({ name, csi: { driver: DRIVER } }))];
  const pod: Pod = { uid, namespace: 'default', name: `pod-${uid}`, nodeName: 'node-1', volumes, volumeMounts: volumes.map((v) => v.name), volumeDevices: [] };
  f.node.cluster.addPod(pod);
  return pod;
}

async function pairDirs(f: Fixture, failed: readonly PodVolume[], registered: readonly RegisteredGlobalVolume[] = [FS1, FS2, BLK1]): Promise<{ paired: string[]; unpaired: readonly PodVolume[] }> {
  const { paired, unpaired } = await pairFailedPodVolumesWithListed(f.deps, failed, registered);
  return { paired: paired.map((p) => `${p.podName}/${p.innerVolumeSpecName} ${p.listed.volumeName}`), unpaired };
}

async function pairTargets(f: Fixture, registered: readonly RegisteredGlobalVolume[] = [FS1, BLK1, BLK2], known: (p: UniquePodName, v: UniqueVolumeName) => boolean = () => false): Promise<string[]> {
  return (await pairPublishedBlockTargets(f.deps, registered, known)).map((p) => `${p.podName}/${p.innerVolumeSpecName} ${p.listed.volumeName}`);
}

const NOT_PAIRING_DIR = 'Not pairing a pod volume directory that could not be reconstructed with a listed volume';
const NOT_PAIRING_TARGET = 'Not pairing a published block target with a listed volume';
const UNREADABLE_PUBLISH_DIR = 'Could not read the publish directory of a listed block volume';

const PODS_UNLISTED_DIR = 'The pods could not be listed; pairing a pod volume directory with no mount by PV name';
const PODS_UNLISTED_TARGET = 'The pods could not be listed; a published block target is paired with its own listed volume';

/** The pods the lines `msg` named, in order. */
function podsSaid(f: Fixture, msg: string): string[] {
  return f.node.logger.lines.filter((l) => l.msg === msg).map((l) => String(l.values['podName']));
}

function reasons(f: Fixture, msg: string): string[] {
  return f.node.logger.lines.filter((l) => l.msg === msg).map((l) => String(l.values['reason'] ?? l.values['path']));
}

describe('pairFailedPodVolumesWithListed', () => {
  let f: Fixture;
  beforeEach(() => {
    f = fixture();
  });

  it('a directory named after a listed PV of its plugin and mode pairs with it; a pod that is gone does not refuse; the pods are listed once', async () => {
    const a = failedPodVolumeDir(P, 'pv-fs1');
    const b = failedPodVolumeDir(Q, 'pv-fs2');
    assert.deepEqual(await pairDirs(f, [a, b]), { paired: [`${P}/pv-fs1 ${FS1.volumeName}`, `${Q}/pv-fs2 ${FS2.volumeName}`], unpaired: [] });
    assert.equal(f.podListings, 1);
  });

  it('no listed volume claims the name, or only one of another plugin or mode, or an inline one: unpaired, the pods not listed', async () => {
    const inline: RegisteredGlobalVolume = { ...FS1, spec: constructInlineSpec('pv-fs1', DRIVER) };
    const otherPlugin: RegisteredGlobalVolume = { ...FS1, pluginName: 'kubernetes.io/other' };
    const blockNamed: RegisteredGlobalVolume = { ...BLK1, spec: constructPVSourceSpec('pv-fs1', DRIVER, 'h', 'Block') };
    const dirs = [failedPodVolumeDir(P, 'pv-fs1'), failedPodVolumeDir(P, 'pv-none')];
    assert.deepEqual(await pairDirs(f, dirs, [inline, otherPlugin, blockNamed]), { paired: [], unpaired: dirs });
    assert.deepEqual(await pairDirs(f, [failedPodVolumeDir(P, 'pv-fs1', { pluginName: 'kubernetes.io/other' })], [FS1]), { paired: [], unpaired: [failedPodVolumeDir(P, 'pv-fs1', { pluginName: 'kubernetes.io/other' })] });
    assert.equal(f.podListings, 0);
  });

  it('a raw block candidate, or a candidate that is not a directory, is never paired by name', async () => {
    const block = failedPodVolumeDir(P, 'pv-blk1', { volumeMode: 'Block' });
    const file = failedPodVolumeDir(P, 'pv-fs1', { entryType: 'file' });
    const link = failedPodVolumeDir(P, 'pv-fs2', { entryType: 'symlink' });
    assert.deepEqual(await pairDirs(f, [block, file, link]), { paired: [], unpaired: [block, file, link] });
    assert.equal(f.podListings, 0);
  });

  it('two listed volumes claim the name: paired with each, in the listing\'s order', async () => {
    assert.deepEqual((await pairDirs(f, [failedPodVolumeDir(P, 'pv-fs1')], [FS1_AGAIN, FS2, FS1])).paired, [`${P}/pv-fs1 ${FS1_AGAIN.volumeName}`, `${P}/pv-fs1 ${FS1.volumeName}`]);
  });

  it('its mount dir is a mount point, or cannot be checked: unpaired, said with why', async () => {
    const mounted = failedPodVolumeDir(P, 'pv-fs1');
    await f.node.fs.mkdir(`${mounted.volumePath}/mount`, { recursive: true, mode: 0o750 });
    await f.node.mounter.mount('/dev/sdx', `${mounted.volumePath}/mount`, 'ext4', []);
    const unchecked = failedPodVolumeDir(Q, 'pv-fs1');
    const mounter = intercept<Mounter>(f.node.mounter, {
      isLikelyNotMountPoint: (p) => (p === `${unchecked.volumePath}/mount` ? Promise.reject(new FsError('EACCES', p, 'stat')) : f.node.mounter.isLikelyNotMountPoint(p)),
    });
    const { paired, unpaired } = await pairFailedPodVolumesWithListed({ ...f.deps, mounter }, [mounted, unchecked], [FS1]);
    assert.deepEqual(paired, []);
    assert.deepEqual(unpaired, [mounted, unchecked]);
    const said = reasons(f, NOT_PAIRING_DIR);
    assert.equal(said.length, 2);
    assert.equal(said[0], `${mounted.volumePath}/mount is a mount point`);
    assert.match(said[1] ?? '', /^cannot tell whether .*pod-q.*\/mount is a mount point: .*EACCES/);
    assert.equal(f.podListings, 0);
  });

  it('its mount dir exists and is no mount point: paired', async () => {
    const dir = failedPodVolumeDir(P, 'pv-fs1');
    await f.node.fs.mkdir(`${dir.volumePath}/mount`, { recursive: true, mode: 0o750 });
    assert.deepEqual((await pairDirs(f, [dir])).paired, [`${P}/pv-fs1 ${FS1.volumeName}`]);
  });

  it('the pod still exists: paired only through a claim bound to that PV; an inline volume or another PV refuses', async () => {
    addPod(f, P, { 'c-missing': undefined, 'c-other': 'pv-fs2', 'c-fs1': 'pv-fs1' });
    addPod(f, Q, { 'c-q': 'pv-fs2' }, ['pv-fs1']);
    addPod(f, 'pod-r', {}, ['pv-fs1']);
    const r = failedPodVolumeDir('pod-r' as UniquePodName, 'pv-fs1');
    const q = failedPodVolumeDir(Q, 'pv-fs1');
    assert.deepEqual(await pairDirs(f, [failedPodVolumeDir(P, 'pv-fs1'), q, r], [FS1_AGAIN, FS1]), { paired: [`${P}/pv-fs1 ${FS1_AGAIN.volumeName}`, `${P}/pv-fs1 ${FS1.volumeName}`], unpaired: [q, r] });
    assert.deepEqual(reasons(f, NOT_PAIRING_DIR), [
      `pod ${Q} still exists and none of its claims is bound to that PV (an inline volume of that name is never paired with a PV)`,
      'pod pod-r still exists and none of its claims is bound to that PV (an inline volume of that name is never paired with a PV)',
    ]);
    assert.equal(f.podListings, 1);
  });

  it('the pod still exists and a claim of it cannot be read: unpaired, said with the claim', async () => {
    addPod(f, P, { 'c-fs1': 'pv-fs1' });
    f.claimFails = 'etcd timeout';
    const dir = failedPodVolumeDir(P, 'pv-fs1');
    assert.deepEqual(await pairDirs(f, [dir]), { paired: [], unpaired: [dir] });
    assert.deepEqual(reasons(f, NOT_PAIRING_DIR), [`claim default/c-fs1 of pod ${P} could not be read: etcd timeout`]);
  });

  it('the pods cannot be listed (the API server down at a reboot): paired, as a wrong pairing is harmless', async () => {
    addPod(f, P, { 'c-other': 'pv-fs2' });
    f.listFails = 'connection refused';
    assert.deepEqual((await pairDirs(f, [failedPodVolumeDir(P, 'pv-fs1'), failedPodVolumeDir(Q, 'pv-fs2')])).paired, [`${P}/pv-fs1 ${FS1.volumeName}`, `${Q}/pv-fs2 ${FS2.volumeName}`]);
    assert.deepEqual(reasons(f, NOT_PAIRING_DIR), []);
    assert.deepEqual(podsSaid(f, PODS_UNLISTED_DIR), [P, Q]);
  });
});

describe('pairPublishedBlockTargets', () => {
  let f: Fixture;
  beforeEach(() => {
    f = fixture();
  });

  it('each file of a listed CSI block volume\'s publish dir pairs with it, in name order, named by the PV; the pods are listed once', async () => {
    writeBlockPublishTarget(f.node, BLK1, Q);
    writeBlockPublishTarget(f.node, BLK1, P);
    writeBlockPublishTarget(f.node, BLK2, P);
    const fs = intercept<FileSystem>(f.node.fs, { readdir: async (p) => (await f.node.fs.readdir(p)).reverse() });
    const paired = await pairPublishedBlockTargets({ ...f.deps, fs }, [BLK1, BLK2], () => false);
    assert.deepEqual(
      paired.map((p) => `${p.podName}/${p.innerVolumeSpecName} ${p.listed.volumeName}`),
      [`${P}/pv-blk1 ${BLK1.volumeName}`, `${Q}/pv-blk1 ${BLK1.volumeName}`, `${P}/pv-blk2 ${BLK2.volumeName}`],
    );
    assert.equal(paired[0]?.listed, BLK1);
    assert.equal(f.podListings, 1);
  });

  it('a Filesystem, non-CSI or inline listed volume has no publish targets to pair', async () => {
    const fsNamed = listedVolume('pv-x', 'Filesystem');
    const other: RegisteredGlobalVolume = { ...BLK1, pluginName: 'kubernetes.io/other' };
    const inline: RegisteredGlobalVolume = { ...BLK2, spec: constructInlineSpec('pv-blk2', DRIVER) };
    writeBlockPublishTarget(f.node, fsNamed, P);
    writeBlockPublishTarget(f.node, BLK1, P);
    writeBlockPublishTarget(f.node, BLK2, P);
    assert.deepEqual(await pairTargets(f, [fsNamed, other, inline]), []);
    assert.equal(f.podListings, 0);
  });

  it('only files: a directory in the publish dir is not a target', async () => {
    await f.node.fs.mkdir(f.node.layout.csiBlockPublishPath('pv-blk1', P), { recursive: true, mode: 0o750 });
    writeBlockPublishTarget(f.node, BLK1, Q);
    assert.deepEqual(await pairTargets(f), [`${Q}/pv-blk1 ${BLK1.volumeName}`]);
  });

  it('a target `known` (the pod on that volume) is left alone; `known` is asked with the pod and the volume', async () => {
    writeBlockPublishTarget(f.node, BLK1, P);
    writeBlockPublishTarget(f.node, BLK2, P);
    writeBlockPublishTarget(f.node, BLK1, Q);
    const asked: string[] = [];
    const known = (p: UniquePodName, v: UniqueVolumeName): boolean => {
      asked.push(`${p} ${v}`);
      return p === P && v === BLK1.volumeName;
    };
    assert.deepEqual(await pairTargets(f, [BLK1, BLK2], known), [`${Q}/pv-blk1 ${BLK1.volumeName}`, `${P}/pv-blk2 ${BLK2.volumeName}`]);
    assert.deepEqual(asked, [`${P} ${BLK1.volumeName}`, `${Q} ${BLK1.volumeName}`, `${P} ${BLK2.volumeName}`]);
  });

  it('every target known: the pods are not listed', async () => {
    writeBlockPublishTarget(f.node, BLK1, P);
    assert.deepEqual(await pairTargets(f, [BLK1], () => true), []);
    assert.equal(f.podListings, 0);
  });

  it('no publish dir: nothing, silently; an unreadable one: nothing, said, and the next volume still paired', async () => {
    writeBlockPublishTarget(f.node, BLK2, P);
    const dir1 = f.node.layout.csiBlockPublishDir('pv-blk1');
    assert.deepEqual(await pairTargets(f), [`${P}/pv-blk2 ${BLK2.volumeName}`]);
    assert.deepEqual(reasons(f, UNREADABLE_PUBLISH_DIR), []);
    writeBlockPublishTarget(f.node, BLK1, P);
    const fs = intercept<FileSystem>(f.node.fs, { readdir: (p) => (p === dir1 ? Promise.reject(new FsError('EACCES', p, 'scandir')) : f.node.fs.readdir(p)) });
    const paired = await pairPublishedBlockTargets({ ...f.deps, fs }, [BLK1, BLK2], () => false);
    assert.deepEqual(paired.map((p) => p.listed.volumeName), [BLK2.volumeName]);
    assert.deepEqual(reasons(f, UNREADABLE_PUBLISH_DIR), [dir1]);
  });

  it('the pod still exists: paired only through a claim bound to that PV; a claim that cannot be read, or the pods, do not refuse', async () => {
    addPod(f, P, { 'c-blk1': 'pv-blk1' });
    addPod(f, Q, { 'c-other': 'pv-blk2' }, ['pv-blk1']);
    writeBlockPublishTarget(f.node, BLK1, P);
    writeBlockPublishTarget(f.node, BLK1, Q);
    assert.deepEqual(await pairTargets(f, [BLK1]), [`${P}/pv-blk1 ${BLK1.volumeName}`]);
    assert.deepEqual(reasons(f, NOT_PAIRING_TARGET), [`pod ${Q} still exists and none of its claims is bound to that PV (an inline volume of that name is never paired with a PV)`]);
    f.claimFails = 'etcd timeout';
    assert.deepEqual(await pairTargets(f, [BLK1]), [`${P}/pv-blk1 ${BLK1.volumeName}`, `${Q}/pv-blk1 ${BLK1.volumeName}`]);
    f.claimFails = undefined;
    assert.deepEqual(podsSaid(f, PODS_UNLISTED_TARGET), []);
    f.listFails = 'connection refused';
    assert.deepEqual(await pairTargets(f, [BLK1]), [`${P}/pv-blk1 ${BLK1.volumeName}`, `${Q}/pv-blk1 ${BLK1.volumeName}`]);
    assert.equal(reasons(f, NOT_PAIRING_TARGET).length, 1);
    assert.deepEqual(podsSaid(f, PODS_UNLISTED_TARGET), [P, Q]);
  });

  it('a pod with only an inline volume of that name, or no volume: refused', async () => {
    addPod(f, P, {}, ['pv-blk1']);
    addPod(f, Q, {});
    writeBlockPublishTarget(f.node, BLK1, P);
    writeBlockPublishTarget(f.node, BLK1, Q);
    assert.deepEqual(await pairTargets(f, [BLK1]), []);
    assert.equal(reasons(f, NOT_PAIRING_TARGET).length, 2);
  });
});
