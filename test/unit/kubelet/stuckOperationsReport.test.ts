// "Stuck is visible", what the tracker reports (src/kubelet/stuckOperations.ts): the warning's exact
// sentence for each kind of teardown, driver and target list, the gauge's counts, the order and
// fields of stuck(), the status file written one write at a time, and podVolumeDirsNaming, the
// look-up of the pod volume directories that still name a volume. All on the fake clock and the
// in-memory file system.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { KubeletLayout } from '../../../src/layout/layout.js';
import type { OperationCompleteEvent } from '../../../src/operationexecutor/nestedPendingOperations.js';
import type { DirEntry, FileSystem, WriteFileOptions } from '../../../src/ports/fs.js';
import { podVolumeDirsNaming, STUCK_AFTER_MS, StuckOperationTracker } from '../../../src/kubelet/stuckOperations.js';
import { MAX_STUCK_TARGETS, parseStuckOperationsFile, stuckOperationsPath } from '../../../src/kubelet/stuckOperationsFile.js';
import { FakeClock } from '../../support/fakeClock.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { RecordingLogger } from '../../support/hosts.js';
import { ROOT } from '../../support/inMemoryNode.js';
import { memFsWithRoot, stuckRig, type StuckRig } from '../../support/stuckOperations.js';

const DRIVER = 'csi.example.com';
const STATUS_FILE = stuckOperationsPath(ROOT);
const csiVolume = (handle: string, driver = DRIVER): string => `kubernetes.io/csi/${driver}^${handle}`;
const VOLUME = csiVolume('vol-1');
const REFUSAL = new Error('kubernetes.io/csi: attacher.UnmountDevice failed: rpc error: code = FailedPrecondition desc = volume vol-1 is still published');
/** What the warning advises for a staged volume (unmount_device, unmap_device), given the audit command. */
const deviceTodo = (audit: string): string =>
  ` If the driver says the volume is still published, a publish target was left behind (often a pod directory that could not be reconstructed after a reboot): NodeUnpublishVolume it with the driver's tools, then the next retry unstages; \`${audit}\` lists this volume as stuck with the directories that name it.`;

function failure(volumeName: string, operationName: string, error: unknown = REFUSAL, podName = ''): OperationCompleteEvent {
  return { key: { volumeName, podName }, operationName, error, durationMs: 1 };
}

/** Each event fails now and again a minute later: the second failure of each makes it stuck. */
async function failForAMinute(s: StuckRig, events: readonly OperationCompleteEvent[]): Promise<void> {
  for (const e of events) s.tracker.observe(e);
  await s.clock.advance(STUCK_AFTER_MS);
  for (const e of events) s.tracker.observe(e);
}

