/**
 * Feature gates, kubelet style (component-base featuregate): one registry of known gates with
 * their defaults and maturity, parsed from `--feature-gates=A=true,B=false`.
 *
 * Upstream behaviour is the default. Every deliberate deviation from upstream kubelet is a gate
 * registered here, default off unless stated, with a section in docs/feature-gates.md
 * saying why.
 */

export type PreRelease = 'Alpha' | 'Beta' | 'GA' | 'Deprecated';

export interface FeatureSpec {
  readonly default: boolean;
  readonly preRelease: PreRelease;
  readonly description: string;
  /** Set for an old name that is still accepted: the value is applied to this gate, with a warning. */
  readonly aliasOf?: FeatureName;
  /** Set for a retired gate, still accepted with a warning and no effect: why it has none. */
  readonly retired?: string;
}

/** KEP-6058: reconstruct CSI volumes from their global mounts (listing + pod-local fallback). */
export const CSIGlobalMountReconstruction = 'CSIGlobalMountReconstruction';
/** The gate's name before the 2026-09-07 KEP revision; accepted as a deprecated alias. */
export const VolumeReconstructionFallback = 'VolumeReconstructionFallback';

// nodevol's gates for the gaps the explorer shows beyond KEP-6058 (docs/feature-gates.md).
// Each is default off: upstream behaviour stays the default.

/**
 * A volume the global listing recovered gets the pod volume directories that could not be
 * reconstructed and carry its PV name (never an inline volume's) as pod mounts of it, so that each
 * target is NodeUnpublished before NodeUnstageVolume; an unmount whose pod-local file is lost
 * builds its unmounter from the volume's spec in the actual state.
 */
export const CSIUnpublishBeforeUnstageAfterReconstruction = 'CSIUnpublishBeforeUnstageAfterReconstruction';
/** The cleanup of a pod volume that failed reconstruction is retried with backoff until it succeeds. */
export const CSIRetryReconstructionCleanup = 'CSIRetryReconstructionCleanup';

/**
 * The global listing also registers a volume directory whose vol_data.json is readable but whose
 * staging directory is missing (a teardown cut short after the staging dir's rmdir; a block
 * staging dir lost with a power cut), or that holds only nodevol's complete vol_data.json.tmp (a
 * MountDevice cut short before its rename: the write is finished first), so that it is unstaged
 * (idempotently) and cleaned.
 */
export const CSIListGlobalVolumesWithoutStagingDir = 'CSIListGlobalVolumesWithoutStagingDir';

/**
 * A raw block volume's staging dir and publish target are made durable (fsync) before
 * NodeStageVolume / NodePublishVolume, so that a power cut cannot leave the driver with a staged
 * or published volume of which nothing is on disk.
 */
export const CSIDurableBlockVolumePaths = 'CSIDurableBlockVolumePaths';

/**
 * kubernetes#121357: before NodeUnstageVolume the CSI attacher durably marks the volume directory
 * (`unstage-in-progress`); before NodeStageVolume of a marked volume it sends NodeUnstageVolume
 * again and stages only once that returns OK, so a stage never overtakes an unstage still running
 * at the driver (a timed-out one, or one a restart or reboot forgot).
 */
export const CSIUnstageCompletesBeforeRestage = 'CSIUnstageCompletesBeforeRestage';

/**
 * nodevol: a final error of NodeStageVolume or NodePublishVolume does not make kubelet forget a
 * device or pod mount that may be there. An uncertain one (found at reconstruction, including a
 * device only the global listing found; an earlier call timed out; an unstage or unpublish failed)
 * stays uncertain and keeps its staging dir / pod volume dir and vol_data.json; one whose staging
 * path or target shows the driver's work after the error (the driver did it, then failed) becomes
 * uncertain. Upstream marks them not mounted (all but a reconstructed one) and removes their
 * records, so nothing unstages or unpublishes them when the pod goes and volumesInUse drops a
 * volume the driver still has staged.
 */
