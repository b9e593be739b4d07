// KEP-6058's PRR rollback test on a real node: upgrade -> downgrade -> upgrade. The real
// `nodevol agent` runs three lives with CSIGlobalMountReconstruction on, off, on, each one
// SIGKILLed (a kubelet restart: the mounts stay), over a filesystem and a raw block volume that a
// pod uses throughout. Each life must read what the lives before it wrote (the global
// vol_data.json with KEP-6058's specVolID and volumeLifecycleMode is written whatever the gate),
// lose nothing (no NodeUnpublishVolume, no NodeUnstageVolume, every mount and volume data file
// still there, no reconstruction error) and keep every staged volume in volumesInUse at every
// node status update. The last life then tears everything down cleanly when the pod goes.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import { killAll } from '../support/e2e/nodeNamespace.js';
import { rootOnlySkip, TestNode, type TestVolume } from '../support/e2e/testNode.js';
import { waitFor } from '../support/e2e/waitFor.js';

const nodes: TestNode[] = [];

describe('PRR: upgrade -> downgrade -> upgrade (CSIGlobalMountReconstruction on, off, on across agent restarts)', { skip: rootOnlySkip() }, () => {
  after(async () => {
    await killAll();
    for (const n of nodes) await n.disk.cleanup();
  });

  it('nothing is lost and no staged volume ever leaves volumesInUse; the last life unpublishes and unstages cleanly', async () => {
    const node = await TestNode.create('rollback');
    nodes.push(node);
    await node.startDriver();
    const fs = await node.createVolume('pv-fs');
    const blk = await node.createVolume('pv-blk', 'Block');
    const pod = await node.disk.writePod({
      name: 'app',
      volumes: [
        { name: 'data', claimName: fs.claimName },
        { name: 'dev', claimName: blk.claimName },
      ],
      blockVolumes: ['dev'],
    });
    const layout = node.disk.layout;
    const names = [fs.uniqueVolumeName, blk.uniqueVolumeName].sort();
    const mountPoints = [
      node.podMountPath(pod.uid, fs.pvName),
      node.globalMount(fs.volumeHandle),
      layout.csiBlockPublishPath(blk.pvName, pod.uid),
      path.join(layout.csiBlockStagingPath(blk.pvName), 'dev'),
    ];
    const dataFiles = [
      path.join(node.podVolumeDir(pod.uid, fs.pvName), 'vol_data.json'),
      path.join(node.volumeDir(fs.volumeHandle), 'vol_data.json'),
      path.join(layout.csiBlockDataDir(blk.pvName), 'vol_data.json'),
    ];
    const published = async (mark: number, vol: TestVolume): Promise<void> => {
      await node.waitForCall(mark, (e) => e.method === 'NodePublishVolume' && e.volumeId === vol.volumeHandle && e.error === null, `NodePublishVolume OK for ${vol.pvName}`);
    };

    // One life of the agent with the gate as given; after it is ready, several node status
    // updates, each of which must list both volumes.
    const life = async (gate: boolean, first: boolean): Promise<string[]> => {
      const mark = await node.journalMark();
      await node.startAgent({ gate });
      if (first) {
        await published(mark, fs);
        await published(mark, blk);
      }
      const writes = await node.waitForStatusWrites(first ? 8 : 5);
      for (const w of writes) assert.deepEqual([...w.volumesInUse].sort(), names, `gate ${gate ? 'on' : 'off'}: every node status update lists both staged volumes`);
      assert.deepEqual([...(await node.disk.volumesInUse())].sort(), names);
      for (const p of mountPoints) assert.equal(await node.ns.isMounted(p), true, `gate ${gate ? 'on' : 'off'}: ${p} still mounted`);
      for (const f of dataFiles) assert.ok(existsSync(f), `gate ${gate ? 'on' : 'off'}: ${f} still there`);
      assert.equal(await node.metric('reconstruct_volume_operations_errors_total'), 0, `gate ${gate ? 'on' : 'off'}: no reconstruction error`);
      const calls = await node.calls(mark);
      assert.ok(!calls.some((c) => c.startsWith('NodeUnpublishVolume') || c.startsWith('NodeUnstageVolume')), `gate ${gate ? 'on' : 'off'}: nothing torn down: ${JSON.stringify(calls)}`);
      return calls;
    };

    // Upgrade: the gate on mounts the pod.
    const firstCalls = await life(true, true);
    assert.deepEqual(firstCalls.filter((c) => c.endsWith(' OK')).sort(), ['NodePublishVolume OK', 'NodePublishVolume OK', 'NodeStageVolume OK', 'NodeStageVolume OK']);
    const global = JSON.parse(await readFile(path.join(node.volumeDir(fs.volumeHandle), 'vol_data.json'), 'utf8')) as Record<string, string>;
    assert.equal(global['specVolID'], fs.pvName, 'the global vol_data.json carries specVolID');
    // Downgrade: a kubelet without the gate reads the files the gate-on life wrote.
    await node.killAgent();
    await life(false, false);
    // Upgrade again.
    await node.killAgent();
    await life(true, false);

    // The pod goes: the last life unpublishes and unstages both, and only then drops them.
    const mark = await node.journalMark();
    await node.disk.deletePod(pod.name, pod.namespace);
    await waitFor(async () => (await node.disk.volumesInUse()).length === 0 && (await node.mountsUnder(node.disk.rootDir)).length === 0, {
      what: 'both volumes unpublished, unstaged and dropped from volumesInUse',
      timeoutMs: 20_000,
      observe: async () => ({ calls: await node.calls(mark), mounts: await node.mountsUnder(node.disk.rootDir), status: await node.disk.nodeStatus() }),
    });
    const teardown = await node.calls(mark);
    for (const vol of [fs, blk]) {
      assert.deepEqual(await node.calls(mark, vol.volumeHandle), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK'], `${vol.pvName}: ${JSON.stringify(teardown)}`);
      const recorded = await node.driverVolume(vol.volumeHandle);
      assert.equal(recorded?.stagedAt, undefined, `${vol.pvName}: nothing staged at the driver`);
      assert.deepEqual(recorded?.publishedAt ?? [], []);
    }
    const journal = await node.journalSince(mark);
    const writes = await node.statusWrites();
    for (const vol of [fs, blk]) {
      const unstaged = journal.find((e) => e.method === 'NodeUnstageVolume' && e.volumeId === vol.volumeHandle && e.phase === undefined && e.error === null);
      const firstWithout = writes.find((w) => !w.volumesInUse.includes(vol.uniqueVolumeName));
      assert.ok(
        firstWithout !== undefined && firstWithout.ts >= Date.parse(unstaged?.time ?? ''),
        `${vol.pvName} dropped only after its NodeUnstageVolume succeeded: unstage ${JSON.stringify(unstaged)}, first write without it ${JSON.stringify(firstWithout)}, ` +
          `calls ${JSON.stringify(await node.calls(mark))}, writes ${JSON.stringify(writes.slice(-6))}`,
      );
    }
    assert.equal(existsSync(node.volumeDir(fs.volumeHandle)), false);
    assert.equal(existsSync(layout.csiBlockVolumeDir(blk.pvName)), false);
  });
});
