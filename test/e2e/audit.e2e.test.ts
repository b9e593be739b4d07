// `nodevol audit` on a real node: the node of KEP-6058 story 1 after the reboot and before the
// agent starts again (a volume staged with no pod directory), run inside the node's namespace.
// With CSIGlobalMountReconstruction off it reports the volume orphaned (exit 1), with it on
// recovered (exit 0); once the agent (gate on) has unstaged it, there is nothing left to report.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';

import { killAll } from '../support/e2e/nodeNamespace.js';
import { nodevolArgv } from '../support/e2e/paths.js';
import { drainAndRebootDuringUnstage, mountedPod } from '../support/e2e/scenarios.js';
import { GATE, rootOnlySkip, TestNode } from '../support/e2e/testNode.js';
import { waitFor } from '../support/e2e/waitFor.js';

interface AuditVolume {
  readonly uniqueName: string;
  readonly driver: string;
  readonly volumeHandle: string | null;
  readonly specName: string;
  readonly mode: string;
  readonly pods: readonly unknown[];
  readonly global: { readonly deviceMountPath: string; readonly mounted: boolean; readonly hasSpecVolID: boolean } | null;
  readonly verdict: string;
  readonly verdictWithGate: string;
}

interface AuditReport {
  readonly rootDir: string;
  readonly featureGates: Record<string, boolean>;
  readonly volumes: readonly AuditVolume[];
  readonly failed: readonly unknown[];
  readonly summary: { readonly volumes: number; readonly tracked: number; readonly recovered: number; readonly orphaned: number; readonly failed: number };
}

const nodes: TestNode[] = [];

/** Runs `nodevol audit -o json` inside the node's namespace; its exit code and parsed report. */
async function audit(node: TestNode, gate: boolean): Promise<{ exitCode: number | null; report: AuditReport }> {
  const r = await node.ns.run(nodevolArgv('audit', '--root-dir', node.disk.rootDir, '-o', 'json', '--feature-gates', `${GATE}=${gate}`), 20_000);
  let report: AuditReport;
  try {
    report = JSON.parse(r.stdout) as AuditReport;
  } catch (err) {
    throw new Error(`audit (gate ${gate}) printed no JSON (exit ${r.exitCode ?? r.signal}): ${String(err)}; stdout: ${r.stdout.slice(0, 500)}; stderr: ${r.stderr.slice(0, 1000)}`);
  }
  return { exitCode: r.exitCode, report };
}

describe('nodevol audit on the node of KEP-6058 story 1', { skip: rootOnlySkip() }, () => {
  after(async () => {
    await killAll();
    for (const node of nodes) await node.disk.cleanup();
  });

  it('after the reboot, before the agent restarts: orphaned with the gate off (exit 1), recovered with it on (exit 0); nothing after the recovery', async () => {
    const node = await TestNode.create('audit');
    nodes.push(node);
    const m = await mountedPod(node, { gate: false });
    const { vol } = m;

    const mountedNow = await audit(node, false);
    assert.equal(mountedNow.exitCode, 0, 'a mounted pod volume is tracked');
    assert.deepEqual(mountedNow.report.volumes.map((v) => [v.uniqueName, v.verdict, v.pods.length, v.global?.mounted]), [[vol.uniqueVolumeName, 'tracked', 1, true]]);

    await drainAndRebootDuringUnstage(node, m);

    const off = await audit(node, false);
    assert.equal(off.exitCode, 1, `orphaned: exit 1; report: ${JSON.stringify(off.report.summary)}`);
    assert.equal(off.report.rootDir, node.disk.rootDir);
    assert.deepEqual(off.report.featureGates[GATE], false);
    assert.deepEqual(
      off.report.volumes.map((v) => ({ uniqueName: v.uniqueName, driver: v.driver, volumeHandle: v.volumeHandle, specName: v.specName, mode: v.mode, pods: v.pods, global: v.global, verdict: v.verdict, verdictWithGate: v.verdictWithGate })),
      [
        {
          uniqueName: vol.uniqueVolumeName,
          driver: 'mock.csi.nodevol.io',
          volumeHandle: vol.volumeHandle,
          specName: vol.pvName,
          mode: 'Filesystem',
          pods: [],
          global: { deviceMountPath: node.globalMount(vol.volumeHandle), mounted: false, hasSpecVolID: true },
          verdict: 'orphaned',
          verdictWithGate: 'recovered',
        },
      ],
    );
    assert.deepEqual(off.report.failed, []);
    assert.equal(off.report.summary.orphaned, 1);

    const on = await audit(node, true);
    assert.equal(on.exitCode, 0, `recovered: exit 0; report: ${JSON.stringify(on.report.summary)}`);
    assert.deepEqual(on.report.featureGates[GATE], true);
    assert.deepEqual(on.report.volumes.map((v) => [v.uniqueName, v.verdict, v.verdictWithGate]), [[vol.uniqueVolumeName, 'recovered', 'recovered']]);
    assert.deepEqual({ recovered: on.report.summary.recovered, orphaned: on.report.summary.orphaned }, { recovered: 1, orphaned: 0 });

    // What the audit said the gate would do, the agent with the gate on does.
    await node.startDriver();
    await node.startAgent({ gate: true });
    await waitFor(async () => (await node.calls()).includes('NodeUnstageVolume OK') && !(await node.disk.volumesInUse()).includes(vol.uniqueVolumeName), {
      what: 'the agent to unstage the recovered volume',
      observe: () => node.calls(),
    });
    const afterRecovery = await waitFor(
      async () => {
        const a = await audit(node, false);
        return a.report.volumes.length === 0 ? a : false;
      },
      { what: 'the audit to find nothing left', timeoutMs: 10_000 },
    );
    assert.equal(afterRecovery.exitCode, 0);
    assert.deepEqual(afterRecovery.report.summary, { ...afterRecovery.report.summary, volumes: 0, orphaned: 0, failed: 0 });
  });
});
