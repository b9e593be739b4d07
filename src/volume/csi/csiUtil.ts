/**
 * Helpers shared by the CSI mounter, attacher and block mapper (csi_mounter.go / csi_util.go):
 * driver client lookup, capability checks, removeMountDir, the error mapping from a CSI call to
 * kubelet's operation error classes, and a guard that keeps every removal under the root dir.
 */
import * as path from 'node:path/posix';
import { isFinalCsiError, type AccessMode, type CsiNodeClient, type VolumeCapability } from '../../ports/csi.js';
import { atomicTempPath, errorCode, errorMessage, isNotExist } from '../../ports/fs.js';
import type { PodRef } from '../plugins.js';
import type { Spec, VolumeLifecycleMode } from '../spec.js';
import { TransientOperationFailure, UncertainProgressError } from '../util/errors.js';
import type { VolumeHost } from '../volumeHost.js';
import { assertPathConfined, assertPathUnderRoot, CsiPathError } from '../util/pathConfinement.js';
import { goQuote } from '../util/goText.js';
import { VOL_DATA_FILE_NAME } from './volumeData.js';
import { compareCodePoints, goJsonString } from './volumeDataEncoder.js';
import type { SecretReference, TokenRequestStatus } from '../../api/core.js';
import { getAttachmentName } from '../../layout/names.js';

/** kubelet's log prefix for CSI messages. */
export function csiLog(msg: string): string {
  return `kubernetes.io/csi: ${msg}`;
}

export { CsiPathError };

/** The driver's client, or a transient failure: nothing happened yet, the state stays. */
export function clientFor(host: VolumeHost, driverName: string): CsiNodeClient {
  const client = host.csiDrivers.client(driverName);
  if (client === undefined) {
    throw new TransientOperationFailure(csiLog(`driver name ${driverName} not found in the list of registered CSI drivers`));
  }
  return client;
}

export async function supportsStageUnstage(client: CsiNodeClient): Promise<boolean> {
  return (await client.nodeGetCapabilities()).includes('STAGE_UNSTAGE_VOLUME');
}

/** A failed CSI call as kubelet classifies it: uncertain (may still be in progress) or final. */
export function classifyCsiError(err: unknown, what: string): Error {
  const msg = csiLog(`${what}: ${errorMessage(err)}`);
  return isFinalCsiError(err) ? new Error(msg) : new UncertainProgressError(msg);
}

/** Refuses any path outside the root dir (CSI's log prefix on the error). */
export function assertUnderRoot(host: VolumeHost, p: string): void {
  assertPathUnderRoot(host, p, csiLog);
}

/** {@link assertPathConfined} with CSI's log prefix on the error. */
export function assertConfined(host: VolumeHost, p: string, what: string): Promise<void> {
  return assertPathConfined(host, p, what, csiLog);
}

/** isDirMounted: IsLikelyNotMountPoint; a missing path is not mounted. */
export async function isDirMounted(host: VolumeHost, dir: string): Promise<boolean> {
  try {
    return !(await host.mounter.isLikelyNotMountPoint(dir));
  } catch (err) {
    if (isNotExist(err)) return false;
    throw err;
  }
}

/**
 * removeMountDir (csi_mounter.go): when `mountPath` is not a mount point, remove it (rmdir), the
 * vol_data.json beside it and their parent (rmdir). A mounted path is left alone and counts as
 * success. Never touches the grandparent.
 */
