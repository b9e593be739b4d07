// ActualStateOfWorld books (actual_state_of_world.go): what each Mark... verb changes and what
// it leaves alone, the reconstruction records, the query families (certain vs possibly mounted),
// and the copies-only, sorted getters (no caller can change the books through a returned value).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UniquePodName, UniqueVolumeName } from '../../../../src/layout/names.js';
import { AswError, createActualStateOfWorld, deviceMayBeMounted, isVolumeNotAttachedError, VolumeNotAttachedError, type ActualStateOfWorld } from '../../../../src/volumemanager/cache/actualStateOfWorld.js';
import { type AttachedVolume, type MarkVolumeOpts } from '../../../../src/operationexecutor/actualStateOfWorldUpdater.js';
import type { Attachability, DeviceMountState, VolumeMountState } from '../../../../src/operationexecutor/states.js';
import { constructPVSourceSpec, type Spec } from '../../../../src/volume/spec.js';

const PLUGIN = 'kubernetes.io/csi';
const DRIVER = 'csi.example.com';
const vol = (handle: string): UniqueVolumeName => `${PLUGIN}/${DRIVER}^${handle}` as UniqueVolumeName;
const pod = (uid: string): UniquePodName => uid as UniquePodName;
const pvSpec = (pv: string, handle: string): Spec => constructPVSourceSpec(pv, DRIVER, handle);

const V1 = vol('vol-1');
const SPEC1 = pvSpec('pv-1', 'vol-1');
const POD_A = pod('pod-a');
const POD_B = pod('pod-b');
const GLOBAL1 = `/var/lib/kubelet/plugins/kubernetes.io/csi/${DRIVER}/0123/globalmount`;

function opts(p: UniquePodName, v: UniqueVolumeName = V1, spec: Spec = SPEC1, seLinuxMountContext = ''): MarkVolumeOpts {
  return {
    podName: p,
    podUID: p,
    volumeName: v,
    volumeSpec: spec,
    outerVolumeSpecName: `vol-${p}`,
    innerVolumeSpecName: spec.kind === 'persistent' ? spec.persistentVolume.name : spec.volume.name,
    pluginName: PLUGIN,
    volumeMountState: 'VolumeMounted',
    seLinuxMountContext,
  };
}

/**
 * Asserts that fn throws an AswError that reads, as a log line or an operation's error shows it,
 * exactly `AswError: <message>` (the texts of actual_state_of_world.go's errors).
 */
function throwsAsw(fn: () => void, message: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof AswError, String(err));
    assert.equal(String(err), `AswError: ${message}`);
    return true;
  });
}

/** The text of the error a Mark... verb (AddPodToVolume, DeletePodFromVolume, SetDeviceMountState) gives for an absent volume. */
const notAttached = (v: UniqueVolumeName): string => `no volume with the name ${JSON.stringify(v)} exists in the list of attached volumes`;

function attached(asw: ActualStateOfWorld, v: UniqueVolumeName = V1): AttachedVolume {
  const av = asw.getAttachedVolume(v);
  assert.ok(av !== undefined, `${v} is in the ASW`);
  return av;
}

/** An ASW holding V1 with the given attachability and device state (devicePath "dev-0"). */
function withVolume(attachability: Attachability = 'True', device: DeviceMountState = 'DeviceNotMounted'): ActualStateOfWorld {
  const asw = createActualStateOfWorld();
  if (attachability === 'Uncertain') asw.addAttachUncertainReconstructedVolume(V1, SPEC1, PLUGIN, 'dev-0');
  else asw.markVolumeAsAttached(V1, SPEC1, PLUGIN, 'dev-0', attachability === 'True');
  switch (device) {
    case 'DeviceGloballyMounted':
      asw.markDeviceAsMounted(V1, '', GLOBAL1, 'ctx-0');
      break;
    case 'DeviceMountUncertain':
      asw.markDeviceAsUncertain(V1, '', GLOBAL1, 'ctx-0');
      break;
    case 'DeviceNotMounted':
      break;
  }
  return asw;
}

