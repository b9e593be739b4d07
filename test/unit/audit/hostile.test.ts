// nodevol audit on hostile input: broken, oversized, looping and escaping vol_data.json files,
// unreadable directories, path-like names and a malformed mount table. Each case holds ONE bad
// thing beside a good staged volume and a good pod volume; the audit must not throw, must name
// what it could not use, must still report the good volumes, and must never write or step
// outside the root dir.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, readlink, rename, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { NodeFileSystem } from '../../../src/adapters/node/nodeFs.js';
import { runAudit } from '../../../src/audit/audit.js';
import type { AuditReport, AuditSkipped, AuditVolume, SkipReason } from '../../../src/audit/report.js';
import { MAX_VOL_DATA_BYTES } from '../../../src/volume/csi/volumeData.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { auditInput, RecordingLogger } from '../../support/hosts.js';
import { NodeFixture } from '../../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';
const NAME = (handle: string, driver = DRIVER): string => `kubernetes.io/csi/${driver}^${handle}`;
const GATES = [false, true] as const;
const gateLabel = (gateOn: boolean): string => `(gate ${gateOn ? 'on' : 'off'})`;

/** The vol_data.json of the bad volume ("vol-bad", spec "pv-bad"), valid and as kubelet writes the keys. */
const VALID_BAD = `{"driverName":"${DRIVER}","specVolID":"pv-bad","volumeHandle":"vol-bad"}`;
/** Content planted outside the root: a volume of evil.csi in any report means it was read. */
const EVIL = '{"driverName":"evil.csi","specVolID":"pv-bad","volumeHandle":"evil"}';

const READ_METHODS: ReadonlySet<string> = new Set(['readdir', 'lstat', 'stat', 'realpath', 'readFile', 'readlink']);

/** Every file, directory and symlink under `dir` (not following symlinks), with what would show a write. */
async function snapshotTree(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (d: string): Promise<void> => {
    for (const name of (await readdir(d)).sort()) {
      const p = path.join(d, name);
      const st = await lstat(p);
      if (st.isSymbolicLink()) {
        out.set(p, `symlink -> ${await readlink(p)}`);
      } else if (st.isDirectory()) {
        out.set(p, `dir mode=${st.mode.toString(8)} mtime=${st.mtimeMs}`);
        await walk(p);
      } else {
        out.set(p, `file mode=${st.mode.toString(8)} size=${st.size} mtime=${st.mtimeMs}`);
      }
    }
  };
  await walk(dir);
  return out;
}

function volume(r: AuditReport, uniqueName: string): AuditVolume {
  const v = r.volumes.find((x) => x.uniqueName === uniqueName);
  assert.ok(v, `${uniqueName} not reported; got ${JSON.stringify(r.volumes.map((x) => x.uniqueName))}`);
  return v;
}

function skippedAt(r: AuditReport, p: string): AuditSkipped {
  const s = r.skipped.find((x) => x.path === p);
  assert.ok(s, `${p} not skipped; got ${JSON.stringify(r.skipped, null, 1)}`);
  return s;
}

