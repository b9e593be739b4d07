// The reconciler's decisions, one pass at a time (reconciler_common.go / reconciler.go): what
// waits until reconstructed volumes are settled from the node status, what is skipped while an
// operation runs for the volume, what an operator sees when starting an operation fails for a
// reason other than "already running" or "backing off", and that a pass that failed is not taken
// for an idle one. Time moves only through the FakeClock; assertions read the driver's call log,
// the ASW and the kubelet's log lines.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UniqueVolumeName } from '../../../src/layout/names.js';
import { CSIRetryReconstructionCleanup, FeatureGate } from '../../../src/features/features.js';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import { VolumePluginMgr, type ConstructOptions, type ReconstructedVolume } from '../../../src/volume/plugins.js';
import { BACKOFF_INITIAL_MS } from '../../../src/operationexecutor/nestedPendingOperations.js';
import { IDLE_PASS_MAX_SKIP_MS } from '../../../src/volumemanager/reconciler/reconciler.js';
import { DRIVER, InMemoryNode } from '../../support/inMemoryNode.js';

const nameOf = (handle: string): UniqueVolumeName => `kubernetes.io/csi/${DRIVER}^${handle}` as UniqueVolumeName;

/** CSI calls other than capability probes from index `from`, as "<method> <outcome>". */
function csiCalls(node: InMemoryNode, from = 0): string[] {
  return node.driver.calls
    .slice(from)
    .filter((c) => c.method !== 'NodeGetCapabilities')
    .map((c) => `${c.method} ${c.outcome}`);
}

/** The error lines logged with message `msg`: the error's text and the volume they name. */
function errorLines(node: InMemoryNode, msg: string): { err: string; volumeName: unknown }[] {
  return node.logger.lines
    .filter((l) => l.severity === 'E' && l.msg === msg)
    .map((l) => ({ err: String(l.values.err), volumeName: l.values.volumeName }));
}

async function mountAll(node: InMemoryNode, pods: Readonly<Record<string, readonly string[]>>): Promise<void> {
  for (const pv of new Set(Object.values(pods).flat())) node.addVolume(pv, pv.replace('pv-', 'vol-'));
  for (const [uid, list] of Object.entries(pods)) node.addPod(uid, list);
  await node.startKubelet(true);
  const want = Object.values(pods).reduce((n, l) => n + l.length, 0);
  await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === want);
  await node.steps(2);
}

