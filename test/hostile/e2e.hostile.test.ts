/**
 * A partial cluster view never tears down a live volume, and teardown paths stay confined (and
 * "a cluster dir over a limit deletes nothing"; docs/security.md), on a real
 * node: `nodevol agent` and `nodevol mock-driver` in a private mount namespace, real bind mounts.
 */
import assert from 'node:assert/strict';
import { mkdir, rmdir, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import { killAll } from '../support/e2e/nodeNamespace.js';
import { mountedPod } from '../support/e2e/scenarios.js';
import { rootOnlySkip, TestNode } from '../support/e2e/testNode.js';
import { waitFor } from '../support/e2e/waitFor.js';

const nodes: TestNode[] = [];
async function newNode(name: string): Promise<TestNode> {
  const node = await TestNode.create(name);
  nodes.push(node);
  return node;
}

describe('hostile e2e', { skip: rootOnlySkip() }, () => {
  after(async () => {
    await killAll();
    for (const node of nodes) await node.disk.cleanup();
  });

  it('10,001 manifest files ahead of a running pod: its volume is neither unpublished nor unstaged, before or after a restart', async () => {
    const node = await newNode('hostile-limit');
    const m = await mountedPod(node, { gate: false });
    const target = node.podMountPath(m.pod.uid, m.vol.pvName);
    const mark = await node.journalMark();
    // Empty manifests that sort before pod-default-app.yaml and pv-pv-1.yaml: those two are past the file limit.
    for (let i = 0; i <= 10_000; i++) await writeFile(path.join(node.disk.manifestsDir, `a-${String(i).padStart(5, '0')}.yaml`), '');
    await waitFor(async () => /manifest files, more than the limit of 10000/.test(await node.disk.readLog('agent')), { what: 'the agent to log the file limit', timeoutMs: 90_000, observe: async () => (await node.disk.readLog('agent')).slice(-3000) });
    await node.waitForStatusWrites(3);
    assert.deepEqual(await node.calls(mark), [], 'no NodeUnpublishVolume, no NodeUnstageVolume');
    assert.equal(await node.ns.isMounted(target), true);

    await node.killAgent();
    await node.startAgent({ gate: false });
    await node.waitForStatusWrites(3);
    assert.deepEqual(await node.calls(mark), [], 'nothing torn down after the restart either');
    assert.equal(await node.ns.isMounted(target), true);
    assert.ok((await node.disk.volumesInUse()).includes(m.vol.uniqueVolumeName));
  });

  it('a pod volume whose mount dir is a symlink to a tmpfs outside the root: no NodeUnpublishVolume, the tmpfs stays mounted', async () => {
    const node = await newNode('hostile-symlink');
    const m = await mountedPod(node, { gate: false });
    const target = node.podMountPath(m.pod.uid, m.vol.pvName);
    await node.killAgent();
    await node.ns.runOk(['umount', target]);
    await rmdir(target);
    const outside = path.join(node.disk.base, 'outside-tmpfs');
    await mkdir(outside);
    await node.ns.runOk(['mount', '-t', 'tmpfs', 'tmpfs', outside]);
    await symlink(outside, target);
    await node.disk.deletePod(m.pod.name);
    const mark = await node.journalMark();
    await node.startAgent({ gate: false });
    // The agent tries to tear the volume down (its pod is gone): wait for two failed TearDowns, or a successful one (the bug).
    const unmounts = async (status: string): Promise<number> => {
      const re = new RegExp(`^storage_operation_duration_seconds_count\\{[^}]*operation_name="volume_unmount"[^}]*status="${status}"`);
      const line = (await node.metricsText()).split('\n').find((l) => re.test(l));
      return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    await waitFor(async () => (await unmounts('fail-unknown')) >= 2 || (await unmounts('success')) > 0, { what: 'TearDown attempts', timeoutMs: 20_000 });
    assert.equal(await unmounts('success'), 0, 'TearDown never succeeds through the symlink');
    assert.deepEqual((await node.calls(mark)).filter((c) => c.startsWith('NodeUnpublishVolume')), [], 'the driver is never told to unmount it');
    assert.equal(await node.ns.isMounted(outside), true, 'the unrelated tmpfs outside the root is still mounted');
  });
});
