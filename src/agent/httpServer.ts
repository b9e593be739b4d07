/**
 * The agent's HTTP endpoints: /metrics (Prometheus text from prom-client), /healthz (the
 * process is alive and its loops complete iterations) and /readyz (reconstruction finished and
 * the states have synced). Binds 127.0.0.1 unless told otherwise.
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
 * keep-alive requests) instead of being refused; only when every connection is serving a request
 * is the new one closed. Slow clients can take turns evicting each other, but not keep the
 * kubelet's probe or a scrape out for longer than it takes to send one request.
 */
import { createServer, type Server } from 'node:http';
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
}

/** Far above what a Prometheus scraper and two probes need. */
export const HTTP_LIMITS: HttpLimits = {
  maxConnections: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  socketTimeoutMs: 30_000,
};

/**
 * How often Node looks for connections past their headers or request timeout: a tenth of the
 * headers timeout, at most 1 s (Node's default is 30 s), at least 10 ms.
 */
export function timeoutCheckIntervalMs(limits: HttpLimits): number {
  return Math.max(10, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 10)));
}

export async function startHttpServer(
  address: BindAddress,
  registry: Registry,
  health: HealthSource,
  limits: HttpLimits = HTTP_LIMITS,
): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const checkMs = timeoutCheckIntervalMs(limits);
  // A connection found past its timeout by a sweep is closed then: shortened by one interval, the
  // timeouts hold as documented (the sweep comes at most one interval late).
  const headersTimeout = Math.max(1, limits.headersTimeoutMs - checkMs);
  const requestTimeout = Math.max(headersTimeout, limits.requestTimeoutMs - checkMs);
  // Connections in the order they came, each with whether a request is in progress on it.
  const connections = new Map<Socket, { busy: boolean }>();
  const server = createServer({ requestTimeout, headersTimeout, keepAliveTimeout: limits.keepAliveTimeoutMs, connectionsCheckingInterval: checkMs }, (req, res) => {
    const state = connections.get(req.socket);
    if (state !== undefined) {
      state.busy = true;
      res.once('close', () => {
        state.busy = false;
      });
    }
    const url = (req.url ?? '/').split('?')[0] ?? '/';
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    switch (url) {
      case '/metrics':
        registry.metrics().then(
          (body) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(body),
          (err: unknown) => res.writeHead(500, { 'Content-Type': 'text/plain' }).end(String(err)),
        );
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
      let victim: Socket | undefined;
      for (const [s, state] of connections) {
        if (!state.busy) {
          victim = s;
          break;
        }
      }
      if (victim === undefined) {
        socket.destroy();
        return;
      }
      connections.delete(victim);
      victim.destroy();
    }
    connections.set(socket, { busy: false });
    socket.once('close', () => connections.delete(socket));
  });
  // A hard cap at accept as well (Node counts a closed connection out only once it is closed): a
  // burst beyond it is refused before any work is done for it.
  server.maxConnections = limits.maxConnections + 1;
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
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