describe('ASW: adding volumes', () => {
  const adders: { name: string; add: (asw: ActualStateOfWorld) => void; attachability: Attachability }[] = [
    { name: 'MarkVolumeAsAttached of an attachable volume', add: (a) => a.markVolumeAsAttached(V1, SPEC1, PLUGIN, 'dev-0', true), attachability: 'True' },
    { name: 'MarkVolumeAsAttached of a non-attachable volume', add: (a) => a.markVolumeAsAttached(V1, SPEC1, PLUGIN, 'dev-0', false), attachability: 'False' },
    { name: 'AddAttachUncertainReconstructedVolume', add: (a) => a.addAttachUncertainReconstructedVolume(V1, SPEC1, PLUGIN, 'dev-0'), attachability: 'Uncertain' },
  ];
  for (const tc of adders) {
    it(`${tc.name} adds a new volume as DeviceNotMounted with no pods and attachability ${tc.attachability}`, () => {
      const asw = createActualStateOfWorld();
      tc.add(asw);
      assert.deepEqual(attached(asw), {
        volumeName: V1,
        volumeSpec: SPEC1,
        pluginName: PLUGIN,
        pluginIsAttachable: tc.attachability === 'True',
        attachability: tc.attachability,
        deviceMountState: 'DeviceNotMounted',
        devicePath: 'dev-0',
        deviceMountPath: '',
        seLinuxMountContext: undefined,
      });
      assert.deepEqual(asw.getAllMountedVolumes(), []);
      assert.deepEqual(asw.getUnmountedVolumes().map((v) => v.volumeName), [V1]);
    });
  }

  // addVolume on an existing volume only overwrites devicePath (kubelet's addVolume; attachability is
  // set once).
  for (const first of adders) {
    for (const second of adders) {
      it(`${second.name} on a volume added by ${first.name} only overwrites devicePath`, () => {
        const asw = createActualStateOfWorld();
        first.add(asw);
        asw.markDeviceAsMounted(V1, '', GLOBAL1, 'ctx-0');
        asw.markVolumeAsMounted(opts(POD_A));
        const before = attached(asw);
        const otherSpec = pvSpec('pv-other', 'vol-1');
        switch (second.attachability) {
          case 'True':
            asw.markVolumeAsAttached(V1, otherSpec, PLUGIN, 'dev-new', true);
            break;
          case 'False':
            asw.markVolumeAsAttached(V1, otherSpec, PLUGIN, 'dev-new', false);
            break;
          case 'Uncertain':
            asw.addAttachUncertainReconstructedVolume(V1, otherSpec, PLUGIN, 'dev-new');
            break;
        }
        assert.deepEqual(attached(asw), { ...before, devicePath: 'dev-new' });
        assert.equal(attached(asw).volumeSpec, SPEC1, 'spec untouched');
        assert.equal(asw.getVolumeMountState(V1, POD_A), 'VolumeMounted', 'pods untouched');
      });
    }
  }

  it('addVolume on an existing volume overwrites devicePath even with an empty one', () => {
    const asw = withVolume('True');
    asw.markVolumeAsAttached(V1, SPEC1, PLUGIN, '', true);
    assert.equal(attached(asw).devicePath, '');
  });
});

describe('ASW: SetDeviceMountState (MarkDeviceAsMounted / AsUncertain / AsUnmounted)', () => {
  const markers: { name: string; mark: (asw: ActualStateOfWorld, v: UniqueVolumeName) => void }[] = [
    { name: 'MarkDeviceAsMounted', mark: (a, v) => a.markDeviceAsMounted(v, 'dev', GLOBAL1, 'ctx') },
    { name: 'MarkDeviceAsUncertain', mark: (a, v) => a.markDeviceAsUncertain(v, 'dev', GLOBAL1, 'ctx') },
    { name: 'MarkDeviceAsUnmounted', mark: (a, v) => a.markDeviceAsUnmounted(v) },
  ];
  for (const m of markers) {
    it(`${m.name} on an absent volume throws and adds nothing`, () => {
      const asw = createActualStateOfWorld();
      throwsAsw(() => m.mark(asw, V1), notAttached(V1));
      assert.equal(asw.volumeExists(V1), false);
    });
  }

  it('MarkDeviceAsMounted sets the state, the device mount path, the device path and the SELinux context', () => {
    const asw = withVolume('True');
    asw.markDeviceAsMounted(V1, 'dev-1', GLOBAL1, 'ctx-1');
    const av = attached(asw);
    assert.equal(av.deviceMountState, 'DeviceGloballyMounted');
    assert.equal(av.deviceMountPath, GLOBAL1);
    assert.equal(av.devicePath, 'dev-1');
    assert.equal(av.seLinuxMountContext, 'ctx-1');
  });

  it('an empty device path or SELinux context leaves the stored one; the device mount path is always set', () => {
    const asw = withVolume('True', 'DeviceGloballyMounted');
    asw.markDeviceAsUncertain(V1, '', '', '');
    const av = attached(asw);
    assert.equal(av.deviceMountState, 'DeviceMountUncertain');
    assert.equal(av.devicePath, 'dev-0', 'devicePath only set when non-empty');
    assert.equal(av.seLinuxMountContext, 'ctx-0', 'SELinux context only set when non-empty');
    assert.equal(av.deviceMountPath, '', 'deviceMountPath set unconditionally');
  });

  it('the SELinux context stays unknown (undefined) until a non-empty one is given', () => {
    const asw = withVolume('True');
    asw.markDeviceAsMounted(V1, '', GLOBAL1, '');
    assert.equal(attached(asw).seLinuxMountContext, undefined);
  });

  for (const from of ['DeviceGloballyMounted', 'DeviceMountUncertain'] as const) {
    it(`MarkDeviceAsUnmounted from ${from} clears deviceMountPath and keeps devicePath and SELinux context`, () => {
      const asw = withVolume('True', from);
      asw.markDeviceAsUnmounted(V1);
      const av = attached(asw);
      assert.equal(av.deviceMountState, 'DeviceNotMounted');
      assert.equal(av.deviceMountPath, '');
      assert.equal(av.devicePath, 'dev-0');
      assert.equal(av.seLinuxMountContext, 'ctx-0');
    });
  }
});

