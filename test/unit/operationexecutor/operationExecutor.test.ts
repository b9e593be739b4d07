// The OperationExecutor (operation_executor.go: MountVolume, UnmountVolume, UnmountDevice and
// VerifyControllerAttachedVolume) over a generator that records what it is asked to build: a Block
// volume goes to the map/unmap operations and a Filesystem one (or a spec-less unmount target) to
// mount/unmount; a failed operation holds back the same operation of the same volume mode until
// its backoff expires, refused before anything is generated again (nestedpendingoperations' Run
// compares the operation name); and the failure's log line names the operation as the
// generator's GenerateErrorDetailed prefix does (operation_generator.go).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RecordingMetrics } from '../../../src/adapters/memory/recordingMetrics.js';
import type { UniquePodName } from '../../../src/layout/names.js';
import type { AttachedVolume, UnmountTarget } from '../../../src/operationexecutor/actualStateOfWorldUpdater.js';
import { BACKOFF_INITIAL_MS, createNestedPendingOperations, isBackoff } from '../../../src/operationexecutor/nestedPendingOperations.js';
import { OperationExecutor } from '../../../src/operationexecutor/operationExecutor.js';
import { OP, type Operation, type OperationGenerator } from '../../../src/operationexecutor/operationGenerator.js';
import type { VolumeToMount } from '../../../src/operationexecutor/volumeToMount.js';
import type { Spec } from '../../../src/volume/spec.js';
import { FakeClock } from '../../support/fakeClock.js';
import { RecordingLogger } from '../../support/hosts.js';
import { csiPvSpec, recordingAsw, VOLUME, volumeToMount } from '../../support/operationGeneratorFakes.js';

const CSI = 'kubernetes.io/csi';
const FILESYSTEM = csiPvSpec();
const BLOCK = csiPvSpec({ volumeMode: 'Block' });
const UNIQUE = `(UniqueName: ${JSON.stringify(VOLUME)})`;

function unmountTarget(volumeSpec: Spec | undefined): UnmountTarget {
  return { podName: 'uid-2' as UniquePodName, podUID: 'uid-2', volumeName: VOLUME, innerVolumeSpecName: 'pv-1', outerVolumeSpecName: 'data', pluginName: CSI, volumeSpec };
}

function attachedVolume(volumeSpec: Spec): AttachedVolume {
  return {
    volumeName: VOLUME,
    volumeSpec,
    pluginName: CSI,
    pluginIsAttachable: true,
    attachability: 'True',
    deviceMountState: 'DeviceGloballyMounted',
    devicePath: '',
    deviceMountPath: '/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/x/globalmount',
    seLinuxMountContext: '',
  };
}

/**
 * An executor over a real NestedPendingOperations (fake clock, recording logger) and a generator
 * that records each build (its method name) and hands back an operation of kubelet's name for it
 * that fails with "boom" while `fail` is set.
 */
function executorWithRecordingGenerator(): {
  executor: OperationExecutor;
  generated: string[];
  setFailing(fail: boolean): void;
  clock: FakeClock;
  logger: RecordingLogger;
  metrics: RecordingMetrics;
} {
  const clock = new FakeClock();
  const logger = new RecordingLogger();
  const metrics = new RecordingMetrics();
  const generated: string[] = [];
  let fail = true;
  const build = (method: string, operationName: string): Operation => {
    generated.push(method);
    return { operationName, pluginLabel: CSI, run: () => (fail ? Promise.reject(new Error('boom')) : Promise.resolve()) };
  };
  const generator = {
    generateVerifyControllerAttachedVolume: () => build('generateVerifyControllerAttachedVolume', OP.verifyControllerAttachedVolume),
    generateMountVolume: () => build('generateMountVolume', OP.mount),
    generateMapVolume: () => Promise.resolve(build('generateMapVolume', OP.map)),
    generateUnmountVolume: () => Promise.resolve(build('generateUnmountVolume', OP.unmount)),
    generateUnmapVolume: () => Promise.resolve(build('generateUnmapVolume', OP.unmap)),
    generateUnmountDevice: () => build('generateUnmountDevice', OP.unmountDevice),
    generateUnmapDevice: () => Promise.resolve(build('generateUnmapDevice', OP.unmapDevice)),
  } as unknown as OperationGenerator;
  const executor = new OperationExecutor(generator, createNestedPendingOperations(clock, logger), clock, metrics);
  return {
    executor,
    generated,
    setFailing: (f) => {
      fail = f;
    },
    clock,
    logger,
    metrics,
  };
}

interface Case {
  readonly title: string;
  /** The generator method the executor must ask, and the operation name it must run. */
  readonly generator: string;
  readonly operationName: string;
  start(executor: OperationExecutor): Promise<void>;
  runnable(executor: OperationExecutor): boolean;
  /** The failure line's prefix (GenerateErrorDetailed): operation, volume and, for a pod's operation, the pod. */
  readonly failurePrefix: string;
}

