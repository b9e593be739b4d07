/**
 * The disk of a test node: a temporary directory of the host, so it survives
 * {@link NodeNamespace.reboot} (only mounts and processes die). Layout:
 *
 *   <base>/root/                 kubelet root dir (`nodevol agent --root-dir`), with pods/ and plugins/
 *   <base>/cluster/manifests/    Pod, PVC, PV, CSIDriver YAML (`--cluster-dir`, see clusterDir.ts)
 *   <base>/cluster/node-status.json
 *   <base>/driver-state/         the mock driver's state directory
 *   <base>/journal.jsonl         the mock driver's journal of CSI calls (one JSON object a line)
 *   <base>/faults.yaml           the mock driver's fault file
 *   <base>/logs/<name>.log       process logs (NodeNamespace.start({ logDir: disk.logDir }))
 *
 * Every file the agent or the driver reads is replaced atomically (writeFileAtomic: temp file
 * `<name>.tmp` + rename in the same directory; the manifests listing reads only *.yaml/*.yml).
 *
 * Not named *.test.ts, so the test runner (npm test lists *.test.js) does not take it for a test.
 */
import { getAttachmentName } from '../../../src/layout/names.js';
import { mkdir, mkdtemp, readFile, realpath, rm, unlink } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

import { stringify } from 'yaml';

import { derivedPodUID, MANIFESTS_DIR_NAME, NODE_STATUS_FILE_NAME } from '../../../src/adapters/node/clusterDir.js';
import { NodeFileSystem } from '../../../src/adapters/node/nodeFs.js';
import { writeFileAtomic } from '../../../src/ports/fs.js';
import { KubeletLayout } from '../../../src/layout/layout.js';
import { CSI_PLUGIN_NAME, csiVolumeName, getUniqueVolumeName, getUniqueVolumeNameWithPod } from '../../../src/layout/names.js';
import { escapeMountPath, parseMountInfo } from '../../../src/mount/mountInfo.js';
import { nodevolArgv } from './paths.js';
import { DEFAULT_WAIT_TIMEOUT_MS, waitFor } from './waitFor.js';

export interface NodeDiskOptions {
  /** Default 'node-1'. */
  readonly nodeName?: string;
  /** Temp directory name prefix; default 'nodevol-e2e-'. */
  readonly prefix?: string;
}

/**
 * One line of the mock driver's journal (`nodevol mock-driver --journal`, see docs/reference/mock-driver.md): a
 * completed call has `error` (null, or {code, name, message}) and no `phase`; a call a delay or
 * hang fault holds gets a line `phase: "held"` when it ARRIVES (so a test can see it in flight);
 * an exit fault writes `phase: "exit"` just before the driver exits. Only the fields read here
 * are typed; the rest is the driver's.
 */
export interface JournalEntry {
  readonly time?: string;
  readonly seq?: number;
  readonly method?: string;
  /** "" for calls about no volume. */
  readonly volumeId?: string;
  readonly phase?: 'held' | 'exit' | 'timedOut';
  readonly fault?: 'delay' | 'hang' | 'exit';
  readonly request?: unknown;
  readonly response?: unknown;
  readonly error?: { readonly code: number; readonly name: string; readonly message: string } | null;
  readonly durationMs?: number;
  readonly [key: string]: unknown;
}

export interface MockDriverArgvOptions {
  /** Default 'mock.csi.nodevol.io'. */
  readonly driverName?: string;
  /** Default unix://<root>/plugins/<driver>/csi.sock, where the agent finds it without --csi-endpoint. */
  readonly endpoint?: string;
  /** Default the disk's node name. */
  readonly nodeId?: string;
  readonly v?: number;
  readonly loggingFormat?: 'text' | 'json';
  readonly extra?: readonly string[];
}

export interface NodeStatusFile {
  readonly volumesAttached: readonly { readonly name: string; readonly devicePath: string }[];
  readonly volumesInUse: readonly string[];
}