describe('ASW: device state transitions', () => {
  type From = DeviceMountState | 'absent';
  const rows: { name: string; from: From; event: (asw: ActualStateOfWorld) => void; to: DeviceMountState | 'removed' }[] = [
    { name: 'an attached volume starts not mounted', from: 'absent', event: (a) => a.markVolumeAsAttached(V1, SPEC1, PLUGIN, '', true), to: 'DeviceNotMounted' },
    { name: 'a reconstructed volume starts not mounted', from: 'absent', event: (a) => a.addAttachUncertainReconstructedVolume(V1, SPEC1, PLUGIN, ''), to: 'DeviceNotMounted' },
    { name: 'MountDevice success makes a not-mounted device globally mounted', from: 'DeviceNotMounted', event: (a) => a.markDeviceAsMounted(V1, '', GLOBAL1, ''), to: 'DeviceGloballyMounted' },
    { name: 'a MountDevice timeout makes a not-mounted device uncertain', from: 'DeviceNotMounted', event: (a) => a.markDeviceAsUncertain(V1, '', GLOBAL1, ''), to: 'DeviceMountUncertain' },
    { name: 'MountDevice success makes an uncertain device globally mounted', from: 'DeviceMountUncertain', event: (a) => a.markDeviceAsMounted(V1, '', GLOBAL1, ''), to: 'DeviceGloballyMounted' },
    { name: 'a final MountDevice error makes an uncertain device not mounted', from: 'DeviceMountUncertain', event: (a) => a.markDeviceAsUnmounted(V1), to: 'DeviceNotMounted' },
    { name: 'UnmountDevice success makes a globally mounted device not mounted', from: 'DeviceGloballyMounted', event: (a) => a.markDeviceAsUnmounted(V1), to: 'DeviceNotMounted' },
    { name: 'UnmountDevice success makes an uncertain device not mounted', from: 'DeviceMountUncertain', event: (a) => a.markDeviceAsUnmounted(V1), to: 'DeviceNotMounted' },
    { name: 'an UnmountDevice error makes a globally mounted device uncertain', from: 'DeviceGloballyMounted', event: (a) => a.markDeviceAsUncertain(V1, '', GLOBAL1, ''), to: 'DeviceMountUncertain' },
    { name: 'an UnmountDevice error keeps an uncertain device uncertain', from: 'DeviceMountUncertain', event: (a) => a.markDeviceAsUncertain(V1, '', GLOBAL1, ''), to: 'DeviceMountUncertain' },
    { name: 'an UnmountDevice error makes a not-mounted device uncertain', from: 'DeviceNotMounted', event: (a) => a.markDeviceAsUncertain(V1, '', GLOBAL1, ''), to: 'DeviceMountUncertain' },
    { name: 'a not-mounted volume with no pods is removed by MarkVolumeAsDetached', from: 'DeviceNotMounted', event: (a) => a.markVolumeAsDetached(V1), to: 'removed' },
    { name: 'a repeated MarkVolumeAsAttached does not change a globally mounted device', from: 'DeviceGloballyMounted', event: (a) => a.markVolumeAsAttached(V1, SPEC1, PLUGIN, 'x', true), to: 'DeviceGloballyMounted' },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const asw = row.from === 'absent' ? createActualStateOfWorld() : withVolume('True', row.from);
      row.event(asw);
      if (row.to === 'removed') {
        assert.equal(asw.volumeExists(V1), false);
        assert.equal(asw.getAttachedVolume(V1), undefined);
      } else {
        assert.equal(asw.getDeviceMountState(V1), row.to);
        assert.equal(attached(asw).deviceMountState, row.to);
      }
    });
  }

  it('an absent volume reads as DeviceNotMounted', () => {
    assert.equal(createActualStateOfWorld().getDeviceMountState(V1), 'DeviceNotMounted');
  });
});

