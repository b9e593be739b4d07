// nodevol's gates beyond KEP-6058 (docs/feature-gates.md), each with the gate off
// (upstream's gap, asserted) and on (the fix), in memory with CSIGlobalMountReconstruction on.
// Assertions read the driver's call log and state, the files, the ASW and the volumesInUse written.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate, type FeatureName } from '../../../src/features/features.js';
import { sha256Hex, type UniqueVolumeName } from '../../../src/layout/names.js';
import { DRIVER, InMemoryNode, ROOT } from '../../support/inMemoryNode.js';
import { REFUSED, rootDirFault, type Fault, type RefusedCalls } from '../../support/rootDirFault.js';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import { VolumePluginMgr, type ConstructOptions, type ReconstructedVolume } from '../../../src/volume/plugins.js';

const VOL_DIR = (h: string): string => `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(h)}`;
const POD_DIR = (uid: string, pv: string): string => `${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/${pv}`;
const u = (s: string): UniqueVolumeName => s as UniqueVolumeName;

/** KEP-6058's gate on, `gate` off or on. */
function gates(gate: FeatureName, on: boolean): FeatureGate {
  return FeatureGate.of({ CSIGlobalMountReconstruction: true, [gate]: on });
}

function csiCalls(node: InMemoryNode, from = 0): string[] {
  return node.driver.calls
    .slice(from)
    .filter((c) => c.method !== 'NodeGetCapabilities')
    .map((c) => `${c.method} ${c.outcome}`);
}

async function mountedPod(node: InMemoryNode, g: FeatureGate, mode: 'Filesystem' | 'Block' = 'Filesystem'): Promise<UniqueVolumeName> {
  const name = u(node.addVolume('pv-1', 'vol-1', { mode }));
  node.addPod('pod-a', ['pv-1']);
  await node.startKubelet(g);
  await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
  await node.steps(2);
  return name;
}

/** The alpha gap's setup: reboot, pod-local file lost, pod deleted. */
async function alphaGap(on: boolean): Promise<{ node: InMemoryNode; name: UniqueVolumeName; mark: number; inUseAtUnstage: string[][] }> {
  const g = gates('CSIUnpublishBeforeUnstageAfterReconstruction', on);
  const node = new InMemoryNode();
  const name = await mountedPod(node, g);
  node.reboot();
  await node.fs.unlink(`${POD_DIR('pod-a', 'pv-1')}/vol_data.json`);
  node.cluster.deletePod('pod-a');
  const inUseAtUnstage: string[][] = [];
  node.driver.observer = {
    arrived: (_seq, method) => {
      if (method === 'NodeUnstageVolume') inUseAtUnstage.push([...node.cluster.volumesInUse]);
    },
    finished: () => undefined,
  };
  const mark = node.driver.calls.length;
  await node.startKubelet(g);
  await node.steps(60);
  return { node, name, mark, inUseAtUnstage };
}