describe('readyToUnmount: nothing is unmounted before reconstructed volumes are settled from the node status', () => {
  // reconciler.go readyToUnmount: the DSW populated AND volumesNeedUpdateFromNodeStatus empty.
  it('a pod deleted while kubelet was down: no NodeUnpublishVolume while the node status cannot be read; once it can, unpublish then unstage', async () => {
    const node = new InMemoryNode();
    await mountAll(node, { 'pod-a': ['pv-1'] });
    node.crashKubelet();
    node.cluster.deletePod('pod-a');
    const cluster = node.cluster;
    const original = cluster.getNodeStatus.bind(cluster);
    cluster.getNodeStatus = () => Promise.reject(new Error('Get node: context deadline exceeded'));
    const mark = node.driver.calls.length;
    const vm = await node.startKubelet(true);
    await node.steps(20);
    assert.equal(vm.populator.hasAddedPods(), true, 'the DSW is populated: only the node status holds the unmount back');
    assert.deepEqual(vm.reconstructor.pendingNodeStatusUpdates(), [nameOf('vol-1')]);
    assert.deepEqual(csiCalls(node, mark), [], 'nothing unpublished or unstaged');
    assert.equal(vm.asw.getVolumeMountState(nameOf('vol-1'), 'pod-a' as never), 'VolumeMountUncertain');

    cluster.getNodeStatus = original;
    await node.stepUntil(() => !vm.asw.volumeExists(nameOf('vol-1')));
    assert.deepEqual(csiCalls(node, mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
  });
});

/**
 * Makes the executor's `method` fail once with an error that is neither AlreadyExists nor
 * Backoff (as when the operation cannot be built: a plugin not found, a spec it cannot read).
 */
function failOnce(node: InMemoryNode, method: 'mountVolume' | 'unmountVolume' | 'unmountDevice' | 'verifyControllerAttachedVolume', text: string): { atMs?: number } {
  const when: { atMs?: number } = {};
  const executor = node.kubelet.executor as unknown as Record<string, (...args: unknown[]) => unknown>;
  const original = executor[method]!.bind(executor);
  let failed = false;
  executor[method] = (...args: unknown[]): unknown => {
    if (failed) return original(...args);
    failed = true;
    when.atMs = node.clock.nowMs();
    if (method === 'verifyControllerAttachedVolume') throw new Error(text);
    return Promise.reject(new Error(text));
  };
  return when;
}

describe('starting an operation fails for another reason than AlreadyExists or Backoff: logged as an error, retried next pass', () => {
  // reconciler_common.go: each of mountOrAttachVolumes, unmountVolumes and unmountDetachDevices
  // logs the error unless it is an expected one (nestedpendingoperations AlreadyExists / backoff).
  it('VerifyControllerAttachedVolume and MountVolume', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    node.addPod('pod-a', ['pv-1']);
    await node.startKubelet(true);
    failOnce(node, 'verifyControllerAttachedVolume', 'verify: cannot build');
    failOnce(node, 'mountVolume', 'mount: cannot build');
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
    assert.deepEqual(errorLines(node, 'operationExecutor.VerifyControllerAttachedVolume failed'), [{ err: 'Error: verify: cannot build', volumeName: nameOf('vol-1') }]);
    assert.deepEqual(errorLines(node, 'operationExecutor.MountVolume failed'), [{ err: 'Error: mount: cannot build', volumeName: nameOf('vol-1') }]);
  });

  it('UnmountVolume and UnmountDevice', async () => {
    const node = new InMemoryNode();
    await mountAll(node, { 'pod-a': ['pv-1'] });
    failOnce(node, 'unmountVolume', 'unmount: cannot build');
    failOnce(node, 'unmountDevice', 'unmount device: cannot build');
    const mark = node.driver.calls.length;
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => !node.kubelet.asw.volumeExists(nameOf('vol-1')));
    assert.deepEqual(csiCalls(node, mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    assert.deepEqual(errorLines(node, 'operationExecutor.UnmountVolume failed'), [{ err: 'Error: unmount: cannot build', volumeName: nameOf('vol-1') }]);
    assert.deepEqual(errorLines(node, 'operationExecutor.UnmountDevice failed'), [{ err: 'Error: unmount device: cannot build', volumeName: nameOf('vol-1') }]);
  });
});

describe('unmountDetachDevices skips a volume with an operation pending', () => {
  // reconciler_common.go unmountDetachDevices: only volumes with no pending operation (volume key,
  // empty pod) are unmounted or marked detached.
  it('a pod deleted while its NodeStageVolume hangs: the volume stays in the actual state, and is unstaged once the stage returns', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    node.addPod('pod-a', ['pv-1']);
    node.driver.inject({ method: 'NodeStageVolume', hang: true, times: 1 });
    const vm = await node.startKubelet(true);
    await node.stepUntil(() => node.driver.hangingCalls() === 1);
    node.cluster.deletePod('pod-a');
    await node.steps(10);
    assert.equal(vm.dsw.volumeExists(nameOf('vol-1')), false);
    assert.equal(vm.asw.volumeExists(nameOf('vol-1')), true, 'not forgotten while MountDevice runs');
    assert.equal(node.logger.messages().includes('Volume detached'), false);

    assert.equal(node.driver.releaseHangs(), 1);
    await node.stepUntil(() => !vm.asw.volumeExists(nameOf('vol-1')));
    await node.steps(2);
    assert.equal(node.driver.callsOf('NodeUnstageVolume').length, 1, 'the staged device is not leaked');
    assert.deepEqual(node.mounter.entries().map((e) => e.mountPoint), ['/']);
  });
  it('an inline ephemeral volume (keyed per pod) whose pod is deleted while NodePublishVolume hangs stays in the actual state until SetUp returns', async () => {
    // Not attachable, not device-mountable: its operations are keyed (volume, pod), and the
    // check with the empty pod name matches them.
    const node = new InMemoryNode({ attachRequired: false });
    node.addPod('pod-a', [], ['scratch']);
    node.driver.inject({ method: 'NodePublishVolume', hang: true, times: 1 });
    const vm = await node.startKubelet(true);
    await node.stepUntil(() => node.driver.hangingCalls() === 1);
    const [name] = vm.asw.getUnmountedVolumes().map((v) => v.volumeName);
    assert.ok(name !== undefined && vm.executor.isOperationPending(name, 'pod-a'), 'SetUp pending for the pod');
    node.cluster.deletePod('pod-a');
    await node.steps(10);
    assert.equal(vm.dsw.volumeExists(name), false);
    assert.equal(vm.asw.volumeExists(name), true, 'not forgotten while SetUp runs');
    assert.equal(node.logger.messages().includes('Volume detached'), false);

    assert.equal(node.driver.releaseHangs(), 1);
    await node.stepUntil(() => !vm.asw.volumeExists(name));
    await node.steps(2);
    assert.equal(node.driver.callsOf('NodeUnpublishVolume').length, 1, 'the published volume is not leaked');
    assert.deepEqual(node.mounter.entries().map((e) => e.mountPoint), ['/']);
  });
});

describe('markDetached', () => {
  // reconciler_common.go unmountDetachDevices: a volume whose device is not mounted is marked
  // detached, and the log line names the devicePath the node status gave it.
  it('after the unstage, "Volume detached" carries the devicePath from volumesAttached', async () => {
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    node.cluster.volumesAttached = node.cluster.volumesAttached.map((v) => ({ ...v, devicePath: '/dev/xvdf' }));
    node.addPod('pod-a', ['pv-1']);
    await node.startKubelet(true);
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
    assert.equal(node.kubelet.asw.getAttachedVolume(nameOf('vol-1'))?.devicePath, '/dev/xvdf');
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => !node.kubelet.asw.volumeExists(nameOf('vol-1')));
    assert.deepEqual(
      node.logger.lines.filter((l) => l.msg === 'Volume detached').map((l) => l.values),
      [{ volumeName: nameOf('vol-1'), devicePath: '/dev/xvdf' }],
    );
  });

  it('a failure to mark the volume detached is logged, the pass goes on, and the next pass marks it', async () => {
    const node = new InMemoryNode();
    await mountAll(node, { 'pod-a': ['pv-1'] });
    const asw = node.kubelet.asw;
    const original = asw.markVolumeAsDetached.bind(asw);
    let refused = 0;
    asw.markVolumeAsDetached = (volumeName) => {
      if (refused++ === 0) throw new Error('ASW refused (test)');
      original(volumeName);
    };
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => !asw.volumeExists(nameOf('vol-1')));
    assert.deepEqual(
      node.logger.lines.filter((l) => l.msg === 'Could not mark volume as detached').map((l) => ({ err: String(l.values.err), volumeName: l.values.volumeName })),
      [{ err: 'Error: ASW refused (test)', volumeName: nameOf('vol-1') }],
    );
    assert.equal(refused, 2);
  });
});

