/**
 * The spec-building half of reconstructVolume (reconstruct_common.go):
 * from one pod-directory candidate to a spec and the unique volume name the desired state would
 * use. The actual-state half (updateStates) belongs to the volume manager and builds on this.
 */
import { getUniqueVolumeName, getUniqueVolumeNameWithPod, type UniqueVolumeName } from '../../layout/names.js';
import type { VolumeDataSource, VolumePluginMgr } from '../../volume/plugins.js';
import { specName, type Spec } from '../../volume/spec.js';
import type { PodVolume } from './podVolumes.js';

export interface ReconstructedSpec {
  readonly volume: PodVolume;
  readonly uniqueVolumeName: UniqueVolumeName;
  readonly spec: Spec;
  readonly seLinuxMountContext: string;
  readonly dataSource: VolumeDataSource;
  /** Set when the plugin can device-mount the spec: the device mount path computed from it. */
  readonly deviceMountPath: string | undefined;
}

export class ReconstructionError extends Error {
  override readonly name = 'ReconstructionError';
}

/**
 * Rebuilds the spec of one candidate. Throws a {@link ReconstructionError} naming the candidate
 * for every failure point of kubelet's reconstructVolume that needs no API server.
 */
export async function reconstructVolumeSpec(plugins: VolumePluginMgr, volume: PodVolume): Promise<ReconstructedSpec> {
  try {
    const plugin = plugins.findPluginByName(volume.pluginName);
    let spec: Spec;
    let seLinuxMountContext = '';
    let dataSource: VolumeDataSource = 'pod-local';
    let deviceMountPath: string | undefined;
    if (volume.volumeMode === 'Block') {
      const mapper = plugins.findMapperPluginByName(volume.pluginName);
      if (mapper === undefined) throw new Error(`could not find block volume plugin ${JSON.stringify(volume.pluginName)}`);
      spec = await mapper.constructBlockVolumeSpec(volume.podName, volume.volumeSpecName, volume.volumePath);
      deviceMountPath = mapper.getGlobalMapPath(spec);
    } else {
      const reconstructed = await plugin.constructVolumeSpec(volume.volumeSpecName, volume.volumePath, { parentsVerified: volume.parentsVerified });
      spec = reconstructed.spec;
      seLinuxMountContext = reconstructed.seLinuxMountContext;
      dataSource = reconstructed.dataSource;
    }
    const deviceMountable = plugins.findDeviceMountablePluginBySpec(spec);
    let uniqueVolumeName: UniqueVolumeName;
    if (deviceMountable !== undefined) {
      uniqueVolumeName = getUniqueVolumeName(plugin.getPluginName(), deviceMountable.getVolumeName(spec));
      if (volume.volumeMode === 'Filesystem') deviceMountPath = deviceMountable.getDeviceMountPath(spec);
    } else {
      uniqueVolumeName = getUniqueVolumeNameWithPod(plugin.getPluginName(), volume.podName, specName(spec));
    }
    return { volume, uniqueVolumeName, spec, seLinuxMountContext, dataSource, deviceMountPath };
  } catch (err) {
    if (err instanceof ReconstructionError) throw err;
    // Built only on failure: a node's walk reconstructs thousands of candidates.
    const where = `pod ${volume.podName} volume ${JSON.stringify(volume.volumeSpecName)} (${volume.volumePath})`;
    throw new ReconstructionError(`could not construct volume information for ${where}: ${err instanceof Error ? err.message : String(err)}`);
  }
}
