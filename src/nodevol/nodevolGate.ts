/**
 * What one of nodevol's gates is, seen from the node that composes it: its name, its proof and
 * documentation, and the policy it builds for one life of a node.
 */
import type { FeatureGate, FeatureName } from '../features/features.js';
import type { OperationGeneratorHooks } from '../operationexecutor/operationGeneratorHooks.js';
import type { CsiHooks } from '../volume/csi/csiHooks.js';
import type { VolumeHost } from '../volume/volumeHost.js';
import type { ReconstructHooks } from '../volumemanager/reconciler/reconstructHooks.js';
import type { VolumeManagerHooks } from '../volumemanager/volumeManager.js';

/** The hooks one gate sets, and its periodic work. No hook is set by two gates. */
export interface GatePolicy {
  readonly csi?: Partial<CsiHooks>;
  readonly operationGenerator?: OperationGeneratorHooks;
  readonly reconstruct?: Partial<ReconstructHooks>;
  /** Run by the node's housekeeping loop after kubelet's orphaned pod dir sweep. */
  readonly housekeeping?: () => Promise<void>;
}

export interface NodevolGate {
  readonly name: FeatureName;
  /** The built-in explorer scenarios that prove it (src/sim/gateProofs.ts). */
  readonly proofScenarios: readonly string[];
  /** Its section: docs/feature-gates.md#<doc>. */
  readonly doc: string;
  /**
   * Builds the gate's policy for one life of a node (composeNode calls it once per life: every
   * bit of in-memory state the gate keeps lives in what it returns, and dies with the life).
   */
  create(host: VolumeHost, features: FeatureGate): GatePolicy;
}

/** Every enabled gate's policy, composed: what composeNode wires into the volume manager. */
export interface NodevolPolicy {
  readonly hooks: VolumeManagerHooks;
  /** After kubelet's housekeeping: the gates' periodic work (none: resolves at once). */
  readonly housekeeping: () => Promise<void>;
}