describe('ASW: pod mount state transitions', () => {
  type From = 'absent' | 'mounted' | 'uncertain' | 'reconstructed';
  const reach = (asw: ActualStateOfWorld, from: From): void => {
    switch (from) {
      case 'absent':
        return;
      case 'mounted':
        asw.markVolumeAsMounted(opts(POD_A));
        return;
      case 'uncertain':
        asw.markVolumeMountAsUncertain(opts(POD_A));
        return;
      case 'reconstructed':
        assert.equal(asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A)), true);
        return;
    }
  };
  const rows: {
    name: string;
    from: From;
    event: (asw: ActualStateOfWorld) => void;
    to: VolumeMountState;
    reconstructed: boolean;
  }[] = [
    { name: 'SetUp success mounts an absent pod', from: 'absent', event: (a) => a.markVolumeAsMounted(opts(POD_A)), to: 'VolumeMounted', reconstructed: false },
    { name: 'a SetUp timeout makes an absent pod uncertain', from: 'absent', event: (a) => a.markVolumeMountAsUncertain(opts(POD_A)), to: 'VolumeMountUncertain', reconstructed: false },
    { name: 'reconstruction makes an absent pod uncertain and records it', from: 'absent', event: (a) => a.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A)), to: 'VolumeMountUncertain', reconstructed: true },
    { name: 'SetUp success mounts an uncertain pod', from: 'uncertain', event: (a) => a.markVolumeAsMounted(opts(POD_A)), to: 'VolumeMounted', reconstructed: false },
    { name: 'SetUp success mounts a reconstructed pod and drops its reconstruction record', from: 'reconstructed', event: (a) => a.markVolumeAsMounted(opts(POD_A)), to: 'VolumeMounted', reconstructed: false },
    { name: 'a SetUp final error removes an uncertain pod', from: 'uncertain', event: (a) => a.markVolumeAsUnmounted(POD_A, V1), to: 'VolumeNotMounted', reconstructed: false },
    { name: 'a TearDown error makes a mounted pod uncertain', from: 'mounted', event: (a) => a.markVolumeMountAsUncertain(opts(POD_A)), to: 'VolumeMountUncertain', reconstructed: false },
    { name: 'a TearDown error keeps an uncertain pod uncertain', from: 'uncertain', event: (a) => a.markVolumeMountAsUncertain(opts(POD_A)), to: 'VolumeMountUncertain', reconstructed: false },
    { name: 'a TearDown error keeps a reconstructed pod reconstructed', from: 'reconstructed', event: (a) => a.markVolumeMountAsUncertain(opts(POD_A)), to: 'VolumeMountUncertain', reconstructed: true },
    { name: 'TearDown success removes a mounted pod', from: 'mounted', event: (a) => a.markVolumeAsUnmounted(POD_A, V1), to: 'VolumeNotMounted', reconstructed: false },
    { name: 'TearDown success removes an uncertain pod', from: 'uncertain', event: (a) => a.markVolumeAsUnmounted(POD_A, V1), to: 'VolumeNotMounted', reconstructed: false },
    { name: 'TearDown success removes a reconstructed pod and its reconstruction record', from: 'reconstructed', event: (a) => a.markVolumeAsUnmounted(POD_A, V1), to: 'VolumeNotMounted', reconstructed: false },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const asw = withVolume('Uncertain');
      reach(asw, row.from);
      row.event(asw);
      assert.equal(asw.getVolumeMountState(V1, POD_A), row.to);
      assert.equal(asw.podRemovedFromVolume(POD_A, V1), row.to === 'VolumeNotMounted');
      assert.equal(asw.isVolumeReconstructed(V1, POD_A), row.reconstructed);
      assert.equal(asw.getAllMountedVolumes().length, row.to === 'VolumeNotMounted' ? 0 : 1);
    });
  }

  for (const mark of ['markVolumeAsMounted', 'markVolumeMountAsUncertain'] as const) {
    it(`${mark} on an absent volume throws and adds nothing`, () => {
      const asw = createActualStateOfWorld();
      throwsAsw(() => asw[mark](opts(POD_A)), notAttached(V1));
      assert.equal(asw.volumeExists(V1), false);
      assert.deepEqual(asw.getAllMountedVolumes(), []);
    });
  }

  // kubelet's DeletePodFromVolume: an absent volume is an error, an absent pod is not.
  it('MarkVolumeAsUnmounted of an absent pod is a no-op; of an absent volume it throws', () => {
    const asw = withVolume('True');
    asw.markVolumeAsMounted(opts(POD_A));
    asw.markVolumeAsUnmounted(POD_B, V1);
    throwsAsw(() => asw.markVolumeAsUnmounted(POD_A, vol('vol-absent')), notAttached(vol('vol-absent')));
    assert.equal(asw.getVolumeMountState(V1, POD_A), 'VolumeMounted');
  });

  // kubelet's AddPodToVolume keeps a mounted pod's record and changes only its state.
  it('marking a mounted pod again keeps its stored spec, SELinux context and outer name; only the state changes', () => {
    const asw = withVolume('True');
    asw.markVolumeAsMounted(opts(POD_A, V1, SPEC1, 'ctx-a'));
    const spec2 = pvSpec('pv-1', 'vol-1');
    asw.markVolumeMountAsUncertain({ ...opts(POD_A, V1, spec2, 'ctx-b'), outerVolumeSpecName: '' });
    const [mv] = asw.getAllMountedVolumes();
    assert.ok(mv !== undefined);
    assert.equal(mv.volumeSpec, SPEC1);
    assert.equal(mv.seLinuxMountContext, 'ctx-a');
    assert.equal(mv.outerVolumeSpecName, 'vol-pod-a');
    assert.equal(mv.volumeMountState, 'VolumeMountUncertain');
  });

  // ... and replaces an uncertain pod's record whole (a reconstructed record needs the newer data).
  it('marking an uncertain pod replaces its record, outer name included', () => {
    const asw = withVolume('True');
    asw.markVolumeMountAsUncertain(opts(POD_A, V1, SPEC1, 'ctx-a'));
    const spec2 = pvSpec('pv-1', 'vol-1');
    asw.markVolumeAsMounted({ ...opts(POD_A, V1, spec2, 'ctx-b'), outerVolumeSpecName: '' });
    const [mv] = asw.getAllMountedVolumes();
    assert.ok(mv !== undefined);
    assert.equal(mv.volumeSpec, spec2);
    assert.equal(mv.seLinuxMountContext, 'ctx-b');
    assert.equal(mv.outerVolumeSpecName, '');
    assert.equal(mv.volumeMountState, 'VolumeMounted');
  });

  // kubelet's VolumeExistsWithSpecName compares volumeSpec.Name(), not a stored directory name.
  it('VolumeExistsWithSpecName matches the spec name, not the inner name recorded', () => {
    const asw = withVolume('True');
    asw.markVolumeMountAsUncertain({ ...opts(POD_A, V1, SPEC1), innerVolumeSpecName: 'dir-name' });
    assert.equal(asw.volumeExistsWithSpecName(POD_A, 'pv-1'), true);
    assert.equal(asw.volumeExistsWithSpecName(POD_A, 'dir-name'), false);
  });
});