export interface CsiDriverOptions {
  readonly name: string;
  /** Default true (as the API server defaults it). */
  readonly attachRequired?: boolean;
  /** Default false (as the API server defaults it). */
  readonly podInfoOnMount?: boolean;
  /** Default: not written (the API server's default, [Persistent]). */
  readonly volumeLifecycleModes?: readonly ('Persistent' | 'Ephemeral')[];
}

export interface PersistentVolumeOptions {
  /** PV name. */
  readonly name: string;
  readonly driver: string;
  readonly volumeHandle: string;
  /** The bound PVC's name; default the PV name. */
  readonly claimName?: string;
  /** The PVC's namespace; default 'default'. */
  readonly namespace?: string;
  readonly volumeMode?: 'Filesystem' | 'Block';
  readonly fsType?: string;
  readonly readOnly?: boolean;
  readonly volumeAttributes?: Readonly<Record<string, string>>;
  /** Default ['ReadWriteOnce']. */
  readonly accessModes?: readonly string[];
  readonly mountOptions?: readonly string[];
  readonly nodeStageSecretRef?: { readonly name: string; readonly namespace: string };
  readonly nodePublishSecretRef?: { readonly name: string; readonly namespace: string };
}

export interface WrittenPersistentVolume {
  readonly file: string;
  readonly pvName: string;
  readonly claimName: string;
  readonly namespace: string;
  /** kubelet's name for it: kubernetes.io/csi/<driver>^<handle> (what volumesInUse lists). */
  readonly uniqueVolumeName: string;
}

export type PodVolumeOptions =
  | { readonly name: string; readonly claimName: string; readonly readOnly?: boolean }
  | {
      readonly name: string;
      /** An inline (ephemeral) CSI volume. */
      readonly csi: { readonly driver: string; readonly readOnly?: boolean; readonly fsType?: string; readonly volumeAttributes?: Readonly<Record<string, string>> };
    };

export interface PodOptions {
  readonly name: string;
  /** Default 'default'. */
  readonly namespace?: string;
  /** Default: the UID nodevol derives from namespace/name (stable across re-creation). */
  readonly uid?: string;
  /** Default the disk's node name; another name puts the pod on another node. */
  readonly nodeName?: string;
  readonly volumes: readonly PodVolumeOptions[];
  /** Volumes used as raw block devices (containers[0].volumeDevices). */
  readonly blockVolumes?: readonly string[];
  readonly fsGroup?: number;
  /** spec.serviceAccountName; the cluster dir reads "default" without one. */
  readonly serviceAccountName?: string;
}

export interface WrittenPod {
  readonly file: string;
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
}

export interface AgentArgvOptions {
  /** e.g. ['CSIGlobalMountReconstruction=true'] or { CSIGlobalMountReconstruction: true }. */
  readonly featureGates?: readonly string[] | Readonly<Record<string, boolean>>;
  /** driver -> unix:///abs/csi.sock; default: the conventional <root>/plugins/<driver>/csi.sock. */
  readonly csiEndpoints?: Readonly<Record<string, string>>;
  /** Default '127.0.0.1:0' (a free port: namespaces share the host's network). */
  readonly metricsBindAddress?: string;
  readonly nodeStatusUpdateFrequency?: string;
  readonly shutdownGracePeriod?: string;
  readonly v?: number;
  readonly loggingFormat?: 'text' | 'json';
  readonly extra?: readonly string[];
}

export class NodeDisk {
  readonly layout: KubeletLayout;
  readonly #fs = new NodeFileSystem();

  private constructor(
    /** The temporary directory holding everything (removed by cleanup). */
    readonly base: string,
    readonly nodeName: string,
  ) {
    this.layout = new KubeletLayout(this.rootDir);
  }

  static async create(options: NodeDiskOptions = {}): Promise<NodeDisk> {
    const base = await realpath(await mkdtemp(path.join(tmpdir(), options.prefix ?? 'nodevol-e2e-')));
    const disk = new NodeDisk(base, options.nodeName ?? 'node-1');
    // kubelet creates pods/ and plugins/ under its root dir at start; so does a fresh node disk.
    for (const d of [disk.layout.podsDir(), disk.layout.pluginsDir(), disk.manifestsDir, disk.driverStateDir, disk.logDir]) await mkdir(d, { recursive: true });
    await disk.#writeAtomic(disk.nodeStatusFile, `${JSON.stringify({ volumesAttached: [], volumesInUse: [] }, null, 2)}\n`);
    return disk;
  }

