/**
 * The HTTP server of the agent (and of `nodevol audit --interval`) against a pipelining flood:
 * 64 connections, each writing 3,000 pipelined `GET /metrics` at once and never reading an answer,
 * each replaced as soon as the server closes it, from a process of its own (FloodProcess). Before
 * the fix, /healthz stopped answering within seconds and for as long as the flood lasted (every
 * request rendered /metrics, every answer was queued, and 64 busy connections had a probe
 * refused), and the process grew by 300 to 600 MB.
 *
 * Probed every 200 ms for 5 s, /healthz must answer 200 within 1 s every time; the open sockets
 * and the memory stay bounded, /metrics is rendered at most about once a second, and a
 * well-behaved scrape still gets it. Once in process (a real server over real sockets), once
 * against a real `nodevol agent` process (no root: a temporary root dir and cluster dir), whose
 * loops must keep running (an orphaned pod dir made during the flood is removed). Then the bounds
 * of one connection, each on its own: pipelining, requests per connection, the eviction of a
 * connection that does not read its answers, and a rendering dropped when the text changed.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import type { Socket } from 'node:net';
import { Registry } from 'prom-client';

import { HTTP_LIMITS, startHttpServer } from '../../src/agent/httpServer.js';
import { createVolumeManagerMetrics } from '../../src/adapters/prometheus/volumeManagerMetrics.js';
import { CliProcess } from '../support/cliProcess.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { closedWithin, FloodProcess, open, probe, probeRepeatedly } from '../support/hostileHttp.js';

const healthy = { health: () => ({ healthy: true }), ready: () => true };
const WINDOW_MS = 5_000;
const FLOOD = { connections: 64, requests: 3_000, path: '/metrics' };
const MiB = 1024 * 1024;

/** A registry that counts its renderings, holding the agent's metrics with a few series each. */
class CountingRegistry extends Registry {
  renders = 0;
  override metrics(): Promise<string> {
    this.renders++;
    return super.metrics();
  }
}

function agentMetrics(): CountingRegistry {
  const registry = new CountingRegistry();
  const m = createVolumeManagerMetrics(registry);
  for (let i = 0; i < 20; i++) {
    m.storageOperation('kubernetes.io/csi:driver-' + String(i % 4), i % 2 === 0 ? 'volume_mount' : 'unmount_device', 'success', 30 * i);
    m.csiOperation('driver-' + String(i % 4), i % 2 === 0 ? '/csi.v1.Node/NodePublishVolume' : '/csi.v1.Node/NodeStageVolume', 'OK', 10 * i);
  }
  return registry;
}

/** Both counters of a process from /proc/PID/stat, in ms of CPU (utime + stime, at 100 ticks a second). */
async function cpuMs(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function rssBytes(pid: number): Promise<number> {
  const m = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN) * 1024;
}

