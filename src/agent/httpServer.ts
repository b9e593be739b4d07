/**
 * The agent's HTTP endpoints: /metrics (Prometheus text from prom-client), /healthz (the
 * process is alive and its loops complete iterations) and /readyz (reconstruction finished and
 * the states have synced). Binds 127.0.0.1 unless told otherwise. `nodevol audit --interval`
 * serves its findings through the same server.
 *
 * Hostile clients are bounded: at most {@link HTTP_LIMITS}.maxConnections open connections,
 * request headers within headersTimeoutMs, a whole request within requestTimeoutMs, idle
 * keep-alive sockets closed after keepAliveTimeoutMs and any socket idle for socketTimeoutMs
 * closed, so idle connections cannot exhaust the agent's file descriptors.
 *
 * Node enforces the headers and request timeouts only when it sweeps its connections, every
 * `connectionsCheckingInterval` (30 s by default): a client trickling header bytes kept its
 * connection for up to 40 s. The sweep runs every {@link timeoutCheckIntervalMs} and Node's
 * timeouts are shortened by that much, so such a connection is closed by headersTimeoutMs.
 *
 * A probe must get in while slow clients hold every slot: at the cap, a new connection closes the
 * oldest one that has no request in progress (one still sending its headers, or idle between
 * keep-alive requests), else the oldest whose answers are all made and only wait for the client
 * to read them, instead of being refused; only when every connection waits for an answer being
 * made (a /metrics rendering) is the new one closed. Slow clients can take turns evicting each
 * other, but not keep the kubelet's probe or a scrape out for longer than it takes to send one
 * request.
 *
 * A client that pipelines requests and never reads the answers (64 connections of 3,000
 * `GET /metrics` each kept /healthz unanswered for the whole flood, the process at up to 140 % of
 * a core and 650 MB) is bounded three ways:
 * - Pipelining: at most maxPipelinedRequests (8) answers of a connection not yet handed to the
 *   kernel; one more request closes the connection. The check runs on each read before Node's
 *   parser sees it (see {@link gateReads}): a flooding connection costs one read and a scan for a
 *   few blank lines, not the 1,800 requests Node would parse from that read. The request handler
 *   checks again, for a request whose head spans two reads. Not Node's `maxRequestsPerSocket`:
 *   past it Node still answers each request with a 503, after parsing it.
 * - Requests per connection: maxRequestsPerSocket (100); the last is answered with
 *   `Connection: close`, a later one (only a client ignoring that sends it) closes the connection.
 *   A scraper reconnects every 100 scrapes.
 * - Rendering: one rendering of /metrics answers every request for it that comes while it is
 *   made or within metricsCacheMs (1 s) after ({@link MetricsRenderCache}), so a flood costs at
 *   most one rendering a second; the answers share the rendering's Buffer, so answers queued for a
 *   client that does not read cost their headers only, and with the pipelining bound at most 8
 *   per connection. No byte bound on what a connection has buffered is needed on top: the count
 *   bounds it, and the socket timeout closes a connection that reads nothing for 30 s. A Prometheus
 *   scrape (every 10 s or more) sees values at most 1 s old; the audit drops the kept rendering
 *   when a run completes (metricsChanged), so it never serves a verdict older than its last run.
 * /healthz and /readyz stay cheap: answered from the loops' state, never rendered.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Registry } from 'prom-client';

export const DEFAULT_METRICS_BIND_ADDRESS = '127.0.0.1:10260';

export interface BindAddress {
  readonly host: string;
  readonly port: number;
}

/** Parses "HOST:PORT" or "[IPv6]:PORT"; port 0 picks a free one. */
export function parseBindAddress(value: string): BindAddress {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(value);
  const port = Number(m?.[3] ?? NaN);
  const host = m?.[1] ?? m?.[2];
  if (m === null || host === undefined || !Number.isInteger(port) || port > 65535) {
    throw new Error(`invalid bind address ${JSON.stringify(value)}: want HOST:PORT, e.g. ${DEFAULT_METRICS_BIND_ADDRESS}`);
  }
  return { host, port };
}

export interface HealthSource {
  /** Healthy, or why not (the /healthz body). */
  health(): { readonly healthy: boolean; readonly reason?: string };
  ready(): boolean;
}

export interface HttpLimits {
  readonly maxConnections: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly socketTimeoutMs: number;
  /** Requests of one connection answered but not yet handed to the kernel, past which it is closed. */
  readonly maxPipelinedRequests: number;
  /** Requests one connection may make; the last is answered with `Connection: close`, any later one closes it. */
  readonly maxRequestsPerSocket: number;
  /** How long one rendering of /metrics answers every request for it. */
  readonly metricsCacheMs: number;
}

