// The per-pod indexes and the kept sort of the ASW and DSW: a per-pod
// question costs the pod's volumes, not every volume on the node, and must answer exactly what
// a scan of the whole state answers. Seeded random sequences of every verb that adds or removes
// a pod or a volume, checked after each step against the full listings and a plain model.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from '../../../../src/api/core.js';
import type { UniquePodName, UniqueVolumeName } from '../../../../src/layout/names.js';
import { Prng } from '../../../../src/sim/prng.js';
import { createActualStateOfWorld, type ActualStateOfWorld } from '../../../../src/volumemanager/cache/actualStateOfWorld.js';
import { type MarkVolumeOpts } from '../../../../src/operationexecutor/actualStateOfWorldUpdater.js';
import { createDesiredStateOfWorld, type DesiredStateOfWorld } from '../../../../src/volumemanager/cache/desiredStateOfWorld.js';
import { constructPVSourceSpec, specName, type Spec } from '../../../../src/volume/spec.js';

const PLUGIN = 'kubernetes.io/csi';
const DRIVER = 'csi.example.com';
const VOLUMES = 6;
const PODS = 5;
const STEPS = 400;
const SEEDS = [1, 2, 3, 42, 1234];

const vol = (i: number): UniqueVolumeName => `${PLUGIN}/${DRIVER}^vol-${i}` as UniqueVolumeName;
const pod = (i: number): UniquePodName => `pod-${i}` as UniquePodName;
/** Two spec names per volume, so that a pod's record can be replaced by one with another name. */
const spec = (i: number, variant: number): Spec => constructPVSourceSpec(`pv-${i}-${variant}`, DRIVER, `vol-${i}`);
const podOf = (p: UniquePodName): Pod => ({ uid: p, namespace: 'default', name: p, nodeName: 'node-1', volumes: [], volumeMounts: [], volumeDevices: [] });
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function markOpts(p: UniquePodName, v: number, variant: number): MarkVolumeOpts {
  const s = spec(v, variant);
  return {
    podName: p,
    podUID: p,
    volumeName: vol(v),
    volumeSpec: s,
    outerVolumeSpecName: 'data',
    innerVolumeSpecName: specName(s),
    pluginName: PLUGIN,
    volumeMountState: 'VolumeMounted',
    seLinuxMountContext: '',
  };
}

/** Every per-pod answer of the ASW equals the one the full listing gives. */
function checkAsw(asw: ActualStateOfWorld, where: string): void {
  const all = asw.getAllMountedVolumes();
  const keys = all.map((m) => `${m.volumeName} ${m.podName}`);
  assert.deepEqual(keys, [...keys].sort(cmp), `${where}: getAllMountedVolumes sorted by volume, then pod`);
  assert.deepEqual(
    asw.getAttachedVolumes().map((v) => v.volumeName),
    asw
      .getAttachedVolumes()
      .map((v) => v.volumeName)
      .sort(cmp),
    `${where}: getAttachedVolumes sorted`,
  );
  for (let p = 0; p < PODS; p++) {
    const podName = pod(p);
    assert.deepEqual(asw.getPossiblyMountedVolumesForPod(podName), all.filter((m) => m.podName === podName), `${where}: getPossiblyMountedVolumesForPod(${podName})`);
    for (let v = 0; v < VOLUMES; v++) {
      for (const variant of [0, 1]) {
        const name = specName(spec(v, variant));
        assert.equal(
          asw.volumeExistsWithSpecName(podName, name),
          all.some((m) => m.podName === podName && specName(m.volumeSpec) === name),
          `${where}: ASW volumeExistsWithSpecName(${podName}, ${name})`,
        );
      }
    }
  }
}

/** Every per-pod answer of the DSW equals the one the full listing and the model give. */
function checkDsw(dsw: DesiredStateOfWorld, model: Map<UniqueVolumeName, Map<UniquePodName, string>>, where: string): void {
  const all = dsw.getVolumesToMount();
  const expected: string[] = [];
  for (const v of [...model.keys()].sort(cmp)) for (const p of [...(model.get(v)?.keys() ?? [])].sort(cmp)) expected.push(`${v} ${p}`);
  assert.deepEqual(
    all.map((m) => `${m.volumeName} ${m.podName}`),
    expected,
    `${where}: getVolumesToMount is the model, sorted by volume, then pod`,
  );
  assert.deepEqual(dsw.getPods(), [...new Set(all.map((m) => m.podName))].sort(cmp), `${where}: getPods`);
  for (let v = 0; v < VOLUMES; v++) assert.equal(dsw.volumeExists(vol(v)), model.has(vol(v)), `${where}: volumeExists(${vol(v)})`);
  for (let p = 0; p < PODS; p++) {
    const podName = pod(p);
    for (let v = 0; v < VOLUMES; v++) {
      for (const variant of [0, 1]) {
        const name = specName(spec(v, variant));
        assert.equal(
          dsw.volumeExistsWithSpecName(podName, name),
          all.some((m) => m.podName === podName && specName(m.spec) === name),
          `${where}: DSW volumeExistsWithSpecName(${podName}, ${name})`,
        );
      }
    }
  }
}

