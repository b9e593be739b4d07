// A root dir that is full (ENOSPC) or read-only (EROFS) across a kubelet restart must not take a
// staged volume out of node.status.volumesInUse for good. MountDevice of a volume
// found again on disk rewrote its global vol_data.json (temp file + rename: a fresh block even
// for identical bytes), failed, called the failure final, marked the device not mounted, and
// the volume left the actual state without NodeUnstageVolume while the driver still had it staged.
// That is kubelet's outcome too when its own rewrite fails (csi_util.go saveVolumeData), and is
// the default; CSIGlobalMountReconstruction with CSIKeepUncertainMountOnFinalError keeps the
// device uncertain and unstages it in the end.
//
// Two ways the volume is found again, each with CSIGlobalMountReconstruction off and on:
// - its pod directory is still there (kubelet's own reconstruction);
// - the teardown was cut short after the pod directory went (story 1): the global listing finds
//   it (gate on), or only the replacement pod's MountDevice does (gate off).
// The root dir is made full or read-only before the restart and writable again once the pod that
// wanted the volume is gone; the volume must stay in volumesInUse while the driver has it staged,
// and end unstaged and removed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { sha256Hex, type UniqueVolumeName } from '../../../src/layout/names.js';
import { DRIVER, InMemoryNode, ROOT } from '../../support/inMemoryNode.js';
import { rootDirFault, type Fault } from '../../support/rootDirFault.js';

const VOL_DIR = (h: string): string => `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(h)}`;
const POD_DIR = (uid: string, pv: string): string => `${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/${pv}`;

interface Outcome {
  readonly node: InMemoryNode;
  readonly name: UniqueVolumeName;
  /** Steps after the restart at which the driver had the volume staged but volumesInUse lacked it. */
  readonly droppedWhileStaged: number[];
  readonly calls: string[];
}

/**
 * pod-a mounts pv-1; kubelet is killed (with `podDirLost`, after the drain's NodeUnpublishVolume
 * and the removal of the pod directory, as in story 1); the root dir goes bad; kubelet starts
 * again while pod-b (the replacement) wants the volume; pod-b goes; the root dir is healthy again.
 */
interface Across {
  readonly podDirLost: boolean;
  /** A reboot instead of a kubelet restart: every mount is gone. */
  readonly reboot?: boolean;
  /** The global vol_data.json as an older kubelet wrote it (driver and handle only): MountDevice has to rewrite it. */
  readonly olderGlobalFile?: boolean;
}

async function acrossRestart(fault: Fault, gate: boolean | FeatureGate, o: Across): Promise<Outcome> {
  const g = typeof gate === 'boolean' ? FeatureGate.of({ CSIGlobalMountReconstruction: gate }) : gate;
  const podDirLost = o.podDirLost;
  const node = new InMemoryNode();
  const setFault = rootDirFault(node);
  const name = node.addVolume('pv-1', 'vol-1') as UniqueVolumeName;
  node.addPod('pod-a', ['pv-1']);
  await node.startKubelet(g);
  await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
  await node.steps(2);
  assert.ok(node.cluster.volumesInUse.includes(name));

  node.crashKubelet();
  node.cluster.deletePod('pod-a');
  if (o.olderGlobalFile === true) node.fs.writeRaw(`${VOL_DIR('vol-1')}/vol_data.json`, `{"driverName":"${DRIVER}","volumeHandle":"vol-1"}\n`);
  if (podDirLost) {
    await node.driver.nodeUnpublishVolume({ volumeId: 'vol-1', targetPath: `${POD_DIR('pod-a', 'pv-1')}/mount` });
    await node.fs.unlink(`${POD_DIR('pod-a', 'pv-1')}/vol_data.json`);
    for (const d of [`${POD_DIR('pod-a', 'pv-1')}/mount`, POD_DIR('pod-a', 'pv-1'), `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi`, `${ROOT}/pods/pod-a/volumes`, `${ROOT}/pods/pod-a`]) {
      await node.fs.rmdir(d).catch(() => undefined);
    }
  }
  if (o.reboot === true) node.reboot();
  node.addPod('pod-b', ['pv-1']);
  setFault(fault);

  const mark = node.driver.calls.length;
  const droppedWhileStaged: number[] = [];
  const check = (step: number): void => {
    // volumesInUse is rewritten from the actual state on every step once reconstruction is done.
    if (step >= 3 && node.driver.volume('vol-1')?.stagedAt !== undefined && !node.cluster.volumesInUse.includes(name)) droppedWhileStaged.push(step);
  };
  await node.startKubelet(g);
  let step = 0;
  for (; step < 15; step++) {
    await node.step();
    check(step);
  }
  node.cluster.deletePod('pod-b');
  for (; step < 40; step++) {
    await node.step();
    check(step);
  }
  setFault(undefined);
  for (; step < 120 && (node.driver.volume('vol-1') !== undefined || node.kubelet.asw.volumeExists(name)); step++) {
    await node.step();
    check(step);
  }
  await node.steps(3);
  const calls = node.driver.calls
    .slice(mark)
    .filter((c) => c.method !== 'NodeGetCapabilities')
    .map((c) => `${c.method} ${c.outcome}`);
  return { node, name, droppedWhileStaged, calls };
}

