// nodevol audit: a global mount that is MOUNTED (the device is staged) but whose directory no
// vol_data.json describes - missing, empty, a directory, a symlink out of the root dir or to
// nothing, naming no driver - is a finding (`undescribed`, exit 1) whatever the gates: no kubelet
// can rebuild that volume, so it is never unstaged. The same directory not mounted is only skipped.
// Raw block likewise, when something is mounted under its staging dir.
import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { runAudit } from '../../../src/audit/audit.js';
import { exitCodeFor, type AuditReport } from '../../../src/audit/report.js';
import { sha256Hex } from '../../../src/layout/names.js';
import { auditInput } from '../../support/hosts.js';
import { NodeFixture } from '../../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';

describe('nodevol audit: mounted global mounts that cannot be described', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });
  const audit = (gateOn: boolean): Promise<AuditReport> => runAudit(auditInput(fx, { gateOn }));
  const volDir = (handle: string): string => path.join(fx.layout.csiPluginDir(), DRIVER, sha256Hex(handle));

  /** Each way the file can fail, set up on a staged vol-1 (the file itself written by `make`). */
  const cases: [string, (file: string) => Promise<void>, RegExp][] = [
    ['missing', () => Promise.resolve(), /ENOENT/],
    ['empty', (f) => writeFile(f, ''), /EOF|empty/i],
    ['a directory', (f) => mkdir(f), /EISDIR|directory/i],
    ['a symlink out of the root dir', async (f) => {
      // The target holds a valid file: kubelet would follow it, the audit never reads out of the root.
      const outside = path.join(fx.base, 'outside.json');
      await writeFile(outside, `{"driverName":"${DRIVER}","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n`);
      await symlink(outside, f);
    }, /outside the root dir/],
    ['a symlink to nothing', (f) => symlink(path.join(fx.base, 'nothing.json'), f), /ENOENT/],
    ['without a volume handle', (f) => writeFile(f, `{"driverName":"${DRIVER}"}\n`), /volumeHandle is missing/],
  ];

  for (const [what, make, detail] of cases) {
    for (const gateOn of [false, true]) {
      it(`vol_data.json ${what}, globalmount mounted: an undescribed finding, exit 1 (gate ${gateOn ? 'on' : 'off'})`, async () => {
        const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', file: 'absent' });
        await make(path.join(volDir('vol-1'), 'vol_data.json'));
        const r = await audit(gateOn);
        assert.deepEqual(r.volumes, []);
        assert.equal(r.undescribed.length, 1, JSON.stringify(r, null, 1));
        const u = r.undescribed[0]!;
        assert.equal(u.path, volDir('vol-1'));
        assert.equal(u.deviceMountPath, gm);
        assert.equal(u.mode, 'Filesystem');
        assert.match(u.detail, detail);
        assert.match(u.reason, /^(unreadable-vol-data|missing-driver-or-handle)$/);
        assert.equal(r.summary.undescribed, 1);
        assert.equal(exitCodeFor(r), 1);
      });
    }

    it(`vol_data.json ${what}, globalmount NOT mounted: only skipped, exit 0`, async () => {
      await fx.stage({ driver: DRIVER, handle: 'vol-1', file: 'absent', mounted: false });
      await make(path.join(volDir('vol-1'), 'vol_data.json'));
      const r = await audit(true);
      assert.deepEqual(r.undescribed, []);
      assert.equal(r.skipped.length, 1);
      assert.equal(exitCodeFor(r), 0);
    });
  }

  it('the identity is kept when the file names one (a handle that does not hash to the directory)', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', dirName: sha256Hex('other') });
    const r = await audit(true);
    assert.deepEqual(r.undescribed.map((u) => [u.reason, u.driver, u.volumeHandle]), [['name-mismatch', DRIVER, 'vol-1']]);
    assert.equal(exitCodeFor(r), 1);
  });

  it('a mounted legacy pv/<name>/globalmount is a finding too (kubelet >= 1.24 never unstages it)', async () => {
    await fx.stage({ driver: 'pv', handle: 'h', dirName: 'pvc-1', file: { data: { driverName: DRIVER, volumeHandle: 'h' } } });
    const r = await audit(false);
    assert.deepEqual(r.undescribed.map((u) => u.reason), ['legacy-layout']);
    assert.equal(exitCodeFor(r), 1);
  });

  for (const gateOn of [false, true]) {
    it(`raw block: data/vol_data.json unreadable while a device is mounted under its staging dir: a finding, exit 1 (gate ${gateOn ? 'on' : 'off'})`, async () => {
      const dir = await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh', file: { raw: '' } });
      const r = await audit(gateOn);
      assert.deepEqual(r.undescribed.map((u) => [u.path, u.mode, u.deviceMountPath]), [[dir, 'Block', fx.layout.csiBlockStagingPath('block-pv')]]);
      assert.equal(exitCodeFor(r), 1);
    });
  }

  it('raw block: the same with nothing mounted under staging is only skipped', async () => {
    await fx.stageBlock({ specName: 'block-pv', driver: DRIVER, handle: 'bh', file: { raw: '' }, staged: false });
    await mkdir(fx.layout.csiBlockStagingPath('block-pv'), { recursive: true });
    const r = await audit(true);
    assert.deepEqual(r.undescribed, []);
    assert.equal(exitCodeFor(r), 0);
  });
});

