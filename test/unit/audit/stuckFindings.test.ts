// "Stuck is visible", the audit's side (docs/reference/audit.md): a volume still staged here whose teardown
// the driver keeps refusing is reported from the agent's status file (finding `stuck`) in JSON,
// table, summary and prom output, without a log and without calling the driver; the file is read
// bounded, regular files only, never through a symlink out of the root dir.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { SyncReadFileSystem } from '../../../src/adapters/node/syncReadFs.js';
import { runAudit } from '../../../src/audit/audit.js';
import { exitCodeFor } from '../../../src/audit/report.js';
import { readStuckOperations } from '../../../src/audit/stuckFindings.js';
import { renderJson, renderProm, renderSummary, renderTable } from '../../../src/cli/auditOutput.js';
import { stuckOperationsPath, type StuckOperation, type StuckOperationsFile } from '../../../src/kubelet/stuckOperationsFile.js';
import { NODEVOL_BIN } from '../../support/cliProcess.js';
import { list, node } from '../../support/clusterObjects.js';
import { auditInput } from '../../support/hosts.js';
import { NodeFixture } from '../../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';
const NAME = (handle: string): string => `kubernetes.io/csi/${DRIVER}^${handle}`;

function entry(handle: string, extra: Partial<StuckOperation> = {}): StuckOperation {
  return {
    volumeName: NAME(handle),
    driver: DRIVER,
    podName: '',
    operation: 'unmount_device',
    firstFailure: '2026-12-01T03:00:00.000Z',
    lastFailure: '2026-12-01T03:10:00.000Z',
    failures: 12,
    lastError: `UnmountDevice failed: rpc error: code = FailedPrecondition desc = volume ${handle} is still published`,
    grpcCode: 'FailedPrecondition',
    targets: [],
    ...extra,
  };
}

