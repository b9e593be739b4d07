// What GenerateMountVolumeFunc checks and where its failures land
// (operation_generator.go). Each test reads the driver's calls, the actual state and the backoff.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UniquePodName, UniqueVolumeName } from '../../../src/layout/names.js';
import { createNestedPendingOperations, isBackoff } from '../../../src/operationexecutor/nestedPendingOperations.js';
import { OperationExecutor } from '../../../src/operationexecutor/operationExecutor.js';
import { OperationGenerator } from '../../../src/operationexecutor/operationGenerator.js';
import { RecordingMetrics } from '../../../src/adapters/memory/recordingMetrics.js';
import { gates } from '../../support/hosts.js';
import { InMemoryNode } from '../../support/inMemoryNode.js';
import { VolumePluginMgr, type VolumeMounter, type VolumePlugin, type VolumeUnmounter } from '../../../src/volume/plugins.js';
import type { Spec } from '../../../src/volume/spec.js';
import { createActualStateOfWorld } from '../../../src/volumemanager/cache/actualStateOfWorld.js';
import type { VolumeToMount } from '../../../src/operationexecutor/volumeToMount.js';

const published = (node: InMemoryNode): string[] =>
  node.driver.callsOf('NodePublishVolume').filter((c) => c.outcome === 'OK').map((c) => (c.request as { targetPath: string }).targetPath);

describe('GenerateMountVolumeFunc: ReadWriteOncePod (IsVolumeMountedElsewhere)', () => {
  for (const modes of [['ReadWriteOncePod'], ['ReadWriteOncePod', 'ReadWriteOnce'], ['ReadWriteOnce']]) {
    const refused = modes.length === 1 && modes[0] === 'ReadWriteOncePod';
    it(`access modes ${JSON.stringify(modes)}: a second pod's mount is ${refused ? 'refused' : 'done'}`, async () => {
      const node = new InMemoryNode();
      node.addVolume('pv-1', 'vol-1');
      const pv = node.cluster.pvs.get('pv-1');
      assert.ok(pv);
      node.cluster.pvs.set('pv-1', { ...pv, accessModes: modes });
      node.addPod('pod-a', ['pv-1']);
      const vm = await node.startKubelet(false);
      await node.stepUntil(() => vm.asw.getMountedVolumes().length === 1);
      node.addPod('pod-b', ['pv-1']);
      await node.steps(20);
      await vm.waitForOperations();
      const mountedPods = vm.asw.getMountedVolumes().map((m) => m.podName);
      assert.deepEqual(mountedPods, refused ? ['pod-a'] : ['pod-a', 'pod-b']);
      assert.equal(published(node).length, refused ? 1 : 2);
    });
  }
});

describe('GenerateMountVolumeFunc: node affinity (checkNodeAffinity)', () => {
  for (const zone of ['a', 'b']) {
    it(`a PV requiring zone=a on a node labelled zone=${zone} is ${zone === 'a' ? 'mounted' : 'neither staged nor published'}`, async () => {
      const node = new InMemoryNode();
      node.addVolume('pv-1', 'vol-1');
      const pv = node.cluster.pvs.get('pv-1');
      assert.ok(pv);
      node.cluster.pvs.set('pv-1', {
        ...pv,
        nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }] } },
      });
      node.cluster.nodeLabels = { zone };
      node.addPod('pod-a', ['pv-1']);
      const vm = await node.startKubelet(false);
      await node.steps(20);
      await vm.waitForOperations();
      assert.equal(vm.asw.getMountedVolumes().length, zone === 'a' ? 1 : 0);
      assert.deepEqual(
        node.driver.methods().filter((m) => m !== 'NodeGetCapabilities'),
        zone === 'a' ? ['NodeStageVolume', 'NodePublishVolume'] : [],
      );
    });
  }
});

/** A plugin whose NewMounter always fails, counting its calls. */
class FailingMounterPlugin implements VolumePlugin {
  newMounterCalls = 0;
  getPluginName(): string {
    return 'example.com/failing';
  }
  canSupport(spec: Spec): boolean {
    return spec.kind === 'inline';
  }
  getVolumeName(): string {
    throw new Error('not attachable');
  }
  constructVolumeSpec(): never {
    throw new Error('not reconstructable');
  }
  newMounter(): Promise<VolumeMounter> {
    this.newMounterCalls++;
    return Promise.reject(new Error('mounter cannot be built'));
  }
  newUnmounter(): Promise<VolumeUnmounter> {
    return Promise.reject(new Error('no unmounter'));
  }
}