export async function removeMountDir(host: VolumeHost, mountPath: string): Promise<void> {
  assertUnderRoot(host, mountPath);
  if (await isDirMounted(host, mountPath)) {
    host.logger.v(4).info(csiLog('dir is still mounted, not removing it'), { path: mountPath });
    return;
  }
  const volPath = path.dirname(mountPath);
  const log = host.logger.v(4);
  log.info(csiLog('dir not mounted, deleting it'), { path: mountPath });
  await ignoreNotExist(host.fs.rmdir(mountPath), `failed to remove dir [${mountPath}]`);
  const dataFile = path.join(volPath, VOL_DATA_FILE_NAME);
  log.info(csiLog('also deleting volume info data file'), { path: dataFile });
  await ignoreNotExist(host.fs.unlink(dataFile), `failed to delete volume data file [${dataFile}]`);
  log.info(csiLog('deleting volume path'), { path: volPath });
  try {
    await host.fs.rmdir(volPath);
  } catch (err) {
    if (isNotExist(err)) return;
    // A crash between the atomic write's temp file and its rename leaves that temp file behind:
    // it is ours by name, so it goes, and the directory with it (kubelet has no temp file); so
    // does nodevol's unstage marker (UNSTAGE_MARKER_FILE_NAME) left by an UnmountDevice cut short
    // after its NodeUnstageVolume.
    if (errorCode(err) !== 'ENOTEMPTY' || !(await removeVolumeDataTempFiles(host, volPath))) {
      throw new Error(csiLog(`failed to delete volume path [${volPath}]: ${errorMessage(err)}`));
    }
    await ignoreNotExist(host.fs.rmdir(volPath), `failed to delete volume path [${volPath}]`);
  }
}

/**
 * removeMountDir after a failed MountDevice or SetUp, as kubelet's deferred cleanup runs it: its
 * own failure is logged at error level (`message`, with `values`), never returned. Resolves to
 * whether the removal succeeded (kubelet's callers ignore that; the afterFailedCleanup hook
 * reads it).
 */
export async function removeMountDirLogged(host: VolumeHost, mountPath: string, message: string, values: Record<string, string>): Promise<boolean> {
  try {
    await removeMountDir(host, mountPath);
    return true;
  } catch (err) {
    host.logger.error(err, csiLog(message), values);
    return false;
  }
}

/** `vol_data.json.tmp`: the temp file of the atomic vol_data.json write ({@link atomicTempPath}). */
const VOLUME_DATA_TEMP_FILE_NAME = path.basename(atomicTempPath(VOL_DATA_FILE_NAME));

export function isVolumeDataTempFile(name: string): boolean {
  return name === VOLUME_DATA_TEMP_FILE_NAME;
}


/**
 * nodevol's own file names in a volume dir, beside the atomic write's temp file: the unstage
 * marker, an empty file beside the volume's vol_data.json from before NodeUnstageVolume is sent
 * until it returned OK (src/nodevol/unstageCompletesBeforeRestage writes it; kubelet has no such
 * file). removeMountDir removes it whatever the gates say: it runs only once the device is
 * unstaged (or never was), so a marker left by a gate turned off later never keeps a dir alive.
 */
export const UNSTAGE_MARKER_FILE_NAME = 'unstage-in-progress';

/**
 * Removes the leftover temp files of interrupted vol_data.json writes in `dir`; true when
 * something was removed. Only regular files with the temp name are touched.
 */
async function removeVolumeDataTempFiles(host: VolumeHost, dir: string): Promise<boolean> {
  let removed = false;
  for (const entry of await host.fs.readdir(dir)) {
    // The unstage marker too: removeMountDir runs only once the device is unstaged (or never was).
    if (entry.type !== 'file' || !(isVolumeDataTempFile(entry.name) || entry.name === UNSTAGE_MARKER_FILE_NAME)) continue;
    const p = path.join(dir, entry.name);
    host.logger.v(4).info(csiLog('deleting the temp file of an interrupted volume data write'), { path: p });
    await ignoreNotExist(host.fs.unlink(p), `failed to delete temp file [${p}]`);
    removed = true;
  }
  return removed;
}

async function ignoreNotExist(p: Promise<void>, what: string): Promise<void> {
  try {
    await p;
  } catch (err) {
    if (!isNotExist(err)) throw new Error(csiLog(`${what}: ${errorMessage(err)}`));
  }
}

/** MkdirAll with kubelet's volume directory mode. */
export async function mkdirAll(host: VolumeHost, dir: string, mode = 0o750): Promise<void> {
  assertUnderRoot(host, dir);
  await host.fs.mkdir(dir, { recursive: true, mode });
}

/**
 * The volume_mount_group of a stage or publish: the pod's fsGroup only when the driver has
 * VOLUME_MOUNT_GROUP (NodeSupportsVolumeMountGroup, one NodeGetCapabilities call), else ''. A
 * failure to ask is transient, as in SetUpAt and MountDevice; `caller` prefixes its message.
 */
