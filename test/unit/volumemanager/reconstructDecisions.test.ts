// The decisions of the kubelet copy's reconstruction (reconstruct.go / reconstruct_common.go and the
// KEP-6058 listing), each with its outcome: what enters the actual state of the world and in which
// state, what is queued for the node-status update, which candidates fail, which branch logs, and
// the cleanup of the candidates that failed. The error paths run over an actual state, plugin or
// executor with one method replaced (intercept) that throws; the Reconstructor is built here with
// the upstream hooks, over the in-memory node's files, mounts and API server.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PersistentVolumeMode } from '../../../src/api/core.js';
import { CSI_PLUGIN_NAME, sha256Hex, type UniquePodName, type UniqueVolumeName } from '../../../src/layout/names.js';
import { AlreadyExistsError } from '../../../src/operationexecutor/nestedPendingOperations.js';
import type { OperationExecutor } from '../../../src/operationexecutor/operationExecutor.js';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import { VolumePluginMgr, type GlobalVolume, type PodRef, type VolumePlugin } from '../../../src/volume/plugins.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import type { ActualStateOfWorld } from '../../../src/volumemanager/cache/actualStateOfWorld.js';
import type { FileSystem } from '../../../src/ports/fs.js';
import { Reconstructor } from '../../../src/volumemanager/reconciler/reconstruct.js';
import { ReconstructionError, reconstructVolumeSpec } from '../../../src/volumemanager/reconciler/reconstructVolume.js';
import { upstreamReconstructHooks, type ReconstructHooks } from '../../../src/volumemanager/reconciler/reconstructHooks.js';
import { VolumeManager } from '../../../src/volumemanager/volumeManager.js';
import { gates } from '../../support/hosts.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { failedPodVolumeDir, intercept } from '../../support/reconstructionFixtures.js';

const CSI_DIR = `${ROOT}/plugins/kubernetes.io/csi`;
const nameOf = (handle: string): UniqueVolumeName => `${CSI_PLUGIN_NAME}/${DRIVER}^${handle}` as UniqueVolumeName;
const pod = (s: string): UniquePodName => s as UniquePodName;

interface Built {
  readonly reconstructor: Reconstructor;
  /** The actual state itself (the reconstructor may see it through an intercept). */
  readonly asw: ActualStateOfWorld;
}

interface BuildOptions {
  /** Methods of the actual state replaced for the reconstructor (given the real one). */
  readonly asw?: (asw: ActualStateOfWorld) => Partial<ActualStateOfWorld>;
  /** Methods of the CSI plugin replaced (given the real one). */
  readonly csi?: (csi: CsiPlugin) => Partial<CsiPlugin>;
  /** Methods of the operation executor replaced. */
  readonly executor?: Partial<OperationExecutor>;
  /** The files the reconstructor reads (the node's by default). */
  readonly fs?: FileSystem;
  /** The reconstruction hooks (kubelet's by default). */
  readonly hooks?: ReconstructHooks;
}

/**
 * A kubelet's Reconstructor with kubelet's (upstream) hooks over the node as it is on disk now
 * (with a pods dir); the node's log lines start with it.
 */
async function build(node: InMemoryNode, gateOn: boolean, o: BuildOptions = {}): Promise<Built> {
  await node.fs.mkdir(`${ROOT}/pods`, { recursive: true, mode: 0o750 });
  node.logger.lines.splice(0);
  const host = volumeHostOf(node, { kep: gateOn });
  const csi = new CsiPlugin(host);
  const plugin = o.csi === undefined ? csi : intercept(csi, o.csi(csi));
  const vm = new VolumeManager({ host, metrics: node.metrics, plugins: new VolumePluginMgr([plugin]) });
  const reconstructor = new Reconstructor({
    fs: o.fs ?? node.fs,
    layout: node.layout,
    realRootDir: ROOT,
    plugins: vm.plugins,
    asw: o.asw === undefined ? vm.asw : intercept(vm.asw, o.asw(vm.asw)),
    dsw: vm.dsw,
    executor: o.executor === undefined ? vm.executor : intercept(vm.executor, o.executor),
    cluster: node.cluster,
    features: gates(gateOn),
    logger: node.logger,
    metrics: node.metrics,
    ...(o.hooks === undefined ? {} : { hooks: o.hooks }),
  });
  return { reconstructor, asw: vm.asw };
}

