// Driver faults on a real node: NodeStageVolume, NodePublishVolume, NodeUnpublishVolume and
// NodeUnstageVolume each fail UNAVAILABLE three times, then succeed. The agent must retry each
// (with kubelet's exponential backoff) until the node converges - the pod mounted, then after
// its deletion everything torn down - and must never remove a directory or a mount before the
// call that releases it succeeded. Two volumes share the pod so that the four faulty calls run
// two at a time: pv-a fails stage and unstage, pv-b fails publish and unpublish. The call that
// succeeds is delayed 1 ms, so that the journal records its arrival ("held"): from then on, what
// that call itself removes (the driver unmounting its target) may go before its success is journaled.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import type { JournalEntry } from '../support/e2e/nodeDisk.js';
import { killAll } from '../support/e2e/nodeNamespace.js';
import { rootOnlySkip, TestNode, type TestVolume } from '../support/e2e/testNode.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { escapeMountPath } from '../../src/mount/mountInfo.js';

type Op = 'NodeStageVolume' | 'NodePublishVolume' | 'NodeUnpublishVolume' | 'NodeUnstageVolume';

/** Something that must still be there while `op` of a volume keeps failing. */
interface Kept {
  readonly what: string;
  readonly holds: (s: Snapshot) => boolean;
  /** The releasing call itself removes it (the driver's unmount): excused once that call arrived. */
  readonly removedByTheCall?: boolean;
}

interface Watch {
  readonly op: Op;
  readonly vol: TestVolume;
  readonly mustStay: readonly Kept[];
}

interface Snapshot {
  readonly mounted: ReadonlySet<string>;
  readonly inUse: readonly string[];
}

const nodes: TestNode[] = [];

