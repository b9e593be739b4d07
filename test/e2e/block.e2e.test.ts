// A raw block volume left staged with no pod directory (KEP-6058 story 1 for volumeDevices): a
// pod uses a block PV through volumeDevices, is deleted while the driver holds
// NodeUnstageVolume, the agent is SIGKILLed and the node reboots. With
// CSIGlobalMountReconstruction on, the block listing finds it under volumeDevices/ and the agent
// unstages it at volumeDevices/staging/<pv>, then removes the block files.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import { killAll } from '../support/e2e/nodeNamespace.js';
import { drainAndRebootDuringUnstage, mountedPod, restartWithHeldUnstage } from '../support/e2e/scenarios.js';
import { rootOnlySkip, TestNode } from '../support/e2e/testNode.js';

const LISTED_LINE = 'Global mount with no pod directory is marked uncertain and added into the actual state';
const nodes: TestNode[] = [];

describe('raw block volume staged with no pod directory', { skip: rootOnlySkip() }, () => {
  after(async () => {
    await killAll();
    for (const node of nodes) await node.disk.cleanup();
  });

  it('gate on: found by the block listing, kept in volumesInUse, unstaged at volumeDevices/staging/<pv>, block files removed', async () => {
    const node = await TestNode.create('block-on');
    nodes.push(node);
    const m = await mountedPod(node, { gate: true, mode: 'Block', pvName: 'pv-block' });
    const { vol, pod } = m;
    const layout = node.disk.layout;
    const staging = layout.csiBlockStagingPath(vol.pvName);
    const publish = layout.csiBlockPublishPath(vol.pvName, pod.uid);
    const stage = (await node.journalSince(0)).find((e) => e.method === 'NodeStageVolume' && e.phase === undefined);
    assert.equal((stage?.request as { stagingTargetPath?: string } | undefined)?.stagingTargetPath, staging);
    assert.equal(await node.ns.isMounted(path.join(staging, 'dev')), true, 'staged: the backing file is bound on <staging>/dev');
    assert.equal(await node.ns.isMounted(publish), true, 'published at volumeDevices/publish/<pv>/<uid>');

    await drainAndRebootDuringUnstage(node, m);
    assert.ok(existsSync(path.join(layout.csiBlockDataDir(vol.pvName), 'vol_data.json')), 'the block volume data survives');

    const r = await restartWithHeldUnstage(node, { vol, gate: true, keptUntilUnstaged: [layout.csiBlockDataDir(vol.pvName), staging] });
    assert.ok(await node.agentLogged(LISTED_LINE), 'registered by the block listing');
    assert.deepEqual(r.whileHeld, { present: true, inUse: true, done: false }, 'while NodeUnstageVolume is held: the block files are there and the volume is in volumesInUse');
    assert.deepEqual(r.removedEarly, [], 'the block files were never gone before NodeUnstageVolume succeeded');
    assert.deepEqual(await node.calls(r.mark), ['NodeUnstageVolume OK'], 'NodeUnstageVolume exactly once, no NodeUnpublishVolume');
    assert.equal((r.unstaged.request as { stagingTargetPath?: string }).stagingTargetPath, staging, 'unstaged at volumeDevices/staging/<pv>');
    assert.equal(r.unstaged.volumeId, vol.volumeHandle);

    assert.equal(existsSync(layout.csiBlockVolumeDir(vol.pvName)), false, 'volumeDevices/<pv> (data, dev) removed');
    assert.equal(existsSync(staging), false, 'volumeDevices/staging/<pv> removed');
    assert.equal(existsSync(publish), false, 'nothing published');
    assert.deepEqual(await node.mountsUnder(node.disk.rootDir), [], 'nothing mounted under the root dir');
    assert.equal((await node.driverVolume(vol.volumeHandle))?.stagedAt, undefined, 'the driver has nothing staged');
    const firstWithout = r.writes.findIndex((w) => !w.volumesInUse.includes(vol.uniqueVolumeName));
    assert.ok(firstWithout > 0, `reported in use while staged, then dropped: ${JSON.stringify(r.writes)}`);
    assert.ok(r.writes.slice(firstWithout).every((w) => !w.volumesInUse.includes(vol.uniqueVolumeName)), 'never reported again');
    assert.ok((r.writes[firstWithout]?.ts ?? 0) >= Date.parse(r.unstaged.time ?? ''), 'dropped only after the unstage succeeded');
  });
});
