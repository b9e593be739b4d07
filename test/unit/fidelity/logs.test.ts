// The log lines operators grep for (docs/reference/agent.md) - name, severity and verbosity as kubelet
// writes them (reconciler_common.go, reconstruct.go, reconstruct_common.go getVolumesFromPodDir,
// operation_generator.go). Each test reads the recorded lines of a whole flow.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import type { UniquePodName, UniqueVolumeName } from '../../../src/layout/names.js';
import { sha256Hex } from '../../../src/layout/names.js';
import { markDeviceErrorState } from '../../../src/operationexecutor/operationGenerator.js';
import { RecordingLogger } from '../../support/hosts.js';
import { DRIVER, InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import { VolumePluginMgr, type GlobalVolume } from '../../../src/volume/plugins.js';
import { constructPVSourceSpec } from '../../../src/volume/spec.js';
import { VolumeManager } from '../../../src/volumemanager/volumeManager.js';
import { createActualStateOfWorld } from '../../../src/volumemanager/cache/actualStateOfWorld.js';
import type { VolumeToMount } from '../../../src/operationexecutor/volumeToMount.js';

type Line = { level: number; severity: string };
const linesOf = (logger: RecordingLogger, msg: string): Line[] =>
  logger.lines.filter((l) => l.msg === msg).map((l) => ({ level: l.level, severity: l.severity }));
const first = (logger: RecordingLogger, msg: string): Line | undefined => linesOf(logger, msg)[0];

const POD_VOL = (uid: string, name: string): string => `${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/${name}`;
const GLOBAL_DIR = (handle: string): string => `${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(handle)}`;

/** A node whose pod mounted pv-1, then kubelet was killed. */
async function mountedThenCrashed(): Promise<InMemoryNode> {
  const node = new InMemoryNode();
  node.addVolume('pv-1', 'vol-1');
  node.addPod('pod-a', ['pv-1']);
  const vm = await node.startKubelet(false);
  await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
  node.crashKubelet();
  return node;
}

describe('log lines of a mount and an unmount', () => {
  it('MountVolume started at V(1), VerifyControllerAttachedVolume started at Info; TearDown, UnmountDevice succeeded at Info, Starting UnmountDevice at V(5)', async () => {
    const node = new InMemoryNode();
    const name = node.addVolume('pv-1', 'vol-1');
    node.addPod('pod-a', ['pv-1']);
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
    assert.deepEqual(first(node.logger, 'operationExecutor.MountVolume started'), { level: 1, severity: 'I' });
    assert.deepEqual(first(node.logger, 'Starting operationExecutor.MountVolume'), { level: 4, severity: 'I' });
    assert.deepEqual(first(node.logger, 'operationExecutor.VerifyControllerAttachedVolume started'), { level: 0, severity: 'I' });
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => !vm.asw.volumeExists(name as UniqueVolumeName));
    assert.deepEqual(first(node.logger, 'UnmountVolume.TearDown succeeded'), { level: 0, severity: 'I' });
    assert.deepEqual(first(node.logger, 'Starting operationExecutor.UnmountDevice'), { level: 5, severity: 'I' });
    assert.deepEqual(first(node.logger, 'UnmountDevice succeeded'), { level: 0, severity: 'I' });
  });

  it('"Volume detached" at Info when a volume with no device mount leaves the actual state', async () => {
    const node = new InMemoryNode({ capabilities: [] });
    node.addPod('pod-a', [], ['scratch']);
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => vm.asw.getAttachedVolumes().length === 0);
    assert.deepEqual(first(node.logger, 'Volume detached'), { level: 0, severity: 'I' });
  });
});

