// KEP-6058 user stories and the known alpha gap, in memory, each with CSIGlobalMountReconstruction
// off (asserting upstream's leak) and on (asserting the fix). Assertions read the driver's call
// log, the files, the mount table, the ASW and the volumesInUse written to the node.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sha256Hex, type UniqueVolumeName } from '../../../src/layout/names.js';
import { DRIVER, InMemoryNode, ROOT } from '../../support/inMemoryNode.js';

const VOL_DIR = (h: string): string => `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(h)}`;
const POD_DIR = (uid: string, pv: string): string => `${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/${pv}`;
const u = (s: string): UniqueVolumeName => s as UniqueVolumeName;

/** CSI calls other than capability probes, from index `from` of the driver's log. */
function csiCalls(node: InMemoryNode, from = 0): string[] {
  return node.driver.calls
    .slice(from)
    .filter((c) => c.method !== 'NodeGetCapabilities')
    .map((c) => `${c.method} ${c.outcome}`);
}


/** A pod using pv-1 (handle vol-1), mounted; returns the volume's unique name. */
async function mountedPod(node: InMemoryNode, gateOn: boolean): Promise<UniqueVolumeName> {
  const name = u(node.addVolume('pv-1', 'vol-1'));
  node.addPod('pod-a', ['pv-1']);
  await node.startKubelet(gateOn);
  await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
  await node.steps(2);
  assert.deepEqual(node.cluster.volumesInUse, [name]);
  return name;
}

/**
 * Story 1 up to the reboot: the pod is deleted, NodeUnpublishVolume succeeds, NodeUnstageVolume
 * hangs (the storage network hiccups), the drain completes and the node reboots.
 */
