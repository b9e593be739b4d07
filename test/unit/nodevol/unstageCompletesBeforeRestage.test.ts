// Gate CSIUnstageCompletesBeforeRestage's unstage marker, one function at a time over the
// in-memory node's files and driver: recordUnstageStarted writes the empty marker, fsynced, then
// fsyncs its directory (and keeps one already there, refuses anything else there); recordUnstageEnded
// unlinks it, then fsyncs the directory; finishInterruptedUnstage sends NodeUnstageVolume again
// for a marked volume and removes the marker only after its OK. Every step's file calls are
// checked in order, with the driver's calls on the same timeline, and every failure's error class
// and text (they reach the operation's error, events and the status file).
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { CSIUnstageCompletesBeforeRestage, FeatureGate } from '../../../src/features/features.js';
import { GrpcStatus, type CsiNodeClient } from '../../../src/ports/csi.js';
import { unstageCompletesBeforeRestage } from '../../../src/nodevol/unstageCompletesBeforeRestage/index.js';
import { finishInterruptedUnstage, recordUnstageEnded, recordUnstageStarted } from '../../../src/nodevol/unstageCompletesBeforeRestage/unstageMarker.js';
import { CsiPathError, UNSTAGE_MARKER_FILE_NAME } from '../../../src/volume/csi/csiUtil.js';
import { TransientOperationFailure } from '../../../src/volume/util/errors.js';
import type { VolumeHost } from '../../../src/volume/volumeHost.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';