describe('log lines of reconstruction', () => {
  it('the KEP line at V(2) at registration, even for a volume a pod directory also names', async () => {
    const node = await mountedThenCrashed();
    await node.startKubelet(true);
    assert.deepEqual(linesOf(node.logger, 'Global mount with no pod directory is marked uncertain and added into the actual state'), [
      { level: 2, severity: 'I' },
    ]);
    assert.deepEqual(first(node.logger, 'Adding reconstructed volume to actual state and node status'), { level: 4, severity: 'I' });
  });

  it('"Could not construct volume information" at Info with the error under err', async () => {
    const node = await mountedThenCrashed();
    node.fs.writeRaw(`${POD_VOL('pod-a', 'pv-1')}/vol_data.json`, '{corrupt');
    await node.startKubelet(false);
    const line = node.logger.lines.find((l) => l.msg === 'Could not construct volume information');
    assert.ok(line);
    assert.equal(line.severity, 'I');
    assert.equal(line.level, 0);
    assert.match(String(line.values['err']), /vol_data\.json/);
  });

  it('cleanupMounts: kubelet\'s "Reconciler sync states" line at V(2) for a volume that failed reconstruction and no pod wants', async () => {
    const node = await mountedThenCrashed();
    node.fs.writeRaw(`${POD_VOL('pod-a', 'pv-1')}/vol_data.json`, '{corrupt');
    node.cluster.deletePod('pod-a');
    await node.startKubelet(false);
    await node.stepUntil(() => node.logger.lines.some((l) => l.msg.startsWith('Reconciler sync states') || l.msg.startsWith('Cleaning up mounts')));
    assert.deepEqual(linesOf(node.logger, 'Reconciler sync states: could not find volume information in desired state, clean up the mount points'), [{ level: 2, severity: 'I' }]);
    assert.equal(first(node.logger, 'Cleaning up mounts for volume that could not be reconstructed'), undefined);
  });

  it('the node status fetch failure at V(4) Info, not an error', async () => {
    const node = await mountedThenCrashed();
    node.cluster.unreachable = 'connection refused';
    const vm = await node.startKubelet(false);
    await vm.reconcileOnce();
    assert.deepEqual(first(node.logger, 'Failed to get Node status to reconstruct device paths'), { level: 4, severity: 'I' });
    assert.equal(node.logger.lines.filter((l) => l.severity === 'E' && /Node status/.test(l.msg)).length, 0);
  });

  it('the pod directory walk: an unreadable volumes dir is skipped silently, an unreadable plugin dir is an error', async () => {
    const node = await mountedThenCrashed();
    node.fs.writeRaw(`${ROOT}/pods/pod-b/volumes`, 'not a directory');
    await node.fs.mkdir(`${ROOT}/pods/pod-c/volumes`, { recursive: true, mode: 0o750 });
    await node.fs.symlink('/tmp', `${ROOT}/pods/pod-c/volumes/kubernetes.io~csi`);
    const from = node.logger.lines.length;
    await node.startKubelet(false);
    const errors = node.logger.lines.slice(from).filter((l) => l.severity === 'E');
    assert.deepEqual(errors.map((l) => [l.msg, l.values['volumePluginPath']]), [
      ['Could not read volume plugin directory', `${ROOT}/pods/pod-c/volumes/kubernetes.io~csi`],
    ]);
    assert.deepEqual(first(node.logger, 'Volume path from volume plugin directory'), { level: 5, severity: 'I' });
  });
});

describe('markDeviceErrorState', () => {
  it('a final error on a reconstructed uncertain device logs "leaving volume uncertain" at V(2)', () => {
    const asw = createActualStateOfWorld();
    const logger = new RecordingLogger();
    const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1');
    const volumeName = `kubernetes.io/csi/${DRIVER}^vol-1` as UniqueVolumeName;
    const podName = 'pod-a' as UniquePodName;
    asw.addAttachUncertainReconstructedVolume(volumeName, spec, 'kubernetes.io/csi', '');
    asw.checkAndMarkVolumeAsUncertainViaReconstruction({ podName, podUID: 'pod-a', volumeName, volumeSpec: spec, outerVolumeSpecName: '', innerVolumeSpecName: 'pv-1', pluginName: 'kubernetes.io/csi', volumeMountState: 'VolumeMountUncertain', seLinuxMountContext: '' });
    asw.markDeviceAsUncertain(volumeName, '', `${GLOBAL_DIR('vol-1')}/globalmount`, '');
    const vtm = { volumeName, podName, seLinuxMountContext: '' } as VolumeToMount;
    markDeviceErrorState(asw, vtm, '', `${GLOBAL_DIR('vol-1')}/globalmount`, new Error('final'), logger);
    assert.equal(asw.getDeviceMountState(volumeName), 'DeviceMountUncertain');
    assert.deepEqual(first(logger, 'MountVolume.markDeviceErrorState leaving volume uncertain'), { level: 2, severity: 'I' });
  });
});

/** A CSI plugin that lists every global mount twice (two listers reporting the same volume). */
class ListsTwice extends CsiPlugin {
  override async listGlobalVolumes(): Promise<GlobalVolume[]> {
    const listed = await super.listGlobalVolumes();
    return [...listed, ...listed];
  }
}

describe('reconstructGlobalVolume: a volume listed again', () => {
  it('"Global mount is already in actual state, skipping" at V(4); registered and logged once', async () => {
    const node = await mountedThenCrashed();
    const host = volumeHostOf(node, { kep: true });
    const from = node.logger.lines.length;
    const vm = new VolumeManager({ host, metrics: node.metrics, plugins: new VolumePluginMgr([new ListsTwice(host)]) });
    await vm.start();
    const lines = new RecordingLogger(0, node.logger.lines.slice(from));
    assert.deepEqual(linesOf(lines, 'Global mount is already in actual state, skipping'), [{ level: 4, severity: 'I' }]);
    assert.equal(linesOf(lines, 'Global mount with no pod directory is marked uncertain and added into the actual state').length, 1);
  });
});

