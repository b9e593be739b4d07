/**
 * The on-disk layout of a kubelet root directory (kubelet_getters.go, csi_attacher.go, csi_mounter.go,
 * csi_block.go), byte for byte.
 *
 * One object per root dir; every path nodevol reads or writes under the root is built here, so
 * a reader of kubelet's kubelet_getters.go, csi_attacher.go, csi_mounter.go and csi_block.go
 * finds each path once. No I/O happens here.
 */
import * as path from 'node:path/posix';
import { CSI_PLUGIN_NAME, escapeQualifiedName, isSafePathComponent, sha256Hex } from './names.js';

/** kubelet config/defaults.go directory names. */
export const DEFAULT_ROOT_DIR = '/var/lib/kubelet';
export const PODS_DIR_NAME = 'pods';
export const VOLUMES_DIR_NAME = 'volumes';
export const VOLUME_SUBPATHS_DIR_NAME = 'volume-subpaths';
export const VOLUME_DEVICES_DIR_NAME = 'volumeDevices';
export const PLUGINS_DIR_NAME = 'plugins';
export const PLUGINS_REGISTRY_DIR_NAME = 'plugins_registry';
export const CONTAINERS_DIR_NAME = 'containers';

/** Name of the staging directory under a CSI volume dir, and of the pod-local publish target. */
export const GLOBAL_MOUNT_DIR_NAME = 'globalmount';
export const POD_MOUNT_DIR_NAME = 'mount';
/** Siblings of the per-volume directories in the CSI block tree (not volumes). */
export const BLOCK_STAGING_DIR_NAME = 'staging';
export const BLOCK_PUBLISH_DIR_NAME = 'publish';
export const BLOCK_DATA_DIR_NAME = 'data';
export const BLOCK_DEV_DIR_NAME = 'dev';
/** The pre-1.24 global layout: plugins/kubernetes.io/csi/pv/<pvName>/globalmount: kubelet >= 1.24
 * stages at <driver>/<sha256(handle)> and never unstages this one. */
export const LEGACY_PV_DIR_NAME = 'pv';

/** Directory mode kubelet uses for every directory it creates for a volume. */
export const VOLUME_DIR_MODE = 0o750;

export class KubeletLayout {
  /** The fixed directories, joined once (a walk asks for them for every volume). */
  readonly #podsDir: string;
  readonly #pluginsDir: string;
  readonly #csiPluginDir: string;
  readonly #csiBlockDir: string;

  /** @param rootDir absolute kubelet root dir, e.g. /var/lib/kubelet */
  constructor(readonly rootDir: string) {
    if (!path.isAbsolute(rootDir)) throw new Error(`root dir must be an absolute path, got ${JSON.stringify(rootDir)}`);
    this.rootDir = path.normalize(rootDir).replace(/(.)\/$/, '$1');
    this.#podsDir = path.join(this.rootDir, PODS_DIR_NAME);
    this.#pluginsDir = path.join(this.rootDir, PLUGINS_DIR_NAME);
    this.#csiPluginDir = path.join(this.#pluginsDir, CSI_PLUGIN_NAME);
    this.#csiBlockDir = path.join(this.#csiPluginDir, VOLUME_DEVICES_DIR_NAME);
  }

  // ---- kubelet-wide (kubelet_getters.go) ----

