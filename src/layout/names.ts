/**
 * Names and hashes kubelet derives for volumes (k8s.io/utils strings/escape.go, pkg/volume/util unique
 * names, csi_attacher.go's sha256 of the handle, the attach/detach controller's VolumeAttachment name).
 *
 * Everything here is a pure function of its inputs; it is shared by the layout, the CSI plugin,
 * the volume manager and the audit so that all of them name a volume the same way.
 */
import * as nodeCrypto from 'node:crypto';

// One-shot hash where the runtime has it (Node >= 20.12): no Hash object per call, a third of
// createHash's cost; createHash on older Node 20.
const sha256HexOf: (s: string) => string =
  typeof nodeCrypto.hash === 'function'
    ? (s) => nodeCrypto.hash('sha256', s, 'hex')
    : (s) => nodeCrypto.createHash('sha256').update(s, 'utf8').digest('hex');

/** The CSI volume plugin's name (csi_plugin.go CSIPluginName). */
export const CSI_PLUGIN_NAME = 'kubernetes.io/csi';

/** kubernetes/utils EscapeQualifiedName: every "/" becomes "~". */
export function escapeQualifiedName(name: string): string {
  return name.replaceAll('/', '~');
}

/** kubernetes/utils UnescapeQualifiedName: every "~" becomes "/". */
export function unescapeQualifiedName(name: string): string {
  return name.replaceAll('~', '/');
}

/** Lowercase hex SHA-256 over the UTF-8 bytes of `s` (the staging directory name of a handle). */
export function sha256Hex(s: string): string {
  // A walk hashes each handle more than once (the pod's reconstruction, the global listing):
  // remembered, in a bounded map that is emptied rather than grown.
  let hex = sha256Memo.get(s);
  if (hex === undefined) {
    hex = sha256HexOf(s);
    if (sha256Memo.size >= MAX_SHA256_MEMO) sha256Memo.clear();
    sha256Memo.set(s, hex);
  }
  return hex;
}
const MAX_SHA256_MEMO = 16_384;
const sha256Memo = new Map<string, string>();

/** A kubelet UniqueVolumeName, e.g. "kubernetes.io/csi/ebs.csi.example.com^vol-1". */
export type UniqueVolumeName = string & { readonly __brand: 'UniqueVolumeName' };
/** A kubelet UniquePodName: the pod UID. */
export type UniquePodName = string & { readonly __brand: 'UniquePodName' };

/** GetUniqueVolumeName: "<pluginName>/<volumeName>". */
export function getUniqueVolumeName(pluginName: string, volumeName: string): UniqueVolumeName {
  return `${pluginName}/${volumeName}` as UniqueVolumeName;
}

/** GetUniqueVolumeNameFromSpecWithPod: "<pluginName>/<podUID>-<specName>" (inline ephemeral). */
export function getUniqueVolumeNameWithPod(pluginName: string, podUID: string, specName: string): UniqueVolumeName {
  return `${pluginName}/${podUID}-${specName}` as UniqueVolumeName;
}

/** CSI GetVolumeName: "<driver>^<handle>". */
export function csiVolumeName(driver: string, handle: string): string {
  return `${driver}^${handle}`;
}

/** The VolumeAttachment name / attachmentID: "csi-" + sha256hex(handle + driver + node). */
export function getAttachmentName(handle: string, driver: string, nodeName: string): string {
  return `csi-${sha256Hex(handle + driver + nodeName)}`;
}

/** The handle kubelet synthesises for an inline ephemeral volume: "csi-" + sha256hex(podUID + volumeName). */
export function makeEphemeralVolumeHandle(podUID: string, volumeName: string): string {
  return `csi-${sha256Hex(podUID + volumeName)}`;
}

/** Whether `s` is a 64-character lowercase hex string (a staging directory name). */
export function isSha256Hex(s: string): boolean {
  return /^[0-9a-f]{64}$/.test(s);
}

/**
 * Whether `name` can be used as one path component without leaving its parent:
 * non-empty, no "/", no NUL, and not "." or "..".
 */
export function isSafePathComponent(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !name.includes('\0');
}
