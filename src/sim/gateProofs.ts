/**
 * Which built-in explorer scenario proves each of nodevol's gates (README "Gates beyond
 * upstream"): with every other gate on and this one off it shows a violation, with every gate on
 * none. `bench/exploreGates.ts` runs them; a gate without one fails it (**NO PROOF**).
 */
import { CSIGlobalMountReconstruction, knownFeatures } from '../features/features.js';

/** nodevol gate → the built-in scenario that proves it. */
export const GATE_PROOFS: Readonly<Record<string, string>> = {
  CSIUnpublishBeforeUnstageAfterReconstruction: 'alpha-gap',
  CSIListGlobalVolumesWithoutStagingDir: 'kep-story-1',
  CSIKeepListedVolumeOnStageFailure: 'listed-restage-fails',
  CSIDurableBlockVolumePaths: 'raw-block',
  CSIUnstageCompletesBeforeRestage: 'rewanted-during-unstage',
  CSIRetryReconstructionCleanup: 'reconstruction-cleanup-retry',
};

/** nodevol's own gates: every registered gate but KEP-6058's and the aliases. */
export function nodevolGates(): string[] {
  return knownFeatures()
    .filter(([name, spec]) => spec.aliasOf === undefined && name !== CSIGlobalMountReconstruction)
    .map(([name]) => name);
}

export type ProofPlan = { readonly gate: string } & ({ readonly kind: 'run'; readonly scenario: string } | { readonly kind: 'missing'; readonly why: string } | { readonly kind: 'not-selected'; readonly scenario: string });

/**
 * For each gate, its proof to run, or why it has none: no scenario named, or one that is not built
 * in. A proof scenario left out of `selected` (a run over some scenarios only) is not run.
 */
export function planProofs(gates: readonly string[], proofs: Readonly<Record<string, string>>, builtin: readonly string[], selected: readonly string[]): ProofPlan[] {
  return gates.map((gate): ProofPlan => {
    const scenario = proofs[gate];
    if (scenario === undefined) return { gate, kind: 'missing', why: 'no proof scenario' };
    if (!builtin.includes(scenario)) return { gate, kind: 'missing', why: `proof scenario ${scenario} is not built in` };
    if (!selected.includes(scenario)) return { gate, kind: 'not-selected', scenario };
    return { gate, kind: 'run', scenario };
  });
}
