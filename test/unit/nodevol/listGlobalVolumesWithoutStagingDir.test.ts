// Gate CSIListGlobalVolumesWithoutStagingDir as the node composes it (index.ts), over the
// in-memory node's files: the hooks it sets and that they share one life's claims and leftovers.
// A leftover volume dir that UnmountDevice found without its vol_data.json is removed at once; while
// a MountDevice holds the dir it is kept, and the housekeeping pass removes it once the MountDevice
// is done; a volume dir whose staging dir is missing is listed; NodeUnstageVolume is sent also when
// the staging path is gone.
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { CSIListGlobalVolumesWithoutStagingDir, FeatureGate } from '../../../src/features/features.js';
import { listGlobalVolumesWithoutStagingDir } from '../../../src/nodevol/listGlobalVolumesWithoutStagingDir/index.js';
import type { GatePolicy } from '../../../src/nodevol/nodevolGate.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';

const GATES = FeatureGate.of({ [CSIListGlobalVolumesWithoutStagingDir]: true });

interface Fixture {
  node: InMemoryNode;
  policy: GatePolicy;
  /** The volume dir of vol-1 (`<driver>/<sha256(handle)>`), made empty. */
  dir: string;
}

async function fixture(): Promise<Fixture> {
  const node = new InMemoryNode();
  const staging = node.layout.csiDeviceMountPath(DRIVER, 'vol-1');
  const dir = staging.slice(0, staging.lastIndexOf('/'));
  await node.fs.mkdir(dir, { recursive: true, mode: 0o750 });
  return { node, policy: listGlobalVolumesWithoutStagingDir.create(volumeHostOf(node), GATES), dir };
}

function release(claim: (() => void) | Promise<() => void> | undefined): void {
  assert.equal(typeof claim, 'function');
  if (typeof claim === 'function') claim();
}

describe('listGlobalVolumesWithoutStagingDir: the composed gate', () => {
  let f: Fixture;
  beforeEach(async () => {
    f = await fixture();
  });

  it('sets its four CSI hooks, NodeUnstageVolume also without a staging path, and a housekeeping pass', () => {
    assert.deepEqual(Object.keys(f.policy).sort(), ['csi', 'housekeeping']);
    assert.deepEqual(Object.keys(f.policy.csi ?? {}).sort(), ['beginMountDevice', 'globalDirSkipped', 'unstageWhenStagingPathGone', 'volumeDataMissingAtUnmountDevice']);
    assert.equal(f.policy.csi?.unstageWhenStagingPathGone, true);
    assert.ok(f.dir.startsWith(`${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/`));
  });

  it('UnmountDevice found no vol_data.json: the empty volume dir is removed at once', async () => {
    await f.policy.csi?.volumeDataMissingAtUnmountDevice?.(f.dir);
    assert.equal(f.node.fs.typeSync(f.dir), undefined);
  });

  it('a MountDevice holds the dir: kept, also by a housekeeping pass; the first pass after it is done removes it', async () => {
    const claim = f.policy.csi?.beginMountDevice?.(f.dir);
    await f.policy.csi?.volumeDataMissingAtUnmountDevice?.(f.dir);
    await f.policy.housekeeping?.();
    assert.equal(f.node.fs.typeSync(f.dir), 'directory');
    release(claim);
    await f.policy.housekeeping?.();
    assert.equal(f.node.fs.typeSync(f.dir), undefined);
  });

  it('each life has its own claims: a MountDevice of another life does not keep the dir', async () => {
    const other = listGlobalVolumesWithoutStagingDir.create(volumeHostOf(f.node), GATES);
    const claim = other.csi?.beginMountDevice?.(f.dir);
    await f.policy.csi?.volumeDataMissingAtUnmountDevice?.(f.dir);
    assert.equal(f.node.fs.typeSync(f.dir), undefined);
    release(claim);
  });

  it('a volume dir whose staging dir is missing, its vol_data.json naming the volume: listed so that it is unstaged', async () => {
    const volume = await f.policy.csi?.globalDirSkipped?.({ path: f.dir, reason: 'no-globalmount', detail: '', volumeMode: 'Filesystem', driver: DRIVER, volumeHandle: 'vol-1', specVolID: 'pv-1' });
    assert.deepEqual(volume, { spec: constructPVSourceSpec('pv-1', DRIVER, 'vol-1'), seLinuxMountContext: '', deviceMountPath: `${f.dir}/globalmount`, volumeMode: 'Filesystem' });
  });
});