const DATA_DIR = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/0123abcd`;
const STAGING = `${DATA_DIR}/globalmount`;
const MARKER = `${DATA_DIR}/${UNSTAGE_MARKER_FILE_NAME}`;
const CALLER = 'attacher.UnmountDevice';

interface Fixture {
  node: InMemoryNode;
  fs: FaultyFs;
  host: VolumeHost;
  /** The driver, each call also logged on `fs.calls` (one timeline with the file calls). */
  client: CsiNodeClient;
}

async function fixture(): Promise<Fixture> {
  const node = new InMemoryNode();
  await node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
  const fs = new FaultyFs(node.fs);
  const driver = node.driver;
  const client: CsiNodeClient = {
    nodeGetCapabilities: () => driver.nodeGetCapabilities(),
    nodeStageVolume: (r) => driver.nodeStageVolume(r),
    nodeUnstageVolume: (r) => {
      fs.calls.push(`NodeUnstageVolume ${JSON.stringify(r)}`);
      return driver.nodeUnstageVolume(r);
    },
    nodePublishVolume: (r) => driver.nodePublishVolume(r),
    nodeUnpublishVolume: (r) => driver.nodeUnpublishVolume(r),
  };
  return { node, fs, host: volumeHostOf(node, { fs }), client };
}

/** The file calls made on the marker and its directory (the confinement walk's realpath aside). */
function markerCalls(fs: FaultyFs): string[] {
  return fs.calls.filter((c) => !c.startsWith('realpath '));
}

const STAGE = { volumeHandle: 'vol-1', stagingPath: STAGING, dataDir: DATA_DIR, caller: 'attacher.MountDevice' };
const UNSTAGE_AGAIN = `NodeUnstageVolume ${JSON.stringify({ volumeId: 'vol-1', stagingTargetPath: STAGING })}`;

describe('recordUnstageStarted', () => {
  let f: Fixture;
  beforeEach(async () => {
    f = await fixture();
  });

  it('no marker yet: writes it empty and fsynced, then fsyncs its directory, in that order', async () => {
    await recordUnstageStarted(f.host, DATA_DIR, CALLER);
    assert.deepEqual(f.fs.calls, [`lstat ${MARKER}`, `writeFile ${MARKER}`, `fsyncDir ${DATA_DIR}`]);
    assert.deepEqual(f.node.fs.syncLog, [`fsync ${MARKER}`, `fsyncDir ${DATA_DIR}`]);
    assert.equal(f.node.fs.typeSync(MARKER), 'file');
    assert.equal((await f.node.fs.readFile(MARKER, 10)).length, 0);
    assert.equal((await f.node.fs.lstat(MARKER)).mode, 0o644);
  });

  it('a marker already there (an earlier attempt): kept as it is, nothing written or synced', async () => {
    f.node.fs.writeRaw(MARKER, '');
    await recordUnstageStarted(f.host, DATA_DIR, CALLER);
    assert.deepEqual(f.fs.calls, [`lstat ${MARKER}`]);
    assert.deepEqual(f.node.fs.syncLog, []);
  });

  for (const [what, make] of [
    ['directory', (n: InMemoryNode) => n.fs.mkdir(MARKER, { recursive: false, mode: 0o750 })],
    ['symlink', (n: InMemoryNode) => n.fs.symlink('/etc/passwd', MARKER)],
  ] as const) {
    it(`a ${what} where the marker goes: refused (a path error), nothing written through it`, async () => {
      await make(f.node);
      await assert.rejects(recordUnstageStarted(f.host, DATA_DIR, CALLER), (err: unknown) => {
        assert.ok(err instanceof CsiPathError);
        assert.equal(err.message, `kubernetes.io/csi: ${CALLER} refuses to record the unstage at ${MARKER}: it is a ${what}, not a regular file`);
        return true;
      });
      assert.deepEqual(f.fs.calls, [`lstat ${MARKER}`]);
      assert.deepEqual(f.node.fs.syncLog, []);
    });
  }

  it('the marker cannot be checked (EACCES): an error naming it, nothing written', async () => {
    f.fs.failOn('lstat', MARKER, 'EACCES');
    await assert.rejects(recordUnstageStarted(f.host, DATA_DIR, CALLER), (err: unknown) => {
      assert.ok(err instanceof Error && !(err instanceof CsiPathError));
      assert.equal(err.message, `kubernetes.io/csi: ${CALLER} failed to check ${MARKER}: lstat ${MARKER}: EACCES`);
      return true;
    });
    assert.deepEqual(f.fs.calls, [`lstat ${MARKER}`]);
    assert.equal(f.node.fs.typeSync(MARKER), undefined);
  });

  for (const [method, path, calls] of [
    ['writeFile', MARKER, [`lstat ${MARKER}`, `writeFile ${MARKER}`]],
    ['fsyncDir', DATA_DIR, [`lstat ${MARKER}`, `writeFile ${MARKER}`, `fsyncDir ${DATA_DIR}`]],
  ] as const) {
    it(`${method} fails (EIO): the unstage is not recorded, an error naming the marker`, async () => {
      f.fs.failOn(method, path, 'EIO');
      await assert.rejects(recordUnstageStarted(f.host, DATA_DIR, CALLER), {
        message: `kubernetes.io/csi: ${CALLER} failed to record the unstage at ${MARKER}: ${method} ${path}: EIO`,
      });
      assert.deepEqual(f.fs.calls, calls);
    });
  }
});

describe('recordUnstageEnded', () => {
  let f: Fixture;
  beforeEach(async () => {
    f = await fixture();
  });

  it('unlinks the marker, then fsyncs its directory', async () => {
    f.node.fs.writeRaw(MARKER, '');
    await recordUnstageEnded(f.host, DATA_DIR);
    assert.deepEqual(f.fs.calls, [`unlink ${MARKER}`, `fsyncDir ${DATA_DIR}`]);
    assert.deepEqual(f.node.fs.syncLog, [`fsyncDir ${DATA_DIR}`]);
    assert.equal(f.node.fs.typeSync(MARKER), undefined);
  });

  it('no marker: done, nothing else touched', async () => {
    await recordUnstageEnded(f.host, DATA_DIR);
    assert.deepEqual(f.fs.calls, [`unlink ${MARKER}`]);
    assert.deepEqual(f.node.fs.syncLog, []);
  });

  for (const [method, path] of [
    ['unlink', MARKER],
    ['fsyncDir', DATA_DIR],
  ] as const) {
    it(`${method} fails (EIO): a transient failure naming the marker`, async () => {
      f.node.fs.writeRaw(MARKER, '');
      f.fs.failOn(method, path, 'EIO');
      await assert.rejects(recordUnstageEnded(f.host, DATA_DIR), (err: unknown) => {
        assert.ok(err instanceof TransientOperationFailure);
        assert.equal(err.message, `kubernetes.io/csi: failed to remove the unstage marker ${MARKER}: ${method} ${path}: EIO`);
        return true;
      });
      assert.equal(f.node.fs.typeSync(MARKER), method === 'unlink' ? 'file' : undefined);
    });
  }
});

describe('finishInterruptedUnstage', () => {
  let f: Fixture;
  beforeEach(async () => {
    f = await fixture();
  });

  it('no marker: nothing sent, nothing removed', async () => {
    await finishInterruptedUnstage(f.host, f.client, STAGE);
    assert.deepEqual(markerCalls(f.fs), [`lstat ${ROOT}/plugins`, `lstat ${ROOT}/plugins/kubernetes.io`, `lstat ${ROOT}/plugins/kubernetes.io/csi`, `lstat ${ROOT}/plugins/kubernetes.io/csi/${DRIVER}`, `lstat ${DATA_DIR}`, `lstat ${MARKER}`, `lstat ${MARKER}`]);
    assert.deepEqual(f.node.driver.calls, []);
  });

  it('a marker: NodeUnstageVolume of the volume at its staging path first, then the marker goes, durably', async () => {
    f.node.fs.writeRaw(MARKER, '');
    await finishInterruptedUnstage(f.host, f.client, STAGE);
    assert.deepEqual(markerCalls(f.fs), [`lstat ${MARKER}`, UNSTAGE_AGAIN, `unlink ${MARKER}`, `fsyncDir ${DATA_DIR}`]);
    assert.deepEqual(f.node.driver.methods(), ['NodeUnstageVolume']);
    assert.equal(f.node.fs.typeSync(MARKER), undefined);
    assert.deepEqual(f.node.fs.syncLog, [`fsyncDir ${DATA_DIR}`]);
  });

  it('NodeUnstageVolume fails: a transient failure, the marker stays (no stage yet)', async () => {
    f.node.fs.writeRaw(MARKER, '');
    f.node.driver.inject({ method: 'NodeUnstageVolume', code: GrpcStatus.ABORTED, times: 1 });
    await assert.rejects(finishInterruptedUnstage(f.host, f.client, STAGE), (err: unknown) => {
      assert.ok(err instanceof TransientOperationFailure);
      assert.match(err.message, /^kubernetes\.io\/csi: attacher\.MountDevice failed: NodeUnstageVolume of an earlier unstage did not return OK, not staging yet: .*ABORTED/);
      return true;
    });
    assert.deepEqual(markerCalls(f.fs), [`lstat ${MARKER}`, UNSTAGE_AGAIN]);
    assert.equal(f.node.fs.typeSync(MARKER), 'file');
  });

  it('the marker cannot be checked (EIO): a transient failure, nothing sent', async () => {
    f.node.fs.writeRaw(MARKER, '');
    f.fs.failOn('lstat', MARKER, 'EIO');
    await assert.rejects(finishInterruptedUnstage(f.host, f.client, STAGE), (err: unknown) => {
      assert.ok(err instanceof TransientOperationFailure);
      assert.equal(err.message, `kubernetes.io/csi: attacher.MountDevice failed to check for an unfinished NodeUnstageVolume at ${MARKER}: lstat ${MARKER}: EIO`);
      return true;
    });
    assert.deepEqual(f.node.driver.calls, []);
    assert.equal(f.node.fs.typeSync(MARKER), 'file');
  });

  it('a symlink in the volume dir path: refused before anything is read or sent', async () => {
    const linked = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/linked`;
    await f.node.fs.mkdir('/elsewhere', { recursive: true, mode: 0o750 });
    f.node.fs.writeRaw(`/elsewhere/${UNSTAGE_MARKER_FILE_NAME}`, '');
    await f.node.fs.symlink('/elsewhere', linked);
    await assert.rejects(finishInterruptedUnstage(f.host, f.client, { ...STAGE, dataDir: linked }), (err: unknown) => {
      assert.ok(err instanceof CsiPathError);
      assert.match(err.message, new RegExp(`^kubernetes\\.io/csi: refusing to hand ${linked}/${UNSTAGE_MARKER_FILE_NAME} to NodeStageVolume: ${linked} is a symlink`));
      return true;
    });
    assert.deepEqual(f.node.driver.calls, []);
    assert.equal(f.node.fs.typeSync(`/elsewhere/${UNSTAGE_MARKER_FILE_NAME}`), 'file');
  });
});