describe('nodevol audit: stuck volumes from the agent\'s status file', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  async function writeStatus(entries: StuckOperation[]): Promise<void> {
    const body: StuckOperationsFile = { version: 1, writtenAt: '2026-12-01T03:10:00.500Z', entries };
    await mkdir(path.join(fx.root, 'nodevol'), { recursive: true });
    await writeFile(stuckOperationsPath(fx.root), JSON.stringify(body));
  }

  /** The alpha gap after a reboot: vol-1 staged, a pod dir naming it whose pod-local file is lost, nothing bind mounted. */
  async function alphaGap(): Promise<string> {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    return fx.podVolume({ uid: 'pod-a', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent' });
  }

  async function audit(gateOn: boolean): ReturnType<typeof runAudit> {
    const fs = new SyncReadFileSystem();
    const stuckOperations = await readStuckOperations(fs, fx.root);
    return runAudit({ ...auditInput(fx, { gateOn, fs }), ...(stuckOperations === undefined ? {} : { stuckOperations }) });
  }

  for (const gateOn of [false, true]) {
    it(`a staged volume the driver refuses to unstage is a stuck finding naming the pod dir left behind (gate ${gateOn ? 'on' : 'off'})`, async () => {
      const podDir = await alphaGap();
      await writeStatus([entry('vol-1')]);
      const r = await audit(gateOn);
      const s = r.stuckOperations;
      assert.ok(s !== undefined);
      assert.equal(s.source, stuckOperationsPath(fx.root));
      assert.equal(s.writtenAt, '2026-12-01T03:10:00.500Z');
      assert.equal(s.stale, 0);
      assert.equal(s.findings.length, 1);
      const f = s.findings[0]!;
      assert.equal(f.uniqueName, NAME('vol-1'));
      assert.equal(f.operation, 'unmount_device');
      assert.equal(f.grpcCode, 'FailedPrecondition');
      assert.equal(f.failures, 12);
      assert.deepEqual(f.podDirs, [{ path: podDir, mounted: false, reconstructs: false }]);
      assert.match(f.reason, /^staged at .*\/globalmount; the agent has failed unmount_device \(NodeUnstageVolume\) 12 times from 2026-12-01T03:00:00\.000Z/);
      assert.match(f.reason, /the driver answers FailedPrecondition: ".*is still published"/);
      assert.match(f.reason, new RegExp(`Pod volume directories still naming it: ${podDir} \\(not mounted, cannot be reconstructed\\): if the driver still has one published, NodeUnpublishVolume it`));
      assert.equal(r.summary.stuck, 1);
      // With the gate the volume itself is recovered, not orphaned: the stuck finding alone makes it a problem.
      assert.equal(exitCodeFor(r), 1);
    });
  }

  it('an entry for a volume no longer on disk is stale, not a finding', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-2', specVolID: 'pv-2' });
    await writeStatus([entry('vol-gone')]);
    const r = await audit(true);
    assert.deepEqual(r.stuckOperations?.findings, []);
    assert.equal(r.stuckOperations?.stale, 1);
    assert.equal(r.summary.stuck, 0);
    assert.equal(exitCodeFor(r), 0);
  });

  it('no status file: no stuckOperations section and no summary.stuck (the JSON shape is unchanged)', async () => {
    await alphaGap();
    const r = await audit(true);
    assert.equal('stuckOperations' in r, false);
    assert.equal('stuck' in r.summary, false);
  });

  it('a status dir that is a symlink out of the root dir is not followed', async () => {
    await alphaGap();
    const outside = path.join(fx.base, 'outside');
    await mkdir(outside);
    await writeFile(path.join(outside, 'stuck-operations.json'), JSON.stringify({ version: 1, writtenAt: '2026-12-01T03:10:00.500Z', entries: [entry('vol-1')] }));
    await symlink(outside, path.join(fx.root, 'nodevol'));
    const r = await audit(true);
    assert.deepEqual(r.stuckOperations?.findings, []);
    assert.match(r.stuckOperations?.error ?? '', /resolves outside the root dir/);
  });

  it('a FIFO or a malformed file is refused with the reason, at once', async () => {
    await alphaGap();
    await mkdir(path.join(fx.root, 'nodevol'));
    const fifo = spawnSync('mkfifo', [stuckOperationsPath(fx.root)]);
    if (fifo.status === 0) {
      const r = await audit(true);
      assert.match(r.stuckOperations?.error ?? '', /stuck-operations\.json/);
      assert.deepEqual(r.stuckOperations?.findings, []);
      spawnSync('rm', ['-f', stuckOperationsPath(fx.root)]);
    }
    await writeFile(stuckOperationsPath(fx.root), JSON.stringify({ version: 1, writtenAt: 'x', entries: [] }));
    const r = await audit(true);
    assert.match(r.stuckOperations?.error ?? '', /field writtenAt: not an RFC 3339 time/);
  });

  it('is shown in the table (STUCK section, summary count), -o wide, -o summary, -o prom and -o json', async () => {
    await alphaGap();
    await writeStatus([entry('vol-1')]);
    const r = await audit(false);
    const table = renderTable(r, { color: false, wide: false, noHeaders: false });
    assert.match(table, new RegExp(`\\nSTUCK \\(from ${stuckOperationsPath(fx.root)}, written 2026-12-01T03:10:00\\.500Z\\)\\n  stuck: kubernetes\\.io/csi/ebs\\.csi\\.example\\.com\\^vol-1: staged at `));
    assert.match(table, /; 1 stuck\n$/);
    assert.match(renderTable(r, { color: false, wide: true, noHeaders: false }), /stuck: staged at /);
    assert.match(renderSummary(r), /^PROBLEM: .*1 stuck \(ebs\.csi\.example\.com\^vol-1\)/);
    assert.ok((await renderProm(r)).split('\n').includes(`nodevol_audit_stuck_volumes{driver="${DRIVER}"} 1`));
    const json = JSON.parse(renderJson(r)) as { stuckOperations: { findings: { uniqueName: string }[] } };
    assert.equal(json.stuckOperations.findings[0]?.uniqueName, NAME('vol-1'));
  });

  it('the CLI reads the default file when present and --stuck-operations FILE otherwise; exit 1', async () => {
    // Story 1 with the gate on: recovered, exit 0 - until the agent says the driver refuses it.
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const mountinfo = await fx.writeMountInfo();
    const elsewhere = path.join(fx.base, 'status.json');
    await writeFile(elsewhere, JSON.stringify({ version: 1, writtenAt: '2026-12-01T03:10:00.500Z', entries: [entry('vol-1')] }));
    const run = (...extra: string[]): { status: number | null; stdout: string; stderr: string } =>
      spawnSync(process.execPath, [NODEVOL_BIN, 'audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '--feature-gates', 'CSIGlobalMountReconstruction=true', '-o', 'json', ...extra], { encoding: 'utf8', timeout: 60_000 });
    const without = run();
    assert.equal(without.status, 0, without.stderr);
    assert.equal('stuckOperations' in (JSON.parse(without.stdout) as object), false);
    const given = run('--stuck-operations', elsewhere);
    assert.equal(given.status, 1, given.stderr);
    const report = JSON.parse(given.stdout) as { stuckOperations: { source: string; findings: unknown[] }; summary: { stuck: number } };
    assert.equal(report.stuckOperations.source, elsewhere);
    assert.equal(report.summary.stuck, 1);
    await writeStatus([entry('vol-1')]);
    const byDefault = run();
    assert.equal(byDefault.status, 1, byDefault.stderr);
    assert.equal((JSON.parse(byDefault.stdout) as { summary: { stuck: number } }).summary.stuck, 1);

    // With the cluster's view: staged, in volumesInUse, driver refuses - each part said.
    const cluster = path.join(fx.base, 'cluster.json');
    await writeFile(cluster, JSON.stringify(list([node('node-1', { volumesInUse: [NAME('vol-1')] })])));
    const withCluster = run('--cluster-state', cluster, '--node-name', 'node-1');
    const f = (JSON.parse(withCluster.stdout) as { stuckOperations: { findings: { inVolumesInUse: boolean; reason: string }[] } }).stuckOperations.findings[0];
    assert.equal(f?.inVolumesInUse, true, withCluster.stderr);
    assert.match(f?.reason ?? '', /; node\.status\.volumesInUse lists it$/);
    await writeFile(cluster, JSON.stringify(list([node('node-1', { volumesInUse: [] })])));
    const notInUse = (JSON.parse(run('--cluster-state', cluster, '--node-name', 'node-1').stdout) as { stuckOperations: { findings: { inVolumesInUse: boolean; reason: string }[] } }).stuckOperations.findings[0];
    assert.equal(notInUse?.inVolumesInUse, false);
    assert.match(notInUse?.reason ?? '', /does NOT list it: the attach\/detach controller may detach it while it is staged$/);
  });
});
