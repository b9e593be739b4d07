// Feature gates: kubelet's --feature-gates syntax, defaults, the deprecated alias, errors.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CSIGlobalMountReconstruction, FeatureGate, FeatureGateError } from '../../../src/features/features.js';

describe('feature gates', () => {
  it('CSIGlobalMountReconstruction is alpha and off by default', () => {
    assert.equal(FeatureGate.defaults().enabled(CSIGlobalMountReconstruction), false);
    assert.deepEqual(FeatureGate.defaults().snapshot(), {
      CSIDurableBlockVolumePaths: false,
      CSIGlobalMountReconstruction: false,
      CSIKeepUncertainMountOnFinalError: false,
      CSIReadWriteOncePodWaitsForUnreconstructedMounts: false,
      CSIListGlobalVolumesWithoutStagingDir: false,
      CSIRetryReconstructionCleanup: false,
      CSIUnpublishBeforeUnstageAfterReconstruction: false,
      CSIUnstageCompletesBeforeRestage: false,
    });
  });

  const accepted: [string[], boolean][] = [
    [['CSIGlobalMountReconstruction=true'], true],
    [['CSIGlobalMountReconstruction=True'], true],
    [['CSIGlobalMountReconstruction=1'], true],
    [['CSIGlobalMountReconstruction=t'], true],
    [['CSIGlobalMountReconstruction=false'], false],
    [['CSIGlobalMountReconstruction=F'], false],
    [[' CSIGlobalMountReconstruction = true , '], true],
    [[''], false],
    [['CSIGlobalMountReconstruction=true', 'CSIGlobalMountReconstruction=false'], false],
    [['CSIGlobalMountReconstruction=false,CSIGlobalMountReconstruction=true'], true],
  ];
  for (const [flags, want] of accepted) {
    it(`parses ${JSON.stringify(flags)} as ${want}`, () => {
      const { gate, warnings } = FeatureGate.parse(flags);
      assert.equal(gate.enabled(CSIGlobalMountReconstruction), want);
      assert.deepEqual(warnings, []);
    });
  }

  it("AllAlpha=true (kubelet's special gate) turns on every alpha gate; one given by name keeps its value, before or after it", () => {
    const every = FeatureGate.parse(['AllAlpha=true']).gate.snapshot();
    assert.ok(Object.keys(every).length >= 7);
    assert.deepEqual(Object.entries(every).filter(([, v]) => !v), []);
    for (const flags of [['AllAlpha=true,CSIDurableBlockVolumePaths=false'], ['CSIDurableBlockVolumePaths=false', 'AllAlpha=true']]) {
      const snap = FeatureGate.parse(flags).gate.snapshot();
      assert.equal(snap['CSIDurableBlockVolumePaths'], false, JSON.stringify(flags));
      assert.equal(snap['CSIGlobalMountReconstruction'], true, JSON.stringify(flags));
    }
    assert.equal(FeatureGate.parse(['AllAlpha=true', 'AllAlpha=false']).gate.enabled(CSIGlobalMountReconstruction), false);
    assert.equal(FeatureGate.parse(['AllAlpha=true,VolumeReconstructionFallback=false']).gate.enabled(CSIGlobalMountReconstruction), false);
    assert.equal(FeatureGate.parse(['AllBeta=true']).gate.enabled(CSIGlobalMountReconstruction), false, 'no gate is beta');
    assert.throws(() => FeatureGate.parse(['AllAlpha=yes']), (e: unknown) => e instanceof FeatureGateError && /invalid value of AllAlpha=yes/.test(e.message));
  });

  it('accepts VolumeReconstructionFallback as a deprecated alias with a warning', () => {
    const { gate, warnings } = FeatureGate.parse(['VolumeReconstructionFallback=true']);
    assert.equal(gate.enabled(CSIGlobalMountReconstruction), true);
    assert.equal(gate.snapshot()['CSIGlobalMountReconstruction'], true);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0] ?? '', /VolumeReconstructionFallback is deprecated, use CSIGlobalMountReconstruction/);
  });

  it('accepts the retired CSIRemoveNewStagingDirOnTransientError with a warning and no effect (not in the snapshot, not set by AllAlpha)', () => {
    const { gate, warnings } = FeatureGate.parse(['CSIRemoveNewStagingDirOnTransientError=true']);
    assert.deepEqual(gate.snapshot(), FeatureGate.defaults().snapshot());
    assert.deepEqual(warnings, [
      'feature gate CSIRemoveNewStagingDirOnTransientError is deprecated and has no effect: MountDevice removes the volume directory after a failed VOLUME_MOUNT_GROUP check whatever the gates, as kubelet does',
    ]);
    assert.equal('CSIRemoveNewStagingDirOnTransientError' in FeatureGate.parse(['AllAlpha=true']).gate.snapshot(), false);
  });

  const rejected: [string, RegExp][] = [
    ['Foo=true', /unrecognized feature gate: Foo/],
    ['CSIGlobalMountReconstruction', /missing bool value for CSIGlobalMountReconstruction/],
    ['CSIGlobalMountReconstruction=yes', /invalid value of CSIGlobalMountReconstruction=yes/],
    ['CSIGlobalMountReconstruction=', /invalid value/],
    ['=true', /unrecognized feature gate/],
  ];
  for (const [flag, err] of rejected) {
    it(`rejects ${JSON.stringify(flag)}`, () => {
      assert.throws(() => FeatureGate.parse([flag]), (e: unknown) => e instanceof FeatureGateError && err.test(e.message));
    });
  }

  // A contradictory old/new pair used to turn the gate off silently (the later one won).
  for (const flags of [
    ['CSIGlobalMountReconstruction=true,VolumeReconstructionFallback=false'],
    ['VolumeReconstructionFallback=false', 'CSIGlobalMountReconstruction=true'],
    ['VolumeReconstructionFallback=true', 'CSIGlobalMountReconstruction=false'],
  ]) {
    it(`rejects the old and the new gate name with different values: ${JSON.stringify(flags)}`, () => {
      assert.throws(() => FeatureGate.parse(flags), (err: unknown) => {
        assert.ok(err instanceof FeatureGateError);
        assert.match(err.message, /VolumeReconstructionFallback=(true|false) contradicts CSIGlobalMountReconstruction=(true|false)/);
        return true;
      });
    });
  }

  it('accepts the old and the new gate name with the same value (one warning, the value applied)', () => {
    const { gate, warnings } = FeatureGate.parse(['VolumeReconstructionFallback=true,CSIGlobalMountReconstruction=true']);
    assert.equal(gate.enabled(CSIGlobalMountReconstruction), true);
    assert.equal(warnings.length, 1);
  });
});
