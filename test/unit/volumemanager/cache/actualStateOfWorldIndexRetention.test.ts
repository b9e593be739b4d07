// The ASW's per-pod index must let go of what the books let go of: a long-running node mounts and
// removes volumes for pods all day, and a removed volume's record (with its spec) kept alive by a
// stale index entry would grow the daemon without bound. In a file of its own because it turns on
// the garbage collector's hook for this test process only.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { UniquePodName, UniqueVolumeName } from '../../../../src/layout/names.js';
import type { MarkVolumeOpts } from '../../../../src/operationexecutor/actualStateOfWorldUpdater.js';
import { createActualStateOfWorld } from '../../../../src/volumemanager/cache/actualStateOfWorld.js';
import { constructPVSourceSpec, specName, type Spec } from '../../../../src/volume/spec.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const PLUGIN = 'kubernetes.io/csi';
const DRIVER = 'csi.example.com';
const V1 = `${PLUGIN}/${DRIVER}^vol-1` as UniqueVolumeName;
const POD_A = 'pod-a' as UniquePodName;

/** V1 mounted for `podName` (its UID the same). */
function mountedFor(podName: UniquePodName, spec: Spec): MarkVolumeOpts {
  return {
    podName,
    podUID: podName,
    volumeName: V1,
    volumeSpec: spec,
    outerVolumeSpecName: 'data',
    innerVolumeSpecName: specName(spec),
    pluginName: PLUGIN,
    volumeMountState: 'VolumeMounted',
    seLinuxMountContext: '',
  };
}

describe('ASW per-pod index: retention', () => {
  it('a volume unmounted by its pod and then detached is no longer held by the books', async () => {
    const asw = createActualStateOfWorld();
    // Only the books hold the spec once this block ends. A WeakRef's target is kept until the
    // current job ends, so each collection below waits for the next one.
    const ref = ((): WeakRef<Spec> => {
      const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1');
      asw.markVolumeAsAttached(V1, spec, PLUGIN, '', true);
      asw.markVolumeAsMounted(mountedFor(POD_A, spec));
      return new WeakRef(spec);
    })();
    await new Promise<void>((resolve) => setImmediate(resolve));
    gc();
    assert.notEqual(ref.deref(), undefined, 'held while the volume is in the books');

    asw.markVolumeAsUnmounted(POD_A, V1);
    asw.markVolumeAsDetached(V1);
    assert.deepEqual(asw.getAttachedVolumes(), []);
    await new Promise<void>((resolve) => setImmediate(resolve));
    gc();
    assert.equal(ref.deref(), undefined, 'the removed volume is not held by the per-pod index');
  });

  // A pod's entry in the per-pod index goes with its last volume. Kept, each pod ever unmounted
  // would hold an empty map for the daemon's life: about 28 MB per 100,000 pods, measured.
  it('a volume mounted and unmounted for 100,000 pods in turn leaves the heap where it was', async () => {
    const asw = createActualStateOfWorld();
    const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1');
    asw.markVolumeAsAttached(V1, spec, PLUGIN, '', true);
    const cycle = (from: number, to: number): void => {
      for (let i = from; i < to; i++) {
        const podName = `pod-${i}` as UniquePodName;
        asw.markVolumeAsMounted(mountedFor(podName, spec));
        asw.markVolumeAsUnmounted(podName, V1);
      }
    };
    cycle(0, 1_000); // warm: every code path compiled and its caches made before the first measure
    await new Promise<void>((resolve) => setImmediate(resolve));
    gc();
    const before = process.memoryUsage().heapUsed;
    cycle(1_000, 101_000);
    await new Promise<void>((resolve) => setImmediate(resolve));
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    assert.deepEqual(asw.getMountedVolumes(), []);
    assert.ok(grown < 4 << 20, `the heap grew by ${(grown / (1 << 20)).toFixed(1)} MB`);
  });
});