/** pod-a's volume pv-1 (handle vol-1) mounted, then kubelet crashes: the pod dir and the global mount stay. */
async function mountedThenCrashed(node: InMemoryNode, gateOn: boolean, mode: PersistentVolumeMode = 'Filesystem'): Promise<void> {
  node.addVolume('pv-1', 'vol-1', { mode });
  node.addPod('pod-a', ['pv-1'], []);
  await node.startKubelet(gateOn);
  await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
  await node.steps(2);
  node.crashKubelet();
}

/** A volume the listing reports (not on disk: the plugin's listGlobalVolumes is replaced). */
function listed(handle: string, mode: PersistentVolumeMode): GlobalVolume {
  return { spec: constructPVSourceSpec(`pv-${handle}`, DRIVER, handle, mode), seLinuxMountContext: '', deviceMountPath: `/listed/${handle}`, volumeMode: mode };
}

function linesOf(node: InMemoryNode, msg: string): { level: number; severity: string; values: Readonly<Record<string, unknown>> }[] {
  return node.logger.lines.filter((l) => l.msg === msg).map(({ level, severity, values }) => ({ level, severity, values }));
}

function errorMessages(node: InMemoryNode): string[] {
  return node.logger.lines.filter((l) => l.severity === 'E').map((l) => l.msg);
}

const boom = (what: string) => (): never => {
  throw new Error(`${what} failed`);
};

describe('the global listing decides what it registers (reconstructGlobalVolume)', () => {
  it('a Filesystem volume its plugin cannot device mount is skipped: not registered, not queued, said at V(4)', async () => {
    const node = new InMemoryNode();
    const { reconstructor, asw } = await build(node, true, {
      csi: () => ({ listGlobalVolumes: () => Promise.resolve([listed('fs-1', 'Filesystem')]), canDeviceMount: () => false }),
    });
    await reconstructor.reconstructVolumes();
    assert.deepEqual(asw.getAttachedVolumes(), []);
    assert.deepEqual(reconstructor.pendingNodeStatusUpdates(), []);
    assert.deepEqual(linesOf(node, 'Skipping a global volume its plugin cannot device mount'), [{ level: 4, severity: 'I', values: { deviceMountPath: '/listed/fs-1' } }]);
  });

  it('a Filesystem volume its plugin can device mount is registered (the device-mount check is for Filesystem only)', async () => {
    const node = new InMemoryNode();
    const asked: string[] = [];
    const { reconstructor, asw } = await build(node, true, {
      csi: (csi) => ({
        listGlobalVolumes: () => Promise.resolve([listed('fs-1', 'Filesystem'), listed('blk-1', 'Block')]),
        canDeviceMount: (spec) => {
          asked.push(spec.kind === 'persistent' ? spec.persistentVolume.name : '');
          return csi.canDeviceMount(spec);
        },
      }),
    });
    await reconstructor.reconstructVolumes();
    assert.deepEqual(asw.getAttachedVolumes().map((v) => `${v.volumeName} ${v.deviceMountState} ${v.deviceMountPath}`), [
      `${nameOf('blk-1')} DeviceMountUncertain /listed/blk-1`,
      `${nameOf('fs-1')} DeviceMountUncertain /listed/fs-1`,
    ]);
    assert.deepEqual(asked, ['pv-fs-1'], 'a Block volume is not asked about');
    assert.deepEqual(reconstructor.pendingNodeStatusUpdates(), [nameOf('fs-1'), nameOf('blk-1')]);
  });

  it('a Block volume whose plugin has no block mapper is skipped, said at V(4) with the plugin and the path', async () => {
    const node = new InMemoryNode();
    const { reconstructor, asw } = await build(node, true, {
      csi: () => ({ listGlobalVolumes: () => Promise.resolve([listed('blk-1', 'Block')]), blockVolume: false } as unknown as Partial<CsiPlugin>),
    });
    await reconstructor.reconstructVolumes();
    assert.deepEqual(asw.getAttachedVolumes(), []);
    assert.deepEqual(reconstructor.pendingNodeStatusUpdates(), []);
    assert.deepEqual(linesOf(node, 'Skipping a global block volume: the plugin has no block mapper'), [
      { level: 4, severity: 'I', values: { plugin: CSI_PLUGIN_NAME, deviceMountPath: '/listed/blk-1' } },
    ]);
  });

  it('a volume already in the actual state is skipped, said at V(4) with its name', async () => {
    const node = new InMemoryNode();
    const { reconstructor } = await build(node, true, { csi: () => ({ listGlobalVolumes: () => Promise.resolve([listed('fs-1', 'Filesystem')]) }) });
    await reconstructor.reconstructVolumes();
    const line = 'Global mount is already in actual state, skipping';
    assert.deepEqual(linesOf(node, line), []);
    await reconstructor.reconstructVolumes();
    assert.deepEqual(linesOf(node, line), [{ level: 4, severity: 'I', values: { volumeName: nameOf('fs-1') } }]);
    assert.deepEqual(reconstructor.pendingNodeStatusUpdates(), [nameOf('fs-1')], 'queued once');
  });

  for (const [what, asw, error, why] of [
    ['adding the volume to the actual state fails', { addAttachUncertainReconstructedVolume: boom('add') }, 'Could not add a global volume to the actual state', 'not registered'],
    ['marking its device uncertain fails', { markDeviceAsUncertain: boom('mark') }, 'Could not mark a global volume device as uncertain', 'taken out again (no pod, no device reads as one to detach)'],
  ] as const) {
    it(`${what}: ${why}, not queued, that one error said`, async () => {
      const node = new InMemoryNode();
      const built = await build(node, true, {
        csi: () => ({ listGlobalVolumes: () => Promise.resolve([listed('fs-1', 'Filesystem')]) }),
        asw: () => asw,
      });
      await built.reconstructor.reconstructVolumes();
      assert.equal(built.asw.volumeExists(nameOf('fs-1')), false);
      assert.deepEqual(built.reconstructor.pendingNodeStatusUpdates(), []);
      assert.deepEqual(errorMessages(node), [error]);
    });
  }

  it('a listed volume a pod directory also names is said at V(4); one no pod directory names is not', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, true);
    const { reconstructor } = await build(node, true, {
      csi: (csi) => ({ listGlobalVolumes: async () => [...(await csi.listGlobalVolumes()), listed('fs-2', 'Filesystem')] }),
    });
    await reconstructor.reconstructVolumes();
    assert.deepEqual(linesOf(node, 'Global mount also found through a pod directory'), [
      { level: 4, severity: 'I', values: { volumeName: nameOf('vol-1'), deviceMountPath: `${CSI_DIR}/${DRIVER}/${sha256Hex('vol-1')}/globalmount` } },
    ]);
  });
});

