/**
 * nodevol benchmark (`npm run bench`).
 *
 * Builds a synthetic node on disk (bench/syntheticNode.ts: 250 pods x 4 CSI filesystem volumes,
 * each bind mounted from its own staged global mount, 100 staged raw block volumes, a
 * 10,000-line mount table) and measures, each against a floor run in the same rounds:
 *   (a) parse of the mount table plus the index the first look-up needs, against a floor that
 *       only splits the text into lines and fields;
 *   (b) 1,000 look-ups (one per pod mount) on a freshly parsed snapshot;
 *   (c) runAudit in this process, against the same readdir/readFile calls awaited one at a time;
 *   (d) WHOLE PROCESSES, the way a user meets them: `nodevol audit -o json` against
 *       dist/bench/floorScript.js (a plain script making the same readdir/read calls
 *       synchronously, in a process of its own); `nodevol --help` and `nodevol audit` on an empty
 *       root against `node -e 0`;
 *   (e) with BENCH_SCALE=1, the same audit/floor pair on a node with 100,000 pod volume dirs
 *       (building that node takes a minute or more).
 * Whole processes (d, e) are also measured in CPU time (user + system, reported by each process
 * at exit: processCases.ts), and their CPU ratios are printed next to the wall ratios: on a
 * shared machine a wall time includes waiting for a core, a CPU time does not.
 * The agent with the mock driver, against a driver floor, is bench/agentScale.ts. Current numbers:
 * docs/benchmarks.md.
 * Each case gets one warm-up run, then BENCH_RUNS (default 7) runs, interleaved across cases;
 * the median is reported, and ratios are taken within each round. A last, untimed run counts
 * the file system calls of (c).
 *
 * A benchmark, not a test: misses are printed, the exit code stays 0, but for one limit:
 * the audit process above AUDIT_FLOOR_TARGET times its floor process (the median of the paired
 * wall ratios of (d)) exits 1, so a regression fails `npm run bench`. A broken setup (the fixture
 * does not produce the node described above) exits non-zero too.
 */
import { rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path/posix';
import { NodeFileSystem } from '../src/adapters/node/nodeFs.js';
import { runAudit } from '../src/audit/audit.js';
import type { AuditReport } from '../src/audit/report.js';
import type { FileSystem } from '../src/ports/fs.js';
import { BLOCK_DATA_DIR_NAME, BLOCK_PUBLISH_DIR_NAME, BLOCK_STAGING_DIR_NAME, VOLUME_DEVICES_DIR_NAME, VOLUMES_DIR_NAME, type KubeletLayout } from '../src/layout/layout.js';
import { getMountRefs, MountTableSnapshot } from '../src/mount/mountRefs.js';
import { auditInput } from '../test/support/hosts.js';
import { NodeFixture } from '../test/support/nodeFixture.js';
import { MAX_VOL_DATA_BYTES, VOL_DATA_FILE_NAME } from '../src/volume/csi/volumeData.js';
import { countingFileSystem, totalCalls, totalNs, type CountingFileSystem, type OpStats } from './countingFs.js';
import { installCpuPreload, isProcessResult, processCase, processCasesFor, processPaths } from './processCases.js';
import { buildNode, CLASSIC_NODE, SCALE_NODE, type PodMount } from './syntheticNode.js';

const DEFAULT_RUNS = 7;
const SCALE_RUNS = 3;
const LOOKUP_TARGET_MS = 5;
const PARSE_TARGET_MS = 20;
const AUDIT_FLOOR_TARGET = 2;
const HELP_TARGET = 2;
const SCALE_AUDIT_TARGET_MS = 10_000;

const POD_VOLUMES = CLASSIC_NODE.pods * CLASSIC_NODE.volumesPerPod;
const BLOCK_VOLUMES = CLASSIC_NODE.blockVolumes;
const MOUNT_LINES = CLASSIC_NODE.mountLines;

// ---- the floor ---------------------------------------------------------------------------------

/**
 * The readdir/readFile calls the audit makes, in its order, with none of its logic: the pods
 * walk (pods/, each pod dir, its volumes/ and volumeDevices/ where listed, each plugin dir, each
 * volume's vol_data.json), then the CSI plugin tree (driver dirs, each staged volume's
 * vol_data.json) and the block tree (each data/vol_data.json). No sorting, no lstat, no realpath.
 * Returns the bytes read so that nothing can be optimised away.
 */
async function floorWalk(fs: FileSystem, layout: KubeletLayout): Promise<number> {
  let bytes = 0;
  const podsDir = layout.podsDir();
  for (const pod of await fs.readdir(podsDir)) {
    const podDir = path.join(podsDir, pod.name);
    for (const sub of await fs.readdir(podDir)) {
      if (sub.name !== VOLUMES_DIR_NAME && sub.name !== VOLUME_DEVICES_DIR_NAME) continue;
      const subDir = path.join(podDir, sub.name);
      for (const plugin of await fs.readdir(subDir)) {
        const pluginDir = path.join(subDir, plugin.name);
        for (const child of await fs.readdir(pluginDir)) {
          bytes += (await fs.readFile(path.join(pluginDir, child.name, VOL_DATA_FILE_NAME), MAX_VOL_DATA_BYTES)).length;
        }
      }
    }
  }
  const pluginDir = layout.csiPluginDir();
  const blockDir = layout.csiBlockDir();
  for (const driver of await fs.readdir(pluginDir)) {
    const driverDir = path.join(pluginDir, driver.name);
    if (driverDir === blockDir) continue;
    for (const vol of await fs.readdir(driverDir)) {
      bytes += (await fs.readFile(path.join(driverDir, vol.name, VOL_DATA_FILE_NAME), MAX_VOL_DATA_BYTES)).length;
    }
  }
  for (const entry of await fs.readdir(blockDir)) {
    if (entry.name === BLOCK_STAGING_DIR_NAME || entry.name === BLOCK_PUBLISH_DIR_NAME) continue;
    bytes += (await fs.readFile(path.join(blockDir, entry.name, BLOCK_DATA_DIR_NAME, VOL_DATA_FILE_NAME), MAX_VOL_DATA_BYTES)).length;
  }
  return bytes;
}

// ---- measuring ---------------------------------------------------------------------------------

export interface Case {
  readonly name: string;
  /** Untimed preparation before each timed run (a fresh snapshot, say); its result goes to `run`. */
  readonly setup?: () => unknown;
  readonly run: (prepared: unknown) => unknown;
}

interface Timing {
  /** Every timed run, in round order (warm-up excluded). */
  readonly samples: readonly number[];
  /** Whole processes only: each run's CPU time (user + system, ms), in the same order. */
  readonly cpu: readonly number[];
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

/** The last result of each case, kept alive so that no measured work is dead code. */
const lastResult = new Map<string, unknown>();

async function timeOnce(c: Case): Promise<{ wall: number; cpu?: number }> {
  const prepared = c.setup === undefined ? undefined : await c.setup();
  const t0 = process.hrtime.bigint();
  const result: unknown = await c.run(prepared);
  const wall = Number(process.hrtime.bigint() - t0) / 1e6;
  lastResult.set(c.name, result);
  return isProcessResult(result) ? { wall, cpu: result.cpuMs } : { wall };
}

function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? NaN) : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2;
}

/** One warm-up run of every case, then `runs` rounds; each round runs every case once, in a rotating order. */
async function measureAll(cases: readonly Case[], runs: number): Promise<Map<string, Timing>> {
  for (const c of cases) await timeOnce(c);
  const samples = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  const cpu = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  for (let r = 0; r < runs; r++) {
    for (let k = 0; k < cases.length; k++) {
      const c = cases[(r + k) % cases.length];
      if (c === undefined) continue;
      const t = await timeOnce(c);
      samples.get(c.name)?.push(t.wall);
      if (t.cpu !== undefined) cpu.get(c.name)?.push(t.cpu);
    }
  }
  const out = new Map<string, Timing>();
  for (const [name, xs] of samples) {
    const sorted = [...xs].sort((a, b) => a - b);
    out.set(name, { samples: xs, cpu: cpu.get(name) ?? [], median: median(xs), min: sorted[0] ?? 0, max: sorted[sorted.length - 1] ?? 0 });
  }
  return out;
}

