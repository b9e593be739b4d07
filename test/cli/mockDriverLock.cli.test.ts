// One `nodevol mock-driver` per --state-dir: a second one on the same state dir (another endpoint)
// does not start (exit 2, naming the first), and a driver SIGKILLed does not keep the state dir
// from the next one, which starts on the same endpoint (its stale socket removed). No root needed.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { CliProcess } from '../support/cliProcess.js';
import { waitFor } from '../support/e2e/waitFor.js';

describe('nodevol mock-driver: one per state dir', () => {
  let dir = '';
  const drivers: CliProcess[] = [];
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-mocklock-'));
  });
  after(async () => {
    for (const d of drivers) {
      if (d.exit === undefined) d.child.kill('SIGKILL');
      await waitFor(() => d.exit, { what: 'the mock driver to exit', timeoutMs: 10_000 });
    }
    await rm(dir, { recursive: true, force: true });
  });
  const driver = (socket: string): CliProcess => {
    const d = CliProcess.start(['mock-driver', '--endpoint', `unix://${path.join(dir, socket)}`, '--node-id', 'node-1', '--driver-name', 'mock.csi.nodevol.io', '--state-dir', path.join(dir, 'state'), '--logging-format', 'json']);
    drivers.push(d);
    return d;
  };

  it('a second driver on the state dir is refused (exit 2) naming the first; after the first is SIGKILLed one starts again', { timeout: 120_000 }, async () => {
    const first = driver('a.sock');
    await first.logged('Mock CSI driver serving', 60_000);

    const second = driver('b.sock');
    const exit = await waitFor(() => second.exit, { what: 'the second driver to refuse to start', timeoutMs: 60_000, observe: () => second.stderrLines });
    assert.equal(exit.code, 2, second.stderrLines.join('\n'));
    assert.match(
      second.stderrLines.join('\n'),
      new RegExp(`^nodevol mock-driver: --state-dir .*/state: nodevol mock-driver \\(pid ${first.child.pid}, since [^)]+\\) holds .*/state/lock .*: two drivers on one state dir would overwrite each other's volume records$`, 'm'),
    );
    assert.ok(!existsSync(path.join(dir, 'b.sock')), 'the refused driver never served');
    assert.equal(first.exit, undefined, 'the first one still serves');

    first.child.kill('SIGKILL');
    await waitFor(() => first.exit, { what: 'the SIGKILLed driver to exit', timeoutMs: 10_000 });
    assert.ok(existsSync(path.join(dir, 'a.sock')), 'SIGKILL left the socket behind');
    const third = driver('a.sock');
    await third.logged('Mock CSI driver serving', 60_000);
    assert.equal((await third.stop(30_000)).code, 0);
  });
});
