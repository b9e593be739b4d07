// `nodevol recover` on a real node: the node of KEP-6058 story 1 after the reboot (a volume
// staged by the mock driver, no pod directory, kubelet not running), the driver running again.
// The dry run changes nothing and calls nothing; a volume a pod on the node wants is refused;
// --yes unstages it through the driver's own socket and removes the global vol_data.json and
// directories; a second run finds nothing to do.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import { claim, list, node as nodeObject, persistentVolume, pod, volumeAttachment, type KubeObject } from '../support/clusterObjects.js';
import { killAll } from '../support/e2e/nodeNamespace.js';
import { nodevolArgv } from '../support/e2e/paths.js';
import { drainAndRebootDuringUnstage, mountedPod } from '../support/e2e/scenarios.js';
import { E2E_DRIVER, rootOnlySkip, TestNode, type TestVolume } from '../support/e2e/testNode.js';

const nodes: TestNode[] = [];

interface JournalLine {
  readonly volume: string;
  readonly action: string;
  readonly outcome: string;
  readonly path?: string;
  readonly reason?: string;
}

/** The cluster after kubelet restarted on story 1: attached here, gone from volumesInUse, the pod deleted. */
function clusterAfterReboot(n: TestNode, vol: TestVolume, extra: readonly KubeObject[] = []): string {
  return JSON.stringify(
    list([
      nodeObject(n.disk.nodeName, { volumesAttached: [vol.uniqueVolumeName], volumesInUse: [] }),
      persistentVolume(vol.pvName, E2E_DRIVER, vol.volumeHandle, { namespace: vol.namespace, name: vol.claimName }),
      volumeAttachment(E2E_DRIVER, vol.volumeHandle, vol.pvName, n.disk.nodeName),
      ...extra,
    ]),
  );
}

describe('nodevol recover on the node of KEP-6058 story 1', { skip: rootOnlySkip() }, () => {
  after(async () => {
    await killAll();
    for (const n of nodes) await n.disk.cleanup();
  });

  it('dry run changes nothing; a volume a pod wants is refused; --yes unstages and removes; a second run is a no-op', async () => {
    const n = await TestNode.create('recover');
    nodes.push(n);
    const m = await mountedPod(n, { gate: false });
    const { vol } = m;
    await drainAndRebootDuringUnstage(n, m);
    await n.startDriver();

    const volumeDir = n.volumeDir(vol.volumeHandle);
    const globalMount = n.globalMount(vol.volumeHandle);
    const dataFile = path.join(volumeDir, 'vol_data.json');
    const clusterFile = path.join(n.disk.base, 'cluster.json');
    const journalFile = path.join(n.disk.base, 'recover.jsonl');
    const recover = (...extra: string[]): ReturnType<typeof n.ns.run> =>
      n.ns.run(nodevolArgv('recover', '--root-dir', n.disk.rootDir, '--cluster-state', clusterFile, '--node-name', n.disk.nodeName, '--journal', journalFile, ...extra), 30_000);

    // 1. Dry run: the plan names the call and every path; nothing is called or removed.
    await writeFile(clusterFile, clusterAfterReboot(n, vol));
    let mark = await n.journalMark();
    const dry = await recover();
    assert.equal(dry.exitCode, 0, `${dry.stdout}\n${dry.stderr}`);
    assert.ok(dry.stdout.includes(`would call NodeUnstageVolume volume_id=${vol.volumeHandle} staging_target_path=${globalMount} via unix://${n.disk.layout.driverSocketPath(E2E_DRIVER)}`), dry.stdout);
    for (const p of [globalMount, dataFile, volumeDir]) assert.ok(dry.stdout.includes(p), `${p} missing from the plan:\n${dry.stdout}`);
    assert.match(dry.stdout, /Dry run: 1 volume\(s\) planned, nothing changed\. Run again with --yes to act\./);
    assert.deepEqual(await n.calls(mark), [], 'the dry run calls nothing');
    assert.ok(existsSync(globalMount) && existsSync(dataFile), 'the dry run removes nothing');

    // 2. A pod on this node that wants the volume (per the cluster): refused, exit 1, nothing called.
    await writeFile(
      clusterFile,
      clusterAfterReboot(n, vol, [pod('again', { nodeName: n.disk.nodeName, claims: [vol.claimName], namespace: vol.namespace }), claim(vol.claimName, vol.pvName, vol.namespace)]),
    );
    mark = await n.journalMark();
    const refused = await recover('--yes');
    assert.equal(refused.exitCode, 1, `${refused.stdout}\n${refused.stderr}`);
    assert.match(refused.stdout, new RegExp(`refused ${vol.uniqueVolumeName.replace(/[.^]/g, '\\$&')}: a pod on node ${n.disk.nodeName} wants it per the cluster: ${vol.namespace}/again`));
    assert.deepEqual(await n.calls(mark), []);
    assert.ok(existsSync(globalMount) && existsSync(dataFile));

    // 3. --yes: NodeUnstageVolume through the driver's socket, then the directories go.
    await writeFile(clusterFile, clusterAfterReboot(n, vol));
    mark = await n.journalMark();
    const act = await recover('--yes');
    assert.equal(act.exitCode, 0, `${act.stdout}\n${act.stderr}`);
    assert.deepEqual(await n.calls(mark), ['NodeUnstageVolume OK']);
    assert.ok(!existsSync(volumeDir), `${volumeDir} should be gone`);
    assert.ok(existsSync(n.disk.layout.csiDriverDir(E2E_DRIVER)), 'nothing above the volume dir is touched');
    const staged = await n.driverVolume(vol.volumeHandle);
    assert.equal(staged?.stagedAt, undefined, `the driver no longer has it staged: ${JSON.stringify(staged)}`);
    assert.match(act.stdout, /1 recovered, 0 failed, 0 refused\./);

    // 4. Again: nothing to do, nothing called.
    mark = await n.journalMark();
    const again = await recover('--yes');
    assert.equal(again.exitCode, 0, `${again.stdout}\n${again.stderr}`);
    assert.match(again.stdout, /^Nothing to recover/);
    assert.deepEqual(await n.calls(mark), []);

    // The journal: one JSON line per action, in order, across the runs.
    const lines = (await readFile(journalFile, 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as JournalLine);
    assert.deepEqual(
      lines.map((l) => `${l.action} ${l.outcome}`),
      ['NodeUnstageVolume planned', 'rmdir planned', 'unlink planned', 'rmdir planned', 'refuse refused', 'NodeUnstageVolume ok', 'rmdir ok', 'unlink ok', 'rmdir ok'],
    );
    assert.ok(lines.every((l) => l.volume === vol.uniqueVolumeName));
  });
});