async function assertUnstagedInTheEnd(o: Outcome): Promise<void> {
  assert.deepEqual(o.droppedWhileStaged, [], `volumesInUse lost the volume while it was staged; calls: ${o.calls.join(', ')}`);
  assert.ok(o.calls.includes('NodeUnstageVolume OK'), o.calls.join(', '));
  assert.equal(o.node.driver.volume('vol-1'), undefined, 'the driver has nothing staged or published');
  assert.equal(o.node.kubelet.asw.volumeExists(o.name), false);
  assert.equal(o.node.cluster.volumesInUse.includes(o.name), false);
  assert.equal(await o.node.exists(VOL_DIR('vol-1')), false, 'the global volume dir is removed');
}

for (const fault of ['ENOSPC', 'EROFS'] as const) {
  describe(`a root dir ${fault === 'ENOSPC' ? 'full (ENOSPC)' : 'read-only (EROFS)'} across a kubelet restart`, () => {
    for (const gate of [false, true]) {
      it(`pod dir kept, CSIGlobalMountReconstruction ${gate ? 'on' : 'off'}: the volume stays in volumesInUse while staged and is unstaged in the end`, async () => {
        await assertUnstagedInTheEnd(await acrossRestart(fault, gate, { podDirLost: false }));
      });

      it(`pod dir lost (story 1), CSIGlobalMountReconstruction ${gate ? 'on' : 'off'}: upstream's final error of the vol_data.json write drops the volume while staged`, async () => {
        // Found by the global listing (gate on) or by pod-b's MountDevice alone (gate off): the
        // rewrite of its global vol_data.json fails, which is MountDevice's final error (csi_util.go
        // saveVolumeData: kubelet truncates and rewrites the file), so NodeStageVolume is not sent and
        // the device is marked not mounted.
        const o = await acrossRestart(fault, gate, { podDirLost: true });
        assert.notDeepEqual(o.droppedWhileStaged, [], o.calls.join(', '));
        assert.notEqual(o.node.driver.volume('vol-1'), undefined, 'left staged at the driver');
        assert.equal(o.calls.includes('NodeStageVolume OK'), false, o.calls.join(', '));
      });
    }

    it('pod dir lost (story 1), CSIGlobalMountReconstruction and CSIKeepUncertainMountOnFinalError on: the listed device stays uncertain, in volumesInUse, and is unstaged in the end', async () => {
      await assertUnstagedInTheEnd(await acrossRestart(fault, FeatureGate.of({ CSIGlobalMountReconstruction: true, CSIKeepUncertainMountOnFinalError: true }), { podDirLost: true }));
    });

    // A global file that must be rewritten (an older kubelet's, without specVolID): the write
    // fails whatever is skipped. Only KEP-6058's gate: upstream calls it final and the listed
    // volume goes (no pod was found for it at reconstruction); CSIKeepUncertainMountOnFinalError
    // calls it uncertain and keeps the file, also after a reboot, where the staging dir is no
    // longer a mount point and a final error's cleanup would remove it.
    for (const reboot of [false, true]) {
      const across = { podDirLost: true, olderGlobalFile: true, reboot };
      const after = reboot ? 'a reboot' : 'a restart';
      it(`an older global file to rewrite after ${after}, only CSIGlobalMountReconstruction on: upstream's final error drops the listed volume while staged`, async () => {
        const o = await acrossRestart(fault, true, across);
        assert.notDeepEqual(o.droppedWhileStaged, [], o.calls.join(', '));
        assert.notEqual(o.node.driver.volume('vol-1'), undefined, 'left staged at the driver');
      });

      it(`an older global file to rewrite after ${after}, CSIKeepUncertainMountOnFinalError on: uncertain, kept in volumesInUse, unstaged in the end`, async () => {
        const o = await acrossRestart(fault, FeatureGate.of({ CSIGlobalMountReconstruction: true, CSIKeepUncertainMountOnFinalError: true }), across);
        await assertUnstagedInTheEnd(o);
      });
    }
  });
}
