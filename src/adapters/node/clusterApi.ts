/**
 * The Kubernetes objects of one node's audit read from the API server (GETs through
 * ./kubeApi.ts): {@link withClusterApi} hands the caller a ClusterObjectReader (src/ports/cluster.ts)
 * whose every method is one request, or one list read page by page. Which reads to make is the
 * audit's (src/audit/clusterReads.ts): by name wherever it can, so that an audit's cost does not
 * grow with the cluster.
 *
 * Read-only and narrow, so that a ClusterRole with get/list is enough (deploy/base/rbac.yaml):
 * `get` nodes, persistentvolumeclaims, persistentvolumes, volumeattachments and csidrivers;
 * `list` pods with the field selector `spec.nodeName=<node>` (only this node's pods), and
 * persistentvolumes and volumeattachments (the whole lists, only when the audit needs them).
 *
 * Every list is read in pages of {@link DEFAULT_PAGE_LIMIT} and followed to its end through
 * `metadata.continue` ({@link listAllPages}): a page is never taken for the whole list.
 *
 * This module is loaded on first use (`await import`), so commands that do not talk to the API
 * server never load it. Any failure is one {@link ClusterApiError} line naming the
 * request and the server's answer; the caller exits 2 rather than give a verdict without it.
 * A 404 on a GET by name is an answer (the object does not exist), but for the node itself.
 *
 * No request outlives the read: each is bounded as a whole (`timeoutMs`, ./kubeApi.ts), the first
 * failure aborts the requests still running beside it, and the caller's AbortSignal aborts them
 * all; an aborted request's connection is closed. 401 and 403 say that the credentials or their
 * RBAC are wrong and are not asked again; a 429 or 5xx with Retry-After is retried within
 * bounds by the client, and a longer Retry-After is handed to the caller
 * ({@link ClusterApiError.retryAfterMs}) so that the next run waits for it.
 *
 * Every object is checked with the schemas of src/api/clusterObjects.ts (the same ones the
 * `--cluster-state` file goes through); reducing them to one node's view is the audit's job.
 */
import type { z } from 'zod';
import { parseObject, readListPage, schemas, type ListPage } from '../../api/clusterObjects.js';
import type { ClusterObjectReader } from '../../ports/cluster.js';
import {
  KubeApiError,
  KubeRestClient,
  loadInCluster,
  loadKubeconfig,
  type KubeRestClientOptions,
  type KubeRestConfig,
  type KubeRetryPolicy,
} from './kubeApi.js';

export class ClusterApiError extends Error {
  override readonly name = 'ClusterApiError';
  constructor(
    message: string,
    /** The Retry-After of the answer that failed the read, in ms, when it carried one. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

export interface ClusterApiOptions {
  /** A kubeconfig file; without it the in-cluster service account is used. */
  readonly kubeconfig?: string;
  /** The bound of each request, from sending it to the last byte of the answer; default 30 s. */
  readonly timeoutMs?: number;
  /** Objects per page of a list; default {@link DEFAULT_PAGE_LIMIT}. */
  readonly pageLimit?: number;
  /** Aborts every request still running (their connections closed) and the read rejects. */
  readonly signal?: AbortSignal;
  /** How 429 and 5xx answers with Retry-After are retried; default: the client's (./kubeApi.ts). */
  readonly retry?: Partial<KubeRetryPolicy>;
  /** The wait between attempts (tests record it); default a timer that the signal ends. */
  readonly sleep?: KubeRestClientOptions['sleep'];
}

export { SERVICE_ACCOUNT_DIR } from './kubeApi.js';

/** What an HTTP status says about the request, for the codes whose fix is not in the message. */
function statusHint(err: KubeApiError): string {
  switch (err.code) {
    case 401:
      return ' (the API server did not accept the credentials: check the kubeconfig\'s user or the service account token; not retried)';
    case 403:
      return ' (the credentials lack the RBAC permission for this request; the audit needs get on nodes, persistentvolumeclaims, persistentvolumes, volumeattachments and csidrivers, and list on pods, persistentvolumes and volumeattachments; not retried)';
    default:
      break;
  }
  if (err.retries > 0) return ` (asked ${err.retries + 1} times, waiting as Retry-After said)`;
  if (err.retryAfterSeconds !== undefined && err.maxWaitMs !== undefined && (err.code === 429 || err.code >= 500) && err.retryAfterSeconds * 1000 > err.maxWaitMs) {
    return ` (Retry-After ${err.retryAfterSeconds} s: longer than the ${err.maxWaitMs / 1000} s nodevol waits within one run; not retried)`;
  }
  return '';
}

/** One line for a failed request: the status code and the API server's Status message when there is one. */
function describe(what: string, err: unknown): ClusterApiError {
  if (err instanceof ClusterApiError) return err;
  if (err instanceof KubeApiError) {
    // Retry-After counts only where it asks to come back later: 429 and 5xx (as the client retries).
    const retryAfterMs = err.retryAfterSeconds !== undefined && (err.code === 429 || err.code >= 500) ? err.retryAfterSeconds * 1000 : undefined;
    return new ClusterApiError(`${what}: HTTP ${err.code}${statusMessage(err.body)}${statusHint(err)}`, retryAfterMs);
  }
  const msg = err instanceof Error ? err.message : String(err);
  return new ClusterApiError(`${what}: ${msg.split('\n')[0] ?? msg}`);
}

/** `: <the Status message>` of an error answer, or its first 200 characters; '' when empty. */
function statusMessage(body: string): string {
  let message = '';
  try {
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed === 'object' && parsed !== null && 'message' in parsed && typeof parsed.message === 'string') message = parsed.message;
  } catch {
    message = body.slice(0, 200);
  }
  message = message.replace(/\s+/g, ' ').trim();
  return message === '' ? '' : `: ${message}`;
}

