/**
 * Test helper for the operation generator's operations run alone (test/unit/operationexecutor/):
 * pod-2's VolumeToMount of a CSI PV, and an actual state that records each mark.
 */
import type { UniquePodName, UniqueVolumeName } from '../../src/layout/names.js';
import type { PersistentVolume } from '../../src/api/core.js';
import type { ActualStateOfWorldAttacherUpdater, ActualStateOfWorldMounterUpdater } from '../../src/operationexecutor/actualStateOfWorldUpdater.js';
import type { VolumeToMount } from '../../src/operationexecutor/volumeToMount.js';
import type { Spec } from '../../src/volume/spec.js';
import { DRIVER } from './inMemoryNode.js';

/** The unique name of pv-1 (handle vol-1) of the in-memory node's driver. */
export const VOLUME = `kubernetes.io/csi/${DRIVER}^vol-1` as UniqueVolumeName;

/** pv-1, a CSI PV of the in-memory node's driver (handle vol-1), with `over`'s fields. */
export function csiPvSpec(over: Partial<PersistentVolume> = {}): Spec {
  return { kind: 'persistent', readOnly: false, persistentVolume: { name: 'pv-1', csi: { driver: DRIVER, volumeHandle: 'vol-1' }, ...over } };
}

/** Pod pod-2 (UID uid-2)'s volume `data`, pv-1, attachable and reported in use; `over` replaces fields. */
export function volumeToMount(over: Partial<VolumeToMount> = {}): VolumeToMount {
  return {
    podName: 'uid-2' as UniquePodName,
    pod: { uid: 'uid-2', namespace: 'default', name: 'pod-2' },
    spec: csiPvSpec(),
    outerVolumeSpecName: 'data',
    seLinuxMountContext: '',
    volumeName: VOLUME,
    pluginName: 'kubernetes.io/csi',
    pluginIsAttachable: true,
    pluginIsDeviceMountable: true,
    reportedInUse: true,
    ...over,
  } as VolumeToMount;
}

/**
 * An actual state that records each mark (`name args...`, the args as JSON) and answers the
 * other methods from `answers` (any other throws); a mark in `answers` is recorded, then called
 * (it may throw). `marks` may be shared with a fake plugin's record, for the order of both.
 */
export function recordingAsw(
  answers: Record<string, (...args: unknown[]) => unknown> = {},
  marks: string[] = [],
): { asw: ActualStateOfWorldMounterUpdater & ActualStateOfWorldAttacherUpdater; marks: string[] } {
  const asw = new Proxy(
    {},
    {
      get: (_t, name) => {
        if (typeof name !== 'string') return undefined;
        return (...args: unknown[]) => {
          if (name.startsWith('mark')) marks.push([name, ...args.map((a) => JSON.stringify(a))].join(' '));
          const answer = answers[name];
          if (answer !== undefined) return answer(...args);
          if (!name.startsWith('mark')) throw new Error(`unexpected asw.${name}`);
          return undefined;
        };
      },
    },
  );
  return { asw: asw as ActualStateOfWorldMounterUpdater & ActualStateOfWorldAttacherUpdater, marks };
}