/** Far above what a Prometheus scraper and two probes need. */
export const HTTP_LIMITS: HttpLimits = {
  maxConnections: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  socketTimeoutMs: 30_000,
  maxPipelinedRequests: 8,
  maxRequestsPerSocket: 100,
  metricsCacheMs: 1_000,
};

/**
 * How often Node looks for connections past their headers or request timeout: a tenth of the
 * headers timeout, at most 1 s (Node's default is 30 s), at least 10 ms.
 */
export function timeoutCheckIntervalMs(limits: HttpLimits): number {
  return Math.max(10, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 10)));
}

/** One rendering of /metrics: the body to send, or why it failed. */
export type MetricsRendering = { readonly ok: true; readonly body: Buffer } | { readonly ok: false; readonly error: string };

/**
 * Renders /metrics at most once per `ttlMs`, one rendering at a time: a request that comes while
 * a rendering is in progress waits for it, one that comes within `ttlMs` after it completed gets
 * it as it is (the same Buffer, so queued answers share their bytes). A failed rendering is kept
 * as long as a good one. invalidate() drops the kept rendering and detaches one in progress, for a
 * source that knows its text just changed: the next request renders again.
 */
export class MetricsRenderCache {
  #kept: { readonly atMs: number; readonly rendering: MetricsRendering } | undefined;
  #inProgress: Promise<MetricsRendering> | undefined;

