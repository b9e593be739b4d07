// stageOrPublish: the driver call of MountDevice, SetUp, SetUpDevice and MapPodDevice written once
// (the access mode, the call, its classification, the hooks after a final error, kubelet's
// removal), with each parameter that tells the four sites apart. Asserts what is sent, what is
// returned, which hooks are asked with what, and whether the removal runs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CsiCallError, GrpcStatus, type CsiNodeClient, type NodeCapability, type VolumeCapability } from '../../../../src/ports/csi.js';
import { upstreamCsiHooks, type CsiHooks, type FailedCleanupDecision, type FailedCleanupSite, type FinishedErrorDecision, type FinishedErrorSite } from '../../../../src/volume/csi/csiHooks.js';
import { stageOrPublish, type DriverCall } from '../../../../src/volume/csi/stageOrPublish.js';
import { constructPVSourceSpec } from '../../../../src/volume/spec.js';
import { isOperationFinishedError, isUncertainProgressError, UncertainProgressError } from '../../../../src/volume/util/errors.js';
import type { VolumeHost } from '../../../../src/volume/volumeHost.js';
import { InMemoryNode, volumeHostOf } from '../../../support/inMemoryNode.js';

const PATH = '/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/0f/globalmount';
const DATA_DIR = '/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/0f';

/** A client whose NodeGetCapabilities answers `capabilities` or fails with `capabilitiesError`. */
function client(o: { capabilities?: NodeCapability[]; capabilitiesError?: Error }): CsiNodeClient {
  const unused = (): Promise<void> => Promise.reject(new Error('not called in these tests'));
  return {
    nodeGetCapabilities: () => (o.capabilitiesError === undefined ? Promise.resolve(o.capabilities ?? []) : Promise.reject(o.capabilitiesError)),
    nodeStageVolume: unused,
    nodeUnstageVolume: unused,
    nodePublishVolume: unused,
    nodeUnpublishVolume: unused,
  };
}

interface Seen {
  sent: VolumeCapability['accessMode'][];
  uncertainAsked: { path: string; caller: string; orNotEmpty: boolean }[];
  sites: FinishedErrorSite[];
  removals: number;
  /** What the removal resolves to (its failure is logged, not returned): true unless a test says. */
  removalSucceeds: boolean;
  failedCleanups: FailedCleanupSite[];
}

/** The hooks of a test: the required one answers `uncertain`, onFinishedError `decision`, afterFailedCleanup `afterFailed` (absent: kubelet's). */
function hooks(seen: Seen, o: { uncertain?: boolean; decision?: FinishedErrorDecision; afterFailed?: FailedCleanupDecision } = {}): CsiHooks {
  return {
    uncertainAfterFinishedError: (given, err, path, caller, opts) => {
      assert.equal(given, host);
      seen.uncertainAsked.push({ path, caller, orNotEmpty: opts?.orNotEmpty === true });
      return Promise.resolve(o.uncertain === true ? new UncertainProgressError(`shown: ${String(err)}`) : undefined);
    },
    ...(o.decision === undefined
      ? {}
      : {
          onFinishedError: (site: FinishedErrorSite): FinishedErrorDecision => {
            seen.sites.push(site);
            return o.decision ?? 'cleanup';
          },
        }),
    ...(o.afterFailed === undefined
      ? {}
      : {
          afterFailedCleanup: (site: FailedCleanupSite): Promise<FailedCleanupDecision> => {
            seen.failedCleanups.push(site);
            return Promise.resolve(o.afterFailed ?? 'forget');
          },
        }),
  };
}

/** MountDevice's call (removal: removeMountDir), sending with `outcome`. */
function mountDeviceCall(seen: Seen, outcome: Error | undefined, over: Partial<DriverCall> = {}): DriverCall {
  return {
    caller: 'attacher.MountDevice',
    spec: constructPVSourceSpec('pv-1', 'csi.example.com', 'vol-1'),
    path: PATH,
    workShown: { caller: 'attacher.MountDevice' },
    removal: {
      operation: 'MountDevice',
      step: 'NodeStageVolume',
      args: { fsGroup: 3 },
      dataDir: DATA_DIR,
      remove: () => {
        seen.removals++;
        return Promise.resolve(seen.removalSucceeds);
      },
    },
    accessModeFailure: 'handled',
    send: (accessMode) => {
      seen.sent.push(accessMode);
      return outcome === undefined ? Promise.resolve() : Promise.reject(outcome);
    },
    ...over,
  };
}