describe('hostile HTTP clients: a pipelining flood that never reads', () => {
  it('64 connections each pipelining 3,000 GET /metrics: /healthz answers within 1 s all along, sockets, memory and renderings stay bounded, a scrape still works', { timeout: 30_000 }, async (t) => {
    const registry = agentMetrics();
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, registry, healthy);
    const rssBefore = process.memoryUsage().rss;
    let maxSockets = 0;
    let maxRss = rssBefore;
    const flood = await FloodProcess.start(http.port, FLOOD);
    try {
      const sample = (): void => {
        http.server.getConnections((err, n) => {
          if (err === null) maxSockets = Math.max(maxSockets, n);
        });
        maxRss = Math.max(maxRss, process.memoryUsage().rss);
      };
      const rendersBefore = registry.renders;
      const started = performance.now();
      const [healthz, scrape] = await Promise.all([
        probeRepeatedly(http.port, '/healthz', { everyMs: 200, forMs: WINDOW_MS, each: sample }),
        // A well-behaved scrape in the middle of the flood.
        (async () => {
          await new Promise((r) => setTimeout(r, WINDOW_MS / 2));
          const res = await fetch(`http://127.0.0.1:${http.port}/metrics`, { signal: AbortSignal.timeout(2_000) }).catch((err: unknown) => err);
          return res instanceof Response ? { status: res.status, body: await res.text() } : { status: String(res), body: '' };
        })(),
      ]);
      const elapsedMs = performance.now() - started;
      const renders = registry.renders - rendersBefore;
      t.diagnostic(`probes ${healthz.length}: ${JSON.stringify(healthz)}; max server sockets ${maxSockets}; rss +${((maxRss - rssBefore) / MiB).toFixed(0)} MiB; renders ${renders} in ${elapsedMs.toFixed(0)} ms`);

      assert.deepEqual(healthz.filter((r) => r !== 200), [], 'every /healthz probe answered 200 within 1 s');
      assert.ok(healthz.length >= 15, `probed ${healthz.length} times`);
      assert.equal(scrape.status, 200, 'the scrape during the flood got /metrics');
      assert.match(scrape.body, /^storage_operation_duration_seconds_bucket\{/m);
      assert.ok(maxSockets <= 2 * HTTP_LIMITS.maxConnections, `at most ${2 * HTTP_LIMITS.maxConnections} sockets open, saw ${maxSockets}`);
      assert.ok(maxRss - rssBefore < 128 * MiB, `memory grew by ${((maxRss - rssBefore) / MiB).toFixed(0)} MiB`);
      // One rendering a second at most, whatever the number of requests (and one more at each end).
      assert.ok(renders <= Math.ceil(elapsedMs / 1_000) + 2, `${renders} renderings in ${elapsedMs.toFixed(0)} ms`);
    } finally {
      t.diagnostic(`flood sockets opened ${await flood.stop()}`);
      await http.close();
    }
  });

  it('nodevol agent under the same flood: /healthz answers within 1 s all along, its fds and memory stay bounded, its loops keep running', { timeout: 60_000 }, async (t) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-http-flood-'));
    const root = path.join(dir, 'root');
    const cluster = path.join(dir, 'cluster');
    await mkdir(root);
    await mkdir(path.join(cluster, 'manifests'), { recursive: true });
    await writeFile(path.join(cluster, 'node-status.json'), '{"volumesAttached":[],"volumesInUse":[]}\n');
    const agent = CliProcess.start(['agent', '--root-dir', root, '--node-name', 'node-1', '--cluster-dir', cluster, '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json']);
    let flood: FloodProcess | undefined;
    try {
      const address = String((await agent.logged('Starting nodevol agent'))['metricsAddress']);
      const port = Number(address.slice(address.lastIndexOf(':') + 1));
      const pid = agent.child.pid ?? -1;
      assert.equal(await probe(port, '/healthz'), 200);
      const rssBefore = await rssBytes(pid);
      const fdsBefore = (await readdir(`/proc/${pid}/fd`)).length;
      let maxRss = rssBefore;
      let maxFds = fdsBefore;
      const sample = (): void => {
        void Promise.all([rssBytes(pid), readdir(`/proc/${pid}/fd`)]).then(
          ([rss, fds]) => {
            maxRss = Math.max(maxRss, rss);
            maxFds = Math.max(maxFds, fds.length);
          },
          () => undefined,
        );
      };
      flood = await FloodProcess.start(port, FLOOD);
      const cpuBefore = await cpuMs(pid);
      const started = performance.now();
      // An orphaned pod dir made during the flood: the housekeeping loop must remove it.
      const orphan = path.join(root, 'pods', 'uid-orphan-during-flood');
      const [healthz, loopsRan] = await Promise.all([
        probeRepeatedly(port, '/healthz', { everyMs: 200, forMs: WINDOW_MS, each: sample }),
        (async () => {
          await mkdir(orphan);
          return waitFor(() => !existsSync(orphan), { what: 'the agent to remove the orphaned pod dir during the flood', timeoutMs: WINDOW_MS }).then(
            () => true,
            () => false,
          );
        })(),
      ]);
      const cpuPercent = ((await cpuMs(pid)) - cpuBefore) / (performance.now() - started) * 100;
      const scrape = await probe(port, '/metrics', 2_000);
      t.diagnostic(`probes ${healthz.length}: ${JSON.stringify(healthz)}; agent fds ${fdsBefore} -> max ${maxFds}; rss ${(rssBefore / MiB).toFixed(0)} -> max ${(maxRss / MiB).toFixed(0)} MiB; agent CPU ${cpuPercent.toFixed(0)} % of a core`);

      assert.deepEqual(healthz.filter((r) => r !== 200), [], 'every /healthz probe answered 200 within 1 s');
      assert.ok(healthz.length >= 15, `probed ${healthz.length} times`);
      assert.ok(loopsRan, 'the orphaned pod dir was removed during the flood');
      assert.equal(scrape, 200, 'a scrape during the flood got /metrics');
      assert.ok(maxFds - fdsBefore <= 2 * HTTP_LIMITS.maxConnections, `fds ${fdsBefore} -> ${maxFds}`);
      assert.ok(maxRss - rssBefore < 128 * MiB, `rss ${(rssBefore / MiB).toFixed(0)} -> ${(maxRss / MiB).toFixed(0)} MiB`);
    } finally {
      if (flood !== undefined) t.diagnostic(`flood sockets opened ${await flood.stop()}`);
      assert.deepEqual(await agent.stop(), { code: 0, signal: null });
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** Everything `socket` receives, as text. */
function received(socket: Socket): () => string {
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    text += chunk;
  });
  return () => text;
}

const statusLines = (text: string): string[] => text.match(/^HTTP\/1\.1 \d{3}/gm) ?? [];

describe('hostile HTTP clients: the bounds of one connection', () => {
  it(`${HTTP_LIMITS.maxPipelinedRequests} pipelined requests are all answered, in order`, { timeout: 10_000 }, async () => {
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, agentMetrics(), { health: () => ({ healthy: true }), ready: () => false });
    const s = await open(http.port);
    try {
      const text = received(s);
      const paths = Array.from({ length: HTTP_LIMITS.maxPipelinedRequests }, (_, i) => ['/healthz', '/readyz', '/metrics', '/nope'][i % 4] ?? '/');
      s.write(paths.map((p) => `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`).join(''));
      await waitFor(() => statusLines(text()).length === paths.length, { what: 'every answer', timeoutMs: 5_000, observe: () => statusLines(text()) });
      assert.deepEqual(statusLines(text()), paths.map((p) => `HTTP/1.1 ${{ '/healthz': 200, '/readyz': 503, '/metrics': 200 }[p] ?? 404}`));
      assert.equal(s.destroyed, false, 'the connection stays open');
    } finally {
      s.destroy();
      await http.close();
    }
  });

  it(`one more pipelined request closes the connection before any of them is handled`, { timeout: 10_000 }, async () => {
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, agentMetrics(), healthy);
    let handled = 0;
    http.server.on('request', () => handled++);
    const s = await open(http.port);
    try {
      const text = received(s);
      s.on('error', () => undefined);
      s.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(HTTP_LIMITS.maxPipelinedRequests + 1));
      assert.equal(await closedWithin(s, 5_000), 'closed');
      assert.equal(handled, 0, 'Node parsed none of them');
      assert.equal(text(), '', 'nothing was answered');
      assert.equal(await probe(http.port, '/healthz'), 200);
    } finally {
      s.destroy();
      await http.close();
    }
  });

  it('a keep-alive connection makes at most maxRequestsPerSocket requests: the last is answered with Connection: close, and the connection closes', { timeout: 10_000 }, async () => {
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, agentMetrics(), healthy, { ...HTTP_LIMITS, maxRequestsPerSocket: 3 });
    const s = await open(http.port);
    try {
      const text = received(s);
      for (let i = 1; i <= 3; i++) {
        s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
        await waitFor(() => statusLines(text()).length === i, { what: `answer ${i}`, timeoutMs: 5_000 });
      }
      const answers = text().split(/(?=^HTTP\/1\.1 )/m);
      assert.deepEqual(answers.map((a) => /^connection: (\S+)/im.exec(a)?.[1]), ['keep-alive', 'keep-alive', 'close']);
      assert.equal(await closedWithin(s, 5_000), 'closed');
    } finally {
      s.destroy();
      await http.close();
    }
  });

  it('at the cap, a connection whose answers only wait for the client to read them makes room for a probe', { timeout: 20_000 }, async () => {
    // 32 MiB answers that the clients never read: far more than the kernel buffers of a loopback
    // connection hold, so each answer stays in the server, finished by the handler but not sent.
    class Big extends Registry {
      readonly text = 'x'.repeat(32 * MiB);
      override metrics(): Promise<string> {
        return Promise.resolve(this.text);
      }
    }
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, new Big(), healthy, { ...HTTP_LIMITS, maxConnections: 2 });
    let handled = 0;
    http.server.on('request', () => handled++);
    const unread: Socket[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const s = await open(http.port);
        s.pause();
        s.on('error', () => undefined);
        s.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
        unread.push(s);
      }
      await waitFor(() => handled === 2, { what: 'both requests to reach the server' });
      assert.equal(await probe(http.port, '/healthz'), 200, 'the probe got a slot');
      const [oldest, newer] = unread;
      assert.ok(oldest !== undefined && newer !== undefined);
      oldest.resume(); // to see the close
      assert.equal(await closedWithin(oldest, 5_000), 'closed', 'the oldest unread connection made room');
      assert.equal(newer.destroyed, false);
    } finally {
      for (const s of unread) s.destroy();
      await http.close();
    }
  });

  it('metricsChanged(): the next request gets the new text, though a rendering is kept for a period', { timeout: 10_000 }, async () => {
    class Text extends Registry {
      text = 'v 1\n';
      override metrics(): Promise<string> {
        return Promise.resolve(this.text);
      }
    }
    const registry = new Text();
    const http = await startHttpServer({ host: '127.0.0.1', port: 0 }, registry, healthy, { ...HTTP_LIMITS, metricsCacheMs: 600_000 });
    const scrape = async (): Promise<string> => (await fetch(`http://127.0.0.1:${http.port}/metrics`)).text();
    try {
      assert.equal(await scrape(), 'v 1\n');
      registry.text = 'v 2\n';
      assert.equal(await scrape(), 'v 1\n', 'the kept rendering');
      http.metricsChanged();
      assert.equal(await scrape(), 'v 2\n');
    } finally {
      await http.close();
    }
  });
});