const warnings = (l: RecordingLogger): RecordingLogger['lines'] => l.lines.filter((x) => x.severity === 'W');
const errors = (l: RecordingLogger): RecordingLogger['lines'] => l.lines.filter((x) => x.severity === 'E');

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('the stuck warning, sentence by sentence', () => {
  it('a pod unmount with no directory left and no gRPC code: the driver "answers an error", no directory sentence, the driver\'s logs and a plain `nodevol audit`', async () => {
    const s = stuckRig({ findTargets: () => Promise.resolve([]) });
    await failForAMinute(s, [failure(VOLUME, 'volume_unmount', new Error('unmount: device or resource busy'), 'pod-a')]);
    await s.tracker.settled();
    assert.deepEqual(
      warnings(s.logger).map((w) => w.msg),
      [
        `Volume ${VOLUME} is stuck: NodeUnpublishVolume has failed for over 1m0s (2 attempts), driver ${DRIVER} answers an error; it stays staged and in volumesInUse until it succeeds. Check the driver's logs for the target; \`nodevol audit\` lists this volume as stuck.`,
      ],
    );
  });

  it('a raw block unstage (unmap_device) with no pod directory left: says no directory names it and gives the publish-target advice with the root dir', async () => {
    const s = stuckRig({ rootDir: ROOT, findTargets: () => Promise.resolve([]) });
    await failForAMinute(s, [failure(VOLUME, 'unmap_device')]);
    await s.tracker.settled();
    assert.deepEqual(
      warnings(s.logger).map((w) => w.msg),
      [
        `Volume ${VOLUME} is stuck: NodeUnstageVolume has failed for over 1m0s (2 attempts), driver ${DRIVER} answers FailedPrecondition; it stays staged and in volumesInUse until it succeeds. No pod volume directory still names it.${deviceTodo(`nodevol audit --root-dir ${ROOT}`)}`,
      ],
    );
  });

  it('a volume outside CSI: the warning names "the volume plugin" and the gauge counts it under plugin N/A', async () => {
    const s = stuckRig({ rootDir: ROOT });
    const volume = 'kubernetes.io/local-volume/pv-local';
    await failForAMinute(s, [failure(volume, 'unmount_device', new Error('rpc error: code = Internal desc = busy'))]);
    await s.tracker.settled();
    const w = warnings(s.logger);
    assert.deepEqual(
      w.map((x) => x.msg),
      [
        `Volume ${volume} is stuck: NodeUnstageVolume has failed for over 1m0s (2 attempts), the volume plugin answers Internal; it stays staged and in volumesInUse until it succeeds. No pod volume directory still names it.${deviceTodo(`nodevol audit --root-dir ${ROOT}`)}`,
      ],
    );
    assert.equal(w[0]?.values['driver'], '');
    assert.deepEqual(s.metrics.last, [{ pluginName: 'N/A', operationName: 'unmount_device', count: 1 }]);
  });

  it(`keeps at most ${MAX_STUCK_TARGETS} of the directories the look-up returns, listed ", "-separated in the warning and in the entry`, async () => {
    const dirs = Array.from({ length: MAX_STUCK_TARGETS + 1 }, (_, i) => `${ROOT}/pods/pod-${String(i).padStart(2, '0')}/volumes/kubernetes.io~csi/pv-1`);
    const s = stuckRig({ rootDir: ROOT, findTargets: () => Promise.resolve(dirs) });
    await failForAMinute(s, [failure(VOLUME, 'unmount_device')]);
    await s.tracker.settled();
    const kept = dirs.slice(0, MAX_STUCK_TARGETS);
    const w = warnings(s.logger);
    assert.equal(w.length, 1);
    assert.equal(
      w[0]?.msg,
      `Volume ${VOLUME} is stuck: NodeUnstageVolume has failed for over 1m0s (2 attempts), driver ${DRIVER} answers FailedPrecondition; it stays staged and in volumesInUse until it succeeds. Pod volume directories still naming it: ${kept.join(', ')}.${deviceTodo(`nodevol audit --root-dir ${ROOT}`)}`,
    );
    assert.equal(w[0]?.values['targets'], kept.join(','));
    assert.deepEqual(s.tracker.stuck()[0]?.targets, kept);
  });

  it('a look-up that rejects is logged with the volume, and the warning still goes out, naming no directory', async () => {
    const refused = new Error('EACCES: permission denied, scandir /var/lib/kubelet/pods');
    const s = stuckRig({ rootDir: ROOT, findTargets: () => Promise.reject(refused) });
    await failForAMinute(s, [failure(VOLUME, 'unmount_device')]);
    await s.tracker.settled();
    assert.deepEqual(errors(s.logger), [{ level: 0, severity: 'E', msg: 'Cannot list the pod volume directories of a stuck volume', values: { volume: VOLUME, err: refused } }]);
    const w = warnings(s.logger);
    assert.equal(w.length, 1);
    assert.match(w[0]?.msg ?? '', / No pod volume directory still names it\. /);
    assert.equal(w[0]?.values['targets'], '');
    assert.deepEqual(s.tracker.stuck()[0]?.targets, []);
  });
});