function runsFromEnv(): number {
  const raw = process.env['BENCH_RUNS'];
  if (raw === undefined || raw === '') return DEFAULT_RUNS;
  const n = Number(raw);
  if (Number.isInteger(n) && n >= 1) return n;
  console.warn(`BENCH_RUNS=${JSON.stringify(raw)} is not a positive integer; using ${DEFAULT_RUNS}`);
  return DEFAULT_RUNS;
}

// ---- checks: the numbers mean something only if the node is what we think it is ---------------

function checkReport(r: AuditReport): void {
  const s = r.summary;
  const want = { volumes: POD_VOLUMES + BLOCK_VOLUMES, tracked: POD_VOLUMES, recovered: BLOCK_VOLUMES, orphaned: 0, failed: 0, skipped: 0 };
  const got = { volumes: s.volumes, tracked: s.tracked, recovered: s.recovered, orphaned: s.orphaned, failed: s.failed, skipped: s.skipped };
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    throw new Error(`bench setup: audit summary ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
  }
  const unmounted = r.volumes.filter((v) => v.global?.mounted !== true || v.pods.some((p) => !p.mounted)).length;
  if (unmounted !== 0) throw new Error(`bench setup: ${unmounted} volumes not seen as mounted`);
}

async function checkLookups(fs: FileSystem, snapshot: MountTableSnapshot, podMounts: readonly PodMount[]): Promise<void> {
  for (const m of podMounts) {
    const refs = await getMountRefs(fs, snapshot, m.mountPath);
    if (refs.length !== 1 || refs[0] !== m.globalMount) {
      throw new Error(`bench setup: getMountRefs(${m.mountPath}) = ${JSON.stringify(refs)}, expected [${m.globalMount}]`);
    }
  }
}

// ---- printing ----------------------------------------------------------------------------------

const int = (n: number): string => n.toLocaleString('en-US');
const ms = (n: number): string => `${n.toFixed(2)} ms`;

function row(label: string, t: Timing | undefined): string {
  if (t === undefined) return label;
  const wall = `${label.padEnd(64)}${ms(t.median).padStart(11)}${ms(t.min).padStart(12)}${ms(t.max).padStart(12)}`;
  if (t.cpu.length === 0) return wall;
  return `${wall}${ms(median(t.cpu)).padStart(12)}${ms(Math.min(...t.cpu)).padStart(12)}`;
}

function verdict(ok: boolean): string {
  return ok ? 'PASS' : 'MISS';
}

function printFsCalls(audit: CountingFileSystem, auditWallMs: number, floor: CountingFileSystem, floorWallMs: number): void {
  const ops = [...new Set([...audit.ops.keys(), ...floor.ops.keys()])];
  console.log('file system calls, one instrumented run of each (latency summed over sequential awaits):');
  console.log(`  ${'call'.padEnd(10)}${'audit: calls'.padStart(14)}${'errors'.padStart(8)}${'time'.padStart(12)}   ${'floor: calls'.padStart(14)}${'errors'.padStart(8)}${'time'.padStart(12)}`);
  const cells = (s: OpStats | undefined): string =>
    `${int(s?.calls ?? 0).padStart(14)}${int(s?.errors ?? 0).padStart(8)}${ms(Number(s?.ns ?? 0n) / 1e6).padStart(12)}`;
  for (const op of ops) console.log(`  ${op.padEnd(10)}${cells(audit.ops.get(op))}   ${cells(floor.ops.get(op))}`);
  const aFs = Number(totalNs(audit.ops)) / 1e6;
  const fFs = Number(totalNs(floor.ops)) / 1e6;
  console.log(`  ${'total'.padEnd(10)}${int(totalCalls(audit.ops)).padStart(14)}${''.padStart(8)}${ms(aFs).padStart(12)}   ${int(totalCalls(floor.ops)).padStart(14)}${''.padStart(8)}${ms(fFs).padStart(12)}`);
  // Wall time minus the fs calls and minus the wrapper's own bookkeeping: the caller's own work.
  const own = (c: CountingFileSystem, wall: number, fsMs: number): number => wall - fsMs - Number(c.overheadNs()) / 1e6;
  console.log(`  wall time: audit ${ms(auditWallMs)}, of which its own work (not waiting for fs) ${ms(own(audit, auditWallMs, aFs))}; ` +
    `floor ${ms(floorWallMs)}, own work ${ms(own(floor, floorWallMs, fFs))}`);
}

// ---- main --------------------------------------------------------------------------------------

interface Ratios {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

/** Paired ratios a/b within each round: median, min, max (of wall times, or of CPU times). */
function pairedRatios(a: Timing, b: Timing, of: 'samples' | 'cpu' = 'samples'): Ratios {
  const bs = b[of];
  const r = a[of].map((x, i) => x / (bs[i] ?? NaN));
  if (r.length === 0) return { median: NaN, min: NaN, max: NaN };
  return { median: median(r), min: Math.min(...r), max: Math.max(...r) };
}

const x = (n: number): string => `${n.toFixed(2)}x`;

/** A ratio row: wall ratios (median, min, max) and, for whole processes, the CPU time ratios (median, min). */
function ratioRow(label: string, r: Ratios, cpu?: Ratios): string {
  const wall = `${label.padEnd(64)}${x(r.median).padStart(11)}${x(r.min).padStart(12)}${x(r.max).padStart(12)}`;
  return cpu === undefined ? wall : `${wall}${x(cpu.median).padStart(12)}${x(cpu.min).padStart(12)}`;
}

function target(label: string, value: string, ok: boolean, note = ''): void {
  console.log(`  ${label.padEnd(52)}${value.padStart(12)}   ${verdict(ok)}${note === '' ? '' : `   (${note})`}`);
}

/** The floor of (a): split the text into lines and fields, nothing else. */
function splitFloor(text: string): number {
  let n = 0;
  for (const line of text.split('\n')) n += line.split(' ').length;
  return n;
}

async function main(): Promise<void> {
  const runs = runsFromEnv();
  const scale = process.env['BENCH_SCALE'] === '1';
  const cpus = os.cpus();
  console.log('nodevol benchmark');
  console.log(`node ${process.version} (${process.platform} ${process.arch}), CPU: ${cpus[0]?.model ?? 'unknown'} x ${cpus.length}, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);

  const fx = await NodeFixture.create();
  const scaleFx = scale ? await NodeFixture.create() : undefined;
  const empty = await NodeFixture.create();
  const onSignal = (signal: NodeJS.Signals): void => {
    for (const f of [fx, scaleFx, empty]) if (f !== undefined) rmSync(f.base, { recursive: true, force: true });
    console.error(`\n${signal}: removed the bench's temporary nodes`);
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const setupStart = performance.now();
    const node = await buildNode(fx, CLASSIC_NODE);
    const mountinfoFile = await fx.writeMountInfo();
    const setupMs = performance.now() - setupStart;
    await empty.mkdirRel('pods');
    const emptyMountinfo = await empty.writeMountInfo();
    console.log(
      `node: ${int(CLASSIC_NODE.pods)} pods x ${CLASSIC_NODE.volumesPerPod} = ${int(POD_VOLUMES)} CSI filesystem pod volumes, ${int(CLASSIC_NODE.globalMounts)} staged global mounts, ` +
        `${int(BLOCK_VOLUMES)} staged raw block volumes`,
    );
    console.log(
      `mount table: ${int(MOUNT_LINES)} lines (${int(node.kubeletLines + 1)} kubelet + root, ${int(node.fillerLines)} filler), ` +
        `${int(Buffer.byteLength(node.mountInfo))} bytes; built in ${ms(setupMs)} under ${fx.base}`,
    );
    console.log(`runs: ${runs} per case after 1 warm-up, interleaved; times: median, min, max`);
    console.log('');

    const fs = new NodeFileSystem();
    const snapshot = MountTableSnapshot.parse(node.mountInfo, { strict: true });
    const input = auditInput(fx, { gateOn: true, fs, mountInfo: node.mountInfo });
    checkReport(await runAudit(input));
    await checkLookups(fs, snapshot, node.podMounts);
    const realPaths = await Promise.all(node.podMounts.map((m) => fs.realpath(m.mountPath)));
    const paths = processPaths(import.meta.dirname);
    const firstPod = realPaths[0] ?? '/';

    const cases: Case[] = [
      { name: 'split-floor', run: () => splitFloor(node.mountInfo) },
      {
        name: 'parse',
        run: () => {
          const s = MountTableSnapshot.parse(node.mountInfo, { strict: false });
          return s.searchMountPoints(firstPod).length;
        },
      },
      {
        name: 'lookups-table',
        // A fresh snapshot each run, its indexes built by one first look-up (timed in (a)); the
        // 1,000 look-ups then start with nothing remembered about their paths.
        setup: () => {
          const s = MountTableSnapshot.parse(node.mountInfo, { strict: false });
          s.searchMountPoints(firstPod);
          return s;
        },
        run: (prepared) => {
          const s = prepared as MountTableSnapshot;
          let n = 0;
          for (const p of realPaths) n += s.searchMountPoints(p).length;
          return n;
        },
      },
      {
        name: 'lookups',
        setup: () => MountTableSnapshot.parse(node.mountInfo, { strict: false }),
        run: async (prepared) => {
          let n = 0;
          for (const m of node.podMounts) n += (await getMountRefs(fs, prepared as MountTableSnapshot, m.mountPath)).length;
          return n;
        },
      },
      // Adjacent, so that each round times the two under the same conditions (see the paired ratio).
      { name: 'audit', run: () => runAudit(input) },
      { name: 'floor', run: () => floorWalk(fs, fx.layout) },
      processCase('node-e-0', ['-e', '0']),
      processCase('help', [paths.bin, '--help']),
      processCase('audit-empty', [paths.bin, 'audit', '--root-dir', empty.root, '--mountinfo', emptyMountinfo, '-o', 'json']),
      ...processCasesFor('classic', paths, fx.root, mountinfoFile),
    ];
    installCpuPreload(empty.base);
    const t = await measureAll(cases, runs);
    const get = (name: string, from = t): Timing => from.get(name) ?? { samples: [], cpu: [], median: NaN, min: NaN, max: NaN };

    console.log(`${'measurement'.padEnd(64)}${'median'.padStart(11)}${'min'.padStart(12)}${'max'.padStart(12)}${'CPU median'.padStart(12)}${'CPU min'.padStart(12)}`);
    console.log(row(`(a) parse + first look-up's index, mountinfo (${int(MOUNT_LINES)} lines)`, get('parse')));
    console.log(row('      floor: split into lines and fields only', get('split-floor')));
    console.log(ratioRow('      parse / floor (within each round)', pairedRatios(get('parse'), get('split-floor'))));
    console.log(row(`(b) ${int(POD_VOLUMES)} x searchMountPoints after (a)`, get('lookups-table')));
    console.log(row(`      with kubelet's stat + realpath per path (getMountRefs)`, get('lookups')));
    console.log(row('(c) runAudit in this process (NodeFileSystem, gate on)', get('audit')));
    console.log(row('      floor: same readdir/readFile calls, awaited one at a time', get('floor')));
    console.log(ratioRow('      audit / floor (within each round)', pairedRatios(get('audit'), get('floor'))));
    console.log(row('(d) process: nodevol audit -o json (this node)', get('classic-audit')));
    console.log(row('      floor process: plain script, same reads, synchronous', get('classic-floor')));
    const auditRatio = pairedRatios(get('classic-audit'), get('classic-floor'));
    const auditCpuRatio = pairedRatios(get('classic-audit'), get('classic-floor'), 'cpu');
    console.log(ratioRow('      audit / floor (within each round)', auditRatio, auditCpuRatio));
    console.log(row('    process: node -e 0', get('node-e-0')));
    console.log(row('    process: nodevol --help', get('help')));
    console.log(row('    process: nodevol audit, empty root dir', get('audit-empty')));
    const helpRatio = pairedRatios(get('help'), get('node-e-0'));
    const helpCpuRatio = pairedRatios(get('help'), get('node-e-0'), 'cpu');
    const auditStartRatio = pairedRatios(get('audit-empty'), get('node-e-0'));
    console.log(ratioRow('      --help / node -e 0', helpRatio, helpCpuRatio));
    console.log(ratioRow('      audit (empty) / node -e 0', auditStartRatio, pairedRatios(get('audit-empty'), get('node-e-0'), 'cpu')));

    let scaleAudit: Timing | undefined;
    let scaleRatio: Ratios | undefined;
    if (scaleFx !== undefined) {
      const t0 = performance.now();
      await buildNode(scaleFx, SCALE_NODE);
      const scaleMountinfo = await scaleFx.writeMountInfo();
      console.log('');
      console.log(`(e) scale node: ${int(SCALE_NODE.pods * SCALE_NODE.volumesPerPod)} pod volume dirs (${int(SCALE_NODE.pods)} pods), ` +
        `${int(SCALE_NODE.globalMounts)} global mounts; built in ${ms(performance.now() - t0)}; ${SCALE_RUNS} runs`);
      const st = await measureAll(processCasesFor('scale', paths, scaleFx.root, scaleMountinfo), SCALE_RUNS);
      scaleAudit = get('scale-audit', st);
      scaleRatio = pairedRatios(scaleAudit, get('scale-floor', st));
      console.log(row('    process: nodevol audit -o json (scale node)', scaleAudit));
      console.log(row('      floor process: plain script, same reads, synchronous', get('scale-floor', st)));
      console.log(ratioRow('      audit / floor (within each round)', scaleRatio, pairedRatios(scaleAudit, get('scale-floor', st), 'cpu')));
    }

    console.log('');
    console.log('targets');
    const parse = get('parse');
    const lookups = get('lookups-table');
    target(`mountinfo parse + first index <= ${PARSE_TARGET_MS} ms`, ms(parse.median), parse.median <= PARSE_TARGET_MS, `${pairedRatios(parse, get('split-floor')).median.toFixed(2)}x the split floor`);
    target(`${int(POD_VOLUMES)} look-ups <= ${LOOKUP_TARGET_MS} ms in total`, ms(lookups.median), lookups.median <= LOOKUP_TARGET_MS, `getMountRefs with stat+realpath: ${ms(get('lookups').median)}`);
    const auditOk = auditRatio.median <= AUDIT_FLOOR_TARGET;
    target(`audit process <= ${AUDIT_FLOOR_TARGET}x the floor process`, x(auditRatio.median), auditOk, `CPU time ${x(auditCpuRatio.median)}`);
    target(`nodevol --help <= ${HELP_TARGET}x node -e 0`, x(helpRatio.median), helpRatio.median <= HELP_TARGET, `CPU time ${x(helpCpuRatio.median)}`);
    if (scaleAudit !== undefined && scaleRatio !== undefined) {
      target(`audit of 100,000 pod volumes <= ${SCALE_AUDIT_TARGET_MS / 1000} s`, ms(scaleAudit.median), scaleAudit.median <= SCALE_AUDIT_TARGET_MS, `${scaleRatio.median.toFixed(2)}x its floor process`);
    } else {
      console.log('  (audit of 100,000 pod volumes: set BENCH_SCALE=1 to build that node and run it)');
    }
    console.log('');

    // Untimed diagnostics: what the in-process audit asks of the file system beyond the floor.
    const countingAudit = countingFileSystem(fs);
    const t0 = performance.now();
    await runAudit({ ...input, fs: countingAudit.fs });
    const auditWall = performance.now() - t0;
    const countingFloor = countingFileSystem(fs);
    const t1 = performance.now();
    await floorWalk(countingFloor.fs, fx.layout);
    const floorWall = performance.now() - t1;
    printFsCalls(countingAudit, auditWall, countingFloor, floorWall);
    if (!auditOk) {
      console.log(`limit FAILED: the audit process took ${x(auditRatio.median)} its floor process (limit ${AUDIT_FLOOR_TARGET}x, median of ${runs} paired rounds)`);
      process.exitCode = 1;
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    for (const f of [fx, scaleFx, empty]) await f?.cleanup();
  }
}

main().catch((err: unknown) => {
  console.error('bench failed:', err);
  process.exitCode = 1;
});
