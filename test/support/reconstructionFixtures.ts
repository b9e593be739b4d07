// What reconstruction hands nodevol's gates, built for their tests: a volume the global listing
// registered, a pod volume directory that failed reconstruction, a raw block publish target left
// on the in-memory node, and an object with some of its methods replaced (to count or fail calls).
import assert from 'node:assert/strict';
import type { PersistentVolumeMode } from '../../src/api/core.js';
import { CSI_PLUGIN_NAME, type UniquePodName, type UniqueVolumeName } from '../../src/layout/names.js';
import { constructPVSourceSpec } from '../../src/volume/spec.js';
import type { PodVolume } from '../../src/volumemanager/reconciler/podVolumes.js';
import type { RegisteredGlobalVolume } from '../../src/volumemanager/reconciler/reconstructHooks.js';
import { DRIVER, ROOT, type InMemoryNode } from './inMemoryNode.js';

/** A volume of {@link DRIVER} the global listing registered (handle `handle-<pv>` unless given). */
export function listedVolume(pvName: string, mode: PersistentVolumeMode, o: { handle?: string; seLinuxMountContext?: string } = {}): RegisteredGlobalVolume {
  const handle = o.handle ?? `handle-${pvName}`;
  return {
    volumeName: `${CSI_PLUGIN_NAME}/${DRIVER}^${handle}` as UniqueVolumeName,
    pluginName: CSI_PLUGIN_NAME,
    spec: constructPVSourceSpec(pvName, DRIVER, handle, mode),
    volumeMode: mode,
    seLinuxMountContext: o.seLinuxMountContext ?? '',
  };
}

/** The pod volume directory `pods/<pod>/volumes/kubernetes.io~csi/<specName>` under {@link ROOT}. */
export function podVolumeDirOf(pod: string, specName: string): string {
  return `${ROOT}/pods/${pod}/volumes/kubernetes.io~csi/${specName}`;
}

/** A pod volume directory (Filesystem unless overridden) that failed reconstruction. */
export function failedPodVolumeDir(pod: UniquePodName, specName: string, o: Partial<PodVolume> = {}): PodVolume {
  return {
    podName: pod,
    volumeSpecName: specName,
    volumePath: podVolumeDirOf(pod, specName),
    pluginName: CSI_PLUGIN_NAME,
    volumeMode: 'Filesystem',
    entryType: 'directory',
    parentsVerified: true,
    ...o,
  };
}

/** A raw block publish target (`volumeDevices/publish/<pv>/<pod uid>`) as NodePublishVolume left it: an empty file. */
export function writeBlockPublishTarget(node: InMemoryNode, v: RegisteredGlobalVolume, pod: string): void {
  assert.ok(v.spec.kind === 'persistent');
  node.fs.writeRaw(node.layout.csiBlockPublishPath(v.spec.persistentVolume.name, pod), '');
}

/** `target`, with the methods of `overrides` in place of its own (the others bound to `target`). */
export function intercept<T extends object>(target: T, overrides: Partial<T>): T {
  return new Proxy(target, {
    get(t, key) {
      if (Object.prototype.hasOwnProperty.call(overrides, key)) return (overrides as Record<string | symbol, unknown>)[key];
      const value: unknown = Reflect.get(t, key, t);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value;
    },
  });
}
