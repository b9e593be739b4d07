// Gate CSIReadWriteOncePodWaitsForUnreconstructedMounts's decisions over the in-memory node's
// files: which pod volume dirs that failed reconstruction count as "mounted elsewhere" for the
// ReadWriteOncePod check (another pod's, same PV name, still there), which do not (the pod's own,
// another PV's, one that is gone, which is then forgotten), and that the file system is asked (a
// promise) only when such a dir is recorded: kubelet's answer alone is a plain boolean.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CSIReadWriteOncePodWaitsForUnreconstructedMounts, FeatureGate } from '../../../src/features/features.js';
import type { UniquePodName, UniqueVolumeName } from '../../../src/layout/names.js';
import { readWriteOncePodWaitsForUnreconstructedMounts } from '../../../src/nodevol/readWriteOncePodWaitsForUnreconstructedMounts/index.js';
import type { VolumeToMount } from '../../../src/operationexecutor/volumeToMount.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { createActualStateOfWorld } from '../../../src/volumemanager/cache/actualStateOfWorld.js';
import type { PodVolume } from '../../../src/volumemanager/reconciler/podVolumes.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { DRIVER, InMemoryNode, volumeHostOf } from '../../support/inMemoryNode.js';
import { failedPodVolumeDir, podVolumeDirOf } from '../../support/reconstructionFixtures.js';

const GATES = FeatureGate.of({ [CSIReadWriteOncePodWaitsForUnreconstructedMounts]: true });
const VOLUME = `kubernetes.io/csi/${DRIVER}^vol-1` as UniqueVolumeName;
const OLD = 'pod-1' as UniquePodName;
const NEW = 'pod-2' as UniquePodName;
const vtmOf = (pod: UniquePodName, pv = 'pv-1'): VolumeToMount => ({ volumeName: VOLUME, podName: pod, spec: constructPVSourceSpec(pv, DRIVER, 'vol-1'), seLinuxMountContext: '' }) as VolumeToMount;
const STILL_HOLDS = 'A pod volume dir that could not be reconstructed still holds the ReadWriteOncePod volume';
const GONE = 'A pod volume dir that could not be reconstructed is gone; it no longer holds its volume';

async function fixture(failed: readonly PodVolume[]) {
  const node = new InMemoryNode();
  for (const v of failed) await node.fs.mkdir(v.volumePath, { recursive: true, mode: 0o750 });
  const fs = new FaultyFs(node.fs);
  const policy = readWriteOncePodWaitsForUnreconstructedMounts.create(volumeHostOf(node, { fs }), GATES);
  const found = policy.reconstruct?.podVolumesFailedReconstruction;
  const elsewhere = policy.operationGenerator?.volumeMountedElsewhere;
  assert.ok(found !== undefined && elsewhere !== undefined);
  assert.equal(policy.housekeeping, undefined);
  found(failed);
  return { node, fs, elsewhere, asw: createActualStateOfWorld() };
}

describe('gate CSIReadWriteOncePodWaitsForUnreconstructedMounts: volumeMountedElsewhere', () => {
  it("another pod's dir of the same PV that failed reconstruction holds the volume while it is there, with a line naming both pods", async () => {
    const f = await fixture([failedPodVolumeDir(OLD, 'pv-1')]);
    const answer = f.elsewhere(vtmOf(NEW), f.asw);
    assert.ok(answer instanceof Promise, 'the file system is asked');
    assert.equal(await answer, true);
    assert.deepEqual(f.fs.calls, [`lstat ${podVolumeDirOf(OLD, 'pv-1')}`]);
    const line = f.node.logger.lines.find((l) => l.msg === STILL_HOLDS);
    assert.deepEqual(line?.values, { volumeName: VOLUME, podName: NEW, otherPodName: OLD, volumePath: podVolumeDirOf(OLD, 'pv-1') });
    // Still there (even with nothing mounted on it): it holds the volume at every check.
    assert.equal(await f.elsewhere(vtmOf(NEW), f.asw), true);
  });

  it('once the dir is gone (its TearDown removed it) it is forgotten, with a line, and the file system is not asked again', async () => {
    const f = await fixture([failedPodVolumeDir(OLD, 'pv-1')]);
    await f.node.fs.rmdir(podVolumeDirOf(OLD, 'pv-1'));
    assert.equal(await f.elsewhere(vtmOf(NEW), f.asw), false);
    assert.deepEqual(f.node.logger.lines.find((l) => l.msg === GONE)?.values, { podName: OLD, volumeSpecName: 'pv-1' });
    assert.equal(f.elsewhere(vtmOf(NEW), f.asw), false);
    assert.equal(f.fs.calls.length, 1);
  });

  it('a dir that cannot be looked at (EACCES) still holds the volume', async () => {
    const f = await fixture([failedPodVolumeDir(OLD, 'pv-1')]);
    await f.node.fs.rmdir(podVolumeDirOf(OLD, 'pv-1'));
    f.fs.failOn('lstat', podVolumeDirOf(OLD, 'pv-1'), 'EACCES');
    assert.equal(await f.elsewhere(vtmOf(NEW), f.asw), true);
    assert.ok(!f.node.logger.messages().includes(GONE));
  });

  it("the pod's own dir, another PV's dir, or none recorded: kubelet's answer (the actual state's), a plain false, no file system call", async () => {
    const f = await fixture([failedPodVolumeDir(OLD, 'pv-1'), failedPodVolumeDir(NEW, 'pv-9')]);
    assert.equal(f.elsewhere(vtmOf(OLD), f.asw), false);
    assert.equal(f.elsewhere(vtmOf(NEW, 'pv-2'), f.asw), false);
    assert.deepEqual(f.fs.calls, []);
    const none = await fixture([]);
    assert.equal(none.elsewhere(vtmOf(NEW), none.asw), false);
  });

  it("kubelet's answer stays: a pod mounted in the actual state holds the volume, a plain true", async () => {
    const f = await fixture([failedPodVolumeDir(OLD, 'pv-1')]);
    const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1');
    f.asw.markVolumeAsAttached(VOLUME, spec, 'kubernetes.io/csi', '', true);
    f.asw.markVolumeAsMounted({ podName: OLD, podUID: 'pod-1', volumeName: VOLUME, volumeSpec: spec, outerVolumeSpecName: 'data', innerVolumeSpecName: 'pv-1', pluginName: 'kubernetes.io/csi', seLinuxMountContext: '', volumeMountState: 'VolumeMounted' });
    assert.equal(f.elsewhere(vtmOf(NEW), f.asw), true);
    assert.deepEqual(f.fs.calls, []);
  });
});
