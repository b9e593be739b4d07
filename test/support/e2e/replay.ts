/**
 * Replays a simulator scenario on a real node: `nodevol mock-driver` and `nodevol agent` processes
 * in a private mount namespace (TestNode). The scenario's fault steps go into the mock driver's
 * faults file as they are (the one fault model, src/csi/faults.ts: a rule the simulator applies
 * is a rule the mock driver applies); pods are written to and removed from the cluster dir; an
 * advance step lets its time pass; a wait step waits until the driver's records match the pods.
 * The volumes are provisioned by name, so the mock driver's ids are the scenario's handles.
 *
 * What a real node cannot be told to do at a given instant (a crash at a numbered call) is not
 * replayed: a scenario with restart, reboot, restartDriver, fsFault, slowDisk, apiDown, deleteFile, corruptFile or readError
 * steps is refused. Not named *.test.ts: npm test runs only *.test.js files.
 */
import { setTimeout as sleep } from 'node:timers/promises';

import { writtenFault } from '../../../src/csi/faults.js';
import type { Scenario, ScenarioStep } from '../../../src/sim/scenario.js';
import { TestNode, type TestVolume } from './testNode.js';
import { waitFor } from './waitFor.js';

/** Steps a real node replays. */
const REPLAYABLE: ReadonlySet<ScenarioStep['kind']> = new Set(['wait', 'advance', 'addPod', 'deletePod', 'fault', 'clearFaults']);

export interface Replay {
  readonly node: TestNode;
  readonly volumes: ReadonlyMap<string, TestVolume>;
}

/** Why a scenario cannot be replayed on a real node, or undefined. */
export function notReplayable(s: Scenario): string | undefined {
  if (s.drivers.length !== 1) return `${s.drivers.length} drivers (the harness runs one mock driver)`;
  if (s.volumes.some((v) => v.inline)) return 'inline volumes';
  const step = s.steps.find((st) => !REPLAYABLE.has(st.kind));
  return step === undefined ? undefined : `a ${step.kind} step`;
}

/**
 * Creates a node for `scenario` (named `name`), replays it with the agent's gates `gates`, and
 * returns the node for its journal and state.
 */
export async function replayScenario(name: string, scenario: Scenario, gates: Readonly<Record<string, boolean>>): Promise<Replay> {
  const why = notReplayable(scenario);
  if (why !== undefined) throw new Error(`${scenario.name} cannot be replayed on a real node: ${why}`);
  const driver = scenario.drivers[0];
  if (driver === undefined) throw new Error(`${scenario.name}: no driver`);
  const node = await TestNode.create(name, { name: driver.name, attachRequired: driver.attachRequired, podInfoOnMount: driver.podInfoOnMount });
  await node.disk.writeFaults({ faults: [] });
  await node.startDriver();
  const volumes = new Map<string, TestVolume>();
  for (const v of scenario.volumes) {
    const created = await node.createVolume(v.name, v.volumeMode);
    if (created.volumeHandle !== v.handle) throw new Error(`${scenario.name}: volume ${v.name} has handle ${v.handle}, the mock driver provisions ${created.volumeHandle}`);
    volumes.set(v.name, created);
  }
  const writePod = async (uid: string): Promise<void> => {
    const pod = scenario.pods.find((p) => p.uid === uid);
    if (pod === undefined) throw new Error(`${scenario.name}: no pod ${uid}`);
    const blocks = pod.volumes.filter((n) => scenario.volumes.find((v) => v.name === n)?.volumeMode === 'Block');
    await node.disk.writePod({
      name: uid,
      uid,
      volumes: pod.volumes.map((n) => ({ name: n, claimName: volumes.get(n)?.claimName ?? n })),
      ...(blocks.length > 0 ? { blockVolumes: blocks } : {}),
    });
  };
  const running = new Set<string>();
  for (const p of scenario.pods) {
    if (!p.running) continue;
    await writePod(p.uid);
    running.add(p.uid);
  }
  await node.startAgent({ gate: gates['CSIGlobalMountReconstruction'] === true, gates });
  const faults: Record<string, string | number | boolean>[] = [];
  for (const step of scenario.steps) {
    switch (step.kind) {
      case 'wait':
        await waitFor(async () => settled(node, scenario, running, volumes), { what: `${scenario.name}: the driver's records to match the running pods`, timeoutMs: 60_000, intervalMs: 100 });
        break;
      case 'advance':
        // The scenario lets this much time pass (its own clock), as the simulator does.
        await sleep(step.ms);
        break;
      case 'addPod':
        await writePod(step.uid);
        running.add(step.uid);
        break;
      case 'deletePod':
        await node.disk.deletePod(step.uid);
        running.delete(step.uid);
        break;
      case 'fault':
        faults.push(writtenFault(step.fault));
        await node.disk.writeFaults({ faults });
        break;
      case 'clearFaults':
        faults.length = 0;
        await node.disk.writeFaults({ faults });
        break;
      case 'restart':
      case 'reboot':
      case 'sigterm':
      case 'restartDriver':
      case 'fsFault':
      case 'deleteFile':
      case 'readError':
      case 'slowDisk':
      case 'corruptFile':
      case 'apiDown':
      case 'terminatePod':
      case 'podPhase':
        throw new Error(`${scenario.name}: a ${step.kind} step is not replayed on a real node`);
    }
  }
  return { node, volumes };
}

/** Whether the driver's records say what the running pods want: staged (if it stages) and published for each, nothing else. */
async function settled(node: TestNode, scenario: Scenario, running: ReadonlySet<string>, volumes: ReadonlyMap<string, TestVolume>): Promise<boolean> {
  const stages = scenario.drivers[0]?.stageUnstage ?? true;
  for (const v of scenario.volumes) {
    const handle = volumes.get(v.name)?.volumeHandle ?? v.handle;
    const users = scenario.pods.filter((p) => running.has(p.uid) && p.volumes.includes(v.name)).map((p) => p.uid);
    const record = await node.driverVolume(handle);
    const published = record?.publishedAt ?? [];
    if (users.length === 0) {
      if (record?.stagedAt !== undefined || published.length > 0) return false;
      continue;
    }
    if (stages && record?.stagedAt === undefined) return false;
    if (published.length !== users.length || !users.every((uid) => published.some((t) => t.includes(`/pods/${uid}/`) || t.endsWith(`/${uid}`)))) return false;
  }
  return true;
}
