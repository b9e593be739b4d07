// Gate CSIUnpublishBeforeUnstageAfterReconstruction's afterPodVolumesWalked over the in-memory
// node's files and API server, with the actual state of the world the test sets: which pod volumes
// become uncertain pod mounts of a listed volume (so that they are unpublished before it is
// unstaged) and which candidates are left for upstream's cleanup. Pinned: the gate does nothing
// with KEP-6058's gate off or nothing listed; a failed pod volume dir named after a listed PV is
// paired, its record in the actual state being the listed spec with no outer spec name; a raw
// block publish target is paired unless the actual state already has that pod on that volume, the
// directory pairing of this pass paired that pod with that volume, or the pod walk found that pod
// on that volume (each of the pod and the volume matters).
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { CSIGlobalMountReconstruction, CSIUnpublishBeforeUnstageAfterReconstruction, FeatureGate } from '../../../src/features/features.js';
import { CSI_PLUGIN_NAME, type UniquePodName, type UniqueVolumeName } from '../../../src/layout/names.js';
import { unpublishBeforeUnstageAfterReconstruction } from '../../../src/nodevol/unpublishBeforeUnstageAfterReconstruction/index.js';
import type { ClusterView } from '../../../src/ports/cluster.js';
import { createActualStateOfWorld, type ActualStateOfWorld } from '../../../src/volumemanager/cache/actualStateOfWorld.js';
import type { PodVolume } from '../../../src/volumemanager/reconciler/podVolumes.js';
import type { RegisteredGlobalVolume } from '../../../src/volumemanager/reconciler/reconstructHooks.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';
import { failedPodVolumeDir, listedVolume, writeBlockPublishTarget } from '../../support/reconstructionFixtures.js';

const GATES = FeatureGate.of({ [CSIGlobalMountReconstruction]: true, [CSIUnpublishBeforeUnstageAfterReconstruction]: true });
const KEP_OFF = FeatureGate.of({ [CSIUnpublishBeforeUnstageAfterReconstruction]: true });

const P = 'pod-p' as UniquePodName;
const Q = 'pod-q' as UniquePodName;
const SELINUX = 'system_u:object_r:container_file_t:s0:c1,c2';

const FS1 = listedVolume('pv-fs1', 'Filesystem', { seLinuxMountContext: SELINUX });
const FS2 = listedVolume('pv-fs2', 'Filesystem', { seLinuxMountContext: SELINUX });
const BLK1 = listedVolume('pv-blk1', 'Block');
const BLK2 = listedVolume('pv-blk2', 'Block');

const PAIRED_BLOCK = 'Published block target with no pod volume in the actual state is unpublished before the volume is unstaged';
const PAIRED_DIR = 'Pod volume directory that could not be reconstructed is paired by PV name with a listed volume; it is unpublished before the volume is unstaged';

interface Walk {
  failed?: readonly PodVolume[];
  registered?: readonly RegisteredGlobalVolume[];
  /** What the pod walk reconstructed: volume → pods. */
  fromPodDirs?: ReadonlyMap<UniqueVolumeName, readonly UniquePodName[]>;
}

interface Fixture {
  node: InMemoryNode;
  asw: ActualStateOfWorld;
  /** The pod listings the gate asked the API server for. */
  podListings: number;
  /** Runs the gate's afterPodVolumesWalked once (gates: both on unless given). */
  walked: (w: Walk, features?: FeatureGate) => Promise<readonly PodVolume[]>;
}

