/**
 * Where `nodevol audit` and `nodevol recover` get the cluster's view from:
 * `--cluster-state FILE` (kubectl's List JSON), `--kubeconfig FILE`, or, with neither, the
 * in-cluster service account when one is mounted. `--node-name` defaults to $NODE_NAME, then
 * the host name. The API client is loaded only on this path (a dynamic import). From the API
 * server the audit reads only what its node's findings need (src/audit/clusterReads.ts), which
 * depends on the volumes staged on the node: the caller hands them in.
 */
import { existsSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Command, Option } from 'commander';
// The cluster state module (and zod, its schema library) is loaded only when a source is configured.
import type { ClusterState } from '../audit/clusterState.js';
import type { StagedVolume } from '../audit/clusterReads.js';
import { NodeFileSystem } from '../adapters/node/nodeFs.js';
import { errorMessage } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import { parseDuration } from './duration.js';

export interface ClusterFlags {
  readonly clusterState?: string;
  readonly kubeconfig?: string;
  readonly nodeName?: string;
  /** kubectl's --request-timeout: the bound of each API request (Go duration). */
  readonly requestTimeout?: string;
}

/** The bound of each API request unless --request-timeout says otherwise. */
export const DEFAULT_REQUEST_TIMEOUT = '30s';

export function addClusterOptions(cmd: Command): Command {
  return cmd
    .option('--cluster-state <file>', 'the cluster\'s view: the JSON of `kubectl get nodes,pods,pv,pvc,volumeattachments,csidrivers -A -o json`')
    .option('--kubeconfig <file>', 'read the cluster\'s view from the API server with this kubeconfig (default: in-cluster when a service account is mounted)')
    .addOption(new Option('--node-name <name>', 'this node\'s name in the cluster (default: $NODE_NAME, then the host name)'))
    .option(
      '--request-timeout <duration>',
      'API server: how long one request may take, from sending it to the last byte of the answer; then it is abandoned and its connection closed (e.g. 10s, 500ms)',
      DEFAULT_REQUEST_TIMEOUT,
    );
}

/** --request-timeout in ms: a positive Go duration (kubectl's 0, no timeout, is refused: every request is bounded). */
export function requestTimeoutMs(flags: ClusterFlags): number {
  const value = flags.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT;
  let ms: number;
  try {
    // kubectl's bare 0 (no timeout) is a duration here too, refused below.
    ms = value.trim() === '0' ? 0 : parseDuration(value);
  } catch (err) {
    throw new ClusterSourceError(`--request-timeout: ${errorMessage(err)}`);
  }
  if (ms <= 0) throw new ClusterSourceError(`--request-timeout ${value}: must be more than 0: every API request is bounded`);
  return ms;
}

/** The service account token the in-cluster config reads (src/adapters/node/kubeApi.ts). */
const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

export function inCluster(): boolean {
  return (process.env['KUBERNETES_SERVICE_HOST'] ?? '') !== '' && existsSync(SERVICE_ACCOUNT_TOKEN);
}

export function resolveNodeName(flags: ClusterFlags): string {
  return flags.nodeName ?? (process.env['NODE_NAME'] !== undefined && process.env['NODE_NAME'] !== '' ? process.env['NODE_NAME'] : os.hostname());
}

export type ClusterSourceKind = 'file' | 'kubeconfig' | 'in-cluster' | 'none';

export function clusterSourceKind(flags: ClusterFlags): ClusterSourceKind {
  if (flags.clusterState !== undefined) return 'file';
  if (flags.kubeconfig !== undefined) return 'kubeconfig';
  return inCluster() ? 'in-cluster' : 'none';
}

/** A failure to read the cluster's view: the command prints it as one line and exits 2. */
export class ClusterSourceError extends Error {
  override readonly name = 'ClusterSourceError';
  constructor(
    message: string,
    /** The API server's Retry-After (ms) on the answer that failed the read, when it gave one. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** What one read of the cluster's view may be given besides the flags. */
export interface ClusterReadOptions {
  /** Aborts the API requests still running; their connections are closed. */
  readonly signal?: AbortSignal;
  /** The volumes staged on this node (the audit's report): which API reads the findings need. */
  readonly staged?: readonly StagedVolume[];
  /** Read every PersistentVolume from the API server (recover: a volume two PVs name is refused). */
  readonly everyPersistentVolume?: boolean;
  /** Told, at -v 2, which reads were made and why the cluster-wide lists were (when they were). */
  readonly logger?: Logger;
}

/**
 * The cluster's view for this node, or undefined when no source is configured. Throws a
 * {@link ClusterSourceError} (one line) for anything else.
 */
export async function loadClusterState(flags: ClusterFlags, options: ClusterReadOptions = {}): Promise<ClusterState | undefined> {
  const kind = clusterSourceKind(flags);
  if (flags.clusterState !== undefined && flags.kubeconfig !== undefined) {
    throw new ClusterSourceError('--cluster-state and --kubeconfig are exclusive: give one source of the cluster\'s view');
  }
  const nodeName = resolveNodeName(flags);
  const timeoutMs = requestTimeoutMs(flags);
  switch (kind) {
    case 'none':
      return undefined;
    case 'file': {
      const [{ MAX_CLUSTER_STATE_BYTES, parseClusterList }, { clusterStateFor }] = await Promise.all([import('../api/clusterObjects.js'), import('../audit/clusterState.js')]);
      const file = path.resolve(flags.clusterState ?? '');
      let text: string;
      try {
        const bytes = await new NodeFileSystem().readFile(file, MAX_CLUSTER_STATE_BYTES);
        text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
      } catch (err) {
        throw new ClusterSourceError(`--cluster-state ${file}: ${errorMessage(err)}`);
      }
      try {
        return clusterStateFor(parseClusterList(text, file), nodeName, file);
      } catch (err) {
        throw new ClusterSourceError(`--cluster-state ${errorMessage(err)}`);
      }
    }
    case 'kubeconfig':
    case 'in-cluster': {
      const [{ withClusterApi }, { clusterStateFor }, { readClusterObjects }] = await Promise.all([
        import('../adapters/node/clusterApi.js'),
        import('../audit/clusterState.js'),
        import('../audit/clusterReads.js'),
      ]);
      try {
        const api = {
          timeoutMs,
          ...(flags.kubeconfig !== undefined ? { kubeconfig: path.resolve(flags.kubeconfig) } : {}),
          ...(options.signal !== undefined ? { signal: options.signal } : {}),
        };
        return await withClusterApi(api, async (reader) => {
          const read = await readClusterObjects(reader, { nodeName, staged: options.staged ?? [], everyPersistentVolume: options.everyPersistentVolume === true });
          options.logger?.v(2).info('Read the cluster\'s view', {
            server: reader.source,
            reads: read.reads,
            ...(read.listedBecause !== undefined ? { listedEveryVolumeAttachmentBecause: read.listedBecause } : {}),
          });
          return clusterStateFor(read.objects, nodeName, reader.source);
        });
      } catch (err) {
        const retryAfterMs = typeof err === 'object' && err !== null && 'retryAfterMs' in err && typeof err.retryAfterMs === 'number' ? err.retryAfterMs : undefined;
        throw new ClusterSourceError(`cluster API: ${errorMessage(err)}`, retryAfterMs);
      }
    }
  }
}
