// KEP-6058 user stories on a real node (mirrors test/unit/volumemanager/kepStories.test.ts): the
// `nodevol agent` and `nodevol mock-driver` processes, real bind mounts, in a private mount + PID
// namespace that reboots. Each story runs with CSIGlobalMountReconstruction off (asserting the
// upstream leak) and on (asserting the fix). Assertions read the driver's journal, the files, the
// namespace's mount table, node-status.json and the volumesInUse the agent logged writing.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import { killAll } from '../support/e2e/nodeNamespace.js';
import { drainAndRebootDuringUnstage, mountedPod, restartWithHeldUnstage } from '../support/e2e/scenarios.js';
import { rootOnlySkip, TestNode } from '../support/e2e/testNode.js';
import { waitFor } from '../support/e2e/waitFor.js';

const LISTED_LINE = 'Global mount with no pod directory is marked uncertain and added into the actual state';
const SPEC_FALLBACK_LINE = 'plugin.ConstructVolumeSpec recovered vol_data from global mount';
const UNMOUNTER_FALLBACK_LINE = 'unmounter recovered vol_data from global mount';

const nodes: TestNode[] = [];
async function newNode(name: string): Promise<TestNode> {
  const node = await TestNode.create(name);
  nodes.push(node);
  return node;
}

describe('KEP-6058 e2e', { skip: rootOnlySkip() }, () => {
  after(async () => {
    await killAll();
    for (const node of nodes) await node.disk.cleanup();
  });

  describe('story 1: node drain and reboot while unstage is in progress', () => {
    it('gate off: after the restart the volume stays staged, leaves volumesInUse while attached, and is never unstaged (the bug)', async () => {
      const node = await newNode('story1-off');
      const m = await mountedPod(node, { gate: false });
      await drainAndRebootDuringUnstage(node, m);
      const { vol } = m;

      const mark = await node.journalMark();
      await node.startDriver();
      await node.startAgent({ gate: false });
      const writes = await node.waitForStatusWrites(5);

      assert.ok(existsSync(path.join(node.volumeDir(vol.volumeHandle), 'vol_data.json')), 'the staged directory stays');
      assert.ok(existsSync(node.globalMount(vol.volumeHandle)), 'globalmount stays');
      assert.deepEqual((await node.driverVolume(vol.volumeHandle))?.stagedAt, node.globalMount(vol.volumeHandle), 'the driver still has it staged');
      const status = await node.disk.nodeStatus();
      assert.ok(status.volumesAttached.some((v) => v.name === vol.uniqueVolumeName), 'still attached to this node');
      assert.deepEqual(status.volumesInUse, [], 'dropped from volumesInUse while still staged');
      assert.deepEqual(writes.filter((w) => w.volumesInUse.length > 0), [], 'never reported in use after the restart');
      assert.deepEqual(await node.calls(mark), [], 'NodeUnstageVolume is never called');
      assert.equal(await node.agentLogged(LISTED_LINE), false);
      assert.equal(await node.metric('reconstruct_volume_operations_total'), 0, 'nothing reconstructed');
    });

    it('gate on: registered from the global mount, kept in volumesInUse while the unstage runs, unstaged once, directory removed only after success', async () => {
      const node = await newNode('story1-on');
      const m = await mountedPod(node, { gate: true });
      await drainAndRebootDuringUnstage(node, m);
      const { vol } = m;
      const name = vol.uniqueVolumeName;
      const volDir = node.volumeDir(vol.volumeHandle);

      // The unstage after the restart is held 1.5 s: watch what is reported meanwhile.
      const r = await restartWithHeldUnstage(node, { vol, gate: true, keptUntilUnstaged: [path.join(volDir, 'vol_data.json'), node.globalMount(vol.volumeHandle)] });
      assert.ok(await node.agentLogged(LISTED_LINE), 'registered by the global mount listing');
      // KEP-6058's alpha reconstructGlobalVolume counts nothing; kubelet's counters are unlabelled.
      assert.equal(await node.metric('reconstruct_volume_operations_total'), 0, 'the listing counts nothing');
      assert.equal(await node.metric('reconstruct_volume_operations_errors_total'), 0);
      assert.deepEqual(r.whileHeld, { present: true, inUse: true, done: false }, 'while NodeUnstageVolume is held: the directory is there and the volume is in volumesInUse');
      assert.deepEqual(r.removedEarly, [], 'the directory was never gone before NodeUnstageVolume succeeded');
      assert.deepEqual(await node.calls(r.mark), ['NodeUnstageVolume OK'], 'NodeUnstageVolume exactly once, no NodeUnpublishVolume');
      assert.equal((r.unstaged.request as { stagingTargetPath?: string }).stagingTargetPath, node.globalMount(vol.volumeHandle));
      assert.equal(existsSync(volDir), false, 'the volume directory is removed after the unstage');

      // volumesInUse history after the restart: in use until the unstage succeeded, then never again.
      const firstWithout = r.writes.findIndex((w) => !w.volumesInUse.includes(name));
      assert.ok(firstWithout > 0, `reported in use first, then dropped: ${JSON.stringify(r.writes)}`);
      assert.ok(r.writes.slice(firstWithout).every((w) => !w.volumesInUse.includes(name)), 'never reported again');
      const unstagedAt = Date.parse(r.unstaged.time ?? '');
      assert.ok((r.writes[firstWithout]?.ts ?? 0) >= unstagedAt, `dropped at ${r.writes[firstWithout]?.ts}, only after the unstage succeeded at ${unstagedAt}`);

      assert.deepEqual(await node.mountsUnder(node.disk.rootDir), []);
      assert.equal((await node.driverVolume(vol.volumeHandle))?.stagedAt, undefined, 'the driver has nothing staged');
      assert.ok((await node.disk.nodeStatus()).volumesAttached.some((v) => v.name === name), 'volumesAttached is the controller\'s: untouched');
    });
  });

  describe('story 2: the pod-local vol_data.json is lost, the agent restarts with the bind mount present', () => {
    /** Mounted, agent SIGKILLed, pod-local vol_data.json deleted, pod deleted; the agent restarted. */
    async function lostPodLocal(nodeName: string, gate: boolean): Promise<{ node: TestNode; mark: number } & Awaited<ReturnType<typeof mountedPod>>> {
      const node = await newNode(nodeName);
      const m = await mountedPod(node, { gate });
      await node.killAgent();
      await unlink(path.join(node.podVolumeDir(m.pod.uid, m.vol.pvName), 'vol_data.json'));
      await node.disk.deletePod(m.pod.name, m.pod.namespace);
      const mark = await node.journalMark();
      await node.startAgent({ gate });
      return { node, mark, ...m };
    }

    it('gate off: reconstruction fails, the cleanup cannot build the unmounter, the global mount leaks', async () => {
      const { node, mark, vol, pod } = await lostPodLocal('story2-off', false);
      // The one cleanup attempt (after the desired state is populated) fails: no unmounter without the file.
      await waitFor(async () => (await node.metric('force_cleaned_failed_volume_operations_total')) === 1, {
        what: 'the cleanup of the volume that failed reconstruction',
        observe: () => node.metricsText(),
      });
      assert.equal(await node.metric('force_cleaned_failed_volume_operation_errors_total'), 1, 'the cleanup could not even start');
      assert.equal(await node.metric('reconstruct_volume_operations_errors_total'), 1);
      const writes = (await node.statusWrites()).length;
      await node.waitForStatusWrites(writes + 3);
      assert.ok(await node.agentLogged('Could not construct volume information'));
      assert.equal(await node.agentLogged(SPEC_FALLBACK_LINE), false);
      assert.deepEqual(await node.calls(mark), [], 'neither NodeUnpublishVolume nor NodeUnstageVolume');
      assert.equal(await node.ns.isMounted(node.globalMount(vol.volumeHandle)), true, 'the global mount leaks');
      assert.equal(await node.ns.isMounted(node.podMountPath(pod.uid, vol.pvName)), true, 'the pod mount leaks');
      assert.deepEqual(await node.disk.volumesInUse(), [], 'and it is not reported in use');
    });

    it('gate on: NodeUnpublishVolume then NodeUnstageVolume, and nothing is left', async () => {
      const { node, mark, vol, pod } = await lostPodLocal('story2-on', true);
      assert.equal(await node.agentLogged('Could not construct volume information'), false);
      assert.ok(await node.agentLogged(SPEC_FALLBACK_LINE));
      // Counted once, by the pod directory rebuilt from the global mount (the listing found the same volume).
      assert.equal(await node.metric('reconstruct_volume_operations_total'), 1);
      assert.equal(await node.metric('reconstruct_volume_operations_errors_total'), 0);
      await waitFor(async () => !existsSync(node.volumeDir(vol.volumeHandle)) && !(await node.disk.volumesInUse()).includes(vol.uniqueVolumeName), {
        what: 'the volume to be torn down and unstaged',
        observe: async () => ({ calls: await node.calls(mark), mounts: await node.mountsUnder(node.disk.rootDir) }),
      });
      assert.deepEqual(await node.calls(mark), ['NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
      assert.ok(await node.agentLogged(UNMOUNTER_FALLBACK_LINE));
      // Registered by the listing first (and logged there, as kubelet's reconstructGlobalVolume
      // does); the pod directory then finds the same volume, which is not counted twice.
      assert.ok(await node.agentLogged(LISTED_LINE), 'logged at registration by the listing');
      assert.deepEqual(await node.mountsUnder(node.disk.rootDir), [], 'nothing mounted under the root dir');
      assert.equal(existsSync(node.podVolumeDir(pod.uid, vol.pvName)), false);
      assert.equal(existsSync(node.volumeDir(vol.volumeHandle)), false);
      assert.deepEqual((await node.driverVolume(vol.volumeHandle))?.publishedAt, [], `${vol.pvName}: the driver has nothing published`);
      assert.equal((await node.driverVolume(vol.volumeHandle))?.stagedAt, undefined);
    });

    // The KEP's e2e plan: kill, delete the pod-local file, restart, THEN delete the pod. While the
    // pod still wants the volume the agent mounts it again (SetUp rewrites the pod-local file), so
    // the deletion unmounts normally with either gate: the gate-off leak needs the pod gone while
    // the agent is down (above).
    for (const gate of [false, true]) {
      it(`the KEP's order (pod deleted after the restart), gate ${gate ? 'on: reconstructed through the fallback' : 'off: reconstruction fails'}, re-mounted, then a normal unmount`, async () => {
        const node = await newNode(`story2-kep-${gate ? 'on' : 'off'}`);
        const { vol, pod } = await mountedPod(node, { gate });
        const podLocal = path.join(node.podVolumeDir(pod.uid, vol.pvName), 'vol_data.json');
        await node.killAgent();
        await unlink(podLocal);
        const mark = await node.journalMark();
        await node.startAgent({ gate });
        assert.equal(await node.agentLogged('Could not construct volume information'), !gate);
        assert.equal(await node.agentLogged(SPEC_FALLBACK_LINE), gate);
        await node.waitForCall(mark, (e) => e.method === 'NodePublishVolume' && e.phase === undefined && e.error === null, 'the pod volume mounted again');
        assert.deepEqual(await node.calls(mark), ['NodeStageVolume OK', 'NodePublishVolume OK']);
        assert.ok(existsSync(podLocal), 'SetUp wrote the pod-local vol_data.json again');

        await node.disk.deletePod(pod.name, pod.namespace);
        await waitFor(async () => !existsSync(node.volumeDir(vol.volumeHandle)) && !(await node.disk.volumesInUse()).includes(vol.uniqueVolumeName), {
          what: 'the volume to be torn down and unstaged',
          observe: async () => ({ calls: await node.calls(mark), mounts: await node.mountsUnder(node.disk.rootDir) }),
        });
        assert.deepEqual(await node.calls(mark), ['NodeStageVolume OK', 'NodePublishVolume OK', 'NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
        assert.deepEqual(await node.mountsUnder(node.disk.rootDir), []);
        assert.equal(existsSync(node.podVolumeDir(pod.uid, vol.pvName)), false);
      });
    }
  });
});
