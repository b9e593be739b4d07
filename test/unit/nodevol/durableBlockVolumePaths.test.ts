// Gate CSIDurableBlockVolumePaths' two CSI hooks over the in-memory node's files: a raw block
// volume's staging dir is made durable (its parent fsynced) before NodeStageVolume, and its publish
// target exists durably (an empty file, 0640, written with fsync, then its directory fsynced)
// before NodePublishVolume; a target already there is kept as it is, and a failure to check or
// create it is the hook's error (the operation fails, the driver is not called).
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { CSIDurableBlockVolumePaths, FeatureGate } from '../../../src/features/features.js';
import { durableBlockVolumePaths } from '../../../src/nodevol/durableBlockVolumePaths/index.js';
import type { CsiHooks } from '../../../src/volume/csi/csiHooks.js';
import type { VolumeHost } from '../../../src/volume/volumeHost.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';

const GATES = FeatureGate.of({ [CSIDurableBlockVolumePaths]: true });
const STAGING_PARENT = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices/staging/pv-1`;
const STAGING = `${STAGING_PARENT}/0123abcd`;
const PUBLISH_DIR = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices/publish/pv-1`;
const TARGET = `${PUBLISH_DIR}/pod-a`;

interface Fixture {
  node: InMemoryNode;
  fs: FaultyFs;
  host: VolumeHost;
  csi: Partial<CsiHooks>;
}

async function fixture(): Promise<Fixture> {
  const node = new InMemoryNode();
  await node.fs.mkdir(STAGING, { recursive: true, mode: 0o750 });
  await node.fs.mkdir(PUBLISH_DIR, { recursive: true, mode: 0o750 });
  const fs = new FaultyFs(node.fs);
  const host = volumeHostOf(node, { fs });
  const csi = durableBlockVolumePaths.create(host, GATES).csi;
  assert.ok(csi !== undefined);
  return { node, fs, host, csi };
}

describe('durableBlockVolumePaths', () => {
  let f: Fixture;
  beforeEach(async () => {
    f = await fixture();
  });

  it('sets only the two hooks of the raw block paths', () => {
    assert.deepEqual(Object.keys(f.csi).sort(), ['publishPathParentCreated', 'stagingPathCreated']);
    assert.deepEqual(Object.keys(durableBlockVolumePaths.create(f.host, GATES)), ['csi']);
  });

  it('stagingPathCreated: fsyncs the staging dir\'s parent, and only that', async () => {
    await f.csi.stagingPathCreated?.(f.host, STAGING);
    assert.deepEqual(f.fs.calls, [`fsyncDir ${STAGING_PARENT}`]);
    assert.deepEqual(f.node.fs.syncLog, [`fsyncDir ${STAGING_PARENT}`]);
  });

  it('stagingPathCreated: a failing fsync is the hook\'s error', async () => {
    f.fs.failOn('fsyncDir', STAGING_PARENT, 'EIO');
    await assert.rejects(f.csi.stagingPathCreated?.(f.host, STAGING) ?? Promise.resolve(), { code: 'EIO' });
  });

  it('publishPathParentCreated, no target yet: an empty 0640 file written with fsync, then its directory fsynced', async () => {
    await f.csi.publishPathParentCreated?.(f.host, TARGET);
    assert.deepEqual(f.fs.calls, [`lstat ${TARGET}`, `writeFile ${TARGET}`, `fsyncDir ${PUBLISH_DIR}`]);
    assert.deepEqual(f.node.fs.syncLog, [`fsync ${TARGET}`, `fsyncDir ${PUBLISH_DIR}`]);
    assert.equal(f.node.fs.typeSync(TARGET), 'file');
    assert.equal((await f.node.fs.readFile(TARGET, 10)).length, 0);
    assert.equal((await f.node.fs.lstat(TARGET)).mode, 0o640);
  });

  it('publishPathParentCreated, a target already there (an earlier attempt): kept as it is, its directory still fsynced', async () => {
    f.node.fs.writeRaw(TARGET, 'x');
    await f.csi.publishPathParentCreated?.(f.host, TARGET);
    assert.deepEqual(f.fs.calls, [`lstat ${TARGET}`, `fsyncDir ${PUBLISH_DIR}`]);
    assert.deepEqual(f.node.fs.syncLog, [`fsyncDir ${PUBLISH_DIR}`]);
    assert.equal(new TextDecoder().decode(await f.node.fs.readFile(TARGET, 10)), 'x');
  });

  it('publishPathParentCreated, the target cannot be checked (EACCES): that error, nothing written or synced', async () => {
    f.fs.failOn('lstat', TARGET, 'EACCES');
    await assert.rejects(f.csi.publishPathParentCreated?.(f.host, TARGET) ?? Promise.resolve(), { code: 'EACCES' });
    assert.deepEqual(f.fs.calls, [`lstat ${TARGET}`]);
    assert.equal(f.node.fs.typeSync(TARGET), undefined);
    assert.deepEqual(f.node.fs.syncLog, []);
  });

  for (const [method, path, calls] of [
    ['writeFile', TARGET, [`lstat ${TARGET}`, `writeFile ${TARGET}`]],
    ['fsyncDir', PUBLISH_DIR, [`lstat ${TARGET}`, `writeFile ${TARGET}`, `fsyncDir ${PUBLISH_DIR}`]],
  ] as const) {
    it(`publishPathParentCreated, ${method} fails (EIO): that error, no later step`, async () => {
      f.fs.failOn(method, path, 'EIO');
      await assert.rejects(f.csi.publishPathParentCreated?.(f.host, TARGET) ?? Promise.resolve(), { code: 'EIO' });
      assert.deepEqual(f.fs.calls, calls);
    });
  }

  it('is the gate of the raw block proof, documented under its name', () => {
    assert.equal(durableBlockVolumePaths.name, CSIDurableBlockVolumePaths);
    assert.deepEqual(durableBlockVolumePaths.proofScenarios, ['raw-block']);
    assert.equal(durableBlockVolumePaths.doc, 'csidurableblockvolumepaths');
  });
});
