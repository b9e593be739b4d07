/**
 * Test helper: an in-memory ClusterView (pods, PVCs, PVs, CSIDrivers, node status) with a switch
 * that makes every call fail, as an unreachable API server does, and a record of every
 * volumesInUse written.
 */
import type {
  AttachedVolume,
  CSIDriverInfo,
  NodeStatus,
  PersistentVolumeClaim,
  Pod,
  SecretData,
  ServiceAccountTokenRequest,
  TokenRequestStatus,
  VolumeAttachmentInfo,
} from '../../api/core.js';
import { getAttachmentName } from '../../layout/names.js';
import type { ClusterView } from '../../ports/cluster.js';
import type { PersistentVolume } from '../../api/core.js';

export interface FakeClusterOptions {
  /**
   * Act as a watching view (an informer, the agent's cluster dir): objectsVersion, onChange and
   * signalsEveryChange are served, and every change made through the methods below is signalled.
   * Only for a user that changes objects through the methods, never through the maps.
   */
  readonly watch?: boolean;
}

export interface AddPersistentVolumeOptions {
  /** Listed in volumesAttached (default true). */
  readonly attached?: boolean;
  /** The claim's status.phase (default Bound). */
  readonly claimPhase?: PersistentVolumeClaim['phase'];
  /** The claim has a deletionTimestamp. */
  readonly claimDeleting?: boolean;
  /** The PV's claimRef.uid (default the claim's); null: no claimRef at all. */
  readonly claimRefUid?: string | null;
}

export class FakeCluster implements ClusterView {
  readonly pods = new Map<string, Pod>();
  readonly pvcs = new Map<string, PersistentVolumeClaim>();
  readonly pvs = new Map<string, PersistentVolume>();
  readonly drivers = new Map<string, CSIDriverInfo>();
  volumesAttached: AttachedVolume[] = [];
  volumesInUse: string[] = [];
  /** The Node's labels (node affinity checks). */
  nodeLabels: Record<string, string> = {};
  /** Every volumesInUse list written, in order. */
  readonly volumesInUseHistory: string[][] = [];
  /** When set, every call rejects with this message. */
  unreachable: string | undefined;
  /** VolumeAttachments by name (the attach/detach controller's), with their attachmentMetadata. */
  readonly volumeAttachments = new Map<string, VolumeAttachmentInfo>();
  /**
   * Whether a volume listed in volumesAttached without a VolumeAttachment in the map has one
   * (attached, no metadata), as the attach/detach controller creates it. Default true.
   */
  synthesizeVolumeAttachments = true;
  /**
   * Every VolumeAttachment name has one (attached, no metadata): for tests that drive the CSI
   * plugin directly, without the attach flow.
   */
  everyVolumeAttached = false;
  /** The node the synthesized VolumeAttachments name. */
  nodeName = 'node-1';
  /** Secret data by "namespace/name". */
  readonly secrets = new Map<string, SecretData>();
  /** Every service account token requested, in order. */
  readonly tokenRequests: ServiceAccountTokenRequest[] = [];
  /** When set, token requests reject with this message (an API server that refuses them). */
  tokensRefused: string | undefined;
  /** Epoch ms the issued tokens' expiry counts from. */
  tokenIssuedAtMs = Date.UTC(2026, 0, 1);
  readonly objectsVersion?: () => number;
  readonly onChange?: (listener: () => void) => void;
  readonly signalsEveryChange?: () => boolean;
  #version = 0;
  readonly #listeners: (() => void)[] = [];

  constructor(options: FakeClusterOptions = {}) {
    if (options.watch === true) {
      this.objectsVersion = () => this.#version;
      this.onChange = (listener) => {
        this.#listeners.push(listener);
      };
      this.signalsEveryChange = () => true;
    }
  }

  /** An object changed: bump the version and tell the listeners. */
  #changed(): void {
    this.#version++;
    for (const l of this.#listeners) l();
  }

