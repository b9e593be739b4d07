// The stuck-teardown tracker's episodes, edge by edge (src/kubelet/stuckOperations.ts): the driver
// read from a unique volume name, the CSI call each teardown names, one episode per volume and
// pod, what stuck() lists and in which order, the bound of MAX_STUCK_ENTRIES stuck operations,
// the file refresh at exactly STUCK_FILE_REFRESH_MS, what forgetting an abandoned episode clears,
// and settled() when a target look-up needs an event-loop turn. All on the fake clock and the
// in-memory file system (settled() in a worker thread, whose hang the test bounds).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import type { Logger } from '../../../src/ports/logger.js';
import type { OperationCompleteEvent } from '../../../src/operationexecutor/nestedPendingOperations.js';
import { driverOfVolume, STUCK_FILE_REFRESH_MS, STUCK_FORGET_AFTER_MS } from '../../../src/kubelet/stuckOperations.js';
import { MAX_STUCK_ENTRIES } from '../../../src/kubelet/stuckOperationsFile.js';
import { RecordingLogger } from '../../support/hosts.js';
import { ROOT } from '../../support/inMemoryNode.js';
import { memFsWithRoot, readStuckStatusFile, stuckRig, type StuckRig } from '../../support/stuckOperations.js';
import { withTimeout } from '../../support/e2e/waitFor.js';

const DRIVER = 'csi.example.com';
const volume = (handle: string): string => `kubernetes.io/csi/${DRIVER}^${handle}`;
const VOLUME = volume('vol-1');
const REFUSAL = new Error('kubernetes.io/csi: attacher.UnmountDevice failed: rpc error: code = FailedPrecondition desc = volume vol-1 is still published');

function failure(volumeName = VOLUME, operationName = 'unmount_device', podName = ''): OperationCompleteEvent {
  return { key: { volumeName, podName }, operationName, error: REFUSAL, durationMs: 1 };
}
function success(volumeName = VOLUME, operationName = 'unmount_device', podName = ''): OperationCompleteEvent {
  return { key: { volumeName, podName }, operationName, error: undefined, durationMs: 1 };
}

type Rig = StuckRig & { readonly fs: MemFs };

/** The tracker with a gauge and a status file; `findTargets` as given (none: no look-up). */
function setup(options: { findTargets?: (volumeName: string) => Promise<readonly string[]>; statusFile?: boolean; logger?: Logger } = {}): Rig {
  const fs = memFsWithRoot();
  const rig = stuckRig({
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    ...(options.statusFile === false ? {} : { statusFile: { fs, realRootDir: ROOT } }),
    rootDir: ROOT,
    ...(options.findTargets === undefined ? {} : { findTargets: options.findTargets }),
  });
  return { ...rig, fs };
}

async function observe(s: Rig, ...events: OperationCompleteEvent[]): Promise<void> {
  for (const e of events) s.tracker.observe(e);
  await s.tracker.settled();
}

/** VOLUME's unmount_device fails now and a minute later: stuck, the file written with 2 failures. */
async function stuckVolume(s: Rig): Promise<void> {
  await s.tracker.start();
  await observe(s, failure());
  await s.clock.advance(60_000);
  await observe(s, failure());
  assert.equal(s.tracker.stuck().length, 1);
  assert.equal((await readStuckStatusFile(s.fs))?.entries[0]?.failures, 2);
}

const warnings = (l: RecordingLogger): RecordingLogger['lines'] => l.lines.filter((x) => x.severity === 'W');
const infoMessages = (l: RecordingLogger): string[] => l.lines.filter((x) => x.severity === 'I').map((x) => x.msg);

describe('driverOfVolume', () => {
  it('reads the driver of a CSI unique volume name', () => {
    assert.equal(driverOfVolume('kubernetes.io/csi/csi.example.com^vol-1'), 'csi.example.com');
  });

  it('is empty for a name of another plugin, even one with a caret past the CSI prefix\'s length', () => {
    assert.equal(driverOfVolume('kubernetes.io/hostpath/csi.example.com^vol-1'), '');
  });

  it('is empty for a CSI name with no caret (no handle)', () => {
    assert.equal(driverOfVolume('kubernetes.io/csi/csi.example.com'), '');
  });

  it('is empty for a CSI name whose driver part is empty', () => {
    assert.equal(driverOfVolume('kubernetes.io/csi/^vol-1'), '');
  });
});

