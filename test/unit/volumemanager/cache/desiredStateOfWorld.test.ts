// DesiredStateOfWorld books (desired_state_of_world.go): pods under volumes, the volume leaving with its
// last pod, reportedInUse, spec-name lookups, sorted copies from GetVolumesToMount, and the
// bounded per-pod error list.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from '../../../../src/api/core.js';
import type { UniquePodName, UniqueVolumeName } from '../../../../src/layout/names.js';
import {
  createDesiredStateOfWorld,
  type AddPodToVolumeArgs,
  type DesiredStateOfWorld,
} from '../../../../src/volumemanager/cache/desiredStateOfWorld.js';
import { constructInlineSpec, constructPVSourceSpec, type Spec } from '../../../../src/volume/spec.js';

const PLUGIN = 'kubernetes.io/csi';
const DRIVER = 'csi.example.com';
const vol = (handle: string): UniqueVolumeName => `${PLUGIN}/${DRIVER}^${handle}` as UniqueVolumeName;
const podName = (uid: string): UniquePodName => uid as UniquePodName;
const V1 = vol('vol-1');
const V2 = vol('vol-2');
const POD_A = podName('pod-a');
const POD_B = podName('pod-b');

function podOf(uid: string): Pod {
  return { uid, namespace: 'default', name: `pod-${uid}`, nodeName: 'node-1', volumes: [], volumeMounts: [], volumeDevices: [] };
}

function args(p: UniquePodName, v: UniqueVolumeName, spec: Spec = constructPVSourceSpec(`pv-${v.split('^')[1] ?? ''}`, DRIVER, v.split('^')[1] ?? ''), attachable = true): AddPodToVolumeArgs {
  return {
    podName: p,
    pod: podOf(p),
    spec,
    outerVolumeSpecName: `outer-${p}`,
    seLinuxMountContext: '',
    volumeName: v,
    pluginName: PLUGIN,
    pluginIsAttachable: attachable,
    pluginIsDeviceMountable: true,
  };
}

function pairs(dsw: DesiredStateOfWorld): string[] {
  return dsw.getVolumesToMount().map((v) => `${v.volumeName.split('^')[1] ?? ''}/${v.podName}`);
}

function reported(dsw: DesiredStateOfWorld): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const v of dsw.getVolumesToMount()) out[v.volumeName] = v.reportedInUse;
  return out;
}

describe('DSW: adding and deleting pods', () => {
  it('AddPodToVolume creates the volume with the pod and the plugin properties', () => {
    const dsw = createDesiredStateOfWorld();
    const a = args(POD_A, V1);
    dsw.addPodToVolume(a);
    assert.equal(dsw.volumeExists(V1), true);
    assert.equal(dsw.podExistsInVolume(POD_A, V1), true);
    assert.deepEqual(dsw.getVolumesToMount(), [
      {
        podName: POD_A,
        pod: a.pod,
        spec: a.spec,
        outerVolumeSpecName: 'outer-pod-a',
        seLinuxMountContext: '',
        volumeName: V1,
        pluginName: PLUGIN,
        pluginIsAttachable: true,
        pluginIsDeviceMountable: true,
        reportedInUse: false,
      },
    ]);
    assert.deepEqual(dsw.getPods(), [POD_A]);
  });

  it('adding the same pod again refreshes it instead of duplicating it', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addPodToVolume(args(POD_A, V1));
    dsw.addPodToVolume({ ...args(POD_A, V1), seLinuxMountContext: 'ctx', pluginIsAttachable: false });
    const all = dsw.getVolumesToMount();
    assert.equal(all.length, 1);
    assert.equal(all[0]?.seLinuxMountContext, 'ctx');
    assert.equal(all[0]?.pluginIsAttachable, true, 'the plugin flags are those the volume was created with');
  });

  it('keeps the plugin flags of an existing volume when a pod is added to it (fidelity review item 11)', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addPodToVolume({ ...args(POD_A, V1), pluginIsAttachable: false, pluginIsDeviceMountable: true });
    dsw.addPodToVolume({ ...args(POD_B, V1), pluginIsAttachable: true, pluginIsDeviceMountable: false });
    assert.deepEqual(
      dsw.getVolumesToMount().map((v) => [v.podName, v.pluginIsAttachable, v.pluginIsDeviceMountable]),
      [
        [POD_A, false, true],
        [POD_B, false, true],
      ],
    );
  });

  it('markVolumeAttachability changes an existing volume only, and counts as a change only when it changes the flag', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addPodToVolume(args(POD_A, V1));
    const g = dsw.generation();
    dsw.markVolumeAttachability(V1, true);
    assert.equal(dsw.generation(), g, 'same value: no change');
    dsw.markVolumeAttachability(V2, false);
    assert.equal(dsw.volumeExists(V2), false, 'an unknown volume is not created');
    assert.equal(dsw.generation(), g);
    dsw.markVolumeAttachability(V1, false);
    assert.equal(dsw.getVolumesToMount()[0]?.pluginIsAttachable, false);
    assert.ok(dsw.generation() > g);
  });

  const deletions: { name: string; del: (dsw: DesiredStateOfWorld) => void }[] = [
    { name: 'DeletePodFromVolume', del: (d) => d.deletePodFromVolume(POD_A, V1) },
    { name: 'DeletePod', del: (d) => d.deletePod(POD_A) },
  ];
  for (const d of deletions) {
    it(`${d.name} of one of two pods keeps the volume with the other pod`, () => {
      const dsw = createDesiredStateOfWorld();
      dsw.addPodToVolume(args(POD_A, V1));
      dsw.addPodToVolume(args(POD_B, V1));
      d.del(dsw);
      assert.equal(dsw.volumeExists(V1), true);
      assert.equal(dsw.podExistsInVolume(POD_A, V1), false);
      assert.deepEqual(pairs(dsw), ['vol-1/pod-b']);
    });

    it(`${d.name} of the last pod makes the volume disappear`, () => {
      const dsw = createDesiredStateOfWorld();
      dsw.addPodToVolume(args(POD_A, V1));
      d.del(dsw);
      assert.equal(dsw.volumeExists(V1), false);
      assert.deepEqual(dsw.getVolumesToMount(), []);
      assert.deepEqual(dsw.getPods(), []);
    });
  }

  it('DeletePod removes the pod from every volume and leaves other pods alone', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addPodToVolume(args(POD_A, V1));
    dsw.addPodToVolume(args(POD_A, V2));
    dsw.addPodToVolume(args(POD_B, V2));
    dsw.deletePod(POD_A);
    assert.deepEqual(pairs(dsw), ['vol-2/pod-b']);
    assert.equal(dsw.volumeExists(V1), false);
  });

  it('deleting an absent pod or volume is a no-op', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addPodToVolume(args(POD_A, V1));
    dsw.deletePodFromVolume(POD_B, V1);
    dsw.deletePodFromVolume(POD_A, V2);
    dsw.deletePod(POD_B);
    assert.deepEqual(pairs(dsw), ['vol-1/pod-a']);
  });
});

