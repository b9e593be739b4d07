/**
 * A small read-only Kubernetes API client: a kubeconfig reader, the in-cluster service account,
 * and GET over node:https (node:http for an http:// server). It replaces @kubernetes/client-node
 * (57 MB installed, most of an image's node_modules) for the handful of GETs the audit and
 * `recover` make (src/adapters/node/clusterApi.ts).
 *
 * The kubeconfig is read as kubectl reads one file: `current-context` names a context, whose
 * `cluster` and `user` name entries of `clusters` and `users`. Supported, as kubectl means them:
 * - cluster: `server` (https or http, with a path prefix), `certificate-authority` (a file,
 *   relative to the kubeconfig's directory) or `certificate-authority-data` (base64 PEM),
 *   `insecure-skip-tls-verify`, `tls-server-name`;
 * - user: `client-certificate`/`client-key` (files) or their `-data` forms, `token`,
 *   `tokenFile`, `username` + `password` (basic auth).
 * Not supported, each refused by name rather than ignored: `exec` and `auth-provider`
 * credential plugins (the cloud providers' default kubeconfigs: use a service account token or
 * a client certificate kubeconfig), `proxy-url`, impersonation (`as`, `as-groups`,
 * `as-uid`, `as-user-extra`), and the KUBECONFIG variable's list of files (give one file).
 *
 * In a pod (no kubeconfig): `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT` with the
 * service account's `ca.crt` and `token` (re-read for every request: the kubelet rotates it).
 *
 * Every read is bounded: a kubeconfig, a certificate, a key or a token file at 1 MiB, an answer
 * at {@link MAX_RESPONSE_BYTES}, and each request as a whole in time (`timeoutMs`, from sending it
 * to the last byte): a request past its bound, or whose caller's AbortSignal fired, is destroyed
 * with its connection. A 429 or 5xx with a Retry-After in seconds is asked again after it, within
 * bounds ({@link KubeRetryPolicy}). A non-2xx answer is a {@link KubeApiError} with the status
 * code and the body (the API server's Status), as client-node's ApiException had, so callers
 * read `code` (404: not found) and `body`.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import * as path from 'node:path';

import { errorMessage } from '../../ports/fs.js';
import { importExternal } from './importExternal.js';
import { NodeFileSystem } from './nodeFs.js';

/** The in-cluster service account files. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const MAX_CONFIG_FILE_BYTES = 1024 * 1024;
/** A list of every PV of a large cluster stays far below this; anything larger is refused. */
export const MAX_RESPONSE_BYTES = 256 * 1024 * 1024;

/** What a request needs: the server and how to authenticate. */
export interface KubeRestConfig {
  /** The server URL as configured (messages name it). */
  readonly server: string;
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly insecureSkipTLSVerify: boolean;
  readonly tlsServerName?: string;
  /** The bearer token, or where to read it before each request. */
  readonly token?: string;
  readonly tokenFile?: string;
  readonly basicAuth?: { readonly username: string; readonly password: string };
}

/** A kubeconfig that cannot be used: one line naming the file and the field. */
export class KubeConfigError extends Error {
  override readonly name = 'KubeConfigError';
}

/**
 * An answer other than 2xx: `code` is the HTTP status, `body` the text (a Status object),
 * `retryAfterSeconds` the answer's Retry-After when it was a number of seconds, `retries` how
 * often the request had been asked again before this answer, and `maxWaitMs` the longest
 * Retry-After the client would have waited for.
 */
export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  readonly retries: number;
  readonly retryAfterSeconds: number | undefined;
  readonly maxWaitMs: number | undefined;
  constructor(
    readonly code: number,
    readonly body: string,
    more: { readonly retries?: number; readonly retryAfterSeconds?: number; readonly maxWaitMs?: number } = {},
  ) {
    super(`HTTP ${code}`);
    this.retries = more.retries ?? 0;
    this.retryAfterSeconds = more.retryAfterSeconds;
    this.maxWaitMs = more.maxWaitMs;
  }
}

