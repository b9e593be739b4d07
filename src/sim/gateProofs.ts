/**
 * Which built-in explorer scenario proves each of nodevol's gates (docs/feature-gates.md, "How
 * each gate is proved"): with every other gate on and this one off it shows a violation, with every gate on
 * none. `bench/exploreGates.ts` runs them; a gate without one fails it (**NO PROOF**).
 */
import { CSIGlobalMountReconstruction, knownFeatures } from '../features/features.js';
import { NODEVOL_GATES } from '../nodevol/registry.js';

/**
 * nodevol gate → the built-in scenarios that prove it (each one on its own), as each gate's folder
 * of src/nodevol/ names them (its code, its proof and its doc section side by side):
 * - CSIUnpublishBeforeUnstageAfterReconstruction: the KEP's alpha gap;
 * - CSIListGlobalVolumesWithoutStagingDir: story 1's teardown cut short; then, found by the
 *   explorer over generated workloads, leftovers whose removal (or whose interrupted write's
 *   completion) meets a read-only or full root dir;
 * - CSIDurableBlockVolumePaths: a raw block volume and a power cut;
 * - CSIUnstageCompletesBeforeRestage: the filesystem path, and the raw block path (found by the
 *   explorer over generated workloads);
 * - CSIRetryReconstructionCleanup: a candidate no pod wanted at the first pass; one whose pod went
 *   before its SetUp (explorer);
 * - CSIKeepUncertainMountOnFinalError: a volume only the listing found; then, found by the
 *   explorer over generated workloads, a filesystem stage and publish done then failed, a raw
 *   block publish timed out then failed, and a publish failed on a read-only root dir, whose
 *   cleanup failed too;
 */
export const GATE_PROOFS: Readonly<Record<string, readonly string[]>> = Object.fromEntries(NODEVOL_GATES.map((g) => [g.name, g.proofScenarios]));

/** nodevol's own gates: every registered gate but KEP-6058's, the aliases and the retired ones. */
export function nodevolGates(): string[] {
  return knownFeatures()
    .filter(([name, spec]) => spec.aliasOf === undefined && spec.retired === undefined && name !== CSIGlobalMountReconstruction)
    .map(([name]) => name);
}

export type ProofPlan = { readonly gate: string } & ({ readonly kind: 'run'; readonly scenario: string } | { readonly kind: 'missing'; readonly why: string } | { readonly kind: 'not-selected'; readonly scenario: string });

/**
 * For each gate, its proofs to run, or why it has none: no scenario named, or one that is not
 * built in. A proof scenario left out of `selected` (a run over some scenarios only) is not run.
 */
export function planProofs(gates: readonly string[], proofs: Readonly<Record<string, readonly string[]>>, builtin: readonly string[], selected: readonly string[]): ProofPlan[] {
  return gates.flatMap((gate): ProofPlan[] => {
    const scenarios = proofs[gate] ?? [];
    if (scenarios.length === 0) return [{ gate, kind: 'missing', why: 'no proof scenario' }];
    return scenarios.map((scenario): ProofPlan => {
      if (!builtin.includes(scenario)) return { gate, kind: 'missing', why: `proof scenario ${scenario} is not built in` };
      if (!selected.includes(scenario)) return { gate, kind: 'not-selected', scenario };
      return { gate, kind: 'run', scenario };
    });
  });
}
