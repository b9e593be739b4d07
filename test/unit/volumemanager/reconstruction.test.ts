// Reconstruction at kubelet start, in memory, every behaviour with CSIGlobalMountReconstruction off
// and on: the KEP-6058 global listing (the PR's reconstructGlobalVolumes and its
// reconstruct_global_test.go cases), the pod-directory walk and what the reconciler does next with
// what it found (reconstruct_test.go), CSI inline ephemeral volumes orphaned by a restart
// (kubernetes#108997), the reconstruct metrics and the KEP's
// V(2) log lines. Assertions read the driver's call log, the files, the mount table, the ASW and
// the volumesInUse written to the node; time moves only through the FakeClock (node.step).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { instrumentedRegistry } from '../../../src/csi/instrumented.js';
import { GrpcStatus, type CsiMethod } from '../../../src/ports/csi.js';
import type { FileSystem } from '../../../src/ports/fs.js';
import { makeEphemeralVolumeHandle, sha256Hex, type UniquePodName, type UniqueVolumeName } from '../../../src/layout/names.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { gates } from '../../support/hosts.js';
import { DRIVER, InMemoryNode, NODE, ROOT } from '../../support/inMemoryNode.js';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import { VolumePluginMgr } from '../../../src/volume/plugins.js';
import type { PersistentVolumeMode } from '../../../src/api/core.js';
import type { VolumeHost } from '../../../src/volume/volumeHost.js';
import { VolumeManager } from '../../../src/volumemanager/volumeManager.js';

const CSI_DIR = `${ROOT}/plugins/kubernetes.io/csi`;
const BLOCK_DIR = `${CSI_DIR}/volumeDevices`;
const VOL_DIR = (handle: string): string => `${CSI_DIR}/${DRIVER}/${sha256Hex(handle)}`;
const GM = (handle: string): string => `${VOL_DIR(handle)}/globalmount`;
const POD_VOL = (uid: string, name: string): string => `${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/${name}`;
const u = (s: string): UniqueVolumeName => s as UniqueVolumeName;
const pod = (s: string): UniquePodName => s as UniquePodName;
const nameOf = (handle: string): UniqueVolumeName => u(`kubernetes.io/csi/${DRIVER}^${handle}`);
const GATES = [false, true] as const;
const gateLabel = (on: boolean): string => `(gate ${on ? 'on' : 'off'})`;

const LISTED_LINE = 'Global mount with no pod directory is marked uncertain and added into the actual state';
const SPEC_FALLBACK_LINE = 'plugin.ConstructVolumeSpec recovered vol_data from global mount';
const UNMOUNTER_FALLBACK_LINE = 'unmounter recovered vol_data from global mount';

/** CSI calls other than capability probes, from index `from` of the driver's log: "<method> <outcome>". */
function csiCalls(node: InMemoryNode, from = 0, volumeId?: string): string[] {
  return node.driver.calls
    .slice(from)
    .filter((c) => c.method !== 'NodeGetCapabilities' && (volumeId === undefined || c.volumeId === volumeId))
    .map((c) => `${c.method} ${c.outcome}`);
}

/** The requests of one method since `from`. */
function requestsOf(node: InMemoryNode, method: CsiMethod, from = 0): Record<string, unknown>[] {
  return node.driver.calls.slice(from).filter((c) => c.method === method).map((c) => ({ ...c.request }));
}


function reconstructEvents(node: InMemoryNode): { source: string; failed: boolean }[] {
  return node.metrics.ofKind('reconstructVolumeOperation').map(({ source, failed }) => ({ source, failed }));
}

/**
 * Starts a kubelet like InMemoryNode.startKubelet, but over another FileSystem or plugin set
 * (the harness has no hook for either).
 */
async function startKubeletWith(
  node: InMemoryNode,
  gateOn: boolean,
  options: { fs?: FileSystem; plugins?: (host: VolumeHost) => VolumePluginMgr },
): Promise<VolumeManager> {
  const driver = node.driver;
  const host: VolumeHost = {
    layout: node.layout,
    realRootDir: ROOT,
    fs: options.fs ?? node.fs,
    features: gates(gateOn),
    logger: node.logger,
    clock: node.clock,
    mounter: node.mounter,
    csiDrivers: instrumentedRegistry({ client: (n) => (n === driver.name ? driver : undefined) }, node.metrics, node.clock),
    cluster: node.cluster,
    nodeName: NODE,
  };
  const plugins = options.plugins?.(host);
  const vm = new VolumeManager(plugins === undefined ? { host, metrics: node.metrics } : { host, metrics: node.metrics, plugins });
  node.vm = vm;
  await vm.start();
  return vm;
}

interface VolumeDef {
  readonly pv: string;
  readonly handle: string;
  readonly mode?: PersistentVolumeMode;
  readonly attached?: boolean;
}
interface PodDef {
  readonly uid: string;
  readonly pvs: readonly string[];
  readonly inline?: readonly string[];
}

