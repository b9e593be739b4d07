// Failed operations are visible the way kubelet shows them: one error line per failure with the
// key, "No retries permitted until <time> (durationBeforeRetry <d>)" and the error with its gRPC code.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GrpcStatus } from '../../../src/ports/csi.js';
import { createNestedPendingOperations } from '../../../src/operationexecutor/nestedPendingOperations.js';
import { goDuration, goTime, grpcCodeOf, noRetriesPermittedMsg, operationFailurePrefix } from '../../../src/operationexecutor/operationLog.js';
import { FakeClock } from '../../support/fakeClock.js';
import { RecordingLogger } from '../../support/hosts.js';
import { InMemoryNode } from '../../support/inMemoryNode.js';

describe('Go-style durations and times in the failure line', () => {
  it('prints durations as time.Duration does', () => {
    assert.deepEqual(
      [500, 1000, 1500, 32_000, 64_000, 122_000, 3_600_000, 0.25].map(goDuration),
      ['500ms', '1s', '1.5s', '32s', '1m4s', '2m2s', '1h0m0s', '250µs'],
    );
  });

  it('prints zero as 0s, and exactly 1ms as 1ms (below it, µs)', () => {
    assert.deepEqual([0, 1, 0.999].map(goDuration), ['0s', '1ms', '999µs']);
  });

  it('prints times as time.Time does, in UTC, trailing zeros of the fraction dropped', () => {
    assert.equal(goTime(Date.UTC(2026, 11, 1, 2, 55, 0, 500)), '2026-12-01 02:55:00.5 +0000 UTC');
    assert.equal(goTime(Date.UTC(2026, 11, 1, 2, 55, 0, 0)), '2026-12-01 02:55:00 +0000 UTC');
    assert.equal(goTime(Date.UTC(2026, 11, 1, 2, 55, 0, 12) + 0.345), '2026-12-01 02:55:00.012345 +0000 UTC');
  });

  it('finds the gRPC code inside a wrapped error text, and none in a plain error', () => {
    assert.equal(grpcCodeOf(new Error('kubernetes.io/csi: attacher.MountDevice failed: rpc error: code = Internal desc = x')), 'Internal');
    assert.equal(grpcCodeOf(new Error('outer', { cause: new Error('rpc error: code = Aborted desc = busy') })), 'Aborted');
    assert.equal(grpcCodeOf(new Error('no such file')), undefined);
  });

  it('looks for the gRPC code through at most 8 errors of a cause chain', () => {
    const chain = (length: number): Error => {
      let e = new Error('rpc error: code = Unavailable desc = gone');
      for (let i = 1; i < length; i++) e = new Error(`wrap ${i}`, { cause: e });
      return e;
    };
    assert.equal(grpcCodeOf(chain(8)), 'Unavailable');
    assert.equal(grpcCodeOf(chain(9)), undefined);
  });

  it('builds kubelet\'s sentence', () => {
    const msg = noRetriesPermittedMsg({
      key: { volumeName: 'kubernetes.io/csi/d^h', podName: '' },
      lastErrorTimeMs: Date.UTC(2026, 11, 1, 2, 55, 0, 0),
      durationBeforeRetryMs: 500,
      errorText: 'boom',
    });
    assert.equal(
      msg,
      'Operation for "{volumeName:kubernetes.io/csi/d^h podName: nodeName:}" failed. ' +
        'No retries permitted until 2026-12-01 02:55:00.5 +0000 UTC (durationBeforeRetry 500ms). Error: "boom"',
    );
  });
});