async function readBounded(file: string): Promise<Buffer> {
  return Buffer.from(await new NodeFileSystem().readFile(file, MAX_CONFIG_FILE_BYTES));
}

type Json = Record<string, unknown>;

function isMap(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The entry called `name` of a kubeconfig list (`clusters`, `users`, `contexts`): its inner map. */
function named(doc: Json, list: string, inner: string, name: string, where: string): Json {
  const items = doc[list];
  if (items !== undefined && !Array.isArray(items)) throw new KubeConfigError(`${where}: ${list}: not a list`);
  const found = (items ?? []).find((e): e is Json => isMap(e) && e['name'] === name);
  if (found === undefined) throw new KubeConfigError(`${where}: ${list}: no entry named ${JSON.stringify(name)}`);
  const value = found[inner];
  if (!isMap(value)) throw new KubeConfigError(`${where}: ${list}[name=${name}].${inner}: missing or not a map`);
  return value;
}

function str(m: Json, key: string, where: string): string | undefined {
  const v = m[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new KubeConfigError(`${where}.${key}: not a string`);
  return v;
}

function base64(m: Json, key: string, where: string): Buffer | undefined {
  const v = str(m, key, where);
  if (v === undefined) return undefined;
  if (!/^[A-Za-z0-9+/=\s]*$/.test(v)) throw new KubeConfigError(`${where}.${key}: not base64`);
  return Buffer.from(v, 'base64');
}

/** `-data` inline, else the file (relative to the kubeconfig's directory), else undefined. */
async function material(m: Json, key: string, dir: string, where: string): Promise<Buffer | undefined> {
  const data = base64(m, `${key}-data`, where);
  if (data !== undefined) return data;
  const file = str(m, key, where);
  if (file === undefined) return undefined;
  const abs = path.resolve(dir, file);
  try {
    return await readBounded(abs);
  } catch (err) {
    throw new KubeConfigError(`${where}.${key}: ${errorMessage(err)}`);
  }
}

const UNSUPPORTED_USER_FIELDS: Readonly<Record<string, string>> = {
  exec: 'exec credential plugins are not supported: use a kubeconfig with a token or a client certificate (or run in a pod with the service account)',
  'auth-provider': 'auth-provider plugins are not supported: use a kubeconfig with a token or a client certificate',
  as: 'impersonation is not supported',
  'as-groups': 'impersonation is not supported',
  'as-uid': 'impersonation is not supported',
  'as-user-extra': 'impersonation is not supported',
};

/** Reads a kubeconfig file as kubectl does (see the header for what is supported). */
export async function loadKubeconfig(file: string): Promise<KubeRestConfig> {
  const text = (await readBounded(file)).toString('utf8');
  const { parse } = await importExternal<typeof import('yaml')>('yaml');
  let doc: unknown;
  try {
    doc = parse(text, { maxAliasCount: 100 });
  } catch (err) {
    throw new KubeConfigError(`not YAML: ${errorMessage(err).split('\n')[0] ?? ''}`);
  }
  if (!isMap(doc)) throw new KubeConfigError('not a kubeconfig (the document is not a map)');
  const currentContext = str(doc, 'current-context', 'current-context');
  if (currentContext === undefined) throw new KubeConfigError('current-context: not set');
  const context = named(doc, 'contexts', 'context', currentContext, 'current-context');
  const clusterName = str(context, 'cluster', `contexts[name=${currentContext}].context`);
  if (clusterName === undefined) throw new KubeConfigError(`contexts[name=${currentContext}].context.cluster: not set`);
  const userName = str(context, 'user', `contexts[name=${currentContext}].context`);
  const cw = `clusters[name=${clusterName}].cluster`;
  const cluster = named(doc, 'clusters', 'cluster', clusterName, 'contexts');
  const server = str(cluster, 'server', cw);
  if (server === undefined) throw new KubeConfigError(`${cw}.server: not set`);
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new KubeConfigError(`${cw}.server: not a URL: ${server}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new KubeConfigError(`${cw}.server: ${url.protocol} is not http or https`);
  if (str(cluster, 'proxy-url', cw) !== undefined) throw new KubeConfigError(`${cw}.proxy-url: a proxy is not supported`);
  const dir = path.dirname(file);
  const insecure = cluster['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') throw new KubeConfigError(`${cw}.insecure-skip-tls-verify: not a boolean`);
  const ca = await material(cluster, 'certificate-authority', dir, cw);
  const tlsServerName = str(cluster, 'tls-server-name', cw);

  let user: Json = {};
  const uw = `users[name=${userName ?? ''}].user`;
  if (userName !== undefined) user = named(doc, 'users', 'user', userName, 'contexts');
  for (const [field, why] of Object.entries(UNSUPPORTED_USER_FIELDS)) {
    if (user[field] !== undefined && user[field] !== null) throw new KubeConfigError(`${uw}.${field}: ${why}`);
  }
  const cert = await material(user, 'client-certificate', dir, uw);
  const key = await material(user, 'client-key', dir, uw);
  if ((cert === undefined) !== (key === undefined)) throw new KubeConfigError(`${uw}: client-certificate and client-key go together`);
  const token = str(user, 'token', uw);
  const tokenFileRaw = str(user, 'tokenFile', uw);
  const username = str(user, 'username', uw);
  const password = str(user, 'password', uw);
  return {
    server,
    insecureSkipTLSVerify: insecure === true,
    ...(ca !== undefined ? { ca } : {}),
    ...(tlsServerName !== undefined ? { tlsServerName } : {}),
    ...(cert !== undefined && key !== undefined ? { cert, key } : {}),
    ...(token !== undefined ? { token } : tokenFileRaw !== undefined ? { tokenFile: path.resolve(dir, tokenFileRaw) } : {}),
    ...(username !== undefined && password !== undefined ? { basicAuth: { username, password } } : {}),
  };
}

/** The in-cluster config (a pod's service account), as client-go's rest.InClusterConfig. */
export async function loadInCluster(env: NodeJS.ProcessEnv = process.env, dir: string = SERVICE_ACCOUNT_DIR): Promise<KubeRestConfig> {
  const host = env['KUBERNETES_SERVICE_HOST'] ?? '';
  const port = env['KUBERNETES_SERVICE_PORT'] ?? '';
  if (host === '' || port === '') throw new KubeConfigError('not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set');
  let ca: Buffer;
  try {
    ca = await readBounded(path.join(dir, 'ca.crt'));
  } catch (err) {
    throw new KubeConfigError(`service account: ${errorMessage(err)}`);
  }
  return { server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`, ca, insecureSkipTLSVerify: false, tokenFile: path.join(dir, 'token') };
}

/** What a GET may be given besides the path and the query. */
export interface KubeRequestOptions {
  /** Aborting it abandons the request at once: its connection is closed, a retry wait ends. */
  readonly signal?: AbortSignal;
}

/**
 * When an answer is asked again (client-go's rule: a 429 or a 5xx whose Retry-After is a number
 * of seconds; nothing else is retried), and how long nodevol waits for it.
 */
export interface KubeRetryPolicy {
  /** Retries of one request at most. */
  readonly maxRetries: number;
  /** The longest Retry-After honoured by waiting; a server asking for more is not asked again in this run. */
  readonly maxWaitMs: number;
  /** The shortest wait: a Retry-After of 0 never makes a tight loop. */
  readonly minWaitMs: number;
}

export const DEFAULT_RETRY_POLICY: KubeRetryPolicy = { maxRetries: 3, maxWaitMs: 10_000, minWaitMs: 1_000 };

/** The bound of one request unless told otherwise. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export interface KubeRestClientOptions {
  /**
   * The bound of one request (each attempt), from sending it to the last byte of the answer; past
   * it the request is destroyed with its connection. Default {@link DEFAULT_REQUEST_TIMEOUT_MS}.
   */
  readonly timeoutMs?: number;
  readonly retry?: Partial<KubeRetryPolicy>;
  /** Waits between attempts; must reject when `signal` aborts. Default: a timer. */
  readonly sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
  /**
   * Reuse the connection of a request that ended with its whole answer for the next request, until
   * {@link KubeRestClient.close}, which closes every connection left; default false (a connection
   * per request, closed with it). A request that fails, times out or is aborted closes its own
   * connection either way.
   */
  readonly keepAlive?: boolean;
}

/** A request abandoned at its bound (--request-timeout). */
export class KubeTimeoutError extends Error {
  override readonly name = 'KubeTimeoutError';
}

/**
 * The seconds of a Retry-After header in its delta-seconds form (RFC 9110), as client-go reads
 * it; an HTTP date, a negative, fractional or non-numeric value is no Retry-After.
 */
export function parseRetryAfterSeconds(value: string | readonly string[] | undefined): number | undefined {
  if (typeof value !== 'string') return undefined;
  const m = /^\s*(\d{1,10})\s*$/.exec(value);
  return m === null ? undefined : Number(m[1]);
}

/** A timer that ends early, rejecting with the abort reason, when `signal` aborts. */
export function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(abortReason(signal));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  const why = reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : 'aborted';
  return new Error(`abandoned: ${why}`);
}