/** Creates the volumes and pods, starts kubelet and waits until every pod volume is mounted. */
async function mountAll(node: InMemoryNode, gateOn: boolean, volumes: readonly VolumeDef[], pods: readonly PodDef[]): Promise<void> {
  for (const v of volumes) {
    node.addVolume(v.pv, v.handle, {
      ...(v.mode === undefined ? {} : { mode: v.mode }),
      ...(v.attached === undefined ? {} : { attached: v.attached }),
    });
  }
  for (const p of pods) node.addPod(p.uid, p.pvs, p.inline ?? []);
  await node.startKubelet(gateOn);
  const want = pods.reduce((n, p) => n + p.pvs.length + (p.inline?.length ?? 0), 0);
  await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === want);
  await node.steps(2);
}

/**
 * kubernetes#121937 up to the restart: pod-a's volume is unpublished, its NodeUnstageVolume hangs
 * and is lost to a node reboot (or a kubelet crash). No pod directory names the volume any more;
 * the staged directory and its global vol_data.json are still on disk.
 */
async function stagedWithoutPodDir(
  node: InMemoryNode,
  gateOn: boolean,
  options: { pv?: string; handle?: string; mode?: PersistentVolumeMode; restart?: 'reboot' | 'crash' } = {},
): Promise<UniqueVolumeName> {
  const pv = options.pv ?? 'pv-1';
  const handle = options.handle ?? 'vol-1';
  await mountAll(node, gateOn, [{ pv, handle, ...(options.mode === undefined ? {} : { mode: options.mode }) }], [{ uid: 'pod-a', pvs: [pv] }]);
  const hang = node.driver.inject({ method: 'NodeUnstageVolume', volumeId: handle, hang: true });
  node.cluster.deletePod('pod-a');
  await node.stepUntil(() => node.driver.hangingCalls() === 1);
  hang.remove();
  if ((options.restart ?? 'reboot') === 'reboot') node.reboot();
  else node.crashKubelet();
  assert.ok(node.driver.volume(handle)?.stagedAt !== undefined, 'the driver still has the volume staged');
  assert.equal(await node.exists(`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/${pv}`), false);
  return nameOf(handle);
}

