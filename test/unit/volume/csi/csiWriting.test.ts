// CSI plugin, writing side, over the in-memory node: MountDevice / UnmountDevice (csi_attacher.go,
// with the cases of csi_attacher_test.go), SetUp / TearDown and removeMountDir (csi_mounter.go),
// NewUnmounter with the pod-local file lost (KEP-6058's fallback), inline ephemeral volumes, raw
// block (csi_block.go) and its mapping helpers (util.go MapBlockVolume / UnmapBlockVolume),
// CanAttach, and the rule that nothing outside the root dir is removed.
// Assertions read the driver's call log and state, the files and the mount table.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { MemFs } from '../../../../src/adapters/memory/memFs.js';
import { MemoryMounter } from '../../../../src/adapters/memory/memoryMounter.js';
import { FakeCsiDriver } from '../../../../src/adapters/memory/fakeCsiDriver.js';
import { FsError, type FileSystem } from '../../../../src/ports/fs.js';
import type { ClusterView } from '../../../../src/ports/cluster.js';
import {
  CsiCallError,
  GrpcStatus,
  type CsiNodeClient,
  type NodeCapability,
  type NodePublishVolumeRequest,
  type NodeStageVolumeRequest,
  type NodeUnpublishVolumeRequest,
  type NodeUnstageVolumeRequest,
} from '../../../../src/ports/csi.js';
import { KubeletLayout } from '../../../../src/layout/layout.js';
import { CsiAttacher } from '../../../../src/volume/csi/csiAttacher.js';
import { upstreamCsiHooks, type CsiHooks, type FailedCleanupDecision, type FailedCleanupSite, type FinishedErrorDecision, type FinishedErrorSite } from '../../../../src/volume/csi/csiHooks.js';
import { CsiMounter, CsiUnmounter } from '../../../../src/volume/csi/csiMounter.js';
import { CsiPlugin } from '../../../../src/volume/csi/csiPlugin.js';
import { accessModeOf, CsiPathError, CsiSpecError, mountCapability, removeMountDir } from '../../../../src/volume/csi/csiUtil.js';
import type { PodRef } from '../../../../src/volume/plugins.js';
import { constructInlineSpec, constructPVSourceSpec, type Spec } from '../../../../src/volume/spec.js';
import { type PersistentVolume } from '../../../../src/api/core.js';
import { mapBlockVolume, unmapBlockVolume } from '../../../../src/volume/util/blockMapping.js';
import { TransientOperationFailure, UncertainProgressError, isOperationFinishedError } from '../../../../src/volume/util/errors.js';
import type { VolumeHost } from '../../../../src/volume/volumeHost.js';
import { FakeClock } from '../../../support/fakeClock.js';
import { FaultyFs } from '../../../support/faultyFs.js';
import { FakeCluster } from '../../../../src/adapters/memory/fakeCluster.js';
import { gates, RecordingLogger } from '../../../support/hosts.js';
import { FeatureGate } from '../../../../src/features/features.js';
import { composeNodevolPolicy } from '../../../../src/nodevol/composePolicy.js';

const ROOT = '/var/lib/kubelet';
const DRIVER = 'csi.example.com';
const NODE = 'node-1';
const CSI_DIR = `${ROOT}/plugins/kubernetes.io/csi`;
const BLOCK_DIR = `${CSI_DIR}/volumeDevices`;

const sha256 = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');
const volDir = (handle: string, driver = DRIVER): string => `${CSI_DIR}/${driver}/${sha256(handle)}`;
const globalMount = (handle: string, driver = DRIVER): string => `${volDir(handle, driver)}/globalmount`;
const podVolDir = (uid: string, spec: string): string => `${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/${spec}`;
const podMount = (uid: string, spec: string): string => `${podVolDir(uid, spec)}/mount`;

const POD_A: PodRef = { uid: 'pod-a', namespace: 'default', name: 'pod-a' };

function pv(name: string, handle: string, extra: Partial<PersistentVolume> = {}): Spec {
  return { kind: 'persistent', readOnly: false, persistentVolume: { name, csi: { driver: DRIVER, volumeHandle: handle }, ...extra } };
}

interface RigOptions {
  readonly capabilities?: NodeCapability[];
  readonly gateOn?: boolean;
  /** Whether the driver is registered on the node (default true). */
  readonly registered?: boolean;
  /** The registered client acknowledges NodeUnpublishVolume without doing anything. */
  readonly unpublishIsNoop?: boolean;
}

/** A node in memory, wired by hand like InMemoryNode.startKubelet does, without a volume manager. */
class Rig {
  readonly fs = MemFs.create();
  readonly mounter: MemoryMounter;
  readonly clock = new FakeClock();
  readonly cluster = new FakeCluster();
  readonly logger = new RecordingLogger();
  readonly layout = new KubeletLayout(ROOT);
  readonly driver: FakeCsiDriver;
  readonly host: VolumeHost;
  readonly plugin: CsiPlugin;
  readonly attacher: CsiAttacher;

  constructor(o: RigOptions = {}) {
    this.fs.writeRaw(`${ROOT}/.keep`, '');
    this.mounter = new MemoryMounter(this.fs);
    this.driver = new FakeCsiDriver({
      name: DRIVER,
      fs: this.fs,
      mounter: this.mounter,
      clock: this.clock,
      ...(o.capabilities === undefined ? {} : { capabilities: o.capabilities }),
    });
    this.cluster.drivers.set(DRIVER, { name: DRIVER, attachRequired: true });
    // The plugin is driven directly, without the attach flow: every volume has its VolumeAttachment.
    this.cluster.everyVolumeAttached = true;
    const driver = this.driver;
    const client: CsiNodeClient =
      o.unpublishIsNoop === true
        ? {
            nodeGetCapabilities: () => driver.nodeGetCapabilities(),
            nodeStageVolume: (r) => driver.nodeStageVolume(r),
            nodeUnstageVolume: (r) => driver.nodeUnstageVolume(r),
            nodePublishVolume: (r) => driver.nodePublishVolume(r),
            nodeUnpublishVolume: () => Promise.resolve(),
          }
        : driver;
    const registered = o.registered ?? true;
    this.host = {
      layout: this.layout,
      realRootDir: ROOT,
      fs: this.fs,
      features: gates(o.gateOn ?? false),
      logger: this.logger,
      clock: this.clock,
      mounter: this.mounter,
      csiDrivers: { client: (n) => (registered && n === DRIVER ? client : undefined) },
      cluster: this.cluster,
      nodeName: NODE,
    };
    this.plugin = new CsiPlugin(this.host);
    this.attacher = new CsiAttacher(this.host);
  }

  async read(p: string): Promise<string> {
    return new TextDecoder().decode(await this.fs.readFile(p, 1 << 16));
  }

  async exists(p: string): Promise<boolean> {
    try {
      await this.fs.lstat(p);
      return true;
    } catch {
      return false;
    }
  }

  /** Paths below `dir` (directories end in '/'). */
  tree(dir = ROOT): string[] {
    return this.fs.tree(dir).filter((p) => p !== `${ROOT}/.keep`);
  }

  /** Mount points other than "/". */
  mounts(): string[] {
    return this.mounter
      .entries()
      .map((e) => e.mountPoint)
      .filter((m) => m !== '/');
  }

  /** CSI calls other than capability probes, as "Method OUTCOME". */
  calls(): string[] {
    return this.driver.calls.filter((c) => c.method !== 'NodeGetCapabilities').map((c) => `${c.method} ${c.outcome}`);
  }

  stageRequests(): NodeStageVolumeRequest[] {
    return this.driver.callsOf('NodeStageVolume').map((c) => c.request as NodeStageVolumeRequest);
  }
  unstageRequests(): NodeUnstageVolumeRequest[] {
    return this.driver.callsOf('NodeUnstageVolume').map((c) => c.request as NodeUnstageVolumeRequest);
  }
  publishRequests(): NodePublishVolumeRequest[] {
    return this.driver.callsOf('NodePublishVolume').map((c) => c.request as NodePublishVolumeRequest);
  }
  unpublishRequests(): NodeUnpublishVolumeRequest[] {
    return this.driver.callsOf('NodeUnpublishVolume').map((c) => c.request as NodeUnpublishVolumeRequest);
  }

  /** MountDevice of `spec` at its device mount path. */
  async mountDevice(spec: Spec, seLinuxLabel?: string): Promise<string> {
    const dmp = this.plugin.getDeviceMountPath(spec);
    await this.attacher.mountDevice(spec, '', dmp, seLinuxLabel === undefined ? {} : { seLinuxLabel });
    return dmp;
  }

  /** MountDevice (when the spec is persistent) then SetUp for `pod`. */
  async mountForPod(spec: Spec, pod: PodRef = POD_A): Promise<void> {
    if (spec.kind === 'persistent') await this.mountDevice(spec);
    await (await this.plugin.newMounter(spec, pod)).setUp({});
  }
}

const GLOBAL_BYTES = (spec: string, handle: string): string =>
  `{"driverName":"${DRIVER}","specVolID":"${spec}","volumeHandle":"${handle}","volumeLifecycleMode":"Persistent"}\n`;

function podLocalBytes(spec: string, handle: string, mode: 'Persistent' | 'Ephemeral'): string {
  const attachmentID = `csi-${sha256(handle + DRIVER + NODE)}`;
  return `{"attachmentID":"${attachmentID}","driverName":"${DRIVER}","nodeName":"${NODE}","specVolID":"${spec}","volumeHandle":"${handle}","volumeLifecycleMode":"${mode}"}\n`;
}

const UNCERTAIN_CODES = ['DEADLINE_EXCEEDED', 'UNAVAILABLE', 'CANCELLED', 'RESOURCE_EXHAUSTED', 'ABORTED'] as const;
const FINAL_CODES = ['INVALID_ARGUMENT', 'INTERNAL', 'NOT_FOUND', 'FAILED_PRECONDITION'] as const;