function mountCase(title: string, spec: Spec, generator: string, operationName: string, operation: string): Case {
  const vtm: VolumeToMount = volumeToMount({ spec });
  return {
    title,
    generator,
    operationName,
    start: (e) => e.mountVolume(vtm, '', recordingAsw().asw),
    runnable: (e) => e.isMountVolumeRunnable(vtm),
    failurePrefix: `${operation} failed for volume "pv-1" ${UNIQUE} pod "default/pod-2" (UID: "uid-2")`,
  };
}

function unmountCase(title: string, spec: Spec | undefined, generator: string, operationName: string, operation: string): Case {
  const mv = unmountTarget(spec);
  return {
    title,
    generator,
    operationName,
    start: (e) => e.unmountVolume(mv, recordingAsw().asw),
    runnable: (e) => e.isUnmountVolumeRunnable(mv),
    failurePrefix: `${operation} failed for volume "pv-1" ${UNIQUE} pod "uid-2"`,
  };
}

function unmountDeviceCase(title: string, spec: Spec, generator: string, operationName: string, operation: string): Case {
  const av = attachedVolume(spec);
  return {
    title,
    generator,
    operationName,
    start: (e) => e.unmountDevice(av, recordingAsw().asw),
    runnable: (e) => e.isUnmountDeviceRunnable(av),
    failurePrefix: `${operation} failed for volume "pv-1" ${UNIQUE}`,
  };
}

const VERIFY_VTM = volumeToMount();
const VERIFY: Case = {
  title: 'VerifyControllerAttachedVolume',
  generator: 'generateVerifyControllerAttachedVolume',
  operationName: OP.verifyControllerAttachedVolume,
  start: (e) => Promise.resolve().then(() => e.verifyControllerAttachedVolume(VERIFY_VTM, recordingAsw().asw)),
  runnable: (e) => e.isVerifyControllerAttachedVolumeRunnable(VERIFY_VTM),
  failurePrefix: `VerifyControllerAttachedVolume failed for volume "pv-1" ${UNIQUE} pod "default/pod-2" (UID: "uid-2")`,
};

/** The operations whose pending-operation checks come before the operation is built: a Block and a Filesystem volume each. */
const MODE_CASES: readonly Case[] = [
  mountCase('MountVolume of a Filesystem volume', FILESYSTEM, 'generateMountVolume', OP.mount, 'MountVolume'),
  mountCase('MountVolume of a Block volume (MapVolume)', BLOCK, 'generateMapVolume', OP.map, 'MapVolume'),
  unmountCase('UnmountVolume of a Filesystem volume', FILESYSTEM, 'generateUnmountVolume', OP.unmount, 'UnmountVolume.TearDown'),
  unmountCase('UnmountVolume of a target without a spec (Filesystem)', undefined, 'generateUnmountVolume', OP.unmount, 'UnmountVolume.TearDown'),
  unmountCase('UnmountVolume of a Block volume (UnmapVolume)', BLOCK, 'generateUnmapVolume', OP.unmap, 'UnmapVolume'),
  unmountDeviceCase('UnmountDevice of a Filesystem volume', FILESYSTEM, 'generateUnmountDevice', OP.unmountDevice, 'UnmountDevice'),
  unmountDeviceCase('UnmountDevice of a Block volume (UnmapDevice)', BLOCK, 'generateUnmapDevice', OP.unmapDevice, 'UnmapDevice'),
];
const CASES: readonly Case[] = [...MODE_CASES, VERIFY];

describe('OperationExecutor: the operation for the volume mode', () => {
  for (const c of CASES) {
    it(`${c.title}: builds ${c.generator} and runs ${c.operationName}`, async () => {
      const h = executorWithRecordingGenerator();
      h.setFailing(false);
      await c.start(h.executor);
      await h.executor.waitForPending();
      assert.deepEqual(h.generated, [c.generator]);
      assert.deepEqual(
        h.metrics.ofKind('storageOperation').map((m) => [m.operationName, m.status]),
        [[c.operationName, 'success']],
      );
    });
  }
});

describe('OperationExecutor: a failed operation holds back the same operation until its backoff expires', () => {
  for (const c of MODE_CASES) {
    it(`${c.title}: not runnable, and refused before anything is built again, for ${BACKOFF_INITIAL_MS} ms; then retried`, async () => {
      const h = executorWithRecordingGenerator();
      await c.start(h.executor);
      await h.executor.waitForPending();
      assert.equal(c.runnable(h.executor), false, 'in backoff');
      await assert.rejects(c.start(h.executor), isBackoff);
      assert.deepEqual(h.generated, [c.generator], 'the refusal comes before the operation is built again');

      await h.clock.advance(BACKOFF_INITIAL_MS + 1);
      assert.equal(c.runnable(h.executor), true, 'backoff expired');
      h.setFailing(false);
      await c.start(h.executor);
      await h.executor.waitForPending();
      assert.deepEqual(h.generated, [c.generator, c.generator]);
      assert.deepEqual(
        h.metrics.ofKind('storageOperation').map((m) => m.status),
        ['fail-unknown', 'success'],
      );
    });
  }
});