function fixture(): Fixture {
  const node = new InMemoryNode();
  const asw = createActualStateOfWorld();
  for (const v of [FS1, FS2, BLK1, BLK2]) {
    asw.addAttachUncertainReconstructedVolume(v.volumeName, v.spec, v.pluginName, '');
    asw.markDeviceAsUncertain(v.volumeName, '', `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/x/globalmount`, v.seLinuxMountContext);
  }
  const cluster: ClusterView = new Proxy(node.cluster, {
    get(target, key, receiver) {
      if (key === 'listPods') {
        return () => {
          f.podListings++;
          return target.listPods();
        };
      }
      const value: unknown = Reflect.get(target, key, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  const f: Fixture = {
    node,
    asw,
    podListings: 0,
    walked: async ({ failed = [], registered = [FS1, FS2, BLK1, BLK2], fromPodDirs = new Map<UniqueVolumeName, readonly UniquePodName[]>() }, features = GATES) => {
      const hook = unpublishBeforeUnstageAfterReconstruction.create({ ...volumeHostOf(node), cluster }, features).reconstruct?.afterPodVolumesWalked;
      assert.ok(hook !== undefined);
      const byVolume = new Map([...fromPodDirs].map(([v, pods]) => [v, pods.map((podName) => ({ volume: { podName } }))]));
      return hook({ failed, registered, fromPodDirs: byVolume, asw });
    },
  };
  return f;
}

/** The pod's volumes in the actual state, as `volume: state (inner, outer)`. */
function podMounts(f: Fixture, pod: UniquePodName): string[] {
  return f.asw.getPossiblyMountedVolumesForPod(pod).map((m) => `${m.volumeName}: ${f.asw.getVolumeMountState(m.volumeName, pod)} (${m.innerVolumeSpecName}, '${m.outerVolumeSpecName}')`);
}

function uncertain(v: RegisteredGlobalVolume, inner: string): string {
  return `${v.volumeName}: VolumeMountUncertain (${inner}, '')`;
}

/** The pods each pairing line named, in order. */
function pairingLines(f: Fixture, msg: string): string[] {
  return f.node.logger.lines.filter((l) => l.msg === msg).map((l) => `${String(l.values['podName'])} ${String(l.values['volumeName'])}`);
}

describe('unpublishBeforeUnstageAfterReconstruction: afterPodVolumesWalked', () => {
  let f: Fixture;
  beforeEach(() => {
    f = fixture();
  });

  it('a failed pod volume dir named after a listed PV: paired, an uncertain pod mount with the listed spec and no outer name; the others stay candidates', async () => {
    const dir = failedPodVolumeDir(P, 'pv-fs1');
    const other = failedPodVolumeDir(P, 'pv-unlisted');
    assert.deepEqual(await f.walked({ failed: [dir, other] }), [other]);
    assert.deepEqual(podMounts(f, P), [uncertain(FS1, 'pv-fs1')]);
    const [m] = f.asw.getPossiblyMountedVolumesForPod(P);
    assert.equal(m?.podUID, P);
    assert.equal(m?.outerVolumeSpecName, '');
    assert.deepEqual(m?.volumeSpec, FS1.spec);
    assert.equal(m?.seLinuxMountContext, SELINUX);
    assert.equal(m?.pluginName, CSI_PLUGIN_NAME);
    assert.ok(f.asw.isVolumeReconstructed(FS1.volumeName, P));
    assert.deepEqual(pairingLines(f, PAIRED_DIR), [`${P} ${FS1.volumeName}`]);
  });

  it('KEP-6058\'s gate off: every candidate stays, nothing is paired, the API server is not asked', async () => {
    const dir = failedPodVolumeDir(P, 'pv-fs1');
    writeBlockPublishTarget(f.node, BLK1, Q);
    assert.deepEqual(await f.walked({ failed: [dir] }, KEP_OFF), [dir]);
    assert.deepEqual(podMounts(f, P), []);
    assert.deepEqual(podMounts(f, Q), []);
    assert.equal(f.podListings, 0);
  });

  it('nothing listed: every candidate stays, nothing is paired', async () => {
    const dir = failedPodVolumeDir(P, 'pv-fs1');
    writeBlockPublishTarget(f.node, BLK1, Q);
    assert.deepEqual(await f.walked({ failed: [dir], registered: [] }), [dir]);
    assert.deepEqual(podMounts(f, P), []);
    assert.deepEqual(podMounts(f, Q), []);
    assert.equal(f.podListings, 0);
  });

  it('raw block: each publish target of a pod the actual state does not have becomes an uncertain pod mount, named by the PV', async () => {
    writeBlockPublishTarget(f.node, BLK1, Q);
    writeBlockPublishTarget(f.node, BLK1, P);
    writeBlockPublishTarget(f.node, BLK2, P);
    assert.deepEqual(await f.walked({}), []);
    assert.deepEqual(podMounts(f, P), [uncertain(BLK1, 'pv-blk1'), uncertain(BLK2, 'pv-blk2')]);
    assert.deepEqual(podMounts(f, Q), [uncertain(BLK1, 'pv-blk1')]);
    assert.ok(f.asw.isVolumeReconstructed(BLK1.volumeName, Q));
    assert.deepEqual(pairingLines(f, PAIRED_BLOCK), [`${P} ${BLK1.volumeName}`, `${Q} ${BLK1.volumeName}`, `${P} ${BLK2.volumeName}`]);
  });

  it('raw block: a target of a pod the actual state has on that volume (mounted or uncertain) is left to it: no pairing said, no pod listing', async () => {
    const mark = { podUID: P, volumeSpec: BLK1.spec, outerVolumeSpecName: 'vol-a', innerVolumeSpecName: 'pv-blk1', pluginName: CSI_PLUGIN_NAME, seLinuxMountContext: '' };
    f.asw.markVolumeAsMounted({ ...mark, podName: P, volumeName: BLK1.volumeName, volumeMountState: 'VolumeMounted' });
    f.asw.markVolumeMountAsUncertain({ ...mark, podName: Q, podUID: Q, volumeName: BLK1.volumeName, volumeMountState: 'VolumeMountUncertain' });
    writeBlockPublishTarget(f.node, BLK1, P);
    writeBlockPublishTarget(f.node, BLK1, Q);
    assert.deepEqual(await f.walked({}), []);
    assert.deepEqual(podMounts(f, P), [`${BLK1.volumeName}: VolumeMounted (pv-blk1, 'vol-a')`]);
    assert.deepEqual(podMounts(f, Q), [`${BLK1.volumeName}: VolumeMountUncertain (pv-blk1, 'vol-a')`]);
    assert.deepEqual(pairingLines(f, PAIRED_BLOCK), []);
    assert.equal(f.podListings, 0);
  });

  it('raw block: the actual state having the pod on another volume does not count: its target of this volume is paired', async () => {
    const mark = { podUID: P, volumeSpec: BLK2.spec, outerVolumeSpecName: 'vol-b', innerVolumeSpecName: 'pv-blk2', pluginName: CSI_PLUGIN_NAME, seLinuxMountContext: '' };
    f.asw.markVolumeAsMounted({ ...mark, podName: P, volumeName: BLK2.volumeName, volumeMountState: 'VolumeMounted' });
    writeBlockPublishTarget(f.node, BLK1, P);
    assert.deepEqual(await f.walked({}), []);
    assert.deepEqual(podMounts(f, P), [uncertain(BLK1, 'pv-blk1'), `${BLK2.volumeName}: VolumeMounted (pv-blk2, 'vol-b')`]);
    assert.deepEqual(pairingLines(f, PAIRED_BLOCK), [`${P} ${BLK1.volumeName}`]);
  });

  it('raw block: another pod\'s directory pairing, or the same pod\'s pairing with another volume, does not count: the target is paired', async () => {
    writeBlockPublishTarget(f.node, BLK1, P);
    writeBlockPublishTarget(f.node, BLK2, Q);
    assert.deepEqual(await f.walked({ failed: [failedPodVolumeDir(P, 'pv-fs1'), failedPodVolumeDir(Q, 'pv-fs2')] }), []);
    assert.deepEqual(podMounts(f, P), [uncertain(BLK1, 'pv-blk1'), uncertain(FS1, 'pv-fs1')]);
    assert.deepEqual(podMounts(f, Q), [uncertain(BLK2, 'pv-blk2'), uncertain(FS2, 'pv-fs2')]);
    assert.deepEqual(pairingLines(f, PAIRED_BLOCK), [`${P} ${BLK1.volumeName}`, `${Q} ${BLK2.volumeName}`]);
  });

  it('raw block: a target of a pod the walk found on that volume is left to the walk\'s reconstruction (updateStates runs after)', async () => {
    writeBlockPublishTarget(f.node, BLK1, P);
    assert.deepEqual(await f.walked({ fromPodDirs: new Map([[BLK1.volumeName, [Q, P]]]) }), []);
    assert.deepEqual(podMounts(f, P), []);
    assert.deepEqual(pairingLines(f, PAIRED_BLOCK), []);
    assert.equal(f.podListings, 0);
  });

  it('raw block: the walk finding another pod on that volume, or that pod on another volume, does not count: the target is paired', async () => {
    writeBlockPublishTarget(f.node, BLK1, P);
    writeBlockPublishTarget(f.node, BLK2, Q);
    const fromPodDirs = new Map([
      [BLK1.volumeName, [Q]],
      [BLK2.volumeName, [P]],
    ]);
    assert.deepEqual(await f.walked({ fromPodDirs }), []);
    assert.deepEqual(podMounts(f, P), [uncertain(BLK1, 'pv-blk1')]);
    assert.deepEqual(podMounts(f, Q), [uncertain(BLK2, 'pv-blk2')]);
  });
});