describe('CSI MountDevice (csi_attacher.go)', () => {
  it('stages a normal PV at its device mount path , also with an empty devicePath', async () => {
    const r = new Rig();
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    assert.equal(dmp, globalMount('vol-1'));
    assert.deepEqual(r.calls(), ['NodeStageVolume OK']);
    assert.equal(r.driver.volume('vol-1')?.stagedAt, dmp);
    assert.deepEqual(r.mounts(), [dmp]);
    const [req] = r.stageRequests();
    assert.equal(req?.volumeId, 'vol-1');
    assert.equal(req?.stagingTargetPath, dmp);
    assert.deepEqual(req?.volumeCapability, { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } });
  });

  it('writes exactly the KEP-6058 global vol_data.json bytes beside globalmount', async () => {
    const r = new Rig();
    await r.mountDevice(pv('pv-1', 'vol-1'));
    assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
    assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`, `${volDir('vol-1')}/`, `${globalMount('vol-1')}/`, `${volDir('vol-1')}/vol_data.json`]);
    // kubelet creates the volume directories 0750; the file is 0644.
    assert.equal((await r.fs.stat(globalMount('vol-1'))).mode, 0o750);
    assert.equal((await r.fs.stat(volDir('vol-1'))).mode, 0o750);
    assert.equal((await r.fs.stat(`${volDir('vol-1')}/vol_data.json`)).mode, 0o644);
  });

  it('adds a non-empty SELinux label to the global file as seLinuxMountContext, in key order', async () => {
    const r = new Rig();
    await r.mountDevice(pv('pv-1', 'vol-1'), 'system_u:object_r:container_file_t:s0:c1,c2');
    assert.equal(
      await r.read(`${volDir('vol-1')}/vol_data.json`),
      `{"driverName":"${DRIVER}","seLinuxMountContext":"system_u:object_r:container_file_t:s0:c1,c2","specVolID":"pv-1","volumeHandle":"vol-1","volumeLifecycleMode":"Persistent"}\n`,
    );
  });

  it('passes the PV mount options to NodeStageVolume as mount flags', async () => {
    const r = new Rig();
    await r.mountDevice(pv('pv-1', 'vol-1', { mountOptions: ['noatime', 'discard'], accessModes: ['ReadWriteMany'] }));
    const [req] = r.stageRequests();
    assert.deepEqual(req?.volumeCapability.mount?.mountFlags, ['noatime', 'discard']);
    assert.deepEqual(req?.volumeCapability.accessMode, { mode: 'MULTI_NODE_MULTI_WRITER' });
    assert.deepEqual(r.mounter.entries().find((e) => e.mountPoint === globalMount('vol-1'))?.options, ['noatime', 'discard']);
  });

  const invalid: { name: string; spec: Spec; dmp: string }[] = [
    { name: 'an empty volume handle', spec: pv('pv-1', ''), dmp: globalMount('') },
    { name: 'an empty device mount path', spec: pv('pv-1', 'vol-1'), dmp: '' },
    { name: 'an inline volume spec', spec: constructInlineSpec('scratch', DRIVER), dmp: globalMount('vol-1') },
    { name: 'a PV without a CSI source', spec: { kind: 'persistent', readOnly: false, persistentVolume: { name: 'pv-1' } }, dmp: globalMount('vol-1') },
  ];
  for (const tc of invalid) {
    it(`fails for ${tc.name}, stages nothing and writes nothing`, async () => {
      const r = new Rig();
      await assert.rejects(r.attacher.mountDevice(tc.spec, '', tc.dmp, {}), (err: unknown) => err instanceof Error && isOperationFinishedError(err));
      assert.deepEqual(r.calls(), []);
      assert.deepEqual(r.tree(), []);
    });
  }

  it('a driver without STAGE_UNSTAGE_VOLUME: success, no NodeStage, the global vol_data.json is still written', async () => {
    const r = new Rig({ capabilities: [] });
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    assert.deepEqual(r.calls(), []);
    assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
    assert.equal(await r.exists(dmp), true, 'globalmount is created');
    assert.deepEqual(r.mounts(), []);
  });

  for (const code of UNCERTAIN_CODES) {
    it(`NodeStage ${code} is an uncertain-progress error and the staging dir and file are NOT removed`, async () => {
      const r = new Rig();
      r.driver.inject({ method: 'NodeStageVolume', code: GrpcStatus[code], times: 1 });
      await assert.rejects(r.mountDevice(pv('pv-1', 'vol-1')), UncertainProgressError);
      assert.equal(await r.exists(globalMount('vol-1')), true);
      assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
      // NodeStageVolume must be idempotent: the retry stages and leaves the same file.
      await r.mountDevice(pv('pv-1', 'vol-1'));
      assert.deepEqual(r.calls(), [`NodeStageVolume ${code}`, 'NodeStageVolume OK']);
      assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
    });
  }

  for (const code of FINAL_CODES) {
    it(`a final NodeStage error (${code}) removes globalmount, the file and the volume dir, not the driver dir`, async () => {
      const r = new Rig();
      r.driver.inject({ method: 'NodeStageVolume', code: GrpcStatus[code], times: 1 });
      await assert.rejects(r.mountDevice(pv('pv-1', 'vol-1')), (err: unknown) => {
        assert.ok(err instanceof Error);
        assert.equal(isOperationFinishedError(err), true, 'neither uncertain nor transient');
        assert.match(err.message, new RegExp(code));
        return true;
      });
      assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
    });
  }

  /** Records writeFile calls; with `code`, each one under the root dir fails with that errno (a full or read-only root dir). */
  function watchWrites(r: Rig, code?: string): string[] {
    const writes: string[] = [];
    const inner = r.fs.writeFile.bind(r.fs);
    r.fs.writeFile = (p, data, options) => {
      writes.push(p);
      return code !== undefined && p.startsWith(`${ROOT}/`) ? Promise.reject(new FsError(code, p, 'writeFile')) : inner(p, data, options);
    };
    return writes;
  }

  for (const code of ['ENOSPC', 'EROFS']) {
    it(`a rewrite of the bytes the global vol_data.json already holds that fails (${code}) is a final error, as kubelet's saveVolumeData: no NodeStageVolume`, async () => {
      const r = new Rig();
      await r.mountDevice(pv('pv-1', 'vol-1'));
      const writes = watchWrites(r, code);
      await assert.rejects(r.mountDevice(pv('pv-1', 'vol-1')), (err: unknown) => isOperationFinishedError(err) && String(err).includes('failed to save volume info data'));
      assert.deepEqual(writes, [`${volDir('vol-1')}/vol_data.json.tmp`], 'the rewrite was tried');
      assert.deepEqual(r.calls(), ['NodeStageVolume OK']);
      assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
      assert.equal(await r.exists(`${volDir('vol-1')}/vol_data.json.tmp`), false);
    });
  }

  it('a failed rewrite of other bytes (an older kubelet\'s file) is a final error too, and the old file stays whole', async () => {
    const r = new Rig();
    const older = `{"driverName":"${DRIVER}","volumeHandle":"vol-1"}\n`;
    r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, older);
    watchWrites(r, 'ENOSPC');
    await assert.rejects(r.mountDevice(pv('pv-1', 'vol-1')), (err: unknown) => err instanceof Error && isOperationFinishedError(err) && err.message.includes('ENOSPC'));
    assert.deepEqual(r.calls(), []);
  });

  it('a global vol_data.json with other bytes (an older kubelet\'s) is rewritten atomically', async () => {
    const r = new Rig();
    r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, `{"driverName":"${DRIVER}","volumeHandle":"vol-1"}\n`);
    const writes = watchWrites(r);
    await r.mountDevice(pv('pv-1', 'vol-1'));
    assert.deepEqual(writes, [`${volDir('vol-1')}/vol_data.json.tmp`]);
    assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
  });

  it('a symlink in place of the global vol_data.json is replaced, never read through or written through, even when its target holds the bytes', async () => {
    const r = new Rig();
    r.fs.writeRaw(`${ROOT}/elsewhere.json`, GLOBAL_BYTES('pv-1', 'vol-1'));
    await r.fs.mkdir(volDir('vol-1'), { recursive: true, mode: 0o750 });
    await r.fs.symlink(`${ROOT}/elsewhere.json`, `${volDir('vol-1')}/vol_data.json`);
    await r.mountDevice(pv('pv-1', 'vol-1'));
    assert.equal((await r.fs.lstat(`${volDir('vol-1')}/vol_data.json`)).type, 'file');
    assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
    assert.equal(await r.read(`${ROOT}/elsewhere.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
  });

  for (const code of ['ENOSPC', 'EROFS']) {
    it(`a global vol_data.json that cannot be written (${code}) is a final error: nothing staged, the new dirs removed`, async () => {
      const r = new Rig();
      watchWrites(r, code);
      await assert.rejects(r.mountDevice(pv('pv-1', 'vol-1')), (err: unknown) => err instanceof Error && isOperationFinishedError(err) && err.message.includes(code));
      assert.deepEqual(r.calls(), []);
      assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
    });

    it(`keepStagingOnFinalError (an uncertain device, with CSIKeepUncertainMountOnFinalError's hooks): a write failure (${code}) is uncertain and keeps the dir and the old file`, async () => {
      const r = new Rig();
      const older = `{"driverName":"${DRIVER}","volumeHandle":"vol-1"}\n`;
      r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, older);
      await r.fs.mkdir(globalMount('vol-1'), { recursive: true, mode: 0o750 });
      watchWrites(r, code);
      const gated = new CsiAttacher(r.host, composeNodevolPolicy(FeatureGate.of({ CSIKeepUncertainMountOnFinalError: true }), r.host).hooks.csi);
      await assert.rejects(gated.mountDevice(pv('pv-1', 'vol-1'), '', globalMount('vol-1'), { keepStagingOnFinalError: true }), UncertainProgressError);
      assert.deepEqual(r.calls(), []);
      assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), older);
      assert.equal(await r.exists(globalMount('vol-1')), true);
    });
  }

  it('a driver that is not registered is a transient failure and nothing is created', async () => {
    const r = new Rig({ registered: false });
    await assert.rejects(r.mountDevice(pv('pv-1', 'vol-1')), TransientOperationFailure);
    assert.deepEqual(r.tree(), []);
    assert.deepEqual(r.driver.calls, []);
  });
});