describe('OperationExecutor: the failure line names the operation, the volume and the pod', () => {
  for (const c of CASES) {
    it(`${c.title}: ${c.failurePrefix.split(' failed')[0] ?? ''}`, async () => {
      const h = executorWithRecordingGenerator();
      await c.start(h.executor);
      await h.executor.waitForPending();
      const errors = h.logger.lines.filter((l) => l.severity === 'E').map((l) => l.msg);
      assert.equal(errors.length, 1);
      assert.ok(
        errors[0]?.endsWith(`(durationBeforeRetry 500ms). Error: ${JSON.stringify(`${c.failurePrefix} : boom`)}`),
        errors[0],
      );
    });
  }
});

/** An executor whose mount operations stay pending until `finish` is called, and may advance the clock first. */
function executorWithHeldMounts(clock: FakeClock): {
  executor: OperationExecutor;
  metrics: RecordingMetrics;
  runs: string[];
  finish(outcome: 'success' | 'fail'): void;
} {
  const metrics = new RecordingMetrics();
  const runs: string[] = [];
  const waiters: ((outcome: 'success' | 'fail') => void)[] = [];
  const generator = {
    generateMountVolume: (vtm: VolumeToMount): Operation => ({
      operationName: OP.mount,
      pluginLabel: CSI,
      run: async () => {
        runs.push(vtm.podName);
        const outcome = await new Promise<'success' | 'fail'>((resolve) => waiters.push(resolve));
        if (outcome === 'fail') throw new Error('boom');
      },
    }),
  } as unknown as OperationGenerator;
  const executor = new OperationExecutor(generator, createNestedPendingOperations(clock, new RecordingLogger()), clock, metrics);
  return {
    executor,
    metrics,
    runs,
    finish: (outcome) => {
      for (const w of waiters.splice(0)) w(outcome);
    },
  };
}

// storage_operation_duration_seconds (operation_executor.go / operation_generator.go) records how
// long the operation ran: the time from its start to its end, on success and on failure.
describe('OperationExecutor: the storage operation metric records how long the operation took', () => {
  for (const outcome of ['success', 'fail'] as const) {
    it(`${outcome}: the duration is the time that passed while the operation ran`, async () => {
      const clock = new FakeClock({ startMs: 10_000 });
      const h = executorWithHeldMounts(clock);
      await h.executor.mountVolume(volumeToMount(), '', recordingAsw().asw);
      await clock.advance(250);
      h.finish(outcome);
      await h.executor.waitForPending();
      assert.deepEqual(
        h.metrics.ofKind('storageOperation').map((m) => [m.operationName, m.status, m.durationMs]),
        [[OP.mount, outcome === 'success' ? 'success' : 'fail-unknown', 250]],
      );
    });
  }
});

// Pending-operation keys (operation_executor.go MountVolume): an attachable or device-mountable
// volume is mounted one pod at a time (empty pod name in the key); any other volume is keyed per
// pod, so two pods mount it in parallel.
describe('OperationExecutor: MountVolume serialises per volume only for attachable or device-mountable volumes', () => {
  const rows: readonly [string, Partial<VolumeToMount>, boolean][] = [
    ['neither attachable nor device-mountable: the second pod mounts in parallel', { pluginIsAttachable: false, pluginIsDeviceMountable: false }, true],
    ['attachable: the second pod waits', { pluginIsAttachable: true, pluginIsDeviceMountable: false }, false],
    ['device-mountable: the second pod waits', { pluginIsAttachable: false, pluginIsDeviceMountable: true }, false],
  ];
  for (const [name, over, parallel] of rows) {
    it(name, async () => {
      const h = executorWithHeldMounts(new FakeClock());
      const podA = volumeToMount(over);
      const podB = volumeToMount({ ...over, podName: 'uid-3' as UniquePodName, pod: { ...podA.pod, uid: 'uid-3', name: 'pod-3' } });
      await h.executor.mountVolume(podA, '', recordingAsw().asw);
      assert.equal(h.executor.isMountVolumeRunnable(podB), parallel);
      if (parallel) await h.executor.mountVolume(podB, '', recordingAsw().asw);
      else await assert.rejects(h.executor.mountVolume(podB, '', recordingAsw().asw));
      h.finish('success');
      await h.executor.waitForPending();
      assert.deepEqual(h.runs, parallel ? ['uid-2', 'uid-3'] : ['uid-2']);
    });
  }
});