export const CSIKeepUncertainMountOnFinalError = 'CSIKeepUncertainMountOnFinalError';
/**
 * nodevol: for a PV whose only access mode is ReadWriteOncePod, a pod volume directory of another
 * pod that failed reconstruction and carries the volume's spec name counts as mounted elsewhere
 * until it is gone, so a new pod waits for the old pod's target to be unpublished. Upstream such a
 * directory is in no state of the world, and the new pod is published beside it.
 */
export const CSIReadWriteOncePodWaitsForUnreconstructedMounts = 'CSIReadWriteOncePodWaitsForUnreconstructedMounts';
/**
 * Retired (deprecated, no effect): MountDevice removed a volume directory it had made after a
 * failed VOLUME_MOUNT_GROUP check. MountDevice now runs kubelet's removeMountDir there whatever the
 * gates (its deferred cleanup sees the raw, finished error), which removes such a directory too.
 */
export const CSIRemoveNewStagingDirOnTransientError = 'CSIRemoveNewStagingDirOnTransientError';
/** The earlier name of {@link CSIKeepUncertainMountOnFinalError}, which covered reconstructed volumes only. */
export const CSIKeepListedVolumeOnStageFailure = 'CSIKeepListedVolumeOnStageFailure';

/**
 * The gates kubelet itself has (KEP-6058's): the only ones the kubelet copy (volume/, volume/csi/,
 * operationexecutor/, volumemanager/) may ask about. nodevol's own gates act through the hooks
 * the copy declares (src/nodevol/).
 */
export type KubeletFeatureName = typeof CSIGlobalMountReconstruction;

/** The feature gates as the kubelet copy sees them ({@link FeatureGate} is one). */
export interface KubeletFeatureGate {
  enabled(name: KubeletFeatureName): boolean;
}

export type FeatureName =
  | typeof CSIGlobalMountReconstruction
  | typeof CSIDurableBlockVolumePaths
  | typeof CSIListGlobalVolumesWithoutStagingDir
  | typeof CSIUnpublishBeforeUnstageAfterReconstruction
  | typeof CSIRetryReconstructionCleanup
  | typeof CSIKeepUncertainMountOnFinalError
  | typeof CSIUnstageCompletesBeforeRestage
  | typeof CSIReadWriteOncePodWaitsForUnreconstructedMounts;