describe('stuck() and the gauge', () => {
  it('an entry whose error carries no gRPC code has no grpcCode field at all', async () => {
    const s = stuckRig();
    await failForAMinute(s, [failure(VOLUME, 'unmount_device', new Error('unmount: device or resource busy'))]);
    await s.tracker.settled();
    assert.deepEqual(s.tracker.stuck(), [
      {
        volumeName: VOLUME,
        driver: DRIVER,
        podName: '',
        operation: 'unmount_device',
        firstFailure: '2026-12-01T03:00:00.000Z',
        lastFailure: '2026-12-01T03:01:00.000Z',
        failures: 2,
        lastError: 'unmount: device or resource busy',
        targets: [],
      },
    ]);
  });

  it('is sorted by volume, then pod, whatever order the episodes started in', async () => {
    const s = stuckRig();
    // Within vol-a the pods start in reverse order, within vol-b in order; vol-a's pod-b before vol-b's pod-a.
    await failForAMinute(s, [
      failure(csiVolume('vol-c'), 'unmount_device'),
      failure(csiVolume('vol-a'), 'volume_unmount', REFUSAL, 'pod-b'),
      failure(csiVolume('vol-b'), 'volume_unmount', REFUSAL, 'pod-a'),
      failure(csiVolume('vol-b'), 'volume_unmount', REFUSAL, 'pod-b'),
      failure(csiVolume('vol-a'), 'volume_unmount', REFUSAL, 'pod-a'),
    ]);
    await s.tracker.settled();
    assert.deepEqual(
      s.tracker.stuck().map((e) => `${e.volumeName} ${e.podName}`),
      [`${csiVolume('vol-a')} pod-a`, `${csiVolume('vol-a')} pod-b`, `${csiVolume('vol-b')} pod-a`, `${csiVolume('vol-b')} pod-b`, `${csiVolume('vol-c')} `],
    );
  });

  it('the gauge counts only the stuck operations, one series per plugin and operation', async () => {
    const other = 'csi.other.com';
    const s = stuckRig();
    s.tracker.observe(failure(csiVolume('vol-1'), 'unmount_device'));
    s.tracker.observe(failure(csiVolume('vol-2'), 'unmount_device'));
    s.tracker.observe(failure(csiVolume('vol-3', other), 'unmap_device'));
    await s.clock.advance(STUCK_AFTER_MS / 2);
    // Failing for half a minute only: not stuck, not counted.
    s.tracker.observe(failure(csiVolume('vol-4'), 'unmount_device'));
    await s.clock.advance(STUCK_AFTER_MS / 2);
    s.tracker.observe(failure(csiVolume('vol-4'), 'unmount_device'));
    s.tracker.observe(failure(csiVolume('vol-1'), 'unmount_device'));
    s.tracker.observe(failure(csiVolume('vol-2'), 'unmount_device'));
    s.tracker.observe(failure(csiVolume('vol-3', other), 'unmap_device'));
    await s.tracker.settled();
    assert.equal(s.tracker.stuck().length, 3);
    assert.deepEqual(s.metrics.last, [
      { pluginName: `kubernetes.io/csi:${DRIVER}`, operationName: 'unmount_device', count: 2 },
      { pluginName: `kubernetes.io/csi:${other}`, operationName: 'unmap_device', count: 1 },
    ]);
  });

  it('a gauge that throws is logged as such, and start() still removes the old status file', async () => {
    const broken = new Error('registry closed');
    const fs = memFsWithRoot();
    fs.writeRaw(STATUS_FILE, '{}');
    const s = stuckRig({
      statusFile: { fs, realRootDir: ROOT },
      metrics: {
        setStuckOperations: () => {
          throw broken;
        },
      },
    });
    await s.tracker.start();
    assert.deepEqual(errors(s.logger), [{ level: 0, severity: 'E', msg: 'Cannot update the stuck operations gauge', values: { err: broken } }]);
    assert.equal(fs.typeSync(STATUS_FILE), undefined);
  });
});

/** A recording file system that lets `allowed` temp-file writes through and holds every later one (never settles), signalling it. */
class WriteCountingFs extends FaultyFs {
  writes = 0;
  readonly heldWrite = deferred<'held a write'>();
  constructor(
    inner: FileSystem,
    private readonly allowed: number,
  ) {
    super(inner);
  }
  override writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    this.writes++;
    if (this.writes > this.allowed) {
      this.heldWrite.resolve('held a write');
      return new Promise<void>(() => undefined);
    }
    return super.writeFile(path, data, options);
  }
}

describe('the status file, one write at a time', () => {
  it('start() removes a leftover file once, whether called twice at once or again after', async () => {
    const mem = memFsWithRoot();
    mem.writeRaw(STATUS_FILE, '{}');
    const fs = new FaultyFs(mem);
    const s = stuckRig({ statusFile: { fs, realRootDir: ROOT } });
    await Promise.all([s.tracker.start(), s.tracker.start()]);
    assert.deepEqual(fs.calls, [`unlink ${STATUS_FILE}`], 'the second start() waits for the write in flight, which then knows the file is gone');
    await s.tracker.start();
    assert.deepEqual(fs.calls, [`unlink ${STATUS_FILE}`], 'a file known removed is not removed again');
    assert.equal(mem.typeSync(STATUS_FILE), undefined);
  });

  it('stops writing once the file holds the latest state: settled() resolves after a bounded number of writes', async () => {
    const fs = new WriteCountingFs(memFsWithRoot(), 4);
    const s = stuckRig({ statusFile: { fs, realRootDir: ROOT } });
    await failForAMinute(s, [failure(VOLUME, 'unmount_device')]);
    const outcome = await Promise.race([s.tracker.settled().then(() => 'settled' as const), fs.heldWrite.promise]);
    assert.equal(outcome, 'settled');
    const file = parseStuckOperationsFile(new TextDecoder().decode(await fs.readFile(STATUS_FILE, 1 << 20)), 'status');
    assert.deepEqual(
      file.entries.map((e) => [e.volumeName, e.failures]),
      [[VOLUME, 2]],
    );
  });

  it('settled() waits for the target look-up and the file write that observe() started', async () => {
    const lookUp = deferred<readonly string[]>();
    const fs = memFsWithRoot();
    const dir = `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/pv-1`;
    const s = stuckRig({ rootDir: ROOT, statusFile: { fs, realRootDir: ROOT }, findTargets: () => lookUp.promise });
    await failForAMinute(s, [failure(VOLUME, 'unmount_device')]);
    const atSettled = s.tracker.settled().then(() => ({ warnings: warnings(s.logger).length, file: fs.typeSync(STATUS_FILE) }));
    lookUp.resolve([dir]);
    assert.deepEqual(await atSettled, { warnings: 1, file: 'file' });
    const file = parseStuckOperationsFile(new TextDecoder().decode(await fs.readFile(STATUS_FILE, 1 << 20)), 'status');
    assert.deepEqual(file.entries[0]?.targets, [dir]);
  });

  it('a failure inside the status file write (a wall clock Date cannot print) is logged once as "Stuck operation tracking failed"; observe() does not throw', async () => {
    // 8.64e15 ms after the epoch is the last instant a Date can hold.
    const clock = new FakeClock({ startMs: 0, wallOffsetMs: 8.64e15 + 1 });
    const logger = new RecordingLogger();
    const tracker = new StuckOperationTracker({ clock, logger, statusFile: { fs: memFsWithRoot(), realRootDir: ROOT } });
    await tracker.start();
    tracker.observe(failure(VOLUME, 'unmount_device'));
    await clock.advance(STUCK_AFTER_MS);
    assert.doesNotThrow(() => tracker.observe(failure(VOLUME, 'unmount_device')));
    await tracker.settled();
    const e = errors(logger);
    assert.deepEqual(
      e.map((l) => l.msg),
      ['Stuck operation tracking failed'],
    );
    assert.ok(e[0]?.values['err'] instanceof RangeError);
    assert.equal(e[0].values['err'].message, 'Invalid time value');
    assert.equal(warnings(logger).length, 1);
  });
});

