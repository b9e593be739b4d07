// "Stuck is visible", the agent's side (docs/reference/agent.md): a teardown the driver keeps refusing is
// logged at each failure (kubelet's line, with the driver's message and gRPC code), warned about
// once after a minute of continuous failure, counted in a gauge and persisted in the bounded
// status file nodevol audit reads; a success ends the episode. All on the fake clock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import type { UniqueVolumeName } from '../../../src/layout/names.js';
import type { OperationCompleteEvent } from '../../../src/operationexecutor/nestedPendingOperations.js';
import { StuckOperationTracker } from '../../../src/kubelet/stuckOperations.js';
import { MAX_STUCK_ENTRIES, parseStuckOperationsFile } from '../../../src/kubelet/stuckOperationsFile.js';
import { RecordingLogger } from '../../support/hosts.js';
import { DRIVER, InMemoryNode, ROOT } from '../../support/inMemoryNode.js';
import { memFsWithRoot, readStuckStatusFile, stuckRig, type StuckRig } from '../../support/stuckOperations.js';

const VOLUME = 'kubernetes.io/csi/csi.example.com^vol-1';
const REFUSAL = new Error('kubernetes.io/csi: attacher.UnmountDevice failed: rpc error: code = FailedPrecondition desc = volume vol-1 is still published at /var/lib/kubelet/pods/pod-a/volumes/kubernetes.io~csi/pv-1/mount');

function failure(operationName = 'unmount_device', error: unknown = REFUSAL, podName = ''): OperationCompleteEvent {
  return { key: { volumeName: VOLUME, podName }, operationName, error, durationMs: 1 };
}
function success(operationName = 'unmount_device', podName = ''): OperationCompleteEvent {
  return { key: { volumeName: VOLUME, podName }, operationName, error: undefined, durationMs: 1 };
}

function setup(): StuckRig & { fs: MemFs } {
  const fs = memFsWithRoot();
  const rig = stuckRig({
    statusFile: { fs, realRootDir: ROOT },
    rootDir: ROOT,
    findTargets: () => Promise.resolve([`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`]),
  });
  return { ...rig, fs };
}

/**
 * Fails at kubelet's backoff steps (0.5 s, doubling) from now on, the last failure being the
 * first at or after `untilMs`; the clock is left at that failure.
 */
async function failWithBackoff(s: ReturnType<typeof setup>, untilMs: number): Promise<number> {
  const start = s.clock.nowMs();
  let backoff = 500;
  let n = 0;
  for (;;) {
    s.tracker.observe(failure());
    n++;
    await s.tracker.settled();
    if (s.clock.nowMs() - start >= untilMs) return n;
    await s.clock.advance(backoff);
    backoff = Math.min(backoff * 2, 122_000);
  }
}

const warnings = (l: RecordingLogger): RecordingLogger['lines'] => l.lines.filter((x) => x.severity === 'W');

