// The node e2e harness itself (test/support/e2e): NodeDisk without root; NodeNamespace (a private
// mount + PID namespace run by nsSupervisor) as root only, skipped with the reason otherwise.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

import { parse as parseYaml } from 'yaml';

import { ClusterDirView } from '../../src/adapters/node/clusterDir.js';
import { escapeMountPath } from '../../src/mount/mountInfo.js';
import { NodeDisk, uniqueVolumeName } from '../support/e2e/nodeDisk.js';
import { hostProcessExists, hostProcessRunning, hostProcessStartTime, killAll, NodeNamespace } from '../support/e2e/nodeNamespace.js';
import { nodevolArgv, nodevolBin, repoRoot } from '../support/e2e/paths.js';
import { waitFor, WaitTimeoutError, withTimeout } from '../support/e2e/waitFor.js';

const DRIVER = 'e2e.csi.example.com';
const availability = NodeNamespace.available();
const ROOT_ONLY = availability.ok ? false : `root-only e2e skipped: ${availability.reason}`;

/** Records host processes now; `alive()` lists those still running (same pid AND start time, not a zombie). */
function snapshot(pids: readonly number[]): { pids: readonly number[]; alive: () => number[] } {
  const started = new Map(pids.map((p) => [p, hostProcessStartTime(p)]));
  for (const [p, t] of started) assert.ok(t !== undefined, `host pid ${p} should exist when recorded`);
  return { pids, alive: () => pids.filter((p) => hostProcessRunning(p) && hostProcessStartTime(p) === started.get(p)) };
}

function hostMountInfo(): string {
  return readFileSync('/proc/self/mountinfo', 'utf8');
}

function mountsUnder(dir: string): string[] {
  const prefix = escapeMountPath(dir);
  return hostMountInfo()
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((mp) => mp === prefix || mp.startsWith(`${prefix}/`));
}

