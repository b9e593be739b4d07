/**
 * Hostile environment: the wall clock stepped back and forward by hours while the agent runs (an
 * operator's `date -s`, NTP correcting a node that booted with a wrong clock). Nothing the agent
 * decides may depend on it: the operations' backoff, the stuck-operation detector, the loops'
 * stall check (/healthz), housekeeping and the cluster dir's safety-net pass all run on the
 * monotonic clock (Clock.nowMs, performance.now); the wall clock (Clock.wallMs, Date.now) only
 * stamps what is printed. Over the in-memory node on the fake clock, whose wall clock the test
 * steps by hours between reconciler passes (and Date.now with it, where the agent's own code
 * would read it). The real clock adapter itself: test/unit/adapters/clock.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';

import { ClusterDirView } from '../../src/adapters/node/clusterDir.js';
import { NodeFileSystem } from '../../src/adapters/node/nodeFs.js';
import { composeNode } from '../../src/agent/node.js';
import type { LoopScheduler } from '../../src/agent/runtime.js';
import type { Pod } from '../../src/api/core.js';
import type { UniqueVolumeName } from '../../src/layout/names.js';
import { parseStuckOperationsFile, stuckOperationsPath } from '../../src/kubelet/stuckOperationsFile.js';
import type { ClusterView } from '../../src/ports/cluster.js';
import { GrpcStatus } from '../../src/ports/csi.js';
import type { FakeClock } from '../support/fakeClock.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { FaultyFs } from '../support/faultyFs.js';
import { gates } from '../support/hosts.js';
import { InMemoryNode, NODE, ROOT } from '../support/inMemoryNode.js';

const HOUR = 3_600_000;
/** The wall clock when the test starts (the monotonic clock starts at 0). */
const WALL0 = Date.UTC(2026, 11, 1, 3, 0, 0);
/** The wall steps applied between reconciler passes, in turn: forward 3 h, back 5 h, forward 2 h. */
const STEPS = [3 * HOUR, -5 * HOUR, 2 * HOUR];

/** kubelet's exponential backoff: 500 ms doubling, capped at 2m2s. */
function backoffMs(failures: number): number {
  return Math.min(500 * 2 ** (failures - 1), 122_000);
}

/** Go's time.Time String() in UTC ("2026-12-01 02:55:00.5 +0000 UTC") back to epoch ms. */
function parseGoTime(text: string): number {
  const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d+)?) \+0000 UTC$/.exec(text);
  assert.ok(m !== null, `not a Go time: ${text}`);
  return Date.parse(`${m[1]}T${m[2]}Z`);
}

