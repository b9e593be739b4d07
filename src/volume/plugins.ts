/**
 * The volume plugin framework (pkg/volume/plugins.go): plugin interfaces, optional capability
 * interfaces recognised by type guards, and the plugin manager's Find helpers.
 *
 * KEP-6058 adds {@link GlobalVolumeListerPlugin}: a plugin that keeps global mounts outside any
 * pod directory lists them, so that the volume manager never learns a plugin's layout.
 */
import type { PersistentVolumeMode } from '../api/core.js';
import type { Spec } from './spec.js';

/** Where a reconstructed volume's data came from (nodevol addition; used for metrics labels). */
export type VolumeDataSource = 'pod-local' | 'global-fallback';

/** ReconstructedVolume: what ConstructVolumeSpec returns. */
export interface ReconstructedVolume {
  readonly spec: Spec;
  /** Value of -o context=XYZ; empty means not used. */
  readonly seLinuxMountContext: string;
  /** Which vol_data.json the spec was rebuilt from. */
  readonly dataSource: VolumeDataSource;
}

/** GlobalVolume (KEP-6058 Design Details item 2). */
export interface GlobalVolume {
  readonly spec: Spec;
  readonly seLinuxMountContext: string;
  /** Advisory: UnmountDevice recomputes the path from the spec. */
  readonly deviceMountPath: string;
  readonly volumeMode: PersistentVolumeMode;
}

export interface ConstructOptions {
  readonly parentsVerified?: boolean;
}

/** The pod a mounter works for. */
export interface PodRef {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  /** spec.serviceAccountName (pod information for drivers with podInfoOnMount). */
  readonly serviceAccountName?: string;
}

/**
 * The args of MountDevice, SetUp and (nodevol: kubelet's takes none) SetUpDevice. The operation
 * generator's mounterArgs hook may add nodevol's own facts (a module augmentation in src/nodevol/).
 */
export interface MounterArgs {
  readonly fsGroup?: number;
  readonly seLinuxLabel?: string;
}

/** Mounter: SetUp publishes the volume into the pod's volume directory. */
export interface VolumeMounter {
  /** The pod-local target path. */
  getPath(): string;
  setUp(args: MounterArgs): Promise<void>;
}

/** Unmounter: TearDown unpublishes it. */
export interface VolumeUnmounter {
  getPath(): string;
  tearDown(): Promise<void>;
}

export interface DeviceMounter {
  getDeviceMountPath(spec: Spec): string;
  mountDevice(spec: Spec, devicePath: string, deviceMountPath: string, args: MounterArgs): Promise<void>;
}

export interface DeviceUnmounter {
  unmountDevice(deviceMountPath: string): Promise<void>;
}

/** Raw block: stage (SetUpDevice), publish (MapPodDevice), and the pod's device link. */
export interface BlockVolumeMapper {
  getGlobalMapPath(spec: Spec): string;
  getPodDeviceMapPath(): { dir: string; name: string };
  /**
   * NodeStageVolume at the staging path; returns it ('' without STAGE_UNSTAGE). `args`: what the
   * operation generator's mounterArgs hook gave (none in kubelet), for the CSI plugin's hooks.
   */
  setUpDevice(args?: MounterArgs): Promise<string>;
  /** NodePublishVolume at the publish path; returns it. */
  mapPodDevice(): Promise<string>;
}

export interface BlockVolumeUnmapper {
  /** NodeUnpublishVolume at the publish path (even when it is gone). */
  unmapPodDevice(): Promise<void>;
  /** NodeUnstageVolume and removal of the volume's block files. */
  tearDownDevice(mapPath: string, devicePath: string): Promise<void>;
}

export interface VolumePlugin {
  getPluginName(): string;
  canSupport(spec: Spec): boolean;
  /** The plugin's part of the unique volume name; throws when the spec cannot name one. */
  getVolumeName(spec: Spec): string;
  /**
   * Rebuilds a spec from a pod volume directory (`volumePath`) named `volumeName`. nodevol
   * addition: `options.parentsVerified` says the caller reached the directory without following
   * a symlink from inside the root dir, which spares re-checking that.
   */
  constructVolumeSpec(volumeName: string, volumePath: string, options?: ConstructOptions): Promise<ReconstructedVolume>;
  newMounter(spec: Spec, pod: PodRef): Promise<VolumeMounter>;
  /** Builds an unmounter from what is on disk; rejects when that cannot be read. */
  newUnmounter(specName: string, podUID: string): Promise<VolumeUnmounter>;
}

export interface AttachableVolumePlugin extends VolumePlugin {
  readonly attachable: true;
  /** Whether the volume needs attaching (CSI: the CSIDriver's attachRequired; rejects when unknown). */
  canAttach(spec: Spec): Promise<boolean>;
}

export interface DeviceMountableVolumePlugin extends VolumePlugin {
  readonly deviceMountable: true;
  /** false for volumes that never get a global mount (CSI inline ephemeral). */
  canDeviceMount(spec: Spec): boolean;
  /** The global mount path for a spec; throws when the spec has none. */
  getDeviceMountPath(spec: Spec): string;
  getDeviceMountRefs(deviceMountPath: string): Promise<string[]>;
  newDeviceMounter(): DeviceMounter;
  newDeviceUnmounter(): DeviceUnmounter;
}

