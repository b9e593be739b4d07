// The unit tests KEP-6058's Test Plan lists: a mount reference
// whose vol_data.json is corrupt (not only missing) or names no driver is reported rather than
// guessed at, and NewUnmounter recovers from a legacy global file (no specVolID) and refuses one
// naming no driver. Real files in a temporary root dir; the mount table is the fixture's.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { CsiPlugin } from '../../../src/volume/csi/csiPlugin.js';
import { NodeFixture } from '../../support/nodeFixture.js';
import { RecordingLogger, volumeHost } from '../../support/hosts.js';
import type { FileContent } from '../../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';

describe('KEP-6058 Test Plan: the global file a pod mount leads to', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  /** pv-1 staged with the given global file, its pod-local file lost, the bind mount in place. */
  async function lostPodLocal(file?: FileContent, legacyFile = false): Promise<string> {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', legacyFile, ...(file === undefined ? {} : { file }) });
    return fx.podVolume({ uid: 'pod-1', specName: 'pv-1', driver: DRIVER, handle: 'vol-1', file: 'absent', boundFrom: gm });
  }

  for (const gateOn of [false, true]) {
    const g = `(gate ${gateOn ? 'on' : 'off'})`;

    it(`ConstructVolumeSpec: a reference whose vol_data.json is corrupt is reported, not guessed ${g}`, async () => {
      const dir = await lostPodLocal({ raw: '{"driverName": "ebs.csi.example.com", "volumeHandle": ' });
      await assert.rejects(
        new CsiPlugin(volumeHost(fx, { gateOn })).constructVolumeSpec('pv-1', dir),
        gateOn ? /fallback to the global mount failed: no global mount is bind mounted at .*globalmount \(/s : /failed loading volume data using/,
      );
    });

    it(`ConstructVolumeSpec: a reference whose data names no driver is reported, not guessed ${g}`, async () => {
      const dir = await lostPodLocal({ data: { volumeHandle: 'vol-1', specVolID: 'pv-1' } });
      await assert.rejects(
        new CsiPlugin(volumeHost(fx, { gateOn })).constructVolumeSpec('pv-1', dir),
        gateOn ? /no driverName or volumeHandle/ : /failed loading volume data using/,
      );
    });

    it(`NewUnmounter: a legacy global file (no specVolID) gives the driver and handle ${g}`, async () => {
      await lostPodLocal(undefined, true);
      const logger = new RecordingLogger();
      const plugin = new CsiPlugin(volumeHost(fx, { gateOn, logger }));
      if (!gateOn) {
        await assert.rejects(plugin.newUnmounter('pv-1', 'pod-1'), /unmounter failed to load volume data file/);
        return;
      }
      const unmounter = await plugin.newUnmounter('pv-1', 'pod-1');
      assert.equal(unmounter.getPath(), `${fx.layout.csiPodVolumeDir('pod-1', 'pv-1')}/mount`);
      assert.ok(logger.lines.some((l) => l.msg === 'unmounter recovered vol_data from global mount' && l.level === 2));
      // The driver named by the legacy file is the one TearDown asks for (not registered here).
      await assert.rejects(unmounter.tearDown(), new RegExp(`driver name ${DRIVER.replace(/\./g, '\\.')} not found`));
    });

    it(`NewUnmounter: a global file naming no driver is refused ${g}`, async () => {
      await lostPodLocal({ data: { volumeHandle: 'vol-1', specVolID: 'pv-1' } });
      await assert.rejects(
        new CsiPlugin(volumeHost(fx, { gateOn })).newUnmounter('pv-1', 'pod-1'),
        gateOn ? /fallback to the global mount failed: .*no driverName or volumeHandle/s : /unmounter failed to load volume data file/,
      );
    });
  }
});