/** The wall clock at each monotonic time the test stepped it (so any monotonic time maps to the wall). */
class WallLog {
  readonly #marks: { mono: number; wall: number }[] = [];
  constructor(private readonly clock: FakeClock) {
    this.mark();
  }
  mark(): void {
    this.#marks.push({ mono: this.clock.nowMs(), wall: this.clock.wallMs() });
  }
  /** The wall time at monotonic `mono` (the last step at or before it, plus the time since). */
  wallAt(mono: number): number {
    let m = this.#marks[0];
    for (const x of this.#marks) if (x.mono <= mono) m = x;
    assert.ok(m !== undefined);
    return m.wall + (mono - m.mono);
  }
}

describe('hostile: the wall clock stepped by hours while the agent runs', () => {
  it('a refused NodeUnstageVolume: retries expire on the monotonic clock, the stuck warning comes after one monotonic minute, printed times follow the wall clock', async () => {
    const node = new InMemoryNode();
    node.clock.stepWall(WALL0);
    const wall = new WallLog(node.clock);
    const name = node.addVolume('pv-1', 'vol-1') as UniqueVolumeName;
    node.addPod('pod-a', ['pv-1']);
    await node.startKubelet(true);
    await node.stepUntil(() => node.kubelet.asw.getMountedVolumes().length === 1);
    await node.steps(2);
    const tracker = node.composed?.stuck;
    assert.ok(tracker !== undefined);

    const refusal = node.driver.inject({ method: 'NodeUnstageVolume', code: GrpcStatus.INTERNAL });
    const mark = node.logger.lines.length;
    const callMark = node.driver.calls.length;
    node.cluster.deletePod('pod-a');
    // 150 passes a second apart, the wall clock stepped by hours before each.
    for (let i = 0; i < 150; i++) {
      node.clock.stepWall(STEPS[i % STEPS.length] ?? 0);
      wall.mark();
      await node.step(1_000);
    }
    await tracker.settled();
    const unstages = node.driver.calls.slice(callMark).filter((c) => c.method === 'NodeUnstageVolume');
    const at = unstages.map((c) => c.atMs);
    assert.ok(at.length >= 8, `8 attempts in 150 s of 500 ms doubling backoff, got ${at.length}`);

    // The backoff expires on time: each retry comes once its backoff has passed, at the next pass.
    for (let k = 1; k < at.length; k++) {
      const gap = (at[k] ?? 0) - (at[k - 1] ?? 0);
      assert.ok(gap >= backoffMs(k) && gap <= backoffMs(k) + 1_000, `retry ${k} after ${gap} ms of monotonic time, backoff ${backoffMs(k)} ms`);
    }

    // The stuck warning: once, at the first failure a monotonic minute after the first.
    const first = at[0] ?? 0;
    const stuckAt = at.findIndex((t) => t - first >= 60_000);
    assert.ok(stuckAt > 0);
    const warnings = node.logger.lines.slice(mark).filter((l) => l.severity === 'W' && l.msg.includes(' is stuck: '));
    assert.equal(warnings.length, 1, 'one warning: not at the first step forward, not never');
    assert.equal(warnings[0]?.values['failures'], stuckAt + 1, `warned at failure ${stuckAt + 1}, the first a minute after the first one`);
    assert.match(String(warnings[0]?.values['failingFor']), /^1m\d+(\.\d+)?s$/);

    // What is printed carries the wall clock: kubelet's "No retries permitted until" line...
    const errors = node.logger.lines.slice(mark).filter((l) => l.severity === 'E' && l.msg.startsWith('Operation for ') && l.msg.includes('UnmountDevice'));
    assert.equal(errors.length, at.length, 'one error line per refusal');
    errors.forEach((e, k) => {
      const until = /No retries permitted until (.+?) \(durationBeforeRetry/.exec(e.msg)?.[1];
      assert.ok(until !== undefined, e.msg);
      const expected = wall.wallAt(at[k] ?? 0) + backoffMs(k + 1);
      assert.ok(Math.abs(parseGoTime(until) - expected) <= 1_000, `failure ${k + 1}: "${until}", the wall clock then plus the backoff is ${new Date(expected).toISOString()}`);
    });
    // ...and the status file nodevol audit reads.
    const file = parseStuckOperationsFile(new TextDecoder().decode(await node.fs.readFile(stuckOperationsPath(ROOT), 1 << 20)), 'status');
    const entry = file.entries.find((e) => e.volumeName === name);
    assert.ok(entry !== undefined);
    assert.ok(Math.abs(Date.parse(entry.firstFailure) - wall.wallAt(first)) <= 1_000, `firstFailure ${entry.firstFailure}`);
    assert.ok(Math.abs(Date.parse(entry.lastFailure) - wall.wallAt(at[at.length - 1] ?? 0)) <= 1_000, `lastFailure ${entry.lastFailure}`);
    // Failures this far apart (over the 10 s refresh) each rewrite the file: written at the last one.
    assert.ok(Math.abs(Date.parse(file.writtenAt) - Date.parse(entry.lastFailure)) <= 1_000, `writtenAt ${file.writtenAt}`);

    // The driver relents: the next retry, due on the monotonic clock, unstages.
    refusal.remove();
    const lastAt = at[at.length - 1] ?? 0;
    await node.stepUntil(() => node.driver.volume('vol-1')?.stagedAt === undefined, 200, 1_000);
    const success = node.driver.calls.slice(callMark).filter((c) => c.method === 'NodeUnstageVolume' && c.outcome === 'OK');
    assert.equal(success.length, 1);
    assert.ok((success[0]?.atMs ?? 0) - lastAt >= backoffMs(at.length), 'not before the backoff expired');
    assert.ok(node.logger.messages().includes('Volume operation succeeded after being stuck'));
  });

  it('/healthz neither fails for a wall clock stepped forward under a running loop nor stays healthy for one stepped back; housekeeping keeps its period', async (t: TestContext) => {
    const node = new InMemoryNode();
    node.clock.stepWall(WALL0);
    // Where the agent's own code reads the wall clock, it reads this one.
    let processWall = WALL0;
    t.mock.method(Date, 'now', () => processWall);
    const stepWall = (ms: number): void => {
      node.clock.stepWall(ms);
      processWall += ms;
    };
    // The loops' timers on the fake clock (the real ones are libuv's monotonic timers).
    const scheduler: LoopScheduler = {
      setTimeout: (callback, ms) => {
        const handle = { cancelled: false };
        void node.clock.sleep(ms).then(() => {
          if (!handle.cancelled) callback();
        });
        return handle;
      },
      clearTimeout: (handle) => {
        (handle as { cancelled: boolean }).cancelled = true;
      },
    };
    // A populator pass can be held at its pod listing.
    let hold: Promise<void> | undefined;
    let held = 0;
    const cluster: ClusterView = Object.create(node.cluster) as ClusterView;
    Object.assign(cluster, {
      listPods: async (): Promise<readonly Pod[]> => {
        if (hold !== undefined) {
          held++;
          await hold;
        }
        return node.cluster.listPods();
      },
    });
    const composed = composeNode(
      {
        layout: node.layout,
        realRootDir: ROOT,
        nodeName: NODE,
        features: gates(true),
        fs: node.fs,
        logger: node.logger,
        clock: node.clock,
        mounter: node.mounter,
        csiDrivers: { client: (n) => (n === node.driver.name ? node.driver : undefined) },
        cluster,
      },
      { metrics: { volumeManager: node.metrics }, scheduler, compactWhenIdle: false, shutdownGraceMs: 0 },
    );
    await composed.start();
    try {
      await node.clock.advance(1_000);
      assert.deepEqual(composed.runtime.health(), { healthy: true });

      // A populator pass runs (held at its listing) when the wall clock jumps 2 h forward.
      let release!: () => void;
      hold = new Promise<void>((r) => (release = r));
      await node.clock.advance(1_000);
      assert.ok(held > 0, 'a pass is running');
      stepWall(2 * HOUR);
      await node.clock.advance(1_000);
      assert.deepEqual(composed.runtime.health(), { healthy: true }, 'one second of the loop, not two hours');

      // The clock steps back 5 h; the pass stays stuck for a monotonic minute: now it is unhealthy.
      stepWall(-5 * HOUR);
      await node.clock.advance(60_000);
      const h = composed.runtime.health();
      assert.equal(h.healthy, false, 'a stuck loop is still found');
      assert.match(h.healthy ? '' : h.reason, /^desiredStateOfWorldPopulator has not completed an iteration for 6\d{4} ms \(threshold 60000 ms\)$/);
      hold = undefined;
      release();
      await node.clock.advance(1_000);
      assert.deepEqual(composed.runtime.health(), { healthy: true });

      // Housekeeping (every 2 s) still sweeps an orphaned pod dir, the wall clock stepped back 5 h.
      await node.fs.mkdir(`${ROOT}/pods/orphan-uid/volumes`, { recursive: true, mode: 0o750 });
      stepWall(-5 * HOUR);
      await node.clock.advance(2_100);
      assert.equal(await node.exists(`${ROOT}/pods/orphan-uid`), false, 'swept within one housekeeping period');
    } finally {
      hold = undefined;
      await composed.runtime.stop();
    }
  });

  it('the cluster dir view: a wall clock stepped 3 h forward does not count as the safety-net interval passing', async (t: TestContext) => {
    const dir = mkdtempSync(join(tmpdir(), 'nodevol-wall-view-'));
    mkdirSync(join(dir, 'manifests'));
    writeFileSync(
      join(dir, 'manifests', 'a.yaml'),
      'apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: default, uid: uid-a}\nspec:\n  nodeName: node-1\n  volumes: [{name: data, persistentVolumeClaim: {claimName: c-a}}]\n',
    );
    writeFileSync(join(dir, 'node-status.json'), JSON.stringify({ volumesAttached: [], volumesInUse: [] }));
    const fs = new FaultyFs(new NodeFileSystem());
    // The process's wall clock, steppable (mocked before the view exists, whatever it captures).
    const realNow = Date.now.bind(Date);
    let wallStep = 0;
    t.mock.method(Date, 'now', () => realNow() + wallStep);
    // The agent's view: watching, and its own default clock.
    const v = new ClusterDirView({ dir, nodeName: 'node-1', fs, watch: true });
    try {
      // Passes until one costs nothing (the first pass's own writes make inotify events).
      await waitFor(
        async () => {
          fs.calls.length = 0;
          await v.listPods();
          return fs.calls.length === 0;
        },
        { what: 'a pass of the watching view that makes no call', timeoutMs: 5_000, intervalMs: 10 },
      );
      wallStep = 3 * HOUR;
      fs.calls.length = 0;
      await v.listPods();
      assert.deepEqual(fs.calls, [], 'no full pass: 3 h of wall clock are not 20 s of monotonic time');
    } finally {
      v.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
