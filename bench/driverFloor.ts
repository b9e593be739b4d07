/**
 * The agent bench's driver floor, as a process of its own: a plain gRPC client making the CSI
 * calls the agent makes for N pods x 1 volume, straight to the driver, with kubelet's
 * concurrency (every volume at once, one operation per volume: NodeStageVolume then
 * NodePublishVolume; later NodeUnpublishVolume then NodeUnstageVolume) and none of its logic: no
 * desired/actual state, no vol_data.json, no mount table reads. Before each call it makes the
 * directory the CO must create (the staging dir; the pod volume dir the target lies in).
 *
 *   node dist/bench/driverFloor.js <request file>
 *
 * The request file is JSON ({@link FloorRequest}); the answer is one JSON line on stdout
 * ({@link FloorResult}): the time of each phase, measured inside this process from its first
 * call to its last answer (its start-up is not counted: the agent is already running when the
 * bench starts its clock). Calls get a 30 min deadline (the agent's is kubelet's 2 min), so that
 * a slow driver slows the floor down rather than failing it. A failed call is retried (the agent
 * would wait out a backoff): at once, or after 100 ms when the driver answers ABORTED (the same
 * volume's earlier call is still running), up to {@link MAX_ATTEMPTS} attempts, and counted; one
 * that still fails fails the process (exit 1): a broken setup.
 */
import { mkdir, readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { GrpcCsiClient } from '../src/adapters/grpc/client.js';
import { CsiCallError, GrpcStatus, type VolumeCapability } from '../src/ports/csi.js';

export interface FloorVolume {
  readonly volumeId: string;
  /** The staging target path (kubelet's globalmount dir). */
  readonly stagingTargetPath: string;
  /** The publish target path (<pod volume dir>/mount); its parent is created before the call. */
  readonly targetPath: string;
}

export interface FloorRequest {
  readonly endpoint: string;
  readonly volumes: readonly FloorVolume[];
}

export interface FloorResult {
  readonly upMs: number;
  readonly downMs: number;
  /** Calls that failed and were made again. */
  readonly retries: number;
  /** The first error a retried call met, if any. */
  readonly firstError?: string;
}

export const MAX_ATTEMPTS = 100;
const FLOOR_DEADLINE_MS = 30 * 60 * 1000;
const ABORTED_PAUSE_MS = 100;

let retries = 0;
let firstError: string | undefined;

async function call(fn: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await fn();
      return;
    } catch (err) {
      if (attempt >= MAX_ATTEMPTS) throw err;
      retries++;
      firstError ??= err instanceof Error ? err.message : String(err);
      if (err instanceof CsiCallError && err.code === GrpcStatus.ABORTED) await new Promise((resolve) => setTimeout(resolve, ABORTED_PAUSE_MS));
    }
  }
}

const CAPABILITY: VolumeCapability = {
  mount: { fsType: '', mountFlags: [], volumeMountGroup: '' },
  accessMode: { mode: 'SINGLE_NODE_WRITER' },
};

async function up(client: GrpcCsiClient, v: FloorVolume): Promise<void> {
  await mkdir(v.stagingTargetPath, { recursive: true, mode: 0o750 });
  await call(() =>
    client.nodeStageVolume({
      volumeId: v.volumeId,
      publishContext: {},
      stagingTargetPath: v.stagingTargetPath,
      volumeCapability: CAPABILITY,
      secrets: {},
      volumeContext: {},
    }),
  );
  await mkdir(path.dirname(v.targetPath), { recursive: true, mode: 0o750 });
  await call(() =>
    client.nodePublishVolume({
      volumeId: v.volumeId,
      publishContext: {},
      stagingTargetPath: v.stagingTargetPath,
      targetPath: v.targetPath,
      volumeCapability: CAPABILITY,
      readonly: false,
      secrets: {},
      volumeContext: {},
    }),
  );
}

async function down(client: GrpcCsiClient, v: FloorVolume): Promise<void> {
  await call(() => client.nodeUnpublishVolume({ volumeId: v.volumeId, targetPath: v.targetPath }));
  await call(() => client.nodeUnstageVolume({ volumeId: v.volumeId, stagingTargetPath: v.stagingTargetPath }));
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

async function main(requestFile: string): Promise<FloorResult> {
  const req = JSON.parse(await readFile(requestFile, 'utf8')) as FloorRequest;
  const client = new GrpcCsiClient(req.endpoint, { timeoutMs: FLOOR_DEADLINE_MS });
  try {
    await client.identity.probe(); // connected before the clock starts, as the agent's client is
    const upMs = await timed(() => Promise.all(req.volumes.map((v) => up(client, v))));
    const downMs = await timed(() => Promise.all(req.volumes.map((v) => down(client, v))));
    return { upMs, downMs, retries, ...(firstError === undefined ? {} : { firstError }) };
  } finally {
    client.close();
  }
}

const [requestFile] = process.argv.slice(2);
if (requestFile === undefined) {
  process.stderr.write('usage: driverFloor.js <request file>\n');
  process.exitCode = 2;
} else {
  main(requestFile).then(
    (r) => process.stdout.write(`${JSON.stringify(r)}\n`),
    (err: unknown) => {
      process.stderr.write(`driver floor: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