/** Objects asked for per page, kubectl's default --chunk-size. */
export const DEFAULT_PAGE_LIMIT = 500;
/** Pages followed for one list at most: a server that never ends its list is an error, not a loop. */
export const MAX_LIST_PAGES = 10_000;

/** One page to ask for: the first (no continue token), or the one a token names. */
export interface PageRequest {
  readonly limit: number;
  readonly continue?: string;
}

/** The query of a page; the list read whole again (after an expired token) sends neither. */
function pageQuery(p: PageRequest): Record<string, string> {
  return { ...(p.limit > 0 ? { limit: String(p.limit) } : {}), ...(p.continue !== undefined ? { continue: p.continue } : {}) };
}

function isExpired(err: unknown): boolean {
  return err instanceof KubeApiError && err.code === 410;
}

export interface ListAllPagesOptions {
  /** Names the list in errors, e.g. `https://api:6443: list pods`. */
  readonly what: string;
  /** The list's kind (PodList, ...), for errors naming a field. */
  readonly kind: string;
  readonly limit: number;
  /** Fetches one page; it may reject (described here as one line), or answer anything (checked here). */
  readonly fetchPage: (p: PageRequest) => Promise<unknown>;
  readonly maxPages?: number;
}

/**
 * Every item of a list, following `metadata.continue` from page to page as client-go's pager
 * does: a page with a continue token is never taken for the whole list (the objects of the next
 * pages are not absent). When a token has expired (HTTP 410 Gone), the list is read again whole
 * in one request, once, as the pager does with FullListIfExpired. A page that is not a list
 * answer, a token seen twice, more than `maxPages` pages, or a last page that still counts
 * `remainingItemCount` objects, is one {@link ClusterApiError} line.
 */
export async function listAllPages(o: ListAllPagesOptions): Promise<readonly unknown[]> {
  const maxPages = o.maxPages ?? MAX_LIST_PAGES;
  const items: unknown[] = [];
  const seen = new Set<string>();
  let request: PageRequest = { limit: o.limit };
  let fullListDone = false;
  for (let page = 1; ; page++) {
    if (page > maxPages) throw new ClusterApiError(`${o.what}: more than ${maxPages} pages: not read whole`);
    let answer: unknown;
    try {
      answer = await o.fetchPage(request);
    } catch (err) {
      if (request.continue !== undefined && isExpired(err) && !fullListDone) {
        // The continue token expired: start again, the whole list in one answer.
        fullListDone = true;
        items.length = 0;
        seen.clear();
        request = { limit: 0 };
        page = 0;
        continue;
      }
      throw describe(page === 1 ? o.what : `${o.what} (page ${page})`, err);
    }
    let meta: ListPage;
    try {
      meta = readListPage(answer, `${o.what}: ${o.kind}${page === 1 ? '' : ` page ${page}`}`);
    } catch (err) {
      throw new ClusterApiError(err instanceof Error ? err.message : String(err));
    }
    items.push(...meta.items);
    if (meta.continueToken === '') {
      if ((meta.remainingItemCount ?? 0) > 0) {
        throw new ClusterApiError(`${o.what}: ${o.kind} page ${page}.metadata.remainingItemCount: ${meta.remainingItemCount ?? 0} objects remain but metadata.continue is empty: not the whole list`);
      }
      return items;
    }
    if (seen.has(meta.continueToken)) throw new ClusterApiError(`${o.what}: ${o.kind} page ${page}.metadata.continue: the same token again: the list does not end`);
    seen.add(meta.continueToken);
    request = { limit: request.limit, continue: meta.continueToken };
  }
}

/**
 * Runs `use` with a {@link ClusterObjectReader} over the API server that `o` configures, and
 * returns what it returns. Each read is one request (a list: its pages), checked with the schemas
 * of src/api/clusterObjects.ts; which reads to make is the caller's (src/audit/clusterReads.ts).
 * A failed request rejects with a {@link ClusterApiError} (a ClusterStateError for an object that
 * does not match its schema) and aborts the requests still running beside it; when `use` settles,
 * or the caller's signal fires, every request still running is abandoned with its connection.
 */
