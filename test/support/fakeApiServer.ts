/**
 * A fake Kubernetes API server on 127.0.0.1 for tests of `nodevol audit --kubeconfig` and
 * `nodevol recover`: it answers the read-only requests they make (get node, list pods by field
 * selector, list PVs, VolumeAttachments and CSIDrivers, get PVC) from a set of objects, in real
 * Kubernetes JSON, and records every request. Lists can be served in pages (`pageSize`), the
 * way a real API server answers `limit`: `metadata.continue` names the next page, and
 * `remainingItemCount` counts what is left. `fail` answers a request with a Status instead (with
 * extra headers, e.g. Retry-After); `answer` replaces the body of a request outright (a hostile or
 * broken server); `trickle` answers 200 and then one byte at a time, never ending the answer (a
 * hung or throttled API server, or a proxy in front of one).
 *
 * It counts its connections as the server sees them: `openSockets()` now, and, for each request,
 * how many were open when it arrived (`requests[i].openSockets`): a client that leaks a connection
 * per request shows as a count that grows.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { typedList, type KubeObject } from './clusterObjects.js';

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, string>;
  readonly authorization: string | undefined;
  /** The connections open on the server when this request arrived (this one included). */
  readonly openSockets: number;
  /** When it arrived (Date.now()). */
  readonly atMs: number;
}

export interface StatusAnswer {
  readonly code: number;
  readonly reason: string;
  readonly message: string;
  /** Extra response headers, e.g. `{ 'Retry-After': '1' }`. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface FakeApiServerOptions {
  /** Answers this request with a Status. */
  readonly fail?: (req: IncomingMessage) => StatusAnswer | undefined;
  /** Answers this request with this body (status 200) instead of the objects; undefined: as usual. */
  readonly answer?: (req: IncomingMessage) => unknown;
  /** Items per page of every list, whatever `limit` asks for (a server may page as it likes). */
  readonly pageSize?: number;
  /**
   * Answers this request with 200 and headers at once, then one byte of a JSON object every
   * `trickleEveryMs` (default 50 ms) and never the end of it: the socket is never idle, the
   * answer never complete. The trickle stops when the connection closes, when the server is
   * closed, and in any case after {@link MAX_TRICKLE_MS}.
   */
  readonly trickle?: (req: IncomingMessage) => boolean;
  readonly trickleEveryMs?: number;
}

/** No trickle outlives this, whatever the client does. */
export const MAX_TRICKLE_MS = 5 * 60_000;

export interface FakeApiServer {
  readonly server: Server;
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** Connections open on the server now. */
  openSockets(): number;
  /** Connections accepted since the start. */
  acceptedSockets(): number;
  close(): Promise<void>;
}

export async function fakeApiServer(objects: readonly KubeObject[], o: FakeApiServerOptions = {}): Promise<FakeApiServer> {
  const requests: RecordedRequest[] = [];
  const of = (kind: string): KubeObject[] => objects.filter((x) => x.kind === kind);
  const sockets = new Set<Socket>();
  let accepted = 0;
  const trickles = new Set<NodeJS.Timeout>();
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    requests.push({
      method: req.method ?? '',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      authorization: req.headers.authorization,
      openSockets: sockets.size,
      atMs: Date.now(),
    });
    const send = (code: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void => {
      res.writeHead(code, { ...headers, 'Content-Type': 'application/json' }).end(JSON.stringify(body));
    };
    const status = (code: number, reason: string, message: string, headers?: Readonly<Record<string, string>>): void =>
      send(code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code }, headers);
    if (o.trickle?.(req) === true) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"kind":"Status","padding":"');
      const started = Date.now();
      const t = setInterval(() => {
        if (res.destroyed || Date.now() - started > MAX_TRICKLE_MS) {
          clearInterval(t);
          trickles.delete(t);
          res.destroy();
          return;
        }
        res.write(' ');
      }, o.trickleEveryMs ?? 50);
      trickles.add(t);
      res.on('close', () => {
        clearInterval(t);
        trickles.delete(t);
      });
      return;
    }
    const failure = o.fail?.(req);
    if (failure !== undefined) return status(failure.code, failure.reason, failure.message, failure.headers);
    const replaced = o.answer?.(req);
    if (replaced !== undefined) return send(200, replaced);
    if (req.method !== 'GET') return status(405, 'MethodNotAllowed', 'read-only test server');
    /** One page of a list: the continue token is the offset of the next item. */
    const sendList = (kind: string, apiVersion: string, items: readonly KubeObject[]): void => {
      const from = Number(url.searchParams.get('continue') ?? '0');
      const size = o.pageSize ?? items.length;
      const page = items.slice(from, from + Math.max(size, 1));
      const next = from + page.length;
      const body = typedList(kind, apiVersion, page) as { metadata: Record<string, unknown> };
      if (next < items.length) body.metadata = { ...body.metadata, continue: String(next), remainingItemCount: items.length - next };
      send(200, body);
    };
    const p = url.pathname;
    let m: RegExpExecArray | null;
    if ((m = /^\/api\/v1\/nodes\/([^/]+)$/.exec(p))) {
      const n = of('Node').find((x) => x.metadata['name'] === m![1]);
      return n === undefined ? status(404, 'NotFound', `nodes "${m[1]}" not found`) : send(200, n);
    }
    if (p === '/api/v1/pods') {
      const sel = url.searchParams.get('fieldSelector') ?? '';
      const nodeName = /^spec\.nodeName=(.*)$/.exec(sel)?.[1];
      return sendList('PodList', 'v1', of('Pod').filter((x) => nodeName === undefined || (x['spec'] as { nodeName?: string }).nodeName === nodeName));
    }
    if (p === '/api/v1/persistentvolumes') return sendList('PersistentVolumeList', 'v1', of('PersistentVolume'));
    if ((m = /^\/api\/v1\/namespaces\/([^/]+)\/persistentvolumeclaims\/([^/]+)$/.exec(p))) {
      const c = of('PersistentVolumeClaim').find((x) => x.metadata['namespace'] === m![1] && x.metadata['name'] === m![2]);
      return c === undefined ? status(404, 'NotFound', `persistentvolumeclaims "${m[2]}" not found`) : send(200, c);
    }
    if (p === '/apis/storage.k8s.io/v1/volumeattachments') return sendList('VolumeAttachmentList', 'storage.k8s.io/v1', of('VolumeAttachment'));
    if (p === '/apis/storage.k8s.io/v1/csidrivers') return sendList('CSIDriverList', 'storage.k8s.io/v1', of('CSIDriver'));
    return status(404, 'NotFound', `the server could not find the requested resource (${p})`);
  });
  server.on('connection', (socket: Socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    requests,
    openSockets: () => sockets.size,
    acceptedSockets: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of trickles) clearInterval(t);
        trickles.clear();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A kubeconfig naming `server`, with a bearer token (test-token). */
export async function writeKubeconfig(file: string, server: string): Promise<void> {
  await writeFile(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: test\n  cluster:\n    server: ${server}\n    insecure-skip-tls-verify: true`,
      'users:',
      '- name: audit\n  user:\n    token: test-token',
      'contexts:',
      '- name: test\n  context:\n    cluster: test\n    user: audit',
      'current-context: test',
      '',
    ].join('\n'),
  );
}
