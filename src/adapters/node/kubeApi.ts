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
 * at {@link MAX_RESPONSE_BYTES}. A non-2xx answer is a {@link KubeApiError} with the status
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

/** An answer other than 2xx: `code` is the HTTP status, `body` the text (a Status object). */
export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  constructor(
    readonly code: number,
    readonly body: string,
  ) {
    super(`HTTP ${code}`);
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

/** GET-only client over one {@link KubeRestConfig}. */
export class KubeRestClient {
  readonly #base: URL;

  constructor(
    readonly config: KubeRestConfig,
    private readonly timeoutMs = 30_000,
  ) {
    this.#base = new URL(config.server);
  }

  /** GETs `apiPath` (e.g. /api/v1/nodes/n) with `query`; the parsed JSON of a 2xx answer. */
  async get(apiPath: string, query: Readonly<Record<string, string | number | undefined>> = {}): Promise<unknown> {
    const url = new URL(this.#base.href);
    url.pathname = `${url.pathname.replace(/\/+$/, '')}${apiPath}`;
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { Accept: 'application/json', 'User-Agent': 'nodevol' };
    const c = this.config;
    let token = c.token;
    if (token === undefined && c.tokenFile !== undefined) token = (await readBounded(c.tokenFile)).toString('utf8').trim();
    if (token !== undefined && token !== '') headers['Authorization'] = `Bearer ${token}`;
    else if (c.basicAuth !== undefined) headers['Authorization'] = `Basic ${Buffer.from(`${c.basicAuth.username}:${c.basicAuth.password}`).toString('base64')}`;
    const { status, body } = await this.#request(url, headers);
    if (status < 200 || status > 299) throw new KubeApiError(status, body);
    try {
      return JSON.parse(body) as unknown;
    } catch {
      throw new Error(`${url.pathname}: the answer is not JSON (HTTP ${status}, ${body.length} bytes)`);
    }
  }

  #request(url: URL, headers: Record<string, string>): Promise<{ status: number; body: string }> {
    const c = this.config;
    const options: https.RequestOptions = {
      method: 'GET',
      headers,
      agent: false,
      ...(url.protocol === 'https:'
        ? {
            rejectUnauthorized: !c.insecureSkipTLSVerify,
            ...(c.ca !== undefined ? { ca: c.ca } : {}),
            ...(c.cert !== undefined && c.key !== undefined ? { cert: c.cert, key: c.key } : {}),
            ...(c.tlsServerName !== undefined ? { servername: c.tlsServerName } : {}),
          }
        : {}),
    };
    return new Promise((resolve, reject) => {
      const req = (url.protocol === 'https:' ? https : http).request(url, options, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            req.destroy(new Error(`${url.pathname}: the answer is larger than ${MAX_RESPONSE_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.setTimeout(this.timeoutMs, () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', reject);
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
export function coreV1Api(client: KubeRestClient): {
  readNode(p: { name: string }): Promise<unknown>;
  readNamespacedPersistentVolumeClaim(p: { name: string; namespace: string }): Promise<unknown>;
} {
  return {
    readNode: ({ name }) => client.get(`/api/v1/nodes/${seg(name)}`),
    readNamespacedPersistentVolumeClaim: ({ name, namespace }) => client.get(`/api/v1/namespaces/${seg(namespace)}/persistentvolumeclaims/${seg(name)}`),
  };
}