describe('ASW: CheckAndMarkVolumeAsUncertainViaReconstruction', () => {
  const rows: { name: string; setup: (asw: ActualStateOfWorld) => void; added: boolean; state: VolumeMountState; reconstructed: boolean }[] = [
    {
      name: 'is a no-op when the volume is absent',
      setup: () => undefined,
      added: false,
      state: 'VolumeNotMounted',
      reconstructed: false,
    },
    {
      name: 'is a no-op when the pod is already Mounted',
      setup: (a) => {
        a.markVolumeAsAttached(V1, SPEC1, PLUGIN, '', true);
        a.markVolumeAsMounted(opts(POD_A));
      },
      added: false,
      state: 'VolumeMounted',
      reconstructed: false,
    },
    {
      name: 'is a no-op when the pod is already Uncertain (and does not record it)',
      setup: (a) => {
        a.markVolumeAsAttached(V1, SPEC1, PLUGIN, '', true);
        a.markVolumeMountAsUncertain(opts(POD_A));
      },
      added: false,
      state: 'VolumeMountUncertain',
      reconstructed: false,
    },
    {
      name: 'adds an absent pod of a present volume as Uncertain, found during reconstruction',
      setup: (a) => a.addAttachUncertainReconstructedVolume(V1, SPEC1, PLUGIN, ''),
      added: true,
      state: 'VolumeMountUncertain',
      reconstructed: true,
    },
    {
      name: 'adds a pod next to another pod of the same volume',
      setup: (a) => {
        a.markVolumeAsAttached(V1, SPEC1, PLUGIN, '', true);
        a.markVolumeAsMounted(opts(POD_B));
      },
      added: true,
      state: 'VolumeMountUncertain',
      reconstructed: true,
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const asw = createActualStateOfWorld();
      row.setup(asw);
      const mountedBefore = asw.getMountedVolumes();
      assert.equal(asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A)), row.added);
      assert.equal(asw.getVolumeMountState(V1, POD_A), row.state);
      assert.equal(asw.isVolumeReconstructed(V1, POD_A), row.reconstructed);
      assert.equal(asw.isVolumeDeviceReconstructed(V1), row.reconstructed);
      assert.deepEqual(asw.getMountedVolumes(), mountedBefore, 'certain mounts untouched');
      if (!row.added) assert.equal(asw.volumeExists(V1), row.state !== 'VolumeNotMounted');
    });
  }

  it('a pod reaching Mounted leaves foundDuringReconstruction: a later TearDown error does not make it reconstructed again', () => {
    const asw = withVolume('Uncertain');
    asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A));
    asw.markVolumeAsMounted(opts(POD_A));
    assert.equal(asw.isVolumeReconstructed(V1, POD_A), false);
    asw.markVolumeMountAsUncertain(opts(POD_A));
    assert.equal(asw.getVolumeMountState(V1, POD_A), 'VolumeMountUncertain');
    assert.equal(asw.isVolumeReconstructed(V1, POD_A), false);
  });

  it('only the pod that reached Mounted leaves the records; another reconstructed pod stays reconstructed', () => {
    const asw = withVolume('Uncertain');
    asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A));
    asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_B));
    asw.markVolumeAsMounted(opts(POD_A));
    assert.equal(asw.isVolumeReconstructed(V1, POD_A), false);
    assert.equal(asw.isVolumeReconstructed(V1, POD_B), true);
  });
});

describe('ASW: IsVolumeReconstructed / IsVolumeDeviceReconstructed', () => {
  it('IsVolumeReconstructed needs the pod both Uncertain and recorded', () => {
    const asw = withVolume('Uncertain');
    assert.equal(asw.isVolumeReconstructed(V1, POD_A), false, 'absent pod');
    asw.markVolumeMountAsUncertain(opts(POD_B));
    assert.equal(asw.isVolumeReconstructed(V1, POD_B), false, 'uncertain but not recorded');
    asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A));
    assert.equal(asw.isVolumeReconstructed(V1, POD_A), true);
    assert.equal(asw.isVolumeReconstructed(vol('vol-absent'), POD_A), false, 'absent volume');
  });

  it('IsVolumeDeviceReconstructed is true from the first reconstructed pod until the volume is deleted', () => {
    const asw = withVolume('Uncertain', 'DeviceMountUncertain');
    assert.equal(asw.isVolumeDeviceReconstructed(V1), false);
    asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A));
    assert.equal(asw.isVolumeDeviceReconstructed(V1), true);
    asw.markVolumeAsMounted(opts(POD_A));
    assert.equal(asw.isVolumeDeviceReconstructed(V1), true, 'the volume key stays in foundDuringReconstruction');
    asw.markVolumeAsUnmounted(POD_A, V1);
    assert.equal(asw.isVolumeDeviceReconstructed(V1), true);
    asw.deleteVolume(V1);
    assert.equal(asw.isVolumeDeviceReconstructed(V1), false);
  });
});

describe('ASW: DeleteVolume / MarkVolumeAsDetached', () => {
  for (const del of ['deleteVolume', 'markVolumeAsDetached'] as const) {
    for (const state of ['mounted', 'uncertain'] as const) {
      it(`${del} refuses while a ${state} pod remains and changes nothing`, () => {
        const asw = withVolume('True', 'DeviceGloballyMounted');
        if (state === 'mounted') asw.markVolumeAsMounted(opts(POD_A));
        else asw.markVolumeMountAsUncertain(opts(POD_A));
        const before = attached(asw);
        throwsAsw(() => asw[del](V1), `failed to DeleteVolume ${JSON.stringify(V1)}, it still has 1 mountedPods`);
        assert.deepEqual(attached(asw), before);
        assert.equal(asw.podRemovedFromVolume(POD_A, V1), false);
      });
    }

    it(`${del} removes a volume with no pods, and its reconstruction records`, () => {
      const asw = withVolume('Uncertain');
      asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A));
      asw.markVolumeAsUnmounted(POD_A, V1);
      asw[del](V1);
      assert.equal(asw.volumeExists(V1), false);
      assert.equal(asw.isVolumeDeviceReconstructed(V1), false);
      // Re-added, it starts clean: no stale record makes a new uncertain pod look reconstructed.
      asw.addAttachUncertainReconstructedVolume(V1, SPEC1, PLUGIN, '');
      asw.markVolumeMountAsUncertain(opts(POD_A));
      assert.equal(asw.isVolumeReconstructed(V1, POD_A), false);
    });

    it(`${del} of an absent volume is a no-op`, () => {
      const asw = withVolume('True');
      asw[del](vol('vol-absent'));
      assert.equal(asw.volumeExists(V1), true);
    });
  }
});

