// Gate CSIRetryReconstructionCleanup's cleanOrphanVolumes, one pass at a time over the in-memory
// node's files and clock, with the desired and actual states, the pending operations and
// cleanupMounts played by the test: which candidates stay for the next pass, when cleanupMounts
// is called (the backoff from 500 ms doubling to 2m2s, exact to the millisecond; the executor's
// own refusals not growing it), and the lines that tell the operator a volume was cleaned up, a
// cleanup is retried, or the cleanup finished.
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { CSIRetryReconstructionCleanup, FeatureGate } from '../../../src/features/features.js';
import type { UniquePodName } from '../../../src/layout/names.js';
import { retryReconstructionCleanup } from '../../../src/nodevol/retryReconstructionCleanup/index.js';
import { AlreadyExistsError, BackoffError, BACKOFF_INITIAL_MS, BACKOFF_MAX_MS } from '../../../src/operationexecutor/nestedPendingOperations.js';
import type { PodVolume } from '../../../src/volumemanager/reconciler/podVolumes.js';
import type { OrphanVolumeCleanup } from '../../../src/volumemanager/reconciler/reconstructHooks.js';
import { FaultyFs } from '../../support/faultyFs.js';
import { InMemoryNode, ROOT, volumeHostOf } from '../../support/inMemoryNode.js';

const GATES = FeatureGate.of({ [CSIRetryReconstructionCleanup]: true });
const POD = 'pod-a' as UniquePodName;
const SPEC = 'pv-1';
const PATH = `${ROOT}/pods/${POD}/volumes/kubernetes.io~csi/${SPEC}`;
const VOLUME: PodVolume = { podName: POD, volumeSpecName: SPEC, volumePath: PATH, pluginName: 'kubernetes.io/csi', volumeMode: 'Filesystem', entryType: 'directory', parentsVerified: true };

const CLEANED_UP = 'Volume that could not be reconstructed is cleaned up';
const RETRYING = 'Retrying the cleanup of a volume that could not be reconstructed';
const FINISHED = 'Orphan volume cleanup finished';
const SKIPPED = 'Volume exists in desired and actual state, skip cleaning up mounts';

interface Fixture {
  node: InMemoryNode;
  fs: FaultyFs;
  /** One pass of the gate's cleanOrphanVolumes over `failed`, with the state below. */
  pass: (failed?: readonly PodVolume[]) => Promise<readonly PodVolume[]>;
  /** The pod wants the volume (desired state) / its SetUp put it in the actual state / an operation on it runs. */
  wanted: boolean;
  inActual: boolean;
  pending: boolean;
  /** What the next cleanupMounts resolves to; `tearDown` removes the volume dir as a TearDown that succeeded. */
  next: { err?: unknown; tearDown?: boolean };
  /** The clock time of each cleanupMounts call. */
  calls: number[];
}

async function fixture(): Promise<Fixture> {
  const node = new InMemoryNode();
  await node.fs.mkdir(PATH, { recursive: true, mode: 0o750 });
  const fs = new FaultyFs(node.fs);
  const hook = retryReconstructionCleanup.create(volumeHostOf(node, { fs }), GATES).reconstruct?.cleanOrphanVolumes;
  assert.ok(hook !== undefined);
  const f: Fixture = {
    node,
    fs,
    wanted: false,
    inActual: false,
    pending: false,
    next: {},
    calls: [],
    pass: (failed = [VOLUME]) => hook(cleanup(failed)),
  };
  const cleanup = (failed: readonly PodVolume[]): OrphanVolumeCleanup => ({
    failed,
    dsw: { volumeExistsWithSpecName: (pod, spec) => f.wanted && pod === POD && spec === SPEC },
    asw: { volumeExistsWithSpecName: (pod, spec) => f.inActual && pod === POD && spec === SPEC },
    isOperationPending: (volumeName, podName) => f.pending && volumeName === SPEC && podName === POD,
    cleanupMounts: async (volume) => {
      assert.equal(volume, VOLUME);
      f.calls.push(node.clock.nowMs());
      const { err, tearDown } = f.next;
      if (tearDown === true) await node.fs.rmdir(PATH);
      return err;
    },
  });
  return f;
}

function messages(f: Fixture): string[] {
  return f.node.logger.messages();
}

/** Advances the clock to `atMs` (absolute) and runs one pass. */
async function passAt(f: Fixture, atMs: number): Promise<readonly PodVolume[]> {
  await f.node.clock.advance(atMs - f.node.clock.nowMs());
  return f.pass();
}

const backoff = (retryAfterMs: number): BackoffError => new BackoffError({ volumeName: SPEC, podName: POD }, retryAfterMs, 1000, new Error('unmount failed'));
const busy = (): AlreadyExistsError => new AlreadyExistsError({ volumeName: SPEC, podName: POD }, 'volume_unmount', { volumeName: SPEC, podName: '' });