const fresh = (): Seen => ({ sent: [], uncertainAsked: [], sites: [], removals: 0, removalSucceeds: true, failedCleanups: [] });
const node = new InMemoryNode();
/** What the helper hands to the hooks: the caller's host, as it is. */
const host: VolumeHost = volumeHostOf(node);
const rejection = (p: Promise<void>): Promise<unknown> =>
  p.then(
    () => assert.fail('resolved'),
    (e: unknown) => e,
  );

describe('stageOrPublish: the access mode and the call (csi_client.go)', () => {
  it('maps the first access mode with the answer of one NodeGetCapabilities call, then sends once', async () => {
    for (const [capabilities, mode] of [
      [[], 'SINGLE_NODE_WRITER'],
      [['SINGLE_NODE_MULTI_WRITER'], 'SINGLE_NODE_MULTI_WRITER'],
    ] as const) {
      const seen = fresh();
      await stageOrPublish(host, hooks(seen), client({ capabilities: [...capabilities] }), mountDeviceCall(seen, undefined));
      assert.deepEqual(seen.sent, [{ mode }]);
      assert.deepEqual([seen.uncertainAsked, seen.removals], [[], 0]);
    }
  });

  it('an uncertain call error (UNAVAILABLE) is an UncertainProgressError with the caller in its text: no hook, no removal', async () => {
    const seen = fresh();
    const err = await rejection(stageOrPublish(host, hooks(seen, { decision: 'cleanup' }), client({}), mountDeviceCall(seen, new CsiCallError('NodeStageVolume', GrpcStatus.UNAVAILABLE, 'down'))));
    assert.ok(isUncertainProgressError(err));
    assert.match(String(err), /kubernetes\.io\/csi: attacher\.MountDevice failed: rpc error: code = UNAVAILABLE desc = down/);
    assert.deepEqual([seen.uncertainAsked, seen.sites, seen.removals], [[], [], 0]);
  });
});