describe('StuckOperationTracker', () => {
  it('warns once, at the first failure after a minute, naming the volume, driver, error, gRPC code, targets and what to do', async () => {
    const s = setup();
    await s.tracker.start();
    assert.equal(await failWithBackoff(s, 31_500), 7);
    assert.deepEqual(warnings(s.logger), [], 'no warning within the first minute');
    assert.deepEqual(s.metrics.last, []);
    assert.equal(await readStuckStatusFile(s.fs), undefined, 'no status file while nothing is stuck');

    // The failure at 63.5 s (0.5 + 1 + ... + 32) is the first past the minute.
    await s.clock.advance(32_000);
    s.tracker.observe(failure());
    await s.tracker.settled();
    const w = warnings(s.logger);
    assert.equal(w.length, 1);
    const msg = w[0]?.msg ?? '';
    assert.match(msg, /^Volume kubernetes\.io\/csi\/csi\.example\.com\^vol-1 is stuck: NodeUnstageVolume has failed for over 1m0s \(8 attempts\), driver csi\.example\.com answers FailedPrecondition/);
    assert.match(msg, /Pod volume directories still naming it: \/var\/lib\/kubelet\/pods\/pod-a\/volumes\/kubernetes\.io~csi\/pv-1\./);
    assert.match(msg, /NodeUnpublishVolume it .* `nodevol audit --root-dir \/var\/lib\/kubelet` lists this volume as stuck/);
    assert.equal(w[0]?.values['driver'], DRIVER);
    assert.equal(w[0]?.values['grpcCode'], 'FailedPrecondition');
    assert.equal(w[0]?.values['operation'], 'unmount_device');
    assert.match(String(w[0]?.values['lastError']), /still published at/);
    assert.deepEqual(s.metrics.last, [{ pluginName: `kubernetes.io/csi:${DRIVER}`, operationName: 'unmount_device', count: 1 }]);
    const file = await readStuckStatusFile(s.fs);
    assert.equal(file?.entries.length, 1);
    assert.deepEqual(
      { ...file?.entries[0], lastError: undefined },
      {
        volumeName: VOLUME,
        driver: DRIVER,
        podName: '',
        operation: 'unmount_device',
        firstFailure: '2026-12-01T03:00:00.000Z',
        lastFailure: '2026-12-01T03:01:03.500Z',
        failures: 8,
        lastError: undefined,
        grpcCode: 'FailedPrecondition',
        targets: [`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`],
      },
    );

    // Further refusals: no second warning, but the file follows the count.
    await s.clock.advance(64_000);
    s.tracker.observe(failure());
    await s.tracker.settled();
    assert.equal(warnings(s.logger).length, 1, 'once per stuck episode');
    assert.equal((await readStuckStatusFile(s.fs))?.entries[0]?.failures, 9);
    // A count update within 10 s of the last one waits for a later failure: bounded writes.
    await s.clock.advance(1_000);
    s.tracker.observe(failure());
    await s.tracker.settled();
    assert.equal(s.tracker.stuck()[0]?.failures, 10);
    assert.equal((await readStuckStatusFile(s.fs))?.entries[0]?.failures, 9);
    await s.clock.advance(10_000);
    s.tracker.observe(failure());
    await s.tracker.settled();
    assert.equal((await readStuckStatusFile(s.fs))?.entries[0]?.failures, 11);
  });

  it('a success clears the episode (log line, gauge, file), and the next episode warns again only after another minute', async () => {
    const s = setup();
    await s.tracker.start();
    await failWithBackoff(s, 61_000);
    assert.equal(warnings(s.logger).length, 1);
    s.tracker.observe(success());
    await s.tracker.settled();
    assert.ok(s.logger.lines.some((l) => l.severity === 'I' && l.msg === 'Volume operation succeeded after being stuck' && l.values['volume'] === VOLUME));
    assert.deepEqual(s.metrics.last, []);
    assert.equal(await readStuckStatusFile(s.fs), undefined, 'the file is removed when nothing is stuck');
    assert.deepEqual(s.tracker.stuck(), []);

    await failWithBackoff(s, 30_000);
    assert.equal(warnings(s.logger).length, 1, 'a new episode starts its own minute');
    await failWithBackoff(s, 40_000);
    assert.equal(warnings(s.logger).length, 2);
  });

  it('measures the minute from the end of the first failed call, not its start: a 90 s failing call does not warn at once', async () => {
    const s = setup();
    await s.tracker.start();
    // NodeUnstageVolume ran 90 s (it started 90 s before this event) and failed.
    s.tracker.observe({ ...failure(), durationMs: 90_000 });
    await s.tracker.settled();
    assert.deepEqual(warnings(s.logger), [], 'one failure, however long its call, is not a minute of failures');
    await s.clock.advance(59_000);
    s.tracker.observe({ ...failure(), durationMs: 90_000 });
    await s.tracker.settled();
    assert.deepEqual(warnings(s.logger), [], '59 s after the end of the first failure');
    await s.clock.advance(1_000);
    s.tracker.observe(failure());
    await s.tracker.settled();
    assert.equal(warnings(s.logger).length, 1, 'a minute after the end of the first failure');
    assert.equal(s.tracker.stuck()[0]?.failures, 3);
  });

  it('ignores failures of operations that are not teardowns (a failing mount is not stuck)', async () => {
    const s = setup();
    for (let i = 0; i < 10; i++) {
      s.tracker.observe(failure('volume_mount', new Error('rpc error: code = Internal desc = x'), 'pod-a'));
      await s.clock.advance(30_000);
    }
    await s.tracker.settled();
    assert.deepEqual(warnings(s.logger), []);
    assert.deepEqual(s.tracker.stuck(), []);
  });

  it('forgets an episode whose operation is no longer retried for five minutes', async () => {
    const s = setup();
    await failWithBackoff(s, 61_000);
    assert.equal(s.tracker.stuck().length, 1);
    await s.clock.advance(5 * 60_000);
    s.tracker.observe(success('volume_mount', 'other-pod'));
    await s.tracker.settled();
    assert.deepEqual(s.tracker.stuck(), []);
    assert.ok(s.logger.messages().includes('Stuck volume operation is no longer retried; forgetting it'));
  });

  it('start() removes the file a previous life left (its episodes are not this life\'s)', async () => {
    const s = setup();
    await failWithBackoff(s, 61_000);
    assert.equal((await readStuckStatusFile(s.fs))?.entries.length, 1);
    const next = new StuckOperationTracker({ clock: s.clock, logger: s.logger, statusFile: { fs: s.fs, realRootDir: ROOT } });
    await next.start();
    assert.equal(await readStuckStatusFile(s.fs), undefined);
  });

  it('never writes through a symlinked status dir', async () => {
    const s = setup();
    await s.fs.mkdir('/elsewhere', { recursive: true, mode: 0o755 });
    await s.fs.symlink('/elsewhere', `${ROOT}/nodevol`);
    await failWithBackoff(s, 61_000);
    assert.deepEqual(await s.fs.readdir('/elsewhere'), []);
    assert.ok(s.logger.lines.some((l) => l.severity === 'E' && l.msg.startsWith('Cannot write the stuck operations status file')));
  });
});