describe('ASW per-pod index and kept sort', () => {
  for (const seed of SEEDS) {
    it(`answers as a full scan does, through ${STEPS} random steps (seed ${seed})`, () => {
      const rng = new Prng(seed);
      const asw = createActualStateOfWorld();
      for (let step = 0; step < STEPS; step++) {
        const v = rng.int(VOLUMES);
        const p = pod(rng.int(PODS));
        const variant = rng.int(2);
        const op = rng.int(7);
        let what = '';
        try {
          switch (op) {
            case 0:
              what = `markVolumeAsAttached(${v})`;
              asw.markVolumeAsAttached(vol(v), spec(v, 0), PLUGIN, '', true);
              break;
            case 1:
              what = `markVolumeAsMounted(${p}, ${v})`;
              asw.markVolumeAsMounted(markOpts(p, v, variant));
              break;
            case 2:
              what = `markVolumeMountAsUncertain(${p}, ${v})`;
              asw.markVolumeMountAsUncertain(markOpts(p, v, variant));
              break;
            case 3:
              what = `markVolumeAsUnmounted(${p}, ${v})`;
              asw.markVolumeAsUnmounted(p, vol(v));
              break;
            case 4:
              what = `deleteVolume(${v})`;
              asw.deleteVolume(vol(v));
              break;
            case 5:
              what = `addAttachUncertainReconstructedVolume + checkAndMarkVolumeAsUncertainViaReconstruction(${p}, ${v})`;
              asw.addAttachUncertainReconstructedVolume(vol(v), spec(v, variant), PLUGIN, '');
              asw.checkAndMarkVolumeAsUncertainViaReconstruction(markOpts(p, v, variant));
              break;
            default:
              what = `markVolumeAsDetached(${v})`;
              asw.markVolumeAsDetached(vol(v));
          }
        } catch {
          // Refusals (absent volume, pods left) change nothing; the check below proves it.
        }
        checkAsw(asw, `seed ${seed} step ${step} ${what}`);
      }
    });
  }
});

describe('DSW per-pod index and kept sort', () => {
  for (const seed of SEEDS) {
    it(`answers as a full scan and a plain model do, through ${STEPS} random steps (seed ${seed})`, () => {
      const rng = new Prng(seed);
      const dsw = createDesiredStateOfWorld();
      /** volume → pod → spec name. */
      const model = new Map<UniqueVolumeName, Map<UniquePodName, string>>();
      for (let step = 0; step < STEPS; step++) {
        const v = rng.int(VOLUMES);
        const p = pod(rng.int(PODS));
        const variant = rng.int(2);
        const op = rng.int(4);
        let what = '';
        switch (op) {
          case 0:
          case 1: {
            what = `addPodToVolume(${p}, ${v})`;
            const s = spec(v, variant);
            dsw.addPodToVolume({
              podName: p,
              pod: podOf(p),
              spec: s,
              outerVolumeSpecName: 'data',
              seLinuxMountContext: '',
              volumeName: vol(v),
              pluginName: PLUGIN,
              pluginIsAttachable: true,
              pluginIsDeviceMountable: true,
            });
            const pods = model.get(vol(v)) ?? new Map<UniquePodName, string>();
            model.set(vol(v), pods);
            pods.set(p, specName(s));
            break;
          }
          case 2: {
            what = `deletePodFromVolume(${p}, ${v})`;
            dsw.deletePodFromVolume(p, vol(v));
            const pods = model.get(vol(v));
            pods?.delete(p);
            if (pods?.size === 0) model.delete(vol(v));
            break;
          }
          default:
            what = `deletePod(${p})`;
            dsw.deletePod(p);
            for (const [name, pods] of [...model]) {
              pods.delete(p);
              if (pods.size === 0) model.delete(name);
            }
        }
        checkDsw(dsw, model, `seed ${seed} step ${step} ${what}`);
      }
    });
  }

  it('deletePod leaves the other pods of a shared volume in place', () => {
    const dsw = createDesiredStateOfWorld();
    for (const p of [pod(0), pod(1)]) {
      dsw.addPodToVolume({
        podName: p,
        pod: podOf(p),
        spec: spec(0, 0),
        outerVolumeSpecName: 'data',
        seLinuxMountContext: '',
        volumeName: vol(0),
        pluginName: PLUGIN,
        pluginIsAttachable: true,
        pluginIsDeviceMountable: true,
      });
    }
    dsw.deletePod(pod(0));
    assert.deepEqual(
      dsw.getVolumesToMount().map((m) => m.podName),
      [pod(1)],
    );
    assert.deepEqual(dsw.getPods(), [pod(1)]);
  });
});