export async function volumeMountGroupFor(client: CsiNodeClient, fsGroup: number | undefined, caller: string): Promise<string> {
  let supported: boolean;
  try {
    supported = (await client.nodeGetCapabilities()).includes('VOLUME_MOUNT_GROUP');
  } catch (err) {
    throw new TransientOperationFailure(csiLog(`${caller} failed to determine if the node service has VOLUME_MOUNT_GROUP capability: ${errorMessage(err)}`));
  }
  return supported && fsGroup !== undefined ? String(fsGroup) : '';
}

/**
 * getNodeV1AccessModeMapper, as NodeStageVolume / NodePublishVolume do before every call: one
 * NodeGetCapabilities call for SINGLE_NODE_MULTI_WRITER. A failure is returned as it is (final).
 */
export async function accessModeMapperFor(client: CsiNodeClient): Promise<(spec: Spec) => VolumeCapability['accessMode']> {
  const singleNodeMultiWriter = (await client.nodeGetCapabilities()).includes('SINGLE_NODE_MULTI_WRITER');
  return (spec) => ({ mode: asCSIAccessMode(kubeAccessModeOf(spec), singleNodeMultiWriter) });
}

/** The first PV access mode, ReadWriteOnce by default (and for inline volumes), as SetUpAt / MountDevice pick it. */
function kubeAccessModeOf(spec: Spec): string {
  return (spec.kind === 'persistent' ? spec.persistentVolume.accessModes?.[0] : undefined) ?? 'ReadWriteOnce';
}

/**
 * asCSIAccessModeV1 / asSingleNodeMultiWriterCapableCSIAccessModeV1: ReadWriteOnce and
 * ReadWriteOncePod map to SINGLE_NODE_WRITER unless the driver has SINGLE_NODE_MULTI_WRITER, then
 * to SINGLE_NODE_MULTI_WRITER and SINGLE_NODE_SINGLE_WRITER.
 */
export function asCSIAccessMode(mode: string, singleNodeMultiWriter: boolean): AccessMode {
  switch (mode) {
    case 'ReadWriteOnce':
      return singleNodeMultiWriter ? 'SINGLE_NODE_MULTI_WRITER' : 'SINGLE_NODE_WRITER';
    case 'ReadOnlyMany':
      return 'MULTI_NODE_READER_ONLY';
    case 'ReadWriteMany':
      return 'MULTI_NODE_MULTI_WRITER';
    case 'ReadWriteOncePod':
      return singleNodeMultiWriter ? 'SINGLE_NODE_SINGLE_WRITER' : 'SINGLE_NODE_WRITER';
    default:
      return 'UNKNOWN';
  }
}

/** The access mode without asking the driver (SINGLE_NODE_MULTI_WRITER not advertised). */
export function accessModeOf(spec: Spec): VolumeCapability['accessMode'] {
  return { mode: asCSIAccessMode(kubeAccessModeOf(spec), false) };
}

/** A mount capability; `volumeMountGroup` is '' unless the driver has VOLUME_MOUNT_GROUP and the pod an fsGroup. */
export function mountCapability(
  spec: Spec,
  fsType: string,
  volumeMountGroup: string,
  accessMode: VolumeCapability['accessMode'] = accessModeOf(spec),
): VolumeCapability {
  const mountFlags = spec.kind === 'persistent' ? [...(spec.persistentVolume.mountOptions ?? [])] : [];
  return { mount: { fsType, mountFlags, volumeMountGroup }, accessMode };
}

/** A block capability; the access mode as {@link accessModeMapperFor} maps it (csi_client.go does for every call). */
export function blockCapability(spec: Spec, accessMode: VolumeCapability['accessMode'] = accessModeOf(spec)): VolumeCapability {
  return { block: {}, accessMode };
}

/**
 * csi_plugin.go podInfoEnabled: pod information only for a CSIDriver with podInfoOnMount: true;
 * no CSIDriver object means none. A cluster view that cannot answer rejects.
 */
