// The ASW's per-pod index must let go of what the books let go of: a long-running node mounts and
// removes volumes for pods all day, and a removed volume's record (with its spec) kept alive by a
// stale index entry would grow the daemon without bound. In a file of its own because it turns on
// the garbage collector's hook for this test process only.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { UniquePodName, UniqueVolumeName } from '../../../../src/layout/names.js';
import { createActualStateOfWorld } from '../../../../src/volumemanager/cache/actualStateOfWorld.js';
import { constructPVSourceSpec, specName, type Spec } from '../../../../src/volume/spec.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const PLUGIN = 'kubernetes.io/csi';
const DRIVER = 'csi.example.com';
const V1 = `${PLUGIN}/${DRIVER}^vol-1` as UniqueVolumeName;
const POD_A = 'pod-a' as UniquePodName;

describe('ASW per-pod index: retention', () => {
  it('a volume unmounted by its pod and then detached is no longer held by the books', async () => {
    const asw = createActualStateOfWorld();
    // Only the books hold the spec once this block ends. A WeakRef's target is kept until the
    // current job ends, so each collection below waits for the next one.
    const ref = ((): WeakRef<Spec> => {
      const spec = constructPVSourceSpec('pv-1', DRIVER, 'vol-1');
      asw.markVolumeAsAttached(V1, spec, PLUGIN, '', true);
      asw.markVolumeAsMounted({
        podName: POD_A,
        podUID: POD_A,
        volumeName: V1,
        volumeSpec: spec,
        outerVolumeSpecName: 'data',
        innerVolumeSpecName: specName(spec),
        pluginName: PLUGIN,
        volumeMountState: 'VolumeMounted',
        seLinuxMountContext: '',
      });
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
});