// A driver without STAGE_UNSTAGE_VOLUME. Kubelet logs the skip with klog.Infof
// (Info, V(0)) in csi_attacher.go MountDevice / UnmountDevice and csi_block.go
// stageVolumeForBlock / unstageVolumeForBlock.
describe('STAGE_UNSTAGE_VOLUME capability not set: the skip is logged at Info', () => {
  const SKIPS = {
    mountDevice: 'kubernetes.io/csi: attacher.MountDevice STAGE_UNSTAGE_VOLUME capability not set. Skipping MountDevice...',
    unmountDevice: 'kubernetes.io/csi: attacher.UnmountDevice STAGE_UNSTAGE_VOLUME capability not set. Skipping UnmountDevice...',
    stageBlock: 'kubernetes.io/csi: blockMapper.stageVolumeForBlock STAGE_UNSTAGE_VOLUME capability not set. Skipping MountDevice...',
    unstageBlock: 'kubernetes.io/csi: blockMapper.unstageVolumeForBlock STAGE_UNSTAGE_VOLUME capability not set. Skipping unstageVolumeForBlock ...',
  };

  it('filesystem: csi_attacher.go MountDevice and UnmountDevice skip at V(0)', async () => {
    const node = new InMemoryNode({ capabilities: [] });
    const name = node.addVolume('pv-1', 'vol-1');
    node.addPod('pod-a', ['pv-1']);
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
    node.cluster.deletePod('pod-a');
    await node.stepUntil(() => !vm.asw.volumeExists(name as UniqueVolumeName));
    assert.deepEqual(linesOf(node.logger, SKIPS.mountDevice), [{ level: 0, severity: 'I' }]);
    assert.deepEqual(linesOf(node.logger, SKIPS.unmountDevice), [{ level: 0, severity: 'I' }]);
  });

  it('raw block: csi_block.go stageVolumeForBlock and unstageVolumeForBlock skip at V(0)', async () => {
    const node = new InMemoryNode({ capabilities: [] });
    const name = node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
    node.addPod('pod-b', ['pv-b']);
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
    // TearDownDevice asks the driver only when the staging dir exists: one left by a driver
    // version that had the capability.
    await node.fs.mkdir(node.layout.csiBlockStagingPath('pv-b'), { recursive: true, mode: 0o750 });
    node.cluster.deletePod('pod-b');
    await node.stepUntil(() => !vm.asw.volumeExists(name as UniqueVolumeName));
    assert.deepEqual(linesOf(node.logger, SKIPS.stageBlock), [{ level: 0, severity: 'I' }]);
    assert.deepEqual(linesOf(node.logger, SKIPS.unstageBlock), [{ level: 0, severity: 'I' }]);
  });
});

// Log format: klog's caller is the file:line of the source that logged (klog's header,
// component-base JSON's "caller" through zap's ShortCallerEncoder); component-base JSON's "ts" is
// its epochMillisTimeEncoder: milliseconds since the epoch, as a float. The shipped CLI is one
// bundle; its lines must name the TypeScript file and line, not main.cjs:<bundle line>.
describe('the shipped CLI\'s log lines: caller names the source file and line, ts is epoch milliseconds (component-base JSON)', () => {
  const REPO = path.resolve(import.meta.dirname, '..', '..', '..', '..');
  const BIN = path.join(REPO, 'bin', 'nodevol.js');
  const SOURCE = path.join(REPO, 'src', 'volumemanager', 'reconciler', 'podVolumes.ts');
  const MSG = 'Volume path from volume plugin directory';
  const auditArgs = (format: 'json' | 'text'): string[] => [
    BIN, 'audit', '--root-dir', path.join(REPO, 'examples', 'node', 'kubelet'), '--mountinfo', path.join(REPO, 'examples', 'node', 'mountinfo'),
    '--mountinfo-root-dir', '/var/lib/kubelet', '-v', '5', '--logging-format', format,
  ];
  /** podVolumes.ts:<the line that logs MSG>, read from the source. */
  const expectedCaller = (): string => `podVolumes.ts:${readFileSync(SOURCE, 'utf8').split('\n').findIndex((l) => l.includes(`'${MSG}'`)) + 1}`;

  it('JSON: every caller is a .ts file:line (none names the bundle); the pod dir walk names podVolumes.ts at its line; ts is a float of epoch ms', () => {
    const before = Date.now();
    const r = spawnSync(process.execPath, auditArgs('json'), { encoding: 'utf8', timeout: 60_000 });
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { ts: number; caller: string; msg: string });
    assert.ok(lines.length > 0, r.stderr);
    for (const l of lines) assert.match(l.caller, /^[A-Za-z][\w.-]*\.ts:\d+$/, JSON.stringify(l));
    assert.equal(lines.find((l) => l.msg === MSG)?.caller, expectedCaller());
    for (const l of lines) {
      assert.equal(typeof l.ts, 'number');
      assert.ok(l.ts >= before - 1000 && l.ts <= Date.now() + 1000, `ts ${l.ts} is epoch milliseconds`);
    }
  });

  it('text: the header names the same file:line', () => {
    const r = spawnSync(process.execPath, auditArgs('text'), { encoding: 'utf8', timeout: 60_000 });
    const line = r.stderr.split('\n').find((l) => l.includes(`"${MSG}"`));
    assert.ok(line !== undefined, r.stderr);
    assert.match(line, new RegExp(`^I\\d{4} \\d\\d:\\d\\d:\\d\\d\\.\\d{6} +\\d+ ${expectedCaller().replace('.', '\\.')}\\] `));
  });
});
