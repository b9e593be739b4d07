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
 * This module is loaded on first use (`await import`), so commands that do not talk to the API
 * server never load it. Any failure is one {@link ClusterApiError} line naming the
 * request and the server's answer; the caller exits 2 rather than give a verdict without it.
 *
 * Every object is checked with the schemas of src/api/clusterObjects.ts (the same ones the
 * `--cluster-state` file goes through); reducing them to one node's view is the audit's job.
 */
import { parseObject, schemas, type ClusterObjects, type PersistentVolumeClaimObject } from '../../api/clusterObjects.js';
import { coreV1Api, KubeRestClient, loadInCluster, loadKubeconfig, storageV1Api, type KubeRestConfig } from './kubeApi.js';

export class ClusterApiError extends Error {
  override readonly name = 'ClusterApiError';
}

export interface ClusterApiOptions {
  /** A kubeconfig file; without it the in-cluster service account is used. */
  readonly kubeconfig?: string;
  readonly nodeName: string;
  /** Per-request timeout; default 30 s. */
  readonly timeoutMs?: number;
}

export { SERVICE_ACCOUNT_DIR } from './kubeApi.js';

/** Bounds each request: a hung API server is an error, not a hang. */
function withTimeout<T>(what: string, p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ClusterApiError(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** One line for a failed request: the status code and the API server's Status message when there is one. */
function describe(what: string, err: unknown): ClusterApiError {
  if (err instanceof ClusterApiError) return err;
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number') {
    const body = 'body' in err ? err.body : undefined;
    let message = '';
    if (typeof body === 'string') {
      try {
        const parsed: unknown = JSON.parse(body);
        if (typeof parsed === 'object' && parsed !== null && 'message' in parsed && typeof parsed.message === 'string') message = parsed.message;
      } catch {
        message = body.slice(0, 200);
      }
    }
    return new ClusterApiError(`${what}: HTTP ${err.code}${message === '' ? '' : `: ${message}`}`);
  }
  const msg = err instanceof Error ? err.message : String(err);
  return new ClusterApiError(`${what}: ${msg.split('\n')[0] ?? msg}`);
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
  const ms = o.timeoutMs ?? 30_000;
  const client = new KubeRestClient(config, ms);
  const core = coreV1Api(client);
  const storage = storageV1Api(client);
  const call = async <T>(what: string, f: () => Promise<T>): Promise<T> => {
    try {
      return await withTimeout(what, f(), ms);
    } catch (err) {
      throw describe(`${server}: ${what}`, err);
    }
  };

  const node = await call(`get node ${o.nodeName}`, () => core.readNode({ name: o.nodeName }));
  const [pods, pvs, vas, drivers] = await Promise.all([
    call(`list pods (fieldSelector spec.nodeName=${o.nodeName})`, () => core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${o.nodeName}` })),
    call('list persistentvolumes', () => core.listPersistentVolume({})),
    call('list volumeattachments', () => storage.listVolumeAttachment({})),
    call('list csidrivers', () => storage.listCSIDriver({})),
  ]);
  const where = (what: string, i?: number): string => `${server}: ${what}${i === undefined ? '' : `[${i}]`}`;
  const podObjects = pods.items.map((p, i) => parseObject(schemas.pod, p, where('pods.items', i)));
  const claimKeys = new Set<string>();
  for (const p of podObjects) {
    for (const v of p.spec.volumes ?? []) {
      if (v.persistentVolumeClaim?.claimName !== undefined) claimKeys.add(`${p.metadata.namespace}/${v.persistentVolumeClaim.claimName}`);
    }
  }
  const claims: PersistentVolumeClaimObject[] = [];
  for (const key of [...claimKeys].sort()) {
    const [namespace = '', name = ''] = key.split('/');
    try {
      const c = await withTimeout(`get pvc ${key}`, core.readNamespacedPersistentVolumeClaim({ name, namespace }), ms);
      claims.push(parseObject(schemas.claim, c, where(`persistentvolumeclaim ${key}`)));
    } catch (err) {
      // A deleted claim is an answer (the pod cannot mount it); anything else is not.
      if (typeof err === 'object' && err !== null && 'code' in err && err.code === 404) continue;
      throw describe(`${server}: get persistentvolumeclaim ${key}`, err);
    }
  }
  const objects: ClusterObjects = {
    nodes: [parseObject(schemas.node, node, where(`node ${o.nodeName}`))],
    pods: podObjects,
    persistentVolumes: pvs.items.map((pv, i) => parseObject(schemas.persistentVolume, pv, where('persistentvolumes.items', i))),
    claims,
    volumeAttachments: vas.items.map((va, i) => parseObject(schemas.volumeAttachment, va, where('volumeattachments.items', i))),
    csiDrivers: drivers.items.map((d, i) => parseObject(schemas.csiDriver, d, where('csidrivers.items', i))),
  };
  return { server, objects };
}