describe('nodevol audit: hostile input', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
    // The good neighbours every case must leave intact.
    await fx.stage({ driver: DRIVER, handle: 'vol-staged', specVolID: 'pv-staged' });
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-pod', specVolID: 'pv-pod' });
    await fx.podVolume({ uid: 'pod-good', specName: 'pv-pod', driver: DRIVER, handle: 'vol-pod', boundFrom: gm });
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  /**
   * Runs the audit through a FaultyFs and checks what every audit must do whatever the input:
   * resolve, read only, stay inside the root dir, and leave every file and directory as it was.
   */
  async function audit(
    gateOn: boolean,
    options: { faults?: (fs: FaultyFs) => void; mountInfo?: string } = {},
  ): Promise<AuditReport> {
    const before = await snapshotTree(fx.base);
    const fs = new FaultyFs(new NodeFileSystem());
    options.faults?.(fs);
    const report = await runAudit(auditInput(fx, { gateOn, fs, mountInfo: options.mountInfo, logger: new RecordingLogger(10) }));
    assert.deepEqual(await snapshotTree(fx.base), before, 'the audit changed something under the fixture dir');
    for (const call of fs.calls) {
      const at = call.indexOf(' ');
      const method = call.slice(0, at);
      const p = call.slice(at + 1);
      assert.ok(READ_METHODS.has(method), `the audit called ${call}`);
      assert.ok(p === fx.root || p.startsWith(`${fx.root}/`), `the audit touched ${call}, outside the root dir ${fx.root}`);
    }
    assert.doesNotThrow(() => JSON.stringify(report));
    return report;
  }

  function assertGoodNeighbours(r: AuditReport, gateOn: boolean): void {
    const staged = volume(r, NAME('vol-staged'));
    assert.equal(staged.verdict, gateOn ? 'recovered' : 'orphaned');
    assert.equal(staged.verdictWithGate, 'recovered');
    assert.deepEqual(staged.global, { deviceMountPath: fx.layout.csiDeviceMountPath(DRIVER, 'vol-staged'), mounted: true, hasSpecVolID: true });
    const used = volume(r, NAME('vol-pod'));
    assert.equal(used.verdict, 'tracked');
    assert.deepEqual(used.pods, [
      { uid: 'pod-good', specName: 'pv-pod', volumePath: fx.layout.csiPodVolumeDir('pod-good', 'pv-pod'), dataSource: 'pod-local', mounted: true },
    ]);
    assert.equal(used.global?.mounted, true);
    assert.ok(!r.failed.some((f) => f.podUID === 'pod-good'), JSON.stringify(r.failed));
  }

  describe('pod-local vol_data.json', () => {
    /** The bad pod volume: its global mount is fine and bind mounted into the pod, its own file is not. */
    async function badPodVolume(): Promise<{ dir: string; dataPath: string }> {
      const gm = await fx.stage({ driver: DRIVER, handle: 'vol-bad', specVolID: 'pv-bad' });
      const dir = await fx.podVolume({ uid: 'pod-bad', specName: 'pv-bad', driver: DRIVER, handle: 'vol-bad', file: 'absent', boundFrom: gm });
      return { dir, dataPath: path.join(dir, 'vol_data.json') };
    }

    const unreadable: { name: string; make: (dataPath: string) => Promise<void>; error: RegExp }[] = [
      { name: 'a 0-byte file', make: (p) => writeFile(p, ''), error: /: EOF \(the file is empty\)/ },
      { name: 'a truncated object', make: (p) => writeFile(p, '{"driverName":"d'), error: /: unexpected EOF/ },
      {
        name: 'a number where a string belongs',
        make: (p) => writeFile(p, '{"driverName":42,"specVolID":"pv-bad","volumeHandle":"vol-bad"}'),
        error: /field "driverName": expected a string, got number/,
      },
      {
        name: 'a 1 MiB file',
        make: (p) => writeFile(p, `{"driverName":"${'x'.repeat(1024 * 1024)}"}`),
        error: new RegExp(`larger than the limit of ${MAX_VOL_DATA_BYTES} bytes`),
      },
      { name: 'a symlink to itself', make: (p) => symlink('vol_data.json', p), error: /too many levels of symbolic links \(ELOOP\)/ },
      {
        name: 'a symlink to a file outside the root',
        make: async (p) => {
          // If this file were read, a volume of evil.csi would appear.
          const outside = path.join(fx.base, 'outside-vol_data.json');
          await writeFile(outside, EVIL);
          await symlink(outside, p);
        },
        error: /it resolves to .*outside-vol_data\.json, outside the root dir/,
      },
    ];

    for (const c of unreadable) {
      it(`${c.name} fails reconstruction naming the file; only the gate's fallback recovers the volume`, async () => {
        const { dir, dataPath } = await badPodVolume();
        await c.make(dataPath);

        const off = await audit(false);
        assertGoodNeighbours(off, false);
        assert.equal(off.failed.length, 1, JSON.stringify(off.failed, null, 1));
        const f = off.failed[0]!;
        assert.equal(f.podUID, 'pod-bad');
        assert.equal(f.specName, 'pv-bad');
        assert.equal(f.path, dir);
        assert.ok(f.error.includes(dataPath), f.error);
        assert.match(f.error, c.error);
        assert.equal(f.recoverableWithGate, true);
        const badOff = volume(off, NAME('vol-bad'));
        assert.equal(badOff.verdict, 'orphaned');
        assert.equal(badOff.verdictWithGate, 'recovered');
        assert.deepEqual(badOff.pods, []);
        assert.ok(!off.volumes.some((v) => v.driver === 'evil.csi'));

        const on = await audit(true);
        assertGoodNeighbours(on, true);
        assert.deepEqual(on.failed, []);
        const badOn = volume(on, NAME('vol-bad'));
        assert.equal(badOn.verdict, 'recovered');
        assert.deepEqual(badOn.pods, [{ uid: 'pod-bad', specName: 'pv-bad', volumePath: dir, dataSource: 'global-fallback', mounted: true }]);
        assert.ok(!on.volumes.some((v) => v.driver === 'evil.csi'));
        assert.deepEqual(on.skipped, []);
      });
    }

    const readable: { name: string; content: string }[] = [
      {
        name: 'duplicate keys load with the last value winning (Go)',
        content: `{"driverName":"wrong.csi","specVolID":"pv-bad","volumeHandle":"vol-bad","driverName":"${DRIVER}"}`,
      },
      {
        name: 'trailing garbage after a valid object loads the first value only (Go streaming decoder)',
        content: `${VALID_BAD}\n{"driverName":"wrong.csi"} not json {{{`,
      },
    ];
    for (const c of readable) {
      for (const gateOn of GATES) {
        it(`${c.name} ${gateLabel(gateOn)}`, async () => {
          const { dir, dataPath } = await badPodVolume();
          await writeFile(dataPath, c.content);
          const r = await audit(gateOn);
          assertGoodNeighbours(r, gateOn);
          assert.deepEqual(r.failed, []);
          const v = volume(r, NAME('vol-bad'));
          assert.equal(v.verdict, 'tracked');
          assert.deepEqual(v.pods, [{ uid: 'pod-bad', specName: 'pv-bad', volumePath: dir, dataSource: 'pod-local', mounted: true }]);
          assert.ok(!r.volumes.some((x) => x.driver === 'wrong.csi'), JSON.stringify(r.volumes.map((x) => x.uniqueName)));
        });
      }
    }

    for (const gateOn of GATES) {
      it(`a bare null decodes to an empty map as in Go: not a load error, so no fallback; the spec has an empty driver and handle and reconstruction fails on the driver name ${gateLabel(gateOn)}`, async () => {
        const { dir, dataPath } = await badPodVolume();
        await writeFile(dataPath, 'null');
        const r = await audit(gateOn);
        assertGoodNeighbours(r, gateOn);
        assert.equal(r.failed.length, 1, JSON.stringify(r.failed, null, 1));
        const f = r.failed[0]!;
        assert.equal(f.podUID, 'pod-bad');
        assert.equal(f.path, dir);
        assert.ok(f.error.includes(dir), f.error);
        assert.match(f.error, /csi source driver name is empty/);
        assert.doesNotMatch(f.error, /failed loading volume data|fallback/);
        // The file loaded, so the gate's fallback never runs: the gate cannot help this pod.
        assert.equal(f.recoverableWithGate, false);
        const v = volume(r, NAME('vol-bad'));
        assert.deepEqual(v.pods, []);
        assert.equal(v.verdict, gateOn ? 'recovered' : 'orphaned');
        assert.ok(!r.volumes.some((x) => x.uniqueName === NAME('', '')), 'an empty-named volume was reported');
      });
    }

    it('a pod volume dir that is a symlink to a directory outside the root is refused, and the fallback does not follow it', async () => {
      const gm = await fx.stage({ driver: DRIVER, handle: 'vol-bad', specVolID: 'pv-bad' });
      const outside = path.join(fx.base, 'outside-volume');
      await mkdir(path.join(outside, 'mount'), { recursive: true });
      await writeFile(path.join(outside, 'vol_data.json'), EVIL);
      const dir = fx.layout.csiPodVolumeDir('pod-bad', 'pv-bad');
      await mkdir(path.dirname(dir), { recursive: true });
      await symlink(outside, dir);
      const src = fx.mountAt(gm)!;
      fx.mount({ mountPoint: path.join(dir, 'mount'), root: src.root, dev: src.dev });

      for (const gateOn of GATES) {
        const r = await audit(gateOn);
        assertGoodNeighbours(r, gateOn);
        assert.equal(r.failed.length, 1, JSON.stringify(r.failed, null, 1));
        const f = r.failed[0]!;
        assert.equal(f.path, dir);
        assert.ok(f.error.includes(path.join(dir, 'vol_data.json')), f.error);
        assert.match(f.error, /outside the root dir/);
        assert.equal(f.recoverableWithGate, false);
        if (gateOn) assert.match(f.error, /fallback to the global mount failed: no global mount is bind mounted at/);
        assert.ok(!r.volumes.some((v) => v.driver === 'evil.csi'));
        assert.deepEqual(volume(r, NAME('vol-bad')).pods, []);
      }
    });
  });

  describe('global vol_data.json (filesystem and block layouts)', () => {
    type Layout = 'Filesystem' | 'Block';
    interface Staged {
      readonly volDir: string;
      readonly dataPath: string;
    }
    /** The bad staged volume ("vol-bad", spec "pv-bad") with no vol_data.json yet. */
    async function stageBad(layout: Layout): Promise<Staged> {
      if (layout === 'Filesystem') {
        await fx.stage({ driver: DRIVER, handle: 'vol-bad', specVolID: 'pv-bad', file: 'absent' });
        const volDir = fx.layout.csiVolumeDir(DRIVER, 'vol-bad');
        return { volDir, dataPath: path.join(volDir, 'vol_data.json') };
      }
      await fx.stageBlock({ specName: 'pv-bad', driver: DRIVER, handle: 'vol-bad', file: 'absent' });
      return { volDir: fx.layout.csiBlockVolumeDir('pv-bad'), dataPath: path.join(fx.layout.csiBlockDataDir('pv-bad'), 'vol_data.json') };
    }

    type Outcome = { readonly reason: SkipReason; readonly detail: RegExp } | 'listed';
    const cases: { name: string; make: (dataPath: string) => Promise<void>; outcome: Outcome }[] = [
      { name: 'a 0-byte file', make: (p) => writeFile(p, ''), outcome: { reason: 'unreadable-vol-data', detail: /EOF \(the file is empty\)/ } },
      {
        name: 'a bare null (an empty map in Go)',
        make: (p) => writeFile(p, 'null'),
        outcome: { reason: 'missing-driver-or-handle', detail: /field driverName is missing or empty/ },
      },
      { name: 'a truncated object', make: (p) => writeFile(p, '{"driverName":"d'), outcome: { reason: 'unreadable-vol-data', detail: /unexpected EOF/ } },
      {
        name: 'a number where a string belongs',
        make: (p) => writeFile(p, '{"driverName":42,"specVolID":"pv-bad","volumeHandle":"vol-bad"}'),
        outcome: { reason: 'unreadable-vol-data', detail: /field "driverName": expected a string, got number/ },
      },
      {
        name: 'duplicate keys (last wins)',
        make: (p) => writeFile(p, `{"driverName":"wrong.csi","specVolID":"pv-bad","volumeHandle":"vol-bad","driverName":"${DRIVER}"}`),
        outcome: 'listed',
      },
      { name: 'trailing garbage (first value only)', make: (p) => writeFile(p, `${VALID_BAD} }}garbage{{`), outcome: 'listed' },
      {
        name: 'a 1 MiB file',
        make: (p) => writeFile(p, Buffer.alloc(1024 * 1024, 0x20)),
        outcome: { reason: 'unreadable-vol-data', detail: new RegExp(`larger than the limit of ${MAX_VOL_DATA_BYTES} bytes`) },
      },
      {
        name: 'a symlink to itself',
        make: (p) => symlink('vol_data.json', p),
        outcome: { reason: 'unreadable-vol-data', detail: /too many levels of symbolic links \(ELOOP\)/ },
      },
      {
        name: 'a symlink to a file outside the root',
        make: async (p) => {
          const outside = path.join(fx.base, 'outside-vol_data.json');
          await writeFile(outside, VALID_BAD);
          await symlink(outside, p);
        },
        outcome: { reason: 'unreadable-vol-data', detail: /outside the root dir/ },
      },
    ];

    for (const layout of ['Filesystem', 'Block'] as const) {
      for (const c of cases) {
        const what = c.outcome === 'listed' ? 'is still listed' : `is skipped as ${c.outcome.reason} naming the file`;
        it(`${layout}: ${c.name} ${what}`, async () => {
          const { volDir, dataPath } = await stageBad(layout);
          await c.make(dataPath);
          for (const gateOn of GATES) {
            const r = await audit(gateOn);
            assertGoodNeighbours(r, gateOn);
            assert.deepEqual(r.failed, []);
            if (c.outcome === 'listed') {
              assert.deepEqual(r.skipped, []);
              const v = volume(r, NAME('vol-bad'));
              assert.equal(v.mode, layout);
              assert.equal(v.specName, 'pv-bad');
              assert.equal(v.verdict, gateOn ? 'recovered' : 'orphaned');
              const deviceMountPath = layout === 'Filesystem' ? fx.layout.csiDeviceMountPath(DRIVER, 'vol-bad') : fx.layout.csiGlobalMapPath('pv-bad');
              assert.deepEqual(v.global, { deviceMountPath, mounted: true, hasSpecVolID: true });
              assert.ok(!r.volumes.some((x) => x.driver === 'wrong.csi'));
            } else {
              assert.equal(r.skipped.length, 1, JSON.stringify(r.skipped, null, 1));
              const s = skippedAt(r, volDir);
              assert.equal(s.reason, c.outcome.reason);
              assert.ok(s.detail.includes(dataPath), s.detail);
              assert.match(s.detail, c.outcome.detail);
              assert.ok(!r.volumes.some((v) => v.volumeHandle === 'vol-bad'), JSON.stringify(r.volumes.map((v) => v.uniqueName)));
            }
          }
        });
      }
    }

    it('Filesystem: a volume dir that is a symlink to a directory outside the root is skipped as a symlink, not followed', async () => {
      const outside = path.join(fx.base, 'outside-volume');
      await mkdir(path.join(outside, 'globalmount'), { recursive: true });
      await writeFile(path.join(outside, 'vol_data.json'), VALID_BAD);
      const volDir = fx.layout.csiVolumeDir(DRIVER, 'vol-bad');
      await symlink(outside, volDir);
      for (const gateOn of GATES) {
        const r = await audit(gateOn);
        assertGoodNeighbours(r, gateOn);
        assert.deepEqual(r.skipped.map((s) => [s.path, s.reason]), [[volDir, 'symlink']]);
        assert.match(skippedAt(r, volDir).detail, /not followed/);
        assert.ok(!r.volumes.some((v) => v.volumeHandle === 'vol-bad'));
      }
    });

    it('Block: a volume dir that is a symlink to a directory outside the root is skipped as a symlink, not followed', async () => {
      const outside = path.join(fx.base, 'outside-block');
      await mkdir(path.join(outside, 'data'), { recursive: true });
      await writeFile(path.join(outside, 'data', 'vol_data.json'), VALID_BAD);
      await fx.mkdirRel('plugins/kubernetes.io/csi/volumeDevices/staging/pv-bad');
      const volDir = fx.layout.csiBlockVolumeDir('pv-bad');
      await symlink(outside, volDir);
      for (const gateOn of GATES) {
        const r = await audit(gateOn);
        assertGoodNeighbours(r, gateOn);
        assert.deepEqual(r.skipped.map((s) => [s.path, s.reason]), [[volDir, 'symlink']]);
        assert.match(skippedAt(r, volDir).detail, /not followed/);
        assert.ok(!r.volumes.some((v) => v.volumeHandle === 'vol-bad'));
      }
    });
  });

  describe('a symlink higher up leading out of the root', () => {
    it('a pods dir that is a symlink outside the root is not listed at all, and reported', async () => {
      const outside = path.join(fx.base, 'outside-pods');
      await rename(fx.layout.podsDir(), outside);
      await symlink(outside, fx.layout.podsDir());
      // If this file were read, a tracked volume of evil.csi would appear.
      await writeFile(path.join(outside, 'pod-good/volumes/kubernetes.io~csi/pv-pod/vol_data.json'), EVIL);
      for (const gateOn of GATES) {
        const r = await audit(gateOn);
        assert.ok(!r.volumes.some((v) => v.driver === 'evil.csi'), JSON.stringify(r.volumes.map((v) => v.uniqueName)));
        assert.deepEqual(r.failed, []);
        const skippedPods = r.skipped.filter((s) => s.path === fx.layout.podsDir());
        assert.equal(skippedPods.length, 1);
        assert.equal(skippedPods[0]!.reason, 'unreadable-dir');
        assert.match(skippedPods[0]!.detail, /resolves outside the root dir/);
        assert.equal(volume(r, NAME('vol-staged')).verdict, gateOn ? 'recovered' : 'orphaned');
      }
    });

    it('a CSI plugin dir that is a symlink outside the root is not walked at all, and reported', async () => {
      const pluginDir = fx.layout.csiPluginDir();
      const outside = path.join(fx.base, 'outside-csi');
      await rename(pluginDir, outside);
      await symlink(outside, pluginDir);
      for (const gateOn of GATES) {
        const r = await audit(gateOn);
        assert.deepEqual(r.skipped.map((s) => [s.path, s.reason]), [[pluginDir, 'symlink']]);
        assert.match(r.skipped[0]!.detail, /resolves outside the root dir/);
        assert.ok(!r.volumes.some((v) => v.uniqueName === NAME('vol-staged')), JSON.stringify(r.volumes.map((v) => v.uniqueName)));
        // The pod's own file is inside the root: the pod volume is still tracked.
        const used = volume(r, NAME('vol-pod'));
        assert.equal(used.verdict, 'tracked');
        assert.equal(used.global, null);
      }
    });
  });

  describe('unreadable directories', () => {
    const cases: { name: string; make: () => Promise<string> }[] = [
      {
        name: "a pod's volumes/ dir",
        make: async () => {
          await fx.podVolume({ uid: 'pod-x', specName: 'pv-x', driver: DRIVER, handle: 'vol-x' });
          return fx.layout.podVolumesDir('pod-x');
        },
      },
      {
        name: "a pod's volumes/kubernetes.io~csi dir",
        make: async () => {
          await fx.podVolume({ uid: 'pod-x', specName: 'pv-x', driver: DRIVER, handle: 'vol-x' });
          return path.join(fx.layout.podVolumesDir('pod-x'), 'kubernetes.io~csi');
        },
      },
      {
        name: "a pod's volumeDevices/ dir",
        make: async () => {
          await fx.podBlockVolume('pod-x', 'blk-x');
          return fx.layout.podVolumeDevicesDir('pod-x');
        },
      },
      {
        name: 'a CSI driver dir',
        make: async () => {
          await fx.stage({ driver: 'other.csi.example.com', handle: 'vol-x' });
          return fx.layout.csiDriverDir('other.csi.example.com');
        },
      },
      {
        name: 'the CSI volumeDevices dir',
        make: async () => {
          await fx.stageBlock({ specName: 'blk-x', driver: DRIVER, handle: 'vol-x' });
          return fx.layout.csiBlockDir();
        },
      },
    ];
    for (const c of cases) {
      for (const gateOn of GATES) {
        it(`${c.name} that cannot be read is skipped as unreadable-dir naming it; the rest is reported ${gateLabel(gateOn)}`, async () => {
          const dir = await c.make();
          const r = await audit(gateOn, { faults: (fs) => fs.failOn('readdir', dir, 'EACCES') });
          assertGoodNeighbours(r, gateOn);
          assert.deepEqual(r.failed, []);
          assert.deepEqual(r.skipped.map((s) => [s.path, s.reason]), [[dir, 'unreadable-dir']]);
          const detail = skippedAt(r, dir).detail;
          assert.ok(detail.includes(dir), detail);
          assert.match(detail, /EACCES/);
          // What lies behind the unreadable dir is not invented.
          assert.deepEqual(r.volumes.map((v) => v.uniqueName), [NAME('vol-pod'), NAME('vol-staged')]);
          assert.equal(r.summary.skipped, 1);
        });
      }
    }

    it('an unreadable pods dir is skipped naming it; the global mounts are still reported', async () => {
      for (const gateOn of GATES) {
        const r = await audit(gateOn, { faults: (fs) => fs.failOn('readdir', fx.layout.podsDir(), 'EACCES') });
        assert.deepEqual(r.skipped.map((s) => [s.path, s.reason]), [[fx.layout.podsDir(), 'unreadable-dir']]);
        assert.match(r.skipped[0]!.detail, /EACCES/);
        assert.deepEqual(r.volumes.map((v) => [v.uniqueName, v.verdict, v.pods.length]), [
          [NAME('vol-pod'), gateOn ? 'recovered' : 'orphaned', 0],
          [NAME('vol-staged'), gateOn ? 'recovered' : 'orphaned', 0],
        ]);
      }
    });

    it('an unreadable CSI plugin dir is skipped naming it; pod volumes are still reconstructed', async () => {
      for (const gateOn of GATES) {
        const r = await audit(gateOn, { faults: (fs) => fs.failOn('readdir', fx.layout.csiPluginDir(), 'EACCES') });
        assert.deepEqual(r.skipped.map((s) => [s.path, s.reason]), [[fx.layout.csiPluginDir(), 'unreadable-dir']]);
        assert.ok(r.skipped[0]!.detail.includes(fx.layout.csiPluginDir()), r.skipped[0]!.detail);
        assert.deepEqual(r.failed, []);
        const v = volume(r, NAME('vol-pod'));
        assert.equal(v.verdict, 'tracked');
        assert.equal(v.pods[0]?.mounted, true);
        assert.equal(v.global, null);
      }
    });
  });

  describe('path-like names', () => {
    it('a global specVolID of ../../etc is only a name: the volume is keyed by driver^handle and nothing outside the root is touched', async () => {
      await fx.stage({ driver: DRIVER, handle: 'vol-evil', specVolID: '../../etc' });
      for (const gateOn of GATES) {
        const r = await audit(gateOn); // audit() asserts every FileSystem call stays inside the root
        assertGoodNeighbours(r, gateOn);
        assert.deepEqual(r.skipped, []);
        const v = volume(r, NAME('vol-evil'));
        assert.equal(v.specName, '../../etc');
        assert.equal(v.verdict, gateOn ? 'recovered' : 'orphaned');
        assert.deepEqual(v.global, { deviceMountPath: fx.layout.csiDeviceMountPath(DRIVER, 'vol-evil'), mounted: true, hasSpecVolID: true });
      }
    });

    it('a block data file with specVolID ../../etc is skipped as name-mismatch naming the field', async () => {
      await fx.stageBlock({
        specName: 'blk',
        driver: DRIVER,
        handle: 'vol-evil',
        file: { data: { driverName: DRIVER, volumeHandle: 'vol-evil', specVolID: '../../etc' } },
      });
      const volDir = fx.layout.csiBlockVolumeDir('blk');
      for (const gateOn of GATES) {
        const r = await audit(gateOn);
        assertGoodNeighbours(r, gateOn);
        assert.deepEqual(r.skipped.map((s) => [s.path, s.reason]), [[volDir, 'name-mismatch']]);
        const detail = skippedAt(r, volDir).detail;
        assert.ok(detail.includes(path.join(volDir, 'data', 'vol_data.json')), detail);
        assert.match(detail, /field specVolID "\.\.\/\.\.\/etc"/);
        assert.ok(!r.volumes.some((v) => v.volumeHandle === 'vol-evil'));
      }
    });

    it('a handle with "/", "^" and non-ASCII is staged under sha256 of its UTF-8 bytes and named driver^handle', async () => {
      const handle = 'proj/zone^vol-é✓';
      const dirName = createHash('sha256').update(Buffer.from(handle, 'utf8')).digest('hex');
      const gm = await fx.stage({ driver: DRIVER, handle, specVolID: 'pv-u', dirName });
      await fx.podVolume({ uid: 'pod-u', specName: 'pv-u', driver: DRIVER, handle, boundFrom: gm });
      for (const gateOn of GATES) {
        const r = await audit(gateOn);
        assertGoodNeighbours(r, gateOn);
        assert.deepEqual(r.skipped, []);
        assert.deepEqual(r.failed, []);
        const v = volume(r, `kubernetes.io/csi/${DRIVER}^proj/zone^vol-é✓`);
        assert.equal(v.volumeHandle, handle);
        assert.equal(v.verdict, 'tracked');
        assert.deepEqual(v.global, { deviceMountPath: path.join(fx.layout.csiDriverDir(DRIVER), dirName, 'globalmount'), mounted: true, hasSpecVolID: true });
        assert.deepEqual(v.pods.map((p) => [p.uid, p.dataSource, p.mounted]), [['pod-u', 'pod-local', true]]);
        assert.equal(r.volumes.length, 3);
      }
    });

    it('a driver dir named volumeDevices is not a filesystem volume, and the block walk skips its content as not-staged', async () => {
      await fx.stage({ driver: 'volumeDevices', handle: 'vol-vd', specVolID: 'pv-vd' });
      const odd = path.join(fx.layout.csiBlockDir(), createHash('sha256').update('vol-vd').digest('hex'));
      for (const gateOn of GATES) {
        const r = await audit(gateOn);
        assertGoodNeighbours(r, gateOn);
        assert.deepEqual(r.volumes.map((v) => v.uniqueName), [NAME('vol-pod'), NAME('vol-staged')]);
        assert.deepEqual(r.skipped.map((s) => [s.path, s.reason]), [[odd, 'not-staged']]);
        assert.ok(skippedAt(r, odd).detail.includes(path.join(fx.layout.csiBlockDir(), 'staging', path.basename(odd))));
      }
    });
  });

  describe('the mount table', () => {
    const BAD_LINE = '999 22 8:1 / /broken';
    /** The mount table with a too-short line as line 2, every good line after it. */
    function withBadLine(): string {
      const lines = fx.mountInfo().split('\n');
      lines.splice(1, 0, BAD_LINE);
      return lines.join('\n');
    }

    for (const gateOn of GATES) {
      it(`a line with too few fields is listed, the good lines still answer "mounted", and the strict fallback fails on it ${gateLabel(gateOn)}`, async () => {
        // Story 2: the pod-local file is lost, the pod mount is bound from the global mount.
        const gm = await fx.stage({ driver: DRIVER, handle: 'vol-lost', specVolID: 'pv-lost' });
        const dir = await fx.podVolume({ uid: 'pod-lost', specName: 'pv-lost', driver: DRIVER, handle: 'vol-lost', file: 'absent', boundFrom: gm });
        const r = await audit(gateOn, { mountInfo: withBadLine() });
        assertGoodNeighbours(r, gateOn);
        assert.equal(r.mountTableProblems.length, 1);
        assert.equal(r.mountTableProblems[0]?.line, 2);
        assert.match(r.mountTableProblems[0]?.error ?? '', /wrong number of fields \(expected at least 10, got 5\)/);
        assert.equal(volume(r, NAME('vol-lost')).global?.mounted, true);

        assert.equal(r.failed.length, 1, JSON.stringify(r.failed, null, 1));
        const f = r.failed[0]!;
        assert.equal(f.path, dir);
        // kubelet parses mountinfo strictly: the bad line fails the look-up, with the gate or not.
        assert.equal(f.recoverableWithGate, false);
        if (gateOn) {
          assert.match(f.error, /fallback to the global mount failed: mount table:2: wrong number of fields/);
          assert.ok(f.error.includes(JSON.stringify(BAD_LINE)), f.error);
        }
        const v = volume(r, NAME('vol-lost'));
        assert.deepEqual(v.pods, []);
        assert.equal(v.verdict, gateOn ? 'recovered' : 'orphaned');
      });
    }

    for (const gateOn of GATES) {
      it(`a pod mount whose path holds a space (\\040) counts as mounted, but the verbatim fallback cannot pair it, like kubelet ${gateLabel(gateOn)}`, async () => {
        const gm = await fx.stage({ driver: DRIVER, handle: 'vol-sp', specVolID: 'pv one' });
        const kept = await fx.podVolume({ uid: 'pod-s', specName: 'pv one', driver: DRIVER, handle: 'vol-sp', boundFrom: gm });
        const lost = await fx.podVolume({ uid: 'pod-t', specName: 'pv one', driver: DRIVER, handle: 'vol-sp', file: 'absent', boundFrom: gm });
        assert.ok(fx.mountInfo().includes(`${lost.replace(' ', '\\040')}/mount `), 'the kernel escapes the space');

        const r = await audit(gateOn);
        assertGoodNeighbours(r, gateOn);
        assert.deepEqual(r.mountTableProblems, []);
        const v = volume(r, NAME('vol-sp'));
        assert.equal(v.verdict, 'tracked');
        assert.deepEqual(v.pods, [{ uid: 'pod-s', specName: 'pv one', volumePath: kept, dataSource: 'pod-local', mounted: true }]);

        assert.equal(r.failed.length, 1, JSON.stringify(r.failed, null, 1));
        const f = r.failed[0]!;
        assert.equal(f.podUID, 'pod-t');
        assert.equal(f.path, lost);
        assert.equal(f.recoverableWithGate, false);
        if (gateOn) assert.ok(f.error.includes(`fallback to the global mount failed: no global mount is bind mounted at ${lost}/mount`), f.error);
      });
    }
  });
});