describe('ASW: updates from node status for reconstructed volumes', () => {
  const devicePathRows: { device: DeviceMountState; updated: boolean }[] = [
    { device: 'DeviceMountUncertain', updated: true },
    { device: 'DeviceGloballyMounted', updated: false },
    { device: 'DeviceNotMounted', updated: false },
  ];
  for (const row of devicePathRows) {
    it(`UpdateReconstructedDevicePath ${row.updated ? 'sets' : 'leaves'} the device path while the device is ${row.device}`, () => {
      const asw = withVolume('Uncertain', row.device);
      asw.updateReconstructedDevicePath(V1, 'dev-from-status');
      assert.equal(attached(asw).devicePath, row.updated ? 'dev-from-status' : 'dev-0');
      assert.equal(attached(asw).deviceMountState, row.device);
    });
  }

  const attachRows: { from: Attachability; attachable: boolean; to: Attachability }[] = [
    { from: 'Uncertain', attachable: true, to: 'True' },
    { from: 'Uncertain', attachable: false, to: 'False' },
    { from: 'True', attachable: false, to: 'True' },
    { from: 'False', attachable: true, to: 'False' },
  ];
  for (const row of attachRows) {
    it(`UpdateReconstructedVolumeAttachability(${row.attachable}) turns ${row.from} into ${row.to}`, () => {
      const asw = withVolume(row.from);
      asw.updateReconstructedVolumeAttachability(V1, row.attachable);
      assert.equal(attached(asw).attachability, row.to);
      assert.equal(attached(asw).pluginIsAttachable, row.to === 'True');
    });
  }

  it('both updates of an absent volume are no-ops', () => {
    const asw = createActualStateOfWorld();
    asw.updateReconstructedDevicePath(V1, 'x');
    asw.updateReconstructedVolumeAttachability(V1, true);
    assert.equal(asw.volumeExists(V1), false);
  });
});

describe('ASW: PodExistsInVolume', () => {
  it('throws VolumeNotAttachedError for an absent volume', () => {
    const asw = createActualStateOfWorld();
    assert.throws(
      () => asw.podExistsInVolume(POD_A, V1),
      (err: unknown) => err instanceof VolumeNotAttachedError && isVolumeNotAttachedError(err) && err.volumeName === V1 && err.podName === POD_A,
    );
    // What a log line shows of it: the class name and kubelet's text (actual_state_of_world.go, PodExistsInVolume's volumeNotAttachedError).
    assert.throws(
      () => asw.podExistsInVolume(POD_A, V1),
      (err: unknown) => String(err) === `VolumeNotAttachedError: volumeName=${JSON.stringify(V1)} does not exist in the list of attached volumes`,
    );
    assert.equal(isVolumeNotAttachedError(new Error('x')), false);
  });

  const rows: { name: string; setup: (asw: ActualStateOfWorld) => void; exists: boolean }[] = [
    { name: 'is false (with the devicePath) when the pod is absent', setup: () => undefined, exists: false },
    { name: 'is false (with the devicePath) when the pod is only Uncertain, so the reconciler mounts again', setup: (a) => a.markVolumeMountAsUncertain(opts(POD_A)), exists: false },
    { name: 'is false (with the devicePath) for a reconstructed pod', setup: (a) => a.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A)), exists: false },
    { name: 'is true (with the devicePath) when the pod is Mounted', setup: (a) => a.markVolumeAsMounted(opts(POD_A)), exists: true },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const asw = withVolume('True');
      row.setup(asw);
      assert.deepEqual(asw.podExistsInVolume(POD_A, V1), { exists: row.exists, devicePath: 'dev-0' });
    });
  }
});