describe('CSI UnmountDevice (csi_attacher.go)', () => {
  it('with the global file present: NodeUnstage, then the file, globalmount and the volume dir are removed', async () => {
    const r = new Rig();
    const dmp = await r.mountDevice(pv('pv-1', 'project/zone/test-vol1'));
    await r.attacher.unmountDevice(dmp);
    assert.deepEqual(r.calls(), ['NodeStageVolume OK', 'NodeUnstageVolume OK']);
    assert.deepEqual(r.unstageRequests(), [{ volumeId: 'project/zone/test-vol1', stagingTargetPath: dmp }]);
    assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
    assert.deepEqual(r.mounts(), []);
    assert.equal(r.driver.volume('project/zone/test-vol1'), undefined);
  });

  it('a global file written by an older kubelet (driver and handle only) is enough', async () => {
    const r = new Rig();
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, `{"driverName": "${DRIVER}", "volumeHandle":"vol-1"}`);
    await r.attacher.unmountDevice(dmp);
    assert.deepEqual(r.unstageRequests(), [{ volumeId: 'vol-1', stagingTargetPath: dmp }]);
    assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
  });

  it('a driver without STAGE_UNSTAGE_VOLUME: no NodeUnstage, the file and dirs are removed', async () => {
    const r = new Rig({ capabilities: [] });
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    await r.attacher.unmountDevice(dmp);
    assert.deepEqual(r.calls(), []);
    assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
  });

  it('a missing global file: success, NodeUnstage skipped, nothing removed', async () => {
    const r = new Rig();
    const dmp = globalMount('vol-1');
    await r.fs.mkdir(dmp, { recursive: true, mode: 0o750 });
    await r.attacher.unmountDevice(dmp);
    assert.deepEqual(r.driver.calls, []);
    assert.equal(await r.exists(dmp), true);
  });

  it('an invalid global file ({"driverName"}}) is a final failure; NodeUnstage skipped, nothing removed', async () => {
    const r = new Rig();
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, '{"driverName"}}');
    await assert.rejects(r.attacher.unmountDevice(dmp), (err: unknown) => err instanceof Error && isOperationFinishedError(err));
    assert.deepEqual(r.calls(), ['NodeStageVolume OK']);
    assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), '{"driverName"}}');
    assert.deepEqual(r.mounts(), [dmp]);
  });

  it('a driver named in the file that is not registered is a transient failure; nothing removed', async () => {
    const r = new Rig();
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, '{"driverName":"gone.csi.example.com","volumeHandle":"vol-1"}\n');
    await assert.rejects(r.attacher.unmountDevice(dmp), TransientOperationFailure);
    assert.deepEqual(r.calls(), ['NodeStageVolume OK']);
    assert.equal(await r.exists(`${volDir('vol-1')}/vol_data.json`), true);
    assert.deepEqual(r.mounts(), [dmp]);
  });

  it('a NodeUnstage error fails and keeps the file, globalmount and the mount', async () => {
    const r = new Rig();
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    r.driver.inject({ method: 'NodeUnstageVolume', code: GrpcStatus.INTERNAL, times: 1 });
    await assert.rejects(r.attacher.unmountDevice(dmp), /NodeUnstage|INTERNAL/);
    assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
    assert.deepEqual(r.mounts(), [dmp]);
    await r.attacher.unmountDevice(dmp);
    assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
  });

  it('a staging dir no longer mounted (an earlier NodeUnstage unmounted it, its answer lost): NodeUnstage is sent with globalmount and the file in place, and its failure keeps them for the retry', async () => {
    const r = new Rig();
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    // The driver's unmount landed; kubelet never heard of it. removeMountDir would now remove the
    // dir and the file, so only the attacher's order (NodeUnstage first) keeps them.
    await r.mounter.unmount(dmp);
    const staged = [`${CSI_DIR}/${DRIVER}/`, `${volDir('vol-1')}/`, `${dmp}/`, `${volDir('vol-1')}/vol_data.json`];
    assert.deepEqual(r.tree(CSI_DIR), staged);
    const atUnstage: string[][] = [];
    r.driver.observer = {
      arrived: (_seq, method) => {
        if (method === 'NodeUnstageVolume') atUnstage.push(r.tree(CSI_DIR));
      },
    };
    r.driver.inject({ method: 'NodeUnstageVolume', code: GrpcStatus.INTERNAL, times: 1 });
    await assert.rejects(r.attacher.unmountDevice(dmp), /INTERNAL/);
    assert.deepEqual(r.tree(CSI_DIR), staged, 'nothing removed after the failure: the retry can still name the volume');
    await r.attacher.unmountDevice(dmp);
    assert.deepEqual(atUnstage, [staged, staged], 'each NodeUnstage found globalmount and vol_data.json in place');
    assert.deepEqual(r.unstageRequests().length, 2);
    assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`], 'removed after NodeUnstage succeeded');
    assert.equal(r.driver.volume('vol-1'), undefined, 'unstaged at the driver');
  });

  it('NodeUnstage refused while a pod still has the volume published keeps everything', async () => {
    const r = new Rig();
    await r.mountForPod(pv('pv-1', 'vol-1'));
    await assert.rejects(r.attacher.unmountDevice(globalMount('vol-1')), /still published/);
    assert.equal(await r.exists(`${volDir('vol-1')}/vol_data.json`), true);
    assert.deepEqual(r.mounts().sort(), [globalMount('vol-1'), podMount('pod-a', 'pv-1')].sort());
  });
});

describe('CSI SetUp (csi_mounter.go SetUpAt)', () => {
  it('writes the pod-local file with all six keys, then NodePublish from globalmount to <pod dir>/mount', async () => {
    const r = new Rig();
    await r.mountDevice(pv('pv-1', 'vol-1'));
    const mounter = await r.plugin.newMounter(pv('pv-1', 'vol-1'), POD_A);
    assert.equal(mounter.getPath(), podMount('pod-a', 'pv-1'));
    // Hold NodePublishVolume to look at the disk while it is in flight.
    r.driver.inject({ method: 'NodePublishVolume', hang: true, times: 1 });
    const setUp = mounter.setUp({});
    for (let i = 0; i < 20 && r.driver.hangingCalls() === 0; i++) await r.clock.settle();
    assert.equal(r.driver.hangingCalls(), 1);
    assert.equal(await r.read(`${podVolDir('pod-a', 'pv-1')}/vol_data.json`), podLocalBytes('pv-1', 'vol-1', 'Persistent'), 'written before NodePublish');
    r.driver.releaseHangs();
    await setUp;
    assert.deepEqual(r.calls(), ['NodeStageVolume OK', 'NodePublishVolume OK']);
    const [req] = r.publishRequests();
    assert.equal(req?.volumeId, 'vol-1');
    assert.equal(req?.stagingTargetPath, globalMount('vol-1'));
    assert.equal(req?.targetPath, podMount('pod-a', 'pv-1'));
    assert.equal(req?.readonly, false);
    assert.equal(r.mounter.isMounted(podMount('pod-a', 'pv-1')), true);
    assert.equal((await r.fs.stat(podVolDir('pod-a', 'pv-1'))).mode, 0o750);
  });

  it('without STAGE_UNSTAGE_VOLUME, NodePublish gets an empty staging path', async () => {
    const r = new Rig({ capabilities: [] });
    await r.mountForPod(pv('pv-1', 'vol-1'));
    const [req] = r.publishRequests();
    assert.equal(req?.stagingTargetPath, '');
    assert.equal(req?.targetPath, podMount('pod-a', 'pv-1'));
    assert.equal(await r.read(`${podVolDir('pod-a', 'pv-1')}/vol_data.json`), podLocalBytes('pv-1', 'vol-1', 'Persistent'));
  });

  it('a read-only PV is published read-only', async () => {
    const r = new Rig();
    const spec: Spec = { ...pv('pv-1', 'vol-1'), readOnly: true };
    await r.mountForPod(spec);
    assert.equal(r.publishRequests()[0]?.readonly, true);
  });

  for (const code of FINAL_CODES) {
    it(`a final NodePublish error (${code}) removes the pod volume dir and its file`, async () => {
      const r = new Rig();
      await r.mountDevice(pv('pv-1', 'vol-1'));
      r.driver.inject({ method: 'NodePublishVolume', code: GrpcStatus[code], times: 1 });
      const mounter = await r.plugin.newMounter(pv('pv-1', 'vol-1'), POD_A);
      await assert.rejects(mounter.setUp({}), (err: unknown) => err instanceof Error && isOperationFinishedError(err));
      assert.equal(await r.exists(podVolDir('pod-a', 'pv-1')), false);
      assert.equal(await r.exists(`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi`), true, 'the plugin dir stays');
    });
  }

  for (const code of UNCERTAIN_CODES) {
    it(`an uncertain NodePublish error (${code}) keeps the pod volume dir and its file`, async () => {
      const r = new Rig();
      await r.mountDevice(pv('pv-1', 'vol-1'));
      r.driver.inject({ method: 'NodePublishVolume', code: GrpcStatus[code], times: 1 });
      const mounter = await r.plugin.newMounter(pv('pv-1', 'vol-1'), POD_A);
      await assert.rejects(mounter.setUp({}), UncertainProgressError);
      assert.equal(await r.read(`${podVolDir('pod-a', 'pv-1')}/vol_data.json`), podLocalBytes('pv-1', 'vol-1', 'Persistent'));
    });
  }

  it('a driver that is not registered is a transient failure and writes nothing', async () => {
    const r = new Rig({ registered: false });
    const mounter = await r.plugin.newMounter(pv('pv-1', 'vol-1'), POD_A);
    await assert.rejects(mounter.setUp({}), TransientOperationFailure);
    assert.deepEqual(r.tree(), []);
  });
});

describe('CSI TearDown and removeMountDir (csi_mounter.go)', () => {
  it('TearDown: NodeUnpublish of the pod-local handle, then the mount dir, the file and the volume dir go', async () => {
    const r = new Rig();
    await r.mountForPod(pv('pv-1', 'vol-1'));
    const unmounter = await r.plugin.newUnmounter('pv-1', 'pod-a');
    assert.equal(unmounter.getPath(), podMount('pod-a', 'pv-1'));
    await unmounter.tearDown();
    assert.deepEqual(r.calls(), ['NodeStageVolume OK', 'NodePublishVolume OK', 'NodeUnpublishVolume OK']);
    assert.deepEqual(r.unpublishRequests(), [{ volumeId: 'vol-1', targetPath: podMount('pod-a', 'pv-1') }]);
    assert.deepEqual(r.tree(`${ROOT}/pods`), [`${ROOT}/pods/pod-a/`, `${ROOT}/pods/pod-a/volumes/`, `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/`]);
    assert.deepEqual(r.mounts(), [globalMount('vol-1')], 'the global mount is UnmountDevice\'s business');
  });

  it('TearDown when the driver leaves the mount dir mounted: nothing is removed and it reports success', async () => {
    const r = new Rig({ unpublishIsNoop: true });
    await r.mountForPod(pv('pv-1', 'vol-1'));
    await (await r.plugin.newUnmounter('pv-1', 'pod-a')).tearDown();
    assert.equal(r.mounter.isMounted(podMount('pod-a', 'pv-1')), true);
    assert.equal(await r.read(`${podVolDir('pod-a', 'pv-1')}/vol_data.json`), podLocalBytes('pv-1', 'vol-1', 'Persistent'));
  });

  it('a NodeUnpublish error fails TearDown and keeps the mount and the file', async () => {
    const r = new Rig();
    await r.mountForPod(pv('pv-1', 'vol-1'));
    r.driver.inject({ method: 'NodeUnpublishVolume', code: GrpcStatus.INTERNAL, times: 1 });
    await assert.rejects((await r.plugin.newUnmounter('pv-1', 'pod-a')).tearDown(), /TearDownAt failed/);
    assert.equal(r.mounter.isMounted(podMount('pod-a', 'pv-1')), true);
    assert.equal(await r.exists(`${podVolDir('pod-a', 'pv-1')}/vol_data.json`), true);
  });

  it('a driver that is no longer registered makes TearDown a transient failure; nothing is removed', async () => {
    const r = new Rig();
    await r.mountForPod(pv('pv-1', 'vol-1'));
    const unmounter = await r.plugin.newUnmounter('pv-1', 'pod-a');
    const gone = new CsiPlugin({ ...r.host, csiDrivers: { client: () => undefined } });
    const orphan = await gone.newUnmounter('pv-1', 'pod-a');
    await assert.rejects(orphan.tearDown(), TransientOperationFailure);
    assert.equal(r.mounter.isMounted(podMount('pod-a', 'pv-1')), true);
    assert.equal(await r.exists(`${podVolDir('pod-a', 'pv-1')}/vol_data.json`), true);
    await unmounter.tearDown();
    assert.equal(await r.exists(podVolDir('pod-a', 'pv-1')), false);
  });

  it('removeMountDir of a mounted dir leaves it and its file alone and succeeds', async () => {
    const r = new Rig();
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    await removeMountDir(r.host, dmp);
    assert.deepEqual(r.mounts(), [dmp]);
    assert.equal(await r.exists(`${volDir('vol-1')}/vol_data.json`), true);
  });

  it('removeMountDir removes the dir, the file beside it and their parent, never the grandparent', async () => {
    const r = new Rig({ capabilities: [] });
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    await removeMountDir(r.host, dmp);
    assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
  });

  it('removeMountDir of paths that are already gone succeeds', async () => {
    const r = new Rig();
    await removeMountDir(r.host, globalMount('vol-never'));
    assert.deepEqual(r.tree(), []);
  });

  it('removeMountDir also removes the temp file an interrupted atomic vol_data.json write left behind (a crash before its rename)', async () => {
    const r = new Rig({ capabilities: [] });
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json.tmp`, '{"partial');
    await removeMountDir(r.host, dmp);
    assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
  });

  it('removeMountDir fails when the parent holds something else, after removing the dir and the file', async () => {
    const r = new Rig({ capabilities: [] });
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    r.fs.writeRaw(`${volDir('vol-1')}/unexpected`, 'x');
    await assert.rejects(removeMountDir(r.host, dmp), /failed to delete volume path/);
    assert.deepEqual(r.tree(volDir('vol-1')), [`${volDir('vol-1')}/unexpected`]);
  });
});