describe('the pod-directory walk decides what enters the actual state (reconstructVolume, updateStates)', () => {
  it('a pod volume enters as an uncertain pod mount (outer name empty) of an uncertain device, said at V(2); the mounter is built for a pod with only its UID', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, false);
    const pods: PodRef[] = [];
    const { reconstructor, asw } = await build(node, false, {
      csi: (csi) => ({
        newMounter: (spec, p) => {
          pods.push(p);
          return csi.newMounter(spec, p);
        },
      }),
    });
    await reconstructor.reconstructVolumes();
    assert.deepEqual(pods, [{ uid: 'pod-a', namespace: '', name: '' }]);
    assert.deepEqual(
      asw.getAllMountedVolumes().map((m) => ({ podName: m.podName, inner: m.innerVolumeSpecName, outer: m.outerVolumeSpecName, state: m.volumeMountState })),
      [{ podName: 'pod-a', inner: 'pv-1', outer: '', state: 'VolumeMountUncertain' }],
    );
    assert.equal(asw.getAttachedVolume(nameOf('vol-1'))?.deviceMountState, 'DeviceMountUncertain');
    assert.deepEqual(linesOf(node, 'Volume is marked as uncertain and added into the actual state'), [
      { level: 2, severity: 'I', values: { podName: 'pod-a', volumeName: nameOf('vol-1'), seLinuxMountContext: '' } },
    ]);
    assert.deepEqual(reconstructor.pendingNodeStatusUpdates(), [nameOf('vol-1')]);
  });

  it('a block pod volume: the mapper is built for a pod with only its UID', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, false, 'Block');
    const pods: PodRef[] = [];
    const { reconstructor, asw } = await build(node, false, {
      csi: (csi) => ({
        newBlockVolumeMapper: (spec, p) => {
          pods.push(p);
          return csi.newBlockVolumeMapper(spec, p);
        },
      }),
    });
    await reconstructor.reconstructVolumes();
    assert.deepEqual(pods, [{ uid: 'pod-a', namespace: '', name: '' }]);
    assert.equal(asw.getVolumeMountState(nameOf('vol-1'), pod('pod-a')), 'VolumeMountUncertain');
  });

  // reconstruct_common.go reconstructVolume takes the SELinux context from ConstructVolumeSpec,
  // which a block volume does not go through (ConstructBlockVolumeSpec carries none).
  it('a block pod volume enters with no SELinux context: none on the pod mount, none on the device', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, false, 'Block');
    const { reconstructor, asw } = await build(node, false);
    await reconstructor.reconstructVolumes();
    assert.deepEqual(
      asw.getAllMountedVolumes().map((m) => ({ podName: m.podName, seLinuxMountContext: m.seLinuxMountContext })),
      [{ podName: 'pod-a', seLinuxMountContext: '' }],
    );
    const device = asw.getAttachedVolume(nameOf('vol-1'));
    assert.equal(device?.deviceMountState, 'DeviceMountUncertain');
    assert.equal(device.seLinuxMountContext, undefined, 'no context recorded for the device');
  });

  // reconstruct_common.go reconstructVolume: every failure point's error, wrapped to name the
  // candidate; `nodevol audit` strips exactly this wrapper to show the cause (auditOutput.ts).
  it('a candidate that cannot be rebuilt fails with a ReconstructionError naming the pod, the volume and its dir, then the plugin\'s error', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, false);
    const dir = `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`;
    node.fs.writeRaw(`${dir}/vol_data.json`, '{corrupt');
    const csi = new CsiPlugin(volumeHostOf(node, { kep: false }));
    const cause = await csi.constructVolumeSpec('pv-1', dir).then(
      () => assert.fail('the plugin cannot read the file'),
      (e: unknown) => (e as Error).message,
    );
    await assert.rejects(reconstructVolumeSpec(new VolumePluginMgr([csi]), failedPodVolumeDir(pod('pod-a'), 'pv-1')), (err: unknown) => {
      assert.ok(err instanceof ReconstructionError);
      assert.equal(err.name, 'ReconstructionError');
      assert.equal(err.message, `could not construct volume information for pod pod-a volume "pv-1" (${dir}): ${cause}`);
      return true;
    });
  });

  // podDirWalk.ts vouches for a candidate it reached through real directories inside the root
  // dir; the plugin then skips resolving it again (one realpath per candidate on a large node).
  for (const parentsVerified of [true, false]) {
    it(`hands the walk's word on the candidate's parents to the plugin (parents verified: ${parentsVerified})`, async () => {
      const asked: unknown[] = [];
      const recording: VolumePlugin = {
        getPluginName: () => CSI_PLUGIN_NAME,
        canSupport: () => true,
        getVolumeName: () => 'pv-1',
        constructVolumeSpec: (_name, _path, options) => {
          asked.push(options);
          return Promise.resolve({ spec: constructPVSourceSpec('pv-1', DRIVER, 'vol-1'), seLinuxMountContext: '', dataSource: 'pod-local' });
        },
        newMounter: () => Promise.reject(new Error('not called')),
        newUnmounter: () => Promise.reject(new Error('not called')),
      };
      await reconstructVolumeSpec(new VolumePluginMgr([recording]), failedPodVolumeDir(pod('pod-a'), 'pv-1', { parentsVerified }));
      assert.deepEqual(asked, [{ parentsVerified }]);
    });
  }

  it('a block candidate whose plugin has no block mapper fails, naming the plugin', async () => {
    const unsupported = (): never => {
      throw new Error('not called');
    };
    const plain: VolumePlugin = {
      getPluginName: () => 'example.com/plain',
      canSupport: () => true,
      getVolumeName: unsupported,
      constructVolumeSpec: unsupported,
      newMounter: unsupported,
      newUnmounter: unsupported,
    };
    const candidate = failedPodVolumeDir(pod('pod-a'), 'pv-1', {
      pluginName: 'example.com/plain',
      volumeMode: 'Block',
      volumePath: `${ROOT}/pods/pod-a/volumeDevices/example.com~plain/pv-1`,
    });
    await assert.rejects(reconstructVolumeSpec(new VolumePluginMgr([plain]), candidate), {
      name: 'ReconstructionError',
      message: `could not construct volume information for pod pod-a volume "pv-1" (${candidate.volumePath}): could not find block volume plugin "example.com/plain"`,
    });
  });

  it('a pod volume already in the actual state is not reconstructed again: said at V(4), not counted, not queued again', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, false);
    const { reconstructor, asw } = await build(node, false);
    await reconstructor.reconstructVolumes();
    // The node status settles the queue; a second pass finds the pod volume in the actual state.
    await reconstructor.updateReconstructedFromNodeStatus();
    assert.deepEqual(reconstructor.pendingNodeStatusUpdates(), []);
    await reconstructor.reconstructVolumes();
    assert.deepEqual(reconstructor.pendingNodeStatusUpdates(), []);
    assert.deepEqual(node.metrics.ofKind('reconstructVolumeOperation').map(({ source, failed }) => `${source} ${failed}`), ['pod-local false'], 'counted once, in the first pass');
    assert.deepEqual(linesOf(node, 'Volume exists in actual state, skip cleaning up mounts'), [{ level: 4, severity: 'I', values: { podName: 'pod-a', volumeSpecName: 'pv-1' } }]);
    assert.equal(asw.getVolumeMountState(nameOf('vol-1'), pod('pod-a')), 'VolumeMountUncertain');
  });

  it('the pod dirs cannot be read: the failed candidates are what the hooks answer (listed volumes do not depend on the pod dirs)', async () => {
    const node = new InMemoryNode();
    const kept = failedPodVolumeDir(pod('pod-b'), 'pv-b', { volumeMode: 'Block' });
    const { reconstructor } = await build(node, false, {
      fs: new FaultyFs(node.fs).failOn('readdir', `${ROOT}/pods`, 'EACCES'),
      hooks: { ...upstreamReconstructHooks, afterPodVolumesWalked: () => Promise.resolve([kept]) },
    });
    await reconstructor.reconstructVolumes();
    assert.ok(node.logger.messages().includes('Cannot get volumes from disk, skip sync states for volume reconstruction'));
    assert.deepEqual(reconstructor.failedReconstructions(), [kept]);
  });

  it('a pod volume the actual state does not take as new (checkAndMark answers false) is not said to be added', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, false);
    const { reconstructor } = await build(node, false, {
      asw: (real) => ({
        checkAndMarkVolumeAsUncertainViaReconstruction: (opts) => {
          real.checkAndMarkVolumeAsUncertainViaReconstruction(opts);
          return false;
        },
      }),
    });
    await reconstructor.reconstructVolumes();
    assert.deepEqual(linesOf(node, 'Volume is marked as uncertain and added into the actual state'), []);
  });

  it('building the mounter fails: the candidate failed reconstruction, nothing enters the actual state, nothing is queued', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, false);
    const { reconstructor, asw } = await build(node, false, { csi: () => ({ newMounter: () => Promise.reject(new Error('no mounter')) }) });
    await reconstructor.reconstructVolumes();
    assert.deepEqual(reconstructor.failedReconstructions().map((v) => `${v.podName}/${v.volumeSpecName}`), ['pod-a/pv-1']);
    assert.deepEqual(asw.getAttachedVolumes(), []);
    assert.deepEqual(reconstructor.pendingNodeStatusUpdates(), []);
    assert.deepEqual(node.metrics.ofKind('reconstructVolumeOperation').map(({ source, failed }) => `${source} ${failed}`).slice(-1), ['pod-local true']);
  });

  it('adding the volume to the actual state fails: no pod mount, no device, that one error said', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, false);
    let marked = 0;
    const { reconstructor, asw } = await build(node, false, {
      asw: (real) => ({
        addAttachUncertainReconstructedVolume: boom('add'),
        checkAndMarkVolumeAsUncertainViaReconstruction: (opts) => {
          marked++;
          return real.checkAndMarkVolumeAsUncertainViaReconstruction(opts);
        },
      }),
    });
    await reconstructor.reconstructVolumes();
    assert.equal(marked, 0, 'no pod is marked on a volume that is not there');
    assert.deepEqual(asw.getAttachedVolumes(), []);
    assert.deepEqual(asw.getAllMountedVolumes(), []);
    assert.deepEqual(errorMessages(node), ['Could not add volume information to actual state of world']);
  });

  it('marking the device uncertain fails: the pod mount stays uncertain, the device is not marked, that error said', async () => {
    const node = new InMemoryNode();
    await mountedThenCrashed(node, false);
    const { reconstructor, asw } = await build(node, false, { asw: () => ({ markDeviceAsUncertain: boom('mark') }) });
    await reconstructor.reconstructVolumes();
    assert.equal(asw.getVolumeMountState(nameOf('vol-1'), pod('pod-a')), 'VolumeMountUncertain');
    assert.equal(asw.getAttachedVolume(nameOf('vol-1'))?.deviceMountState, 'DeviceNotMounted');
    assert.deepEqual(errorMessages(node), ['Could not mark device is uncertain to actual state of world']);
    assert.deepEqual(linesOf(node, 'Volume is marked device as uncertain and added into the actual state'), []);
    assert.deepEqual(reconstructor.pendingNodeStatusUpdates(), [nameOf('vol-1')]);
  });
});

