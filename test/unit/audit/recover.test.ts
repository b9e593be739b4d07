// nodevol recover's plan and execution over a real directory tree with a recording CSI client:
// the dry run changes nothing; --yes unpublishes the targets left, unstages, and only then
// removes; every refusal; one volume's failure does not stop the others; a path still mounted
// after the driver's success is never removed. The plan and the journal name only paths that
// exist; a missing driver socket is a dry run's warning and a refusal of --yes only; with the
// root dir named otherwise by the node (--mountinfo-root-dir) the driver is told the node's paths.
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { NodeFileSystem } from '../../../src/adapters/node/nodeFs.js';
import { runAudit } from '../../../src/audit/audit.js';
import { parseClusterList } from '../../../src/api/clusterObjects.js';
import { clusterStateFor } from '../../../src/audit/clusterState.js';
import { executeRecovery, planRecovery, type RecoverJournalEntry, type RecoverPlan } from '../../../src/audit/recover.js';
import { CsiCallError, GrpcStatus, type CsiNodeClient, type NodeCapability } from '../../../src/ports/csi.js';
import { FeatureGate } from '../../../src/features/features.js';
import { unreachableCluster } from '../../../src/ports/cluster.js';
import { noCsiDrivers } from '../../../src/ports/csi.js';
import { MountTableSnapshot } from '../../../src/mount/mountRefs.js';
import { ReadOnlyMounter } from '../../../src/mount/readOnlyMounter.js';
import { claim, list, node, persistentVolume, pod, type KubeObject } from '../../support/clusterObjects.js';
import { discardLogger } from '../../../src/ports/logger.js';
import { FakeClock } from '../../support/fakeClock.js';
import { auditInput } from '../../support/hosts.js';
import { NodeFixture } from '../../support/nodeFixture.js';
import type { VolumeHost } from '../../../src/volume/volumeHost.js';

const DRIVER = 'ebs.csi.example.com';
const NAME = (handle: string): string => `kubernetes.io/csi/${DRIVER}^${handle}`;

/** A CSI client that records calls; `onUnstage` decides each NodeUnstageVolume. */
class RecordingClient implements CsiNodeClient {
  readonly calls: string[] = [];
  constructor(
    private readonly o: { caps?: NodeCapability[]; onUnstage?: (volumeId: string) => void; onUnpublish?: (target: string) => void } = {},
  ) {}
  nodeGetCapabilities(): Promise<readonly NodeCapability[]> {
    this.calls.push('NodeGetCapabilities');
    return Promise.resolve(this.o.caps ?? ['STAGE_UNSTAGE_VOLUME']);
  }
  nodeStageVolume(): Promise<void> {
    return Promise.reject(new Error('recover must never stage'));
  }
  nodePublishVolume(): Promise<void> {
    return Promise.reject(new Error('recover must never publish'));
  }
  nodeUnstageVolume(req: { volumeId: string; stagingTargetPath: string }): Promise<void> {
    this.calls.push(`NodeUnstageVolume ${req.volumeId} ${req.stagingTargetPath}`);
    try {
      this.o.onUnstage?.(req.volumeId);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    return Promise.resolve();
  }
  nodeUnpublishVolume(req: { volumeId: string; targetPath: string }): Promise<void> {
    this.calls.push(`NodeUnpublishVolume ${req.volumeId} ${req.targetPath}`);
    this.o.onUnpublish?.(req.targetPath);
    return Promise.resolve();
  }
}

describe('nodevol recover: plan and execution', () => {
  let fx: NodeFixture;
  let socket: Server | undefined;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    socket?.close();
    socket = undefined;
    await fx.cleanup();
  });

  /** A listening unix socket where recover looks for the driver. */
  async function driverSocket(): Promise<void> {
    const p = fx.layout.driverSocketPath(DRIVER);
    await mkdir(path.dirname(p), { recursive: true });
    socket = createServer();
    await new Promise<void>((resolve) => socket!.listen(p, resolve));
  }

