/**
 * The HTTP server of the agent and of `nodevol audit --interval` against slow
 * clients, with real sockets on 127.0.0.1. A connection whose headers never complete is closed
 * within the headers timeout (Node checks header timeouts only every connectionsCheckingInterval,
 * 30 s by default), and connections that never send a whole request cannot keep a probe out: at
 * the cap, the oldest connection with no request in progress makes room for the new one.
 * Waits are bounded wait-for-condition loops; the bounds are generous.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';

import { HTTP_LIMITS, startHttpServer } from '../../src/agent/httpServer.js';
import { CliProcess } from '../support/cliProcess.js';
import { NodeFixture } from '../support/nodeFixture.js';
import { closedWithin, open, probe } from '../support/hostileHttp.js';

const healthy = { health: () => ({ healthy: true }), ready: () => true };

/** A client that sends a request line and then one header line at a time, never the blank line ending them. */
function slowHeaders(socket: Socket, everyMs: number): () => void {
  socket.on('error', () => undefined);
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
  let n = 0;
  const t = setInterval(() => {
    if (!socket.destroyed) socket.write(`X-Slow-${n++}: y\r\n`);
  }, everyMs);
  t.unref();
  return () => clearInterval(t);
}

/** Retries `f` until it yields `want`, at most for `ms`; returns the last result. */
async function until<T>(f: () => Promise<T>, want: T, ms: number): Promise<T> {
  const end = Date.now() + ms;
  let last = await f();
  while (last !== want && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 50));
    last = await f();
  }
  return last;
}

describe('hostile HTTP clients: slow headers and probe slots', () => {
  it('a connection still sending headers after the headers timeout is closed, though it is never idle', { timeout: 20_000 }, async () => {
    // 600 ms headers timeout; the client sends a header line every 100 ms, so the socket timeout
    // (30 s of silence) never fires: only the headers timeout can close it, and before the change
    // Node looked at it only every 30 s.
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, new Registry(), healthy, { ...HTTP_LIMITS, headersTimeoutMs: 600 });
    const s = await open(http.port);
    const stop = slowHeaders(s, 100);
    try {
      assert.equal(await closedWithin(s, 6_000), 'closed');
    } finally {
      stop();
      s.destroy();
      await http.close();
    }
  });

  it('64 connections that never finish their headers do not keep /healthz (or /metrics) from answering', { timeout: 20_000 }, async () => {
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, new Registry(), healthy);
    const sockets: Socket[] = [];
    const stops: (() => void)[] = [];
    try {
      for (let i = 0; i < HTTP_LIMITS.maxConnections; i++) {
        const s = await open(http.port);
        sockets.push(s);
        stops.push(slowHeaders(s, 200));
      }
      // Far below the 10 s headers timeout: the slow connections are all still there.
      assert.equal(await until(() => probe(http.port, '/healthz'), 200, 3_000), 200);
      assert.equal(await until(() => probe(http.port, '/metrics'), 200, 3_000), 200);
      // Room was made by closing the oldest slow connections, not the newer ones.
      const closed = sockets.map((s) => s.destroyed || s.readyState === 'closed');
      assert.equal(closed[closed.length - 1], false, 'the newest slow connection is kept');
      assert.equal(await closedWithin(sockets[0]!, 2_000), 'closed', 'the oldest slow connection made room');
    } finally {
      for (const stop of stops) stop();
      for (const s of sockets) s.destroy();
      await http.close();
    }
  });

  it('at the cap with every connection serving a request, a new connection is closed at once (nothing busy is evicted)', { timeout: 20_000 }, async () => {
    // /metrics answers only when released: each of the 4 connections has a request in progress.
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => {
      release = r;
    });
    class Hanging extends Registry {
      override async metrics(): Promise<string> {
        await released;
        return '';
      }
    }
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, new Hanging(), healthy, { ...HTTP_LIMITS, maxConnections: 4 });
    // The four requests share one rendering: counted as they reach the server, not as they render.
    let started = 0;
    http.server.on('request', () => started++);
    const busy: Socket[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const s = await open(http.port);
        s.on('error', () => undefined);
        s.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
        busy.push(s);
      }
      assert.equal(await until(() => Promise.resolve(started), 4, 3_000), 4);
      const extra = await open(http.port);
      extra.on('error', () => undefined);
      busy.push(extra);
      assert.equal(await closedWithin(extra, 3_000), 'closed', 'the fifth connection is refused');
      for (const s of busy.slice(0, 4)) assert.equal(s.destroyed, false, 'no busy connection was evicted');
    } finally {
      release();
      for (const s of busy) s.destroy();
      await http.close();
    }
  });

  it('nodevol audit --interval (the DaemonSet\'s mode) serves /healthz past 64 slow connections', { timeout: 60_000 }, async () => {
    const fx = await NodeFixture.create();
    const p = CliProcess.start(['audit', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '--interval', '1h', '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json']);
    const sockets: Socket[] = [];
    const stops: (() => void)[] = [];
    try {
      const address = String((await p.logged('Audit serving metrics'))['address']);
      const port = Number(address.slice(address.lastIndexOf(':') + 1));
      await p.logged('Audit finished');
      for (let i = 0; i < HTTP_LIMITS.maxConnections; i++) {
        const s = await open(port);
        sockets.push(s);
        stops.push(slowHeaders(s, 200));
      }
      assert.equal(await until(() => probe(port, '/healthz'), 200, 5_000), 200);
    } finally {
      for (const stop of stops) stop();
      for (const s of sockets) s.destroy();
      await p.stop();
      await fx.cleanup();
    }
  });
});