describe('the cleanup of the candidates that failed (cleanOrphanVolumes, cleanupMounts)', () => {
  /** A pod volume dir of a plugin nobody registered: it fails reconstruction. */
  async function oneFailed(node: InMemoryNode): Promise<void> {
    await node.fs.mkdir(`${ROOT}/pods/pod-x/volumes/missing-plugin/pvc-abcdef`, { recursive: true, mode: 0o750 });
  }

  it('nothing failed: the cleanup does nothing and says nothing; one failed: it is cleaned, then said finished', async () => {
    const node = new InMemoryNode();
    const unmounts: string[] = [];
    const executor: Partial<OperationExecutor> = {
      unmountVolume: (mv) => {
        unmounts.push(`${mv.podName}/${mv.innerVolumeSpecName}`);
        return Promise.resolve();
      },
    };
    const first = await build(node, false, { executor });
    await first.reconstructor.reconstructVolumes();
    await first.reconstructor.cleanOrphanVolumes();
    assert.deepEqual(linesOf(node, 'Orphan volume cleanup finished'), []);
    await oneFailed(node);
    const second = await build(node, false, { executor });
    await second.reconstructor.reconstructVolumes();
    await second.reconstructor.cleanOrphanVolumes();
    assert.deepEqual(unmounts, ['pod-x/pvc-abcdef']);
    assert.deepEqual(linesOf(node, 'Orphan volume cleanup finished').map((l) => l.level), [2]);
  });

  it('the unmount fails with an unexpected error: said as an error with the pod and spec name, counted failed', async () => {
    const node = new InMemoryNode();
    await oneFailed(node);
    const err = new Error('unmount failed');
    const { reconstructor } = await build(node, false, { executor: { unmountVolume: () => Promise.reject(err) } });
    await reconstructor.reconstructVolumes();
    await reconstructor.cleanOrphanVolumes();
    assert.deepEqual(linesOf(node, 'Failed to unmount volume that could not be reconstructed'), [
      { level: 0, severity: 'E', values: { podName: 'pod-x', volumeSpecName: 'pvc-abcdef', err } },
    ]);
    assert.deepEqual(node.metrics.ofKind('forceCleanedFailedVolumeOperation').map((e) => e.failed), [true]);
  });

  it('the executor refuses the unmount (an operation is pending, expected): not said, counted failed', async () => {
    const node = new InMemoryNode();
    await oneFailed(node);
    const key = { volumeName: 'pvc-abcdef', podName: 'pod-x' };
    const { reconstructor } = await build(node, false, { executor: { unmountVolume: () => Promise.reject(new AlreadyExistsError(key, 'volume_unmount', key)) } });
    await reconstructor.reconstructVolumes();
    await reconstructor.cleanOrphanVolumes();
    assert.deepEqual(errorMessages(node), []);
    assert.deepEqual(node.metrics.ofKind('forceCleanedFailedVolumeOperation').map((e) => e.failed), [true]);
  });
});