export async function podInfoEnabled(host: VolumeHost, driverName: string): Promise<boolean> {
  const driver = await host.cluster.getCSIDriver(driverName);
  if (driver === undefined) {
    host.logger.v(4).info(csiLog('CSIDriver not found, not adding pod information'), { driver: driverName });
    return false;
  }
  if (driver.podInfoOnMount !== true) {
    host.logger.v(4).info(csiLog('CSIDriver does not require pod information'), { driver: driverName });
    return false;
  }
  return true;
}

/**
 * csi_mounter.go supportsVolumeLifecycleMode: undefined when the CSIDriver lists the volume's
 * lifecycle mode, else why not. No CSIDriver object allows Persistent volumes only; an object
 * without the list has the API server's default, [Persistent]. A cluster view that cannot answer
 * rejects.
 */
export async function unsupportedVolumeLifecycleMode(host: VolumeHost, driverName: string, mode: VolumeLifecycleMode): Promise<string | undefined> {
  const driver = await host.cluster.getCSIDriver(driverName);
  if (driver === undefined) return mode === 'Persistent' ? undefined : `volume mode ${goQuote(mode)} not supported by driver ${driverName} (no CSIDriver object)`;
  const modes = driver.volumeLifecycleModes ?? ['Persistent'];
  if (modes.includes(mode)) return undefined;
  return `volume mode ${goQuote(mode)} not supported by driver ${driverName} (only supports [${modes.map(goQuote).join(' ')}])`;
}

/**
 * csi_plugin.go skipAttach: true when the CSIDriver says attachRequired: false; no CSIDriver
 * object means attach. A cluster view that cannot answer rejects.
 */
export async function skipAttach(host: VolumeHost, driverName: string): Promise<boolean> {
  const driver = await host.cluster.getCSIDriver(driverName);
  return driver !== undefined && !driver.attachRequired;
}

/**
 * The status.attachmentMetadata of this node's VolumeAttachment of the volume
 * (csi-<sha256(handle, driver, node)>). Rejects as the API server's Get does when it does not
 * exist. A view that holds no VolumeAttachments (the simulator's) gives none.
 */
export async function attachmentMetadata(host: VolumeHost, volumeHandle: string, driverName: string): Promise<Record<string, string>> {
  const get = host.cluster.getVolumeAttachment?.bind(host.cluster);
  if (get === undefined) return {};
  const name = getAttachmentName(volumeHandle, driverName, host.nodeName);
  const va = await get(name);
  if (va === undefined) throw new Error(`volumeattachments.storage.k8s.io ${JSON.stringify(name)} not found`);
  return { ...va.attachmentMetadata };
}

/**
 * csi_plugin.go getPublishContext: none when the CSIDriver says attachRequired: false, else the
 * VolumeAttachment's attachmentMetadata. Rejects with the view's error (the caller makes it a
 * transient failure).
 */
export async function getPublishContext(host: VolumeHost, volumeHandle: string, driverName: string): Promise<Record<string, string>> {
  if (await skipAttach(host, driverName)) return {};
  return attachmentMetadata(host, volumeHandle, driverName);
}

/**
 * csi_util.go getCredentialsFromSecret: the Secret's data as the driver's secrets. Rejects when it
 * does not exist (as the API server's Get: secrets "<name>" not found) or the view holds no
 * Secrets. Only the Secret's name ever appears in an error, never a value.
 */
export async function getCredentialsFromSecret(host: VolumeHost, ref: SecretReference): Promise<Record<string, string>> {
  const get = host.cluster.getSecret?.bind(host.cluster);
  if (get === undefined) throw new Error(`secrets ${JSON.stringify(ref.name)} cannot be read: the cluster view holds no Secrets`);
  const data = await get(ref.namespace, ref.name);
  if (data === undefined) throw new Error(`secrets ${JSON.stringify(ref.name)} not found`);
  return { ...data };
}

/** The volume_context / secrets key of the service account tokens. */
export const SERVICE_ACCOUNT_TOKENS_KEY = 'csi.storage.k8s.io/serviceAccount.tokens';

