/**
 * Hostile input, the whole process (docs/security.md): SIGTERM always stops `nodevol agent`, even when a loop is
 * stuck for ever in a read that no timeout can cancel (a hung file system holds a libuv thread).
 *
 * The hung file system is a FUSE mount whose server never answers (the test holds /dev/fuse open
 * and never reads it): every request on it waits, killably, in the kernel. The cluster dir's
 * manifests/ is that mount, so the populator's first readdir never returns. After SIGTERM the
 * agent waits the grace period (1 s), abandons the stuck iteration, closes what it can, and - the
 * pending read keeping the event loop alive - its hard stop ends the process grace + 2 s after
 * the signal, with its error lines. Not with exit 0: process.exit() joins libuv's thread pool,
 * and the thread stuck in the read never returns (before this test, the agent hung there for
 * ever); the hard stop sees the pending request and kills itself with SIGKILL. Root only (mount,
 * /dev/fuse). No stopwatch: the order of the agent's own lines proves the hard stop did it (the
 * grace period ran out, then the hard stop's line naming its delay, then SIGKILL); the waits are
 * bounds for a loaded 2-core machine, not measurements.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { CliProcess } from '../support/cliProcess.js';
import { waitFor } from '../support/e2e/waitFor.js';

const GRACE_MS = 1_000;
const HARD_STOP_MARGIN_MS = 2_000;

function skipReason(): string | false {
  if (process.getuid?.() !== 0) return 'needs root (mount, /dev/fuse)';
  if (!existsSync('/dev/fuse')) return 'no /dev/fuse';
  return false;
}

/** A FUSE mount at `dir` whose server never answers; close() aborts it and unmounts. */
function hungMount(dir: string): { close(): void } {
  const fd = openSync('/dev/fuse', 'r+');
  const r = spawnSync('mount', ['-t', 'fuse', '-o', 'fd=3,rootmode=40000,user_id=0,group_id=0', 'nodevol-hung', dir], {
    stdio: ['ignore', 'pipe', 'pipe', fd],
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (r.status !== 0) {
    closeSync(fd);
    throw new Error(`mount -t fuse ${dir}: ${r.error?.message ?? r.stderr}`);
  }
  return {
    close() {
      closeSync(fd); // aborts the connection: every waiting request fails with ENOTCONN
      spawnSync('umount', ['-l', dir], { timeout: 30_000 });
    },
  };
}

/** Whether a thread of `pid` waits in the kernel for a FUSE request. */
function blockedOnFuse(pid: number): boolean {
  try {
    return readdirSync(`/proc/${pid}/task`).some((tid) => readFileSync(`/proc/${pid}/task/${tid}/wchan`, 'utf8').startsWith('fuse_'));
  } catch {
    return false;
  }
}

describe('nodevol agent: hard exit when a loop is stuck', { skip: skipReason() }, () => {
  it('SIGTERM with the populator stuck in a hung read: the process ends at grace + 2 s (SIGKILL to itself), with the error lines', { timeout: 180_000 }, async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-hard-exit-'));
    const root = path.join(dir, 'root');
    const cluster = path.join(dir, 'cluster');
    const manifests = path.join(cluster, 'manifests');
    await mkdir(root);
    await mkdir(manifests, { recursive: true });
    await writeFile(path.join(cluster, 'node-status.json'), '{"volumesAttached":[],"volumesInUse":[]}\n');
    const mount = hungMount(manifests);
    let agent: CliProcess | undefined;
    try {
      agent = CliProcess.start([
        'agent', '--root-dir', root, '--node-name', 'node-1', '--cluster-dir', cluster,
        '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json', '--shutdown-grace-period', `${GRACE_MS}ms`,
      ]);
      const a = agent;
      await a.logged('Starting nodevol agent', 60_000);
      const pid = a.child.pid ?? -1;
      await waitFor(() => blockedOnFuse(pid), { what: 'the agent\'s populator to block in the hung manifests/ read', timeoutMs: 60_000 });

      a.child.kill('SIGTERM');
      const exit = await waitFor(() => a.exit, { what: 'the agent to exit after SIGTERM', timeoutMs: 60_000, intervalMs: 20 });

      // Killed by its own hard stop, not exited: the stuck read kept the process alive past the grace period.
      assert.deepEqual(exit, { code: null, signal: 'SIGKILL' });
      const parsed = a.stderrLines.map((l) => { try { return JSON.parse(l) as Record<string, unknown>; } catch { return {}; } });
      const at = (msg: string): number => parsed.findIndex((j) => j['msg'] === msg);
      const shutdown = at('Shutting down nodevol agent');
      const hardStop = at('nodevol agent did not stop cleanly; exiting');
      const stuckRead = at('A read is stuck in a hung file system and would hold the exit; exiting by SIGKILL');
      const tail = a.stderrLines.slice(-10).join('\n');
      // In this order: the signal taken, the hard stop's timer (naming its delay), then the stuck read that makes it SIGKILL.
      assert.ok(shutdown >= 0 && hardStop > shutdown && stuckRead > hardStop, `lines at ${shutdown}, ${hardStop}, ${stuckRead}:\n${tail}`);
      assert.equal(parsed[hardStop]?.['err'], `still running ${GRACE_MS + HARD_STOP_MARGIN_MS} ms after SIGTERM`);
      assert.match(String(parsed[stuckRead]?.['err']), /FSReqPromise/);
      assert.ok(a.stderrLines.some((l) => l.includes('Abandoned in-flight volume operations at shutdown')), 'the grace period ran out first');
    } finally {
      if (agent !== undefined && agent.exit === undefined) agent.child.kill('SIGKILL');
      mount.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
