// nodevol's gates as the node composes them (src/nodevol/): the registry names every nodevol gate
// of src/features/features.ts once, with a built-in proof scenario and a section of
// docs/feature-gates.md each; composeNodevolPolicy sets only the enabled gates' hooks over
// kubelet's defaults, and refuses two gates setting one hook.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { CSIDurableBlockVolumePaths, CSIGlobalMountReconstruction, CSIRetryReconstructionCleanup, CSIUnstageCompletesBeforeRestage, FeatureGate, type FeatureName } from '../../../src/features/features.js';
import { composeNodevolPolicy } from '../../../src/nodevol/composePolicy.js';
import type { NodevolGate } from '../../../src/nodevol/nodevolGate.js';
import { NODEVOL_GATES } from '../../../src/nodevol/registry.js';
import { GATE_PROOFS, nodevolGates } from '../../../src/sim/gateProofs.js';
import { builtinScenarioNames } from '../../../src/sim/scenario.js';
import { upstreamVolumeManagerHooks } from '../../../src/volumemanager/volumeManager.js';
import { InMemoryNode } from '../../support/inMemoryNode.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');

/** GitHub's slug of a markdown heading. */
function slug(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

async function host(gates: FeatureGate): Promise<Parameters<typeof composeNodevolPolicy>[1]> {
  const node = new InMemoryNode();
  await node.startKubelet(gates);
  const composed = node.composed;
  assert.ok(composed !== undefined);
  return composed.host;
}

describe('the nodevol gate registry', () => {
  it('names every nodevol gate once, each with built-in proof scenarios (what gateProofs.ts reads) and a doc section', () => {
    assert.deepEqual(NODEVOL_GATES.map((g) => g.name).sort(), nodevolGates().sort());
    const builtin = builtinScenarioNames();
    const anchors = new Set(
      readFileSync(path.join(REPO_ROOT, 'docs', 'feature-gates.md'), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('## '))
        .map((l) => slug(l.slice(3))),
    );
    for (const g of NODEVOL_GATES) {
      assert.ok(g.proofScenarios.length > 0 && g.proofScenarios.every((s) => builtin.includes(s)), `${g.name}: ${g.proofScenarios.join(', ')}`);
      assert.deepEqual(GATE_PROOFS[g.name], g.proofScenarios);
      assert.ok(anchors.has(g.doc), `${g.name}: no section #${g.doc} in docs/feature-gates.md`);
    }
  });
});

describe('composeNodevolPolicy', () => {
  it("with no nodevol gate on: kubelet's hooks, and housekeeping that does nothing", async () => {
    const gates = FeatureGate.of({ CSIGlobalMountReconstruction: true });
    const policy = composeNodevolPolicy(gates, await host(gates));
    assert.deepEqual(policy.hooks, upstreamVolumeManagerHooks);
    assert.equal(await policy.housekeeping(), undefined);
  });

  it('with one gate on: its hooks only, over the defaults', async () => {
    const gates = FeatureGate.of({ CSIGlobalMountReconstruction: true, CSIDurableBlockVolumePaths: true });
    const { csi, operationGenerator, reconstruct } = composeNodevolPolicy(gates, await host(gates)).hooks;
    assert.deepEqual(Object.keys(csi).sort(), ['publishPathParentCreated', 'stagingPathCreated', 'uncertainAfterFinishedError']);
    assert.equal(csi.uncertainAfterFinishedError, upstreamVolumeManagerHooks.csi.uncertainAfterFinishedError);
    assert.deepEqual([operationGenerator, reconstruct], [upstreamVolumeManagerHooks.operationGenerator, upstreamVolumeManagerHooks.reconstruct]);
  });

  it('with every gate on: each hook set once, the gates\' own required hooks replacing the defaults', async () => {
    const gates = FeatureGate.parse(['AllAlpha=true']).gate;
    const { csi, reconstruct } = composeNodevolPolicy(gates, await host(gates)).hooks;
    assert.notEqual(csi.uncertainAfterFinishedError, upstreamVolumeManagerHooks.csi.uncertainAfterFinishedError);
    assert.notEqual(reconstruct.afterPodVolumesWalked, upstreamVolumeManagerHooks.reconstruct.afterPodVolumesWalked);
    assert.equal(csi.unstageWhenStagingPathGone, true);
    assert.ok(reconstruct.cleanOrphanVolumes !== undefined);
  });

  describe('housekeeping: the enabled gates\' periodic work', () => {
    const names = [CSIDurableBlockVolumePaths, CSIRetryReconstructionCleanup, CSIUnstageCompletesBeforeRestage] as const;
    const on = FeatureGate.of({ CSIGlobalMountReconstruction: true, [names[0]]: true, [names[1]]: true, [names[2]]: true });
    /** A gate named `name` whose housekeeping logs its start and (a turn later) its end in `log`. */
    function gate(name: FeatureName, log: string[], housekeeping = true): NodevolGate & { run: () => Promise<void> } {
      const run = async (): Promise<void> => {
        log.push(`${name} start`);
        await Promise.resolve();
        log.push(`${name} end`);
      };
      return { name, proofScenarios: [], doc: '', run, create: () => (housekeeping ? { housekeeping: run } : {}) };
    }

    it('none: a settled promise of nothing', async () => {
      const log: string[] = [];
      const policy = composeNodevolPolicy(on, await host(on), [gate(names[0], log, false), gate(names[1], log, false)]);
      const done = policy.housekeeping();
      assert.ok(done instanceof Promise);
      assert.equal(await done, undefined);
      assert.deepEqual(log, []);
    });

    it("one: that gate's function itself (as many turns as the call it replaces)", async () => {
      const log: string[] = [];
      const only = gate(names[1], log);
      const policy = composeNodevolPolicy(on, await host(on), [gate(names[0], log, false), only, gate(names[2], log, false)]);
      assert.equal(policy.housekeeping, only.run);
    });

    it("two or more: each in the registry's order, each finished before the next starts; a disabled gate's never", async () => {
      const log: string[] = [];
      const some = FeatureGate.of({ CSIGlobalMountReconstruction: true, [names[0]]: true, [names[2]]: true });
      const policy = composeNodevolPolicy(some, await host(some), [gate(names[0], log), gate(names[1], log), gate(names[2], log)]);
      await policy.housekeeping();
      assert.deepEqual(log, [`${names[0]} start`, `${names[0]} end`, `${names[2]} start`, `${names[2]} end`]);
      await policy.housekeeping();
      assert.equal(log.length, 8);
    });
  });

  it('two gates setting one hook: an error naming both', async () => {
    const gates = FeatureGate.of({ CSIGlobalMountReconstruction: true, CSIDurableBlockVolumePaths: true });
    const twin: NodevolGate = { name: CSIGlobalMountReconstruction, proofScenarios: [], doc: '', create: () => ({ csi: { stagingPathCreated: () => Promise.resolve() } }) };
    const durable = NODEVOL_GATES.find((g) => g.name === CSIDurableBlockVolumePaths);
    assert.ok(durable !== undefined);
    const h = await host(gates);
    assert.throws(() => composeNodevolPolicy(gates, h, [durable, twin]), /CSIDurableBlockVolumePaths and CSIGlobalMountReconstruction both set the csi hook stagingPathCreated/);
  });

  it('the error names the kind of hook too: an operation generator or a reconstruction hook', async () => {
    const gates = FeatureGate.of({ CSIGlobalMountReconstruction: true, CSIDurableBlockVolumePaths: true, CSIRetryReconstructionCleanup: true });
    const h = await host(gates);
    const two = (part: ReturnType<NodevolGate['create']>): NodevolGate[] =>
      ([CSIDurableBlockVolumePaths, CSIRetryReconstructionCleanup] as const).map((name) => ({ name, proofScenarios: [], doc: '', create: () => part }));
    assert.throws(() => composeNodevolPolicy(gates, h, two({ operationGenerator: { deviceStaysUncertain: () => true } })), {
      message: 'feature gates CSIDurableBlockVolumePaths and CSIRetryReconstructionCleanup both set the operationGenerator hook deviceStaysUncertain',
    });
    assert.throws(() => composeNodevolPolicy(gates, h, two({ reconstruct: { cleanOrphanVolumes: () => Promise.resolve([]) } })), {
      message: 'feature gates CSIDurableBlockVolumePaths and CSIRetryReconstructionCleanup both set the reconstruct hook cleanOrphanVolumes',
    });
  });
});