  const fs = new NodeFileSystem();
  function host(): VolumeHost {
    return {
      layout: fx.layout,
      realRootDir: fx.root,
      fs,
      features: FeatureGate.defaults(),
      logger: discardLogger,
      clock: new FakeClock({ autoAdvance: true }),
      mounter: new ReadOnlyMounter(fs, () => Promise.resolve(MountTableSnapshot.parse(fx.mountInfo(), { strict: true }))),
      csiDrivers: noCsiDrivers,
      cluster: unreachableCluster,
      nodeName: 'node-1',
    };
  }

  async function plan(items: readonly KubeObject[], o: { mountTable?: Error; nodeRootDir?: string } = {}): Promise<RecoverPlan> {
    const report = await runAudit(auditInput(fx, { gateOn: false }));
    const state = clusterStateFor(parseClusterList(JSON.stringify(list(items)), 'c.json'), 'node-1', 'c.json');
    const input: Parameters<typeof planRecovery>[0] & { nodeRootDir?: string } = {
      report,
      state,
      fs,
      layout: fx.layout,
      mountTable: o.mountTable ?? MountTableSnapshot.parse(fx.mountInfo(), { strict: true }),
      endpointFor: (d) => ({ endpoint: `unix://${fx.layout.driverSocketPath(d)}`, socketPath: fx.layout.driverSocketPath(d) }),
      ...(o.nodeRootDir !== undefined ? { nodeRootDir: o.nodeRootDir } : {}),
    };
    return planRecovery(input);
  }

  async function execute(p: RecoverPlan, client: RecordingClient, act: boolean): Promise<{ journal: RecoverJournalEntry[]; result: Awaited<ReturnType<typeof executeRecovery>> }> {
    const journal: RecoverJournalEntry[] = [];
    const result = await executeRecovery({ plan: p, host: host(), clientFor: () => client, act, journal: (e) => journal.push(e), nowIso: () => '2026-12-01T00:00:00.000Z' });
    return { journal, result };
  }

  const attachedNotInUse = (...handles: string[]): KubeObject => node('node-1', { volumesAttached: handles.map(NAME), volumesInUse: [] });