  addPod(pod: Pod): this {
    this.pods.set(pod.uid, pod);
    this.#changed();
    return this;
  }
  /** Replaces a listed pod with `change` applied (a phase, a deletion mark), as an update from the API server. */
  updatePod(uid: string, change: Partial<Pod>): this {
    const pod = this.pods.get(uid);
    if (pod === undefined) throw new Error(`no pod ${uid}`);
    this.pods.set(uid, { ...pod, ...change });
    this.#changed();
    return this;
  }
  deletePod(uid: string): this {
    this.pods.delete(uid);
    this.#changed();
    return this;
  }
  setCSIDriver(driver: CSIDriverInfo): this {
    this.drivers.set(driver.name, driver);
    this.#changed();
    return this;
  }
  /**
   * A PV with a CSI source, its PVC bound to it (phase Bound, the PV's claimRef naming the claim's
   * uid `uid-claim-<namespace>-<name>`, as the PV controller leaves them) and (optionally) the
   * node's attachment of it. The options break the binding as kubelet's checks see it.
   */
  addPersistentVolume(pv: PersistentVolume, claim: { namespace: string; name: string }, options: AddPersistentVolumeOptions = {}): this {
    const uid = `uid-claim-${claim.namespace}-${claim.name}`;
    const claimRefUid = options.claimRefUid === undefined ? uid : options.claimRefUid;
    this.pvs.set(pv.name, claimRefUid === null ? pv : { ...pv, claimRef: { namespace: claim.namespace, name: claim.name, uid: claimRefUid } });
    this.pvcs.set(`${claim.namespace}/${claim.name}`, {
      namespace: claim.namespace,
      name: claim.name,
      uid,
      volumeName: pv.name,
      phase: options.claimPhase ?? 'Bound',
      ...(options.claimDeleting === true ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
    });
    this.#changed();
    if (options.attached ?? true) {
      const csi = pv.csi;
      if (csi !== undefined) this.attach(`kubernetes.io/csi/${csi.driver}^${csi.volumeHandle}`);
    }
    return this;
  }
  attach(volumeName: string, devicePath = ''): this {
    if (!this.volumesAttached.some((v) => v.name === volumeName)) this.volumesAttached.push({ name: volumeName, devicePath });
    return this;
  }
  detach(volumeName: string): this {
    this.volumesAttached = this.volumesAttached.filter((v) => v.name !== volumeName);
    return this;
  }

  private check(): Promise<void> {
    return this.unreachable === undefined ? Promise.resolve() : Promise.reject(new Error(this.unreachable));
  }

  async listPods(): Promise<readonly Pod[]> {
    await this.check();
    return [...this.pods.values()];
  }
  async getPersistentVolumeClaim(namespace: string, name: string): Promise<PersistentVolumeClaim | undefined> {
    await this.check();
    return this.pvcs.get(`${namespace}/${name}`);
  }
  async getPersistentVolume(name: string): Promise<PersistentVolume | undefined> {
    await this.check();
    return this.pvs.get(name);
  }
  async getCSIDriver(name: string): Promise<CSIDriverInfo | undefined> {
    await this.check();
    return this.drivers.get(name);
  }
  async getNodeStatus(): Promise<NodeStatus> {
    await this.check();
    return { volumesAttached: [...this.volumesAttached], volumesInUse: [...this.volumesInUse], labels: { ...this.nodeLabels } };
  }
  async getVolumeAttachment(name: string): Promise<VolumeAttachmentInfo | undefined> {
    await this.check();
    const va = this.volumeAttachments.get(name);
    if (va === undefined && this.everyVolumeAttached) return { name, attached: true, attachmentMetadata: {} };
    if (va !== undefined || !this.synthesizeVolumeAttachments) return va;
    for (const v of this.volumesAttached) {
      const m = /^kubernetes\.io\/csi\/([^^]+)\^(.+)$/.exec(v.name);
      if (m !== null && getAttachmentName(m[2] ?? '', m[1] ?? '', this.nodeName) === name) return { name, attached: true, attachmentMetadata: {} };
    }
    return undefined;
  }

  async getSecret(namespace: string, name: string): Promise<SecretData | undefined> {
    await this.check();
    return this.secrets.get(`${namespace}/${name}`);
  }

  /** The deterministic token this view issues for the account and audiences. */
  mintedToken(namespace: string, serviceAccountName: string, audiences: readonly string[], expirationSeconds = 3600): TokenRequestStatus {
    const expiry = new Date(this.tokenIssuedAtMs + expirationSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    return { token: `token-${namespace}-${serviceAccountName}-[${audiences.join(',')}]`, expirationTimestamp: expiry };
  }

  async requestServiceAccountToken(request: ServiceAccountTokenRequest): Promise<TokenRequestStatus> {
    await this.check();
    this.tokenRequests.push(request);
    if (this.tokensRefused !== undefined) throw new Error(this.tokensRefused);
    return this.mintedToken(request.namespace, request.serviceAccountName, request.audiences, request.expirationSeconds);
  }

  async setVolumesInUse(names: readonly string[]): Promise<void> {
    await this.check();
    this.volumesInUse = [...names];
    this.volumesInUseHistory.push([...names]);
  }
}