describe('stageOrPublish: a final error', () => {
  const final = (): CsiCallError => new CsiCallError('NodeStageVolume', GrpcStatus.INTERNAL, 'broken');

  it("kubelet's hooks: the removal runs and the final error is returned", async () => {
    const seen = fresh();
    const err = await rejection(stageOrPublish(host, upstreamCsiHooks, client({}), mountDeviceCall(seen, final())));
    assert.ok(isOperationFinishedError(err));
    assert.match(String(err), /attacher\.MountDevice failed: rpc error: code = INTERNAL desc = broken/);
    assert.equal(seen.removals, 1);
  });

  it('asks uncertainAfterFinishedError about the path (with orNotEmpty where given), then onFinishedError about the site', async () => {
    const seen = fresh();
    await rejection(stageOrPublish(host, hooks(seen, { decision: 'cleanup' }), client({}), mountDeviceCall(seen, final(), { workShown: { caller: 'blockMapper.SetUpDevice', orNotEmpty: true } })));
    assert.deepEqual(seen.uncertainAsked, [{ path: PATH, caller: 'blockMapper.SetUpDevice', orNotEmpty: true }]);
    assert.deepEqual(seen.sites, [{ operation: 'MountDevice', step: 'NodeStageVolume', path: PATH, args: { fsGroup: 3 } }]);
    assert.equal(seen.removals, 1);
  });

  it('a site without orNotEmpty (MountDevice, SetUp, MapPodDevice) asks uncertainAfterFinishedError without it', async () => {
    for (const workShown of [{ caller: 'attacher.MountDevice' }, { caller: 'attacher.MountDevice', orNotEmpty: false }]) {
      const seen = fresh();
      await rejection(stageOrPublish(host, hooks(seen, { decision: 'cleanup' }), client({}), mountDeviceCall(seen, final(), { workShown })));
      assert.deepEqual(seen.uncertainAsked, [{ path: PATH, caller: 'attacher.MountDevice', orNotEmpty: false }]);
    }
  });

  it('the work shows (uncertainAfterFinishedError answers): its error is returned, no removal', async () => {
    const seen = fresh();
    const err = await rejection(stageOrPublish(host, hooks(seen, { uncertain: true, decision: 'cleanup' }), client({}), mountDeviceCall(seen, final())));
    assert.ok(isUncertainProgressError(err));
    assert.match(String(err), /^UncertainProgressError: shown: /);
    assert.deepEqual([seen.sites, seen.removals], [[], 0]);
  });

  it("onFinishedError 'keep': no removal, the final error; 'uncertain': no removal, the same text as uncertain", async () => {
    const keep = fresh();
    const kept = await rejection(stageOrPublish(host, hooks(keep, { decision: 'keep' }), client({}), mountDeviceCall(keep, final())));
    assert.ok(isOperationFinishedError(kept));
    assert.equal(keep.removals, 0);
    const unsure = fresh();
    const uncertain = await rejection(stageOrPublish(host, hooks(unsure, { decision: 'uncertain' }), client({}), mountDeviceCall(unsure, final())));
    assert.ok(isUncertainProgressError(uncertain));
    assert.equal((uncertain as Error).message, (kept as Error).message);
    assert.equal(unsure.removals, 0);
  });

  it("the removal fails (it is only logged): kubelet's hooks return the final error; afterFailedCleanup is asked with the site and the record's dir, 'uncertain' turns it into the same text as uncertain, 'forget' keeps it", async () => {
    const upstream = fresh();
    upstream.removalSucceeds = false;
    const kubelet = await rejection(stageOrPublish(host, upstreamCsiHooks, client({}), mountDeviceCall(upstream, final())));
    assert.ok(isOperationFinishedError(kubelet));
    assert.equal(upstream.removals, 1);
    const unsure = fresh();
    unsure.removalSucceeds = false;
    const uncertain = await rejection(stageOrPublish(host, hooks(unsure, { decision: 'cleanup', afterFailed: 'uncertain' }), client({}), mountDeviceCall(unsure, final())));
    assert.ok(isUncertainProgressError(uncertain));
    assert.equal((uncertain as Error).message, (kubelet as Error).message);
    assert.deepEqual(unsure.failedCleanups, [{ operation: 'MountDevice', step: 'NodeStageVolume', path: PATH, args: { fsGroup: 3 }, dataDir: DATA_DIR }]);
    const forget = fresh();
    forget.removalSucceeds = false;
    const forgotten = await rejection(stageOrPublish(host, hooks(forget, { decision: 'cleanup', afterFailed: 'forget' }), client({}), mountDeviceCall(forget, final())));
    assert.ok(isOperationFinishedError(forgotten));
    assert.equal(forget.failedCleanups.length, 1);
  });

  it('afterFailedCleanup is not asked when the removal succeeded, nor when onFinishedError kept the files', async () => {
    const removed = fresh();
    const err = await rejection(stageOrPublish(host, hooks(removed, { decision: 'cleanup', afterFailed: 'uncertain' }), client({}), mountDeviceCall(removed, final())));
    assert.ok(isOperationFinishedError(err));
    assert.deepEqual([removed.removals, removed.failedCleanups], [1, []]);
    const kept = fresh();
    kept.removalSucceeds = false;
    await rejection(stageOrPublish(host, hooks(kept, { decision: 'keep', afterFailed: 'uncertain' }), client({}), mountDeviceCall(kept, final())));
    assert.deepEqual([kept.removals, kept.failedCleanups], [0, []]);
  });

  it("removal 'none' (MapPodDevice): the uncertain hook is asked, onFinishedError is not", async () => {
    const seen = fresh();
    await rejection(stageOrPublish(host, hooks(seen, { decision: 'cleanup' }), client({}), mountDeviceCall(seen, final(), { removal: 'none' })));
    assert.equal(seen.uncertainAsked.length, 1);
    assert.deepEqual(seen.sites, []);
  });
});

describe('stageOrPublish: a failed access-mode query', () => {
  const down = new CsiCallError('NodeGetCapabilities', GrpcStatus.INTERNAL, 'no capabilities');

  it("'handled': a final error with the caller in its text, nothing sent, handled as a failed call", async () => {
    const seen = fresh();
    const err = await rejection(stageOrPublish(host, hooks(seen, { decision: 'cleanup' }), client({ capabilitiesError: down }), mountDeviceCall(seen, undefined)));
    assert.ok(isOperationFinishedError(err));
    assert.match(String(err), /kubernetes\.io\/csi: attacher\.MountDevice failed: rpc error: code = INTERNAL desc = no capabilities/);
    assert.deepEqual(seen.sent, []);
    assert.deepEqual([seen.uncertainAsked.length, seen.sites.length, seen.removals], [1, 1, 1]);
  });

  it("'returned': the same error, and no hook is asked, nothing removed", async () => {
    const seen = fresh();
    const err = await rejection(
      stageOrPublish(host, hooks(seen, { decision: 'cleanup' }), client({ capabilitiesError: down }), mountDeviceCall(seen, undefined, { accessModeFailure: 'returned' })),
    );
    assert.ok(isOperationFinishedError(err));
    assert.match(String(err), /attacher\.MountDevice failed: rpc error: code = INTERNAL desc = no capabilities/);
    assert.deepEqual([seen.sent, seen.uncertainAsked, seen.sites, seen.removals], [[], [], [], 0]);
  });
});