describe('gate CSIUnpublishBeforeUnstageAfterReconstruction (the KEP-6058 alpha gap)', () => {
  it('off: NodeUnstageVolume without NodeUnpublishVolume, refused by a strict driver again and again; the volume stays in use', async () => {
    const { node, name, mark } = await alphaGap(false);
    const calls = csiCalls(node, mark);
    assert.ok(calls.length > 1 && calls.every((c) => c === 'NodeUnstageVolume FAILED_PRECONDITION'), JSON.stringify(calls));
    assert.deepEqual(node.cluster.volumesInUse, [name]);
    assert.equal(node.driver.volume('vol-1')?.publishedAt.size, 1);
  });

  it('on: NodeUnpublishVolume of the paired target, then NodeUnstageVolume; directories gone; the volume leaves volumesInUse only afterwards', async () => {
    const { node, name, mark, inUseAtUnstage } = await alphaGap(true);
    assert.deepEqual(csiCalls(node, mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    const unpublish = node.driver.calls.slice(mark).find((c) => c.method === 'NodeUnpublishVolume');
    assert.equal(unpublish?.volumeId, 'vol-1');
    assert.equal((unpublish?.request as { targetPath?: string } | undefined)?.targetPath, `${POD_DIR('pod-a', 'pv-1')}/mount`);
    assert.equal(node.driver.volume('vol-1'), undefined, 'nothing staged or published at the driver');
    assert.equal(await node.exists(POD_DIR('pod-a', 'pv-1')), false);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
    assert.deepEqual(inUseAtUnstage, [[name]], 'still reported in use while NodeUnstageVolume runs');
    assert.deepEqual(node.cluster.volumesInUse, []);
  });

  it('on: a directory of a pod that still exists and names an inline volume pv-1 is never paired with the PV', async () => {
    const g = gates('CSIUnpublishBeforeUnstageAfterReconstruction', true);
    const node = new InMemoryNode();
    await mountedPod(node, g);
    node.reboot();
    await node.fs.unlink(`${POD_DIR('pod-a', 'pv-1')}/vol_data.json`);
    node.cluster.deletePod('pod-a');
    // Same uid, now with an inline ephemeral volume that happens to be called pv-1.
    node.cluster.addPod({ uid: 'pod-a', namespace: 'default', name: 'pod-pod-a', nodeName: 'node-1', volumes: [{ name: 'pv-1', csi: { driver: DRIVER } }], volumeMounts: ['pv-1'], volumeDevices: [] });
    const vm = await node.startKubelet(g);
    assert.equal(vm.reconstructor.failedReconstructions().length, 1, 'left to upstream\'s cleanup');
    assert.deepEqual(vm.asw.getAllMountedVolumes().map((m) => m.podName), []);
    assert.ok(node.logger.lines.some((l) => /Not pairing a pod volume directory/.test(l.msg)));
  });
});

describe('gate CSIListGlobalVolumesWithoutStagingDir', () => {
  /** kubelet killed inside removeMountDir, after the rmdir of globalmount (and optionally the unlink of vol_data.json). */
  async function interruptedUnmountDevice(on: boolean, alsoData: boolean): Promise<InMemoryNode> {
    const g = gates('CSIListGlobalVolumesWithoutStagingDir', on);
    const node = new InMemoryNode();
    await mountedPod(node, g);
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => node.driver.volume('vol-1') === undefined);
    node.crashKubelet();
    // What the crash left: re-create the directory as removeMountDir had it at the crash.
    await node.fs.mkdir(VOL_DIR('vol-1'), { recursive: true, mode: 0o750 });
    if (!alsoData) node.fs.writeRaw(`${VOL_DIR('vol-1')}/vol_data.json`, '{"driverName":"csi.example.com","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n');
    await node.startKubelet(g);
    await node.steps(40);
    return node;
  }

  it('off: a volume dir left with its vol_data.json but no globalmount stays forever', async () => {
    const node = await interruptedUnmountDevice(false, false);
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json`), true);
  });

  it('on: it is listed, NodeUnstageVolume is sent (idempotent) and the directory is removed', async () => {
    const node = await interruptedUnmountDevice(true, false);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
    assert.equal(node.driver.calls.filter((c) => c.method === 'NodeUnstageVolume').length, 2, 'the first life\'s and the idempotent one');
  });

  it('off: an empty volume dir stays; on: it is removed', async () => {
    assert.equal(await (await interruptedUnmountDevice(false, true)).exists(VOL_DIR('vol-1')), true);
    assert.equal(await (await interruptedUnmountDevice(true, true)).exists(VOL_DIR('vol-1')), false);
  });

  /** kubelet killed inside MountDevice after its mkdir of globalmount, before it wrote vol_data.json. */
  async function mountDeviceCutBeforeRecord(on: boolean, extra?: (node: InMemoryNode) => Promise<void> | void): Promise<{ node: InMemoryNode; mark: number }> {
    const g = gates('CSIListGlobalVolumesWithoutStagingDir', on);
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    await node.fs.mkdir(`${VOL_DIR('vol-1')}/globalmount`, { recursive: true, mode: 0o750 });
    await extra?.(node);
    const mark = node.driver.calls.length;
    await node.startKubelet(g);
    await node.steps(40);
    return { node, mark };
  }

  it('off: a volume dir holding only an empty globalmount (MountDevice cut before its record) stays forever', async () => {
    const { node, mark } = await mountDeviceCutBeforeRecord(false);
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/globalmount`), true);
    assert.deepEqual(csiCalls(node, mark), []);
  });

  it('on: it is removed, nothing called (no record: no stage was asked for there)', async () => {
    const { node, mark } = await mountDeviceCutBeforeRecord(true);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
    assert.deepEqual(csiCalls(node, mark), []);
  });

  it('on: a globalmount with anything in it, a mounted one, or another file beside it stays', async () => {
    const withFile = await mountDeviceCutBeforeRecord(true, (node) => node.fs.writeRaw(`${VOL_DIR('vol-1')}/globalmount/data`, 'x'));
    assert.equal(await withFile.node.exists(`${VOL_DIR('vol-1')}/globalmount/data`), true);
    const mounted = await mountDeviceCutBeforeRecord(true, async (node) => node.mounter.mount('/dev/fake/vol-1', `${VOL_DIR('vol-1')}/globalmount`, 'ext4', []));
    assert.equal(await mounted.node.exists(`${VOL_DIR('vol-1')}/globalmount`), true);
    const beside = await mountDeviceCutBeforeRecord(true, (node) => node.fs.writeRaw(`${VOL_DIR('vol-1')}/notes`, 'x'));
    assert.equal(await beside.node.exists(`${VOL_DIR('vol-1')}/globalmount`), true);
  });

  /** kubelet killed inside MountDevice between the temp file of the global vol_data.json and its rename. */
  async function interruptedMountDevice(on: boolean, complete = true): Promise<{ node: InMemoryNode; mark: number }> {
    const g = gates('CSIListGlobalVolumesWithoutStagingDir', on);
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    await node.fs.mkdir(`${VOL_DIR('vol-1')}/globalmount`, { recursive: true, mode: 0o750 });
    const bytes = '{"driverName":"csi.example.com","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n';
    node.fs.writeRaw(`${VOL_DIR('vol-1')}/vol_data.json.tmp`, complete ? bytes : bytes.slice(0, 40));
    const mark = node.driver.calls.length;
    await node.startKubelet(g);
    await node.steps(40);
    return { node, mark };
  }

  it('off: a volume dir holding only our vol_data.json.tmp (MountDevice cut short) is never listed nor removed', async () => {
    const { node, mark } = await interruptedMountDevice(false);
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json.tmp`), true);
    assert.deepEqual(csiCalls(node, mark), []);
  });

  it('on: the write is finished from the temp file, the volume listed, NodeUnstageVolume sent (idempotent) and the directory removed', async () => {
    const { node, mark } = await interruptedMountDevice(true);
    assert.deepEqual(csiCalls(node, mark), ['NodeUnstageVolume OK']);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
  });

  it('on: a partial temp file (a write cut short inside writeFile) is left alone, nothing called', async () => {
    const { node, mark } = await interruptedMountDevice(true, false);
    assert.deepEqual(csiCalls(node, mark), []);
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json.tmp`), true);
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json`), false);
  });

  it('on: a pod that wants the volume stages it from the finished file, and it is torn down normally', async () => {
    const g = gates('CSIListGlobalVolumesWithoutStagingDir', true);
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    await node.fs.mkdir(`${VOL_DIR('vol-1')}/globalmount`, { recursive: true, mode: 0o750 });
    node.fs.writeRaw(`${VOL_DIR('vol-1')}/vol_data.json.tmp`, '{"driverName":"csi.example.com","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n');
    node.addPod('pod-a', ['pv-1']);
    const mark = node.driver.calls.length;
    await node.startKubelet(g);
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
    node.cluster.deletePod('pod-a');
    await node.steps(40);
    assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume OK', 'NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
  });
});

/**
 * Explorer finding 17 (workload 2686 of the 10,000): the listing cannot finish an interrupted
 * vol_data.json write because the root dir is full or read-only at that moment. The record was
 * never renamed, so nothing was staged from it: the volume dir is removed instead, at once or by
 * a later housekeeping pass; and never while a MountDevice of that volume works in it.
 */
describe('gate CSIListGlobalVolumesWithoutStagingDir: an interrupted write that cannot be finished', () => {
  const TEMP_BYTES = '{"driverName":"csi.example.com","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n';

  /**
   * A MountDevice cut between its temp file and its rename, then kubelet started with the gate
   * `on` or off while the root dir has `fault` (refusing the `refused` calls).
   */
  async function startOverInterruptedWrite(
    on: boolean,
    fault: Fault,
    refused: RefusedCalls = REFUSED,
  ): Promise<{ node: InMemoryNode; setFault: (f: Fault | undefined) => void; mark: number }> {
    const node = new InMemoryNode();
    const setFault = rootDirFault(node, refused);
    node.addVolume('pv-1', 'vol-1');
    await node.fs.mkdir(`${VOL_DIR('vol-1')}/globalmount`, { recursive: true, mode: 0o750 });
    node.fs.writeRaw(`${VOL_DIR('vol-1')}/vol_data.json.tmp`, TEMP_BYTES);
    setFault(fault);
    const mark = node.driver.calls.length;
    await node.startKubelet(gates('CSIListGlobalVolumesWithoutStagingDir', on));
    return { node, setFault, mark };
  }

  it('on: the rename fails (a full root dir): the volume dir is removed instead, nothing called', async () => {
    const { node, mark } = await startOverInterruptedWrite(true, 'ENOSPC', { ...REFUSED, ENOSPC: [...REFUSED.ENOSPC, 'rename'] });
    await node.steps(5);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
    assert.deepEqual(csiCalls(node, mark), []);
  });

  it('on: the root dir is read-only: kept while it is, removed by the next housekeeping pass once writable', async () => {
    const { node, setFault, mark } = await startOverInterruptedWrite(true, 'EROFS');
    await node.steps(5);
    await node.composed?.housekeeping();
    assert.deepEqual(node.tree().filter((p) => p.startsWith(VOL_DIR('vol-1'))), [`${VOL_DIR('vol-1')}/`, `${VOL_DIR('vol-1')}/globalmount/`, `${VOL_DIR('vol-1')}/vol_data.json.tmp`]);
    setFault(undefined);
    await node.steps(5);
    assert.equal(await node.exists(VOL_DIR('vol-1')), true, 'the listing runs once a life: only housekeeping retries');
    await node.composed?.housekeeping();
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
    assert.deepEqual(csiCalls(node, mark), []);
  });

  it('off: the same directory stays, read-only root dir or not', async () => {
    const { node, setFault } = await startOverInterruptedWrite(false, 'EROFS');
    await node.steps(5);
    setFault(undefined);
    await node.composed?.housekeeping();
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json.tmp`), true);
  });

  it('on: a failed fsync of the directory after the rename is only logged; the volume is listed and unstaged', async () => {
    const { node, mark } = await startOverInterruptedWrite(true, 'EROFS', { ...REFUSED, EROFS: ['fsyncDir'] });
    await node.steps(40);
    assert.deepEqual(csiCalls(node, mark), ['NodeUnstageVolume OK']);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
  });

  it('on: a housekeeping pass never takes the temp file a MountDevice of that volume is about to rename', async () => {
    const { node, setFault } = await startOverInterruptedWrite(true, 'EROFS');
    await node.steps(3);
    setFault(undefined);
    // MountDevice of the same volume stops just before its rename of the temp file it wrote.
    const fs = node.fs as unknown as { rename: (from: string, to: string) => Promise<void> };
    const rename = fs.rename.bind(node.fs);
    let held = false;
    let resume!: () => void;
    const released = new Promise<void>((r) => (resume = r));
    fs.rename = async (from, to) => {
      if (from === `${VOL_DIR('vol-1')}/vol_data.json.tmp`) {
        held = true;
        await released;
      }
      return rename(from, to);
    };
    node.addPod('pod-a', ['pv-1']);
    await node.stepUntil(() => held, 20);
    await node.composed?.housekeeping();
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json.tmp`), true, 'the removal waits for the MountDevice');
    resume();
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1, 20);
    await node.composed?.housekeeping();
    assert.equal(await node.exists(`${VOL_DIR('vol-1')}/vol_data.json`), true, 'a staged volume dir is no leftover');
    assert.equal(node.driver.volume('vol-1')?.stagedAt, `${VOL_DIR('vol-1')}/globalmount`);
    assert.deepEqual(node.logger.messages().filter((m) => /MountDevice|MountVolume/.test(m) && /fail/i.test(m)), [], 'MountDevice never failed');
  });
});

describe('gate CSIKeepUncertainMountOnFinalError, reconstructed volumes (a volume only the listing found; formerly CSIKeepListedVolumeOnStageFailure)', () => {
  async function restageFails(on: boolean): Promise<{ node: InMemoryNode; name: UniqueVolumeName; mark: number }> {
    const g = gates('CSIKeepUncertainMountOnFinalError', on);
    const node = new InMemoryNode();
    const name = await mountedPod(node, g);
    // A drain unpublished the pod's target, then the node rebooted before the unstage: the pod's
    // directory is gone, the driver still has the volume staged, and the pod is wanted again.
    await node.driver.nodeUnpublishVolume({ volumeId: 'vol-1', targetPath: `${POD_DIR('pod-a', 'pv-1')}/mount` });
    node.reboot();
    await node.fs.unlink(`${POD_DIR('pod-a', 'pv-1')}/vol_data.json`);
    await node.fs.rmdir(POD_DIR('pod-a', 'pv-1')).catch(async () => {
      await node.fs.rmdir(`${POD_DIR('pod-a', 'pv-1')}/mount`);
      await node.fs.rmdir(POD_DIR('pod-a', 'pv-1'));
    });
    node.driver.inject({ method: 'NodeStageVolume', code: 3 /* INVALID_ARGUMENT: final */, times: 1 });
    const mark = node.driver.calls.length;
    await node.startKubelet(g);
    await node.stepUntil(() => node.driver.calls.slice(mark).some((c) => c.method === 'NodeStageVolume'));
    await node.step();
    node.cluster.deletePod('pod-a');
    await node.steps(40);
    return { node, name, mark };
  }

  it('off: the record goes with the final error, the volume is dropped without NodeUnstageVolume while the driver has it staged', async () => {
    const { node, name } = await restageFails(false);
    assert.equal(node.kubelet.asw.volumeExists(name), false);
    assert.equal(node.driver.volume('vol-1')?.stagedAt, `${VOL_DIR('vol-1')}/globalmount`);
  });

  it('on: the record and the uncertain device stay; when the pod goes, NodeUnstageVolume is sent and everything is removed', async () => {
    const { node, name, mark } = await restageFails(true);
    assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume INVALID_ARGUMENT', 'NodeUnstageVolume OK']);
    assert.equal(node.kubelet.asw.volumeExists(name), false);
    assert.equal(node.driver.volume('vol-1'), undefined);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
  });

  /**
   * The same gap one step later (the explorer's `listed-restage-fails --faults` finding): after a
   * reboot the pod's mount is reconstructed as uncertain while the driver still records its
   * target as published; the re-SetUp fails with a final error before the pod goes away.
   */
  async function republishFails(on: boolean): Promise<{ node: InMemoryNode; name: UniqueVolumeName; mark: number; keptAfterFailure: boolean }> {
    const g = gates('CSIKeepUncertainMountOnFinalError', on);
    const node = new InMemoryNode();
    const name = await mountedPod(node, g);
    node.reboot();
    node.driver.inject({ method: 'NodePublishVolume', code: 3 /* INVALID_ARGUMENT: final */, times: 1 });
    const mark = node.driver.calls.length;
    await node.startKubelet(g);
    await node.stepUntil(() => node.driver.calls.slice(mark).some((c) => c.method === 'NodePublishVolume'));
    await node.step();
    const keptAfterFailure = await node.exists(`${POD_DIR('pod-a', 'pv-1')}/vol_data.json`);
    node.cluster.deletePod('pod-a');
    await node.steps(40);
    return { node, name, mark, keptAfterFailure };
  }

  it('off: a reconstructed pod mount whose re-SetUp fails with a final error loses its vol_data.json; when the pod goes it is never unpublished or unstaged', async () => {
    const { node, name, mark, keptAfterFailure } = await republishFails(false);
    assert.equal(keptAfterFailure, false);
    assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume INVALID_ARGUMENT']);
    assert.equal(node.kubelet.asw.volumeExists(name), true);
    assert.deepEqual([...(node.driver.volume('vol-1')?.publishedAt ?? [])], [`${POD_DIR('pod-a', 'pv-1')}/mount`]);
  });

  it('on: the pod volume dir and its vol_data.json stay; when the pod goes, NodeUnpublishVolume then NodeUnstageVolume, everything removed', async () => {
    const { node, name, mark, keptAfterFailure } = await republishFails(true);
    assert.equal(keptAfterFailure, true);
    assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume INVALID_ARGUMENT', 'NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    assert.equal(node.kubelet.asw.volumeExists(name), false);
    assert.equal(node.driver.volume('vol-1'), undefined);
    assert.equal(await node.exists(POD_DIR('pod-a', 'pv-1')), false);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
  });
});

describe('gate CSIKeepUncertainMountOnFinalError (found by the explorer over generated workloads)', () => {
  const INTERNAL = 13;
  const DEADLINE_EXCEEDED = 4;
  const INVALID_ARGUMENT = 3;

  /** The driver does the work of `method`, then fails it finally; the pod goes before a retry. */
  async function doneThenFailed(on: boolean, method: 'NodeStageVolume' | 'NodePublishVolume', mode: 'Filesystem' | 'Block'): Promise<{ node: InMemoryNode; name: UniqueVolumeName; mark: number }> {
    const g = gates('CSIKeepUncertainMountOnFinalError', on);
    const node = new InMemoryNode();
    const name = u(node.addVolume('pv-1', 'vol-1', { mode }));
    node.driver.inject({ method, code: INTERNAL, afterEffect: true, times: 1 });
    node.addPod('pod-a', ['pv-1']);
    const mark = node.driver.calls.length;
    await node.startKubelet(g);
    await node.stepUntil(() => node.driver.calls.slice(mark).some((c) => c.method === method));
    node.cluster.deletePod('pod-a');
    await node.steps(60);
    return { node, name, mark };
  }

  for (const mode of ['Filesystem', 'Block'] as const) {
    it(`${mode}, off: NodeStageVolume staged, then failed with INTERNAL: the device is forgotten, never unstaged, dropped from volumesInUse`, async () => {
      const { node, name, mark } = await doneThenFailed(false, 'NodeStageVolume', mode);
      assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume INTERNAL']);
      assert.notEqual(node.driver.volume('vol-1')?.stagedAt, undefined);
      assert.equal(node.kubelet.asw.volumeExists(name), false);
      assert.deepEqual(node.cluster.volumesInUse, []);
    });

    it(`${mode}, on: the mounted staging path makes the error uncertain; NodeUnstageVolume when the pod goes, then the volume leaves volumesInUse`, async () => {
      const { node, name, mark } = await doneThenFailed(true, 'NodeStageVolume', mode);
      assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume INTERNAL', 'NodeUnstageVolume OK']);
      assert.equal(node.driver.volume('vol-1'), undefined);
      assert.equal(node.kubelet.asw.volumeExists(name), false);
      assert.deepEqual(node.cluster.volumesInUse, []);
    });

    it(`${mode}, off: NodePublishVolume published, then failed with INTERNAL: the target is never unpublished`, async () => {
      const { node, mark } = await doneThenFailed(false, 'NodePublishVolume', mode);
      const calls = csiCalls(node, mark);
      assert.deepEqual(calls.slice(0, 2), ['NodeStageVolume OK', 'NodePublishVolume INTERNAL']);
      assert.equal(calls.filter((c) => c.startsWith('NodeUnpublishVolume')).length, 0);
      assert.equal(node.driver.volume('vol-1')?.publishedAt.size, 1);
    });

    it(`${mode}, on: the mounted target makes the error uncertain; NodeUnpublishVolume, then NodeUnstageVolume when the pod goes`, async () => {
      const { node, mark } = await doneThenFailed(true, 'NodePublishVolume', mode);
      assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume INTERNAL', 'NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
      assert.equal(node.driver.volume('vol-1'), undefined);
      assert.deepEqual(node.tree().filter((p) => p.includes('pv-1') || p.includes(sha256Hex('vol-1'))), []);
    });

    /** A call times out after its work (uncertain), its retry fails finally, the pod goes. */
    async function uncertainThenFinal(on: boolean, method: 'NodeStageVolume' | 'NodePublishVolume'): Promise<{ node: InMemoryNode; mark: number }> {
      const g = gates('CSIKeepUncertainMountOnFinalError', on);
      const node = new InMemoryNode();
      node.addVolume('pv-1', 'vol-1', { mode });
      node.driver.inject({ method, code: DEADLINE_EXCEEDED, afterEffect: true, times: 1 });
      node.driver.inject({ method, code: INVALID_ARGUMENT, times: 1 });
      node.addPod('pod-a', ['pv-1']);
      const mark = node.driver.calls.length;
      await node.startKubelet(g);
      await node.stepUntil(() => node.driver.calls.slice(mark).filter((c) => c.method === method).length === 2);
      node.cluster.deletePod('pod-a');
      await node.steps(60);
      return { node, mark };
    }

    it(`${mode}, off: a stage that timed out after its work, then a final error: the device is marked not mounted and never unstaged`, async () => {
      const { node, mark } = await uncertainThenFinal(false, 'NodeStageVolume');
      assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume DEADLINE_EXCEEDED', 'NodeStageVolume INVALID_ARGUMENT']);
      assert.notEqual(node.driver.volume('vol-1')?.stagedAt, undefined);
    });

    it(`${mode}, on: the device stays uncertain through the final error; NodeUnstageVolume when the pod goes`, async () => {
      const { node, mark } = await uncertainThenFinal(true, 'NodeStageVolume');
      assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume DEADLINE_EXCEEDED', 'NodeStageVolume INVALID_ARGUMENT', 'NodeUnstageVolume OK']);
      assert.equal(node.driver.volume('vol-1'), undefined);
      assert.deepEqual(node.tree().filter((p) => p.includes('pv-1') || p.includes(sha256Hex('vol-1'))), []);
    });

    it(`${mode}, off: a publish that timed out after its work, then a final error: the pod mount is dropped and its target never unpublished`, async () => {
      const { node } = await uncertainThenFinal(false, 'NodePublishVolume');
      assert.equal(node.driver.volume('vol-1')?.publishedAt.size, 1);
    });

    it(`${mode}, on: the pod mount stays uncertain through the final error; NodeUnpublishVolume, then NodeUnstageVolume when the pod goes`, async () => {
      const { node, mark } = await uncertainThenFinal(true, 'NodePublishVolume');
      assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume DEADLINE_EXCEEDED', 'NodePublishVolume INVALID_ARGUMENT', 'NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
      assert.equal(node.driver.volume('vol-1'), undefined);
    });
  }
});

describe('gate CSIRetryReconstructionCleanup (seed: inline volumes orphaned after a restart)', () => {
  /**
   * A plugin whose reconstruction fails for pv-1 (as upstream's did for inline volumes before
   * kubernetes#108997) while its unmounter works, so the candidate goes to cleanupMounts.
   */
  class FailingReconstruction extends CsiPlugin {
    override constructVolumeSpec(volumeName: string, volumePath: string, options?: ConstructOptions): Promise<ReconstructedVolume> {
      if (volumeName === 'pv-1') return Promise.reject(new Error('reconstruction fails (test)'));
      return super.constructVolumeSpec(volumeName, volumePath, options);
    }
  }

  async function cleanupFailsOnce(on: boolean): Promise<InMemoryNode> {
    const g = gates('CSIRetryReconstructionCleanup', on);
    const node = new InMemoryNode();
    await mountedPod(node, g);
    node.crashKubelet();
    node.cluster.deletePod('pod-a');
    // The first NodeUnpublishVolume after the restart is refused (the driver is still busy).
    node.driver.inject({ method: 'NodeUnpublishVolume', code: 10 /* ABORTED */, times: 1 });
    await node.startKubelet(g, { plugins: (host, hooks) => new VolumePluginMgr([new FailingReconstruction(host, hooks)]) });
    await node.steps(100);
    return node;
  }

  it('off: one cleanup attempt; after its ABORTED the target stays published and the pod dir stays', async () => {
    const node = await cleanupFailsOnce(false);
    assert.deepEqual(node.driver.calls.filter((c) => c.method === 'NodeUnpublishVolume').map((c) => c.outcome), ['ABORTED']);
    assert.equal(node.driver.volume('vol-1')?.publishedAt.size, 1);
    assert.equal(await node.exists(`${POD_DIR('pod-a', 'pv-1')}/vol_data.json`), true);
  });

  it('on: retried after a backoff until TearDown succeeds; the target is unpublished and the pod volume dir removed', async () => {
    const node = await cleanupFailsOnce(true);
    assert.deepEqual(node.driver.calls.filter((c) => c.method === 'NodeUnpublishVolume').map((c) => c.outcome), ['ABORTED', 'OK']);
    assert.equal(node.driver.volume('vol-1')?.publishedAt.size ?? 0, 0);
    assert.equal(await node.exists(POD_DIR('pod-a', 'pv-1')), false);
    assert.ok(node.logger.lines.some((l) => /Retrying the cleanup of a volume that could not be reconstructed/.test(l.msg)));
  });

  it('on, a TearDown that keeps failing: the retries follow kubelet\'s backoff, capped at 2m2s; the executor\'s refusals during its own backoff do not grow it (replay: the gap was 244 s)', async () => {
    const g = gates('CSIRetryReconstructionCleanup', true);
    const node = new InMemoryNode();
    await mountedPod(node, g);
    node.crashKubelet();
    node.cluster.deletePod('pod-a');
    node.driver.inject({ method: 'NodeUnpublishVolume', code: 10 /* ABORTED */ });
    await node.startKubelet(g, { plugins: (host, hooks) => new VolumePluginMgr([new FailingReconstruction(host, hooks)]) });
    await node.steps(20 * 60, 1_000); // 20 virtual minutes, one loop a second
    const at = node.driver.calls.filter((c) => c.method === 'NodeUnpublishVolume').map((c) => c.atMs);
    const gaps = at.slice(1).map((t, i) => t - (at[i] ?? t));
    assert.ok(at.length >= 10, `attempts: ${at.length}`);
    assert.ok(Math.max(...gaps) <= 122_000 + 2_000, `gaps between attempts (ms): ${gaps.join(', ')}`);
    assert.ok(gaps.slice(-3).every((gap) => gap >= 122_000), `the backoff reaches its cap: ${gaps.join(', ')}`);
  });
});

describe('gate CSIUnstageCompletesBeforeRestage (kubernetes#121357)', () => {
  const MARKER = `${VOL_DIR('vol-1')}/unstage-in-progress`;
  /** A raw block volume's: beside its vol_data.json in volumeDevices/<spec>/data. */
  const BLOCK_MARKER = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices/pv-1/data/unstage-in-progress`;

  /**
   * pod-a's volume is unstaged with a NodeUnstageVolume that times out at kubelet (2 min) and runs
   * on at the driver (3 min); pod-b wants the volume 5 s later. The driver locks per volume.
   * `crash`: kubelet is killed while the unstage runs and a new life (pod-b already there) starts.
   */
  async function rewanted(on: boolean, crash: boolean, mode: 'Filesystem' | 'Block' = 'Filesystem') {
    const g = gates('CSIUnstageCompletesBeforeRestage', on);
    const node = new InMemoryNode({ volumeLocks: true });
    await mountedPod(node, g, mode);
    const marker = mode === 'Block' ? BLOCK_MARKER : MARKER;
    node.driver.inject({ method: 'NodeUnstageVolume', volumeId: 'vol-1', times: 1, delayMs: 180_000, clientTimeoutMs: 120_000 });
    const arrivals: string[] = [];
    let unstagesRunning = 0;
    let stageWhileUnstaging = 0;
    let markerWhileUnstaging = false;
    node.driver.observer = {
      arrived: (_seq, method) => {
        arrivals.push(method);
        if (method === 'NodeStageVolume' && unstagesRunning > 0) stageWhileUnstaging++;
        if (method === 'NodeUnstageVolume' && !node.driver.isBusy('vol-1')) unstagesRunning++;
      },
      finished: (c) => {
        if (c.method === 'NodeUnstageVolume' && c.outcome !== 'ABORTED') unstagesRunning--;
      },
    };
    const mark = node.driver.calls.length;
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => arrivals.includes('NodeUnstageVolume'));
    markerWhileUnstaging = await node.exists(marker);
    await node.steps(50);
    node.addPod('pod-b', ['pv-1']);
    if (crash) {
      node.crashKubelet();
      await node.startKubelet(g);
    }
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1 && unstagesRunning === 0, 600, 1000);
    return { node, mark, arrivals, stageWhileUnstaging, markerWhileUnstaging };
  }

  it('off: NodeStageVolume reaches the driver while the timed-out NodeUnstageVolume still runs there (refused ABORTED); no marker', async () => {
    const r = await rewanted(false, false);
    assert.ok(r.stageWhileUnstaging > 0, JSON.stringify(r.arrivals));
    assert.equal(r.markerWhileUnstaging, false);
    assert.ok(csiCalls(r.node, r.mark).includes('NodeStageVolume ABORTED'));
  });

  it('on: the unstage is marked on disk; NodeUnstageVolume is sent again (ABORTED while the old one runs) and NodeStageVolume only after it returned OK', async () => {
    const r = await rewanted(true, false);
    assert.equal(r.markerWhileUnstaging, true, 'marker written before NodeUnstageVolume');
    assert.equal(r.stageWhileUnstaging, 0, JSON.stringify(r.arrivals));
    const calls = csiCalls(r.node, r.mark);
    const firstStage = calls.indexOf('NodeStageVolume OK');
    assert.ok(firstStage > 0, JSON.stringify(calls));
    assert.ok(calls.slice(0, firstStage).includes('NodeUnstageVolume ABORTED'), JSON.stringify(calls));
    assert.equal(calls.slice(0, firstStage).filter((c) => c === 'NodeUnstageVolume OK').length, 2, 'the old unstage and the one that proves it ended');
    assert.equal(calls.filter((c) => c.startsWith('NodeStageVolume')).length, 1, 'no NodeStageVolume was refused');
    assert.equal(calls.at(-1), 'NodePublishVolume OK');
    assert.equal(await r.node.exists(MARKER), false, 'marker removed once NodeUnstageVolume returned OK');
    assert.equal(await r.node.exists(`${VOL_DIR('vol-1')}/vol_data.json`), true);
    assert.ok(r.node.logger.lines.some((l) => /found an unfinished NodeUnstageVolume/.test(l.msg)));
  });

  it('off, kubelet restarted while the unstage runs: the new life stages over it', async () => {
    const r = await rewanted(false, true);
    assert.ok(r.stageWhileUnstaging > 0, JSON.stringify(r.arrivals));
  });

  it('on, kubelet restarted while the unstage runs: the marker on disk makes the new life unstage first', async () => {
    const r = await rewanted(true, true);
    assert.equal(r.stageWhileUnstaging, 0, JSON.stringify(r.arrivals));
    const calls = csiCalls(r.node, r.mark);
    const firstStage = calls.indexOf('NodeStageVolume OK');
    assert.ok(firstStage > 0 && calls[firstStage - 1] === 'NodeUnstageVolume OK', JSON.stringify(calls));
    assert.equal(await r.node.exists(MARKER), false);
  });

  // Found by nodevol explore --generate (workload 416, the KEP-6058 gate alone, then every gate
  // on): the gate guarded the filesystem path only (scenarios/block-restaged-during-unstage.yaml).
  it('raw block, off: NodeStageVolume reaches the driver while the timed-out NodeUnstageVolume still runs there', async () => {
    const r = await rewanted(false, false, 'Block');
    assert.ok(r.stageWhileUnstaging > 0, JSON.stringify(r.arrivals));
    assert.equal(r.markerWhileUnstaging, false);
  });

  it('raw block, on: TearDownDevice marks the unstage beside the block data file; SetUpDevice unstages again first and stages only after its OK', async () => {
    const r = await rewanted(true, false, 'Block');
    assert.equal(r.markerWhileUnstaging, true, 'marker written before NodeUnstageVolume');
    assert.equal(r.stageWhileUnstaging, 0, JSON.stringify(r.arrivals));
    const calls = csiCalls(r.node, r.mark);
    const firstStage = calls.indexOf('NodeStageVolume OK');
    assert.ok(firstStage > 0 && calls.slice(0, firstStage).filter((c) => c === 'NodeUnstageVolume OK').length === 2, JSON.stringify(calls));
    assert.equal(calls.filter((c) => c.startsWith('NodeStageVolume')).length, 1, 'no NodeStageVolume was refused');
    assert.equal(await r.node.exists(BLOCK_MARKER), false, 'marker removed once NodeUnstageVolume returned OK');
  });

  it('raw block, on, kubelet restarted while the unstage runs: the marker on disk makes the new life unstage first', async () => {
    const r = await rewanted(true, true, 'Block');
    assert.equal(r.stageWhileUnstaging, 0, JSON.stringify(r.arrivals));
  });

  it('on: a symlink where the marker goes is not written through; NodeUnstageVolume is not sent', async () => {
    const g = gates('CSIUnstageCompletesBeforeRestage', true);
    const node = new InMemoryNode({ volumeLocks: true });
    await mountedPod(node, g);
    node.fs.writeRaw('/etc/precious', 'keep');
    await node.fs.symlink('/etc/precious', MARKER);
    const mark = node.driver.calls.length;
    node.cluster.deletePod('pod-a');
    await node.steps(20);
    assert.deepEqual(csiCalls(node, mark), ['NodeUnpublishVolume OK']);
    assert.equal(new TextDecoder().decode(await node.fs.readFile('/etc/precious', 100)), 'keep');
    assert.ok(node.driver.volume('vol-1') !== undefined, 'still staged');
  });

  it('on, plain unstage: the marker is gone with the volume dir; no extra call', async () => {
    const g = gates('CSIUnstageCompletesBeforeRestage', true);
    const node = new InMemoryNode({ volumeLocks: true });
    await mountedPod(node, g);
    const mark = node.driver.calls.length;
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => node.driver.volume('vol-1') === undefined);
    await node.steps(3);
    assert.deepEqual(csiCalls(node, mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    assert.equal(await node.exists(VOL_DIR('vol-1')), false);
  });
});
