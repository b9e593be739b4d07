// The ReadWriteOncePod check of MountVolume and MapVolume (operation_generator.go
// GenerateMountVolumeFunc / GenerateMapVolumeFunc, kubelet's decision): a PV whose only access
// mode is ReadWriteOncePod is refused for a pod while the actual state has it (possibly) mounted
// for another; any other PV, or no other pod, goes on to the setup. nodevol's
// volumeMountedElsewhere hook may answer instead, with a promise, which is awaited; a boolean
// answer is not (MapVolume's check is then decided before run() returns).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inspect } from 'node:util';
import type { ActualStateOfWorldMounterUpdater } from '../../../src/operationexecutor/actualStateOfWorldUpdater.js';
import { OperationGenerator } from '../../../src/operationexecutor/operationGenerator.js';
import type { VolumeToMount } from '../../../src/operationexecutor/volumeToMount.js';
import type { VolumePluginMgr } from '../../../src/volume/plugins.js';
import { InMemoryNode, volumeHostOf } from '../../support/inMemoryNode.js';
import { csiPvSpec, VOLUME, volumeToMount } from '../../support/operationGeneratorFakes.js';

const REFUSAL = 'volume uses the ReadWriteOncePod access mode and is already in use by another pod';
/** Thrown by the fake plugin manager at the first step after the check: the operation went past it. */
const PAST = 'past the ReadWriteOncePod check';

function vtm(accessModes: readonly string[]): VolumeToMount {
  return volumeToMount({ spec: csiPvSpec({ accessModes: [...accessModes] }) });
}

/**
 * Runs MountVolume (or MapVolume) with the actual state answering `elsewhere` (or, with `hook`,
 * nodevol's volumeMountedElsewhere hook answering a promise of it); what it asked, what it had
 * asked when run() returned its promise (before any turn), whether that promise was rejected
 * already, and how it ended.
 */
async function run(kind: 'mount' | 'map', accessModes: readonly string[], elsewhere: boolean, hook = false): Promise<{ asked: string[]; askedAtOnce: string[]; rejectedAtOnce: boolean; error: string }> {
  const asked: string[] = [];
  const plugin = {
    getPluginName: () => 'kubernetes.io/csi',
    newMounter: () => Promise.resolve({}),
    newBlockVolumeMapper: () => Promise.resolve({ getGlobalMapPath: () => '/g', getPodDeviceMapPath: () => ({ dir: '/p', name: 'n' }) }),
  };
  const plugins = {
    findPluginBySpec: () => plugin,
    findMapperPluginBySpec: () => plugin,
    findDeviceMountablePluginBySpec: () => {
      throw new Error(PAST);
    },
  } as unknown as VolumePluginMgr;
  const asw = {
    isVolumeMountedElsewhere: (name: string, pod: string) => {
      asked.push(`isVolumeMountedElsewhere ${name} ${pod}`);
      return elsewhere;
    },
    getDeviceMountState: () => {
      asked.push('getDeviceMountState');
      throw new Error(PAST);
    },
  } as unknown as ActualStateOfWorldMounterUpdater;
  const node = new InMemoryNode();
  const hooks = hook
    ? {
        volumeMountedElsewhere: (v: VolumeToMount) => {
          asked.push(`volumeMountedElsewhere ${v.volumeName} ${v.podName}`);
          return Promise.resolve(elsewhere);
        },
      }
    : {};
  const generator = new OperationGenerator({ plugins, host: volumeHostOf(node), cluster: node.cluster, logger: node.logger, hooks });
  const op = kind === 'mount' ? generator.generateMountVolume(vtm(accessModes), '/dev/x', asw) : await generator.generateMapVolume(vtm(accessModes), '/dev/x', asw);
  const running = op.run();
  const askedAtOnce = [...asked];
  const rejectedAtOnce = inspect(running).includes('<rejected>');
  try {
    await running;
    return { asked, askedAtOnce, rejectedAtOnce, error: '' };
  } catch (err) {
    return { asked, askedAtOnce, rejectedAtOnce, error: err instanceof Error ? err.message : String(err) };
  }
}

for (const [kind, prefix] of [
  ['mount', 'MountVolume.SetUp failed'],
  ['map', 'MapVolume.SetUpDevice failed'],
] as const) {
  describe(`${kind === 'mount' ? 'MountVolume' : 'MapVolume'}: the ReadWriteOncePod check`, () => {
    it('ReadWriteOncePod, mounted for another pod: refused with the upstream message, nothing set up', async () => {
      const r = await run(kind, ['ReadWriteOncePod'], true);
      assert.deepEqual(r.asked, [`isVolumeMountedElsewhere ${VOLUME} uid-2`]);
      assert.match(r.error, new RegExp(`^${prefix.replace('.', '\\.')} for volume .*${REFUSAL}$`));
      assert.doesNotMatch(r.error, new RegExp(PAST));
    });

    it('ReadWriteOncePod, no other pod: the setup goes on', async () => {
      const r = await run(kind, ['ReadWriteOncePod'], false);
      assert.deepEqual(r.asked, [`isVolumeMountedElsewhere ${VOLUME} uid-2`, ...(kind === 'map' ? ['getDeviceMountState'] : [])]);
      assert.match(r.error, new RegExp(PAST));
    });

    it('nodevol\'s hook answering a promise: awaited, refused on true, the setup goes on on false', async () => {
      const refused = await run(kind, ['ReadWriteOncePod'], true, true);
      assert.deepEqual(refused.asked, [`volumeMountedElsewhere ${VOLUME} uid-2`]);
      assert.match(refused.error, new RegExp(`^${prefix.replace('.', '\\.')} for volume .*${REFUSAL}$`));
      const goesOn = await run(kind, ['ReadWriteOncePod'], false, true);
      assert.deepEqual(goesOn.asked, [`volumeMountedElsewhere ${VOLUME} uid-2`, ...(kind === 'map' ? ['getDeviceMountState'] : [])]);
      assert.match(goesOn.error, new RegExp(PAST));
    });

    it('any other access modes (ReadWriteOnce; ReadWriteOncePod beside another mode): not asked, the setup goes on', async () => {
      for (const modes of [['ReadWriteOnce'], ['ReadWriteOncePod', 'ReadWriteOnce'], []]) {
        const r = await run(kind, modes, true);
        assert.deepEqual(r.asked, kind === 'map' ? ['getDeviceMountState'] : [], modes.join(','));
        assert.match(r.error, new RegExp(PAST), modes.join(','));
      }
    });
  });
}

describe('MapVolume: a boolean answer of the ReadWriteOncePod check costs no turn', () => {
  it('the operation asks for the device state before run() has returned its promise', async () => {
    const r = await run('map', ['ReadWriteOncePod'], false);
    assert.deepEqual(r.askedAtOnce, [`isVolumeMountedElsewhere ${VOLUME} uid-2`, 'getDeviceMountState']);
  });

  it('a refusal on a boolean answer: the promise run() returns is rejected already', async () => {
    const r = await run('map', ['ReadWriteOncePod'], true);
    assert.match(r.error, new RegExp(REFUSAL));
    assert.equal(r.rejectedAtOnce, true);
  });
});
