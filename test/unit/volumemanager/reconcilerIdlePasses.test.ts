// The reconciler's idle-pass guard (skipIdlePasses, used by the agent): a pass that could start
// nothing is skipped, a change runs the next pass, a pass still runs at least every
// IDLE_PASS_MAX_SKIP_MS, and a failed operation is retried after its backoff exactly as without
// the guard. Time moves only through the FakeClock; a pass is observed by the DSW reads it makes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GrpcStatus } from '../../../src/ports/csi.js';
import type { UniqueVolumeName } from '../../../src/layout/names.js';
import { IDLE_PASS_MAX_SKIP_MS } from '../../../src/volumemanager/reconciler/reconciler.js';
import { InMemoryNode } from '../../support/inMemoryNode.js';

const nameOf = (handle: string): UniqueVolumeName => `kubernetes.io/csi/csi.example.com^${handle}` as UniqueVolumeName;

/** Counts the reconciler passes that ran (each reads the DSW's volumes to mount once). */
function countPasses(node: InMemoryNode): { passes: () => number } {
  const dsw = node.kubelet.dsw;
  const original = dsw.getVolumesToMount.bind(dsw);
  let n = 0;
  dsw.getVolumesToMount = () => {
    n++;
    return original();
  };
  return { passes: () => n };
}

/** One reconciler pass alone, then one loop period of fake time. */
async function reconcileStep(node: InMemoryNode, periodMs = 100): Promise<void> {
  await node.kubelet.reconcileOnce();
  await node.clock.advance(periodMs);
}

async function mounted(node: InMemoryNode, pods: Readonly<Record<string, readonly string[]>>): Promise<void> {
  for (const pv of new Set(Object.values(pods).flat())) node.addVolume(pv, pv.replace('pv-', 'vol-'));
  for (const [uid, list] of Object.entries(pods)) node.addPod(uid, list);
  const vm = await node.startKubelet(true);
  vm.reconciler.skipIdlePasses(node.clock);
  const want = Object.values(pods).reduce((n, l) => n + l.length, 0);
  await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === want);
  await node.steps(3);
}

describe('reconciler skipIdlePasses', () => {
  it('skips passes while nothing changes, and still runs one every IDLE_PASS_MAX_SKIP_MS', async () => {
    const node = new InMemoryNode();
    await mounted(node, { 'pod-a': ['pv-1'], 'pod-b': ['pv-2'] });
    const { passes } = countPasses(node);
    const steps = IDLE_PASS_MAX_SKIP_MS / 100;
    for (let i = 0; i < steps * 3; i++) await reconcileStep(node);
    // Without the guard: one pass per step (30); with it: about one per IDLE_PASS_MAX_SKIP_MS.
    assert.ok(passes() >= 2 && passes() <= 4, `${passes()} passes in ${steps * 3} idle steps`);
  });

  it('a change in the desired state runs the next pass: a new pod is mounted, a deleted one unmounted', async () => {
    const node = new InMemoryNode();
    await mounted(node, { 'pod-a': ['pv-1'] });
    for (let i = 0; i < 5; i++) await reconcileStep(node);
    node.addVolume('pv-2', 'vol-2');
    node.addPod('pod-b', ['pv-2']);
    const stepsToMount = await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 2, 50);
    assert.ok(stepsToMount <= 3, `mounted after ${stepsToMount} steps`);
    node.cluster.deletePod('pod-a');
    const stepsToUnstage = await node.stepUntil(() => !node.kubelet.asw.volumeExists(nameOf('vol-1')), 50);
    assert.ok(stepsToUnstage <= 4, `unstaged after ${stepsToUnstage} steps`);
  });

  it('idleForMs(): the time to the forced pass while nothing changes; undefined after a change, in backoff, or without the guard', async () => {
    const node = new InMemoryNode();
    await mounted(node, { 'pod-a': ['pv-1'] });
    await node.kubelet.reconcileOnce(); // a pass that runs or is skipped: either way nothing changed
    const idle = node.kubelet.reconcilerIdleForMs();
    assert.ok(idle !== undefined && idle >= 0 && idle <= IDLE_PASS_MAX_SKIP_MS, String(idle));
    await node.clock.advance(300);
    assert.equal(node.kubelet.reconcilerIdleForMs(), Math.max(0, idle - 300));

    node.addVolume('pv-2', 'vol-2');
    node.addPod('pod-b', ['pv-2']);
    await node.kubelet.populateOnce();
    assert.equal(node.kubelet.reconcilerIdleForMs(), undefined, 'the desired state changed: a pass now could mount');

    node.driver.inject({ method: 'NodeUnpublishVolume', code: GrpcStatus.UNAVAILABLE, times: 1 });
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => node.driver.callsOf('NodeUnpublishVolume').length === 1, 20);
    await node.step();
    await node.kubelet.reconcileOnce();
    assert.equal(node.kubelet.reconcilerIdleForMs(), undefined, 'an operation in backoff: every pass runs');

    const plain = new InMemoryNode();
    plain.addVolume('pv-1', 'vol-1');
    plain.addPod('pod-a', ['pv-1']);
    await plain.startKubelet(true);
    await plain.steps(5);
    assert.equal(plain.kubelet.reconcilerIdleForMs(), undefined, 'without skipIdlePasses');
  });

  it('a failed operation is retried as soon as its backoff expires, every pass running meanwhile', async () => {
    const node = new InMemoryNode();
    await mounted(node, { 'pod-a': ['pv-1'] });
    node.driver.inject({ method: 'NodeUnpublishVolume', code: GrpcStatus.UNAVAILABLE, times: 1 });
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => node.driver.callsOf('NodeUnpublishVolume').length === 1, 20);
    await node.step(); // the failure lands and arms a 500 ms backoff
    const { passes } = countPasses(node);
    for (let i = 0; i < 4; i++) await reconcileStep(node);
    assert.equal(passes(), 4, 'every pass runs while an operation is in backoff');
    await node.stepUntil(() => !node.kubelet.asw.volumeExists(nameOf('vol-1')), 20);
    assert.equal(node.driver.callsOf('NodeUnpublishVolume').length, 2, 'one retry, after the backoff');
  });
});
