/**
 * Teardown confinement (docs/security.md): every path handed to a driver (NodeUnpublishVolume, NodeUnstageVolume) or to
 * umount is proven inside the root dir with no symlink component first; otherwise the operation
 * fails with an error naming the symlink and nothing is called.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';

import { MemFs } from '../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../src/adapters/memory/memoryMounter.js';
import type { CsiNodeClient } from '../../src/ports/csi.js';
import { KubeletLayout } from '../../src/layout/layout.js';
import { CsiAttacher } from '../../src/volume/csi/csiAttacher.js';
import { CsiPlugin } from '../../src/volume/csi/csiPlugin.js';
import { CsiPathError } from '../../src/volume/csi/csiUtil.js';
import { saveVolumeData } from '../../src/volume/csi/volumeData.js';
import type { VolumeHost } from '../../src/volume/volumeHost.js';
import { FakeClock } from '../support/fakeClock.js';
import { FakeCluster } from '../../src/adapters/memory/fakeCluster.js';
import { gates, RecordingLogger } from '../support/hosts.js';

const ROOT = '/var/lib/kubelet';
const DRIVER = 'csi.example.com';
const sha256 = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

function rig(): { fs: MemFs; host: VolumeHost; calls: string[] } {
  const fs = MemFs.create();
  fs.writeRaw(`${ROOT}/.keep`, '');
  fs.writeRaw('/outside/victim/precious', 'data');
  const calls: string[] = [];
  const client: CsiNodeClient = {
    nodeGetCapabilities: () => Promise.resolve(['STAGE_UNSTAGE_VOLUME']),
    nodeStageVolume: () => Promise.reject(new Error('not used')),
    nodePublishVolume: () => Promise.reject(new Error('not used')),
    nodeUnstageVolume: (r) => {
      calls.push(`NodeUnstageVolume ${r.stagingTargetPath}`);
      return Promise.resolve();
    },
    nodeUnpublishVolume: (r) => {
      calls.push(`NodeUnpublishVolume ${r.targetPath}`);
      return Promise.resolve();
    },
  };
  const host: VolumeHost = {
    layout: new KubeletLayout(ROOT),
    realRootDir: ROOT,
    fs,
    features: gates(false),
    logger: new RecordingLogger(),
    clock: new FakeClock(),
    mounter: new MemoryMounter(fs),
    csiDrivers: { client: (n) => (n === DRIVER ? client : undefined) },
    cluster: new FakeCluster(),
    nodeName: 'node-1',
  };
  return { fs, host, calls };
}

const POD_VOL = `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`;

async function podVolume(fs: MemFs): Promise<void> {
  await fs.mkdir(POD_VOL, { recursive: true, mode: 0o750 });
  await saveVolumeData(fs, POD_VOL, { specVolID: 'pv-1', volumeHandle: 'vol-1', driverName: DRIVER, nodeName: 'node-1', attachmentID: 'x', volumeLifecycleMode: 'Persistent' });
}

describe('hostile root dir: teardown paths are confined', () => {
  it('TearDown of a pod volume whose mount dir is a symlink out of the root calls no NodeUnpublishVolume', async () => {
    const { fs, host, calls } = rig();
    await podVolume(fs);
    await fs.symlink('/outside/victim', `${POD_VOL}/mount`);
    const unmounter = await new CsiPlugin(host).newUnmounter('pv-1', 'pod-a');
    await assert.rejects(unmounter.tearDown(), (err: unknown) => err instanceof CsiPathError && err.message.includes(`${POD_VOL}/mount is a symlink`) && err.message.includes('refusing to hand'));
    assert.deepEqual(calls, []);
    assert.equal((await fs.lstat(`${POD_VOL}/mount`)).type, 'symlink', 'left as found');
    assert.equal((await fs.lstat('/outside/victim/precious')).type, 'file');
  });

  it('TearDown below a symlinked ancestor (pods/<uid>/volumes) calls no NodeUnpublishVolume', async () => {
    const { fs, host, calls } = rig();
    await fs.mkdir('/outside/vols/kubernetes.io~csi/pv-1', { recursive: true, mode: 0o750 });
    await saveVolumeData(fs, '/outside/vols/kubernetes.io~csi/pv-1', { specVolID: 'pv-1', volumeHandle: 'vol-1', driverName: DRIVER, nodeName: 'node-1', attachmentID: 'x', volumeLifecycleMode: 'Persistent' });
    await fs.mkdir(`${ROOT}/pods/pod-a`, { recursive: true, mode: 0o750 });
    await fs.symlink('/outside/vols', `${ROOT}/pods/pod-a/volumes`);
    // Refused while reading vol_data.json outside the root, or at the latest before the call.
    const attempt = (async () => (await new CsiPlugin(host).newUnmounter('pv-1', 'pod-a')).tearDown())();
    await assert.rejects(attempt, /outside the root dir|pods\/pod-a\/volumes is a symlink/);
    assert.deepEqual(calls, []);
  });

  it('UnmountDevice of a global mount that is a symlink calls no NodeUnstageVolume', async () => {
    const { fs, host, calls } = rig();
    const volDir = `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256('vol-1')}`;
    await fs.mkdir(volDir, { recursive: true, mode: 0o750 });
    await saveVolumeData(fs, volDir, { volumeHandle: 'vol-1', driverName: DRIVER });
    await fs.symlink('/outside/victim', `${volDir}/globalmount`);
    await assert.rejects(new CsiAttacher(host).unmountDevice(`${volDir}/globalmount`), /globalmount is a symlink/);
    assert.deepEqual(calls, []);
  });

  it('an ordinary TearDown still calls NodeUnpublishVolume', async () => {
    const { fs, host, calls } = rig();
    await podVolume(fs);
    await fs.mkdir(`${POD_VOL}/mount`, { recursive: false, mode: 0o750 });
    await (await new CsiPlugin(host).newUnmounter('pv-1', 'pod-a')).tearDown();
    assert.deepEqual(calls, [`NodeUnpublishVolume ${POD_VOL}/mount`]);
  });
});