describe('the gate\'s hooks', () => {
  it('beforeNodeStageVolume and the unstage record are the marker functions', async () => {
    const f = await fixture();
    const csi = unstageCompletesBeforeRestage.create(f.host, FeatureGate.of({ [CSIUnstageCompletesBeforeRestage]: true })).csi;
    assert.equal(csi?.beforeNodeStageVolume, finishInterruptedUnstage);
    assert.equal(csi?.nodeUnstageVolumeRecord?.started, recordUnstageStarted);
    assert.equal(csi?.nodeUnstageVolumeRecord?.ended, recordUnstageEnded);
  });

  it('dataDirExists: a directory is, a file, a symlink to a directory or nothing is not; another error rejects', async () => {
    const f = await fixture();
    const exists = unstageCompletesBeforeRestage.create(f.host, FeatureGate.of({ [CSIUnstageCompletesBeforeRestage]: true })).csi?.nodeUnstageVolumeRecord?.dataDirExists;
    assert.ok(exists !== undefined);
    f.node.fs.writeRaw(`${DATA_DIR}/file`, '');
    await f.node.fs.symlink(DATA_DIR, `${DATA_DIR}/link`);
    assert.deepEqual(
      await Promise.all([DATA_DIR, `${DATA_DIR}/file`, `${DATA_DIR}/link`, `${DATA_DIR}/missing`].map((p) => exists(f.host, p))),
      [true, false, false, false],
    );
    f.fs.failOn('lstat', DATA_DIR, 'EACCES');
    await assert.rejects(exists(f.host, DATA_DIR), { code: 'EACCES' });
  });
});