/** `inner`, except that the first rmdir of `dir` fails with errno `code` (a cause gone by the next call). */
function rmdirFailsOnce(inner: FileSystem, dir: string, code: string): FileSystem {
  let failed = false;
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'rmdir') {
        return (p: string): Promise<void> => {
          if (p !== dir || failed) return target.rmdir(p);
          failed = true;
          return Promise.reject(new FsError(code, p, 'rmdir'));
        };
      }
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** `cluster` as a view that holds no Secrets and cannot issue tokens (the optional methods absent). */
function viewWithout(cluster: ClusterView, missing: readonly ('getSecret' | 'requestServiceAccountToken')[]): ClusterView {
  return new Proxy(cluster, {
    get(target, prop) {
      if ((missing as readonly (string | symbol)[]).includes(prop)) return undefined;
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

describe('removeMountDir failures as an operator reads them (csi_mounter.go removeMountDir)', () => {
  /** A volume dir whose globalmount is not mounted (no STAGE_UNSTAGE_VOLUME), with its vol_data.json. */
  async function unstagedVolume(): Promise<{ r: Rig; dmp: string; dir: string }> {
    const r = new Rig({ capabilities: [] });
    const dmp = await r.mountDevice(pv('pv-1', 'vol-1'));
    return { r, dmp, dir: volDir('vol-1') };
  }
  const fsText = (code: string, p: string, syscall: string): string => new FsError(code, p, syscall).message;

  it('a vol_data.json that cannot be deleted fails it with the file named and the cause', async () => {
    const { r, dmp, dir } = await unstagedVolume();
    const file = `${dir}/vol_data.json`;
    const fs = new FaultyFs(r.fs).failOn('unlink', file, 'EACCES');
    await assert.rejects(removeMountDir({ ...r.host, fs }, dmp), {
      message: `kubernetes.io/csi: failed to delete volume data file [${file}]: ${fsText('EACCES', file, 'unlink')}`,
    });
    assert.equal(await r.exists(file), true);
  });

  it('nodevol\'s unstage marker left in the volume dir is removed with it', async () => {
    const { r, dmp, dir } = await unstagedVolume();
    r.fs.writeRaw(`${dir}/unstage-in-progress`, '');
    await removeMountDir(r.host, dmp);
    assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
  });

  it('a directory with the temp file\'s name is not ours: the volume dir stays and the error names it', async () => {
    const { r, dmp, dir } = await unstagedVolume();
    r.fs.writeRaw(`${dir}/vol_data.json.tmp/x`, '');
    await assert.rejects(removeMountDir(r.host, dmp), {
      message: `kubernetes.io/csi: failed to delete volume path [${dir}]: ${fsText('ENOTEMPTY', dir, 'rmdir')}`,
    });
    assert.deepEqual(r.tree(dir), [`${dir}/vol_data.json.tmp/`, `${dir}/vol_data.json.tmp/x`]);
  });

  it('with the temp file and something else in the volume dir: the temp file goes, the dir stays, the error names it', async () => {
    const { r, dmp, dir } = await unstagedVolume();
    r.fs.writeRaw(`${dir}/vol_data.json.tmp`, '{"partial');
    r.fs.writeRaw(`${dir}/unexpected`, 'x');
    await assert.rejects(removeMountDir(r.host, dmp), {
      message: `kubernetes.io/csi: failed to delete volume path [${dir}]: ${fsText('ENOTEMPTY', dir, 'rmdir')}`,
    });
    assert.deepEqual(r.tree(dir), [`${dir}/unexpected`]);
  });

  it('a temp file that cannot be deleted fails it with the temp file named and the cause', async () => {
    const { r, dmp, dir } = await unstagedVolume();
    const tmp = `${dir}/vol_data.json.tmp`;
    r.fs.writeRaw(tmp, '{"partial');
    const fs = new FaultyFs(r.fs).failOn('unlink', tmp, 'EACCES');
    await assert.rejects(removeMountDir({ ...r.host, fs }, dmp), {
      message: `kubernetes.io/csi: failed to delete temp file [${tmp}]: ${fsText('EACCES', tmp, 'unlink')}`,
    });
    assert.equal(await r.exists(tmp), true);
  });

  // kubelet returns the volume dir's removal error as it is; the reconciler retries the whole
  // operation. nodevol removes its own leftovers and tries again only on ENOTEMPTY, and only when
  // it removed one: any other failure, or nothing of its own to remove, is the operation's error.
  for (const tc of [
    { code: 'EBUSY', tempFile: true, why: 'another error than ENOTEMPTY, with a temp file present: the temp file is kept' },
    { code: 'EBUSY', tempFile: false, why: 'another error than ENOTEMPTY' },
    { code: 'ENOTEMPTY', tempFile: false, why: 'ENOTEMPTY with nothing of nodevol\'s to remove' },
  ]) {
    it(`a volume dir rmdir failing once (${tc.why}) fails it with that error; no second attempt`, async () => {
      const { r, dmp, dir } = await unstagedVolume();
      if (tc.tempFile) r.fs.writeRaw(`${dir}/vol_data.json.tmp`, '{"partial');
      await assert.rejects(removeMountDir({ ...r.host, fs: rmdirFailsOnce(r.fs, dir, tc.code) }, dmp), {
        message: `kubernetes.io/csi: failed to delete volume path [${dir}]: ${fsText(tc.code, dir, 'rmdir')}`,
      });
      assert.deepEqual(r.tree(dir), tc.tempFile ? [`${dir}/vol_data.json.tmp`] : []);
      assert.equal(await r.exists(dir), true, 'the volume dir is still there for the retry');
    });
  }
});

describe('CSI helpers: what reaches the driver and the operator (csi_attacher.go, csi_mounter.go, csi_plugin.go, csi_client.go)', () => {
  it('a PV whose CSI source has an empty driver or handle has no device mount path: CsiSpecError with kubelet\'s text (csi_attacher.go makeDeviceMountPath)', () => {
    const r = new Rig();
    const spec = (driver: string, volumeHandle: string): Spec => ({ kind: 'persistent', readOnly: false, persistentVolume: { name: 'pv-1', csi: { driver, volumeHandle } } });
    for (const [s, text] of [
      [spec('', 'vol-1'), 'csi source driver name is empty'],
      [spec(DRIVER, ''), 'CSIPersistentVolumeSource volume handle is empty'],
    ] as const) {
      assert.throws(
        () => r.plugin.getDeviceMountPath(s),
        (err: unknown) => err instanceof CsiSpecError && String(err) === `CsiSpecError: ${text}`,
      );
    }
  });

  it('SetUp without a CSIDriver object sends no pod information (csi_plugin.go podInfoEnabled)', async () => {
    const r = new Rig();
    r.cluster.drivers.delete(DRIVER);
    await r.mountForPod(pv('pv-1', 'vol-1'));
    assert.deepEqual(r.publishRequests()[0]?.volumeContext, {});
  });

  it('a driver with VOLUME_MOUNT_GROUP gets an empty volume_mount_group for a pod without fsGroup (MountDevice, SetUpAt)', async () => {
    const r = new Rig({ capabilities: ['STAGE_UNSTAGE_VOLUME', 'VOLUME_MOUNT_GROUP'] });
    await r.mountForPod(pv('pv-1', 'vol-1'));
    assert.equal(r.stageRequests()[0]?.volumeCapability.mount?.volumeMountGroup, '');
    assert.equal(r.publishRequests()[0]?.volumeCapability.mount?.volumeMountGroup, '');
  });

  it('an inline volume is published with no mount flags', async () => {
    const r = new Rig({ capabilities: [] });
    r.cluster.drivers.set(DRIVER, { name: DRIVER, attachRequired: true, volumeLifecycleModes: ['Ephemeral'] });
    await (await r.plugin.newMounter(constructInlineSpec('scratch', DRIVER), POD_A)).setUp({});
    assert.deepEqual(r.publishRequests()[0]?.volumeCapability.mount?.mountFlags, []);
  });

  it('the access mode without asking the driver: ReadWriteOnce and ReadWriteOncePod are SINGLE_NODE_WRITER (csi_client.go asCSIAccessModeV1)', () => {
    for (const mode of ['ReadWriteOnce', 'ReadWriteOncePod']) {
      const spec = pv('pv-1', 'vol-1', { accessModes: [mode] });
      assert.deepEqual(accessModeOf(spec), { mode: 'SINGLE_NODE_WRITER' });
      assert.deepEqual(mountCapability(spec, 'ext4', '').accessMode, { mode: 'SINGLE_NODE_WRITER' });
    }
  });

  it('a pod without a service account name asks for the tokens of the account "" (csi_mounter.go podServiceAccountTokenAttrs)', async () => {
    const r = new Rig();
    r.cluster.drivers.set(DRIVER, { name: DRIVER, attachRequired: true, tokenRequests: [{ audience: 'vault' }] });
    await r.mountForPod(pv('pv-1', 'vol-1'));
    assert.deepEqual(r.cluster.tokenRequests, [{ namespace: 'default', serviceAccountName: '', audiences: ['vault'], boundPod: { name: 'pod-a', uid: 'pod-a' } }]);
  });

  it('a cluster view that cannot issue tokens, or holds no Secrets, fails SetUp transiently with that reason and publishes nothing', async () => {
    const cases = [
      {
        missing: ['requestServiceAccountToken'] as const,
        driver: { name: DRIVER, attachRequired: true, tokenRequests: [{ audience: 'vault' }] },
        extra: {},
        message: 'kubernetes.io/csi: mounter.SetUpAt failed to get service accoount token attributes: the cluster view cannot issue service account tokens',
      },
      {
        missing: ['getSecret'] as const,
        driver: { name: DRIVER, attachRequired: true },
        extra: { csi: { driver: DRIVER, volumeHandle: 'vol-1', nodePublishSecretRef: { name: 's-1', namespace: 'ns-1' } } },
        message: 'fetching NodePublishSecretRef ns-1/s-1 failed: secrets "s-1" cannot be read: the cluster view holds no Secrets',
      },
    ];
    for (const tc of cases) {
      const r = new Rig();
      r.cluster.drivers.set(DRIVER, tc.driver);
      const plugin = new CsiPlugin({ ...r.host, cluster: viewWithout(r.cluster, tc.missing) });
      const mounter = await plugin.newMounter(pv('pv-1', 'vol-1', tc.extra), POD_A);
      await assert.rejects(mounter.setUp({}), (err: unknown) => err instanceof TransientOperationFailure && err.message === tc.message);
      assert.deepEqual(r.publishRequests(), []);
    }
  });
});

describe('CSI NewUnmounter with the pod-local file missing (KEP-6058 fallback)', () => {
  async function lostPodLocalFile(gateOn: boolean): Promise<Rig> {
    const r = new Rig({ gateOn });
    await r.mountForPod(pv('pv-1', 'vol-1'));
    await r.fs.unlink(`${podVolDir('pod-a', 'pv-1')}/vol_data.json`);
    return r;
  }

  it('gate off: rejects with "unmounter failed to load volume data file"', async () => {
    const r = await lostPodLocalFile(false);
    await assert.rejects(r.plugin.newUnmounter('pv-1', 'pod-a'), /unmounter failed to load volume data file/);
    assert.deepEqual(r.unpublishRequests(), []);
  });

  it('gate on with the bind mount present: the unmounter unpublishes the handle of the global file', async () => {
    const r = await lostPodLocalFile(true);
    const unmounter = await r.plugin.newUnmounter('pv-1', 'pod-a');
    await unmounter.tearDown();
    assert.deepEqual(r.unpublishRequests(), [{ volumeId: 'vol-1', targetPath: podMount('pod-a', 'pv-1') }]);
    assert.equal(await r.exists(podVolDir('pod-a', 'pv-1')), false);
    assert.equal(r.driver.volume('vol-1')?.publishedAt.size, 0);
    // The global mount is untouched and can now be unstaged.
    await r.attacher.unmountDevice(globalMount('vol-1'));
    assert.deepEqual(r.mounts(), []);
  });

  it('gate on with a global file whose specVolID names another volume: rejects', async () => {
    const r = await lostPodLocalFile(true);
    r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, `{"driverName":"${DRIVER}","specVolID":"pv-other","volumeHandle":"vol-1"}\n`);
    await assert.rejects(r.plugin.newUnmounter('pv-1', 'pod-a'), /pv-other.*refusing it/);
    assert.deepEqual(r.unpublishRequests(), []);
  });

  it('gate on with no bind mount to follow: rejects rather than guess', async () => {
    const r = new Rig({ gateOn: true });
    await r.mountDevice(pv('pv-1', 'vol-1'));
    await r.fs.mkdir(podMount('pod-a', 'pv-1'), { recursive: true, mode: 0o750 });
    await assert.rejects(r.plugin.newUnmounter('pv-1', 'pod-a'), /unmounter failed to load volume data file.*fallback to the global mount failed/);
  });
});

// csi_plugin.go NewUnmounter and NewBlockVolumeUnmapper take the driver and the handle from a Go
// map: a key missing from the file is "", and that is what TearDown asks for and sends.
describe('CSI unmounter and unmapper built from a file missing a key', () => {
  it('NewUnmounter, no driverName: TearDown looks up the driver named "" and sends nothing', async () => {
    const r = new Rig();
    await r.mountForPod(pv('pv-1', 'vol-1'));
    r.fs.writeRaw(`${podVolDir('pod-a', 'pv-1')}/vol_data.json`, '{"specVolID":"pv-1","volumeHandle":"vol-1"}\n');
    const unmounter = await r.plugin.newUnmounter('pv-1', 'pod-a');
    await assert.rejects(unmounter.tearDown(), { message: 'kubernetes.io/csi: driver name  not found in the list of registered CSI drivers' });
    assert.deepEqual(r.unpublishRequests(), []);
  });

  it('NewUnmounter, no volumeHandle: TearDown unpublishes the volume id "", which the driver refuses', async () => {
    const r = new Rig();
    await r.mountForPod(pv('pv-1', 'vol-1'));
    r.fs.writeRaw(`${podVolDir('pod-a', 'pv-1')}/vol_data.json`, `{"driverName":"${DRIVER}","specVolID":"pv-1"}\n`);
    const unmounter = await r.plugin.newUnmounter('pv-1', 'pod-a');
    await assert.rejects(unmounter.tearDown(), { message: 'kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = INVALID_ARGUMENT desc = volume ID missing in request' });
    assert.deepEqual(r.unpublishRequests(), [{ volumeId: '', targetPath: podMount('pod-a', 'pv-1') }]);
  });

  const BLOCK_DATA = `${BLOCK_DIR}/block-pv/data/vol_data.json`;

  it('NewBlockVolumeUnmapper, no driverName: the unmap looks up the driver named "" and sends nothing', async () => {
    const r = new Rig();
    await r.plugin.newBlockVolumeMapper(constructPVSourceSpec('block-pv', DRIVER, 'vol-b', 'Block'), POD_A);
    r.fs.writeRaw(BLOCK_DATA, '{"specVolID":"block-pv","volumeHandle":"vol-b"}\n');
    const unmapper = await r.plugin.newBlockVolumeUnmapper('block-pv', 'pod-a');
    await assert.rejects(unmapper.unmapPodDevice(), { message: 'kubernetes.io/csi: driver name  not found in the list of registered CSI drivers' });
    assert.deepEqual(r.unpublishRequests(), []);
  });

  it('NewBlockVolumeUnmapper, no volumeHandle: the unmap unpublishes the volume id "", which the driver refuses', async () => {
    const r = new Rig();
    await r.plugin.newBlockVolumeMapper(constructPVSourceSpec('block-pv', DRIVER, 'vol-b', 'Block'), POD_A);
    r.fs.writeRaw(BLOCK_DATA, `{"driverName":"${DRIVER}","specVolID":"block-pv"}\n`);
    const unmapper = await r.plugin.newBlockVolumeUnmapper('block-pv', 'pod-a');
    await assert.rejects(unmapper.unmapPodDevice(), {
      message: 'kubernetes.io/csi: blockMapper.unpublishVolumeForBlock failed: rpc error: code = INVALID_ARGUMENT desc = volume ID missing in request',
    });
    assert.deepEqual(r.unpublishRequests(), [{ volumeId: '', targetPath: `${BLOCK_DIR}/publish/block-pv/pod-a` }]);
  });

  it('NewBlockVolumeUnmapper with no block data file: refused, naming the file and the cause', async () => {
    const r = new Rig();
    await assert.rejects(r.plugin.newBlockVolumeUnmapper('block-pv', 'pod-a'), {
      name: 'CsiSpecError',
      message: `unmapper failed to load volume data file [${BLOCK_DATA}]: failed to open volume data file ${BLOCK_DATA}: ENOENT (no such file or directory)`,
    });
  });
});

describe('CSI inline ephemeral SetUp', () => {
  const ephemeralHandle = `csi-${sha256('pod-a' + 'scratch')}`;
  for (const capabilities of [['STAGE_UNSTAGE_VOLUME'], []] as NodeCapability[][]) {
    it(`uses handle csi-sha256(podUID+name) and no staging path (driver capabilities [${capabilities.join(',')}])`, async () => {
      const r = new Rig({ capabilities });
      // Drivers with inline ephemeral volumes list the Ephemeral mode and set podInfoOnMount; that is what sends the ephemeral key.
      r.cluster.drivers.set(DRIVER, { name: DRIVER, attachRequired: true, podInfoOnMount: true, volumeLifecycleModes: ['Persistent', 'Ephemeral'] });
      const spec = constructInlineSpec('scratch', DRIVER);
      assert.equal(r.plugin.canDeviceMount(spec), false, 'never MountDevice');
      await (await r.plugin.newMounter(spec, POD_A)).setUp({});
      assert.deepEqual(r.calls(), ['NodePublishVolume OK']);
      const [req] = r.publishRequests();
      assert.equal(req?.volumeId, ephemeralHandle);
      assert.equal(req?.stagingTargetPath, '');
      assert.equal(req?.targetPath, podMount('pod-a', 'scratch'));
      assert.equal(req?.volumeContext['csi.storage.k8s.io/ephemeral'], 'true');
      assert.equal(await r.read(`${podVolDir('pod-a', 'scratch')}/vol_data.json`), podLocalBytes('scratch', ephemeralHandle, 'Ephemeral'));
      assert.deepEqual(r.tree(CSI_DIR), [], 'no global mount');
      await (await r.plugin.newUnmounter('scratch', 'pod-a')).tearDown();
      assert.deepEqual(r.unpublishRequests(), [{ volumeId: ephemeralHandle, targetPath: podMount('pod-a', 'scratch') }]);
      assert.deepEqual(r.mounts(), []);
    });
  }
});

describe('CSI raw block (csi_block.go)', () => {
  const SPEC = constructPVSourceSpec('block-pv', DRIVER, 'vol-b', 'Block');
  const STAGING = `${BLOCK_DIR}/staging/block-pv`;
  const DATA_BYTES = `{"attachmentID":"csi-${sha256('vol-b' + DRIVER + NODE)}","driverName":"${DRIVER}","nodeName":"${NODE}","specVolID":"block-pv","volumeHandle":"vol-b"}\n`;

  it('NewBlockVolumeMapper writes the block data file', async () => {
    const r = new Rig();
    await r.plugin.newBlockVolumeMapper(SPEC, POD_A);
    assert.equal(await r.read(`${BLOCK_DIR}/block-pv/data/vol_data.json`), DATA_BYTES);
  });

  it('SetUpDevice stages at volumeDevices/staging/<spec> with a block capability', async () => {
    const r = new Rig();
    const mapper = await r.plugin.newBlockVolumeMapper(SPEC, POD_A);
    assert.equal(await mapper.setUpDevice(), STAGING);
    const [req] = r.stageRequests();
    assert.equal(req?.volumeId, 'vol-b');
    assert.equal(req?.stagingTargetPath, STAGING);
    assert.deepEqual(req?.volumeCapability, { block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } });
    assert.equal(r.driver.volume('vol-b')?.stagedAt, STAGING);
  });

  it('SetUpDevice without STAGE_UNSTAGE_VOLUME stages nothing and returns an empty path', async () => {
    const r = new Rig({ capabilities: [] });
    const mapper = await r.plugin.newBlockVolumeMapper(SPEC, POD_A);
    assert.equal(await mapper.setUpDevice(), '');
    assert.deepEqual(r.calls(), []);
  });

  it('a final NodeStage error removes the data dir, the dev dir and the staging dir', async () => {
    const r = new Rig();
    const mapper = await r.plugin.newBlockVolumeMapper(SPEC, POD_A);
    // A dev dir left by an earlier map of this volume.
    await r.fs.mkdir(`${BLOCK_DIR}/block-pv/dev`, { recursive: true, mode: 0o750 });
    r.driver.inject({ method: 'NodeStageVolume', code: GrpcStatus.INVALID_ARGUMENT, times: 1 });
    await assert.rejects(mapper.setUpDevice(), (err: unknown) => err instanceof Error && isOperationFinishedError(err));
    assert.equal(await r.exists(`${BLOCK_DIR}/block-pv/data`), false);
    assert.equal(await r.exists(`${BLOCK_DIR}/block-pv/dev`), false);
    assert.equal(await r.exists(STAGING), false);
    assert.deepEqual(r.tree(BLOCK_DIR), [`${BLOCK_DIR}/staging/`]);
  });

  it('an uncertain NodeStage error keeps the block files', async () => {
    const r = new Rig();
    const mapper = await r.plugin.newBlockVolumeMapper(SPEC, POD_A);
    r.driver.inject({ method: 'NodeStageVolume', code: GrpcStatus.DEADLINE_EXCEEDED, times: 1 });
    await assert.rejects(mapper.setUpDevice(), UncertainProgressError);
    assert.equal(await r.read(`${BLOCK_DIR}/block-pv/data/vol_data.json`), DATA_BYTES);
    assert.equal(await r.exists(STAGING), true);
  });

  it('a full map, unmap and teardown leaves no volume files under volumeDevices and no mounts', async () => {
    const r = new Rig();
    const mapper = await r.plugin.newBlockVolumeMapper(SPEC, POD_A);
    const globalMapPath = mapper.getGlobalMapPath(SPEC);
    assert.equal(globalMapPath, `${BLOCK_DIR}/block-pv/dev`);
    await mapper.setUpDevice();
    const publishPath = await mapper.mapPodDevice();
    assert.equal(publishPath, `${BLOCK_DIR}/publish/block-pv/pod-a`);
    assert.equal(r.publishRequests()[0]?.stagingTargetPath, STAGING);
    const podMap = mapper.getPodDeviceMapPath();
    assert.deepEqual(podMap, { dir: `${ROOT}/pods/pod-a/volumeDevices/kubernetes.io~csi`, name: 'block-pv' });
    await mapBlockVolume(r.host, publishPath, globalMapPath, podMap, 'pod-a');
    assert.deepEqual(r.mounts().sort(), [STAGING, publishPath, `${globalMapPath}/pod-a`].sort());

    const unmapper = await r.plugin.newBlockVolumeUnmapper('block-pv', 'pod-a');
    await unmapBlockVolume(r.host, globalMapPath, podMap, 'pod-a');
    await unmapper.unmapPodDevice();
    await (await r.plugin.newBlockVolumeUnmapper('block-pv', '')).tearDownDevice(globalMapPath, '');

    assert.deepEqual(r.calls(), ['NodeStageVolume OK', 'NodePublishVolume OK', 'NodeUnpublishVolume OK', 'NodeUnstageVolume OK']);
    assert.deepEqual(r.unpublishRequests(), [{ volumeId: 'vol-b', targetPath: publishPath }]);
    assert.deepEqual(r.unstageRequests(), [{ volumeId: 'vol-b', stagingTargetPath: STAGING }]);
    assert.deepEqual(r.mounts(), []);
    // kubelet keeps the shared staging/ and publish/ parents, and the pod's (now empty) device dir.
    assert.deepEqual(r.tree(BLOCK_DIR), [`${BLOCK_DIR}/publish/`, `${BLOCK_DIR}/staging/`]);
    assert.deepEqual(r.tree(`${ROOT}/pods`), [`${ROOT}/pods/pod-a/`, `${ROOT}/pods/pod-a/volumeDevices/`, `${ROOT}/pods/pod-a/volumeDevices/kubernetes.io~csi/`]);
    assert.equal(r.driver.volume('vol-b'), undefined);
  });
});

describe('MapBlockVolume / UnmapBlockVolume (util.go; volumepathhandler mapBindMountDevice, mapSymlinkDevice, unmapBindMountDevice)', () => {
  const GMP = `${BLOCK_DIR}/block-pv/dev`;
  const PUBLISH = `${BLOCK_DIR}/publish/block-pv/pod-a`;
  const POD_MAP = { dir: `${ROOT}/pods/pod-a/volumeDevices/kubernetes.io~csi`, name: 'block-pv' };
  const LINK = `${POD_MAP.dir}/block-pv`;
  const BIND = `${GMP}/pod-a`;

  /** A node whose driver has published the device (a regular file in memory) at PUBLISH. */
  function published(): Rig {
    const r = new Rig();
    r.fs.writeRaw(PUBLISH, '');
    return r;
  }

  /** `published()` with the device mapped for pod-a. */
  async function mapped(): Promise<Rig> {
    const r = published();
    await mapBlockVolume(r.host, PUBLISH, GMP, POD_MAP, 'pod-a');
    return r;
  }

  /** `r`'s mounter, recording the mount calls in `mounts` and failing IsLikelyNotMountPoint of `failCheckOf` with `code`. */
  function mounterOf(r: Rig, mounts: unknown[][], failCheckOf = '', code = 'EACCES'): VolumeHost['mounter'] {
    return {
      isLikelyNotMountPoint: (p) => (p === failCheckOf ? Promise.reject(new FsError(code, p, 'stat')) : r.mounter.isLikelyNotMountPoint(p)),
      mount: (source, target, fsType, options) => {
        mounts.push([source, target, fsType, [...options]]);
        return r.mounter.mount(source, target, fsType, options);
      },
      unmount: (target) => r.mounter.unmount(target),
      readMountTable: () => r.mounter.readMountTable(),
    };
  }

  const isCode = (code: string) => (err: unknown) => err instanceof FsError && err.code === code;

  it('map: the bind target is a new empty file (0750, as kubelet makes it) that the published device is bind mounted on, with no filesystem type; the pod links to the publish path', async () => {
    const r = published();
    const mounts: unknown[][] = [];
    await mapBlockVolume({ ...r.host, mounter: mounterOf(r, mounts) }, PUBLISH, GMP, POD_MAP, 'pod-a');
    // Like kubelet's mapBindMountDevice: fsType "" and options ["bind"] (no -t on a real node).
    assert.deepEqual(mounts, [[PUBLISH, BIND, '', ['bind']]]);
    const st = await r.fs.lstat(BIND);
    // volume_path_handler.go mapBindMountDevice creates it with mode 0750 (before the umask).
    assert.deepEqual([st.type, st.size, st.mode], ['file', 0, 0o750]);
    assert.equal(await r.fs.readlink(LINK), PUBLISH);
    assert.deepEqual(r.mounts(), [BIND]);
  });

  it('map: a pod link left by an earlier map (stale after a reboot) is replaced by one to the publish path', async () => {
    const r = published();
    await r.fs.mkdir(POD_MAP.dir, { recursive: true, mode: 0o750 });
    await r.fs.symlink('/dev/old-device', LINK);
    await mapBlockVolume(r.host, PUBLISH, GMP, POD_MAP, 'pod-a');
    assert.equal(await r.fs.readlink(LINK), PUBLISH);
  });

  it('map: a pod link that cannot be removed (EACCES) fails the map with that error, and the old link stays', async () => {
    const r = published();
    await r.fs.mkdir(POD_MAP.dir, { recursive: true, mode: 0o750 });
    await r.fs.symlink('/dev/old-device', LINK);
    const fs = new FaultyFs(r.fs).failOn('unlink', LINK, 'EACCES');
    await assert.rejects(mapBlockVolume({ ...r.host, fs }, PUBLISH, GMP, POD_MAP, 'pod-a'), isCode('EACCES'));
    assert.equal(await r.fs.readlink(LINK), '/dev/old-device');
  });

  it('map: a bind target that cannot be checked (EACCES, not ENOENT) fails the map with that error; nothing is created or mounted', async () => {
    const r = published();
    const fs = new FaultyFs(r.fs).failOn('lstat', BIND, 'EACCES');
    await assert.rejects(mapBlockVolume({ ...r.host, fs }, PUBLISH, GMP, POD_MAP, 'pod-a'), isCode('EACCES'));
    assert.equal(await r.exists(BIND), false);
    assert.deepEqual(r.mounts(), []);
  });

  it('unmap: the bind mount is unmounted, the pod link and the bind target file are removed; the global map path stays', async () => {
    const r = await mapped();
    await unmapBlockVolume(r.host, GMP, POD_MAP, 'pod-a');
    assert.deepEqual(r.mounts(), []);
    assert.equal(await r.exists(LINK), false);
    assert.equal(await r.exists(BIND), false);
    assert.deepEqual(r.tree(`${BLOCK_DIR}/block-pv`), [`${GMP}/`]);
  });

  // util.go UnmapBlockVolume returns the symlink's removal error before the bind mount is touched.
  it('unmap: a pod link that cannot be removed fails it, naming the link and the cause; the device stays bind mounted', async () => {
    const r = await mapped();
    const fs = new FaultyFs(r.fs).failOn('unlink', LINK, 'EACCES');
    await assert.rejects(unmapBlockVolume({ ...r.host, fs }, GMP, POD_MAP, 'pod-a'), {
      message: `failed to remove block device link ${LINK}: ${new FsError('EACCES', LINK, 'unlink').message}`,
    });
    assert.deepEqual(r.mounts(), [BIND]);
    assert.equal(await r.exists(BIND), true);
  });

  // volumepathhandler IsDeviceBindMountExist: only "not there" is an answer; any other error is returned.
  it('unmap: a bind target that cannot be checked (EACCES, not ENOENT) fails it with that error and unmounts nothing', async () => {
    const r = await mapped();
    await assert.rejects(unmapBlockVolume({ ...r.host, mounter: mounterOf(r, [], BIND) }, GMP, POD_MAP, 'pod-a'), isCode('EACCES'));
    assert.deepEqual(r.mounts(), [BIND]);
    assert.equal(await r.exists(BIND), true);
  });

  it('unmap: a bind target reached through a symlink is never unmounted: a CsiPathError naming umount and the symlink', async () => {
    const r = published();
    // The global map path replaced by a symlink to a directory outside the root, where something is bind mounted.
    r.fs.writeRaw('/mnt/elsewhere/pod-a', '');
    await r.mounter.mount(PUBLISH, '/mnt/elsewhere/pod-a', '', ['bind']);
    await r.fs.mkdir(`${BLOCK_DIR}/block-pv`, { recursive: true, mode: 0o750 });
    await r.fs.symlink('/mnt/elsewhere', GMP);
    await assert.rejects(
      unmapBlockVolume(r.host, GMP, POD_MAP, 'pod-a'),
      (err: unknown) => err instanceof CsiPathError && err.message.startsWith(`refusing to hand ${BIND} to umount: ${GMP} is a symlink`),
    );
    assert.deepEqual(r.mounts(), ['/mnt/elsewhere/pod-a']);
    assert.equal(await r.exists('/mnt/elsewhere/pod-a'), true);
  });

  // volumepathhandler unmapBindMountDevice: removing the file after the unmount, only "gone already" is success.
  it('unmap: a bind target file that cannot be deleted after the unmount fails it with that error', async () => {
    const r = await mapped();
    const fs = new FaultyFs(r.fs).failOn('unlink', BIND, 'EACCES');
    await assert.rejects(unmapBlockVolume({ ...r.host, fs }, GMP, POD_MAP, 'pod-a'), isCode('EACCES'));
    assert.deepEqual(r.mounts(), []);
    assert.equal(await r.exists(BIND), true);
  });

  it('unmap: a bind target file gone by the time it is deleted (removed concurrently) is success', async () => {
    const r = await mapped();
    const fs = new FaultyFs(r.fs).failOn('unlink', BIND, 'ENOENT');
    await unmapBlockVolume({ ...r.host, fs }, GMP, POD_MAP, 'pod-a');
    assert.deepEqual(r.mounts(), []);
    assert.equal(await r.exists(LINK), false);
  });
});

describe('CSI CanAttach', () => {
  const rows: { name: string; spec: Spec; setup: (r: Rig) => void; expected: boolean }[] = [
    { name: 'an inline volume never attaches', spec: constructInlineSpec('scratch', DRIVER), setup: () => undefined, expected: false },
    { name: 'a PV whose CSIDriver says attachRequired: false does not attach', spec: pv('pv-1', 'vol-1'), setup: (r) => r.cluster.drivers.set(DRIVER, { name: DRIVER, attachRequired: false }), expected: false },
    { name: 'a PV whose CSIDriver says attachRequired: true attaches', spec: pv('pv-1', 'vol-1'), setup: () => undefined, expected: true },
    { name: 'a PV with no CSIDriver object attaches', spec: pv('pv-1', 'vol-1'), setup: (r) => r.cluster.drivers.delete(DRIVER), expected: true },
    // csi_plugin.go CanAttach reads only the driver name: an empty handle is not its concern.
    { name: 'a PV with an empty volume handle is answered by its CSIDriver all the same', spec: pv('pv-1', ''), setup: () => undefined, expected: true },
  ];
  for (const row of rows) {
    it(row.name, async () => {
      const r = new Rig();
      row.setup(r);
      assert.equal(await r.plugin.canAttach(row.spec), row.expected);
    });
  }

  it('an unreachable API server rejects instead of guessing for a PV', async () => {
    const r = new Rig();
    r.cluster.unreachable = 'connection refused';
    await assert.rejects(r.plugin.canAttach(pv('pv-1', 'vol-1')), /connection refused/);
    assert.equal(await r.plugin.canAttach(constructInlineSpec('scratch', DRIVER)), false, 'inline needs no API server');
  });
});

describe('CSI removals never leave the root dir', () => {
  const outside = ['/etc/x', `${ROOT}/../../../etc/x`, `${ROOT}/pods/../../../../etc/x`];
  for (const p of outside) {
    it(`removeMountDir(${JSON.stringify(p)}) throws and removes nothing`, async () => {
      const r = new Rig();
      r.fs.writeRaw('/etc/x/keep', 'k');
      r.fs.writeRaw('/etc/vol_data.json', '{}');
      await r.fs.mkdir('/etc/x/empty', { recursive: true, mode: 0o755 });
      await assert.rejects(removeMountDir(r.host, p), CsiPathError);
      assert.deepEqual(r.fs.tree('/etc'), ['/etc/vol_data.json', '/etc/x/', '/etc/x/empty/', '/etc/x/keep']);
    });
  }

  it('removeMountDir of an empty dir outside the root throws and removes nothing', async () => {
    const r = new Rig();
    await r.fs.mkdir('/etc/x', { recursive: true, mode: 0o755 });
    r.fs.writeRaw('/etc/vol_data.json', '{}');
    await assert.rejects(removeMountDir(r.host, '/etc/x'), CsiPathError);
    assert.deepEqual(r.fs.tree('/etc'), ['/etc/vol_data.json', '/etc/x/']);
  });

  it('removeMountDir of the root dir itself or a sibling with the root as prefix throws', async () => {
    const r = new Rig();
    await r.fs.mkdir(`${ROOT}-other/x`, { recursive: true, mode: 0o755 });
    await assert.rejects(removeMountDir(r.host, ROOT), CsiPathError);
    await assert.rejects(removeMountDir(r.host, `${ROOT}-other/x`), CsiPathError);
    assert.equal(await r.exists(`${ROOT}-other/x`), true);
    assert.equal(await r.exists(`${ROOT}/.keep`), true);
  });

  it('MountDevice at a device mount path outside the root creates nothing there', async () => {
    const r = new Rig();
    await assert.rejects(r.attacher.mountDevice(pv('pv-1', 'vol-1'), '', '/etc/x/globalmount', {}), CsiPathError);
    assert.deepEqual(r.fs.tree('/etc'), []);
    assert.deepEqual(r.calls(), []);
  });

  it('UnmountDevice at a device mount path outside the root unstages and removes nothing', async () => {
    const r = new Rig();
    await r.fs.mkdir('/etc/x/globalmount', { recursive: true, mode: 0o755 });
    r.fs.writeRaw('/etc/x/vol_data.json', `{"driverName":"${DRIVER}","volumeHandle":"vol-1"}\n`);
    await assert.rejects(r.attacher.unmountDevice('/etc/x/globalmount'));
    assert.deepEqual(r.fs.tree('/etc'), ['/etc/x/', '/etc/x/globalmount/', '/etc/x/vol_data.json']);
    assert.deepEqual(r.driver.calls.filter((c) => c.method === 'NodeUnstageVolume'), []);
  });
});

// The failure paths of csi_attacher.go MountDevice / UnmountDevice and csi_mounter.go SetUpAt /
// TearDownAt one by one: the exact error text each returns, whether it is final, transient or
// uncertain, which hooks are asked, and what the deferred removeMountDir leaves.
describe('CSI MountDevice, UnmountDevice, SetUp and TearDown failures: texts, classification, cleanup', () => {
  const DMP = globalMount('vol-1');
  const POD_DIR = podVolDir('pod-a', 'pv-1');
  const POD_MOUNT = podMount('pod-a', 'pv-1');
  const message = (err: unknown): string => (err instanceof Error ? err.message : assert.fail(`not an Error: ${String(err)}`));
  const rejection = (p: Promise<unknown>): Promise<unknown> =>
    p.then(
      () => assert.fail('resolved'),
      (e: unknown) => e,
    );

  /** r's host with a client whose `nth` NodeGetCapabilities call fails UNAVAILABLE (the others reach the fake driver). */
  function capabilitiesFailingAt(r: Rig, nth: number): VolumeHost {
    let n = 0;
    const d = r.driver;
    const client: CsiNodeClient = {
      nodeGetCapabilities: () => (++n === nth ? Promise.reject(new CsiCallError('NodeGetCapabilities', GrpcStatus.UNAVAILABLE, 'busy')) : d.nodeGetCapabilities()),
      nodeStageVolume: (q) => d.nodeStageVolume(q),
      nodeUnstageVolume: (q) => d.nodeUnstageVolume(q),
      nodePublishVolume: (q) => d.nodePublishVolume(q),
      nodeUnpublishVolume: (q) => d.nodeUnpublishVolume(q),
    };
    return { ...r.host, csiDrivers: { client: (name) => (name === DRIVER ? client : undefined) } };
  }

  /** Every vol_data.json write under the root fails ENOSPC (the atomic write's temp file). */
  function volumeDataWritesFail(r: Rig): void {
    const inner = r.fs.writeFile.bind(r.fs);
    r.fs.writeFile = (p, data, options) => (p.endsWith('/vol_data.json.tmp') ? Promise.reject(new FsError('ENOSPC', p, 'writeFile')) : inner(p, data, options));
  }

  interface Asked {
    finished: FinishedErrorSite[];
    failedCleanups: FailedCleanupSite[];
    shownCallers: string[];
  }
  /** kubelet's hooks, with onFinishedError answering `decision` and afterFailedCleanup `afterFailed` when given; records what they are asked. */
  function hooks(asked: Asked, o: { decision?: FinishedErrorDecision; afterFailed?: FailedCleanupDecision } = {}): CsiHooks {
    return {
      ...upstreamCsiHooks,
      uncertainAfterFinishedError: (_host, _err, _path, caller) => {
        asked.shownCallers.push(caller);
        return Promise.resolve(undefined);
      },
      ...(o.decision === undefined ? {} : { onFinishedError: (site: FinishedErrorSite) => (asked.finished.push(site), o.decision ?? 'cleanup') }),
      ...(o.afterFailed === undefined ? {} : { afterFailedCleanup: (site: FailedCleanupSite) => (asked.failedCleanups.push(site), Promise.resolve(o.afterFailed ?? 'forget')) }),
    };
  }
  const none = (): Asked => ({ finished: [], failedCleanups: [], shownCallers: [] });

  describe('MountDevice (csi_attacher.go MountDevice)', () => {
    const invalid: { name: string; spec: Spec; dmp: string; text: string }[] = [
      { name: 'an empty device mount path', spec: pv('pv-1', 'vol-1'), dmp: '', text: 'attacher.MountDevice failed, deviceMountPath is empty' },
      { name: 'an inline volume spec', spec: constructInlineSpec('scratch', DRIVER), dmp: DMP, text: 'attacher.MountDevice failed to get CSIPersistentVolumeSource' },
      { name: 'a PV without a CSI source', spec: { kind: 'persistent', readOnly: false, persistentVolume: { name: 'pv-1' } }, dmp: DMP, text: 'attacher.MountDevice failed to get CSIPersistentVolumeSource' },
      { name: 'an empty volume handle', spec: pv('pv-1', ''), dmp: globalMount(''), text: 'attacher.MountDevice failed: volume handle is empty' },
    ];
    for (const tc of invalid) {
      it(`${tc.name}: the exact final error "${tc.text}"`, async () => {
        const r = new Rig();
        const err = await rejection(r.attacher.mountDevice(tc.spec, '', tc.dmp, {}));
        assert.equal(message(err), `kubernetes.io/csi: ${tc.text}`);
        assert.ok(isOperationFinishedError(err));
      });
    }

    it('a failed STAGE_UNSTAGE_VOLUME check is a final error with its text; nothing is created', async () => {
      const r = new Rig();
      const err = await rejection(new CsiAttacher(capabilitiesFailingAt(r, 1)).mountDevice(pv('pv-1', 'vol-1'), '', DMP, {}));
      assert.equal(message(err), 'kubernetes.io/csi: attacher.MountDevice failed to check STAGE_UNSTAGE_VOLUME: rpc error: code = UNAVAILABLE desc = busy');
      assert.ok(isOperationFinishedError(err));
      assert.deepEqual(r.tree(), []);
    });

    // csiHooks.ts: the simulator's interleavings count microtask turns, so a claim returned
    // synchronously must not be awaited.
    it('a synchronous beginMountDevice claim adds no microtask turn: the driver is looked up before mountDevice() returns its promise', async () => {
      const r = new Rig();
      let lookups = 0;
      let released = 0;
      const host: VolumeHost = { ...r.host, csiDrivers: { client: (n) => (lookups++, r.host.csiDrivers.client(n)) } };
      const done = new CsiAttacher(host, { ...upstreamCsiHooks, beginMountDevice: () => () => { released++; } }).mountDevice(pv('pv-1', 'vol-1'), '', DMP, {});
      assert.equal(lookups, 1, 'clientFor ran before mountDevice returned its promise');
      await done;
      assert.deepEqual([released, r.calls()], [1, ['NodeStageVolume OK']]);
    });

    it("no beginMountDevice hook (kubelet's): no claim and no microtask turn either: the driver is looked up before mountDevice() returns its promise", async () => {
      const r = new Rig();
      let lookups = 0;
      const host: VolumeHost = { ...r.host, csiDrivers: { client: (n) => (lookups++, r.host.csiDrivers.client(n)) } };
      assert.equal(upstreamCsiHooks.beginMountDevice, undefined);
      const done = new CsiAttacher(host, upstreamCsiHooks).mountDevice(pv('pv-1', 'vol-1'), '', DMP, {});
      assert.equal(lookups, 1, 'clientFor ran before mountDevice returned its promise');
      await done;
      assert.deepEqual(r.calls(), ['NodeStageVolume OK']);
    });

    describe('the VOLUME_MOUNT_GROUP check fails (its second NodeGetCapabilities): kubelet\'s deferred removeMountDir runs', () => {
      const TEXT = 'kubernetes.io/csi: attacher.MountDevice failed to determine if the node service has VOLUME_MOUNT_GROUP capability: rpc error: code = UNAVAILABLE desc = busy';

      it('the removal succeeds: the transient error as it is, the volume dir gone, afterFailedCleanup not asked', async () => {
        const r = new Rig();
        const asked = none();
        const err = await rejection(new CsiAttacher(capabilitiesFailingAt(r, 2), hooks(asked, { afterFailed: 'uncertain' })).mountDevice(pv('pv-1', 'vol-1'), '', DMP, { fsGroup: 3 }));
        assert.equal(message(err), TEXT);
        assert.ok(err instanceof TransientOperationFailure);
        assert.deepEqual(asked.failedCleanups, []);
        assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
        assert.deepEqual(r.calls(), []);
      });

      for (const afterFailed of ['uncertain', 'forget'] as const) {
        it(`the removal fails (the volume dir holds something else), afterFailedCleanup answers ${afterFailed}`, async () => {
          const r = new Rig();
          r.fs.writeRaw(`${volDir('vol-1')}/unexpected`, 'x');
          const asked = none();
          const err = await rejection(new CsiAttacher(capabilitiesFailingAt(r, 2), hooks(asked, { afterFailed })).mountDevice(pv('pv-1', 'vol-1'), '', DMP, { fsGroup: 3 }));
          assert.equal(message(err), TEXT);
          assert.equal(err instanceof UncertainProgressError, afterFailed === 'uncertain');
          if (afterFailed === 'forget') assert.ok(err instanceof TransientOperationFailure);
          assert.deepEqual(asked.failedCleanups, [{ operation: 'MountDevice', step: 'NodeGetCapabilities', path: DMP, args: { fsGroup: 3 }, dataDir: volDir('vol-1') }]);
          assert.deepEqual(r.tree(volDir('vol-1')), [`${volDir('vol-1')}/unexpected`]);
        });
      }
    });

    describe('saving the global vol_data.json fails: a final error, NodeStageVolume not sent', () => {
      const TEXT = 'kubernetes.io/csi: failed to save volume info data: ';

      it('onFinishedError answers keep: globalmount stays', async () => {
        const r = new Rig();
        volumeDataWritesFail(r);
        const asked = none();
        const err = await rejection(new CsiAttacher(r.host, hooks(asked, { decision: 'keep' })).mountDevice(pv('pv-1', 'vol-1'), '', DMP, {}));
        assert.ok(message(err).startsWith(TEXT));
        assert.ok(isOperationFinishedError(err));
        assert.deepEqual(asked.finished, [{ operation: 'MountDevice', step: 'saveVolumeData', path: DMP, args: {} }]);
        assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`, `${volDir('vol-1')}/`, `${DMP}/`]);
      });

      it('the removal succeeds: afterFailedCleanup not asked, the volume dir gone', async () => {
        const r = new Rig();
        volumeDataWritesFail(r);
        const asked = none();
        const err = await rejection(new CsiAttacher(r.host, hooks(asked, { decision: 'cleanup', afterFailed: 'uncertain' })).mountDevice(pv('pv-1', 'vol-1'), '', DMP, {}));
        assert.ok(isOperationFinishedError(err));
        assert.deepEqual(asked.failedCleanups, []);
        assert.deepEqual(r.tree(CSI_DIR), [`${CSI_DIR}/${DRIVER}/`]);
      });

      it('the removal fails and afterFailedCleanup answers uncertain: an UncertainProgressError with the same text', async () => {
        const r = new Rig();
        volumeDataWritesFail(r);
        r.fs.writeRaw(`${volDir('vol-1')}/unexpected`, 'x');
        const asked = none();
        const err = await rejection(new CsiAttacher(r.host, hooks(asked, { decision: 'cleanup', afterFailed: 'uncertain' })).mountDevice(pv('pv-1', 'vol-1'), '', DMP, {}));
        assert.ok(err instanceof UncertainProgressError);
        assert.ok(message(err).startsWith(TEXT));
        assert.deepEqual(asked.failedCleanups, [{ operation: 'MountDevice', step: 'saveVolumeData', path: DMP, args: {}, dataDir: volDir('vol-1') }]);
        assert.deepEqual(r.calls(), []);
      });
    });

    it('a final NodeStageVolume error: uncertainAfterFinishedError is asked as attacher.MountDevice; a failed removal is logged with the device mount path', async () => {
      const r = new Rig();
      r.fs.writeRaw(`${volDir('vol-1')}/unexpected`, 'x');
      r.driver.inject({ method: 'NodeStageVolume', code: GrpcStatus.INTERNAL, times: 1 });
      const asked = none();
      const err = await rejection(new CsiAttacher(r.host, hooks(asked)).mountDevice(pv('pv-1', 'vol-1'), '', DMP, {}));
      assert.ok(isOperationFinishedError(err));
      assert.deepEqual(asked.shownCallers, ['attacher.MountDevice']);
      const logged = r.logger.lines.filter((l) => l.severity === 'E');
      assert.deepEqual(
        logged.map((l) => [l.msg, l.values['deviceMountPath']]),
        [['kubernetes.io/csi: attacher.MountDevice failed to remove mount dir after error', DMP]],
      );
    });
  });

  describe('UnmountDevice (csi_attacher.go UnmountDevice)', () => {
    it('a global vol_data.json that is a symlink out of the root is not read through: the final error with its text, no NodeUnstageVolume', async () => {
      const r = new Rig();
      await r.mountDevice(pv('pv-1', 'vol-1'));
      r.fs.writeRaw('/elsewhere/vol_data.json', GLOBAL_BYTES('pv-1', 'vol-1'));
      await r.fs.unlink(`${volDir('vol-1')}/vol_data.json`);
      await r.fs.symlink('/elsewhere/vol_data.json', `${volDir('vol-1')}/vol_data.json`);
      const err = await rejection(r.attacher.unmountDevice(DMP));
      assert.ok(message(err).startsWith('kubernetes.io/csi: attacher.UnmountDevice failed to get driver and volume name from device mount path: '), message(err));
      assert.ok(isOperationFinishedError(err));
      assert.deepEqual(r.calls(), ['NodeStageVolume OK']);
      assert.deepEqual(r.mounts(), [DMP]);
    });

    it('a global file without driverName looks up the driver named "" (kubelet reads a missing key as empty)', async () => {
      const r = new Rig();
      await r.mountDevice(pv('pv-1', 'vol-1'));
      r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, '{"volumeHandle":"vol-1"}\n');
      const err = await rejection(r.attacher.unmountDevice(DMP));
      assert.equal(message(err), 'kubernetes.io/csi: driver name  not found in the list of registered CSI drivers');
    });

    it('a global file without volumeHandle sends NodeUnstageVolume with an empty volume id', async () => {
      const r = new Rig();
      await r.mountDevice(pv('pv-1', 'vol-1'));
      r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, `{"driverName":"${DRIVER}"}\n`);
      await r.attacher.unmountDevice(DMP).catch(() => undefined);
      assert.deepEqual(r.unstageRequests().map((q) => q.volumeId), ['']);
    });

    it('a failed STAGE_UNSTAGE_VOLUME check is a final error with its text; nothing removed', async () => {
      const r = new Rig();
      await r.mountDevice(pv('pv-1', 'vol-1'));
      const err = await rejection(new CsiAttacher(capabilitiesFailingAt(r, 1)).unmountDevice(DMP));
      assert.equal(message(err), 'kubernetes.io/csi: attacher.UnmountDevice failed to check whether STAGE_UNSTAGE_VOLUME set: rpc error: code = UNAVAILABLE desc = busy');
      assert.ok(isOperationFinishedError(err));
      assert.equal(await r.read(`${volDir('vol-1')}/vol_data.json`), GLOBAL_BYTES('pv-1', 'vol-1'));
    });

    it('a symlinked staging path is refused before NodeUnstageVolume, naming the call', async () => {
      const r = new Rig();
      await r.fs.mkdir(volDir('vol-1'), { recursive: true, mode: 0o750 });
      r.fs.writeRaw(`${volDir('vol-1')}/vol_data.json`, GLOBAL_BYTES('pv-1', 'vol-1'));
      await r.fs.mkdir('/elsewhere/globalmount', { recursive: true, mode: 0o750 });
      await r.fs.symlink('/elsewhere/globalmount', DMP);
      const err = await rejection(r.attacher.unmountDevice(DMP));
      assert.ok(err instanceof CsiPathError);
      assert.ok(message(err).startsWith(`kubernetes.io/csi: refusing to hand ${DMP} to NodeUnstageVolume: ${DMP} is a symlink`), message(err));
      assert.deepEqual(r.calls(), []);
    });

    it('the nodeUnstageVolumeRecord hook is started as attacher.UnmountDevice, then ended, around NodeUnstageVolume', async () => {
      const r = new Rig();
      await r.mountDevice(pv('pv-1', 'vol-1'));
      const seen: string[] = [];
      const record = {
        dataDirExists: () => assert.fail('TearDownDevice only'),
        started: (_h: VolumeHost, dataDir: string, caller: string) => (seen.push(`started ${dataDir} ${caller} ${r.calls().length}`), Promise.resolve()),
        ended: (_h: VolumeHost, dataDir: string) => (seen.push(`ended ${dataDir} ${r.calls().length}`), Promise.resolve()),
      };
      await new CsiAttacher(r.host, { ...upstreamCsiHooks, nodeUnstageVolumeRecord: record }).unmountDevice(DMP);
      assert.deepEqual(seen, [`started ${volDir('vol-1')} attacher.UnmountDevice 1`, `ended ${volDir('vol-1')} 2`]);
    });

    it('a removal that fails after NodeUnstageVolume: the final error names the global mount', async () => {
      const r = new Rig();
      await r.mountDevice(pv('pv-1', 'vol-1'));
      r.fs.writeRaw(`${volDir('vol-1')}/unexpected`, 'x');
      const err = await rejection(r.attacher.unmountDevice(DMP));
      assert.ok(message(err).startsWith(`kubernetes.io/csi: attacher.UnmountDevice failed to clean up global mount ${DMP}: `), message(err));
      assert.ok(isOperationFinishedError(err));
      assert.deepEqual(r.calls(), ['NodeStageVolume OK', 'NodeUnstageVolume OK']);
    });
  });

  describe('SetUp (csi_mounter.go SetUpAt)', () => {
    const TARGET = { driverName: DRIVER, volumeHandle: 'vol-1', specName: 'pv-1', podUID: 'pod-a', lifecycle: 'Persistent' } as const;
    const mounter = (host: VolumeHost, h: CsiHooks = upstreamCsiHooks, spec: Spec = pv('pv-1', 'vol-1')): CsiMounter => new CsiMounter(host, TARGET, spec, POD_A, h);

    it('an API server that cannot say the CSIDriver\'s lifecycle modes: a transient error with its text, nothing created', async () => {
      const r = new Rig();
      r.cluster.unreachable = 'connection refused';
      const err = await rejection(mounter(r.host).setUp({}));
      assert.equal(message(err), 'kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: connection refused');
      assert.ok(err instanceof TransientOperationFailure);
      assert.deepEqual([r.tree(), r.driver.calls.length], [[], 0]);
    });

    it('a failed STAGE_UNSTAGE_VOLUME check: a final error with its text', async () => {
      const r = new Rig();
      const err = await rejection(mounter(capabilitiesFailingAt(r, 1)).setUp({}));
      assert.equal(message(err), 'kubernetes.io/csi: mounter.SetUpAt failed to check for STAGE_UNSTAGE_VOLUME capability: rpc error: code = UNAVAILABLE desc = busy');
      assert.ok(isOperationFinishedError(err));
    });

    it('a VolumeAttachment that cannot be read: a transient error with its text, nothing created, no NodePublishVolume', async () => {
      const r = new Rig();
      r.cluster.getVolumeAttachment = () => Promise.reject(new Error('etcd timeout'));
      const err = await rejection(mounter(r.host).setUp({}));
      assert.equal(message(err), 'kubernetes.io/csi: mounter.SetUpAt failed to fetch publishContext: etcd timeout');
      assert.ok(err instanceof TransientOperationFailure);
      assert.deepEqual([r.tree(), r.calls()], [[], []]);
    });

    it('a CSIDriver that cannot be read for podInfoOnMount: a transient error with its text', async () => {
      const r = new Rig();
      const inner = r.cluster.getCSIDriver.bind(r.cluster);
      let n = 0;
      // The lifecycle-mode check and getPublishContext's attachRequired read it first.
      r.cluster.getCSIDriver = (name) => (++n === 3 ? Promise.reject(new Error('etcd timeout')) : inner(name));
      const err = await rejection(mounter(r.host).setUp({}));
      assert.equal(message(err), 'kubernetes.io/csi: mounter.SetUpAt failed to assemble volume attributes: etcd timeout');
      assert.ok(err instanceof TransientOperationFailure);
    });

    it('a failed VOLUME_MOUNT_GROUP check: the transient error names mounter.SetUpAt', async () => {
      const r = new Rig();
      const err = await rejection(mounter(capabilitiesFailingAt(r, 2)).setUp({ fsGroup: 3 }));
      assert.equal(message(err), 'kubernetes.io/csi: mounter.SetUpAt failed to determine if the node service has VOLUME_MOUNT_GROUP capability: rpc error: code = UNAVAILABLE desc = busy');
      assert.ok(err instanceof TransientOperationFailure);
    });

    for (const [label, key] of [['', false], ['system_u:object_r:container_file_t:s0:c1,c2', true]] as const) {
      it(`an SELinux label ${JSON.stringify(label)} ${key ? 'is' : 'is not'} written to the pod-local file`, async () => {
        const r = new Rig({ capabilities: [] });
        await mounter(r.host).setUp({ seLinuxLabel: label });
        const data = JSON.parse(await r.read(`${POD_DIR}/vol_data.json`)) as Record<string, string>;
        assert.deepEqual(data['seLinuxMountContext'], key ? label : undefined);
      });
    }

    it('a PV without fsType is published with fsType "", and an inline volume with its own readOnly (false when unset)', async () => {
      const r = new Rig({ capabilities: [] });
      r.cluster.drivers.set(DRIVER, { name: DRIVER, attachRequired: true, volumeLifecycleModes: ['Persistent', 'Ephemeral'] });
      await mounter(r.host).setUp({});
      const inline = (readOnly: boolean | undefined): Spec => ({ kind: 'inline', readOnly: false, volume: { name: 'scratch', csi: { driver: DRIVER, ...(readOnly === undefined ? {} : { readOnly }) } } });
      for (const [i, readOnly] of [undefined, true].entries()) {
        const pod: PodRef = { uid: `pod-${i}`, namespace: 'default', name: `pod-${i}` };
        await (await r.plugin.newMounter(inline(readOnly), pod)).setUp({});
      }
      assert.deepEqual(
        r.publishRequests().map((q) => [q.volumeCapability.mount?.fsType, q.readonly]),
        [['', false], ['', false], ['', true]],
      );
    });

    describe('saving the pod-local vol_data.json fails: kubelet removes the mount dir and returns a transient error', () => {
      const TEXT = 'kubernetes.io/csi: mounter.SetUpAt failed to save volume info data: ';

      it('kubelet\'s hooks: the volume dir is removed', async () => {
        const r = new Rig();
        volumeDataWritesFail(r);
        const err = await rejection(mounter(r.host).setUp({}));
        assert.ok(message(err).startsWith(TEXT));
        assert.ok(err instanceof TransientOperationFailure);
        assert.equal(await r.exists(POD_DIR), false);
        assert.deepEqual(r.calls(), []);
      });

      for (const decision of ['keep', 'uncertain'] as const) {
        it(`onFinishedError answers ${decision}: the volume dir stays, ${decision === 'keep' ? 'a transient' : 'an uncertain'} error`, async () => {
          const r = new Rig();
          volumeDataWritesFail(r);
          const asked = none();
          const err = await rejection(mounter(r.host, hooks(asked, { decision, afterFailed: 'uncertain' })).setUp({}));
          assert.ok(message(err).startsWith(TEXT));
          assert.equal(err instanceof UncertainProgressError, decision === 'uncertain');
          assert.equal(err instanceof TransientOperationFailure, decision === 'keep');
          assert.deepEqual(asked.finished, [{ operation: 'SetUp', step: 'saveVolumeData', path: POD_MOUNT, args: {} }]);
          assert.deepEqual(asked.failedCleanups, []);
          assert.equal(await r.exists(POD_DIR), true);
        });
      }

      it('the removal succeeds: afterFailedCleanup not asked', async () => {
        const r = new Rig();
        volumeDataWritesFail(r);
        const asked = none();
        const err = await rejection(mounter(r.host, hooks(asked, { decision: 'cleanup', afterFailed: 'uncertain' })).setUp({}));
        assert.ok(err instanceof TransientOperationFailure);
        assert.deepEqual(asked.failedCleanups, []);
        assert.equal(await r.exists(POD_DIR), false);
      });

      it('the removal fails: it is logged with the dir, and afterFailedCleanup answering uncertain makes the error uncertain', async () => {
        const r = new Rig();
        volumeDataWritesFail(r);
        r.fs.writeRaw(`${POD_DIR}/unexpected`, 'x');
        const asked = none();
        const err = await rejection(mounter(r.host, hooks(asked, { decision: 'cleanup', afterFailed: 'uncertain' })).setUp({}));
        assert.ok(err instanceof UncertainProgressError);
        assert.ok(message(err).startsWith(TEXT));
        assert.deepEqual(asked.failedCleanups, [{ operation: 'SetUp', step: 'saveVolumeData', path: POD_MOUNT, args: {}, dataDir: POD_DIR }]);
        assert.deepEqual(
          r.logger.lines.filter((l) => l.severity === 'E').map((l) => [l.msg, l.values['dir']]),
          [['kubernetes.io/csi: mounter.SetUpAt failed to remove mount dir after error', POD_MOUNT]],
        );
      });
    });

    it('a final NodePublishVolume error: uncertainAfterFinishedError is asked as mounter.SetUpAt', async () => {
      const r = new Rig();
      r.driver.inject({ method: 'NodePublishVolume', code: GrpcStatus.INTERNAL, times: 1 });
      const asked = none();
      await rejection(mounter(r.host, hooks(asked)).setUp({}));
      assert.deepEqual(asked.shownCallers, ['mounter.SetUpAt']);
    });
  });

  describe('TearDown (csi_mounter.go TearDownAt)', () => {
    it('a symlinked mount dir is refused before NodeUnpublishVolume, naming the call', async () => {
      const r = new Rig();
      await r.fs.mkdir(POD_DIR, { recursive: true, mode: 0o750 });
      await r.fs.mkdir('/elsewhere/mount', { recursive: true, mode: 0o750 });
      await r.fs.symlink('/elsewhere/mount', POD_MOUNT);
      const err = await rejection(new CsiUnmounter(r.host, { driverName: DRIVER, volumeHandle: 'vol-1', specName: 'pv-1', podUID: 'pod-a' }).tearDown());
      assert.ok(message(err).startsWith(`kubernetes.io/csi: refusing to hand ${POD_MOUNT} to NodeUnpublishVolume: ${POD_MOUNT} is a symlink`), message(err));
      assert.deepEqual(r.calls(), []);
    });

    it('a removal that fails after NodeUnpublishVolume: the final error names the mount dir', async () => {
      const r = new Rig();
      await r.mountForPod(pv('pv-1', 'vol-1'));
      r.fs.writeRaw(`${POD_DIR}/unexpected`, 'x');
      const err = await rejection(new CsiUnmounter(r.host, { driverName: DRIVER, volumeHandle: 'vol-1', specName: 'pv-1', podUID: 'pod-a' }).tearDown());
      assert.ok(message(err).startsWith(`kubernetes.io/csi: Unmounter.TearDownAt failed to clean mount dir [${POD_MOUNT}]: `), message(err));
      assert.ok(isOperationFinishedError(err));
      assert.deepEqual(r.calls(), ['NodeStageVolume OK', 'NodePublishVolume OK', 'NodeUnpublishVolume OK']);
    });
  });
});
