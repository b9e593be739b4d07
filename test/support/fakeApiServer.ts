/**
 * A fake Kubernetes API server on 127.0.0.1 for tests of `nodevol audit --kubeconfig` and
 * `nodevol recover`: it answers the read-only requests they make (get a node, a claim, a PV, a
 * VolumeAttachment or a CSIDriver by name; list pods by field selector; list PVs,
 * VolumeAttachments and CSIDrivers) from a set of objects, in real Kubernetes JSON, and records
 * every request with the bytes of its answer. Lists are served in pages of `limit` objects, as a
 * real API server does (or of `pageSize`, whatever the limit): `metadata.continue` names the
 * next page, and `remainingItemCount` counts what is left. A field selector the real API server
 * does not support for the resource (anything but `metadata.name` and `metadata.namespace`, and
 * for pods also `spec.nodeName`) is refused with 400, as it refuses one. `fail` answers a request with a Status instead (with
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
  /** The bytes of the answer's body (0 for a trickled answer). */
  bytes: number;
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
      bytes: 0,
    });
    const recorded = requests[requests.length - 1]!;
    const send = (code: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void => {
      const text = JSON.stringify(body);
      recorded.bytes = Buffer.byteLength(text);
      res.writeHead(code, { ...headers, 'Content-Type': 'application/json' }).end(text);
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
      const limit = Number(url.searchParams.get('limit') ?? '0');
      const size = o.pageSize ?? (Number.isSafeInteger(limit) && limit > 0 ? limit : items.length);
      const page = items.slice(from, from + Math.max(size, 1));
      const next = from + page.length;
      const body = typedList(kind, apiVersion, page) as { metadata: Record<string, unknown> };
      if (next < items.length) body.metadata = { ...body.metadata, continue: String(next), remainingItemCount: items.length - next };
      send(200, body);
    };
    const p = url.pathname;
    let m: RegExpExecArray | null;
    /** The object of `kind` named `name` (and `namespace`), or a 404 Status as the API server words it. */
    const getOne = (kind: string, resource: string, name: string, namespace?: string): void => {
      const found = of(kind).find((x) => x.metadata['name'] === name && (namespace === undefined || x.metadata['namespace'] === namespace));
      return found === undefined ? status(404, 'NotFound', `${resource} "${name}" not found`) : send(200, found);
    };
    /** The field selector's terms, or a 400 for a field the resource does not support (as the API server answers). */
    const selector = (supported: readonly string[]): Map<string, string> | undefined => {
      const terms = new Map<string, string>();
      for (const term of (url.searchParams.get('fieldSelector') ?? '').split(',').filter((t) => t !== '')) {
        const eq = term.indexOf('=');
        const field = eq < 0 ? term : term.slice(0, eq);
        if (!['metadata.name', 'metadata.namespace', ...supported].includes(field)) {
          status(400, 'BadRequest', `field label not supported: ${field}`);
          return undefined;
        }
        terms.set(field, term.slice(eq + 1));
      }
      return terms;
    };
    /** A list of `kind` filtered by the field selector (metadata.name, and the fields `supported` reads). */
    const listOf = (kind: string, listKind: string, apiVersion: string, supported: Readonly<Record<string, (x: KubeObject) => unknown>> = {}): void => {
      const terms = selector(Object.keys(supported));
      if (terms === undefined) return;
      const fields: Record<string, (x: KubeObject) => unknown> = { 'metadata.name': (x) => x.metadata['name'], 'metadata.namespace': (x) => x.metadata['namespace'], ...supported };
      const text = (v: unknown): string => (typeof v === 'string' ? v : '');
      sendList(listKind, apiVersion, of(kind).filter((x) => [...terms].every(([f, v]) => text(fields[f]?.(x)) === v)));
    };
    if ((m = /^\/api\/v1\/nodes\/([^/]+)$/.exec(p))) return getOne('Node', 'nodes', decodeURIComponent(m[1]!));
    if (p === '/api/v1/pods') return listOf('Pod', 'PodList', 'v1', { 'spec.nodeName': (x) => (x['spec'] as { nodeName?: string }).nodeName });
    if (p === '/api/v1/persistentvolumes') return listOf('PersistentVolume', 'PersistentVolumeList', 'v1');
    if ((m = /^\/api\/v1\/persistentvolumes\/([^/]+)$/.exec(p))) return getOne('PersistentVolume', 'persistentvolumes', decodeURIComponent(m[1]!));
    if ((m = /^\/api\/v1\/namespaces\/([^/]+)\/persistentvolumeclaims\/([^/]+)$/.exec(p))) {
      return getOne('PersistentVolumeClaim', 'persistentvolumeclaims', decodeURIComponent(m[2]!), decodeURIComponent(m[1]!));
    }
    if (p === '/apis/storage.k8s.io/v1/volumeattachments') return listOf('VolumeAttachment', 'VolumeAttachmentList', 'storage.k8s.io/v1');
    if ((m = /^\/apis\/storage\.k8s\.io\/v1\/volumeattachments\/([^/]+)$/.exec(p))) return getOne('VolumeAttachment', 'volumeattachments.storage.k8s.io', decodeURIComponent(m[1]!));
    if (p === '/apis/storage.k8s.io/v1/csidrivers') return listOf('CSIDriver', 'CSIDriverList', 'storage.k8s.io/v1');
    if ((m = /^\/apis\/storage\.k8s\.io\/v1\/csidrivers\/([^/]+)$/.exec(p))) return getOne('CSIDriver', 'csidrivers.storage.k8s.io', decodeURIComponent(m[1]!));
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

/** What a request asked for, without its names: `GET persistentvolumes`, `LIST pods` … */
export function requestKind(r: RecordedRequest): string {
  const parts = r.path.split('/').filter((s) => s !== '');
  // /api/v1/<resource>[/<name>], /api/v1/namespaces/<ns>/<resource>/<name>, /apis/<group>/<version>/<resource>[/<name>]
  const rest = parts[0] === 'api' ? parts.slice(2) : parts.slice(3);
  const namespaced = rest[0] === 'namespaces' && rest.length >= 3;
  const resource = namespaced ? rest[2] : rest[0];
  const named = namespaced ? rest.length >= 4 : rest.length >= 2;
  return `${named ? 'GET' : 'LIST'} ${resource ?? '?'}`;
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