describe('the global listing (reconstructGlobalVolumes, TestReconstructGlobalVolumes)', () => {
  for (const gateOn of GATES) {
    const g = gateOn ? 'gate on' : 'gate off';

    it(`a pod-less staged volume: ${gateOn ? 'registered as an uncertain device at the reported path and queued' : 'nothing is listed'} ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      const name = await stagedWithoutPodDir(node, gateOn);
      // A global file carrying the SELinux mount context MountDevice was given.
      const ctx = 'system_u:object_r:container_file_t:s0:c1,c2';
      node.fs.writeRaw(
        `${VOL_DIR('vol-1')}/vol_data.json`,
        `{"driverName":"${DRIVER}","seLinuxMountContext":"${ctx}","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n`,
      );
      const vm = await node.startKubelet(gateOn);
      if (!gateOn) {
        assert.deepEqual(vm.asw.getAttachedVolumes(), [], g);
        assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), []);
        assert.deepEqual(vm.reconstructor.failedReconstructions(), []);
        return;
      }
      assert.deepEqual(vm.asw.getAttachedVolumes(), [
        {
          volumeName: name,
          volumeSpec: { kind: 'persistent', readOnly: false, persistentVolume: { name: 'pv-1', volumeMode: 'Filesystem', csi: { driver: DRIVER, volumeHandle: 'vol-1' } } },
          pluginName: 'kubernetes.io/csi',
          pluginIsAttachable: false,
          attachability: 'Uncertain',
          deviceMountState: 'DeviceMountUncertain',
          devicePath: '',
          deviceMountPath: GM('vol-1'),
          seLinuxMountContext: ctx,
        },
      ]);
      assert.deepEqual(vm.asw.getAllMountedVolumes(), [], 'no pod is made up for it');
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), [name]);
    });

    it(`listing twice does not queue twice ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      const name = await stagedWithoutPodDir(node, gateOn);
      const vm = await node.startKubelet(gateOn);
      const want = gateOn ? [name] : [];
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), want);
      await vm.reconstructor.reconstructVolumes();
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), want, 'an already tracked volume is left alone');
      assert.equal(vm.asw.getAttachedVolumes().length, want.length);
    });

    it(`a volume a pod directory already accounted for is left alone by a second pass ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [{ uid: 'pod-a', pvs: ['pv-1'] }]);
      node.crashKubelet();
      const vm = await node.startKubelet(gateOn);
      const queue = vm.reconstructor.pendingNodeStatusUpdates();
      assert.deepEqual(queue, [nameOf('vol-1')]);
      await vm.reconstructor.reconstructVolumes();
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), queue);
      assert.deepEqual(
        vm.asw.getAllMountedVolumes().map((m) => `${m.podName} ${m.volumeMountState}`),
        ['pod-a VolumeMountUncertain'],
      );
    });

    it(`a plugin that cannot list its volumes (EACCES on the CSI plugin dir) is not fatal: the pod-dir walk still runs ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      // vol-2: staged with no pod dir (its unstage hangs, then kubelet crashes); vol-1: pod-a's,
      // mounted, and pod-a is deleted while kubelet is down.
      await mountAll(
        node,
        gateOn,
        [
          { pv: 'pv-1', handle: 'vol-1' },
          { pv: 'pv-2', handle: 'vol-2' },
        ],
        [
          { uid: 'pod-a', pvs: ['pv-1'] },
          { uid: 'pod-b', pvs: ['pv-2'] },
        ],
      );
      const hang = node.driver.inject({ method: 'NodeUnstageVolume', volumeId: 'vol-2', hang: true });
      node.cluster.deletePod('pod-b');
      await node.stepUntil(() => node.driver.hangingCalls() === 1);
      hang.remove();
      node.crashKubelet();
      node.cluster.deletePod('pod-a');

      const faulty = new FaultyFs(node.fs).failOn('readdir', CSI_DIR, 'EACCES');
      const mark = node.driver.calls.length;
      const vm = await startKubeletWith(node, gateOn, { fs: faulty });
      const listErrors = node.logger.lines.filter((l) => l.msg === 'Could not list global volumes');
      if (gateOn) {
        assert.equal(listErrors.length, 1);
        assert.equal(listErrors[0]?.severity, 'E');
        assert.match(String(listErrors[0]?.values['err']), /EACCES/);
        assert.ok(faulty.calls.includes(`readdir ${CSI_DIR}`));
      } else {
        assert.equal(listErrors.length, 0);
        assert.ok(!faulty.calls.includes(`readdir ${CSI_DIR}`), 'the gate off never lists');
      }
      // The pod-dir walk ran after the failed listing.
      assert.ok(faulty.calls.includes(`readdir ${ROOT}/pods`));
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), [nameOf('vol-1')]);
      assert.equal(vm.asw.volumeExists(nameOf('vol-2')), false, 'what the listing could not read is not registered');
      assert.equal(vm.asw.getVolumeMountState(nameOf('vol-1'), pod('pod-a')), 'VolumeMountUncertain');

      await node.stepUntil(() => !vm.asw.volumeExists(nameOf('vol-1')));
      await node.steps(20);
      assert.deepEqual(csiCalls(node, mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK'], 'only pod-a\'s volume is torn down');
      assert.ok(node.mounter.isMounted(GM('vol-2')), 'vol-2 stays staged, as with the gate off');
    });

    it(`the listing still counts when the pods dir cannot be read ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      const name = await stagedWithoutPodDir(node, gateOn);
      const faulty = new FaultyFs(node.fs).failOn('readdir', `${ROOT}/pods`, 'EACCES');
      const mark = node.driver.calls.length;
      const vm = await startKubeletWith(node, gateOn, { fs: faulty });
      assert.ok(node.logger.messages().includes('Cannot get volumes from disk, skip sync states for volume reconstruction'));
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), gateOn ? [name] : []);
      await node.steps(30);
      assert.deepEqual(csiCalls(node, mark), gateOn ? ['NodeUnstageVolume OK'] : []);
      assert.equal(await node.exists(VOL_DIR('vol-1')), !gateOn);
    });

    it(`a raw block volume staged with no pod dir ${gateOn ? 'is registered and unstaged through the block path' : 'leaks'} ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      const name = await stagedWithoutPodDir(node, gateOn, { pv: 'pv-b', handle: 'vol-b', mode: 'Block' });
      const mark = node.driver.calls.length;
      const vm = await node.startKubelet(gateOn);
      if (!gateOn) {
        assert.equal(vm.asw.volumeExists(name), false);
        await node.steps(30);
        assert.deepEqual(csiCalls(node, mark), [], 'NodeUnstageVolume is never called');
        assert.equal(await node.exists(`${BLOCK_DIR}/staging/pv-b`), true, 'the staging dir leaks');
        assert.equal(await node.exists(`${BLOCK_DIR}/pv-b/data/vol_data.json`), true);
        assert.equal(node.driver.volume('vol-b')?.stagedAt, `${BLOCK_DIR}/staging/pv-b`);
        assert.deepEqual(node.cluster.volumesInUse, []);
        return;
      }
      const av = vm.asw.getAttachedVolume(name);
      assert.ok(av);
      assert.equal(av.deviceMountState, 'DeviceMountUncertain');
      assert.equal(av.deviceMountPath, `${BLOCK_DIR}/pv-b/dev`);
      assert.equal(av.volumeSpec.kind === 'persistent' ? av.volumeSpec.persistentVolume.volumeMode : '', 'Block');
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), [name]);

      await node.stepUntil(() => !vm.asw.volumeExists(name));
      await node.step();
      assert.deepEqual(csiCalls(node, mark), ['NodeUnstageVolume OK'], 'unstaged once, no NodeUnpublishVolume');
      assert.deepEqual(requestsOf(node, 'NodeUnstageVolume', mark), [{ volumeId: 'vol-b', stagingTargetPath: `${BLOCK_DIR}/staging/pv-b` }]);
      assert.deepEqual(
        node.tree().filter((p) => p.startsWith(`${BLOCK_DIR}/`) && p !== `${BLOCK_DIR}/`),
        [`${BLOCK_DIR}/publish/`, `${BLOCK_DIR}/staging/`],
        'the volume dir, its data and dev dirs, and staging/pv-b are removed',
      );
      assert.equal(node.driver.volume('vol-b'), undefined);
      assert.ok(node.cluster.volumesInUseHistory.some((h) => h.includes(name)), 'reported in use while registered');
      assert.deepEqual(node.cluster.volumesInUse, []);
    });

    it(`a block volume whose plugin has no block mapper is not registered ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      const name = await stagedWithoutPodDir(node, gateOn, { pv: 'pv-b', handle: 'vol-b', mode: 'Block' });
      const vm = await startKubeletWith(node, gateOn, {
        plugins: (host) => {
          const csi = new CsiPlugin(host);
          // The CSI plugin with its BlockVolumePlugin side switched off.
          const noMapper = Object.create(csi, { blockVolume: { value: false } }) as CsiPlugin;
          return new VolumePluginMgr([noMapper]);
        },
      });
      assert.equal(vm.asw.volumeExists(name), false);
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), []);
      const skipped = node.logger.lines.filter((l) => l.msg === 'Skipping a global block volume: the plugin has no block mapper');
      assert.equal(skipped.length, gateOn ? 1 : 0);
    });

    it(`a volume found both ways (pod dir and listing) is queued once and torn down once ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [{ uid: 'pod-a', pvs: ['pv-1'] }]);
      node.crashKubelet();
      node.cluster.deletePod('pod-a');
      const mark = node.driver.calls.length;
      const vm = await node.startKubelet(gateOn);
      const name = nameOf('vol-1');
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), [name]);
      const av = vm.asw.getAttachedVolume(name);
      assert.equal(av?.deviceMountState, 'DeviceMountUncertain');
      assert.equal(av?.deviceMountPath, GM('vol-1'));
      assert.equal(vm.asw.getVolumeMountState(name, pod('pod-a')), 'VolumeMountUncertain');
      await node.stepUntil(() => !vm.asw.volumeExists(name));
      await node.steps(5);
      assert.deepEqual(csiCalls(node, mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
      assert.deepEqual(node.mounter.entries().map((e) => e.mountPoint), ['/']);
      assert.equal(await node.exists(VOL_DIR('vol-1')), false);
      assert.equal(await node.exists(POD_VOL('pod-a', 'pv-1')), false);
    });
  }
});

describe('reconstruction from pod directories and what follows (reconstruct_test.go)', () => {
  for (const gateOn of GATES) {
    it(`two pods using the same volume, both deleted: 0 mounted, 2 uncertain pod mounts, queued per pod volume ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [
        { uid: 'pod-a', pvs: ['pv-1'] },
        { uid: 'pod-b', pvs: ['pv-1'] },
      ]);
      node.crashKubelet();
      node.cluster.deletePod('pod-a').deletePod('pod-b');
      const vm = await node.startKubelet(gateOn);
      const name = nameOf('vol-1');
      assert.equal(vm.asw.getMountedVolumes().length, 0);
      assert.deepEqual(
        vm.asw.getAllMountedVolumes().map((m) => `${m.podName} ${m.volumeName} ${m.volumeMountState}`),
        [`pod-a ${name} VolumeMountUncertain`, `pod-b ${name} VolumeMountUncertain`],
      );
      assert.equal(vm.asw.isVolumeReconstructed(name, pod('pod-a')), true);
      assert.equal(vm.asw.isVolumeReconstructed(name, pod('pod-b')), true);
      // Gate off: one entry per pod volume (kubelet assigns the list). Gate on: the listing queued
      // the volume first, and the pod-dir walk does not queue it again.
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), gateOn ? [name] : [name, name]);
      assert.deepEqual(vm.reconstructor.failedReconstructions(), []);
    });

    it(`an unknown plugin dir (pods/<uid>/volumes/missing-plugin/pvc-abcdef) fails reconstruction and queues nothing ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await node.fs.mkdir(`${ROOT}/pods/pod-x/volumes/missing-plugin/pvc-abcdef`, { recursive: true, mode: 0o750 });
      const vm = await node.startKubelet(gateOn);
      assert.deepEqual(
        vm.reconstructor.failedReconstructions().map((v) => ({ podName: v.podName, volumeSpecName: v.volumeSpecName, pluginName: v.pluginName })),
        [{ podName: 'pod-x', volumeSpecName: 'pvc-abcdef', pluginName: 'missing-plugin' }],
      );
      assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), []);
      assert.deepEqual(vm.asw.getAttachedVolumes(), []);
      assert.deepEqual(reconstructEvents(node), [{ source: 'pod-local', failed: true }]);
      assert.ok(node.logger.messages().includes('Could not construct volume information'));
      // cleanOrphanVolumes: no plugin to build an unmounter with; the one cleanup fails, once.
      await node.steps(10);
      assert.deepEqual(vm.reconstructor.failedReconstructions(), []);
      assert.deepEqual(node.metrics.ofKind('forceCleanedFailedVolumeOperation').map((e) => e.failed), [true]);
      assert.deepEqual(csiCalls(node), []);
    });

    it(`cleanOrphanVolumes leaves a failed volume the DSW wants alone: no NodeUnpublishVolume, it is mounted again ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [{ uid: 'pod-a', pvs: ['pv-1'] }]);
      // The pod-local file is lost and the node reboots: no bind mount is left to fall back through.
      node.reboot();
      await node.fs.unlink(`${POD_VOL('pod-a', 'pv-1')}/vol_data.json`);
      const mark = node.driver.calls.length;
      const vm = await node.startKubelet(gateOn);
      assert.deepEqual(vm.reconstructor.failedReconstructions().map((v) => `${v.podName}/${v.volumeSpecName}`), ['pod-a/pv-1']);
      await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
      await node.steps(10);
      assert.deepEqual(vm.reconstructor.failedReconstructions(), [], 'the failed list is cleared');
      assert.deepEqual(node.metrics.ofKind('forceCleanedFailedVolumeOperation'), [], 'no cleanup was attempted');
      assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume OK']);
      assert.equal(await node.exists(`${POD_VOL('pod-a', 'pv-1')}/vol_data.json`), true, 'SetUp wrote the pod-local file again');
    });

    it(`cleanOrphanVolumes cleans a failed volume the DSW does not want: exactly one TearDown attempt, never retried ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      // A pod-local file kubelet can read but not reconstruct from (empty volume handle): the
      // device mount path cannot be computed, but NewUnmounter can still be built.
      const dir = POD_VOL('pod-x', 'pv-x');
      node.fs.writeRaw(
        `${dir}/vol_data.json`,
        `{"driverName":"${DRIVER}","nodeName":"${NODE}","specVolID":"pv-x","volumeHandle":"","volumeLifecycleMode":"Persistent"}\n`,
      );
      await node.fs.mkdir(`${dir}/mount`, { recursive: false, mode: 0o750 });
      const vm = await node.startKubelet(gateOn);
      assert.deepEqual(vm.reconstructor.failedReconstructions().map((v) => `${v.podName}/${v.volumeSpecName}`), ['pod-x/pv-x']);
      await node.stepUntil(() => vm.reconstructor.failedReconstructions().length === 0);
      await node.steps(40);
      assert.deepEqual(csiCalls(node), ['NodeUnpublishVolume INVALID_ARGUMENT'], 'one TearDown, not retried');
      assert.deepEqual(requestsOf(node, 'NodeUnpublishVolume'), [{ volumeId: '', targetPath: `${dir}/mount` }]);
      assert.deepEqual(node.metrics.ofKind('forceCleanedFailedVolumeOperation').map((e) => e.failed), [false], 'generated fine; TearDown failed later');
      assert.deepEqual(
        node.metrics.ofKind('storageOperation').map((e) => `${e.volumePlugin} ${e.operationName} ${e.status}`),
        ['kubernetes.io/csi volume_unmount fail-unknown'],
      );
      assert.equal(await node.exists(`${dir}/vol_data.json`), true, 'what the failed TearDown left stays');
    });

    it(`a reconstructed volume whose pod is in the DSW is mounted again: NodeStage 1×, NodePublish 1×, no teardown ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [{ uid: 'pod-a', pvs: ['pv-1'] }]);
      node.crashKubelet();
      const mark = node.driver.calls.length;
      const vm = await node.startKubelet(gateOn);
      const name = nameOf('vol-1');
      assert.equal(vm.asw.getVolumeMountState(name, pod('pod-a')), 'VolumeMountUncertain');
      await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
      await node.steps(20);
      assert.deepEqual(csiCalls(node, mark), ['NodeStageVolume OK', 'NodePublishVolume OK']);
      assert.equal(vm.asw.getVolumeMountState(name, pod('pod-a')), 'VolumeMounted');
      assert.equal(vm.asw.isVolumeReconstructed(name, pod('pod-a')), false);
      assert.equal(vm.asw.getAttachedVolume(name)?.deviceMountState, 'DeviceGloballyMounted');
      // The driver is idempotent: nothing is mounted twice.
      assert.deepEqual(node.mounter.entries().map((e) => e.mountPoint), ['/', GM('vol-1'), `${POD_VOL('pod-a', 'pv-1')}/mount`]);
      assert.deepEqual(node.cluster.volumesInUse, [name]);
    });

    it(`a reconstructed volume whose SetUp fails finally (NodePublishVolume INVALID_ARGUMENT) stays uncertain ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [{ uid: 'pod-a', pvs: ['pv-1'] }]);
      node.crashKubelet();
      node.driver.inject({ method: 'NodePublishVolume', code: GrpcStatus.INVALID_ARGUMENT });
      const mark = node.driver.calls.length;
      const vm = await node.startKubelet(gateOn);
      const name = nameOf('vol-1');
      await node.stepUntil(() => node.driver.callsOf('NodePublishVolume').slice(-3).filter((c) => c.outcome === 'INVALID_ARGUMENT').length >= 3, 400);
      assert.equal(vm.asw.getAllMountedVolumes().length, 1, 'possibly mounted');
      assert.equal(vm.asw.getMountedVolumes().length, 0, 'not mounted');
      assert.equal(vm.asw.getVolumeMountState(name, pod('pod-a')), 'VolumeMountUncertain');
      assert.equal(vm.asw.isVolumeReconstructed(name, pod('pod-a')), true);
      const calls = csiCalls(node, mark);
      assert.ok(!calls.some((c) => c.startsWith('NodeUnpublishVolume') || c.startsWith('NodeUnstageVolume')), JSON.stringify(calls));
      assert.ok(node.mounter.isMounted(`${POD_VOL('pod-a', 'pv-1')}/mount`), 'the pod mount is left where it is');
    });

    it(`a reconstructed block volume whose map fails stays uncertain, its device mount path the global map path ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-b', handle: 'vol-b', mode: 'Block' }], [{ uid: 'pod-a', pvs: ['pv-b'] }]);
      node.crashKubelet();
      node.driver.inject({ method: 'NodePublishVolume', code: GrpcStatus.INVALID_ARGUMENT });
      const mark = node.driver.calls.length;
      const vm = await node.startKubelet(gateOn);
      const name = nameOf('vol-b');
      assert.equal(vm.asw.getAttachedVolume(name)?.deviceMountPath, `${BLOCK_DIR}/pv-b/dev`);
      await node.stepUntil(() => node.driver.callsOf('NodePublishVolume').filter((c) => c.outcome === 'INVALID_ARGUMENT').length >= 2, 400);
      assert.equal(vm.asw.getAllMountedVolumes().length, 1);
      assert.equal(vm.asw.getMountedVolumes().length, 0);
      assert.equal(vm.asw.getVolumeMountState(name, pod('pod-a')), 'VolumeMountUncertain');
      assert.equal(vm.asw.getAttachedVolume(name)?.deviceMountPath, `${BLOCK_DIR}/pv-b/dev`);
      const calls = csiCalls(node, mark);
      assert.ok(!calls.some((c) => c.startsWith('NodeUnpublishVolume') || c.startsWith('NodeUnstageVolume')), JSON.stringify(calls));
    });

    it(`the DSW not yet populated (pods cannot be listed): no unmount at all until it answers, then the teardown ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [{ uid: 'pod-a', pvs: ['pv-1'] }]);
      node.crashKubelet();
      node.cluster.deletePod('pod-a');
      const cluster = node.cluster;
      const listPods = cluster.listPods.bind(cluster);
      cluster.listPods = () => Promise.reject(new Error('the server was unable to return a response in the time allotted'));
      const mark = node.driver.calls.length;
      const vm = await node.startKubelet(gateOn);
      const name = nameOf('vol-1');
      await node.steps(50);
      assert.deepEqual(csiCalls(node, mark), [], 'nothing unpublished or unstaged');
      assert.equal(vm.populator.hasAddedPods(), false);
      assert.equal(vm.reconciler.statesHaveBeenSynced(), true, 'the node status was read');
      assert.equal(vm.asw.getVolumeMountState(name, pod('pod-a')), 'VolumeMountUncertain');
      assert.deepEqual(node.cluster.volumesInUse, [name], 'still reported in use');

      cluster.listPods = listPods;
      await node.stepUntil(() => !vm.asw.volumeExists(name));
      await node.step();
      assert.deepEqual(csiCalls(node, mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
      assert.deepEqual(node.cluster.volumesInUse, []);
    });
  }
});

describe('CSI inline ephemeral volumes (kubernetes#108997)', () => {
  // Kubelet sends an ephemeral NodePublishVolume with no staging path, which the fake driver (like
  // the CSI spec) refuses when it advertises STAGE_UNSTAGE_VOLUME: inline drivers are typically
  // publish-only. For a PV, kubelet's MountDevice would still create the global directory and its
  // vol_data.json without that capability, so "nothing under plugins/" shows it never ran.
  const inlineNode = (): InMemoryNode => new InMemoryNode({ capabilities: [] });
  for (const gateOn of GATES) {
    it(`an inline volume is mounted under kubernetes.io/csi/<podUID>-<name>, never staged, never reported in use ${gateLabel(gateOn)}`, async () => {
      const node = inlineNode();
      await mountAll(node, gateOn, [], [{ uid: 'pod-a', pvs: [], inline: ['scratch'] }]);
      const vm = node.kubelet;
      const name = u('kubernetes.io/csi/pod-a-scratch');
      const av = vm.asw.getAttachedVolume(name);
      assert.ok(av);
      assert.equal(av.attachability, 'False');
      assert.equal(av.deviceMountState, 'DeviceNotMounted');
      assert.deepEqual(csiCalls(node), ['NodePublishVolume OK']);
      const [publish] = requestsOf(node, 'NodePublishVolume');
      assert.equal(publish?.['volumeId'], makeEphemeralVolumeHandle('pod-a', 'scratch'));
      assert.equal(publish?.['stagingTargetPath'], '');
      assert.equal(publish?.['targetPath'], `${POD_VOL('pod-a', 'scratch')}/mount`);
      // The test driver's CSIDriver has podInfoOnMount (as inline-capable drivers do): pod keys.
      assert.deepEqual(publish?.['volumeContext'], {
        'csi.storage.k8s.io/pod.name': 'pod-pod-a',
        'csi.storage.k8s.io/pod.namespace': 'default',
        'csi.storage.k8s.io/pod.uid': 'pod-a',
        'csi.storage.k8s.io/serviceAccount.name': '',
        'csi.storage.k8s.io/ephemeral': 'true',
      });
      const podLocal = new TextDecoder().decode(await node.fs.readFile(`${POD_VOL('pod-a', 'scratch')}/vol_data.json`, 1 << 16));
      assert.match(podLocal, /"volumeLifecycleMode":"Ephemeral"/);
      assert.deepEqual(node.tree().filter((p) => p.startsWith(`${CSI_DIR}/`)), [], 'no global mount, no plugin dir entry');
      await node.steps(5);
      assert.ok(node.cluster.volumesInUseHistory.length > 0);
      assert.ok(node.cluster.volumesInUseHistory.every((h) => h.length === 0), JSON.stringify(node.cluster.volumesInUseHistory));
    });

    it(`pod deleted + kubelet crash: reconstructed under the pod-qualified name; NodeUnpublishVolume ABORTED twice is retried with backoff; the dir goes only after success ${gateLabel(gateOn)}`, async () => {
      const node = inlineNode();
      await mountAll(node, gateOn, [], [{ uid: 'pod-a', pvs: [], inline: ['scratch'] }]);
      node.crashKubelet();
      node.cluster.deletePod('pod-a');
      node.driver.inject({ method: 'NodeUnpublishVolume', code: GrpcStatus.ABORTED, times: 2 });
      const mark = node.driver.calls.length;
      const vm = await node.startKubelet(gateOn);
      const name = u('kubernetes.io/csi/pod-a-scratch');
      assert.deepEqual(vm.reconstructor.failedReconstructions(), [], 'reconstruction succeeds (the #108997 fix)');
      assert.ok(!node.logger.messages().includes('Could not construct volume information'));
      assert.equal(vm.asw.getVolumeMountState(name, pod('pod-a')), 'VolumeMountUncertain');
      assert.equal(vm.asw.isVolumeReconstructed(name, pod('pod-a')), true);
      assert.equal(vm.asw.getAttachedVolume(name)?.deviceMountState, 'DeviceNotMounted', 'no device to unstage');
      assert.deepEqual(reconstructEvents(node), [{ source: 'pod-local', failed: false }]);

      const dirWhileFailing: boolean[] = [];
      let seenFailures = 0;
      await node.stepUntil(() => {
        const unpublishes = node.driver.calls.slice(mark).filter((c) => c.method === 'NodeUnpublishVolume');
        const failures = unpublishes.filter((c) => c.outcome !== 'OK').length;
        if (failures > seenFailures && unpublishes.at(-1)?.outcome !== 'OK') {
          seenFailures = failures;
          dirWhileFailing.push(node.tree().includes(`${POD_VOL('pod-a', 'scratch')}/vol_data.json`) && node.mounter.isMounted(`${POD_VOL('pod-a', 'scratch')}/mount`));
        }
        return !vm.asw.volumeExists(name);
      });
      await node.step();
      const unpublishes = node.driver.calls.slice(mark).filter((c) => c.method === 'NodeUnpublishVolume');
      assert.deepEqual(unpublishes.map((c) => c.outcome), ['ABORTED', 'ABORTED', 'OK']);
      const gaps = unpublishes.slice(1).map((c, i) => c.atMs - (unpublishes[i]?.atMs ?? 0));
      assert.ok((gaps[0] ?? 0) >= 500 && (gaps[1] ?? 0) >= 1000, `exponential backoff between attempts: ${JSON.stringify(gaps)}`);
      assert.deepEqual(dirWhileFailing, [true, true], 'the pod volume dir and its mount stay while NodeUnpublishVolume fails');
      assert.equal(await node.exists(POD_VOL('pod-a', 'scratch')), false, 'removed after the success');
      assert.deepEqual(csiCalls(node, mark).filter((c) => !c.startsWith('NodeUnpublishVolume')), [], 'never staged, never unstaged');
      assert.deepEqual(node.mounter.entries().map((e) => e.mountPoint), ['/']);
      assert.ok(node.cluster.volumesInUseHistory.every((h) => !h.includes(name)));
    });
  }
});

describe('reconstruct_volume_operations (reconstruct_common.go reconstructVolume: one count per pod-directory candidate)', () => {
  for (const gateOn of GATES) {
    it(`a pod-directory reconstruction counts as source pod-local ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [{ uid: 'pod-a', pvs: ['pv-1'] }]);
      assert.deepEqual(reconstructEvents(node), [], 'nothing reconstructed on a first start');
      node.crashKubelet();
      await node.startKubelet(gateOn);
      assert.deepEqual(reconstructEvents(node).filter((e) => e.source === 'pod-local'), [{ source: 'pod-local', failed: false }]);
    });

    it(`a listed volume with no pod directory counts nothing (KEP-6058's alpha reconstructGlobalVolume counts nothing) ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await stagedWithoutPodDir(node, gateOn);
      await node.startKubelet(gateOn);
      assert.deepEqual(reconstructEvents(node), []);
    });
  }
});

describe('KEP-6058 V(2) log lines', () => {
  function linesOf(node: InMemoryNode, msg: string): { level: number; severity: string; values: Readonly<Record<string, unknown>> }[] {
    return node.logger.lines.filter((l) => l.msg === msg).map(({ level, severity, values }) => ({ level, severity, values }));
  }

  for (const gateOn of GATES) {
    it(`"${LISTED_LINE}" for a staged volume no pod dir names ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      const name = await stagedWithoutPodDir(node, gateOn);
      await node.startKubelet(gateOn);
      assert.deepEqual(
        linesOf(node, LISTED_LINE),
        gateOn ? [{ level: 2, severity: 'I', values: { volumeName: name, deviceMountPath: GM('vol-1') } }] : [],
      );
      assert.deepEqual(linesOf(node, SPEC_FALLBACK_LINE), []);
      assert.deepEqual(linesOf(node, UNMOUNTER_FALLBACK_LINE), []);
    });

    it(`"${SPEC_FALLBACK_LINE}" and "${UNMOUNTER_FALLBACK_LINE}" when the pod-local file is lost ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [{ uid: 'pod-a', pvs: ['pv-1'] }]);
      node.crashKubelet();
      await node.fs.unlink(`${POD_VOL('pod-a', 'pv-1')}/vol_data.json`);
      node.cluster.deletePod('pod-a');
      const vm = await node.startKubelet(gateOn);
      const spec = linesOf(node, SPEC_FALLBACK_LINE);
      assert.deepEqual(
        spec,
        gateOn ? [{ level: 2, severity: 'I', values: { volumeName: 'pv-1', volumePath: POD_VOL('pod-a', 'pv-1'), globalMountDir: VOL_DIR('vol-1') } }] : [],
      );
      assert.deepEqual(linesOf(node, UNMOUNTER_FALLBACK_LINE), [], 'nothing unmounted yet');
      await node.steps(30);
      const unmounter = linesOf(node, UNMOUNTER_FALLBACK_LINE);
      if (gateOn) {
        assert.ok(unmounter.length >= 1);
        assert.ok(unmounter.every((l) => l.level === 2 && l.severity === 'I' && l.values['globalMountDir'] === VOL_DIR('vol-1')));
        assert.equal(vm.asw.volumeExists(nameOf('vol-1')), false, 'torn down');
      } else {
        assert.deepEqual(unmounter, []);
      }
    });

    it(`an intact restart logs neither fallback line ${gateLabel(gateOn)}`, async () => {
      const node = new InMemoryNode();
      await mountAll(node, gateOn, [{ pv: 'pv-1', handle: 'vol-1' }], [{ uid: 'pod-a', pvs: ['pv-1'] }]);
      node.crashKubelet();
      node.cluster.deletePod('pod-a');
      const vm = await node.startKubelet(gateOn);
      await node.stepUntil(() => !vm.asw.volumeExists(nameOf('vol-1')));
      assert.deepEqual(linesOf(node, SPEC_FALLBACK_LINE), []);
      assert.deepEqual(linesOf(node, UNMOUNTER_FALLBACK_LINE), []);
    });
  }
});
