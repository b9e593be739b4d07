// nodevol audit: the KEP stories and the verdicts, each with CSIGlobalMountReconstruction off and on.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { runAudit } from '../../../src/audit/audit.js';
import { exitCodeFor, type AuditReport, type AuditVolume } from '../../../src/audit/report.js';
import { makeEphemeralVolumeHandle } from '../../../src/layout/names.js';
import { auditInput } from '../../support/hosts.js';
import { NodeFixture } from '../../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';
const NAME = (handle: string): string => `kubernetes.io/csi/${DRIVER}^${handle}`;

function only(report: AuditReport): AuditVolume {
  assert.equal(report.volumes.length, 1, JSON.stringify(report.volumes, null, 1));
  return report.volumes[0]!;
}

describe('nodevol audit: verdicts', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });
  const audit = (gateOn: boolean): Promise<AuditReport> => runAudit(auditInput(fx, { gateOn }));

  for (const gateOn of [false, true]) {
    const g = `(gate ${gateOn ? 'on' : 'off'})`;

    it(`a pod volume with its pod-local file is tracked ${g}`, async () => {
      const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
      await fx.podVolume({ uid: 'pod-a', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm });
      const r = await audit(gateOn);
      const v = only(r);
      assert.equal(v.uniqueName, NAME('vol-1'));
      assert.equal(v.verdict, 'tracked');
      assert.equal(v.verdictWithGate, 'tracked');
      assert.deepEqual(v.pods, [
        { uid: 'pod-a', specName: 'pv-1', volumePath: fx.layout.csiPodVolumeDir('pod-a', 'pv-1'), dataSource: 'pod-local', mounted: true },
      ]);
      assert.deepEqual(v.global, { deviceMountPath: gm, mounted: true, hasSpecVolID: true });
      assert.equal(exitCodeFor(r), 0);
    });

    it(`two pods sharing a volume are one tracked volume ${g}`, async () => {
      const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
      await fx.podVolume({ uid: 'pod-b', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm });
      await fx.podVolume({ uid: 'pod-a', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm });
      const v = only(await audit(gateOn));
      assert.deepEqual(v.pods.map((p) => p.uid), ['pod-a', 'pod-b']);
      assert.equal(v.verdict, 'tracked');
    });

    it(`an inline ephemeral volume is tracked under its pod-qualified name ${g}`, async () => {
      await fx.podVolume({ uid: 'pod-a', specName: 'scratch', driver: 'inline.csi', ephemeral: true });
      const v = only(await audit(gateOn));
      assert.equal(v.uniqueName, 'kubernetes.io/csi/pod-a-scratch');
      assert.equal(v.lifecycle, 'Ephemeral');
      assert.equal(v.volumeHandle, null);
      assert.equal(v.global, null);
      assert.equal(v.verdict, 'tracked');
      assert.notEqual(makeEphemeralVolumeHandle('pod-a', 'scratch'), '');
    });
  }

  it('story 1, gate off: a staged volume with no pod directory is orphaned (kubernetes#121937)', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const r = await audit(false);
    const v = only(r);
    assert.equal(v.verdict, 'orphaned');
    assert.equal(v.verdictWithGate, 'recovered');
    assert.deepEqual(v.pods, []);
    assert.deepEqual(v.global, { deviceMountPath: gm, mounted: true, hasSpecVolID: true });
    assert.ok(v.reasons.some((x) => x.includes('#121937')));
    assert.ok(v.reasons.includes('enabling CSIGlobalMountReconstruction would recover it'));
    assert.equal(exitCodeFor(r), 1);
    assert.deepEqual(r.summary, { volumes: 1, tracked: 0, recovered: 0, orphaned: 1, failed: 0, skipped: 0, undescribed: 0 });
  });

  it('story 1, gate on: the same volume is recovered by the global listing', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const r = await audit(true);
    const v = only(r);
    assert.equal(v.verdict, 'recovered');
    assert.equal(v.specName, 'pv-1');
    assert.equal(exitCodeFor(r), 0);
    assert.equal(r.featureGates['CSIGlobalMountReconstruction'], true);
  });

  it('story 1 after a reboot: the unmounted staged volume is still reported, with the unstage owed', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', mounted: false });
    const v = only(await audit(false));
    assert.equal(v.verdict, 'orphaned');
    assert.equal(v.global?.mounted, false);
    assert.ok(v.reasons.some((x) => x.includes('NodeUnstageVolume is still owed')));
  });

  it('story 2, gate off: a lost pod-local file fails reconstruction and the global mount is orphaned', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await fx.podVolume({ uid: 'pod-a', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent', boundFrom: gm });
    const r = await audit(false);
    assert.equal(r.failed.length, 1);
    assert.equal(r.failed[0]?.podUID, 'pod-a');
    assert.equal(r.failed[0]?.specName, 'pv-1');
    assert.equal(r.failed[0]?.recoverableWithGate, true);
    assert.match(r.failed[0]?.error ?? '', /failed loading volume data/);
    const v = only(r);
    assert.equal(v.verdict, 'orphaned');
    assert.equal(v.verdictWithGate, 'recovered');
    assert.ok(v.reasons.some((x) => x.includes('#101791')));
    assert.equal(exitCodeFor(r), 1);
  });

  it('story 2, gate on: the pod-local fallback recovers it through the bind mount', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await fx.podVolume({ uid: 'pod-a', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: { raw: '' }, boundFrom: gm });
    const r = await audit(true);
    assert.deepEqual(r.failed, []);
    const v = only(r);
    assert.equal(v.verdict, 'recovered');
    assert.equal(v.pods[0]?.dataSource, 'global-fallback');
    assert.equal(exitCodeFor(r), 0);
  });

  it('the alpha gap: after a reboot a lost pod-local file fails, and the listing alone recovers the volume', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    await fx.podVolume({ uid: 'pod-a', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent' });
    const r = await audit(true);
    assert.equal(r.failed.length, 1);
    assert.equal(r.failed[0]?.recoverableWithGate, false);
    assert.equal(only(r).verdict, 'recovered');
    assert.equal(exitCodeFor(r), 1);
  });

  it('a global file from before KEP-6058 is recovered under the handle name', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-old', legacyFile: true });
    const v = only(await audit(true));
    assert.equal(v.specName, 'vol-old');
    assert.equal(v.global?.hasSpecVolID, false);
    assert.equal(v.verdict, 'recovered');
  });

  for (const gateOn of [false, true]) {
    it(`a block volume with its pod device link is tracked (gate ${gateOn ? 'on' : 'off'})`, async () => {
      await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh' });
      await fx.podBlockVolume('pod-a', 'block-pv');
      const v = only(await audit(gateOn));
      assert.equal(v.mode, 'Block');
      assert.equal(v.verdict, 'tracked');
      assert.equal(v.global?.deviceMountPath, fx.layout.csiGlobalMapPath('block-pv'));
      assert.equal(v.global?.mounted, true);
      assert.equal(v.pods[0]?.volumePath, `${fx.root}/pods/pod-a/volumeDevices/kubernetes.io~csi/block-pv`);
    });
  }

  it('a staged block volume with no pod is orphaned with the gate off and recovered with it on', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh' });
    assert.equal(only(await audit(false)).verdict, 'orphaned');
    assert.equal(only(await audit(true)).verdict, 'recovered');
  });

  it('a staged block volume without specVolID is orphaned whatever the gate', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh', file: { data: { driverName: DRIVER, volumeHandle: 'bh' } } });
    const r = await audit(true);
    const v = only(r);
    assert.equal(v.verdict, 'orphaned');
    assert.equal(v.verdictWithGate, 'orphaned');
    assert.deepEqual(r.skipped.map((s) => s.reason), ['no-spec-vol-id']);
  });

  it('the legacy pv/<name> layout is reported as skipped, never as a volume', async () => {
    await fx.stage({ driver: 'pv', handle: 'h', dirName: 'pvc-1', file: { data: { driverName: DRIVER, volumeHandle: 'h' } } });
    const r = await audit(true);
    assert.deepEqual(r.volumes, []);
    assert.deepEqual(r.skipped.map((s) => [s.reason, s.path]), [['legacy-layout', `${fx.root}/plugins/kubernetes.io/csi/pv/pvc-1`]]);
  });

  it('volumes are sorted by unique name and the report is JSON-serialisable with the documented keys', async () => {
    await fx.stage({ driver: DRIVER, handle: 'b' });
    await fx.stage({ driver: DRIVER, handle: 'a' });
    const r = await audit(false);
    assert.deepEqual(r.volumes.map((v) => v.volumeHandle), ['a', 'b']);
    const parsed = JSON.parse(JSON.stringify(r)) as Record<string, unknown>;
    for (const k of ['rootDir', 'featureGates', 'volumes', 'failed', 'skipped', 'summary']) assert.ok(k in parsed, k);
    const v = (parsed['volumes'] as Record<string, unknown>[])[0] ?? {};
    for (const k of ['uniqueName', 'driver', 'volumeHandle', 'specName', 'mode', 'lifecycle', 'pods', 'global', 'verdict', 'reasons']) assert.ok(k in v, k);
  });
});