const KNOWN_FEATURES: Readonly<Record<string, FeatureSpec>> = {
  [CSIGlobalMountReconstruction]: {
    default: false,
    preRelease: 'Alpha',
    description:
      'KEP-6058: reconstruction lists CSI global mounts and falls back to the global vol_data.json when the pod-local one is unreadable.',
  },
  [CSIUnpublishBeforeUnstageAfterReconstruction]: {
    default: false,
    preRelease: 'Alpha',
    description:
      'nodevol: pod volume dirs that failed reconstruction are paired by PV name with a volume the global listing recovered and NodeUnpublished before its NodeUnstageVolume (the KEP-6058 alpha gap).',
  },
  [CSIRetryReconstructionCleanup]: {
    default: false,
    preRelease: 'Alpha',
    description: 'nodevol: the cleanup of a pod volume that failed reconstruction is retried with backoff until its TearDown succeeds, and done also when its pod goes before its SetUp (upstream tries once, and never for a volume a pod wants at that moment).',
  },
  [CSIKeepUncertainMountOnFinalError]: {
    default: false,
    preRelease: 'Alpha',
    description:
      'nodevol: a final NodeStageVolume / NodePublishVolume error leaves an uncertain device or pod mount (reconstructed, listed, or made uncertain by an earlier call) uncertain with its staging or pod volume dir and vol_data.json, and makes one whose staging path or target shows the driver\'s work uncertain, so it is still unstaged / unpublished when no pod wants it.',
  },
  [CSIListGlobalVolumesWithoutStagingDir]: {
    default: false,
    preRelease: 'Alpha',
    description:
      'nodevol: the KEP-6058 global listing also registers a volume whose global vol_data.json is readable but whose staging directory is missing (interrupted teardown, power cut), or that holds only nodevol\'s complete vol_data.json.tmp (interrupted MountDevice: the write is finished first), so it is unstaged and its directory removed.',
  },
  [CSIDurableBlockVolumePaths]: {
    default: false,
    preRelease: 'Alpha',
    description:
      'nodevol: a raw block volume\'s staging dir and publish target are fsynced before NodeStageVolume / NodePublishVolume, so a power cut cannot leave the driver with a volume staged or published of which nothing is on disk.',
  },
  [CSIUnstageCompletesBeforeRestage]: {
    default: false,
    preRelease: 'Alpha',
    description:
      'nodevol: NodeUnstageVolume is recorded durably beside the global vol_data.json until it returns OK; a NodeStageVolume of a volume so marked is preceded by a NodeUnstageVolume that must return OK first (kubernetes#121357).',
  },
  [CSIReadWriteOncePodWaitsForUnreconstructedMounts]: {
    default: false,
    preRelease: 'Alpha',
    description:
      'nodevol: for a PV whose only access mode is ReadWriteOncePod, another pod\'s volume dir that failed reconstruction counts as mounted elsewhere until it is gone, so a new pod waits for its unpublish (upstream the ReadWriteOncePod check cannot see it and the new pod is published beside it).',
  },
  [CSIRemoveNewStagingDirOnTransientError]: {
    default: false,
    preRelease: 'Deprecated',
    description:
      'Deprecated, no effect: MountDevice removes the volume directory after a failed VOLUME_MOUNT_GROUP check whatever the gates, as kubelet does.',
    retired: 'MountDevice removes the volume directory after a failed VOLUME_MOUNT_GROUP check whatever the gates, as kubelet does',
  },
  [CSIKeepListedVolumeOnStageFailure]: {
    default: false,
    preRelease: 'Deprecated',
    description: `Deprecated name of ${CSIKeepUncertainMountOnFinalError}, which covered reconstructed volumes only.`,
    aliasOf: CSIKeepUncertainMountOnFinalError,
  },
  [VolumeReconstructionFallback]: {
    default: false,
    preRelease: 'Deprecated',
    description: `Deprecated name of ${CSIGlobalMountReconstruction}.`,
    aliasOf: CSIGlobalMountReconstruction,
  },
};