  get rootDir(): string {
    return path.join(this.base, 'root');
  }
  get clusterDir(): string {
    return path.join(this.base, 'cluster');
  }
  get manifestsDir(): string {
    return path.join(this.clusterDir, MANIFESTS_DIR_NAME);
  }
  get nodeStatusFile(): string {
    return path.join(this.clusterDir, NODE_STATUS_FILE_NAME);
  }
  get driverStateDir(): string {
    return path.join(this.base, 'driver-state');
  }
  get journalFile(): string {
    return path.join(this.base, 'journal.jsonl');
  }
  get faultsFile(): string {
    return path.join(this.base, 'faults.yaml');
  }
  get logDir(): string {
    return path.join(this.base, 'logs');
  }

  logFile(name: string): string {
    return path.join(this.logDir, `${name}.log`);
  }

  /** A log's text ('' when it does not exist yet). */
  async readLog(name: string): Promise<string> {
    return readIfExists(this.logFile(name));
  }

  /** The conventional socket of a driver: <root>/plugins/<driver>/csi.sock. */
  driverSocket(driver: string): string {
    return this.layout.driverSocketPath(driver);
  }

  // ------------------------------------------------------------------ manifests

  /** Writes `objects` as one multi-document YAML file in manifests/ (atomically); returns its path. */
  async writeManifest(fileName: string, objects: object | readonly object[]): Promise<string> {
    if (fileName.includes('/') || fileName.startsWith('.') || !/\.ya?ml$/.test(fileName)) {
      throw new Error(`manifest file name ${JSON.stringify(fileName)}: want a plain name ending in .yaml`);
    }
    const docs = (Array.isArray(objects) ? objects : [objects]) as object[];
    const file = path.join(this.manifestsDir, fileName);
    await this.#writeAtomic(file, docs.map((d) => stringify(d)).join('---\n'));
    return file;
  }

  /** Removes a manifest file (no error when it is already gone): the objects are deleted. */
  async deleteManifest(fileName: string): Promise<void> {
    await unlink(path.join(this.manifestsDir, fileName)).catch((err: unknown) => {
      if ((err as { code?: unknown }).code !== 'ENOENT') throw err;
    });
  }

  /** secret-<namespace>-<name>.yaml: an Opaque Secret, its data written as stringData. */
  async writeSecret(namespace: string, name: string, data: Readonly<Record<string, string>>): Promise<string> {
    return this.writeManifest(`secret-${namespace}-${name}.yaml`, { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, type: 'Opaque', stringData: { ...data } });
  }

  /**
   * volumeattachment-<name>.yaml: the VolumeAttachment the attach/detach controller makes for a
   * volume attached to this node (name csi-<sha256(handle, driver, node)>), attached, with the
   * driver's ControllerPublishVolume publish_context as attachmentMetadata.
   */
  async writeVolumeAttachment(o: { readonly driver: string; readonly volumeHandle: string; readonly pvName: string; readonly attachmentMetadata: Readonly<Record<string, string>> }): Promise<string> {
    const name = getAttachmentName(o.volumeHandle, o.driver, this.nodeName);
    await this.writeManifest(`volumeattachment-${name}.yaml`, {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'VolumeAttachment',
      metadata: { name },
      spec: { attacher: o.driver, nodeName: this.nodeName, source: { persistentVolumeName: o.pvName } },
      status: { attached: true, attachmentMetadata: { ...o.attachmentMetadata } },
    });
    return name;
  }

  /** csidriver-<name>.yaml */
  async writeCsiDriver(o: CsiDriverOptions): Promise<string> {
    return this.writeManifest(`csidriver-${o.name}.yaml`, {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'CSIDriver',
      metadata: { name: o.name },
      spec: {
        attachRequired: o.attachRequired ?? true,
        podInfoOnMount: o.podInfoOnMount ?? false,
        ...(o.volumeLifecycleModes !== undefined ? { volumeLifecycleModes: [...o.volumeLifecycleModes] } : {}),
      },
    });
  }

