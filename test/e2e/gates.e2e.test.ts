// Gate CSIUnpublishBeforeUnstageAfterReconstruction on a real node (the KEP-6058 alpha gap): the
// `nodevol agent` and `nodevol mock-driver` (strict: it refuses NodeUnstageVolume while a target
// is published, as csi-driver-host-path does), real bind mounts, a private mount + PID namespace
// that reboots. The pod is mounted, the node reboots, the pod-local vol_data.json is lost and the
// pod is deleted; the agent comes back with CSIGlobalMountReconstruction on, and the gate off
// (the refusals repeat, logged) or on (NodeUnpublishVolume, then NodeUnstageVolume).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import { killAll } from '../support/e2e/nodeNamespace.js';
import { mountedPod, type MountedPod } from '../support/e2e/scenarios.js';
import { rootOnlySkip, TestNode } from '../support/e2e/testNode.js';
import { waitFor } from '../support/e2e/waitFor.js';

const GATE = 'CSIUnpublishBeforeUnstageAfterReconstruction';
const PAIRED_LINE = 'Pod volume directory that could not be reconstructed is paired by PV name with a listed volume; it is unpublished before the volume is unstaged';

const nodes: TestNode[] = [];

/** Mounted with both gates as given, rebooted, pod-local file lost, pod deleted; driver and agent started again. */
async function alphaGap(name: string, on: boolean): Promise<{ node: TestNode; mark: number } & MountedPod> {
  const node = await TestNode.create(name);
  nodes.push(node);
  const m = await mountedPod(node, { gate: true });
  await node.killAgent();
  await node.reboot();
  await unlink(path.join(node.podVolumeDir(m.pod.uid, m.vol.pvName), 'vol_data.json'));
  await node.disk.deletePod(m.pod.name, m.pod.namespace);
  const recorded = await node.driverVolume(m.vol.volumeHandle);
  assert.equal(recorded?.publishedAt.length, 1, 'after the reboot the driver still records the target published');
  const mark = await node.journalMark();
  await node.startDriver();
  await node.startAgent({ gate: true, gates: { [GATE]: on } });
  return { node, mark, ...m };
}

describe('gate CSIUnpublishBeforeUnstageAfterReconstruction e2e (the KEP-6058 alpha gap)', { skip: rootOnlySkip() }, () => {
  after(async () => {
    await killAll();
    for (const node of nodes) await node.disk.cleanup();
  });

  it('gate off: NodeUnstageVolume without NodeUnpublishVolume, refused again and again by the strict driver and logged each time; the volume stays in volumesInUse', async () => {
    const { node, mark, vol } = await alphaGap('alpha-gap-off', false);
    await waitFor(async () => (await node.calls(mark)).filter((c) => c.startsWith('NodeUnstageVolume')).length >= 3, {
      what: 'three refused NodeUnstageVolume calls',
      timeoutMs: 20_000,
      observe: () => node.calls(mark),
    });
    const calls = await node.calls(mark);
    assert.ok(calls.every((c) => c.startsWith('NodeUnstageVolume ') && c !== 'NodeUnstageVolume OK'), JSON.stringify(calls));
    const failures = (await node.log('agent')).filter((l) => l.msg.startsWith('Operation for ') && l.msg.includes('failed. No retries permitted until'));
    assert.ok(failures.length >= 2, `each refusal is logged: ${failures.length}`);
    assert.equal(await node.agentLogged(PAIRED_LINE), false);
    assert.ok((await node.disk.volumesInUse()).includes(vol.uniqueVolumeName), 'the safe direction: still reported in use');
    assert.equal((await node.driverVolume(vol.volumeHandle))?.stagedAt, node.globalMount(vol.volumeHandle));
  });

  it('gate on: NodeUnpublishVolume then NodeUnstageVolume both succeed, the directories are gone, and the volume leaves volumesInUse only afterwards', async () => {
    const { node, mark, vol, pod } = await alphaGap('alpha-gap-on', true);
    const name = vol.uniqueVolumeName;
    // The agent logs "Updated node status volumesInUse" after it wrote node-status.json: wait for
    // the logged write too, not only the file, or the log is read before its line.
    const droppedInLog = async (): Promise<boolean> => (await node.statusWrites()).some((w) => !w.volumesInUse.includes(name));
    await waitFor(async () => !existsSync(node.volumeDir(vol.volumeHandle)) && !(await node.disk.volumesInUse()).includes(name) && (await droppedInLog()), {
      what: 'the volume to be unpublished, unstaged and dropped (file and log)',
      timeoutMs: 20_000,
      observe: async () => ({ calls: await node.calls(mark), mounts: await node.mountsUnder(node.disk.rootDir) }),
    });
    assert.deepEqual(await node.calls(mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    const unpublish = (await node.journalSince(mark)).find((e) => e.method === 'NodeUnpublishVolume' && e.phase === undefined);
    assert.equal((unpublish?.request as { targetPath?: string } | undefined)?.targetPath, node.podMountPath(pod.uid, vol.pvName));
    assert.ok(await node.agentLogged(PAIRED_LINE));
    assert.equal(existsSync(node.podVolumeDir(pod.uid, vol.pvName)), false, 'the pod volume dir is gone');
    assert.equal(existsSync(node.volumeDir(vol.volumeHandle)), false, 'the global volume dir is gone');
    assert.deepEqual(await node.mountsUnder(node.disk.rootDir), []);
    const recorded = await node.driverVolume(vol.volumeHandle);
    assert.equal(recorded?.stagedAt, undefined);
    assert.deepEqual(recorded?.publishedAt ?? [], []);
    // volumesInUse: reported in use until NodeUnstageVolume succeeded, never after.
    const unstaged = (await node.journalSince(mark)).find((e) => e.method === 'NodeUnstageVolume' && e.phase === undefined && e.error === null);
    const writes = await node.statusWrites();
    const firstWithout = writes.findIndex((w) => !w.volumesInUse.includes(name));
    assert.ok(firstWithout > 0, `reported in use first, then dropped: ${JSON.stringify(writes)}`);
    assert.ok((writes[firstWithout]?.ts ?? 0) >= Date.parse(unstaged?.time ?? ''), 'dropped only after the unstage succeeded');
    assert.ok(writes.slice(firstWithout).every((w) => !w.volumesInUse.includes(name)));
  });
});