describe('e2e harness: NodeDisk (no root needed)', () => {
  it('writes manifests the agent\'s --cluster-dir reader accepts without a problem', async () => {
    const disk = await NodeDisk.create({ nodeName: 'node-e2e' });
    try {
      await disk.writeCsiDriver({ name: DRIVER, attachRequired: true, volumeLifecycleModes: ['Persistent', 'Ephemeral'] });
      const pv = await disk.writePersistentVolume({ name: 'pv-a', driver: DRIVER, volumeHandle: 'vol-a', fsType: 'ext4' });
      const pod = await disk.writePod({
        name: 'app',
        volumes: [
          { name: 'data', claimName: pv.claimName },
          { name: 'scratch', csi: { driver: DRIVER, volumeAttributes: { size: '1Mi' } } },
        ],
      });
      await disk.writePod({ name: 'elsewhere', nodeName: 'other-node', volumes: [] });
      const view = new ClusterDirView({ dir: disk.clusterDir, nodeName: 'node-e2e' });
      const pods = await view.listPods();
      assert.deepEqual(view.problems(), []);
      assert.deepEqual(
        pods.map((p) => [p.uid, p.namespace, p.name, p.volumes.map((v) => v.name)]),
        [[pod.uid, 'default', 'app', ['data', 'scratch']]],
      );
      assert.deepEqual(pods[0]?.volumes[1]?.csi, { driver: DRIVER, volumeAttributes: { size: '1Mi' } });
      // A manifest without metadata.uid or status reads as a Bound claim with a uid derived from its
      // namespace and name (the reader's rule for hand-written cluster dirs).
      const claim = await view.getPersistentVolumeClaim('default', 'pv-a');
      assert.match(claim?.uid ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      assert.deepEqual({ ...claim, uid: undefined }, { namespace: 'default', name: 'pv-a', uid: undefined, volumeName: 'pv-a', phase: 'Bound' });
      assert.deepEqual((await view.getPersistentVolume('pv-a'))?.csi, { driver: DRIVER, volumeHandle: 'vol-a', fsType: 'ext4' });
      assert.deepEqual(await view.getCSIDriver(DRIVER), {
        name: DRIVER,
        attachRequired: true,
        podInfoOnMount: false,
        volumeLifecycleModes: ['Persistent', 'Ephemeral'],
        requiresRepublish: false,
        serviceAccountTokenInSecrets: false,
      });
      assert.equal(pv.uniqueVolumeName, `kubernetes.io/csi/${DRIVER}^vol-a`);
      assert.equal(uniqueVolumeName(DRIVER, 'vol-a'), pv.uniqueVolumeName);

      // node-status.json: the test writes volumesAttached, the agent volumesInUse; neither loses the other.
      await disk.setVolumesAttached([{ name: pv.uniqueVolumeName }]);
      await view.setVolumesInUse([pv.uniqueVolumeName]);
      assert.deepEqual(await disk.volumesInUse(), [pv.uniqueVolumeName]);
      assert.deepEqual((await view.getNodeStatus()).volumesAttached, [{ name: pv.uniqueVolumeName, devicePath: '' }]);

      await disk.deletePod('app');
      assert.deepEqual(await view.listPods(), []);
      assert.deepEqual(readdirSync(disk.manifestsDir).filter((f) => f.startsWith('.')), [], 'no temp file left behind');
    } finally {
      await disk.cleanup();
    }
    assert.equal(existsSync(disk.base), false);
  });

  it('reads the driver journal (a partial last line is left out), writes faults, builds the agent argv', async () => {
    const disk = await NodeDisk.create();
    try {
      assert.deepEqual(await disk.journal(), []);
      await writeFile(
        disk.journalFile,
        '{"seq":1,"method":"NodeStageVolume","volumeId":"vol-a","phase":"held","fault":"delay"}\n{"seq":1,"method":"NodeStageVolume","volumeId":"vol-a","error":null,"durationMs":20}\n{"seq":2,"method":"NodePub',
      );
      assert.deepEqual((await disk.journal()).map((e) => [e.seq, e.method, e.phase, e.error]), [
        [1, 'NodeStageVolume', 'held', undefined],
        [1, 'NodeStageVolume', undefined, null],
      ]);
      const held = await disk.waitForJournal((e) => e.method === 'NodeStageVolume' && e.phase === 'held', 'NodeStageVolume to be held', 1000);
      assert.equal(held.volumeId, 'vol-a');
      await assert.rejects(
        disk.waitForJournal((e) => e.method === 'NodeUnstageVolume', 'NodeUnstageVolume to arrive', 100),
        /timed out after 100 ms waiting for a journal entry: NodeUnstageVolume to arrive; last observed: \[.*method: 'NodeStageVolume'/,
      );
      await writeFile(disk.journalFile, '{"method":"NodeStageVolume"}\nnot json\n');
      await assert.rejects(disk.journal(), /journal\.jsonl:2: not JSON/);

      await disk.writeFaults({ faults: [{ method: 'NodeStageVolume', volumeId: 'vol-a', hang: true }] });
      assert.deepEqual(parseYaml(readFileSync(disk.faultsFile, 'utf8')), { faults: [{ method: 'NodeStageVolume', volumeId: 'vol-a', hang: true }] });
      await disk.writeFaults('faults: []\n');
      assert.equal(readFileSync(disk.faultsFile, 'utf8'), 'faults: []\n');
      await disk.clearFaults();
      await disk.clearFaults();
      assert.equal(existsSync(disk.faultsFile), false);

      const argv = disk.agentArgv({ featureGates: { CSIGlobalMountReconstruction: true }, csiEndpoints: { [DRIVER]: 'unix:///x/csi.sock' } });
      assert.deepEqual(argv.slice(0, 3), [process.execPath, nodevolBin(), 'agent']);
      assert.equal(nodevolBin(), path.join(repoRoot(), 'bin', 'nodevol.js'));
      for (const [flag, value] of [
        ['--root-dir', disk.rootDir],
        ['--cluster-dir', disk.clusterDir],
        ['--node-name', 'node-1'],
        ['--metrics-bind-address', '127.0.0.1:0'],
        ['--feature-gates', 'CSIGlobalMountReconstruction=true'],
        ['--csi-endpoint', `${DRIVER}=unix:///x/csi.sock`],
      ] as const) {
        assert.equal(argv[argv.indexOf(flag) + 1], value, flag);
      }
      const driver = disk.mockDriverArgv({ driverName: DRIVER });
      assert.deepEqual(driver.slice(0, 3), [process.execPath, nodevolBin(), 'mock-driver']);
      assert.equal(driver[driver.indexOf('--endpoint') + 1], `unix://${disk.rootDir}/plugins/${DRIVER}/csi.sock`);
      assert.equal(driver[driver.indexOf('--journal') + 1], disk.journalFile);
      await writeFile(disk.logFile('agent'), 'I1129 x] "Starting nodevol agent" metricsAddress="127.0.0.1:1111"\n{"msg":"Starting nodevol agent","metricsAddress":"127.0.0.1:2222"}\n');
      assert.equal(await disk.agentMetricsAddress(), '127.0.0.1:2222', 'the last start wins');
    } finally {
      await disk.cleanup();
    }
  });
});

describe('e2e harness: waitFor', () => {
  it('resolves to the first truthy value; times out naming what it waited for and what it saw last', async () => {
    let n = 0;
    assert.equal(await waitFor(() => (++n >= 3 ? 'done' : false), { what: 'three tries', intervalMs: 1 }), 'done');
    await assert.rejects(
      waitFor(() => false, { what: 'the impossible', timeoutMs: 150, intervalMs: 20 }),
      (err: unknown) => {
        assert.ok(err instanceof WaitTimeoutError);
        assert.equal(err.message, 'timed out after 150 ms waiting for the impossible; last observed: false');
        return true;
      },
    );
    await assert.rejects(
      waitFor(() => false, { what: 'volumesInUse to list vol-a', timeoutMs: 100, observe: () => ({ volumesInUse: [] }) }),
      /^WaitTimeoutError: timed out after 100 ms waiting for volumesInUse to list vol-a; last observed: \{ volumesInUse: \[\] \}$/,
    );
    await assert.rejects(
      waitFor(
        () => {
          throw new Error('ECONNREFUSED');
        },
        { what: 'the agent to answer', timeoutMs: 100 },
      ),
      /waiting for the agent to answer; last observed: Error: ECONNREFUSED$/,
    );
    const hung = (): Promise<never> => new Promise<never>(() => undefined);
    await assert.rejects(waitFor(hung, { what: 'a hung check', timeoutMs: 150 }), /timed out after 150 ms waiting for a hung check; last observed: the condition itself did not settle/);
  });
});

describe('e2e harness: NodeNamespace (root only)', { skip: ROOT_ONLY }, () => {
  let disk: NodeDisk;
  before(async () => {
    disk = await NodeDisk.create();
  });
  after(async () => {
    await killAll();
    assert.deepEqual(NodeNamespace.live(), []);
    await disk.cleanup();
  });

  it('runs processes and commands inside; a bind mount made inside is visible there, not on the host', async () => {
    const ns = await NodeNamespace.start({ name: 'mounts', logDir: disk.logDir });
    const src = path.join(disk.base, 'src dir');
    const target = path.join(disk.base, 'tar get');
    await mkdir(src);
    await mkdir(target);
    await writeFile(path.join(src, 'marker'), 'through the bind mount');

    await ns.runOk(['mount', '--bind', src, target]);
    assert.equal(await ns.isMounted(target), true);
    assert.ok((await ns.mountInfo()).includes(` ${escapeMountPath(target)} `), 'in the namespace\'s mountinfo, escaped');
    assert.ok(!hostMountInfo().includes(escapeMountPath(target)), 'not in the host\'s mountinfo');
    assert.deepEqual(readdirSync(target), [], 'the host sees the bare directory');

    // A spawned process: its environment, its log, its exit status; it sees the mount.
    const script = 'process.stdout.write(process.env.E2E_MARK + " " + require("fs").readFileSync(process.argv[1], "utf8")); process.exit(3)';
    await ns.spawn('reader', [process.execPath, '-e', script, path.join(target, 'marker')], { env: { E2E_MARK: 'hello' } });
    assert.deepEqual(await ns.wait('reader', 5000), { exitCode: 3, signal: null });
    assert.equal(await disk.readLog('reader'), 'hello through the bind mount');
    const [reader] = await ns.processes();
    assert.equal(reader?.running, false);
    assert.equal(reader?.log, disk.logFile('reader'));

    // Inside, /proc is the namespace's own: PID 1 is the reaper (or the supervisor without perl).
    const comm = await ns.runOk(['cat', '/proc/1/comm']);
    assert.equal(comm.stdout.trim(), ns.reapsOrphans ? 'perl' : 'node');
    const failing = await ns.run(['ls', path.join(disk.base, 'nope')]);
    assert.equal(failing.exitCode, 2);
    assert.match(failing.stderr, /No such file or directory/);
    await assert.rejects(ns.spawn('ghost', ['/nonexistent/binary']), /cannot start "ghost" .*ENOENT/);
    await assert.rejects(ns.runOk(['mount', '--bind', path.join(disk.base, 'nope'), target]), /\["mount","--bind",.*exited with code 32/);

    await ns.stop();
    assert.deepEqual(mountsUnder(disk.base), []);
  });

  it('reboot() kills every process and drops every mount; the disk survives; the next namespace starts clean', async (t) => {
    const ns = await NodeNamespace.start({ name: 'before-reboot', logDir: disk.logDir });
    const backing = path.join(disk.base, 'backing');
    const globalMount = path.join(disk.layout.csiDeviceMountPath(DRIVER, 'vol-reboot'));
    await mkdir(backing);
    await mkdir(globalMount, { recursive: true });
    await ns.runOk(['mount', '--bind', backing, globalMount]);
    await ns.runOk([process.execPath, '-e', 'require("fs").writeFileSync(process.argv[1], "written inside")', path.join(globalMount, 'data')]);
    await writeFile(path.join(disk.rootDir, 'survivor'), 'on the disk');

    const sleepNsPid = await ns.spawn('sleeper', ['sleep', '1000']);
    const sleepHostPid = ns.hostPid(sleepNsPid);
    assert.ok(sleepHostPid !== undefined, 'the sleep is visible from the host');
    assert.match(readFileSync(`/proc/${sleepHostPid}/cmdline`, 'utf8'), /^sleep\0/);
    const inNamespace = ns.hostPids();
    assert.ok(inNamespace.includes(ns.initHostPid) && inNamespace.includes(sleepHostPid));
    const procs = snapshot([...inNamespace, ns.unsharePid]);

    const started = performance.now();
    await ns.reboot();
    t.diagnostic(`reboot took ${Math.round(performance.now() - started)} ms`);

    assert.deepEqual(procs.alive(), [], 'no process of the namespace survives, unshare included');
    assert.equal(hostProcessExists(sleepHostPid), false, `sleep (host pid ${sleepHostPid}) is gone`);
    assert.equal(ns.alive, false);
    await assert.rejects(ns.mountInfo(), /before-reboot has ended .*cannot wait for the mount table/);
    assert.equal(readFileSync(path.join(backing, 'data'), 'utf8'), 'written inside', 'what went through the mount is on the disk');
    assert.equal(readFileSync(path.join(disk.rootDir, 'survivor'), 'utf8'), 'on the disk');
    assert.deepEqual(readdirSync(globalMount), [], 'the mount point is a bare directory again');

    const next = await NodeNamespace.start({ name: 'after-reboot', logDir: disk.logDir });
    assert.equal(await next.isMounted(globalMount), false);
    assert.deepEqual((await next.runOk(['ls', '-A', globalMount])).stdout, '');
    assert.deepEqual(await next.processes(), []);
    assert.equal(next.hostPids().length, next.reapsOrphans ? 2 : 1, 'only PID 1 and the supervisor');
    const again = await next.spawn('sleeper', ['sleep', '1000']);
    assert.ok(again > 0);
    await next.stop();
  });

  it('run() of `nodevol audit` inside sees the namespace\'s mount table', async () => {
    const ns = await NodeNamespace.start({ name: 'audit', logDir: disk.logDir });
    const handle = 'vol-audit';
    const volDir = disk.layout.csiVolumeDir(DRIVER, handle);
    const globalMount = disk.layout.csiDeviceMountPath(DRIVER, handle);
    const backing = path.join(disk.base, 'audit-backing');
    await mkdir(globalMount, { recursive: true });
    await mkdir(backing);
    await writeFile(
      path.join(volDir, 'vol_data.json'),
      JSON.stringify({ driverName: DRIVER, volumeHandle: handle, specVolID: 'pv-audit', volumeLifecycleMode: 'Persistent' }),
    );
    await ns.runOk(['mount', '--bind', backing, globalMount]);

    const audit = nodevolArgv('audit', '--root-dir', disk.rootDir, '-o', 'json');
    const inside = await ns.run(audit, 20_000);
    assert.equal(inside.exitCode, 1, `staged with no pod: orphaned, exit 1; stderr: ${inside.stderr}`);
    const report = JSON.parse(inside.stdout) as { volumes: { uniqueName: string; global: { mounted: boolean } | null; verdict: string; verdictWithGate: string }[] };
    assert.deepEqual(
      report.volumes.map((v) => [v.uniqueName, v.global?.mounted, v.verdict, v.verdictWithGate]),
      [[uniqueVolumeName(DRIVER, handle), true, 'orphaned', 'recovered']],
    );

    // The same audit on the host: the same disk, but no mount.
    const [node, ...args] = audit as [string, ...string[]];
    const outside = spawnSync(node, args, { encoding: 'utf8', timeout: 20_000 });
    const hostReport = JSON.parse(outside.stdout) as typeof report;
    assert.deepEqual(hostReport.volumes.map((v) => v.global?.mounted), [false]);
    await ns.stop();
  });

  it('stop() leaves no process and no mount behind, is idempotent, and later calls fail clearly', async () => {
    const ns = await NodeNamespace.start({ name: 'stopping', logDir: disk.logDir });
    const target = path.join(disk.base, 'stop-target');
    await mkdir(target);
    await ns.runOk(['mount', '-t', 'tmpfs', 'e2e-tmpfs', target]);
    await ns.spawn('sleeper', ['sleep', '1000']);
    await ns.spawn('agent', disk.agentArgv({ nodeStatusUpdateFrequency: '200ms' }));
    await waitFor(() => disk.agentMetricsAddress(), { what: 'the agent to start', timeoutMs: 10_000, observe: () => disk.readLog('agent') });
    const procs = snapshot([...ns.hostPids(), ns.unsharePid]);
    assert.equal(procs.pids.length, (ns.reapsOrphans ? 2 : 1) + 3, 'PID 1, supervisor, sleep, agent + unshare');

    await ns.stop();
    assert.deepEqual(procs.alive(), [], 'every process is gone');
    assert.deepEqual(mountsUnder(disk.base), [], 'no mount on the host');
    assert.equal(ns.alive, false);
    await ns.stop();
    await ns.reboot();
    await assert.rejects(ns.spawn('late', ['true']), /stopping has ended \(stopped or rebooted\): cannot wait for "late" to be spawned/);
  });

  it('nothing outlives the test process: killed (stdin closes) or exiting without stop() (exit hook)', async (t) => {
    const moduleUrl = pathToFileURL(path.join(repoRoot(), 'dist', 'test', 'support', 'e2e', 'nodeNamespace.js')).href;
    const program = (end: string): string =>
      `import { NodeNamespace } from ${JSON.stringify(moduleUrl)};
       const ns = await NodeNamespace.start();
       const pid = await ns.spawn('sleeper', ['sleep', '1000']);
       console.log(JSON.stringify([...ns.hostPids(), ns.unsharePid]));
       ${end}`;
    for (const [how, end, kill] of [
      ['SIGKILLed', 'setInterval(() => {}, 1000);', true],
      ['exits without stop()', 'setTimeout(() => process.exit(0), 50);', false],
    ] as const) {
      const child = spawn(process.execPath, ['--input-type=module', '-e', program(end)], { stdio: ['ignore', 'pipe', 'inherit'] });
      const lines = createInterface({ input: child.stdout });
      const first = await withTimeout(
        new Promise<string>((resolve) => lines.once('line', resolve)),
        10_000,
        `the test process that ${how} to report its namespace`,
      );
      const procs = snapshot(JSON.parse(first) as number[]);
      assert.ok(procs.pids.length >= 3);
      const killedAt = performance.now();
      if (kill) child.kill('SIGKILL');
      await waitFor(() => procs.alive().length === 0, { what: `the namespace of a test process that ${how} to die`, timeoutMs: 5000, observe: () => procs.alive() });
      t.diagnostic(`test process ${how}: its namespace was gone after ${Math.round(performance.now() - killedAt)} ms`);
      lines.close();
    }
  });

  it('a timed-out wait throws a clear error, and leaves the process alone', async () => {
    const ns = await NodeNamespace.start({ name: 'timeouts', logDir: disk.logDir });
    await ns.spawn('sleeper', ['sleep', '1000']);
    await assert.rejects(ns.wait('sleeper', 300), (err: unknown) => {
      assert.ok(err instanceof WaitTimeoutError, String(err));
      assert.match(err.message, /^timed out after 300 ms waiting for "sleeper" \(pid \d+, \["sleep","1000"\]\) to exit in timeouts; last observed: still running$/);
      return true;
    });
    // Left alone by the timed-out wait: still running, so only the kill ends it.
    assert.deepEqual(await ns.kill('sleeper', 'SIGKILL', 5000), { exitCode: null, signal: 'SIGKILL' });
    assert.equal(await ns.signal('sleeper', 'SIGTERM'), false, 'no signal to an exited process');

    await assert.rejects(ns.run(['sleep', '30'], 300), /^WaitTimeoutError: timed out after 300 ms waiting for \["sleep","30"\] to finish in timeouts; last observed: killed/);
    await assert.rejects(ns.wait('nobody', 1000), /no process named "nobody" was spawned in this namespace \(known: sleeper\)/);
    await assert.rejects(NodeNamespace.start({ name: 'too-slow', startTimeoutMs: 1 }), /NodeNamespace\.start\(too-slow\): .*timed out after 1 ms waiting for the supervisor of too-slow to start/);
    await ns.stop();
  });
});