  constructor(
    private readonly render: () => Promise<string>,
    private readonly ttlMs: number,
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  get(): Promise<MetricsRendering> {
    const kept = this.#kept;
    if (kept !== undefined && this.nowMs() - kept.atMs < this.ttlMs) return Promise.resolve(kept.rendering);
    if (this.#inProgress !== undefined) return this.#inProgress;
    // A source that throws instead of rejecting fails the rendering, not the request handler.
    const inProgress = new Promise<string>((resolve) => resolve(this.render())).then(
      (text): MetricsRendering => ({ ok: true, body: Buffer.from(text) }),
      (err: unknown): MetricsRendering => ({ ok: false, error: String(err) }),
    );
    this.#inProgress = inProgress;
    return inProgress.then((rendering) => {
      // Kept only when nothing invalidated it (or started another) meanwhile.
      if (this.#inProgress === inProgress) {
        this.#inProgress = undefined;
        this.#kept = { atMs: this.nowMs(), rendering };
      }
      return rendering;
    });
  }

  invalidate(): void {
    this.#kept = undefined;
    this.#inProgress = undefined;
  }
}

export interface HttpServer {
  readonly server: Server;
  readonly port: number;
  /** The metrics' text just changed: the next /metrics renders again instead of answering the kept rendering. */
  metricsChanged(): void;
  close(): Promise<void>;
}

/** Per connection, in the order they came: the answers not yet handed to the kernel, and the requests made. */
interface ConnectionState {
  readonly pending: Set<ServerResponse>;
  requests: number;
}

export async function startHttpServer(address: BindAddress, registry: Registry, health: HealthSource, limits: HttpLimits = HTTP_LIMITS): Promise<HttpServer> {
  const checkMs = timeoutCheckIntervalMs(limits);
  // A connection found past its timeout by a sweep is closed then: shortened by one interval, the
  // timeouts hold as documented (the sweep comes at most one interval late).
  const headersTimeout = Math.max(1, limits.headersTimeoutMs - checkMs);
  const requestTimeout = Math.max(headersTimeout, limits.requestTimeoutMs - checkMs);
  const metrics = new MetricsRenderCache(() => registry.metrics(), limits.metricsCacheMs);
  const connections = new Map<Socket, ConnectionState>();
  // Out of the count at once: Node emits 'close' only after the handle is released.
  const drop = (socket: Socket): void => {
    connections.delete(socket);
    socket.destroy();
  };
  const server = createServer({ requestTimeout, headersTimeout, keepAliveTimeout: limits.keepAliveTimeoutMs, connectionsCheckingInterval: checkMs }, (req, res) => {
    const socket = req.socket;
    const state = connections.get(socket);
    // Node parses a whole read of a closed connection (up to 64 KiB) before it sees the close:
    // what was pipelined behind the request that closed it costs nothing more.
    if (state === undefined || socket.destroyed) {
      req.destroy();
      return;
    }
    state.requests++;
    state.pending.add(res);
    res.once('close', () => state.pending.delete(res));
    if (state.pending.size > limits.maxPipelinedRequests || state.requests > limits.maxRequestsPerSocket) {
      drop(socket);
      return;
    }
    // The last request a connection may make: Node closes it once this answer is sent.
    if (state.requests === limits.maxRequestsPerSocket) res.setHeader('Connection', 'close');
    const url = (req.url ?? '/').split('?')[0] ?? '/';
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    switch (url) {
      case '/metrics':
        void metrics.get().then((r) => {
          if (res.destroyed) return;
          if (r.ok) res.writeHead(200, { 'Content-Type': registry.contentType }).end(r.body);
          else res.writeHead(500, { 'Content-Type': 'text/plain' }).end(r.error);
        });
        return;
      case '/healthz': {
        const h = health.health();
        if (h.healthy) res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok');
        else res.writeHead(500, { 'Content-Type': 'text/plain' }).end(`unhealthy: ${h.reason ?? 'unknown'}`);
        return;
      }
      case '/readyz':
        if (health.ready()) res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok');
        else res.writeHead(503, { 'Content-Type': 'text/plain' }).end('not ready: reconstruction or node status sync pending');
        return;
      default:
        res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
    }
  });
  server.on('connection', (socket: Socket) => {
    if (connections.size >= limits.maxConnections) {
      const victim = evictionVictim(connections);
      if (victim === undefined) {
        socket.destroy();
        return;
      }
      drop(victim);
    }
    const state: ConnectionState = { pending: new Set(), requests: 0 };
    connections.set(socket, state);
    socket.once('close', () => connections.delete(socket));
    gateReads(socket, state, limits.maxPipelinedRequests, drop);
  });
  // A hard cap at accept as well (Node counts a connection out only once it is closed, after the
  // eviction that closed it): a burst beyond it is refused before any work is done for it.
  server.maxConnections = 2 * limits.maxConnections;
  server.setTimeout(limits.socketTimeoutMs, (socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : address.port;
  return {
    server,
    port,
    metricsChanged: () => metrics.invalidate(),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The connection a new one replaces at the cap: the oldest with no request in progress (idle, or
 * still sending its headers), else the oldest whose every request is answered and only waits for
 * the client to read; none while every connection waits for an answer being made (a /metrics
 * rendering in progress).
 */
function evictionVictim(connections: ReadonlyMap<Socket, ConnectionState>): Socket | undefined {
  let unread: Socket | undefined;
  for (const [socket, state] of connections) {
    if (state.pending.size === 0) return socket;
    if (unread === undefined && [...state.pending].every((res) => res.writableEnded)) unread = socket;
  }
  return unread;
}

const HEAD_END = Buffer.from('\r\n\r\n');

/**
 * Puts a check in front of Node's HTTP parser on `socket`: a read whose request heads (each ends
 * with a blank line), added to the connection's answers not yet sent, exceed `maxPipelined`
 * closes the connection before the parser sees any of it. Node parses a whole read (up to 64 KiB,
 * some 1,800 minimal requests) before the request handler could close the connection, and every
 * request parsed costs a request and a response object, then an error when the closed connection
 * aborts it: 20 to 40 ms of the event loop per flooding connection, which 64 connections sending
 * at once turned into a 2.6 s stall. Node's server reads through one 'data' listener once another
 * is added (it stops feeding its parser from C++): that listener is moved behind the check. On a
 * Node whose server reads otherwise, nothing is checked here and the request handler's bound
 * still holds, at the cost above.
 */
function gateReads(socket: Socket, state: ConnectionState, maxPipelined: number, drop: (socket: Socket) => void): void {
  const listeners = socket.listeners('data');
  const parse = listeners[0];
  if (listeners.length !== 1 || typeof parse !== 'function') return;
  socket.removeListener('data', parse as (chunk: Buffer) => void);
  socket.on('data', (chunk: Buffer) => {
    const room = maxPipelined - state.pending.size;
    if (countUpTo(chunk, HEAD_END, room + 1) > room) {
      drop(socket);
      return;
    }
    (parse as (chunk: Buffer) => void)(chunk);
  });
}

/** How many times `needle` occurs in `chunk`, counting no further than `limit`. */
function countUpTo(chunk: Buffer, needle: Buffer, limit: number): number {
  let n = 0;
  for (let at = chunk.indexOf(needle); at !== -1 && n < limit; at = chunk.indexOf(needle, at + needle.length)) n++;
  return n;
}
