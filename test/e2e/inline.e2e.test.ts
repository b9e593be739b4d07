// CSI inline ephemeral volumes on a real node (kubernetes#108997; mirrors the inline cases of
// test/unit/volumemanager/reconstruction.test.ts): the pod is deleted while the agent is down,
// the restarted agent reconstructs the volume under its pod-qualified name, and the driver answers
// ABORTED twice to NodeUnpublishVolume ("operation still ongoing"); the volume must still be
// unpublished and its pod volume directory removed, with either gate position.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import { makeEphemeralVolumeHandle } from '../../src/layout/names.js';
import { mockBackingPaths } from '../../src/mockdriver/volumes.js';
import { inlineUniqueVolumeName } from '../support/e2e/nodeDisk.js';
import { killAll } from '../support/e2e/nodeNamespace.js';
import { E2E_DRIVER, rootOnlySkip, TestNode } from '../support/e2e/testNode.js';
import { waitFor } from '../support/e2e/waitFor.js';

const nodes: TestNode[] = [];

describe('inline ephemeral CSI volume, pod deleted while the agent is down (#108997)', { skip: rootOnlySkip() }, () => {
  after(async () => {
    await killAll();
    for (const node of nodes) await node.disk.cleanup();
  });

  for (const gate of [false, true]) {
    it(`gate ${gate ? 'on' : 'off'}: reconstructed, NodeUnpublishVolume ABORTED twice is retried with backoff, then unpublished and the pod volume dir removed`, async (t) => {
      const node = await TestNode.create(`inline-${gate ? 'on' : 'off'}`);
      nodes.push(node);
      await node.startDriver();
      const pod = await node.disk.writePod({ name: 'scratchy', volumes: [{ name: 'scratch', csi: { driver: E2E_DRIVER, volumeAttributes: { size: '1Mi' } } }] });
      const handle = makeEphemeralVolumeHandle(pod.uid, 'scratch');
      const name = inlineUniqueVolumeName(pod.uid, 'scratch');
      const volDir = node.podVolumeDir(pod.uid, 'scratch');
      const target = node.podMountPath(pod.uid, 'scratch');

      await node.startAgent({ gate });
      const publish = await node.waitForCall(0, (e) => e.method === 'NodePublishVolume' && e.phase === undefined, 'the ephemeral NodePublishVolume');
      assert.equal(publish.error, null, JSON.stringify(publish.error));
      assert.equal(publish.volumeId, handle);
      const req = publish.request as { stagingTargetPath: string; targetPath: string; volumeContext: Record<string, string> };
      assert.equal(req.stagingTargetPath, '', 'never staged');
      assert.equal(req.targetPath, target);
      // The e2e CSIDriver has podInfoOnMount, so kubelet adds the pod keys (getPodInfoAttrs); the
      // pod names no service account, so the cluster dir gives it "default", as the API server does.
      assert.deepEqual(req.volumeContext, {
        size: '1Mi',
        'csi.storage.k8s.io/pod.name': 'scratchy',
        'csi.storage.k8s.io/pod.namespace': 'default',
        'csi.storage.k8s.io/pod.uid': pod.uid,
        'csi.storage.k8s.io/serviceAccount.name': 'default',
        'csi.storage.k8s.io/ephemeral': 'true',
      });
      assert.deepEqual(await node.calls(0), ['NodePublishVolume OK']);
      assert.equal(await node.ns.isMounted(target), true);
      assert.equal((await node.driverVolume(handle))?.ephemeral, true);
      assert.deepEqual(existsSync(node.csiPluginDir) ? (await node.mountsUnder(node.csiPluginDir)) : [], [], 'no global mount');

      await node.killAgent();
      await node.disk.deletePod(pod.name);
      await node.disk.writeFaults({ faults: [{ method: 'NodeUnpublishVolume', code: 'ABORTED', times: 2 }] });
      const mark = await node.journalMark();
      await node.startAgent({ gate });
      assert.equal(await node.agentLogged('Could not construct volume information'), false, 'reconstruction succeeds (the #108997 fix)');

      // While NodeUnpublishVolume fails, the pod volume dir, its vol_data.json and the mount stay.
      const seenWhileFailing: boolean[] = [];
      const unpublishes = async (): Promise<string[]> => (await node.calls(mark)).filter((c) => c.startsWith('NodeUnpublishVolume'));
      await waitFor(
        async () => {
          const before = await unpublishes();
          const failing = before.length > seenWhileFailing.length && !before.includes('NodeUnpublishVolume OK');
          const present = existsSync(path.join(volDir, 'vol_data.json')) && (await node.ns.isMounted(target));
          const after = await unpublishes();
          if (failing && !after.includes('NodeUnpublishVolume OK')) seenWhileFailing.push(present);
          return after.includes('NodeUnpublishVolume OK') && !existsSync(volDir);
        },
        { what: 'the inline volume to be unpublished and its pod volume dir removed', timeoutMs: 10_000, observe: async () => ({ calls: await node.calls(mark), volDir: existsSync(volDir) }) },
      );
      assert.deepEqual(seenWhileFailing, [true, true], 'the pod volume dir and its mount stay while NodeUnpublishVolume fails');
      assert.deepEqual(await node.calls(mark), ['NodeUnpublishVolume ABORTED', 'NodeUnpublishVolume ABORTED', 'NodeUnpublishVolume OK'], 'never staged, never unstaged');
      const times = (await node.journalSince(mark)).filter((e) => e.method === 'NodeUnpublishVolume' && e.phase === undefined).map((e) => Date.parse(e.time ?? ''));
      const gaps = times.slice(1).map((ms, i) => ms - (times[i] ?? 0));
      t.diagnostic(`gaps between NodeUnpublishVolume attempts: ${JSON.stringify(gaps)} ms`);
      assert.ok((gaps[0] ?? 0) >= 500 && (gaps[1] ?? 0) >= 1000, `exponential backoff between attempts: ${JSON.stringify(gaps)}`);

      assert.deepEqual(await node.mountsUnder(node.disk.rootDir), [], 'nothing mounted under the root dir');
      assert.equal(existsSync(volDir), false, 'the pod volume dir is removed');
      assert.equal(await node.driverVolume(handle), undefined, 'the driver deleted the ephemeral volume');
      assert.equal(existsSync(mockBackingPaths(node.disk.driverStateDir, handle).dir), false);
      const writes = await node.waitForStatusWrites(2);
      assert.ok(writes.every((w) => !w.volumesInUse.includes(name)), 'an inline volume is never reported in use');
    });
  }
});