describe('GenerateMountVolumeFunc: FindPluginBySpec / NewMounter fail inside the operation', () => {
  it('a NewMounter failure is an operation failure, so the next pass is held back by the backoff', async () => {
    const node = new InMemoryNode();
    const plugin = new FailingMounterPlugin();
    const plugins = new VolumePluginMgr([plugin]);
    const generator = new OperationGenerator({ plugins, host: hostOf(node), cluster: node.cluster, logger: node.logger });
    const pending = createNestedPendingOperations(node.clock);
    const executor = new OperationExecutor(generator, pending, node.clock, new RecordingMetrics());
    const asw = createActualStateOfWorld();
    const vtm: VolumeToMount = {
      podName: 'pod-a' as UniquePodName,
      pod: { uid: 'pod-a', namespace: 'default', name: 'pod-a', nodeName: 'node-1', volumes: [], volumeMounts: [], volumeDevices: [] },
      spec: { kind: 'inline', readOnly: false, volume: { name: 'v' } },
      outerVolumeSpecName: 'v',
      seLinuxMountContext: '',
      volumeName: 'example.com/failing/pod-a-v' as UniqueVolumeName,
      pluginName: plugin.getPluginName(),
      pluginIsAttachable: false,
      pluginIsDeviceMountable: false,
      reportedInUse: false,
    };
    asw.markVolumeAsAttached(vtm.volumeName, vtm.spec, plugin.getPluginName(), '', false);
    await executor.mountVolume(vtm, '', asw);
    await executor.waitForPending();
    assert.equal(plugin.newMounterCalls, 1);
    await node.clock.advance(100);
    await assert.rejects(executor.mountVolume(vtm, '', asw), isBackoff);
    assert.equal(plugin.newMounterCalls, 1, 'the backoff spared a second NewMounter');
  });
});

function hostOf(node: InMemoryNode): ConstructorParameters<typeof OperationGenerator>[0]['host'] {
  return {
    layout: node.layout,
    realRootDir: '/var/lib/kubelet',
    fs: node.fs,
    features: gates(false),
    logger: node.logger,
    clock: node.clock,
    mounter: node.mounter,
    csiDrivers: { client: () => undefined },
    cluster: node.cluster,
    nodeName: 'node-1',
  };
}

/** A plugin whose TearDown always fails. */
class FailingTearDownPlugin extends FailingMounterPlugin {
  override newUnmounter(): Promise<VolumeUnmounter> {
    return Promise.resolve({ getPath: () => '/x', tearDown: () => Promise.reject(new Error('unpublish failed')) });
  }
}

describe('GenerateUnmountVolumeFunc: a failed TearDown marks the mount uncertain even without a spec', () => {
  it('the pod\'s mount turns uncertain; the record keeps the volume\'s spec', async () => {
    const node = new InMemoryNode();
    const plugin = new FailingTearDownPlugin();
    const generator = new OperationGenerator({ plugins: new VolumePluginMgr([plugin]), host: hostOf(node), cluster: node.cluster, logger: node.logger });
    const asw = createActualStateOfWorld();
    const spec: Spec = { kind: 'inline', readOnly: false, volume: { name: 'v' } };
    const volumeName = 'example.com/failing/pod-a-v' as UniqueVolumeName;
    const podName = 'pod-a' as UniquePodName;
    asw.markVolumeAsAttached(volumeName, spec, plugin.getPluginName(), '', false);
    asw.markVolumeAsMounted({ podName, podUID: 'pod-a', volumeName, volumeSpec: spec, outerVolumeSpecName: 'v', innerVolumeSpecName: 'v', pluginName: plugin.getPluginName(), volumeMountState: 'VolumeMounted', seLinuxMountContext: '' });
    const op = await generator.generateUnmountVolume(
      { podName, podUID: 'pod-a', volumeName, innerVolumeSpecName: 'v', outerVolumeSpecName: 'v', pluginName: plugin.getPluginName(), volumeSpec: undefined },
      asw,
    );
    await assert.rejects(op.run(), /unpublish failed/);
    assert.equal(asw.getVolumeMountState(volumeName, podName), 'VolumeMountUncertain');
  });

  it('a spec-less cleanup of a volume the actual state does not have logs the failed marks', async () => {
    const node = new InMemoryNode();
    const plugin = new FailingTearDownPlugin();
    const generator = new OperationGenerator({ plugins: new VolumePluginMgr([plugin]), host: hostOf(node), cluster: node.cluster, logger: node.logger });
    const op = await generator.generateUnmountVolume(
      { podName: 'pod-a' as UniquePodName, podUID: 'pod-a', volumeName: 'v' as UniqueVolumeName, innerVolumeSpecName: 'v', outerVolumeSpecName: 'v', pluginName: plugin.getPluginName(), volumeSpec: undefined },
      createActualStateOfWorld(),
    );
    await assert.rejects(op.run(), /unpublish failed/);
    assert.deepEqual(node.logger.lines.filter((l) => l.severity === 'E').map((l) => l.msg), ['UnmountVolume.MarkVolumeMountAsUncertain failed']);
  });
});