export interface BlockVolumePlugin extends VolumePlugin {
  readonly blockVolume: true;
  constructBlockVolumeSpec(podUID: string, specVolName: string, mapPath: string): Promise<Spec>;
  /** GetGlobalMapPath: where the block volume's device mount path is for the ASW. */
  getGlobalMapPath(spec: Spec): string;
  newBlockVolumeMapper(spec: Spec, pod: PodRef): Promise<BlockVolumeMapper>;
  newBlockVolumeUnmapper(specName: string, podUID: string): Promise<BlockVolumeUnmapper>;
}

/** Implemented by plugins that keep a global mount outside any pod directory (KEP-6058). */
export interface GlobalVolumeListerPlugin extends DeviceMountableVolumePlugin {
  readonly globalVolumeLister: true;
  /**
   * Only reads (the CSI plugin's globalDirSkipped hook may also remove a leftover volume
   * directory, or finish nodevol's own interrupted vol_data.json write with a rename). One
   * unreadable directory never hides the others.
   */
  listGlobalVolumes(): Promise<GlobalVolume[]>;
}

export function isDeviceMountablePlugin(p: VolumePlugin): p is DeviceMountableVolumePlugin {
  return (p as Partial<DeviceMountableVolumePlugin>).deviceMountable === true;
}
export function isAttachableVolumePlugin(p: VolumePlugin): p is AttachableVolumePlugin {
  return (p as Partial<AttachableVolumePlugin>).attachable === true;
}
export function isBlockVolumePlugin(p: VolumePlugin): p is BlockVolumePlugin {
  return (p as Partial<BlockVolumePlugin>).blockVolume === true;
}
export function isGlobalVolumeListerPlugin(p: VolumePlugin): p is GlobalVolumeListerPlugin {
  return (p as Partial<GlobalVolumeListerPlugin>).globalVolumeLister === true && isDeviceMountablePlugin(p);
}

export class PluginNotFoundError extends Error {
  override readonly name = 'PluginNotFoundError';
}

/** VolumePluginMgr: the registered plugins and the Find helpers kubelet uses. */
export class VolumePluginMgr {
  private readonly byName: ReadonlyMap<string, VolumePlugin>;

  constructor(plugins: readonly VolumePlugin[]) {
    const m = new Map<string, VolumePlugin>();
    for (const p of plugins) {
      const name = p.getPluginName();
      if (m.has(name)) throw new Error(`volume plugin ${JSON.stringify(name)} registered twice`);
      m.set(name, p);
    }
    this.byName = m;
  }

  findPluginByName(name: string): VolumePlugin {
    const p = this.byName.get(name);
    if (p === undefined) throw new PluginNotFoundError(`no volume plugin matched name: ${name}`);
    return p;
  }

  findPluginBySpec(spec: Spec): VolumePlugin {
    const matches = [...this.byName.values()].filter((p) => p.canSupport(spec));
    if (matches.length === 0) throw new PluginNotFoundError('no volume plugin matched');
    if (matches.length > 1) {
      throw new PluginNotFoundError(`multiple volume plugins matched: ${matches.map((p) => p.getPluginName()).join(',')}`);
    }
    return matches[0] as VolumePlugin;
  }

  /** Returns a plugin only when it can device-mount this spec (≈v1.30 semantics); else undefined. */
  findDeviceMountablePluginBySpec(spec: Spec): DeviceMountableVolumePlugin | undefined {
    const p = this.findPluginBySpec(spec);
    return isDeviceMountablePlugin(p) && p.canDeviceMount(spec) ? p : undefined;
  }

  /** By name: no canDeviceMount check (used by UnmountDevice). */
  findDeviceMountablePluginByName(name: string): DeviceMountableVolumePlugin | undefined {
    const p = this.findPluginByName(name);
    return isDeviceMountablePlugin(p) ? p : undefined;
  }

  /** A plugin only when the spec needs attaching; undefined otherwise. Rejects when that is unknown. */
  async findAttachablePluginBySpec(spec: Spec): Promise<AttachableVolumePlugin | undefined> {
    const p = this.findPluginBySpec(spec);
    if (!isAttachableVolumePlugin(p)) return undefined;
    return (await p.canAttach(spec)) ? p : undefined;
  }

  findAttachablePluginByName(name: string): AttachableVolumePlugin | undefined {
    const p = this.findPluginByName(name);
    return isAttachableVolumePlugin(p) ? p : undefined;
  }

  findMapperPluginBySpec(spec: Spec): BlockVolumePlugin | undefined {
    const p = this.findPluginBySpec(spec);
    return isBlockVolumePlugin(p) ? p : undefined;
  }

  findMapperPluginByName(name: string): BlockVolumePlugin | undefined {
    const p = this.findPluginByName(name);
    return isBlockVolumePlugin(p) ? p : undefined;
  }

  /** Every plugin implementing GlobalVolumeListerPlugin, in registration order. */
  findGlobalVolumeListerPlugins(): GlobalVolumeListerPlugin[] {
    return [...this.byName.values()].filter(isGlobalVolumeListerPlugin);
  }
}