async function drainAndRebootDuringUnstage(node: InMemoryNode, gateOn: boolean): Promise<UniqueVolumeName> {
  const name = await mountedPod(node, gateOn);
  const hang = node.driver.inject({ method: 'NodeUnstageVolume', hang: true });
  node.cluster.deletePod('pod-a');
  await node.stepUntil(() => node.driver.hangingCalls() === 1);
  assert.deepEqual(csiCalls(node), ['NodeStageVolume OK', 'NodePublishVolume OK', 'NodeUnpublishVolume OK']);
  assert.equal(await node.exists(POD_DIR('pod-a', 'pv-1')), false, 'TearDown removed the pod volume dir');
  hang.remove();
  node.reboot();
  assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json`), true, 'the staged volume is still on disk');
  assert.equal(node.driver.volume('vol-1')?.stagedAt, `${VOL_DIR('vol-1')}/globalmount`, 'the driver still has it staged');
  return name;
}

describe('KEP-6058 story 1: node drain and reboot while unstage is in progress', () => {
  it('gate off: the volume never enters the ASW, leaves volumesInUse while attached, and is never unstaged (the bug)', async () => {
    const node = new InMemoryNode();
    const name = await drainAndRebootDuringUnstage(node, false);
    const mark = node.driver.calls.length;
    await node.startKubelet(false);
    await node.steps(30);
    assert.equal(node.kubelet.asw.volumeExists(name), false);
    assert.ok(node.cluster.volumesAttached.some((v) => v.name === name), 'still attached to this node');
    assert.deepEqual(node.cluster.volumesInUse, [], 'dropped from volumesInUse while still staged');
    assert.deepEqual(csiCalls(node, mark), [], 'NodeUnstageVolume is never called');
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/globalmount`), true, 'the staging directory leaks');
  });

  it('gate on: registered uncertain, kept in volumesInUse, unstaged once, directory removed only after success', async () => {
    const node = new InMemoryNode();
    const name = await drainAndRebootDuringUnstage(node, true);
    const mark = node.driver.calls.length;
    // The unstage after restart takes a while: watch what is reported meanwhile.
    node.driver.inject({ method: 'NodeUnstageVolume', delayMs: 1000, times: 1 });
    const vm = await node.startKubelet(true);

    const av = vm.asw.getAttachedVolume(name);
    assert.ok(av, 'registered by the global listing');
    assert.equal(av.attachability, 'Uncertain');
    assert.equal(av.deviceMountState, 'DeviceMountUncertain');
    assert.equal(av.deviceMountPath, `${VOL_DIR('vol-1')}/globalmount`);
    assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), [name]);
    assert.ok(node.logger.messages().includes('Global mount with no pod directory is marked uncertain and added into the actual state'));

    await node.stepUntil(() => node.driver.callsOf('NodeUnstageVolume').length > 0 || node.driver.calls.length > mark + 1);
    // While the unstage is in flight: attached, in use, directory present.
    await node.step();
    assert.equal(vm.asw.getAttachedVolume(name)?.attachability, 'True');
    assert.deepEqual(node.cluster.volumesInUse, [name]);
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/globalmount`), true);

    await node.stepUntil(() => !vm.asw.volumeExists(name));
    await node.step();
    assert.deepEqual(csiCalls(node, mark), ['NodeUnstageVolume OK'], 'NodeUnstageVolume exactly once, no NodeUnpublishVolume');
    assert.equal(await node.exists(VOL_DIR('vol-1')), false, 'volume dir removed after the unstage');
    assert.deepEqual(node.cluster.volumesInUse, [], 'leaves volumesInUse only after the unstage');
    assert.equal(node.driver.volume('vol-1'), undefined, 'the driver has nothing staged');
    // volumesInUse history after restart: in use while the unstage ran, empty after it.
    const history = node.cluster.volumesInUseHistory;
    const firstEmpty = history.findIndex((h, i) => i > 0 && h.length === 0 && history[i - 1]?.includes(name));
    assert.ok(firstEmpty > 0, JSON.stringify(history));
  });

  it('gate on: a global file written before KEP-6058 (no specVolID) is recovered under the handle name', async () => {
    const node = new InMemoryNode();
    const name = await drainAndRebootDuringUnstage(node, true);
    node.fs.writeRaw(`${VOL_DIR('vol-1')}/vol_data.json`, '{"driverName":"csi.example.com","volumeHandle":"vol-1"}\n');
    const mark = node.driver.calls.length;
    const vm = await node.startKubelet(true);
    const av = vm.asw.getAttachedVolume(name);
    assert.ok(av);
    assert.equal(av.volumeSpec.kind === 'persistent' ? av.volumeSpec.persistentVolume.name : '', 'vol-1');
    await node.stepUntil(() => !vm.asw.volumeExists(name));
    assert.deepEqual(csiCalls(node, mark), ['NodeUnstageVolume OK']);
  });

  it('gate on: NodeUnstageVolume failing UNAVAILABLE three times is retried with backoff and the directory stays until it succeeds', async () => {
    const node = new InMemoryNode();
    const name = await drainAndRebootDuringUnstage(node, true);
    const mark = node.driver.calls.length;
    node.driver.inject({ method: 'NodeUnstageVolume', code: 14, times: 3 });
    const vm = await node.startKubelet(true);
    const seen: boolean[] = [];
    await node.stepUntil(() => {
      const last = node.driver.calls.slice(mark).filter((c) => c.method === 'NodeUnstageVolume').at(-1);
      if (last !== undefined && last.outcome !== 'OK') seen.push(node.fs.tree(ROOT).some((p) => p.startsWith(VOL_DIR('vol-1'))));
      return !vm.asw.volumeExists(name);
    }, 200);
    const unstages = node.driver.calls.slice(mark).filter((c) => c.method === 'NodeUnstageVolume');
    assert.deepEqual(unstages.map((c) => c.outcome), ['UNAVAILABLE', 'UNAVAILABLE', 'UNAVAILABLE', 'OK']);
    // kubelet's exponential backoff: 500 ms, then 1 s, then 2 s between attempts.
    const gaps = unstages.slice(1).map((c, i) => c.atMs - (unstages[i]?.atMs ?? 0));
    assert.ok((gaps[0] ?? 0) >= 500 && (gaps[1] ?? 0) >= 1000 && (gaps[2] ?? 0) >= 2000, JSON.stringify(gaps));
    assert.ok(seen.length > 0 && seen.every(Boolean), 'the directory stayed while the unstage failed');
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
  });

  it('a volume a pod still wants after the reboot is re-staged and re-published, never unstaged', async () => {
    for (const gateOn of [false, true]) {
      const node = new InMemoryNode();
      const name = await mountedPod(node, gateOn);
      node.reboot();
      const mark = node.driver.calls.length;
      const vm = await node.startKubelet(gateOn);
      await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
      await node.steps(3);
      assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume OK'], `gate ${gateOn}`);
      assert.deepEqual(node.cluster.volumesInUse, [name]);
    }
  });
});

describe('KEP-6058 story 2: the pod-local vol_data.json is lost, kubelet restarts with the bind mount present', () => {
  async function lostPodLocal(gateOn: boolean): Promise<{ node: InMemoryNode; name: UniqueVolumeName; mark: number }> {
    const node = new InMemoryNode();
    const name = await mountedPod(node, gateOn);
    node.crashKubelet();
    await node.fs.unlink(`${POD_DIR('pod-a', 'pv-1')}/vol_data.json`);
    node.cluster.deletePod('pod-a');
    const mark = node.driver.calls.length;
    await node.startKubelet(gateOn);
    return { node, name, mark };
  }

  it('gate off: reconstruction fails, cleanup cannot build the unmounter, and the global mount leaks', async () => {
    const { node, name, mark } = await lostPodLocal(false);
    const vm = node.kubelet;
    assert.equal(vm.reconstructor.failedReconstructions().length, 1);
    await node.steps(30);
    assert.equal(vm.asw.volumeExists(name), false);
    assert.deepEqual(csiCalls(node, mark), [], 'neither NodeUnpublishVolume nor NodeUnstageVolume');
    assert.ok(node.mounter.isMounted(`${VOL_DIR('vol-1')}/globalmount`), 'global mount leaks');
    assert.ok(node.mounter.isMounted(`${POD_DIR('pod-a', 'pv-1')}/mount`), 'pod mount leaks');
    assert.deepEqual(node.cluster.volumesInUse, []);
    assert.deepEqual(
      node.metrics.events.filter((e) => e.kind === 'forceCleanedFailedVolumeOperation'),
      [{ kind: 'forceCleanedFailedVolumeOperation', failed: true }],
    );
    assert.deepEqual(
      node.metrics.events.filter((e) => e.kind === 'reconstructVolumeOperation').slice(-1),
      [{ kind: 'reconstructVolumeOperation', source: 'pod-local', failed: true }],
    );
  });

  it('gate on: NodeUnpublishVolume then NodeUnstageVolume, and nothing is left', async () => {
    const { node, name, mark } = await lostPodLocal(true);
    const vm = node.kubelet;
    assert.deepEqual(vm.reconstructor.failedReconstructions(), []);
    assert.ok(node.logger.messages().includes('plugin.ConstructVolumeSpec recovered vol_data from global mount'));
    await node.stepUntil(() => !vm.asw.volumeExists(name));
    await node.step();
    assert.deepEqual(csiCalls(node, mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    assert.ok(node.logger.messages().includes('unmounter recovered vol_data from global mount'));
    assert.deepEqual(node.mounter.entries().map((e) => e.mountPoint), ['/']);
    assert.equal(await node.exists(POD_DIR('pod-a', 'pv-1')), false);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
    assert.deepEqual(node.cluster.volumesInUse, []);
    // Counted once, by the pod directory rebuilt from the global mount; the listing found the
    // same volume and does not count it again.
    const recon = node.metrics.events.filter((e) => e.kind === 'reconstructVolumeOperation');
    assert.deepEqual(recon.slice(-1), [{ kind: 'reconstructVolumeOperation', source: 'global-mount', failed: false }]);
    assert.equal(recon.filter((e) => e.kind === 'reconstructVolumeOperation' && e.source === 'global-mount').length, 1);
    // kubelet's reconstructGlobalVolume logs the KEP's V(2) line when it registers a listed
    // volume, before the pod directories are walked - so here too.
    assert.ok(node.logger.messages().includes('Global mount with no pod directory is marked uncertain and added into the actual state'));
  });
});

describe('KEP-6058 known alpha gap: reboot with an unreadable pod-local file', () => {
  it('gate on: the listing unstages without a NodeUnpublishVolume first; a strict driver refuses and the volume stays registered', async () => {
    const node = new InMemoryNode();
    const name = await mountedPod(node, true);
    node.reboot();
    await node.fs.unlink(`${POD_DIR('pod-a', 'pv-1')}/vol_data.json`);
    node.cluster.deletePod('pod-a');
    const mark = node.driver.calls.length;
    const vm = await node.startKubelet(true);
    assert.equal(vm.reconstructor.failedReconstructions().length, 1, 'no bind mount after a reboot: the fallback cannot pair');
    await node.steps(40);
    const calls = csiCalls(node, mark);
    assert.ok(calls.length > 0 && calls.every((c) => c === 'NodeUnstageVolume FAILED_PRECONDITION'), JSON.stringify(calls));
    assert.ok(!calls.some((c) => c.startsWith('NodeUnpublishVolume')), 'nothing calls NodeUnpublishVolume first');
    // Safe direction: still registered and reported in use, the staging directory intact.
    assert.equal(vm.asw.getAttachedVolume(name)?.deviceMountState, 'DeviceMountUncertain');
    assert.deepEqual(node.cluster.volumesInUse, [name]);
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json`), true);
  });
});

