/**
 * Feature gates, kubelet style (component-base featuregate): one registry of known gates with
 * their defaults and maturity, parsed from `--feature-gates=A=true,B=false`.
 *
 * Upstream behaviour is the default. Every deliberate deviation from upstream kubelet is a gate
 * registered here, default off unless stated, with a line in README.md ("How nodevol follows
 * kubelet") saying why.
 */

export type PreRelease = 'Alpha' | 'Beta' | 'GA' | 'Deprecated';

export interface FeatureSpec {
  readonly default: boolean;
  readonly preRelease: PreRelease;
  readonly description: string;
  /** Set for an old name that is still accepted: the value is applied to this gate, with a warning. */
  readonly aliasOf?: FeatureName;
}

/** KEP-6058: reconstruct CSI volumes from their global mounts (listing + pod-local fallback). */
export const CSIGlobalMountReconstruction = 'CSIGlobalMountReconstruction';
/** The gate's name before the 2026-09-07 KEP revision; accepted as a deprecated alias. */
export const VolumeReconstructionFallback = 'VolumeReconstructionFallback';

export type FeatureName = typeof CSIGlobalMountReconstruction;

const KNOWN_FEATURES: Readonly<Record<string, FeatureSpec>> = {
  [CSIGlobalMountReconstruction]: {
    default: false,
    preRelease: 'Alpha',
    description:
      'KEP-6058: reconstruction lists CSI global mounts and falls back to the global vol_data.json when the pod-local one is unreadable.',
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

  /** The value of every non-alias gate, sorted by name: what `-o json` reports. */
  snapshot(): Record<string, boolean> {
    const out: Record<string, boolean> = {};
    for (const [name, spec] of knownFeatures()) {
      if (spec.aliasOf === undefined) out[name] = this.enabled(name as FeatureName);
    }
    return out;
  }

  /**
   * Parses one or more `--feature-gates` values (later values win), the way kubelet does:
   * comma-separated `Name=bool`, bool as Go's strconv.ParseBool accepts it. An unknown gate or a
   * malformed pair throws a {@link FeatureGateError}. Deprecated aliases apply to their target and
   * add a warning.
   */
  static parse(flagValues: readonly string[]): { gate: FeatureGate; warnings: string[] } {
    const values = new Map<FeatureName, boolean>();
    const warnings: string[] = [];
    // The last value given under each spelling, to catch an old and a new name that disagree.
    const bySpelling = new Map<string, boolean>();
    for (const flagValue of flagValues) {
      for (const rawPair of flagValue.split(',')) {
        const pair = rawPair.trim();
        if (pair === '') continue;
        const eq = pair.indexOf('=');
        if (eq < 0) throw new FeatureGateError(`missing bool value for ${pair}`);
        const key = pair.slice(0, eq).trim();
        const rawValue = pair.slice(eq + 1).trim();
        const spec = KNOWN_FEATURES[key];
        if (spec === undefined) throw new FeatureGateError(`unrecognized feature gate: ${key}`);
        const value = parseGoBool(rawValue);
        if (value === undefined) {
          throw new FeatureGateError(`invalid value of ${key}=${rawValue}, err: strconv.ParseBool: parsing ${JSON.stringify(rawValue)}: invalid syntax`);
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
    return { gate: new FeatureGate(values), warnings };
  }
}

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