describe('ASW: query families', () => {
  /**
   * vol-1: GloballyMounted, pod-a Mounted, pod-b Uncertain.
   * vol-2: Uncertain device, no pods.   vol-3: NotMounted, no pods.
   * vol-4: GloballyMounted, pod-c reconstructed (Uncertain).
   */
  function populated(): ActualStateOfWorld {
    const asw = createActualStateOfWorld();
    for (const h of ['vol-4', 'vol-3', 'vol-2', 'vol-1']) asw.markVolumeAsAttached(vol(h), pvSpec(`pv-${h.slice(4)}`, h), PLUGIN, '', true);
    asw.markDeviceAsMounted(vol('vol-1'), '', GLOBAL1, '');
    asw.markDeviceAsUncertain(vol('vol-2'), '', GLOBAL1, '');
    asw.markDeviceAsMounted(vol('vol-4'), '', GLOBAL1, '');
    asw.markVolumeMountAsUncertain(opts(POD_B, vol('vol-1')));
    asw.markVolumeAsMounted(opts(POD_A, vol('vol-1')));
    asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(pod('pod-c'), vol('vol-4'), pvSpec('pv-4', 'vol-4')));
    return asw;
  }
  const pairs = (ms: { volumeName: string; podName: string }[]): string[] => ms.map((m) => `${m.volumeName.split('^')[1] ?? ''}/${m.podName}`);
  const names = (vs: AttachedVolume[]): string[] => vs.map((v) => v.volumeName.split('^')[1] ?? '');

  it('GetMountedVolumes lists Mounted pods only', () => {
    assert.deepEqual(pairs(populated().getMountedVolumes()), ['vol-1/pod-a']);
  });

  it('GetAllMountedVolumes lists Mounted and Uncertain pods, sorted by volume then pod', () => {
    assert.deepEqual(pairs(populated().getAllMountedVolumes()), ['vol-1/pod-a', 'vol-1/pod-b', 'vol-4/pod-c']);
  });

  it('GetPossiblyMountedVolumesForPod lists one pod\'s Mounted and Uncertain volumes', () => {
    const asw = populated();
    assert.deepEqual(pairs(asw.getPossiblyMountedVolumesForPod(POD_B)), ['vol-1/pod-b']);
    assert.deepEqual(pairs(asw.getPossiblyMountedVolumesForPod(pod('pod-c'))), ['vol-4/pod-c']);
    assert.deepEqual(asw.getPossiblyMountedVolumesForPod(pod('pod-z')), []);
  });

  it('GetUnmountedVolumes lists volumes with no pod entries, whatever their device state', () => {
    assert.deepEqual(names(populated().getUnmountedVolumes()), ['vol-2', 'vol-3']);
  });

  it('GetGloballyMountedVolumes lists GloballyMounted devices only (not Uncertain)', () => {
    assert.deepEqual(names(populated().getGloballyMountedVolumes()), ['vol-1', 'vol-4']);
  });

  it('GetAttachedVolumes lists every volume sorted by name', () => {
    assert.deepEqual(names(populated().getAttachedVolumes()), ['vol-1', 'vol-2', 'vol-3', 'vol-4']);
  });

  it('a mounted volume carries the device mount path and the pod\'s names', () => {
    const [mv] = populated().getMountedVolumes();
    assert.deepEqual(mv, {
      podName: POD_A,
      podUID: POD_A,
      volumeName: V1,
      innerVolumeSpecName: 'pv-1',
      outerVolumeSpecName: 'vol-pod-a',
      pluginName: PLUGIN,
      volumeSpec: pvSpec('pv-1', 'vol-1'),
      volumeMountState: 'VolumeMounted',
      seLinuxMountContext: '',
      deviceMountPath: GLOBAL1,
    });
  });

  it('VolumeExists and VolumeExistsWithSpecName', () => {
    const asw = populated();
    assert.equal(asw.volumeExists(V1), true);
    assert.equal(asw.volumeExists(vol('vol-9')), false);
    assert.equal(asw.volumeExistsWithSpecName(POD_A, 'pv-1'), true);
    assert.equal(asw.volumeExistsWithSpecName(pod('pod-c'), 'pv-4'), true, 'an uncertain pod counts');
    assert.equal(asw.volumeExistsWithSpecName(POD_A, 'pv-4'), false, 'another pod\'s volume');
    assert.equal(asw.volumeExistsWithSpecName(POD_A, 'pv-2'), false, 'a volume with no pods');
  });

  const attachabilityRows: { attachability: Attachability; expected: boolean }[] = [
    { attachability: 'True', expected: true },
    { attachability: 'False', expected: false },
    { attachability: 'Uncertain', expected: false },
  ];
  for (const row of attachabilityRows) {
    it(`pluginIsAttachable is ${row.expected} for attachability ${row.attachability}`, () => {
      assert.equal(attached(withVolume(row.attachability)).pluginIsAttachable, row.expected);
    });
  }

  const mayBeMountedRows: { device: DeviceMountState; expected: boolean }[] = [
    { device: 'DeviceGloballyMounted', expected: true },
    { device: 'DeviceMountUncertain', expected: true },
    { device: 'DeviceNotMounted', expected: false },
  ];
  for (const row of mayBeMountedRows) {
    it(`deviceMayBeMounted is ${row.expected} for ${row.device}`, () => {
      assert.equal(deviceMayBeMounted(attached(withVolume('True', row.device))), row.expected);
    });
  }
});