export async function withClusterApi<T>(o: ClusterApiOptions, use: (reader: ClusterObjectReader) => Promise<T>): Promise<T> {
  let config: KubeRestConfig;
  try {
    config = o.kubeconfig !== undefined ? await loadKubeconfig(o.kubeconfig) : await loadInCluster();
  } catch (err) {
    throw describe(o.kubeconfig !== undefined ? `--kubeconfig ${o.kubeconfig}` : 'in-cluster config', err);
  }
  const client = new KubeRestClient(config, {
    ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
    ...(o.retry !== undefined ? { retry: o.retry } : {}),
    ...(o.sleep !== undefined ? { sleep: o.sleep } : {}),
    // The reads of one audit share their connections (a TLS handshake each saved); close() below
    // closes them all when the read is over.
    keepAlive: true,
  });
  // One controller for every request of this read: the caller's signal, or the first failure,
  // aborts them all, and nothing is left running when the read returns or throws.
  const reads = new AbortController();
  const onCallerAbort = (): void => reads.abort(o.signal?.reason);
  if (o.signal?.aborted === true) reads.abort(o.signal.reason);
  o.signal?.addEventListener('abort', onCallerAbort, { once: true });
  try {
    return await use(apiReader(config.server, client, reads, o.pageLimit ?? DEFAULT_PAGE_LIMIT));
  } finally {
    o.signal?.removeEventListener('abort', onCallerAbort);
    reads.abort(new Error('the read of the cluster\'s view is over'));
    client.close();
  }
}

const CORE = '/api/v1';
const STORAGE = '/apis/storage.k8s.io/v1';

function apiReader(server: string, client: KubeRestClient, reads: AbortController, pageLimit: number): ClusterObjectReader {
  const signal = reads.signal;
  /** The first request to fail aborts the others. */
  const failed = (err: unknown): never => {
    reads.abort(err);
    throw err;
  };
  /** GET one object: its checked value, or undefined on 404 when `optional` (an answer: it does not exist). */
  async function getOne<T>(what: string, apiPath: string, schema: z.ZodType<T>, optional: true): Promise<T | undefined>;
  async function getOne<T>(what: string, apiPath: string, schema: z.ZodType<T>, optional: false): Promise<T>;
  async function getOne<T>(what: string, apiPath: string, schema: z.ZodType<T>, optional: boolean): Promise<T | undefined> {
    let answer: unknown;
    try {
      answer = await client.get(apiPath, {}, { signal });
    } catch (err) {
      if (optional && err instanceof KubeApiError && err.code === 404) return undefined;
      return failed(describe(`${server}: get ${what}`, err));
    }
    try {
      return parseObject(schema, answer, `${server}: ${what}`);
    } catch (err) {
      return failed(err);
    }
  }
  /** Every item of a list, page by page ({@link listAllPages}), each checked. */
  const list = async <T>(what: string, kind: string, itemsWhere: string, apiPath: string, schema: z.ZodType<T>, query: Readonly<Record<string, string>> = {}): Promise<T[]> => {
    try {
      const items = await listAllPages({
        what: `${server}: ${what}`,
        kind,
        limit: pageLimit,
        fetchPage: (p) => client.get(apiPath, { ...query, ...pageQuery(p) }, { signal }),
      });
      return items.map((item, i) => parseObject(schema, item, `${server}: ${itemsWhere}[${i}]`));
    } catch (err) {
      return failed(err);
    }
  };
  return {
    source: server,
    getNode: (name) => getOne(`node ${name}`, `${CORE}/nodes/${seg(name)}`, schemas.node, false),
    listPodsOnNode: (nodeName) =>
      list(`list pods (fieldSelector spec.nodeName=${nodeName})`, 'PodList', 'pods.items', `${CORE}/pods`, schemas.pod, { fieldSelector: `spec.nodeName=${nodeName}` }),
    getPersistentVolumeClaim: (namespace, name) =>
      getOne(`persistentvolumeclaim ${namespace}/${name}`, `${CORE}/namespaces/${seg(namespace)}/persistentvolumeclaims/${seg(name)}`, schemas.claim, true),
    getPersistentVolume: (name) => getOne(`persistentvolume ${name}`, `${CORE}/persistentvolumes/${seg(name)}`, schemas.persistentVolume, true),
    getVolumeAttachment: (name) => getOne(`volumeattachment ${name}`, `${STORAGE}/volumeattachments/${seg(name)}`, schemas.volumeAttachment, true),
    getCSIDriver: (name) => getOne(`csidriver ${name}`, `${STORAGE}/csidrivers/${seg(name)}`, schemas.csiDriver, true),
    listPersistentVolumes: () => list('list persistentvolumes', 'PersistentVolumeList', 'persistentvolumes.items', `${CORE}/persistentvolumes`, schemas.persistentVolume),
    listVolumeAttachments: () => list('list volumeattachments', 'VolumeAttachmentList', 'volumeattachments.items', `${STORAGE}/volumeattachments`, schemas.volumeAttachment),
  };
}

const seg = (s: string): string => encodeURIComponent(s);