describe('retryReconstructionCleanup: cleanOrphanVolumes', () => {
  let f: Fixture;
  beforeEach(async () => {
    f = await fixture();
  });

  it('no candidate: nothing to do, the cleanup is finished', async () => {
    assert.deepEqual(await f.pass([]), []);
    assert.deepEqual(f.calls, []);
    assert.deepEqual(messages(f), [FINISHED]);
  });

  it('a candidate whose TearDown succeeds: cleaned up once, gone from the next pass, no line about a cleanup nobody retried', async () => {
    f.next = { tearDown: true };
    assert.deepEqual(await f.pass(), [VOLUME]);
    assert.deepEqual(f.calls, [0]);
    assert.ok(!messages(f).includes(FINISHED));
    assert.deepEqual(await passAt(f, 500), []);
    assert.deepEqual(f.calls, [0]);
    assert.deepEqual(messages(f), [CLEANED_UP, FINISHED]);
  });

  it('a candidate whose directory is already gone: dropped at once, without a cleanup or a "cleaned up" line', async () => {
    await f.node.fs.rmdir(PATH);
    assert.deepEqual(await f.pass(), []);
    assert.deepEqual(f.calls, []);
    assert.deepEqual(messages(f), [FINISHED]);
  });

  it('the "cleaned up" line is said once: the same path offered again after it went is a new candidate', async () => {
    assert.deepEqual(await f.pass(), [VOLUME]);
    await f.node.fs.rmdir(PATH);
    assert.deepEqual(await passAt(f, 100), []);
    assert.deepEqual(messages(f), [CLEANED_UP, FINISHED]);
    assert.deepEqual(await passAt(f, 200), []);
    assert.deepEqual(messages(f), [CLEANED_UP, FINISHED, FINISHED]);
    // Back again (a new failed reconstruction of the same path): cleaned up at once, not "retried".
    await f.node.fs.mkdir(PATH, { recursive: true, mode: 0o750 });
    assert.deepEqual(await passAt(f, 300), [VOLUME]);
    assert.deepEqual(f.calls, [0, 300]);
    assert.ok(!messages(f).includes(RETRYING));
  });

  it('a failing TearDown is retried after 500 ms, doubling to 2m2s, each retry said, never before its time', async () => {
    const due: number[] = [];
    let at = 0;
    for (let wait = BACKOFF_INITIAL_MS; due.length < 11; wait = Math.min(wait * 2, BACKOFF_MAX_MS)) {
      due.push(at);
      at += wait;
    }
    // 0, +500, +1000, ... +64000 (127500), then +122000 (not +128000), then +122000 again.
    assert.deepEqual(due.slice(-3), [127_500, 249_500, 371_500]);
    for (const t of due) {
      if (t > 0) {
        assert.deepEqual(await passAt(f, t - 1), [VOLUME], `one ms before ${t}`);
        assert.equal(f.calls.length, due.indexOf(t), `no cleanup one ms before ${t}`);
      }
      assert.deepEqual(await passAt(f, t), [VOLUME]);
    }
    assert.deepEqual(f.calls, due);
    assert.equal(messages(f).filter((m) => m === RETRYING).length, due.length - 1);
    assert.ok(!messages(f).includes(FINISHED));
    // The backoff each retry waited for, as the retry line says it.
    const said = f.node.logger.lines.filter((l) => l.msg === RETRYING).map((l) => l.values['backoff']);
    assert.deepEqual(said.slice(0, 3), ['500ms', '1000ms', '2000ms']);
    assert.deepEqual(said.slice(-2), ['122000ms', '122000ms']);
  });

  it('the executor refuses with its own backoff: tried again 1 ms after it ends, and the refusal does not grow the backoff', async () => {
    f.next = { err: backoff(300) };
    assert.deepEqual(await f.pass(), [VOLUME]);
    assert.deepEqual(await passAt(f, 300), [VOLUME]);
    assert.deepEqual(f.calls, [0]);
    f.next = {};
    assert.deepEqual(await passAt(f, 301), [VOLUME]);
    assert.deepEqual(f.calls, [0, 301]);
    // That was the first real attempt: the next waits the initial 500 ms.
    assert.deepEqual(await passAt(f, 800), [VOLUME]);
    assert.deepEqual(f.calls, [0, 301]);
    assert.deepEqual(await passAt(f, 801), [VOLUME]);
    assert.deepEqual(f.calls, [0, 301, 801]);
  });

  it('a refusal after a real attempt keeps that attempt\'s backoff: the next real one doubles it once', async () => {
    assert.deepEqual(await f.pass(), [VOLUME]); // real attempt at 0: backoff 500
    f.next = { err: busy() };
    assert.deepEqual(await passAt(f, 500), [VOLUME]); // refused (another operation runs): may retry at once
    f.next = { err: backoff(0) };
    assert.deepEqual(await passAt(f, 500), [VOLUME]); // refused, executor backoff ends now: retry from 501
    assert.deepEqual(f.calls, [0, 500, 500]);
    f.next = {};
    assert.deepEqual(await passAt(f, 501), [VOLUME]); // real attempt: backoff 500 * 2
    assert.deepEqual(await passAt(f, 1500), [VOLUME]);
    assert.deepEqual(f.calls, [0, 500, 500, 501]);
    assert.deepEqual(await passAt(f, 1501), [VOLUME]);
    assert.deepEqual(f.calls, [0, 500, 500, 501, 1501]);
  });

  it('a first attempt refused as already running: tried again on the next pass, then backed off from 500 ms', async () => {
    f.next = { err: busy() };
    assert.deepEqual(await f.pass(), [VOLUME]);
    assert.deepEqual(await f.pass(), [VOLUME]);
    f.next = {};
    assert.deepEqual(await f.pass(), [VOLUME]);
    assert.deepEqual(f.calls, [0, 0, 0]);
    assert.deepEqual(await passAt(f, 499), [VOLUME]);
    assert.deepEqual(await passAt(f, 500), [VOLUME]);
    assert.deepEqual(f.calls, [0, 0, 0, 500]);
  });

  it('an operation on the volume is pending: kept, not checked, not cleaned up', async () => {
    f.pending = true;
    f.fs.failOn('lstat', PATH, 'EIO');
    assert.deepEqual(await f.pass(), [VOLUME]);
    assert.deepEqual(f.calls, []);
    assert.deepEqual(f.fs.calls, []);
    f.pending = false;
    assert.deepEqual(await f.pass(), [VOLUME]);
    assert.deepEqual(f.calls, [0]);
  });

  it('the directory cannot be checked (EACCES): kept and cleaned up as if it were there', async () => {
    f.fs.failOn('lstat', PATH, 'EACCES');
    assert.deepEqual(await f.pass(), [VOLUME]);
    assert.deepEqual(f.calls, [0]);
  });

  it('wanted and set up by its pod: dropped for good, the reconciler owns it', async () => {
    f.wanted = true;
    f.inActual = true;
    assert.deepEqual(await f.pass(), []);
    assert.deepEqual(f.calls, []);
    assert.deepEqual(messages(f), [SKIPPED, FINISHED]);
  });

  it('wanted but not set up yet: only watched; if its pod goes first, cleaned up at once (its old backoff forgotten)', async () => {
    assert.deepEqual(await f.pass(), [VOLUME]); // a failed attempt at 0: backoff 500
    f.wanted = true;
    assert.deepEqual(await passAt(f, 600), [VOLUME]);
    assert.deepEqual(f.calls, [0]);
    assert.ok(!messages(f).includes(FINISHED));
    f.wanted = false;
    assert.deepEqual(await passAt(f, 700), [VOLUME]);
    assert.deepEqual(f.calls, [0, 700]);
    assert.ok(!messages(f).includes(RETRYING));
    // A fresh backoff: 500 ms from 700.
    assert.deepEqual(await passAt(f, 1199), [VOLUME]);
    assert.deepEqual(await passAt(f, 1200), [VOLUME]);
    assert.deepEqual(f.calls, [0, 700, 1200]);
  });

  it('each candidate has its own backoff, and the pass goes on past a dropped one', async () => {
    const other: PodVolume = { ...VOLUME, volumeSpecName: 'pv-2', volumePath: `${ROOT}/pods/${POD}/volumes/kubernetes.io~csi/pv-2` };
    await f.node.fs.mkdir(other.volumePath, { recursive: true, mode: 0o750 });
    const seen: string[] = [];
    const hook = retryReconstructionCleanup.create(volumeHostOf(f.node), GATES).reconstruct?.cleanOrphanVolumes;
    assert.ok(hook !== undefined);
    const run = (failed: readonly PodVolume[]): Promise<readonly PodVolume[]> =>
      hook({
        failed,
        dsw: { volumeExistsWithSpecName: (_pod, spec) => spec === SPEC && f.wanted },
        asw: { volumeExistsWithSpecName: () => true },
        isOperationPending: () => false,
        cleanupMounts: (v) => {
          seen.push(`${v.volumeSpecName}@${f.node.clock.nowMs()}`);
          return Promise.resolve(undefined);
        },
      });
    assert.deepEqual(await run([VOLUME, other]), [VOLUME, other]);
    await f.node.clock.advance(300);
    assert.deepEqual(await run([other, VOLUME]), [other, VOLUME]);
    assert.deepEqual(seen, ['pv-1@0', 'pv-2@0']);
    f.wanted = true; // pv-1 set up by its pod: dropped; pv-2 still looked at
    await f.node.clock.advance(200);
    assert.deepEqual(await run([VOLUME, other]), [other]);
    assert.deepEqual(seen, ['pv-1@0', 'pv-2@0', 'pv-2@500']);
  });
});