describe('DSW: MarkVolumesReportedInUse', () => {
  it('sets reportedInUse for the named volumes and clears it for every other one', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addPodToVolume(args(POD_A, V1));
    dsw.addPodToVolume(args(POD_A, V2));
    assert.deepEqual(reported(dsw), { [V1]: false, [V2]: false });
    dsw.markVolumesReportedInUse([V1, 'kubernetes.io/csi/not-in-dsw^x']);
    assert.deepEqual(reported(dsw), { [V1]: true, [V2]: false });
    dsw.markVolumesReportedInUse([V2]);
    assert.deepEqual(reported(dsw), { [V1]: false, [V2]: true });
    dsw.markVolumesReportedInUse([]);
    assert.deepEqual(reported(dsw), { [V1]: false, [V2]: false });
  });

  it('reportedInUse belongs to the volume: every pod of it sees it, and a new pod keeps it', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addPodToVolume(args(POD_A, V1));
    dsw.markVolumesReportedInUse([V1]);
    dsw.addPodToVolume(args(POD_B, V1));
    assert.deepEqual(dsw.getVolumesToMount().map((v) => v.reportedInUse), [true, true]);
  });

  it('a change of reportedInUse moves generation() forward, never back to a value already seen; no change keeps it', () => {
    // The reconciler and the volume manager key their idle checks on generation(): a value seen
    // before would read as "nothing changed since then".
    const dsw = createDesiredStateOfWorld();
    const seen = [dsw.generation()];
    for (const step of [
      () => dsw.addPodToVolume(args(POD_A, V1)),
      () => dsw.markVolumesReportedInUse([V1]),
      () => dsw.addPodToVolume(args(POD_B, V1)),
      () => dsw.markVolumesReportedInUse([]),
      () => dsw.markVolumesReportedInUse([V1]),
    ]) {
      step();
      seen.push(dsw.generation());
    }
    for (let i = 1; i < seen.length; i++) assert.ok((seen[i] ?? 0) > (seen[i - 1] ?? 0), `generations ${seen.join(', ')}`);
    dsw.markVolumesReportedInUse([V1]);
    assert.equal(dsw.generation(), seen.at(-1), 'the same reported set: no change');
  });

  it('a volume that disappeared with its last pod comes back not reported', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addPodToVolume(args(POD_A, V1));
    dsw.markVolumesReportedInUse([V1]);
    dsw.deletePod(POD_A);
    dsw.addPodToVolume(args(POD_B, V1));
    assert.deepEqual(reported(dsw), { [V1]: false });
  });
});

