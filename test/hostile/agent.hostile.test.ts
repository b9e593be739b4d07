/**
 * Hostile input, the agent's side (docs/security.md): /healthz fails when a loop or reconstruction stops
 * completing iterations, a stop is bounded by the grace period whatever is stuck, and the HTTP
 * server caps connections and closes idle ones.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';

import { startHttpServer, HTTP_LIMITS } from '../../src/agent/httpServer.js';
import { AgentRuntime, type RuntimeVolumeManager } from '../../src/agent/runtime.js';
import { RecordingLogger } from '../support/hosts.js';

const never = (): Promise<never> => new Promise<never>(() => undefined);

function fakeVm(stuck: 'populator' | 'reconstruction' | 'none'): RuntimeVolumeManager {
  return {
    start: () => (stuck === 'reconstruction' ? never() : Promise.resolve()),
    populateOnce: () => (stuck === 'populator' ? never() : Promise.resolve()),
    reconcileOnce: () => Promise.resolve(),
    syncNodeStatus: () => Promise.resolve(undefined),
    waitForOperations: () => Promise.resolve(),
    reconciler: { statesHaveBeenSynced: () => true },
  };
}

async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

describe('hostile agent: stuck loops', () => {
  it('a populator iteration that never completes fails /healthz after the stall threshold, naming the loop', async () => {
    let now = 1_000_000;
    const runtime = new AgentRuntime(fakeVm('populator'), new RecordingLogger(), { nodeStatusUpdatePeriodMs: 60_000, shutdownGraceMs: 50, loopStallThresholdMs: 60_000, now: () => now });
    await runtime.start();
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, new Registry(), { health: () => runtime.health(), ready: () => runtime.isReady() });
    try {
      assert.deepEqual(await get(http.port, '/healthz'), { status: 200, body: 'ok' });
      now += 60_001;
      const res = await get(http.port, '/healthz');
      assert.equal(res.status, 500);
      assert.match(res.body, /^unhealthy: desiredStateOfWorldPopulator has not completed an iteration for 60001 ms \(threshold 60000 ms\)$/);
    } finally {
      await runtime.stop();
      await http.close();
    }
  });

  it('stop() returns within the grace period even with a loop iteration stuck forever', { timeout: 5_000 }, async () => {
    const runtime = new AgentRuntime(fakeVm('populator'), new RecordingLogger(), { nodeStatusUpdatePeriodMs: 60_000, shutdownGraceMs: 50 });
    await runtime.start();
    assert.deepEqual(await runtime.stop(), { abandoned: true });
    assert.equal(runtime.getPhase(), 'stopped');
  });

  it('a reconstruction that never completes fails /healthz after the threshold, and stop() still returns', { timeout: 5_000 }, async () => {
    let now = 0;
    const runtime = new AgentRuntime(fakeVm('reconstruction'), new RecordingLogger(), { nodeStatusUpdatePeriodMs: 60_000, shutdownGraceMs: 50, loopStallThresholdMs: 1_000, now: () => now });
    void runtime.start();
    assert.deepEqual(runtime.health(), { healthy: true });
    now = 1_001;
    assert.deepEqual(runtime.health(), { healthy: false, reason: 'reconstruction has not completed an iteration for 1001 ms (threshold 1000 ms)' });
    await runtime.stop();
    assert.equal(runtime.health().healthy, false);
  });
});

/** Resolves when `socket` is closed by the other end, or to 'open' after `ms`. */
function closedWithin(socket: Socket, ms: number): Promise<'closed' | 'open'> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve('open'), ms);
    socket.once('close', () => {
      clearTimeout(t);
      resolve('closed');
    });
  });
}

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

describe('hostile agent: HTTP connections', () => {
  it('at the cap, a new connection closes the oldest idle one instead of being refused (busy ones: test/hostile/httpSlowClients)', { timeout: 10_000 }, async () => {
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, new Registry(), { health: () => ({ healthy: true }), ready: () => true }, { ...HTTP_LIMITS, maxConnections: 8 });
    const sockets: Socket[] = [];
    try {
      for (let i = 0; i < 8; i++) sockets.push(await open(http.port));
      const extra = await open(http.port);
      sockets.push(extra);
      assert.equal(await closedWithin(sockets[0]!, 2_000), 'closed', 'the oldest idle connection goes');
      assert.deepEqual(await get(http.port, '/healthz'), { status: 200, body: 'ok' });
      assert.equal(extra.destroyed, false, 'the ninth connection stays');
    } finally {
      for (const s of sockets) s.destroy();
      await http.close();
    }
  });

  it('an idle connection is closed after the socket timeout', { timeout: 10_000 }, async () => {
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, new Registry(), { health: () => ({ healthy: true }), ready: () => true }, { ...HTTP_LIMITS, socketTimeoutMs: 200 });
    const s = await open(http.port);
    try {
      assert.equal(await closedWithin(s, 3_000), 'closed');
    } finally {
      s.destroy();
      await http.close();
    }
  });

  it('the default limits cap connections and time out idle sockets', () => {
    assert.ok(HTTP_LIMITS.maxConnections > 0 && HTTP_LIMITS.maxConnections <= 1024);
    assert.ok(HTTP_LIMITS.socketTimeoutMs > 0 && HTTP_LIMITS.headersTimeoutMs > 0);
  });
});