  it('dry run: plans NodeUnstageVolume then the three removals, calls nothing, changes nothing', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1')]);
    assert.deepEqual(p.refusals, []);
    assert.deepEqual(p.volumes.map((v) => [v.uniqueName, v.deviceMountPath, v.targets]), [[NAME('vol-1'), gm, []]]);
    const client = new RecordingClient();
    const { journal, result } = await execute(p, client, false);
    assert.deepEqual(client.calls, []);
    assert.deepEqual(journal.map((e) => [e.action, e.outcome, e.path]), [
      ['NodeUnstageVolume', 'planned', gm],
      ['rmdir', 'planned', gm],
      ['unlink', 'planned', path.join(path.dirname(gm), 'vol_data.json')],
      ['rmdir', 'planned', path.dirname(gm)],
    ]);
    assert.deepEqual(result.planned, [NAME('vol-1')]);
    assert.ok(existsSync(gm) && existsSync(path.join(path.dirname(gm), 'vol_data.json')));
  });

  it('--yes: NodeUnstageVolume through the driver, then globalmount, vol_data.json and the volume dir are removed', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1')]);
    const client = new RecordingClient({ onUnstage: () => fx.unmountAll() });
    const { journal, result } = await execute(p, client, true);
    assert.deepEqual(client.calls, ['NodeGetCapabilities', `NodeUnstageVolume vol-1 ${gm}`]);
    assert.deepEqual(result.recovered, [NAME('vol-1')]);
    assert.ok(!existsSync(path.dirname(gm)), 'the volume dir is gone');
    assert.ok(existsSync(fx.layout.csiDriverDir(DRIVER)), 'never above the volume dir');
    assert.deepEqual(journal.map((e) => `${e.action} ${e.outcome}`), ['NodeUnstageVolume ok', 'rmdir ok', 'unlink ok', 'rmdir ok']);
  });

  it('--yes: a publish target still bind-mounted from the global mount (pod gone) is unpublished and removed first', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    // The pod-local vol_data.json is lost: kubelet without the gate cannot reconstruct it (kubernetes#101911).
    const podDir = await fx.podVolume({ uid: 'gone-pod', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm, file: 'absent' });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1')]);
    assert.deepEqual(p.volumes[0]?.targets, [path.join(podDir, 'mount')]);
    // The unpublish has to unmount the target, the unstage the global mount: model both with the table.
    const target = path.join(podDir, 'mount');
    const c2 = new RecordingClient({
      onUnpublish: () => {
        const keep = fx.mountAt(gm)!;
        fx.unmountAll();
        fx.mount(keep);
      },
      onUnstage: () => fx.unmountAll(),
    });
    const { result } = await execute(p, c2, true);
    assert.deepEqual(c2.calls, [`NodeUnpublishVolume vol-1 ${target}`, 'NodeGetCapabilities', `NodeUnstageVolume vol-1 ${gm}`]);
    assert.deepEqual(result.recovered, [NAME('vol-1')]);
    assert.ok(!existsSync(podDir) && !existsSync(path.dirname(gm)));
  });

  const refusals: [string, (setup: { gm: string }) => Promise<KubeObject[]> | KubeObject[], RegExp, { noSocket?: boolean; block?: boolean; mountTable?: Error }?][] = [
    ['a pod on this node wants it', () => [attachedNotInUse('vol-1'), pod('app', { nodeName: 'node-1', claims: ['data'] }), claim('data', 'pv-1'), persistentVolume('pv-1', DRIVER, 'vol-1', { namespace: 'default', name: 'data' })], /a pod on node node-1 wants it per the cluster: default\/app/],
    ['a pod\'s claim cannot be resolved', () => [attachedNotInUse('vol-1'), pod('app', { nodeName: 'node-1', claims: ['lost'] })], /cannot prove no pod on node node-1 wants it: pod default\/app uses claim default\/lost \(failed to fetch PVC from API server: persistentvolumeclaims "lost" not found\)/],
    ['it is in volumesInUse', () => [node('node-1', { volumesInUse: [NAME('vol-1')] })], /it is in node\.status\.volumesInUse of node-1/],
    ['the mount table could not be read', () => [attachedNotInUse('vol-1')], /the mount table could not be read strictly \(bad line\)/, { mountTable: new Error('bad line') }],
  ];
  for (const [what, items, want, o] of refusals) {
    it(`refuses when ${what}, and calls nothing even with --yes`, async () => {
      const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
      if (o?.noSocket !== true) await driverSocket();
      const p = await plan(await items({ gm }), o?.mountTable !== undefined ? { mountTable: o.mountTable } : {});
      assert.deepEqual(p.volumes, []);
      assert.equal(p.refusals.length, 1);
      assert.match(p.refusals[0]!.reason, want);
      const client = new RecordingClient();
      const { journal, result } = await execute(p, client, true);
      assert.deepEqual(client.calls, []);
      assert.deepEqual(journal.map((e) => [e.action, e.outcome, e.volume]), [['refuse', 'refused', NAME('vol-1')]]);
      assert.equal(result.refused.length, 1);
      assert.ok(existsSync(gm));
    });
  }

  it('a missing driver socket: the dry run shows the whole plan with a warning; only --yes refuses the volume', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const podDir = await fx.podVolume({ uid: 'gone-pod', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm, file: 'absent' });
    const target = path.join(podDir, 'mount');
    const p = await plan([attachedNotInUse('vol-1')]);
    assert.deepEqual(p.refusals, [], 'not refused by the plan');
    assert.deepEqual(p.volumes.map((v) => [v.uniqueName, v.targets, v.deviceMountPath]), [[NAME('vol-1'), [target], gm]]);
    assert.equal(p.volumes[0]?.warning, `no driver socket (ENOENT): --yes refuses this volume until the ${DRIVER} node plugin runs on this node`);

    const dry = await execute(p, new RecordingClient(), false);
    assert.deepEqual(dry.journal.map((e) => `${e.action} ${e.outcome}`), [
      'check failed',
      'NodeUnpublishVolume planned',
      'rmdir planned',
      'rmdir planned',
      'NodeUnstageVolume planned',
      'rmdir planned',
      'unlink planned',
      'rmdir planned',
    ]);
    assert.equal(dry.journal[0]?.reason, p.volumes[0]?.warning);
    assert.deepEqual(dry.result.warned, [NAME('vol-1')]);
    assert.deepEqual(dry.result.refused, []);

    const client = new RecordingClient();
    const yes = await execute(p, client, true);
    assert.deepEqual(client.calls, [], 'no call without the driver');
    assert.deepEqual(yes.journal.map((e) => [e.action, e.outcome, e.reason]), [['refuse', 'refused', p.volumes[0]?.warning]]);
    assert.deepEqual(yes.result.refused.map((r) => r.uniqueName), [NAME('vol-1')]);
    assert.deepEqual(yes.result.recovered, []);
    assert.ok(existsSync(target) && existsSync(gm) && existsSync(path.join(path.dirname(gm), 'vol_data.json')), 'nothing removed');
  });

  it('a driver socket path that is not a socket is a warning too, naming it', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    const socket = fx.layout.driverSocketPath(DRIVER);
    await mkdir(path.dirname(socket), { recursive: true });
    await writeFile(socket, '');
    const p = await plan([attachedNotInUse('vol-1')]);
    assert.deepEqual(p.refusals, []);
    assert.match(p.volumes[0]?.warning ?? '', new RegExp(`^driver socket ${socket.replaceAll('.', '\\.')} is not a socket: --yes refuses this volume`));
  });

  it('the plan names only what exists: no pod-local vol_data.json that was lost; the temp file and unstage marker removeMountDir also removes', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    // Story 2: the pod-local vol_data.json is lost, the bind mount stays.
    const podDir = await fx.podVolume({ uid: 'gone-pod', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm, file: 'absent' });
    // An interrupted vol_data.json write and an unstage marker beside the global one: removeMountDir removes them too.
    await writeFile(path.join(path.dirname(gm), 'vol_data.json.tmp'), '{');
    await writeFile(path.join(path.dirname(gm), 'unstage-in-progress'), '');
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1')]);
    const target = path.join(podDir, 'mount');
    const dry = await execute(p, new RecordingClient(), false);
    assert.deepEqual(
      dry.journal.map((e) => [e.action, e.path]),
      [
        ['NodeUnpublishVolume', target],
        ['rmdir', target],
        ['rmdir', podDir],
        ['NodeUnstageVolume', gm],
        ['rmdir', gm],
        ['unlink', path.join(path.dirname(gm), 'vol_data.json')],
        ['unlink', path.join(path.dirname(gm), 'unstage-in-progress')],
        ['unlink', path.join(path.dirname(gm), 'vol_data.json.tmp')],
        ['rmdir', path.dirname(gm)],
      ],
    );
    for (const e of dry.journal.filter((x) => x.action === 'rmdir' || x.action === 'unlink')) assert.ok(existsSync(e.path ?? ''), `${e.path ?? ''} is named but does not exist`);
  });

  it('--yes: the journal names what was removed, not a target the driver removed itself', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const podDir = await fx.podVolume({ uid: 'gone-pod', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm, file: 'absent' });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1')]);
    const client = new RecordingClient({
      // As the CSI spec asks of a driver: NodeUnpublishVolume deletes the target it created.
      onUnpublish: (t) => {
        const keep = fx.mountAt(gm)!;
        fx.unmountAll();
        fx.mount(keep);
        rmSync(t, { recursive: true });
      },
      onUnstage: () => fx.unmountAll(),
    });
    const { journal, result } = await execute(p, client, true);
    assert.deepEqual(result.recovered, [NAME('vol-1')]);
    const removals = journal.filter((e) => e.action === 'rmdir' || e.action === 'unlink').map((e) => `${e.action} ${e.outcome} ${e.path ?? ''}`);
    assert.deepEqual(removals, [
      `rmdir ok ${podDir}`,
      `rmdir ok ${gm}`,
      `unlink ok ${path.join(path.dirname(gm), 'vol_data.json')}`,
      `rmdir ok ${path.dirname(gm)}`,
    ]);
    assert.ok(!existsSync(path.join(podDir, 'mount')), 'the driver removed its target');
    assert.ok(!existsSync(podDir) && !existsSync(path.dirname(gm)));
  });

  it('the root dir named otherwise by the node (--mountinfo-root-dir): the driver is told the node\'s paths, the removals stay under the root dir', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const podDir = await fx.podVolume({ uid: 'gone-pod', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm, file: 'absent' });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1')], { nodeRootDir: '/var/lib/kubelet' });
    const asNode = (local: string): string => path.join('/var/lib/kubelet', path.relative(fx.root, local));
    const dry = await execute(p, new RecordingClient(), false);
    assert.deepEqual(
      dry.journal.filter((e) => e.action === 'NodeUnpublishVolume' || e.action === 'NodeUnstageVolume').map((e) => [e.action, e.path]),
      [
        ['NodeUnpublishVolume', asNode(path.join(podDir, 'mount'))],
        ['NodeUnstageVolume', asNode(gm)],
      ],
    );
    assert.ok(dry.journal.filter((e) => e.action === 'rmdir' || e.action === 'unlink').every((e) => (e.path ?? '').startsWith(`${fx.root}/`)), 'removals are of this file system');
    const client = new RecordingClient({
      onUnpublish: () => {
        const keep = fx.mountAt(gm)!;
        fx.unmountAll();
        fx.mount(keep);
      },
      onUnstage: () => fx.unmountAll(),
    });
    const { result } = await execute(p, client, true);
    assert.deepEqual(client.calls, [`NodeUnpublishVolume vol-1 ${asNode(path.join(podDir, 'mount'))}`, 'NodeGetCapabilities', `NodeUnstageVolume vol-1 ${asNode(gm)}`]);
    assert.deepEqual(result.recovered, [NAME('vol-1')]);
    assert.ok(!existsSync(podDir) && !existsSync(path.dirname(gm)));
  });

  it('refuses a target that belongs to a pod that still exists', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await fx.podVolume({ uid: 'uid-default-app', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm, file: 'absent' });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1'), pod('app', { nodeName: 'node-1' })]);
    assert.match(p.refusals[0]?.reason ?? '', /still published to pod default\/app/);
  });

  it('refuses a global mount reached through a symlink', async () => {
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    await driverSocket();
    // Replace the plugin dir by a symlink to a copy elsewhere: the walk would not follow it, so build the report first.
    const report = await runAudit(auditInput(fx, { gateOn: false }));
    const real = path.join(fx.base, 'elsewhere');
    await rm(real, { recursive: true, force: true });
    const csiDir = fx.layout.csiPluginDir();
    const { rename, symlink } = await import('node:fs/promises');
    await rename(csiDir, real);
    await symlink(real, csiDir);
    const state = clusterStateFor(parseClusterList(JSON.stringify(list([attachedNotInUse('vol-1')])), 'c.json'), 'node-1', 'c.json');
    const p = await planRecovery({ report, state, fs, layout: fx.layout, mountTable: MountTableSnapshot.parse(fx.mountInfo(), { strict: true }), endpointFor: (d) => ({ endpoint: `unix://${fx.layout.driverSocketPath(d)}`, socketPath: fx.layout.driverSocketPath(d) }) });
    assert.deepEqual(p.volumes, []);
    assert.match(p.refusals[0]?.reason ?? '', /is not a real path inside the root dir/);
  });

  it('refuses a raw block volume', async () => {
    await fx.stageBlock({ specName: 'pv-b', driver: DRIVER, handle: 'vol-b' });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-b')]);
    assert.match(p.refusals[0]?.reason ?? '', /raw block volumes are not handled/);
  });

  it('leaves tracked volumes alone', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await fx.podVolume({ uid: 'uid-default-app', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', boundFrom: gm });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1')]);
    assert.deepEqual(p, { volumes: [], refusals: [] });
  });

  it('one volume\'s failed unstage does not stop the next; the failed one keeps every path', async () => {
    const gm1 = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    const gm2 = await fx.stage({ driver: DRIVER, handle: 'vol-2', specVolID: 'pv-2', mounted: false });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1', 'vol-2')]);
    const client = new RecordingClient({
      onUnstage: (id) => {
        if (id === 'vol-1') throw new CsiCallError('NodeUnstageVolume', GrpcStatus.INTERNAL, 'device busy');
      },
    });
    const { journal, result } = await execute(p, client, true);
    assert.deepEqual(result.failed.map((f) => f.uniqueName), [NAME('vol-1')]);
    assert.match(result.failed[0]!.error, /code = INTERNAL desc = device busy/);
    assert.deepEqual(result.recovered, [NAME('vol-2')]);
    assert.ok(existsSync(gm1) && existsSync(path.join(path.dirname(gm1), 'vol_data.json')), 'vol-1 kept');
    assert.ok(!existsSync(path.dirname(gm2)), 'vol-2 removed');
    assert.ok(journal.some((e) => e.action === 'NodeUnstageVolume' && e.outcome === 'failed' && e.volume === NAME('vol-1')));
  });

  it('a global mount still mounted after the driver said OK is a failure and is never removed', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1')]);
    const client = new RecordingClient(); // "succeeds" without unmounting
    const { result, journal } = await execute(p, client, true);
    assert.match(result.failed[0]?.error ?? '', /is still a mount point after the driver reported success: left in place/);
    assert.ok(existsSync(gm) && existsSync(path.join(path.dirname(gm), 'vol_data.json')));
    assert.deepEqual(journal.map((e) => `${e.action} ${e.outcome}`), ['NodeUnstageVolume ok', 'rmdir failed']);
  });

  it('a driver without STAGE_UNSTAGE_VOLUME: no unstage call (as kubelet), the unmounted dirs are removed', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1')]);
    const client = new RecordingClient({ caps: [] });
    const { result, journal } = await execute(p, client, true);
    assert.deepEqual(client.calls, ['NodeGetCapabilities']);
    assert.deepEqual(result.recovered, [NAME('vol-1')]);
    assert.equal(journal[0]?.outcome, 'skipped');
    assert.ok(!existsSync(path.dirname(gm)));
  });

  it('one driver and handle named by two PersistentVolumes: refused naming both, in the dry run and with --yes; the other volumes are recovered', async () => {
    const gm1 = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-a', mounted: false });
    const gm2 = await fx.stage({ driver: DRIVER, handle: 'vol-2', specVolID: 'pv-2', mounted: false });
    await driverSocket();
    const cluster = [attachedNotInUse('vol-1', 'vol-2'), persistentVolume('pv-b', DRIVER, 'vol-1'), persistentVolume('pv-a', DRIVER, 'vol-1'), persistentVolume('pv-2', DRIVER, 'vol-2')];
    const p = await plan(cluster);
    assert.deepEqual(p.refusals, [
      {
        uniqueName: NAME('vol-1'),
        driver: DRIVER,
        reason: `PersistentVolumes pv-a and pv-b both name driver ${DRIVER} volume handle vol-1: which one the staged volume belongs to is ambiguous, so no claim on it can be ruled out; fix the PersistentVolumes, or clean it up by hand`,
      },
    ]);
    assert.deepEqual(p.volumes.map((v) => v.uniqueName), [NAME('vol-2')]);

    const dry = await execute(p, new RecordingClient(), false);
    assert.deepEqual(dry.journal.filter((e) => e.volume === NAME('vol-1')).map((e) => `${e.action} ${e.outcome}`), ['refuse refused'], 'the dry run shows the refusal');
    assert.deepEqual(dry.result.planned, [NAME('vol-2')]);

    const client = new RecordingClient();
    const { result } = await execute(p, client, true);
    assert.deepEqual(client.calls, ['NodeGetCapabilities', `NodeUnstageVolume vol-2 ${gm2}`]);
    assert.deepEqual(result.recovered, [NAME('vol-2')]);
    assert.deepEqual(result.refused.map((r) => r.uniqueName), [NAME('vol-1')]);
    assert.ok(existsSync(gm1) && existsSync(path.join(path.dirname(gm1), 'vol_data.json')), 'vol-1 left in place');
    assert.ok(!existsSync(path.dirname(gm2)), 'vol-2 recovered');

    const three = await plan([...cluster, persistentVolume('pv-c', DRIVER, 'vol-1')]);
    assert.match(three.refusals[0]?.reason ?? '', /^PersistentVolumes pv-a, pv-b and pv-c all name driver /);
  });

  it('one handle under two drivers names two volumes: not ambiguous', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-a', mounted: false });
    await driverSocket();
    const p = await plan([attachedNotInUse('vol-1'), persistentVolume('pv-a', DRIVER, 'vol-1'), persistentVolume('pv-x', 'other.csi.example.com', 'vol-1')]);
    assert.deepEqual(p.refusals, []);
    assert.deepEqual(p.volumes.map((v) => v.deviceMountPath), [gm]);
  });
});
