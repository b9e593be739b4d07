/**
 * The steps the KEP-6058 node e2e scenarios share, on a real {@link TestNode}: a pod using a PV
 * mounted by the agent, and story 1 up to the reboot (the pod deleted, NodeUnpublishVolume done,
 * NodeUnstageVolume held by the driver, the agent SIGKILLed, the node rebooted).
 *
 * Each step checks what it relies on and throws (naming what it saw) when the node is not in the
 * state it leads to, so a test failing here fails with the step that went wrong.
 *
 * Not named *.test.ts: npm test runs only *.test.js files.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';

import type { JournalEntry, WrittenPod } from './nodeDisk.js';
import type { StatusWrite, TestNode, TestVolume } from './testNode.js';
import { describeState, waitFor } from './waitFor.js';

export interface MountedPod {
  readonly vol: TestVolume;
  readonly pod: WrittenPod;
  /** The pod's volume name (the PVC reference in the pod spec). */
  readonly podVolumeName: string;
  readonly mode: 'Filesystem' | 'Block';
}

export interface MountedPodOptions {
  readonly gate: boolean;
  /** Default 'pv-1'. */
  readonly pvName?: string;
  /** Default 'app'. */
  readonly podName?: string;
  readonly mode?: 'Filesystem' | 'Block';
}

function fail(step: string, seen: unknown): never {
  throw new Error(`${step}: ${describeState(seen)}`);
}

/**
 * Starts the driver (if `startDriver`), creates a volume, writes a pod using it and starts the
 * agent; resolves once the volume is published into the pod, mounted there, and reported in
 * volumesInUse.
 */
export async function mountedPod(node: TestNode, o: MountedPodOptions): Promise<MountedPod> {
  const mode = o.mode ?? 'Filesystem';
  await node.startDriver();
  const vol = await node.createVolume(o.pvName ?? 'pv-1', mode);
  const podVolumeName = 'data';
  const pod = await node.disk.writePod({
    name: o.podName ?? 'app',
    volumes: [{ name: podVolumeName, claimName: vol.claimName }],
    ...(mode === 'Block' ? { blockVolumes: [podVolumeName] } : {}),
  });
  const mark = await node.journalMark();
  await node.startAgent({ gate: o.gate });
  await node.waitForCall(mark, (e) => e.method === 'NodePublishVolume' && e.volumeId === vol.volumeHandle && e.error === null, `NodePublishVolume OK for ${vol.pvName}`);
  const calls = await node.calls(mark);
  if (calls.join() !== 'NodeStageVolume OK,NodePublishVolume OK') fail('mounting the pod: expected NodeStageVolume then NodePublishVolume', calls);
  const target = mode === 'Block' ? node.disk.layout.csiBlockPublishPath(vol.pvName, pod.uid) : node.podMountPath(pod.uid, vol.pvName);
  if (!(await node.ns.isMounted(target))) fail(`mounting the pod: ${target} is not a mount point`, await node.mountsUnder(node.disk.rootDir));
  await waitFor(async () => (await node.disk.volumesInUse()).includes(vol.uniqueVolumeName), {
    what: `volumesInUse to list ${vol.uniqueVolumeName}`,
    observe: () => node.disk.nodeStatus(),
  });
  return { vol, pod, podVolumeName, mode };
}

/**
 * Story 1 up to the reboot: the driver holds NodeUnstageVolume (a hang fault), the pod is
 * deleted, NodeUnpublishVolume succeeds and NodeUnstageVolume arrives and is held; the agent is
 * SIGKILLed and the node reboots (the driver dies with it, the unstage never completes); the
 * faults file is removed. Checks the leftovers: the volume dir with its vol_data.json and
 * globalmount/, no pod volume dir, nothing mounted, the driver still recording it staged and
 * not published.
 */
export async function drainAndRebootDuringUnstage(node: TestNode, m: MountedPod): Promise<void> {
  const { vol, pod } = m;
  await node.disk.writeFaults({ faults: [{ method: 'NodeUnstageVolume', hang: true }] });
  const mark = await node.journalMark();
  await node.disk.deletePod(pod.name, pod.namespace);
  await node.waitForCall(mark, (e) => e.method === 'NodeUnpublishVolume' && e.phase === undefined && e.error === null, 'NodeUnpublishVolume OK after the pod was deleted');
  await node.waitForCall(mark, (e) => e.method === 'NodeUnstageVolume' && e.phase === 'held', 'NodeUnstageVolume held by the driver');
  const calls = await node.calls(mark);
  if (calls.join() !== 'NodeUnpublishVolume OK') fail('draining: expected only NodeUnpublishVolume to have completed', calls);
  const blockMode = m.mode === 'Block';
  const podDir = blockMode ? node.disk.layout.csiBlockPublishPath(vol.pvName, pod.uid) : node.podVolumeDir(pod.uid, vol.pvName);
  if (existsSync(podDir)) fail('draining: TearDown should have removed the pod volume path', podDir);

  await node.killAgent();
  await node.reboot();
  await node.disk.clearFaults();

  const staged = await node.driverVolume(vol.volumeHandle);
  const expectStaged = blockMode ? node.disk.layout.csiBlockStagingPath(vol.pvName) : node.globalMount(vol.volumeHandle);
  if (staged?.stagedAt !== expectStaged || staged.publishedAt.length !== 0) fail(`after the reboot the driver should record ${vol.volumeHandle} staged at ${expectStaged}, published nowhere`, staged);
  const identity = blockMode ? path.join(node.disk.layout.csiBlockDataDir(vol.pvName), 'vol_data.json') : path.join(node.volumeDir(vol.volumeHandle), 'vol_data.json');
  if (!existsSync(identity) || !existsSync(expectStaged)) fail('after the reboot the staged volume should still be on disk', { identity, staging: expectStaged });
  const mounted = await node.mountsUnder(node.disk.rootDir);
  if (mounted.length > 0) fail('after the reboot nothing should be mounted under the root dir', mounted);
}