/**
 * csi_mounter.go podServiceAccountTokenAttrs: for a CSIDriver with tokenRequests, one TokenRequest
 * per entry for the pod's service account (audience "" asks for none), bound to the pod; the
 * statuses by audience as Go's json.Marshal writes a map[string]TokenRequestStatus. Undefined
 * without a CSIDriver or without tokenRequests. `inSecrets`: the CSIDriver's
 * serviceAccountTokenInSecrets. Rejects when the view cannot answer or issue a token.
 */
export async function serviceAccountTokenAttrs(host: VolumeHost, driverName: string, pod: PodRef): Promise<{ readonly value: string; readonly inSecrets: boolean } | undefined> {
  const driver = await host.cluster.getCSIDriver(driverName);
  if (driver === undefined) {
    host.logger.v(5).info(csiLog('CSIDriver not found, not adding service account token information'), { driver: driverName });
    return undefined;
  }
  const requests = driver.tokenRequests ?? [];
  if (requests.length === 0) return undefined;
  const request = host.cluster.requestServiceAccountToken?.bind(host.cluster);
  if (request === undefined) throw new Error('the cluster view cannot issue service account tokens');
  const statuses = new Map<string, TokenRequestStatus>();
  for (const t of requests) {
    const status = await request({
      namespace: pod.namespace,
      serviceAccountName: pod.serviceAccountName ?? '',
      audiences: t.audience === '' ? [] : [t.audience],
      ...(t.expirationSeconds !== undefined ? { expirationSeconds: t.expirationSeconds } : {}),
      boundPod: { name: pod.name, uid: pod.uid },
    });
    statuses.set(t.audience, status);
  }
  host.logger.v(4).info(csiLog('Fetched service account token attrs for CSIDriver'), { driver: driverName });
  const entries = [...statuses.keys()]
    .sort(compareCodePoints)
    .map((aud) => {
      const s = statuses.get(aud);
      return `${goJsonString(aud)}:{"token":${goJsonString(s?.token ?? '')},"expirationTimestamp":${goJsonString(s?.expirationTimestamp ?? '')}}`;
    });
  return { value: `{${entries.join(',')}}`, inSecrets: driver.serviceAccountTokenInSecrets === true };
}

/** csi_plugin.go getPodInfoAttrs: the pod keys of volume_context. */
export function podInfoAttrs(pod: PodRef, lifecycle: VolumeLifecycleMode): Record<string, string> {
  return {
    'csi.storage.k8s.io/pod.name': pod.name,
    'csi.storage.k8s.io/pod.namespace': pod.namespace,
    'csi.storage.k8s.io/pod.uid': pod.uid,
    'csi.storage.k8s.io/serviceAccount.name': pod.serviceAccountName ?? '',
    'csi.storage.k8s.io/ephemeral': String(lifecycle === 'Ephemeral'),
  };
}

export class CsiSpecError extends Error {
  override readonly name = 'CsiSpecError';
}

/** makeDeviceMountPath: <plugins>/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount. */
export function makeDeviceMountPath(host: VolumeHost, spec: Spec): string {
  const src = persistentSource(spec, true);
  return host.layout.csiDeviceMountPath(src.driver, src.volumeHandle);
}

/** The CSI source of a PV spec; with `requireFields`, an empty driver or handle is an error. */
export function persistentSource(spec: Spec, requireFields: boolean): { driver: string; volumeHandle: string } {
  if (spec.kind !== 'persistent') throw new CsiSpecError(`volume ${JSON.stringify(spec.volume.name)} is not a CSI PersistentVolume`);
  const csi = spec.persistentVolume.csi;
  if (csi === undefined) throw new CsiSpecError(`PersistentVolume ${JSON.stringify(spec.persistentVolume.name)} has no CSI source`);
  if (!requireFields) return { driver: csi.driver, volumeHandle: csi.volumeHandle };
  if (csi.driver === '') throw new CsiSpecError('csi source driver name is empty');
  if (csi.volumeHandle === '') throw new CsiSpecError('CSIPersistentVolumeSource volume handle is empty');
  return { driver: csi.driver, volumeHandle: csi.volumeHandle };
}