describe('known gap (docs/feature-gates.md): a listed volume whose re-stage fails finally', () => {
  it('gate on: MountDevice cleanup removes the global vol_data.json after a final NodeStage error, and the volume is later dropped without NodeUnstageVolume', async () => {
    const node = new InMemoryNode();
    const name = await mountedPod(node, true);
    // Reboot; the pod's directory is gone (drained) but the pod is wanted again: only the listing finds the volume.
    node.reboot();
    await node.fs.unlink(`${POD_DIR('pod-a', 'pv-1')}/vol_data.json`);
    await node.fs.rmdir(`${POD_DIR('pod-a', 'pv-1')}/mount`);
    await node.fs.rmdir(POD_DIR('pod-a', 'pv-1'));
    node.driver.inject({ method: 'NodeStageVolume', code: 3 /* INVALID_ARGUMENT: final */, times: 1 });
    const mark = node.driver.calls.length;
    const vm = await node.startKubelet(true);
    await node.stepUntil(() => node.driver.calls.slice(mark).some((c) => c.method === 'NodeStageVolume'));
    await node.step();
    // No reconstruction record for a listed volume: the final error marks the device not mounted,
    // and MountDevice's cleanup (the path is not mounted after the reboot) removed the global file.
    assert.equal(vm.asw.getAttachedVolume(name)?.deviceMountState, 'DeviceNotMounted');
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json`), false);
    node.cluster.deletePod('pod-a');
    await node.steps(30);
    assert.equal(vm.asw.volumeExists(name), false);
    assert.ok(!csiCalls(node, mark).some((c) => c.startsWith('NodeUnstageVolume')), 'never unstaged');
    assert.equal(node.driver.volume('vol-1')?.stagedAt, `${VOL_DIR('vol-1')}/globalmount`, 'the driver still has it staged');
  });
});