describe('the warning names the CSI call of each teardown', () => {
  for (const [operation, call] of [
    ['volume_unmount', 'NodeUnpublishVolume'],
    ['unmap_volume', 'NodeUnpublishVolume'],
    ['unmount_device', 'NodeUnstageVolume'],
    ['unmap_device', 'NodeUnstageVolume'],
  ] as const) {
    it(`${operation} stuck: "${call} has failed for over 1m0s"`, async () => {
      const s = setup({ statusFile: false });
      await observe(s, failure(VOLUME, operation, 'pod-a'));
      await s.clock.advance(60_000);
      await observe(s, failure(VOLUME, operation, 'pod-a'));
      const w = warnings(s.logger);
      assert.equal(w.length, 1);
      assert.ok(
        w[0]?.msg.startsWith(`Volume ${VOLUME} is stuck: ${call} has failed for over 1m0s (2 attempts), driver ${DRIVER} answers FailedPrecondition;`),
        w[0]?.msg,
      );
    });
  }
});

describe('observe() never throws', () => {
  it('a logger that throws while tracking (a closed sink): observe() returns and logs "Stuck operation tracking failed" with that error', async () => {
    const lines = new RecordingLogger();
    const sinkClosed = new Error('log sink closed');
    const logger: Logger = {
      info: () => {
        throw sinkClosed;
      },
      warning: (msg, values) => lines.warning(msg, values),
      error: (err, msg, values) => lines.error(err, msg, values),
      v: () => logger,
      enabled: () => true,
    };
    const s = setup({ statusFile: false, logger });
    await observe(s, failure());
    await s.clock.advance(60_000);
    await observe(s, failure());
    assert.equal(warnings(lines).length, 1);
    // The success of a stuck episode logs an info line: it throws here.
    assert.doesNotThrow(() => s.tracker.observe(success()));
    await s.tracker.settled();
    const errors = lines.lines.filter((l) => l.severity === 'E');
    assert.deepEqual(
      errors.map((l) => [l.msg, l.values['err']]),
      [['Stuck operation tracking failed', sinkClosed]],
    );
  });
});

describe('one episode per volume and pod', () => {
  it('the success of another volume does not end this volume\'s episode: it is stuck a minute after its first failure', async () => {
    const s = setup({ statusFile: false });
    await observe(s, failure(volume('vol-a')));
    await s.clock.advance(30_000);
    await observe(s, success(volume('vol-b')));
    await s.clock.advance(30_000);
    await observe(s, failure(volume('vol-a')));
    assert.deepEqual(
      s.tracker.stuck().map((e) => [e.volumeName, e.failures]),
      [[volume('vol-a'), 2]],
    );
  });

  it('a success after failures that were not yet stuck logs no "succeeded after being stuck" line', async () => {
    const s = setup({ statusFile: false });
    await observe(s, failure());
    await s.clock.advance(30_000);
    await observe(s, success());
    assert.deepEqual(infoMessages(s.logger), []);
    assert.deepEqual(s.tracker.stuck(), []);
  });

  it('without a target look-up, a stuck operation names no target (stuck(), the warning)', async () => {
    const s = setup({ statusFile: false });
    await observe(s, failure());
    await s.clock.advance(60_000);
    await observe(s, failure());
    assert.deepEqual(s.tracker.stuck()[0]?.targets, []);
    const w = warnings(s.logger);
    assert.equal(w[0]?.values['targets'], '');
    assert.match(w[0]?.msg ?? '', /until it succeeds\. No pod volume directory still names it\./);
  });
});

describe('stuck()', () => {
  it('lists only the operations called stuck, not one that has failed for under a minute', async () => {
    const s = setup({ statusFile: false });
    await observe(s, failure(volume('vol-a')));
    await s.clock.advance(30_000);
    await observe(s, failure(volume('vol-b')));
    await s.clock.advance(30_000);
    await observe(s, failure(volume('vol-a')));
    assert.deepEqual(
      s.tracker.stuck().map((e) => e.volumeName),
      [volume('vol-a')],
    );
  });

  it('sorts by volume name, whatever the order the volumes first failed in (the status file too)', async () => {
    const s = setup();
    const names = [volume('vol-c'), volume('vol-a'), volume('vol-b')];
    await observe(s, ...names.map((n) => failure(n)));
    await s.clock.advance(60_000);
    await observe(s, ...names.map((n) => failure(n)));
    const sorted = [volume('vol-a'), volume('vol-b'), volume('vol-c')];
    assert.deepEqual(
      s.tracker.stuck().map((e) => e.volumeName),
      sorted,
    );
    assert.deepEqual(
      (await readStuckStatusFile(s.fs))?.entries.map((e) => e.volumeName),
      sorted,
    );
  });

  it('sorts the pods of one volume by pod name, whatever the order they first failed in', async () => {
    const s = setup({ statusFile: false });
    const pods = ['pod-c', 'pod-a', 'pod-b'];
    await observe(s, ...pods.map((p) => failure(VOLUME, 'volume_unmount', p)));
    await s.clock.advance(60_000);
    await observe(s, ...pods.map((p) => failure(VOLUME, 'volume_unmount', p)));
    assert.deepEqual(
      s.tracker.stuck().map((e) => e.podName),
      ['pod-a', 'pod-b', 'pod-c'],
    );
  });
});