export interface HeldRecovery {
  /** The journal mark taken before the driver and the agent restarted. */
  readonly mark: number;
  /** Sampled while the restarted NodeUnstageVolume was held: the kept paths, volumesInUse, and whether it had completed. */
  readonly whileHeld: { readonly present: boolean; readonly inUse: boolean; readonly done: boolean };
  /** Times at which a kept path was seen gone before NodeUnstageVolume had succeeded (should be none). */
  readonly removedEarly: readonly string[];
  /** The NodeUnstageVolume that succeeded. */
  readonly unstaged: JournalEntry;
  /** Every volumesInUse the restarted agent wrote, up to one write after the volume left. */
  readonly writes: readonly StatusWrite[];
}

/**
 * After {@link drainAndRebootDuringUnstage}: starts the driver with NodeUnstageVolume delayed
 * once by `delayMs`, then the agent, and watches the recovery: while the unstage is held, whether
 * every path of `keptUntilUnstaged` is there and the volume is in volumesInUse; until it
 * succeeds, whether any of those paths went away; then waits for the paths to go and the volume
 * to leave volumesInUse. Returns the observations (the test asserts on them).
 */
export async function restartWithHeldUnstage(
  node: TestNode,
  o: { readonly vol: TestVolume; readonly gate: boolean; readonly keptUntilUnstaged: readonly string[]; readonly delayMs?: number },
): Promise<HeldRecovery> {
  const name = o.vol.uniqueVolumeName;
  const isUnstaged = (e: JournalEntry): boolean => e.method === 'NodeUnstageVolume' && e.phase === undefined && e.error === null;
  const done = async (mark: number): Promise<boolean> => (await node.journalSince(mark)).some(isUnstaged);
  await node.disk.writeFaults({ faults: [{ method: 'NodeUnstageVolume', volumeId: o.vol.volumeHandle, delay: `${o.delayMs ?? 1500}ms`, times: 1 }] });
  const mark = await node.journalMark();
  await node.startDriver();
  await node.startAgent({ gate: o.gate });
  await node.waitForCall(mark, (e) => e.method === 'NodeUnstageVolume' && e.phase === 'held', 'the restarted NodeUnstageVolume, held');

  const whileHeld = await waitFor(
    async () => {
      const present = o.keptUntilUnstaged.every((p) => existsSync(p));
      const inUse = (await node.disk.volumesInUse()).includes(name);
      const completed = await done(mark);
      return completed || (present && inUse) ? { present, inUse, done: completed } : false;
    },
    { what: `${name} in volumesInUse while NodeUnstageVolume is held`, timeoutMs: 5000, observe: () => node.disk.nodeStatus() },
  );

  const removedEarly: string[] = [];
  await waitFor(
    async () => {
      // Paths first, then the journal: a path seen gone before a journal without the success is a real early removal.
      const anyGone = o.keptUntilUnstaged.some((p) => !existsSync(p));
      const completed = await done(mark);
      if (anyGone && !completed) removedEarly.push(new Date().toISOString());
      return completed && o.keptUntilUnstaged.every((p) => !existsSync(p)) && !(await node.disk.volumesInUse()).includes(name);
    },
    {
      what: `${name} to be unstaged, its paths removed and dropped from volumesInUse`,
      timeoutMs: 10_000,
      observe: async () => ({ calls: await node.calls(mark), kept: o.keptUntilUnstaged.filter((p) => existsSync(p)), status: await node.disk.nodeStatus() }),
    },
  );
  const unstaged = (await node.journalSince(mark)).find(isUnstaged);
  if (unstaged === undefined) throw new Error('the successful NodeUnstageVolume vanished from the journal');
  const writes = await node.waitForStatusWrites((await node.statusWrites()).length + 1);
  return { mark, whileHeld, removedEarly, unstaged, writes };
}