describe('ASW: getters return sorted copies', () => {
  function unsorted(): ActualStateOfWorld {
    const asw = createActualStateOfWorld();
    for (const h of ['vol-c', 'vol-a', 'vol-b']) {
      asw.markVolumeAsAttached(vol(h), pvSpec(`pv-${h}`, h), PLUGIN, `dev-${h}`, true);
      asw.markDeviceAsMounted(vol(h), '', `${GLOBAL1}-${h}`, '');
    }
    for (const p of ['pod-z', 'pod-m', 'pod-a']) asw.markVolumeAsMounted(opts(pod(p), vol('vol-b'), pvSpec('pv-vol-b', 'vol-b')));
    asw.markVolumeAsMounted(opts(pod('pod-m'), vol('vol-a'), pvSpec('pv-vol-a', 'vol-a')));
    return asw;
  }

  it('every list is sorted by volume name, then pod name, whatever the insertion order', () => {
    const asw = unsorted();
    const expectVolumes = [vol('vol-a'), vol('vol-b'), vol('vol-c')];
    assert.deepEqual(asw.getAttachedVolumes().map((v) => v.volumeName), expectVolumes);
    assert.deepEqual(asw.getGloballyMountedVolumes().map((v) => v.volumeName), expectVolumes);
    assert.deepEqual(asw.getUnmountedVolumes().map((v) => v.volumeName), [vol('vol-c')]);
    const expectPairs = [
      [vol('vol-a'), 'pod-m'],
      [vol('vol-b'), 'pod-a'],
      [vol('vol-b'), 'pod-m'],
      [vol('vol-b'), 'pod-z'],
    ];
    assert.deepEqual(asw.getMountedVolumes().map((m) => [m.volumeName, m.podName]), expectPairs);
    assert.deepEqual(asw.getAllMountedVolumes().map((m) => [m.volumeName, m.podName]), expectPairs);
  });

  const listGetters: { name: string; get: (asw: ActualStateOfWorld) => readonly object[] }[] = [
    { name: 'GetAttachedVolumes', get: (a) => a.getAttachedVolumes() },
    { name: 'GetGloballyMountedVolumes', get: (a) => a.getGloballyMountedVolumes() },
    { name: 'GetUnmountedVolumes', get: (a) => a.getUnmountedVolumes() },
    { name: 'GetMountedVolumes', get: (a) => a.getMountedVolumes() },
    { name: 'GetAllMountedVolumes', get: (a) => a.getAllMountedVolumes() },
    { name: 'GetPossiblyMountedVolumesForPod', get: (a) => a.getPossiblyMountedVolumesForPod(pod('pod-m')) },
  ];
  for (const g of listGetters) {
    it(`${g.name}: mutating the returned array and its elements leaves the ASW unchanged`, () => {
      const asw = unsorted();
      const snapshot = structuredClone(g.get(asw));
      const got = g.get(asw) as Record<string, unknown>[];
      assert.ok(got.length > 0);
      for (const item of got) {
        for (const key of Object.keys(item)) if (key !== 'volumeSpec') item[key] = 'mutated';
      }
      got.reverse();
      got.push({ volumeName: 'intruder' });
      assert.deepEqual(structuredClone(g.get(asw)), snapshot);
    });
  }

  it('GetAttachedVolume: mutating the returned object leaves the ASW unchanged', () => {
    const asw = unsorted();
    const got = asw.getAttachedVolume(vol('vol-a')) as Record<string, unknown> | undefined;
    assert.ok(got !== undefined);
    got.deviceMountState = 'DeviceNotMounted';
    got.devicePath = 'mutated';
    got.deviceMountPath = '';
    got.attachability = 'False';
    got.pluginIsAttachable = false;
    const again = attached(asw, vol('vol-a'));
    assert.equal(again.deviceMountState, 'DeviceGloballyMounted');
    assert.equal(again.devicePath, 'dev-vol-a');
    assert.equal(again.deviceMountPath, `${GLOBAL1}-vol-a`);
    assert.equal(again.attachability, 'True');
    assert.equal(asw.getDeviceMountState(vol('vol-a')), 'DeviceGloballyMounted');
  });

  it('a mounted volume handed out earlier does not follow later changes', () => {
    const asw = unsorted();
    const [before] = asw.getMountedVolumes();
    assert.ok(before !== undefined);
    asw.markVolumeMountAsUncertain(opts(before.podName, before.volumeName, before.volumeSpec));
    assert.equal(before.volumeMountState, 'VolumeMounted');
    assert.equal(asw.getVolumeMountState(before.volumeName, before.podName), 'VolumeMountUncertain');
  });
});

describe('ASW: generation()', () => {
  // The reconciler and the volume manager key their idle checks on generation(): a value seen
  // before would read as "the books are as they were then", and a pass would be skipped.
  const V2 = vol('vol-2');
  const SPEC2 = pvSpec('pv-2', 'vol-2');

  it('every change to the books moves generation() forward, never back to a value already seen', () => {
    const asw = createActualStateOfWorld();
    const seen = [asw.generation()];
    const steps: [string, () => void][] = [
      ['attach V1', () => asw.markVolumeAsAttached(V1, SPEC1, PLUGIN, 'dev-0', true)],
      ['reconstruct V2', () => asw.addAttachUncertainReconstructedVolume(V2, SPEC2, PLUGIN, '')],
      ['attach V1 again: new devicePath', () => asw.markVolumeAsAttached(V1, SPEC1, PLUGIN, 'dev-1', true)],
      ['device of V2 uncertain', () => asw.markDeviceAsUncertain(V2, '', GLOBAL1, '')],
      ['devicePath of V2 from node status', () => asw.updateReconstructedDevicePath(V2, 'dev-2')],
      ['attachability of V2 from node status', () => asw.updateReconstructedVolumeAttachability(V2, true)],
      ['pod A on V2 found by reconstruction', () => assert.equal(asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A, V2, SPEC2)), true)],
      ['pod A on V2 mounted', () => asw.markVolumeAsMounted(opts(POD_A, V2, SPEC2))],
      ['pod A on V2 unmounted', () => asw.markVolumeAsUnmounted(POD_A, V2)],
      ['device of V2 unmounted', () => asw.markDeviceAsUnmounted(V2)],
      ['V2 detached', () => asw.markVolumeAsDetached(V2)],
      ['V1 deleted', () => asw.deleteVolume(V1)],
    ];
    for (const [name, step] of steps) {
      step();
      const g = asw.generation();
      assert.ok(seen.every((s) => g > s), `${name}: generation ${g} after ${seen.join(', ')}`);
      seen.push(g);
    }
    assert.deepEqual(asw.getAttachedVolumes(), []);
  });

  it('a call that changes nothing never moves generation() back', () => {
    const asw = withVolume('True', 'DeviceGloballyMounted');
    asw.markVolumeAsMounted(opts(POD_A));
    let g = asw.generation();
    const noops: [string, () => void][] = [
      ['reconstruction of an already mounted pod', () => assert.equal(asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A)), false)],
      ['reconstruction on an absent volume', () => assert.equal(asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts(POD_A, V2, SPEC2)), false)],
      ['devicePath update of a certain device', () => asw.updateReconstructedDevicePath(V1, 'dev-9')],
      ['attachability update of a certain volume', () => asw.updateReconstructedVolumeAttachability(V1, false)],
      ['unmount of an absent pod', () => asw.markVolumeAsUnmounted(POD_B, V1)],
      ['delete of an absent volume', () => asw.deleteVolume(V2)],
    ];
    for (const [name, noop] of noops) {
      noop();
      assert.ok(asw.generation() >= g, `${name}: generation ${asw.generation()} after ${g}`);
      g = asw.generation();
    }
  });
});