describe('DSW: VolumeExistsWithSpecName', () => {
  const rows: { name: string; pod: UniquePodName; specName: string; expected: boolean }[] = [
    { name: 'finds the pod\'s PV by its PV name', pod: POD_A, specName: 'pv-vol-1', expected: true },
    { name: 'finds the pod\'s inline volume by its pod volume name', pod: POD_A, specName: 'scratch', expected: true },
    { name: 'does not match the unique volume name', pod: POD_A, specName: V1, expected: false },
    { name: 'does not match the outer (pod spec) name of a PV', pod: POD_A, specName: 'outer-pod-a', expected: false },
    { name: 'does not find another pod\'s volume', pod: POD_B, specName: 'pv-vol-1', expected: false },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const dsw = createDesiredStateOfWorld();
      dsw.addPodToVolume(args(POD_A, V1));
      dsw.addPodToVolume(args(POD_A, `${PLUGIN}/pod-a-scratch` as UniqueVolumeName, constructInlineSpec('scratch', DRIVER), false));
      dsw.addPodToVolume(args(POD_B, V2));
      assert.equal(dsw.volumeExistsWithSpecName(row.pod, row.specName), row.expected);
    });
  }
});

describe('DSW: GetVolumesToMount', () => {
  function unsorted(): DesiredStateOfWorld {
    const dsw = createDesiredStateOfWorld();
    for (const [p, h] of [['pod-z', 'vol-b'], ['pod-a', 'vol-c'], ['pod-m', 'vol-b'], ['pod-a', 'vol-a'], ['pod-a', 'vol-b']] as const) {
      dsw.addPodToVolume(args(podName(p), vol(h)));
    }
    return dsw;
  }

  it('lists every (volume, pod) pair sorted by volume then pod, whatever the insertion order', () => {
    assert.deepEqual(pairs(unsorted()), ['vol-a/pod-a', 'vol-b/pod-a', 'vol-b/pod-m', 'vol-b/pod-z', 'vol-c/pod-a']);
  });

  it('GetPods lists each pod once, sorted', () => {
    assert.deepEqual(unsorted().getPods(), ['pod-a', 'pod-m', 'pod-z']);
  });

  it('mutating the returned array and its elements leaves the DSW unchanged', () => {
    const dsw = unsorted();
    const snapshot = dsw.getVolumesToMount();
    const got = dsw.getVolumesToMount();
    for (const v of got) {
      const m = v as unknown as Record<string, unknown>;
      m.reportedInUse = true;
      m.pluginIsAttachable = false;
      m.podName = 'mutated';
      m.volumeName = 'mutated';
      m.outerVolumeSpecName = 'mutated';
    }
    got.reverse();
    got.pop();
    assert.deepEqual(dsw.getVolumesToMount(), snapshot);
    const pods = dsw.getPods();
    pods.push('intruder' as UniquePodName);
    assert.deepEqual(dsw.getPods(), ['pod-a', 'pod-m', 'pod-z']);
  });

  it('a list handed out earlier does not follow later changes', () => {
    const dsw = unsorted();
    const before = dsw.getVolumesToMount();
    dsw.markVolumesReportedInUse([vol('vol-a')]);
    dsw.deletePod(podName('pod-z'));
    assert.equal(before.length, 5);
    assert.equal(before[0]?.reportedInUse, false);
  });
});

describe('DSW: pod errors', () => {
  it('errors are kept per pod and popped once', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addErrorToPod(POD_A, 'e1');
    dsw.addErrorToPod(POD_A, 'e2');
    dsw.addErrorToPod(POD_B, 'b1');
    assert.deepEqual([...dsw.popPodErrors(POD_A)].sort(), ['e1', 'e2']);
    assert.deepEqual(dsw.popPodErrors(POD_A), [], 'a second pop finds nothing');
    assert.deepEqual(dsw.popPodErrors(POD_B), ['b1'], 'other pods untouched');
  });

  it('a repeated error is kept once', () => {
    const dsw = createDesiredStateOfWorld();
    for (let i = 0; i < 5; i++) dsw.addErrorToPod(POD_A, 'same');
    assert.deepEqual(dsw.popPodErrors(POD_A), ['same']);
  });

  it('the error list of a pod is bounded (10 distinct errors), so a failing pod cannot grow it forever', () => {
    const dsw = createDesiredStateOfWorld();
    for (let i = 0; i < 50; i++) dsw.addErrorToPod(POD_A, `error ${i}`);
    const errs = dsw.popPodErrors(POD_A);
    assert.equal(errs.length, 10);
    assert.equal(new Set(errs).size, 10);
    for (const e of errs) assert.match(e, /^error \d+$/);
  });

  it('a pod with no errors pops an empty list', () => {
    assert.deepEqual(createDesiredStateOfWorld().popPodErrors(POD_A), []);
  });

  it('DeletePod drops the pod\'s errors', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addPodToVolume(args(POD_A, V1));
    dsw.addErrorToPod(POD_A, 'e1');
    dsw.deletePod(POD_A);
    assert.deepEqual(dsw.popPodErrors(POD_A), []);
  });

  it('mutating a popped list does not feed errors back', () => {
    const dsw = createDesiredStateOfWorld();
    dsw.addErrorToPod(POD_A, 'e1');
    dsw.popPodErrors(POD_A).push('intruder');
    assert.deepEqual(dsw.popPodErrors(POD_A), []);
  });
});