describe('a pass that threw', () => {
  it('reconcileOnce rejects with the error, and with skipIdlePasses the next pass runs although nothing changed', async () => {
    const node = new InMemoryNode();
    await mountAll(node, { 'pod-a': ['pv-1'] });
    node.kubelet.reconciler.skipIdlePasses(node.clock);
    await node.kubelet.reconcileOnce();
    const dsw = node.kubelet.dsw;
    const original = dsw.getVolumesToMount.bind(dsw);
    let reads = 0;
    dsw.getVolumesToMount = () => {
      reads++;
      if (reads === 1) throw new Error('DSW read failed');
      return original();
    };
    await node.clock.advance(IDLE_PASS_MAX_SKIP_MS); // the forced pass runs, and throws
    await assert.rejects(node.kubelet.reconciler.reconcileOnce(), /DSW read failed/);
    assert.equal(reads, 1);
    await node.kubelet.reconciler.reconcileOnce();
    assert.equal(reads, 2, 'the pass after a failed one runs, at the same instant');
    await node.kubelet.reconciler.reconcileOnce();
    assert.equal(reads, 2, 'then idle passes are skipped again');
  });
});

describe('skipIdlePasses while a volume that could not be reconstructed waits for its cleanup', () => {
  // reconciler.go: kubelet runs cleanOrphanVolumes on every pass once ready; the idle guard must
  // not skip passes while a candidate waits for its retry.
  /** Reconstruction fails for pv-1; its unmounter works, so the candidate goes to cleanupMounts. */
  class FailingReconstruction extends CsiPlugin {
    override constructVolumeSpec(volumeName: string, volumePath: string, options?: ConstructOptions): Promise<ReconstructedVolume> {
      if (volumeName === 'pv-1') return Promise.reject(new Error('reconstruction fails (test)'));
      return super.constructVolumeSpec(volumeName, volumePath, options);
    }
  }

  it('gate CSIRetryReconstructionCleanup: a cleanup whose start was refused is retried when its backoff expires, not at the next forced pass', async () => {
    const g = FeatureGate.of({ CSIGlobalMountReconstruction: false, [CSIRetryReconstructionCleanup]: true });
    const node = new InMemoryNode();
    node.addVolume('pv-1', 'vol-1');
    node.addPod('pod-a', ['pv-1']);
    await node.startKubelet(g);
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
    node.crashKubelet();
    node.cluster.deletePod('pod-a');
    const mark = node.driver.calls.length;
    const vm = await node.startKubelet(g, { plugins: (host, hooks) => new VolumePluginMgr([new FailingReconstruction(host, hooks)]) });
    vm.reconciler.skipIdlePasses(node.clock);
    const refused = failOnce(node, 'unmountVolume', 'unmounter: cannot build');
    await node.stepUntil(() => node.driver.callsOf('NodeUnpublishVolume').length === 1, 50);
    const retried = node.driver.calls.slice(mark).find((c) => c.method === 'NodeUnpublishVolume');
    assert.ok(refused.atMs !== undefined && retried !== undefined);
    // The first pass after the cleanup's 500 ms backoff (steps of 100 ms), well before the
    // IDLE_PASS_MAX_SKIP_MS forced pass: a pass runs while a candidate waits, as kubelet's would.
    assert.equal(retried.atMs - refused.atMs, BACKOFF_INITIAL_MS);
    assert.ok(BACKOFF_INITIAL_MS < IDLE_PASS_MAX_SKIP_MS);
  });
});