interface HttpAnswer {
  readonly status: number;
  readonly body: string;
  readonly retryAfter: string | undefined;
}

/** GET-only client over one {@link KubeRestConfig}. */
export class KubeRestClient {
  readonly #base: URL;
  readonly #timeoutMs: number;
  readonly #retry: KubeRetryPolicy;
  readonly #sleep: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
  readonly #agent: http.Agent | undefined;

  constructor(
    readonly config: KubeRestConfig,
    options: KubeRestClientOptions = {},
  ) {
    this.#base = new URL(config.server);
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    if (!Number.isFinite(this.#timeoutMs) || this.#timeoutMs <= 0) throw new RangeError(`timeoutMs must be a positive number of milliseconds, got ${this.#timeoutMs}`);
    this.#retry = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.#sleep = options.sleep ?? abortableSleep;
    if (options.keepAlive === true) this.#agent = this.#base.protocol === 'https:' ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
  }

  /** Closes the connections kept for reuse (keepAlive); a request made after it opens a new one. */
  close(): void {
    this.#agent?.destroy();
  }

  /**
   * GETs `apiPath` (e.g. /api/v1/nodes/n) with `query`; the parsed JSON of a 2xx answer. A 429 or
   * 5xx with a Retry-After of at most `maxWaitMs` is asked again after that wait (at least
   * `minWaitMs`), `maxRetries` times at most; any other answer is a {@link KubeApiError} at once.
   */
  async get(apiPath: string, query: Readonly<Record<string, string | number | undefined>> = {}, options: KubeRequestOptions = {}): Promise<unknown> {
    const url = new URL(this.#base.href);
    url.pathname = `${url.pathname.replace(/\/+$/, '')}${apiPath}`;
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    for (let retries = 0; ; retries++) {
      const { status, body, retryAfter } = await this.#request(url, await this.#headers(), options.signal);
      if (status >= 200 && status <= 299) {
        try {
          return JSON.parse(body) as unknown;
        } catch {
          throw new Error(`${url.pathname}: the answer is not JSON (HTTP ${status}, ${body.length} bytes)`);
        }
      }
      const retryAfterSeconds = parseRetryAfterSeconds(retryAfter);
      const retriable = (status === 429 || (status >= 500 && status <= 599)) && retryAfterSeconds !== undefined;
      const waitMs = retryAfterSeconds === undefined ? 0 : Math.max(retryAfterSeconds * 1000, this.#retry.minWaitMs);
      if (!retriable || waitMs > this.#retry.maxWaitMs || retries >= this.#retry.maxRetries) {
        throw new KubeApiError(status, body, { retries, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}), maxWaitMs: this.#retry.maxWaitMs });
      }
      await this.#sleep(waitMs, options.signal);
    }
  }

  /** The request headers; the token file is read again for every request (the kubelet rotates it). */
  async #headers(): Promise<Record<string, string>> {
    const headers: Record<string, string> = { Accept: 'application/json', 'User-Agent': 'nodevol' };
    const c = this.config;
    let token = c.token;
    if (token === undefined && c.tokenFile !== undefined) token = (await readBounded(c.tokenFile)).toString('utf8').trim();
    if (token !== undefined && token !== '') headers['Authorization'] = `Bearer ${token}`;
    else if (c.basicAuth !== undefined) headers['Authorization'] = `Basic ${Buffer.from(`${c.basicAuth.username}:${c.basicAuth.password}`).toString('base64')}`;
    return headers;
  }

  /**
   * One request, bounded as a whole: connecting, the headers and every byte of the body within
   * `timeoutMs`. Node's own socket timeout only measures silence, so a server that trickles a
   * byte now and then would hold it for ever. At the bound, on `signal`, on an oversized answer
   * or on any error, the request is destroyed, and with it its socket (a pooled one too: it never
   * goes back to the pool) and the answer's stream: nothing of it outlives the rejection. Only a
   * socket whose answer ended whole goes back to the pool (keepAlive), until close().
   */
  #request(url: URL, headers: Record<string, string>, signal: AbortSignal | undefined): Promise<HttpAnswer> {
    const c = this.config;
    const options: https.RequestOptions = {
      method: 'GET',
      headers,
      agent: this.#agent ?? false,
      ...(url.protocol === 'https:'
        ? {
            rejectUnauthorized: !c.insecureSkipTLSVerify,
            ...(c.ca !== undefined ? { ca: c.ca } : {}),
            ...(c.cert !== undefined && c.key !== undefined ? { cert: c.cert, key: c.key } : {}),
            ...(c.tlsServerName !== undefined ? { servername: c.tlsServerName } : {}),
          }
        : {}),
    };
    if (signal?.aborted === true) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      let settled = false;
      let res: http.IncomingMessage | undefined;
      const settle = (err: Error | undefined, answer?: HttpAnswer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (err === undefined && answer !== undefined) {
          resolve(answer);
          return;
        }
        res?.destroy();
        req.destroy();
        reject(err ?? new Error(`${url.pathname}: no answer`));
      };
      const onAbort = (): void => settle(abortReason(signal));
      const timer = setTimeout(
        () => settle(new KubeTimeoutError(`no complete answer within ${this.#timeoutMs} ms: the request was abandoned and its connection closed`)),
        this.#timeoutMs,
      );
      const req = (url.protocol === 'https:' ? https : http).request(url, options, (answer) => {
        res = answer;
        const chunks: Buffer[] = [];
        let size = 0;
        answer.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            settle(new Error(`${url.pathname}: the answer is larger than ${MAX_RESPONSE_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        answer.on('end', () => {
          const retryAfter = answer.headers['retry-after'];
          settle(undefined, { status: answer.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), retryAfter });
        });
        answer.on('error', (err) => settle(err));
        answer.on('close', () => {
          if (!answer.complete) settle(new Error('the connection closed before the answer was complete'));
        });
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      req.on('error', (err) => settle(err));
      req.end();
    });
  }
}

const seg = (s: string): string => encodeURIComponent(s);

/**
 * core/v1's single-object reads the audit makes, named as client-node's CoreV1Api names them.
 * Lists are not here: they are read page by page, following `continue` (clusterApi.ts
 * listAllPages), never as one answer taken for the whole list.
 */
export function coreV1Api(
  client: KubeRestClient,
  options: KubeRequestOptions = {},
): {
  readNode(p: { name: string }): Promise<unknown>;
  readNamespacedPersistentVolumeClaim(p: { name: string; namespace: string }): Promise<unknown>;
} {
  return {
    readNode: ({ name }) => client.get(`/api/v1/nodes/${seg(name)}`, {}, options),
    readNamespacedPersistentVolumeClaim: ({ name, namespace }) => client.get(`/api/v1/namespaces/${seg(namespace)}/persistentvolumeclaims/${seg(name)}`, {}, options),
  };
}
