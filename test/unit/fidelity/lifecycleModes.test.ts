// CSIDriver spec.volumeLifecycleModes (csi_mounter.go SetUpAt ->
// supportsVolumeLifecycleMode). Kubelet refuses, as a transient failure retried with backoff, an
// inline (Ephemeral) volume unless the CSIDriver lists Ephemeral (no CSIDriver object: only
// Persistent is allowed), and a PV (Persistent) when the CSIDriver does not list Persistent (the
// API defaults the list to [Persistent]). The raw block path (csi_block.go) does not check.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CSIDriverInfo, CSIVolumeLifecycleMode } from '../../../src/api/core.js';
import { DRIVER, InMemoryNode } from '../../support/inMemoryNode.js';
import { TransientOperationFailure } from '../../../src/volume/util/errors.js';

const SETUP_FAILED = 'kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: ';

function withDriver(node: InMemoryNode, modes: readonly CSIVolumeLifecycleMode[] | 'none' | 'default'): void {
  if (modes === 'none') {
    node.cluster.drivers.delete(DRIVER);
    return;
  }
  const d = node.cluster.drivers.get(DRIVER);
  assert.ok(d);
  const next: CSIDriverInfo = { name: d.name, attachRequired: d.attachRequired, ...(d.podInfoOnMount === undefined ? {} : { podInfoOnMount: d.podInfoOnMount }) };
  node.cluster.drivers.set(DRIVER, modes === 'default' ? next : { ...next, volumeLifecycleModes: modes });
}

/** The failed MountVolume lines (nestedpendingoperations' "Operation for ... failed", error text included). */
function mountErrors(node: InMemoryNode): string[] {
  // The error is quoted inside the line (Go's %q): unquote its \" for the comparisons.
  return node.logger.lines.filter((l) => l.severity === 'E' && l.values['operation'] === 'volume_mount').map((l) => l.msg.replaceAll('\\"', '"'));
}

describe('supportsVolumeLifecycleMode: inline ephemeral volumes', () => {
  const cases: { modes: readonly CSIVolumeLifecycleMode[] | 'none' | 'default'; refused?: string }[] = [
    { modes: 'default', refused: `volume mode "Ephemeral" not supported by driver ${DRIVER} (only supports ["Persistent"])` },
    { modes: ['Persistent'], refused: `volume mode "Ephemeral" not supported by driver ${DRIVER} (only supports ["Persistent"])` },
    { modes: 'none', refused: `volume mode "Ephemeral" not supported by driver ${DRIVER} (no CSIDriver object)` },
    { modes: ['Ephemeral'] },
    { modes: ['Persistent', 'Ephemeral'] },
    // kubelet prints the list the object holds as Go's %q prints a slice: the modes
    // space-separated (a list naming one mode twice is the only way to see the separator).
    { modes: ['Persistent', 'Persistent'], refused: `volume mode "Ephemeral" not supported by driver ${DRIVER} (only supports ["Persistent" "Persistent"])` },
  ];
  for (const c of cases) {
    const label = typeof c.modes === 'string' ? c.modes : JSON.stringify(c.modes);
    it(`CSIDriver volumeLifecycleModes ${label}: ${c.refused === undefined ? 'published' : 'refused before NodePublishVolume, retried'}`, async () => {
      const node = new InMemoryNode();
      withDriver(node, c.modes);
      node.addPod('pod-a', [], ['scratch']);
      const vm = await node.startKubelet(false);
      await node.steps(10);
      await vm.waitForOperations();
      if (c.refused === undefined) {
        assert.equal(vm.asw.getMountedVolumes().length, 1);
        assert.equal(node.driver.callsOf('NodePublishVolume').length, 1);
        return;
      }
      assert.equal(vm.asw.getMountedVolumes().length, 0);
      assert.deepEqual(node.driver.callsOf('NodePublishVolume'), [], 'no NodePublishVolume');
      const errors = mountErrors(node);
      assert.ok(errors.length >= 2, `retried with backoff: ${JSON.stringify(errors)}`);
      assert.ok(errors.every((e) => e.includes(`${SETUP_FAILED}${c.refused ?? ''}`)), JSON.stringify(errors));
      assert.equal(await node.exists(`${node.layout.csiPodVolumeDir('pod-a', 'scratch')}/vol_data.json`), false, 'nothing written for the volume');
    });
  }

  it('the refusal is a TransientOperationFailure (the pod volume stays not mounted, no state change)', async () => {
    const node = new InMemoryNode();
    withDriver(node, 'default');
    const pod = node.addPod('pod-a', [], ['scratch']);
    const vm = await node.startKubelet(false);
    const plugin = vm.plugins.findPluginByName('kubernetes.io/csi');
    const spec = { kind: 'inline' as const, readOnly: false, volume: { name: 'scratch', csi: { driver: DRIVER } } };
    const err = await (await plugin.newMounter(spec, pod)).setUp({}).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof TransientOperationFailure, String(err));
  });
});

describe('supportsVolumeLifecycleMode: persistent volumes', () => {
  for (const modes of ['none', 'default', ['Persistent'], ['Ephemeral']] as const) {
    const refused = modes !== 'none' && modes !== 'default' && !modes.includes('Persistent' as never);
    it(`a PV, CSIDriver volumeLifecycleModes ${typeof modes === 'string' ? modes : JSON.stringify(modes)}: ${refused ? 'staged (MountDevice does not check) but never published' : 'published'}`, async () => {
      const node = new InMemoryNode();
      withDriver(node, modes);
      node.addVolume('pv-1', 'vol-1');
      node.addPod('pod-a', ['pv-1']);
      const vm = await node.startKubelet(false);
      await node.steps(10);
      await vm.waitForOperations();
      assert.equal(node.driver.callsOf('NodeStageVolume').filter((c) => c.outcome === 'OK').length, 1);
      assert.equal(node.driver.callsOf('NodePublishVolume').length, refused ? 0 : 1);
      assert.equal(vm.asw.getMountedVolumes().length, refused ? 0 : 1);
      if (refused) {
        const errors = mountErrors(node);
        assert.ok(errors.length >= 2 && errors.every((e) => e.includes(`${SETUP_FAILED}volume mode "Persistent" not supported by driver ${DRIVER} (only supports ["Ephemeral"])`)), JSON.stringify(errors));
      }
    });
  }

  it('a raw block PV of an Ephemeral-only driver is staged and published: csi_block.go does not check the lifecycle mode', async () => {
    const node = new InMemoryNode();
    withDriver(node, ['Ephemeral']);
    node.addVolume('pv-b', 'vol-b', { mode: 'Block' });
    node.addPod('pod-b', ['pv-b']);
    const vm = await node.startKubelet(false);
    await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
    assert.deepEqual(node.driver.methods().filter((m) => m !== 'NodeGetCapabilities'), ['NodeStageVolume', 'NodePublishVolume']);
  });
});