/** Gates that can be set, with their specs (aliases included), sorted by name. */
export function knownFeatures(): ReadonlyArray<readonly [string, FeatureSpec]> {
  return Object.entries(KNOWN_FEATURES).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

export class FeatureGateError extends Error {
  override readonly name = 'FeatureGateError';
}

/** An immutable set of gate values. */
export class FeatureGate {
  private constructor(private readonly values: ReadonlyMap<FeatureName, boolean>) {}

  /** All gates at their defaults. */
  static defaults(): FeatureGate {
    return new FeatureGate(new Map());
  }

  /** Gates with explicit values (tests, simulator). */
  static of(values: Partial<Record<FeatureName, boolean>>): FeatureGate {
    const m = new Map<FeatureName, boolean>();
    for (const [k, v] of Object.entries(values)) {
      if (v !== undefined) m.set(k as FeatureName, v);
    }
    return new FeatureGate(m);
  }

  enabled(name: FeatureName): boolean {
    const spec = KNOWN_FEATURES[name];
    if (spec === undefined) throw new FeatureGateError(`unrecognized feature gate: ${name}`);
    return this.values.get(name) ?? spec.default;
  }

  /** The value of every gate but the aliases and the retired ones, sorted by name: what `-o json` reports. */
  snapshot(): Record<string, boolean> {
    const out: Record<string, boolean> = {};
    for (const [name, spec] of knownFeatures()) {
      if (spec.aliasOf === undefined && spec.retired === undefined) out[name] = this.enabled(name as FeatureName);
    }
    return out;
  }

  /**
   * Parses one or more `--feature-gates` values (later values win), the way kubelet does:
   * comma-separated `Name=bool`, bool as Go's strconv.ParseBool accepts it. An unknown gate or a
   * malformed pair throws a {@link FeatureGateError}. Deprecated aliases apply to their target and
   * add a warning; a retired gate only adds a warning. `AllAlpha=bool` / `AllBeta=bool` (kubelet's too) set every Alpha / Beta gate
   * not given by name, wherever they stand in the list.
   */
  static parse(flagValues: readonly string[]): { gate: FeatureGate; warnings: string[] } {
    const values = new Map<FeatureName, boolean>();
    const warnings: string[] = [];
    // The last value given under each spelling, to catch an old and a new name that disagree.
    const bySpelling = new Map<string, boolean>();
    const all = new Map<'Alpha' | 'Beta', boolean>();
    for (const flagValue of flagValues) {
      for (const rawPair of flagValue.split(',')) {
        const pair = rawPair.trim();
        if (pair === '') continue;
        const eq = pair.indexOf('=');
        if (eq < 0) throw new FeatureGateError(`missing bool value for ${pair}`);
        const key = pair.slice(0, eq).trim();
        const rawValue = pair.slice(eq + 1).trim();
        const stage = key === ALL_ALPHA ? 'Alpha' : key === ALL_BETA ? 'Beta' : undefined;
        const spec = KNOWN_FEATURES[key];
        const value = parseGoBool(rawValue);
        if (spec === undefined && stage === undefined) throw new FeatureGateError(`unrecognized feature gate: ${key}`);
        if (value === undefined) {
          throw new FeatureGateError(`invalid value of ${key}=${rawValue}, err: strconv.ParseBool: parsing ${JSON.stringify(rawValue)}: invalid syntax`);
        }
        if (spec === undefined) {
          if (stage !== undefined) all.set(stage, value);
          continue;
        }
        if (spec.retired !== undefined) {
          warnings.push(`feature gate ${key} is deprecated and has no effect: ${spec.retired}`);
          continue;
        }
        bySpelling.set(key, value);
        if (spec.aliasOf !== undefined) {
          warnings.push(`feature gate ${key} is deprecated, use ${spec.aliasOf} instead`);
          values.set(spec.aliasOf, value);
        } else {
          values.set(key as FeatureName, value);
        }
      }
    }
    for (const [key, value] of bySpelling) {
      const target = KNOWN_FEATURES[key]?.aliasOf;
      const targetValue = target === undefined ? undefined : bySpelling.get(target);
      if (target !== undefined && targetValue !== undefined && targetValue !== value) {
        throw new FeatureGateError(
          `${key}=${value} contradicts ${target}=${targetValue}: ${key} is the deprecated name of ${target}; give one of them, or both with the same value`,
        );
      }
    }
    for (const [stage, value] of all) {
      for (const [name, spec] of knownFeatures()) {
        if (spec.aliasOf === undefined && spec.preRelease === stage && !values.has(name as FeatureName)) values.set(name as FeatureName, value);
      }
    }
    return { gate: new FeatureGate(values), warnings };
  }
}

/** kubelet's special gates: every Alpha / every Beta gate not set by name. */
export const ALL_ALPHA = 'AllAlpha';
export const ALL_BETA = 'AllBeta';

/** Go strconv.ParseBool. */
function parseGoBool(s: string): boolean | undefined {
  switch (s) {
    case '1': case 't': case 'T': case 'TRUE': case 'true': case 'True':
      return true;
    case '0': case 'f': case 'F': case 'FALSE': case 'false': case 'False':
      return false;
    default:
      return undefined;
  }
}
