/**
 * The mock CSI driver at scale (`npm run bench:mock-driver`, root only): the built
 * `nodevol mock-driver` as a whole process in a private mount namespace
 * (`unshare --mount --propagation private --fork --kill-child`), driven over its unix socket by a
 * plain gRPC client the way kubelet drives a driver. For each N (default 100 and 1,000) it
 * creates N filesystem volumes (untimed), then times
 *   up:   NodeStageVolume + NodePublishVolume of every volume,
 *   down: NodeUnpublishVolume + NodeUnstageVolume of every volume,
 * once with one call at a time ("serial": the per-call latency) and once with BENCH_CONCURRENCY
 * (default 16) volumes in flight ("concurrent": what an agent running operations in parallel
 * meets). It prints the per-call latency of each and the ratio per-call(N=max)/per-call(N=min):
 * a driver whose per-call cost does not grow with the number of volumes prints ≈ 1.
 *
 * A benchmark, not a test: the exit code is 0 unless the setup breaks (or we are not root).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

import { GrpcCsiClient } from '../src/adapters/grpc/client.js';
import { unixEndpoint } from '../src/adapters/grpc/endpoint.js';
import type { VolumeCapability } from '../src/ports/csi.js';

const BIN = path.resolve(import.meta.dirname, '..', '..', 'bin', 'nodevol.js');
const CAP: VolumeCapability = { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } };

interface Timing {
  readonly n: number;
  readonly mode: 'serial' | 'concurrent';
  readonly upMs: number;
  readonly downMs: number;
}

function envList(name: string, fallback: readonly number[]): number[] {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return [...fallback];
  return raw.split(',').map((s) => {
    const n = Number(s);
    if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${name}: ${JSON.stringify(s)} is not a positive integer`);
    return n;
  });
}

async function pool<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      const item = items[i];
      if (i >= items.length || item === undefined) return;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, width) }, worker));
}

async function waitServing(proc: ChildProcess, socket: string, stderr: string[]): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`mock-driver exited early (${proc.exitCode}):\n${stderr.join('')}`);
    if (existsSync(socket)) {
      const c = new GrpcCsiClient(unixEndpoint(socket), { timeoutMs: 2000 });
      try {
        await c.identity.probe();
        return;
      } catch {
        // not serving yet
      } finally {
        c.close();
      }
    }
    if (Date.now() > deadline) throw new Error(`mock-driver did not serve ${socket}:\n${stderr.join('')}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const debug = (msg: string): void => {
  if (process.env["BENCH_DEBUG"] === "1") process.stderr.write(`${msg}\n`);
};

async function runOnce(n: number, width: number): Promise<Timing> {
  const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-mockscale-'));
  const socket = path.join(dir, 'csi.sock');
  const root = path.join(dir, 'root');
  const stderr: string[] = [];
  const proc = spawn(
    'unshare',
    [
      '--mount', '--propagation', 'private', '--fork', '--kill-child',
      process.execPath, BIN, 'mock-driver',
      '--endpoint', unixEndpoint(socket), '--node-id', 'bench-node', '--driver-name', 'mock.csi.nodevol.io',
      '--state-dir', path.join(dir, 'state'), '--allowed-root', root,
      ...(process.env['BENCH_DEBUG'] === '1' ? ['-v', '4'] : []),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  proc.stderr?.setEncoding('utf8');
  proc.stderr?.on('data', (s: string) => {
    stderr.push(s);
    debug(s.trimEnd());
  });
  const client = new GrpcCsiClient(unixEndpoint(socket), { timeoutMs: 600_000 });
  try {
    await waitServing(proc, socket, stderr);
    debug(`serving N=${n}`);
    const ids: { id: string; staging: string; target: string }[] = [];
    await pool(
      Array.from({ length: n }, (_, i) => i),
      16,
      async (i) => {
        const staging = path.join(root, 'staging', `v${i}`);
        const podDir = path.join(root, 'pods', `p${i}`);
        await mkdir(staging, { recursive: true });
        await mkdir(podDir, { recursive: true });
        const res = await client.controller.createVolume({ name: `bench-${i}`, volumeCapabilities: [CAP] });
        ids[i] = { id: res.volume?.volumeId ?? '', staging, target: path.join(podDir, 'mount') };
      },
    );
    debug('created');
    const base = { publishContext: {}, secrets: {}, volumeContext: {} };
    const t0 = performance.now();
    await pool(ids, width, async (v) => {
      await client.nodeStageVolume({ ...base, volumeId: v.id, stagingTargetPath: v.staging, volumeCapability: CAP });
      await client.nodePublishVolume({ ...base, volumeId: v.id, stagingTargetPath: v.staging, targetPath: v.target, volumeCapability: CAP, readonly: false });
    });
    const upMs = performance.now() - t0;
    const t1 = performance.now();
    await pool(ids, width, async (v) => {
      await client.nodeUnpublishVolume({ volumeId: v.id, targetPath: v.target });
      await client.nodeUnstageVolume({ volumeId: v.id, stagingTargetPath: v.staging });
    });
    const downMs = performance.now() - t1;
    return { n, mode: width === 1 ? 'serial' : 'concurrent', upMs, downMs };
  } finally {
    client.close();
    // unshare --fork ignores SIGTERM while it waits: stop the driver (its child) itself.
    const child = childPid(proc.pid);
    if (child !== undefined) process.kill(child, 'SIGTERM');
    else proc.kill('SIGKILL');
    await new Promise((resolve) => (proc.exitCode !== null ? resolve(undefined) : proc.once('exit', resolve)));
    await rm(dir, { recursive: true, force: true });
  }
}

function childPid(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const first = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/)[0];
    return first === undefined || first === '' ? undefined : Number(first);
  } catch {
    return undefined;
  }
}

function perCall(ms: number, n: number): number {
  return ms / (2 * n);
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) {
    process.stderr.write('bench/mockDriverScale: needs root (real bind mounts in a private mount namespace); skipped\n');
    return;
  }
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first`);
  const sizes = envList('BENCH_N', [100, 1000]);
  const width = envList('BENCH_CONCURRENCY', [16])[0] ?? 16;
  const results: Timing[] = [];
  for (const n of sizes) {
    for (const w of [1, width]) {
      const r = await runOnce(n, w);
      results.push(r);
      process.stdout.write(
        `mock-driver N=${String(n).padStart(5)} ${r.mode.padEnd(10)} up ${r.upMs.toFixed(0).padStart(7)} ms (${perCall(r.upMs, n).toFixed(2)} ms/call)` +
          `  down ${r.downMs.toFixed(0).padStart(7)} ms (${perCall(r.downMs, n).toFixed(2)} ms/call)\n`,
      );
    }
  }
  const lo = Math.min(...sizes);
  const hi = Math.max(...sizes);
  if (lo !== hi) {
    for (const mode of ['serial', 'concurrent'] as const) {
      const a = results.find((r) => r.n === lo && r.mode === mode);
      const b = results.find((r) => r.n === hi && r.mode === mode);
      if (a === undefined || b === undefined) continue;
      const up = perCall(b.upMs, hi) / perCall(a.upMs, lo);
      const down = perCall(b.downMs, hi) / perCall(a.downMs, lo);
      process.stdout.write(`mock-driver per-call ratio N=${hi}/N=${lo} ${mode}: up ${up.toFixed(2)}x, down ${down.toFixed(2)}x (target ≈ 1)\n`);
    }
  }
}

await main();