describe('nodevol audit: nodevol\'s own vol_data.json.tmp (an atomic write cut short before its rename)', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });
  const audit = (gateOn: boolean): Promise<AuditReport> => runAudit(auditInput(fx, { gateOn }));
  const BYTES = `{"driverName":"${DRIVER}","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n`;

  for (const gateOn of [false, true]) {
    it(`a pod volume dir holding only the temp file, nothing mounted: skipped as interrupted-write, not a failed reconstruction, exit 0 (gate ${gateOn ? 'on' : 'off'})`, async () => {
      const dir = await fx.podVolume({ uid: 'pod-a', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent' });
      await writeFile(path.join(dir, 'vol_data.json.tmp'), BYTES);
      const r = await audit(gateOn);
      assert.deepEqual(r.failed, []);
      assert.deepEqual(r.skipped.map((x) => [x.reason, x.path]), [['interrupted-write', dir]]);
      assert.match(r.skipped[0]!.detail, /before NodePublishVolume; nothing is mounted here/);
      assert.equal(exitCodeFor(r), 0);
    });
  }

  it('the same dir with its mount/ mounted is still a failed reconstruction (exit 1): something is published there', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const dir = await fx.podVolume({ uid: 'pod-a', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent', boundFrom: gm });
    await writeFile(path.join(dir, 'vol_data.json.tmp'), BYTES);
    const r = await audit(false);
    assert.deepEqual(r.failed.map((f) => f.path), [dir]);
    assert.equal(exitCodeFor(r), 1);
  });

  it('a global volume dir holding only the temp file: skipped as interrupted-write naming the volume; mounted, it is an undescribed finding', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', file: 'absent', mounted: false });
    await writeFile(path.join(volDirOf(fx, 'vol-1'), 'vol_data.json.tmp'), BYTES);
    let r = await audit(true);
    assert.deepEqual(r.skipped.map((x) => x.reason), ['interrupted-write']);
    assert.deepEqual(r.undescribed, []);
    assert.equal(exitCodeFor(r), 0);
    fx.mount({ mountPoint: path.join(volDirOf(fx, 'vol-1'), 'globalmount'), root: '/', dev: fx.newDev() });
    r = await audit(true);
    assert.deepEqual(r.undescribed.map((u) => [u.reason, u.driver, u.volumeHandle]), [['interrupted-write', DRIVER, 'vol-1']]);
    assert.equal(exitCodeFor(r), 1);
  });
});

function volDirOf(fx: NodeFixture, handle: string): string {
  return path.join(fx.layout.csiPluginDir(), DRIVER, sha256Hex(handle));
}