describe('driver faults: every node call failing UNAVAILABLE three times', { skip: rootOnlySkip() }, () => {
  after(async () => {
    await killAll();
    for (const node of nodes) await node.disk.cleanup();
  });

  it('the node converges (mounted, then torn down) and nothing is removed before its unstage/unpublish succeeded', async (t) => {
    const node = await TestNode.create('faults');
    nodes.push(node);
    await node.startDriver();
    const a = await node.createVolume('pv-a');
    const b = await node.createVolume('pv-b');
    const unavailable3 = (method: Op, v: TestVolume): object[] => [
      { method, volumeId: v.volumeHandle, code: 'UNAVAILABLE', times: 3 },
      { method, volumeId: v.volumeHandle, delay: '1ms', times: 1 },
    ];
    await node.disk.writeFaults({
      faults: [...unavailable3('NodeStageVolume', a), ...unavailable3('NodeUnstageVolume', a), ...unavailable3('NodePublishVolume', b), ...unavailable3('NodeUnpublishVolume', b)],
    });
    const pod = await node.disk.writePod({ name: 'app', volumes: [{ name: 'data-a', claimName: a.claimName }, { name: 'data-b', claimName: b.claimName }] });

    const exists = (p: string): Kept => ({ what: `${path.relative(node.disk.rootDir, p)} exists`, holds: () => existsSync(p) });
    const mounted = (p: string, removedByTheCall = false): Kept => ({
      what: `${path.relative(node.disk.rootDir, p)} is mounted`,
      holds: (s) => s.mounted.has(escapeMountPath(p)),
      removedByTheCall,
    });
    const inUse = (v: TestVolume): Kept => ({ what: `${v.pvName} in volumesInUse`, holds: (s) => s.inUse.includes(v.uniqueVolumeName) });
    const globalData = (v: TestVolume): Kept => exists(path.join(node.volumeDir(v.volumeHandle), 'vol_data.json'));
    const podData = (v: TestVolume): Kept => exists(path.join(node.podVolumeDir(pod.uid, v.pvName), 'vol_data.json'));
    const watches: Watch[] = [
      // An uncertain (UNAVAILABLE) stage keeps its directory, as kubelet's MountDevice does.
      { op: 'NodeStageVolume', vol: a, mustStay: [globalData(a), exists(node.globalMount(a.volumeHandle))] },
      { op: 'NodePublishVolume', vol: b, mustStay: [globalData(b), mounted(node.globalMount(b.volumeHandle)), podData(b)] },
      { op: 'NodeUnpublishVolume', vol: b, mustStay: [podData(b), mounted(node.podMountPath(pod.uid, b.pvName), true), globalData(b), mounted(node.globalMount(b.volumeHandle)), inUse(b)] },
      { op: 'NodeUnstageVolume', vol: a, mustStay: [globalData(a), mounted(node.globalMount(a.volumeHandle), true), inUse(a)] },
    ];
    const witnessed = new Map<Op, number>();
    const violations: string[] = [];
    const outcome = (j: readonly JournalEntry[], w: Watch): { failures: number; arrived: boolean; ok: boolean } => {
      const calls = j.filter((e) => e.method === w.op && e.volumeId === w.vol.volumeHandle);
      return {
        failures: calls.filter((e) => e.phase === undefined && e.error?.name === 'UNAVAILABLE').length,
        arrived: calls.some((e) => e.phase === 'held'),
        ok: calls.some((e) => e.phase === undefined && e.error === null),
      };
    };
    /** One look at the node: the state first, then the journal, so a missing thing is blamed only if its releasing call had not succeeded before the look. */
    const sample = async (mark: number): Promise<readonly JournalEntry[]> => {
      const snap: Snapshot = { mounted: new Set((await node.ns.mounts()).map((m) => m.mountPoint)), inUse: await node.disk.volumesInUse() };
      const held = watches.map((w) => ({ w, missing: w.mustStay.filter((c) => !c.holds(snap)) }));
      const journal = await node.journalSince(mark);
      for (const { w, missing } of held) {
        const o = outcome(journal, w);
        if (o.failures === 0 || o.ok) continue;
        witnessed.set(w.op, (witnessed.get(w.op) ?? 0) + 1);
        const unexcused = missing.filter((c) => !(c.removedByTheCall === true && o.arrived)).map((c) => c.what);
        if (unexcused.length > 0) violations.push(`${w.op} ${w.vol.pvName} after ${o.failures} failure(s)${o.arrived ? ', the succeeding call in flight' : ''}: ${unexcused.join(', ')}`);
      }
      return journal;
    };

    // Mount: stage (pv-a) and publish (pv-b) each fail three times, then the pod is mounted.
    const mark = await node.journalMark();
    const started = performance.now();
    await node.startAgent({ gate: true });
    await waitFor(
      async () => {
        const j = await sample(mark);
        const published = [a, b].every((v) => j.some((e) => e.method === 'NodePublishVolume' && e.volumeId === v.volumeHandle && e.phase === undefined && e.error === null));
        return published && (await node.disk.volumesInUse()).length === 2;
      },
      { what: 'both volumes to be mounted into the pod despite the faults', timeoutMs: 15_000, observe: async () => ({ calls: await node.calls(mark), status: await node.disk.nodeStatus() }) },
    );
    t.diagnostic(`mounted after ${Math.round(performance.now() - started)} ms`);
    assert.deepEqual(await node.calls(mark, a.volumeHandle), ['NodeStageVolume UNAVAILABLE', 'NodeStageVolume UNAVAILABLE', 'NodeStageVolume UNAVAILABLE', 'NodeStageVolume OK', 'NodePublishVolume OK']);
    assert.deepEqual(await node.calls(mark, b.volumeHandle), ['NodeStageVolume OK', 'NodePublishVolume UNAVAILABLE', 'NodePublishVolume UNAVAILABLE', 'NodePublishVolume UNAVAILABLE', 'NodePublishVolume OK']);
    for (const v of [a, b]) {
      assert.equal(await node.ns.isMounted(node.globalMount(v.volumeHandle)), true, `${v.pvName} staged`);
      assert.equal(await node.ns.isMounted(node.podMountPath(pod.uid, v.pvName)), true, `${v.pvName} published`);
    }
    assert.deepEqual(await node.disk.volumesInUse(), [a.uniqueVolumeName, b.uniqueVolumeName].sort());

    // Teardown: unpublish (pv-b) and unstage (pv-a) each fail three times, then nothing is left.
    const teardown = performance.now();
    await node.disk.deletePod(pod.name);
    await waitFor(
      async () => {
        const j = await sample(mark);
        const unstaged = [a, b].every((v) => j.some((e) => e.method === 'NodeUnstageVolume' && e.volumeId === v.volumeHandle && e.phase === undefined && e.error === null));
        return unstaged && [a, b].every((v) => !existsSync(node.volumeDir(v.volumeHandle))) && (await node.disk.volumesInUse()).length === 0;
      },
      { what: 'both volumes to be torn down despite the faults', timeoutMs: 15_000, observe: async () => ({ calls: await node.calls(mark), mounts: await node.mountsUnder(node.disk.rootDir), status: await node.disk.nodeStatus() }) },
    );
    t.diagnostic(`torn down after ${Math.round(performance.now() - teardown)} ms`);
    assert.deepEqual((await node.calls(mark, a.volumeHandle)).slice(5), ['NodeUnpublishVolume OK', 'NodeUnstageVolume UNAVAILABLE', 'NodeUnstageVolume UNAVAILABLE', 'NodeUnstageVolume UNAVAILABLE', 'NodeUnstageVolume OK']);
    assert.deepEqual((await node.calls(mark, b.volumeHandle)).slice(5), ['NodeUnpublishVolume UNAVAILABLE', 'NodeUnpublishVolume UNAVAILABLE', 'NodeUnpublishVolume UNAVAILABLE', 'NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);

    assert.deepEqual(violations, [], 'nothing was removed before the call releasing it succeeded');
    for (const w of watches) assert.ok((witnessed.get(w.op) ?? 0) > 0, `the node was observed while ${w.op} kept failing`);
    t.diagnostic(`observations while failing: ${JSON.stringify(Object.fromEntries(witnessed))}`);
    assert.deepEqual(await node.mountsUnder(node.disk.rootDir), [], 'nothing mounted under the root dir');
    for (const v of [a, b]) {
      assert.equal(existsSync(node.podVolumeDir(pod.uid, v.pvName)), false, `${v.pvName}: pod volume dir removed`);
      assert.equal(existsSync(node.volumeDir(v.volumeHandle)), false, `${v.pvName}: global volume dir removed`);
      assert.deepEqual((await node.driverVolume(v.volumeHandle))?.publishedAt, [], `${v.pvName}: the driver has nothing published`);
      assert.equal((await node.driverVolume(v.volumeHandle))?.stagedAt, undefined, `${v.pvName}: the driver has nothing staged`);
    }
  });
});