  podsDir(): string {
    return this.#podsDir;
  }
  podDir(podUID: string): string {
    return path.join(this.#podsDir, podUID);
  }
  podVolumesDir(podUID: string): string {
    return path.join(this.podDir(podUID), VOLUMES_DIR_NAME);
  }
  /** <root>/pods/<uid>/volumes/<escapedPluginName>/<volumeName>: the caller passes the escaped plugin name. */
  podVolumeDir(podUID: string, escapedPluginName: string, volumeName: string): string {
    return path.join(this.podVolumesDir(podUID), escapedPluginName, volumeName);
  }
  podVolumeDevicesDir(podUID: string): string {
    return path.join(this.podDir(podUID), VOLUME_DEVICES_DIR_NAME);
  }
  podVolumeSubpathsDir(podUID: string): string {
    return path.join(this.podDir(podUID), VOLUME_SUBPATHS_DIR_NAME);
  }
  pluginsDir(): string {
    return this.#pluginsDir;
  }
  /** <root>/plugins/<pluginName>: the plugin name is NOT escaped, so kubernetes.io/csi nests. */
  pluginDir(pluginName: string): string {
    return path.join(this.pluginsDir(), pluginName);
  }
  /** <root>/plugins/<pluginName>/volumeDevices */
  volumeDevicePluginDir(pluginName: string): string {
    return path.join(this.pluginDir(pluginName), VOLUME_DEVICES_DIR_NAME);
  }
  pluginsRegistryDir(): string {
    return path.join(this.rootDir, PLUGINS_REGISTRY_DIR_NAME);
  }
  /** Conventional driver socket location: <root>/plugins/<driver>/csi.sock */
  driverSocketPath(driverName: string): string {
    return path.join(this.pluginsDir(), driverName, 'csi.sock');
  }

  // ---- CSI filesystem volumes (csi_attacher.go, csi_mounter.go) ----

  csiPluginDir(): string {
    return this.#csiPluginDir;
  }
  csiDriverDir(driverName: string): string {
    return path.join(this.#csiPluginDir, driverName);
  }
  /** The "volume dir" holding globalmount/ and the global vol_data.json. */
  csiVolumeDir(driverName: string, volumeHandle: string): string {
    return path.join(this.#csiPluginDir, driverName, sha256Hex(volumeHandle));
  }
  /** makeDeviceMountPath: the staging target path. */
  csiDeviceMountPath(driverName: string, volumeHandle: string): string {
    // A driver name that is one plain path component joins as plain text (what path.join gives).
    if (isSafePathComponent(driverName)) return `${this.#csiPluginDir}/${driverName}/${sha256Hex(volumeHandle)}/${GLOBAL_MOUNT_DIR_NAME}`;
    return path.join(this.#csiPluginDir, driverName, sha256Hex(volumeHandle), GLOBAL_MOUNT_DIR_NAME);
  }
  /** Pre-1.24 staging dir of a PV (see LEGACY_PV_DIR_NAME). */
  csiLegacyDeviceMountPath(pvName: string): string {
    return path.join(this.csiPluginDir(), LEGACY_PV_DIR_NAME, pvName, GLOBAL_MOUNT_DIR_NAME);
  }
  /** <root>/pods/<uid>/volumes/kubernetes.io~csi/<escaped spec> */
  csiPodVolumeDir(podUID: string, specName: string): string {
    return this.podVolumeDir(podUID, escapeQualifiedName(CSI_PLUGIN_NAME), escapeQualifiedName(specName));
  }
  /** The NodePublishVolume target path: pod volume dir + /mount. */
  csiPodMountPath(podUID: string, specName: string): string {
    return path.join(this.csiPodVolumeDir(podUID, specName), POD_MOUNT_DIR_NAME);
  }

  // ---- CSI raw block volumes (csi_block.go, csi_util.go) ----

  csiBlockDir(): string {
    return this.#csiBlockDir;
  }
  /** getVolumePluginDir: volumeDevices/<escaped spec> */
  csiBlockVolumeDir(specName: string): string {
    return path.join(this.csiBlockDir(), escapeQualifiedName(specName));
  }
  /** getVolumeDeviceDataDir: volumeDevices/<escaped spec>/data (holds the block vol_data.json) */
  csiBlockDataDir(specName: string): string {
    return path.join(this.csiBlockVolumeDir(specName), BLOCK_DATA_DIR_NAME);
  }
  /** GetGlobalMapPath: volumeDevices/<escaped spec>/dev; the ASW device mount path of a block volume. */
  csiGlobalMapPath(specName: string): string {
    return path.join(this.csiBlockVolumeDir(specName), BLOCK_DEV_DIR_NAME);
  }
  /** getStagingPath: volumeDevices/staging/<spec> (raw spec name, ≈v1.20). */
  csiBlockStagingPath(specName: string): string {
    return path.join(this.csiBlockDir(), BLOCK_STAGING_DIR_NAME, specName);
  }
  /** volumeDevices/publish/<spec> */
  csiBlockPublishDir(specName: string): string {
    return path.join(this.csiBlockDir(), BLOCK_PUBLISH_DIR_NAME, specName);
  }
  /** getPublishPath: volumeDevices/publish/<spec>/<podUID> */
  csiBlockPublishPath(specName: string, podUID: string): string {
    return path.join(this.csiBlockPublishDir(specName), podUID);
  }
  /** GetPodDeviceMapPath: (pods/<uid>/volumeDevices/kubernetes.io~csi, <spec>) */
  csiPodDeviceMapPath(podUID: string, specName: string): { dir: string; name: string } {
    return { dir: path.join(this.podVolumeDevicesDir(podUID), escapeQualifiedName(CSI_PLUGIN_NAME)), name: specName };
  }

  /** Whether `p` (already normalised) is the root dir or below it. */
  contains(p: string): boolean {
    return p === this.rootDir || p.startsWith(this.rootDir === '/' ? '/' : `${this.rootDir}/`);
  }
}