/** `fs` with readdir answering in reverse order (readdir promises no order). */
function reversedReaddir(fs: FileSystem): FileSystem {
  return new Proxy(fs, {
    get(target, key): unknown {
      if (key === 'readdir') return async (p: string): Promise<DirEntry[]> => (await target.readdir(p)).reverse();
      const v: unknown = Reflect.get(target, key);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

describe('podVolumeDirsNaming', () => {
  const layout = new KubeletLayout(ROOT);
  const fsDir = (uid: string): string => `${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/pv-1`;
  const blockDir = (uid: string): string => `${ROOT}/pods/${uid}/volumeDevices/kubernetes.io~csi/pv-1`;
  const mkdir = (fs: MemFs, dir: string): Promise<void> => fs.mkdir(dir, { recursive: true, mode: 0o750 });

  it("names each pod's filesystem and block directory of the spec, sorted by path whatever order readdir gives, past pods that have none", async () => {
    const fs = memFsWithRoot();
    await mkdir(fs, `${ROOT}/pods/pod-a/volumes/kubernetes.io~csi/other-pv`);
    await mkdir(fs, blockDir('pod-b'));
    await mkdir(fs, fsDir('pod-c'));
    await mkdir(fs, blockDir('pod-c'));
    await mkdir(fs, `${ROOT}/pods/pod-d`);
    assert.deepEqual(await podVolumeDirsNaming(reversedReaddir(fs), layout, 'pv-1'), [blockDir('pod-b'), fsDir('pod-c'), blockDir('pod-c')]);
  });

  it('stops at the limit', async () => {
    const fs = memFsWithRoot();
    for (const uid of ['pod-a', 'pod-b']) await mkdir(fs, fsDir(uid));
    await mkdir(fs, blockDir('pod-b'));
    assert.deepEqual(await podVolumeDirsNaming(fs, layout, 'pv-1', 2), [fsDir('pod-a'), fsDir('pod-b')]);
  });

  it('a symlink or a file in pods/ is not a pod directory, even when the symlink leads to one holding the spec', async () => {
    const fs = memFsWithRoot();
    await mkdir(fs, `/elsewhere/pod-x/volumes/kubernetes.io~csi/pv-1`);
    await mkdir(fs, `${ROOT}/pods`);
    await fs.symlink('/elsewhere/pod-x', `${ROOT}/pods/pod-link`);
    fs.writeRaw(`${ROOT}/pods/pod-file`, '');
    assert.equal((await fs.lstat(`${ROOT}/pods/pod-link/volumes/kubernetes.io~csi/pv-1`)).type, 'directory', 'reachable through the symlink');
    assert.deepEqual(await podVolumeDirsNaming(fs, layout, 'pv-1'), []);
  });

  it('no pods dir: no directory', async () => {
    assert.deepEqual(await podVolumeDirsNaming(memFsWithRoot(), layout, 'pv-1'), []);
  });

  it('a pods dir that cannot be read rejects with its error', async () => {
    const fs = new FaultyFs(memFsWithRoot()).failOn('readdir', `${ROOT}/pods`, 'EACCES');
    await assert.rejects(podVolumeDirsNaming(fs, layout, 'pv-1'), { name: 'FsError', code: 'EACCES', message: `readdir ${ROOT}/pods: EACCES` });
  });
});