describe(`at most MAX_STUCK_ENTRIES (${MAX_STUCK_ENTRIES}) stuck operations`, () => {
  it('the operation past the bound is not called stuck: no warning, not in stuck() nor the gauge', async () => {
    const s = setup({ statusFile: false });
    const names = Array.from({ length: MAX_STUCK_ENTRIES + 1 }, (_, i) => volume(`vol-${String(i).padStart(4, '0')}`));
    await observe(s, ...names.map((n) => failure(n)));
    await s.clock.advance(60_000);
    await observe(s, ...names.map((n) => failure(n)));
    const stuck = s.tracker.stuck();
    assert.equal(stuck.length, MAX_STUCK_ENTRIES);
    assert.equal(warnings(s.logger).length, MAX_STUCK_ENTRIES);
    assert.ok(!stuck.some((e) => e.volumeName === names[MAX_STUCK_ENTRIES]), 'the last to reach a minute is left out');
    assert.deepEqual(s.metrics.last, [{ pluginName: `kubernetes.io/csi:${DRIVER}`, operationName: 'unmount_device', count: MAX_STUCK_ENTRIES }]);
  });

  it('the bound counts stuck operations only: 1,000 volumes failing for under a minute do not keep another from being called stuck', async () => {
    const s = setup({ statusFile: false });
    await observe(s, failure());
    await s.clock.advance(30_000);
    await observe(s, ...Array.from({ length: MAX_STUCK_ENTRIES }, (_, i) => failure(volume(`young-${i}`))));
    await s.clock.advance(30_000);
    await observe(s, failure());
    assert.deepEqual(
      s.tracker.stuck().map((e) => e.volumeName),
      [VOLUME],
    );
    assert.equal(warnings(s.logger).length, 1);
  });
});

describe('the gauge and the status file follow the episodes', () => {
  it('the gauge counts a volume as soon as it is called stuck, before its pod directories are listed', async () => {
    let release: (targets: readonly string[]) => void = () => undefined;
    const s = setup({ statusFile: false, findTargets: () => new Promise((resolve) => (release = resolve)) });
    await observe(s, failure());
    await s.clock.advance(60_000);
    s.tracker.observe(failure());
    assert.deepEqual(s.metrics.last, [{ pluginName: `kubernetes.io/csi:${DRIVER}`, operationName: 'unmount_device', count: 1 }]);
    assert.deepEqual(warnings(s.logger), [], 'the warning waits for the look-up');
    release([`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`]);
    await s.tracker.settled();
    assert.equal(warnings(s.logger)[0]?.values['targets'], `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`);
  });

  it('a volume that recovers while its pod directories are being listed is not then called stuck: one "succeeded" line, no warning after it', async () => {
    let release: (targets: readonly string[]) => void = () => undefined;
    const s = setup({ findTargets: () => new Promise((resolve) => (release = resolve)) });
    await s.tracker.start();
    await observe(s, failure());
    await s.clock.advance(60_000);
    s.tracker.observe(failure());
    s.tracker.observe(success());
    release([`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`]);
    await s.tracker.settled();
    assert.deepEqual(warnings(s.logger), [], 'no "is stuck" warning for a volume that has already recovered');
    assert.deepEqual(infoMessages(s.logger), ['Volume operation succeeded after being stuck']);
    assert.deepEqual(s.tracker.stuck(), []);
    assert.equal(await readStuckStatusFile(s.fs), undefined, 'the status file stays removed');
  });

  it('a new episode of the same volume operation, begun while the old one\'s look-up ran, is not warned about by the old one', async () => {
    const releases: ((targets: readonly string[]) => void)[] = [];
    const s = setup({ statusFile: false, findTargets: () => new Promise((resolve) => releases.push(resolve)) });
    await observe(s, failure());
    await s.clock.advance(60_000);
    s.tracker.observe(failure());
    s.tracker.observe(success());
    s.tracker.observe(failure());
    releases[0]?.([`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`]);
    await s.tracker.settled();
    assert.deepEqual(warnings(s.logger), [], 'the new episode has failed for under a minute');
    assert.equal(releases.length, 1);
  });

  it(`a failure of a stuck operation exactly STUCK_FILE_REFRESH_MS (${STUCK_FILE_REFRESH_MS} ms) after the last refresh rewrites the file`, async () => {
    const s = setup();
    await stuckVolume(s);
    await s.clock.advance(1_000);
    await observe(s, failure());
    assert.equal((await readStuckStatusFile(s.fs))?.entries[0]?.failures, 3, 'the first count update refreshes');
    await s.clock.advance(STUCK_FILE_REFRESH_MS - 1);
    await observe(s, failure());
    assert.equal((await readStuckStatusFile(s.fs))?.entries[0]?.failures, 3, 'not within the refresh period');
    await s.clock.advance(1);
    await observe(s, failure());
    assert.equal((await readStuckStatusFile(s.fs))?.entries[0]?.failures, 5);
  });

  for (const [what, other] of [
    ['a success of another operation', success(volume('vol-2'), 'volume_mount', 'pod-b')],
    ['a failure of an operation that is not a teardown', failure(volume('vol-2'), 'volume_mount', 'pod-b')],
  ] as const) {
    it(`${what} does not write a pending count update early`, async () => {
      const s = setup();
      await stuckVolume(s);
      await s.clock.advance(1_000);
      await observe(s, failure());
      await s.clock.advance(1_000);
      await observe(s, failure());
      assert.equal(s.tracker.stuck()[0]?.failures, 4);
      assert.equal((await readStuckStatusFile(s.fs))?.entries[0]?.failures, 3);
      await observe(s, other);
      assert.equal((await readStuckStatusFile(s.fs))?.entries[0]?.failures, 3);
    });
  }
});