describe('the GenerateErrorDetailed prefix of an operation error', () => {
  it('names the pod and its UID when both are known', () => {
    assert.equal(
      operationFailurePrefix({ operation: 'MountVolume.SetUp', volumeSpecName: 'pvc-1', volumeName: 'kubernetes.io/csi/d^h', podName: 'web-0', podUID: 'u1' }),
      'MountVolume.SetUp failed for volume "pvc-1" (UniqueName: "kubernetes.io/csi/d^h") pod "web-0" (UID: "u1")',
    );
  });

  it('leaves out an empty pod name and an empty pod UID, as it does absent ones', () => {
    const want = 'UnmountDevice failed for volume "kubernetes.io/csi/d^h" (UniqueName: "kubernetes.io/csi/d^h")';
    assert.equal(operationFailurePrefix({ operation: 'UnmountDevice', volumeName: 'kubernetes.io/csi/d^h', podName: '', podUID: '' }), want);
    assert.equal(operationFailurePrefix({ operation: 'UnmountDevice', volumeName: 'kubernetes.io/csi/d^h' }), want);
  });
});

describe('NestedPendingOperations logs every failure', () => {
  it('logs one error line per failed run, with the doubled backoff, and none for a success', async () => {
    const clock = new FakeClock({ startMs: Date.UTC(2026, 11, 1, 0, 0, 0, 0) });
    const logger = new RecordingLogger();
    const ops = createNestedPendingOperations(clock, logger);
    const key = { volumeName: 'v1', podName: 'p1' };
    ops.run(key, { operationName: 'volume_unmount', failurePrefix: 'UnmountVolume.TearDown failed for volume "v1"', run: () => Promise.reject(new Error('rpc error: code = Aborted desc = busy')) });
    await ops.wait();
    await clock.advance(600);
    ops.run(key, { operationName: 'volume_unmount', run: () => Promise.reject(new Error('again')) });
    await ops.wait();
    await clock.advance(1100);
    ops.run(key, { operationName: 'volume_unmount', run: () => Promise.resolve() });
    await ops.wait();

    const errors = logger.lines.filter((l) => l.severity === 'E');
    assert.equal(errors.length, 2);
    assert.equal(
      errors[0]?.msg,
      'Operation for "{volumeName:v1 podName:p1 nodeName:}" failed. No retries permitted until 2026-12-01 00:00:00.5 +0000 UTC ' +
        '(durationBeforeRetry 500ms). Error: "UnmountVolume.TearDown failed for volume \\"v1\\" : rpc error: code = Aborted desc = busy"',
    );
    assert.deepEqual(errors[0]?.values, { operation: 'volume_unmount', grpcCode: 'Aborted', err: undefined });
    assert.match(errors[1]?.msg ?? '', /No retries permitted until 2026-12-01 00:00:01\.6 \+0000 UTC \(durationBeforeRetry 1s\)\. Error: "again"$/);
  });
});

describe('a failed NodeStageVolume on a node', () => {
  it('produces kubelet\'s error line naming the operation, volume, pod, backoff and gRPC code', async () => {
    const node = new InMemoryNode();
    const volumeName = node.addVolume('pv-1', 'handle-1');
    node.addPod('uid-1', ['pv-1']);
    node.driver.inject({ method: 'NodeStageVolume', code: GrpcStatus.INTERNAL, times: 1 });
    await node.startKubelet(false);
    await node.stepUntil(() => node.logger.lines.some((l) => l.severity === 'E' && l.msg.startsWith('Operation for ')));

    const line = node.logger.lines.find((l) => l.severity === 'E' && l.msg.startsWith('Operation for '));
    assert.ok(line !== undefined);
    assert.match(line.msg, new RegExp(`^Operation for "\\{volumeName:${volumeName.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&')} podName: nodeName:\\}" failed\\. `));
    assert.match(line.msg, /No retries permitted until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \+0000 UTC \(durationBeforeRetry 500ms\)\./);
    assert.match(line.msg, /Error: "MountVolume failed for volume \\"pv-1\\" \(UniqueName: \\"kubernetes\.io\/csi\/csi\.example\.com\^handle-1\\"\) pod \\"default\/pod-uid-1\\" \(UID: \\"uid-1\\"\) : .*rpc error: code = INTERNAL desc = /);
    assert.equal(line.values['operation'], 'volume_mount');
    assert.equal(line.values['grpcCode'], 'INTERNAL');

    // The fault was one-shot: after the backoff the retry mounts the volume.
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
  });
});