  /** pv-<name>.yaml: a CSI PersistentVolume and the PVC bound to it. */
  async writePersistentVolume(o: PersistentVolumeOptions): Promise<WrittenPersistentVolume> {
    const claimName = o.claimName ?? o.name;
    const namespace = o.namespace ?? 'default';
    const csi: Record<string, unknown> = { driver: o.driver, volumeHandle: o.volumeHandle };
    if (o.fsType !== undefined) csi.fsType = o.fsType;
    if (o.readOnly !== undefined) csi.readOnly = o.readOnly;
    if (o.volumeAttributes !== undefined) csi.volumeAttributes = { ...o.volumeAttributes };
    if (o.nodeStageSecretRef !== undefined) csi.nodeStageSecretRef = { ...o.nodeStageSecretRef };
    if (o.nodePublishSecretRef !== undefined) csi.nodePublishSecretRef = { ...o.nodePublishSecretRef };
    const pvSpec: Record<string, unknown> = {
      csi,
      accessModes: [...(o.accessModes ?? ['ReadWriteOnce'])],
      claimRef: { namespace, name: claimName },
    };
    if (o.volumeMode !== undefined) pvSpec.volumeMode = o.volumeMode;
    if (o.mountOptions !== undefined) pvSpec.mountOptions = [...o.mountOptions];
    const pvcSpec: Record<string, unknown> = { volumeName: o.name, accessModes: [...(o.accessModes ?? ['ReadWriteOnce'])] };
    if (o.volumeMode !== undefined) pvcSpec.volumeMode = o.volumeMode;
    const file = await this.writeManifest(`pv-${o.name}.yaml`, [
      { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: o.name }, spec: pvSpec },
      { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: claimName, namespace }, spec: pvcSpec },
    ]);
    return { file, pvName: o.name, claimName, namespace, uniqueVolumeName: uniqueVolumeName(o.driver, o.volumeHandle) };
  }

  /** pod-<namespace>-<name>.yaml: a Pod (on this node unless told otherwise) using the volumes. */
  async writePod(o: PodOptions): Promise<WrittenPod> {
    const namespace = o.namespace ?? 'default';
    const volumes = o.volumes.map((v) =>
      'claimName' in v
        ? { name: v.name, persistentVolumeClaim: { claimName: v.claimName, ...(v.readOnly !== undefined ? { readOnly: v.readOnly } : {}) } }
        : { name: v.name, csi: { ...v.csi, ...(v.csi.volumeAttributes !== undefined ? { volumeAttributes: { ...v.csi.volumeAttributes } } : {}) } },
    );
    const blocks = new Set(o.blockVolumes ?? []);
    const container: Record<string, unknown> = {
      name: 'app',
      image: 'registry.k8s.io/pause:3.10',
      volumeMounts: o.volumes.filter((v) => !blocks.has(v.name)).map((v) => ({ name: v.name, mountPath: `/data/${v.name}` })),
    };
    if (blocks.size > 0) container.volumeDevices = [...blocks].map((name) => ({ name, devicePath: `/dev/xvd-${name}` }));
    const metadata: Record<string, unknown> = { name: o.name, namespace };
    if (o.uid !== undefined) metadata.uid = o.uid;
    const spec: Record<string, unknown> = { nodeName: o.nodeName ?? this.nodeName, containers: [container], volumes };
    if (o.fsGroup !== undefined) spec.securityContext = { fsGroup: o.fsGroup };
    if (o.serviceAccountName !== undefined) spec.serviceAccountName = o.serviceAccountName;
    const file = await this.writeManifest(podFileName(namespace, o.name), { apiVersion: 'v1', kind: 'Pod', metadata, spec });
    return { file, uid: o.uid ?? derivedPodUID(namespace, o.name), namespace, name: o.name };
  }

  /** Deletes a pod written by writePod. */
  async deletePod(name: string, namespace = 'default'): Promise<void> {
    await this.deleteManifest(podFileName(namespace, name));
  }

  // ------------------------------------------------------------------ node status

  async nodeStatus(): Promise<NodeStatusFile> {
    const raw = JSON.parse(await readFile(this.nodeStatusFile, 'utf8')) as Partial<NodeStatusFile>;
    return { volumesAttached: raw.volumesAttached ?? [], volumesInUse: raw.volumesInUse ?? [] };
  }

  /** What the agent last reported in volumesInUse. */
  async volumesInUse(): Promise<string[]> {
    return [...(await this.nodeStatus()).volumesInUse];
  }

  /**
   * Sets volumesAttached (the attach/detach controller's side), keeping every other field.
   * Read-modify-write like the agent's own update: do it while the agent is not writing
   * volumesInUse (before it starts, or after it reported), or one of the two updates can be lost.
   */
  async setVolumesAttached(volumes: readonly { readonly name: string; readonly devicePath?: string }[]): Promise<void> {
    const raw = JSON.parse(await readFile(this.nodeStatusFile, 'utf8')) as Record<string, unknown>;
    raw.volumesAttached = volumes.map((v) => ({ name: v.name, devicePath: v.devicePath ?? '' }));
    await this.#writeAtomic(this.nodeStatusFile, `${JSON.stringify(raw, null, 2)}\n`);
  }

  // ------------------------------------------------------------------ mock driver files

  /**
   * The journal's entries, in order. A last line without its newline (being written) is left
   * out; any other line that is not a JSON object throws, naming file and line.
   */
  async journal(): Promise<JournalEntry[]> {
    const text = await readIfExists(this.journalFile);
    const lines = text.split('\n');
    lines.pop(); // '' after the last newline, or a partial line
    return lines.flatMap((line, i): JournalEntry[] => {
      if (line.trim() === '') return [];
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch (err) {
        throw new Error(`${this.journalFile}:${i + 1}: not JSON (${err instanceof Error ? err.message : String(err)}): ${line.slice(0, 200)}`);
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`${this.journalFile}:${i + 1}: not a JSON object: ${line.slice(0, 200)}`);
      return [v as JournalEntry];
    });
  }

  /**
   * Polls the journal until an entry matches, and resolves to it; e.g. a held call:
   * `disk.waitForJournal((e) => e.method === 'NodeStageVolume' && e.phase === 'held', 'NodeStageVolume to be held')`.
   * The timeout message carries the journal's last lines.
   */
  async waitForJournal(match: (e: JournalEntry) => boolean, what: string, timeoutMs = DEFAULT_WAIT_TIMEOUT_MS): Promise<JournalEntry> {
    return waitFor(async () => (await this.journal()).find(match), {
      what: `a journal entry: ${what}`,
      timeoutMs,
      observe: async () => (await this.journal()).slice(-10).map((e) => ({ seq: e.seq, method: e.method, volumeId: e.volumeId, phase: e.phase, error: e.error?.name ?? e.error })),
    });
  }

  /** Replaces the fault file: text verbatim, anything else as YAML. */
  async writeFaults(faults: string | object): Promise<void> {
    await this.#writeAtomic(this.faultsFile, typeof faults === 'string' ? faults : stringify(faults));
  }

  async clearFaults(): Promise<void> {
    await unlink(this.faultsFile).catch((err: unknown) => {
      if ((err as { code?: unknown }).code !== 'ENOENT') throw err;
    });
  }

  // ------------------------------------------------------------------ the agent

  /** argv of `nodevol agent` for this node: [node, bin/nodevol.js, 'agent', --root-dir, …]. */
  agentArgv(o: AgentArgvOptions = {}): string[] {
    const args = ['agent', '--root-dir', this.rootDir, '--node-name', this.nodeName, '--cluster-dir', this.clusterDir];
    args.push('--metrics-bind-address', o.metricsBindAddress ?? '127.0.0.1:0');
    const gates = o.featureGates === undefined ? [] : Array.isArray(o.featureGates) ? [...(o.featureGates as readonly string[])] : Object.entries(o.featureGates).map(([k, v]) => `${k}=${String(v)}`);
    if (gates.length > 0) args.push('--feature-gates', gates.join(','));
    for (const [driver, endpoint] of Object.entries(o.csiEndpoints ?? {})) args.push('--csi-endpoint', `${driver}=${endpoint}`);
    if (o.nodeStatusUpdateFrequency !== undefined) args.push('--node-status-update-frequency', o.nodeStatusUpdateFrequency);
    if (o.shutdownGracePeriod !== undefined) args.push('--shutdown-grace-period', o.shutdownGracePeriod);
    if (o.v !== undefined) args.push('-v', String(o.v));
    if (o.loggingFormat !== undefined) args.push('--logging-format', o.loggingFormat);
    args.push(...(o.extra ?? []));
    return nodevolArgv(...args);
  }

  /**
   * argv of `nodevol mock-driver` for this node: its socket where the agent looks by default,
   * --state-dir driver-state/, --faults faults.yaml, --journal journal.jsonl.
   */
  mockDriverArgv(o: MockDriverArgvOptions = {}): string[] {
    const driver = o.driverName ?? 'mock.csi.nodevol.io';
    const args = ['mock-driver', '--endpoint', o.endpoint ?? `unix://${this.driverSocket(driver)}`, '--node-id', o.nodeId ?? this.nodeName, '--driver-name', driver];
    args.push('--state-dir', this.driverStateDir, '--faults', this.faultsFile, '--journal', this.journalFile);
    if (o.v !== undefined) args.push('-v', String(o.v));
    if (o.loggingFormat !== undefined) args.push('--logging-format', o.loggingFormat);
    args.push(...(o.extra ?? []));
    return nodevolArgv(...args);
  }

  /**
   * The metrics address ("127.0.0.1:41673") the agent logging to `logName` last announced in its
   * "Starting nodevol agent" line (text or JSON logging), or undefined before it did.
   */
  async agentMetricsAddress(logName = 'agent'): Promise<string | undefined> {
    const matches = [...(await this.readLog(logName)).matchAll(/"?metricsAddress"?[:=]"([^"]+)"/g)];
    return matches[matches.length - 1]?.[1];
  }

  // ------------------------------------------------------------------ cleanup

  /**
   * Removes the disk. Refuses (throws) while anything under it is a mount point in this
   * process's mount table: a recursive delete would go through the mount. Stop or kill the
   * namespaces using the disk first (their mounts are invisible here and die with them).
   */
  async cleanup(): Promise<void> {
    const under = escapeMountPath(this.base);
    const table = parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'), { strict: false }).entries;
    const mounted = table.filter((m) => m.mountPoint === under || m.mountPoint.startsWith(`${under}/`)).map((m) => m.mountPoint);
    if (mounted.length > 0) throw new Error(`NodeDisk.cleanup: refusing to delete ${this.base}: mounted under it: ${mounted.join(', ')}`);
    await rm(this.base, { recursive: true, force: true });
  }

  /** The port's writeFileAtomic (`<file>.tmp`, fsync, rename, fsync of the directory). */
  async #writeAtomic(file: string, content: string): Promise<void> {
    await writeFileAtomic(this.#fs, file, new TextEncoder().encode(content), { mode: 0o644 });
  }
}

/** kubelet's unique name of a CSI persistent volume: kubernetes.io/csi/<driver>^<handle>. */
export function uniqueVolumeName(driver: string, volumeHandle: string): string {
  return getUniqueVolumeName(CSI_PLUGIN_NAME, csiVolumeName(driver, volumeHandle));
}

/** kubelet's unique name of an inline CSI volume: kubernetes.io/csi/<podUID>-<volumeName>. */
export function inlineUniqueVolumeName(podUID: string, volumeName: string): string {
  return getUniqueVolumeNameWithPod(CSI_PLUGIN_NAME, podUID, volumeName);
}

function podFileName(namespace: string, name: string): string {
  return `pod-${namespace}-${name}.yaml`;
}

async function readIfExists(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return '';
    throw err;
  }
}