describe(`forgetting an episode not retried for STUCK_FORGET_AFTER_MS (${STUCK_FORGET_AFTER_MS} ms)`, () => {
  it('forgotten on another operation\'s success: the gauge is emptied and the status file removed', async () => {
    const s = setup();
    await stuckVolume(s);
    await s.clock.advance(STUCK_FORGET_AFTER_MS);
    await observe(s, success(volume('vol-2'), 'volume_mount', 'pod-b'));
    assert.ok(infoMessages(s.logger).includes('Stuck volume operation is no longer retried; forgetting it'));
    assert.deepEqual(s.metrics.last, []);
    assert.equal(await readStuckStatusFile(s.fs), undefined);
  });

  it('forgotten on a failure of an operation that is not a teardown: the gauge is emptied and the status file removed', async () => {
    const s = setup();
    await stuckVolume(s);
    await s.clock.advance(STUCK_FORGET_AFTER_MS);
    await observe(s, failure(volume('vol-2'), 'volume_mount', 'pod-b'));
    assert.deepEqual(s.metrics.last, []);
    assert.equal(await readStuckStatusFile(s.fs), undefined);
  });

  it('an episode that was never stuck is dropped without a "no longer retried" line', async () => {
    const s = setup({ statusFile: false });
    await observe(s, failure());
    await s.clock.advance(STUCK_FORGET_AFTER_MS);
    await observe(s, success(volume('vol-2'), 'volume_mount', 'pod-b'));
    assert.deepEqual(infoMessages(s.logger), []);
    // Dropped: the next failure starts a new episode, stuck only a minute later.
    await observe(s, failure());
    await s.clock.advance(60_000);
    await observe(s, failure());
    assert.equal(s.tracker.stuck()[0]?.failures, 2);
  });
});

/**
 * In a worker thread: a volume stuck at its first failure whose target look-up resolves only after
 * an event-loop turn (as a readdir of the real file system does), then settled(). Posts the
 * warning's targets. Plain JavaScript: a worker given code runs it as a CommonJS script.
 */
const SETTLED_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
  const { StuckOperationTracker } = await import(workerData.module);
  const targets = [];
  const logger = { info() {}, warning(msg, values) { targets.push(values.targets); }, error() {}, v() { return logger; }, enabled() { return true; } };
  const tracker = new StuckOperationTracker({
    clock: { nowMs: () => 0, wallMs: () => 0, sleep: () => Promise.resolve() },
    logger,
    stuckAfterMs: 0,
    findTargets: () => new Promise((resolve) => setImmediate(() => resolve(['/var/lib/kubelet/pods/pod-a/volumes/kubernetes.io~csi/pv-1']))),
  });
  tracker.observe({ key: { volumeName: workerData.volume, podName: '' }, operationName: 'unmount_device', error: new Error('busy'), durationMs: 1 });
  await tracker.settled();
  parentPort.postMessage(targets);
})();
`;

describe('settled()', () => {
  it('resolves, the warning logged, when the target look-up needs an event-loop turn (real I/O)', async () => {
    const worker = new Worker(SETTLED_WORKER, {
      eval: true,
      workerData: { module: new URL('../../../src/kubelet/stuckOperations.js', import.meta.url).href, volume: VOLUME },
    });
    try {
      const [targets] = (await withTimeout(once(worker, 'message'), 20_000, 'settled() to resolve in the worker (it never does if it keeps the event loop from turning)')) as [unknown];
      assert.deepEqual(targets, [`${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`]);
    } finally {
      await worker.terminate();
    }
  });
});
