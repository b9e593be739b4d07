/**
 * `nodevol audit --interval` (the DaemonSet's mode) against an API server that answers 200 and
 * then trickles one byte every 50 ms, for ever: the socket is never idle, the answer never
 * complete. Every cycle's request must be abandoned at --request-timeout AND its connection
 * closed: the fake server counts its open connections when each request arrives, and that count
 * must not grow with the cycles (before the fix it grew by one per cycle, 1 → 21).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { CliProcess, NODEVOL_BIN } from '../support/cliProcess.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { fakeApiServer, writeKubeconfig } from '../support/fakeApiServer.js';
import { NodeFixture } from '../support/nodeFixture.js';

const CYCLES = 20;

/** The environment of a process that must use --kubeconfig, not a service account. */
function envWithoutCluster(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  delete env['NODE_NAME'];
  return env;
}

describe('hostile API server: a trickling answer under audit --interval', () => {
  it(`${CYCLES} timed-out cycles leave no connection open: the server's count of open sockets stays flat`, { timeout: 120_000 }, async (t) => {
    const fx = await NodeFixture.create();
    const api = await fakeApiServer([], { trickle: () => true, trickleEveryMs: 50 });
    const kubeconfig = path.join(fx.base, 'kubeconfig');
    await writeKubeconfig(kubeconfig, api.url);
    const p = CliProcess.start(
      [
        'audit',
        '--root-dir', fx.root,
        '--mountinfo', await fx.writeMountInfo(),
        '--kubeconfig', kubeconfig,
        '--node-name', 'node-1',
        '--request-timeout', '300ms',
        '--interval', '1s',
        '--metrics-bind-address', '127.0.0.1:0',
        '--logging-format', 'json',
      ],
      envWithoutCluster(),
    );
    try {
      // Each cycle asks for the node first and stops at its time-out: one request per cycle. The
      // (CYCLES + 1)th request arrives after CYCLES cycles timed out.
      await waitFor(() => (p.exit === undefined ? api.requests.length > CYCLES : Promise.reject(new Error(`nodevol exited: ${JSON.stringify(p.exit)}`))), {
        what: `${CYCLES + 1} requests (${CYCLES} timed-out cycles)`,
        timeoutMs: 90_000,
        intervalMs: 100,
        observe: () => ({ requests: api.requests.length, openByRequest: api.requests.map((r) => r.openSockets), stderr: p.stderrLines.slice(-3) }),
      });
      const openByRequest = api.requests.map((r) => r.openSockets);
      t.diagnostic(`open connections when each request arrived: ${openByRequest.join(' ')}`);
      assert.ok(Math.max(...openByRequest) <= 2, `open connections when each request arrived (must not grow): ${openByRequest.join(' ')}`);
      assert.ok(api.requests.every((r) => r.path === '/api/v1/nodes/node-1'), 'each cycle stopped at its first request');
      // Every cycle failed for the time-out, and said so.
      const timedOut = p.stderrLines.filter((l) => l.includes('get node node-1: no complete answer within 300 ms'));
      assert.ok(timedOut.length >= CYCLES, `${timedOut.length} time-out lines:\n${p.stderrLines.slice(-5).join('\n')}`);
      // At most the current cycle's connection is open, and nothing more ever was at once.
      assert.ok(api.openSockets() <= 1, `${api.openSockets()} connections open`);
      // No abandoned request keeps the process alive: SIGTERM ends it.
      assert.deepEqual(await p.stop(), { code: 0, signal: null });
    } finally {
      if (p.exit === undefined) {
        await p.stop().catch(() => {
          p.child.kill('SIGKILL');
        });
      }
      await api.close();
      await fx.cleanup();
    }
  });

  it('--request-timeout must be a positive duration: 0 (no bound) and garbage are exit 2 naming the flag, before any request', async () => {
    const fx = await NodeFixture.create();
    const api = await fakeApiServer([]);
    try {
      const kubeconfig = path.join(fx.base, 'kubeconfig');
      await writeKubeconfig(kubeconfig, api.url);
      const mountinfo = await fx.writeMountInfo();
      for (const [value, want] of [['0', /--request-timeout 0: must be more than 0: every API request is bounded/], ['0s', /--request-timeout 0s: must be more than 0/], ['5x', /--request-timeout: invalid duration "5x"/]] as const) {
        const r = spawnSync(process.execPath, [NODEVOL_BIN, 'audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '--kubeconfig', kubeconfig, '--node-name', 'node-1', '--request-timeout', value], { encoding: 'utf8', env: envWithoutCluster(), timeout: 60_000 });
        assert.equal(r.status, 2, `${value}: ${r.stderr}`);
        assert.equal(r.stdout, '');
        assert.match(r.stderr, want);
        // --interval refuses it at the start, as its own flags, rather than failing every cycle.
        const serve = spawnSync(process.execPath, [NODEVOL_BIN, 'audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '--kubeconfig', kubeconfig, '--node-name', 'node-1', '--interval', '1s', '--metrics-bind-address', '127.0.0.1:0', '--request-timeout', value], { encoding: 'utf8', env: envWithoutCluster(), timeout: 60_000 });
        assert.equal(serve.status, 2, `--interval, ${value}: ${serve.stderr}`);
        assert.match(serve.stderr, want);
      }
      assert.equal(api.requests.length, 0);
    } finally {
      await api.close();
      await fx.cleanup();
    }
  });
});