describe('the status file format', () => {
  it('round-trips what the tracker writes and names the field of a bad file', () => {
    const good = { version: 1, writtenAt: '2026-12-01T00:00:00.000Z', entries: [{ volumeName: 'v', driver: 'd', podName: '', operation: 'unmount_device', firstFailure: 'a', lastFailure: 'b', failures: 3, lastError: 'e', targets: [] }] };
    assert.equal(parseStuckOperationsFile(JSON.stringify(good), 'f').entries[0]?.failures, 3);
    assert.throws(() => parseStuckOperationsFile('{', 'f'), /^StuckOperationsFileError: f: not JSON/);
    assert.throws(() => parseStuckOperationsFile(JSON.stringify({ ...good, version: 2 }), 'f'), /f: field version: 2, expected 1/);
    assert.throws(() => parseStuckOperationsFile(JSON.stringify({ ...good, entries: [{ ...good.entries[0], failures: 0 }] }), 'f'), /field entries\[0\]\.failures: not a positive integer/);
    assert.throws(() => parseStuckOperationsFile(JSON.stringify({ ...good, entries: [{ ...good.entries[0], driver: 7 }] }), 'f'), /field entries\[0\]\.driver: not a string/);
    const tooMany = { ...good, entries: Array.from({ length: MAX_STUCK_ENTRIES + 1 }, () => good.entries[0]) };
    assert.throws(() => parseStuckOperationsFile(JSON.stringify(tooMany), 'f'), /field entries: 1001 entries, more than 1000/);
  });
});

/** A pod using pv-1 (handle vol-1), mounted; returns the volume's unique name. */
async function mountedPod(node: InMemoryNode, gateOn: boolean): Promise<UniqueVolumeName> {
  const name = node.addVolume('pv-1', 'vol-1') as UniqueVolumeName;
  node.addPod('pod-a', ['pv-1']);
  await node.startKubelet(gateOn);
  await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
  await node.steps(2);
  return name;
}

describe('stuck on a node: the KEP-6058 alpha gap (reboot, pod-local vol_data.json lost, pod deleted)', () => {
  it('every NodeUnstageVolume refusal is logged with the driver\'s message and gRPC code; after a minute one warning names the pod directory', async () => {
    const node = new InMemoryNode();
    const name = await mountedPod(node, true);
    node.reboot();
    const podDir = `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`;
    await node.fs.unlink(`${podDir}/vol_data.json`);
    node.cluster.deletePod('pod-a');
    await node.startKubelet(true);
    // The node's own tracker, wired by the composition the agent uses.
    const tracker = node.composed?.stuck;
    assert.ok(tracker !== undefined);
    const mark = node.logger.lines.length;
    const callMark = node.driver.calls.length;

    // Two minutes of the reconciler at 1 s steps: the backoff (0.5 s doubling) allows 8 retries.
    await node.steps(130, 1_000);
    await tracker.settled();
    const unstages = node.driver.calls.slice(callMark).filter((c) => c.method === 'NodeUnstageVolume');
    assert.ok(unstages.length >= 7 && unstages.every((c) => c.outcome === 'FAILED_PRECONDITION'), JSON.stringify(unstages.map((c) => c.outcome)));
    const errors = node.logger.lines.slice(mark).filter((l) => l.severity === 'E' && l.msg.startsWith('Operation for '));
    assert.equal(errors.length, unstages.length, 'one error line per refusal');
    for (const e of errors) {
      assert.match(e.msg, /^Operation for "\{volumeName:kubernetes\.io\/csi\/csi\.example\.com\^vol-1 podName: nodeName:\}" failed\. No retries permitted until /);
      assert.match(e.msg, /UnmountDevice failed for volume \\"pv-1\\" .*rpc error: code = FAILED_PRECONDITION desc = .*still published/);
      assert.equal(e.values['grpcCode'], 'FAILED_PRECONDITION');
      assert.equal(e.values['operation'], 'unmount_device');
    }
    const w = node.logger.lines.slice(mark).filter((l) => l.severity === 'W' && l.msg.includes(' is stuck: '));
    assert.equal(w.length, 1, 'one warning for the episode');
    assert.match(w[0]?.msg ?? '', new RegExp(`^Volume ${name.replace(/[.^]/g, '\\$&')} is stuck: NodeUnstageVolume has failed for over 1m0s`));
    assert.match(w[0]?.msg ?? '', /driver csi\.example\.com answers FAILED_PRECONDITION/);
    assert.equal(w[0]?.values['targets'], podDir, 'the pod directory the agent could not reconstruct is named');
    assert.deepEqual(node.cluster.volumesInUse, [name], 'still reported in use: safe, but stuck');
  });
});
