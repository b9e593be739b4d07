/**
 * The cluster's view of one node read from the API server (GETs through ./kubeApi.ts).
 *
 * Read-only and narrow, so that a ClusterRole with get/list is enough (deploy/rbac):
 * - `get nodes/<node>` (volumesInUse, volumesAttached);
 * - `list pods` with the field selector `spec.nodeName=<node>` (only this node's pods);
 * - `get persistentvolumeclaims` for each claim those pods name;
 * - `list persistentvolumes`, `list volumeattachments`, `list csidrivers` (cluster-scoped; a
 *   VolumeAttachment to another node is exactly what `attached-elsewhere` looks for).
 *
 * Every list is read in pages of {@link DEFAULT_PAGE_LIMIT} and followed to its end through
 * `metadata.continue` ({@link listAllPages}): a page is never taken for the whole list.
 *
 * This module is loaded on first use (`await import`), so commands that do not talk to the API
 * server never load it. Any failure is one {@link ClusterApiError} line naming the
 * request and the server's answer; the caller exits 2 rather than give a verdict without it.
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
import { parseObject, readListPage, schemas, type ClusterObjects, type ListPage, type PersistentVolumeClaimObject } from '../../api/clusterObjects.js';
import {
  coreV1Api,
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
  readonly nodeName: string;
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
      return ' (the credentials lack the RBAC permission for this request; the audit needs get on nodes and persistentvolumeclaims, list on pods, persistentvolumes, volumeattachments and csidrivers; not retried)';
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

/** What the API server answered: the checked objects, and the server's URL (for messages). */
export interface ClusterApiObjects {
  readonly server: string;
  readonly objects: ClusterObjects;
}

/**
 * Reads the objects this node's view needs from the API server. Rejects with a
 * {@link ClusterApiError}, or a ClusterStateError for an object that does not match its schema.
 */
export async function readClusterObjectsFromApi(o: ClusterApiOptions): Promise<ClusterApiObjects> {
  let config: KubeRestConfig;
  try {
    config = o.kubeconfig !== undefined ? await loadKubeconfig(o.kubeconfig) : await loadInCluster();
  } catch (err) {
    throw describe(o.kubeconfig !== undefined ? `--kubeconfig ${o.kubeconfig}` : 'in-cluster config', err);
  }
  const server = config.server;
  const client = new KubeRestClient(config, {
    ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
    ...(o.retry !== undefined ? { retry: o.retry } : {}),
    ...(o.sleep !== undefined ? { sleep: o.sleep } : {}),
  });
  // One controller for every request of this read: the caller's signal, or the first failure,
  // aborts them all, and nothing is left running when the read returns or throws.
  const reads = new AbortController();
  const onCallerAbort = (): void => reads.abort(o.signal?.reason);
  if (o.signal?.aborted === true) reads.abort(o.signal.reason);
  o.signal?.addEventListener('abort', onCallerAbort, { once: true });
  try {
    return await readObjects(o, server, client, reads);
  } finally {
    o.signal?.removeEventListener('abort', onCallerAbort);
    reads.abort(new Error('the read of the cluster\'s view is over'));
  }
}

async function readObjects(o: ClusterApiOptions, server: string, client: KubeRestClient, reads: AbortController): Promise<ClusterApiObjects> {
  const signal = reads.signal;
  const core = coreV1Api(client, { signal });
  const call = async <T>(what: string, f: () => Promise<T>): Promise<T> => {
    try {
      return await f();
    } catch (err) {
      throw describe(`${server}: ${what}`, err);
    }
  };
  // Lists are read as the server sent them (client.get: raw JSON) and checked page by page; the
  // first list to fail aborts the others.
  const list = (what: string, kind: string, apiPath: string, query: Readonly<Record<string, string>> = {}): Promise<readonly unknown[]> =>
    listAllPages({
      what: `${server}: ${what}`,
      kind,
      limit: o.pageLimit ?? DEFAULT_PAGE_LIMIT,
      fetchPage: (p) => client.get(apiPath, { ...query, ...pageQuery(p) }, { signal }),
    }).catch((err: unknown) => {
      reads.abort(err);
      throw err;
    });

  const node = await call(`get node ${o.nodeName}`, () => core.readNode({ name: o.nodeName }));
  const [pods, pvs, vas, drivers] = await Promise.all([
    list(`list pods (fieldSelector spec.nodeName=${o.nodeName})`, 'PodList', '/api/v1/pods', { fieldSelector: `spec.nodeName=${o.nodeName}` }),
    list('list persistentvolumes', 'PersistentVolumeList', '/api/v1/persistentvolumes'),
    list('list volumeattachments', 'VolumeAttachmentList', '/apis/storage.k8s.io/v1/volumeattachments'),
    list('list csidrivers', 'CSIDriverList', '/apis/storage.k8s.io/v1/csidrivers'),
  ]);
  const where = (what: string, i?: number): string => `${server}: ${what}${i === undefined ? '' : `[${i}]`}`;
  const podObjects = pods.map((p, i) => parseObject(schemas.pod, p, where('pods.items', i)));
  const claimKeys = new Set<string>();
  for (const p of podObjects) {
    for (const v of p.spec.volumes ?? []) {
      if (v.persistentVolumeClaim?.claimName !== undefined) claimKeys.add(`${p.metadata.namespace}/${v.persistentVolumeClaim.claimName}`);
    }
  }
  const claims: PersistentVolumeClaimObject[] = [];
  for (const key of [...claimKeys].sort()) {
    const [namespace = '', name = ''] = key.split('/');
    let c: unknown;
    try {
      c = await core.readNamespacedPersistentVolumeClaim({ name, namespace });
    } catch (err) {
      // A deleted claim is an answer (the pod cannot mount it); anything else is not.
      if (err instanceof KubeApiError && err.code === 404) continue;
      throw describe(`${server}: get persistentvolumeclaim ${key}`, err);
    }
    claims.push(parseObject(schemas.claim, c, where(`persistentvolumeclaim ${key}`)));
  }
  const objects: ClusterObjects = {
    nodes: [parseObject(schemas.node, node, where(`node ${o.nodeName}`))],
    pods: podObjects,
    persistentVolumes: pvs.map((pv, i) => parseObject(schemas.persistentVolume, pv, where('persistentvolumes.items', i))),
    claims,
    volumeAttachments: vas.map((va, i) => parseObject(schemas.volumeAttachment, va, where('volumeattachments.items', i))),
    csiDrivers: drivers.map((d, i) => parseObject(schemas.csiDriver, d, where('csidrivers.items', i))),
  };
  return { server, objects };
}
