// One nodevol process acts on a kubelet root dir at a time (src/cli/rootDirLock.ts): `recover --yes`
// does nothing while a `nodevol agent` runs on the root dir (exit 3, no call, nothing removed), and
// proceeds once the agent is SIGKILLed; while a `recover --yes` runs, a second one does nothing and an
// agent does not start (exit 2). The agent runs unprivileged over a temp root dir; the driver is a
// gRPC CSI server in this process that records every call; nothing is mounted, so no root is needed.
import assert from 'node:assert/strict';
import { execFile, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { unixEndpoint } from '../../src/adapters/grpc/endpoint.js';
import { startCsiServer, type CsiServer } from '../../src/adapters/grpc/server.js';
import { list, node } from '../support/clusterObjects.js';
import { CliProcess, NODEVOL_BIN } from '../support/cliProcess.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { NodeFixture } from '../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';

interface Run {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The CLI as a child, without blocking this process (the CSI server under test lives here). */
function nodevol(args: readonly string[]): { child: ChildProcess; done: Promise<Run> } {
  const env = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  let child: ChildProcess | undefined;
  const done = new Promise<Run>((resolve) => {
    child = execFile(process.execPath, [NODEVOL_BIN, ...args], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
  return { child: child!, done };
}

describe('one nodevol agent or recover --yes per root dir', () => {
  let fx: NodeFixture;
  let csi: CsiServer | undefined;
  let agents: CliProcess[] = [];
  let calls: string[] = [];
  let releaseUnstage: () => void = () => undefined;
  let holdUnstage = false;
  let globalMount = '';
  let args: string[] = [];

  beforeEach(async () => {
    fx = await NodeFixture.create();
    calls = [];
    holdUnstage = false;
    globalMount = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    const held = new Promise<void>((resolve) => (releaseUnstage = resolve));
    csi = await startCsiServer(unixEndpoint(path.join(fx.base, 'csi.sock')), {
      identity: { probe: () => Promise.resolve({}) },
      node: {
        nodeGetCapabilities: () => Promise.resolve({ capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }] }),
        nodeUnstageVolume: async (req) => {
          calls.push(`NodeUnstageVolume ${req.volumeId}`);
          if (holdUnstage) await held;
          return {};
        },
      },
    });
    const clusterState = path.join(fx.base, 'cluster.json');
    await writeFile(clusterState, JSON.stringify(list([node('node-1')])));
    args = ['--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '--cluster-state', clusterState, '--node-name', 'node-1', '--csi-endpoint', `${DRIVER}=${csi.endpoint}`];
  });
  afterEach(async () => {
    releaseUnstage();
    for (const a of agents) {
      if (a.exit === undefined) a.child.kill('SIGKILL');
      await waitFor(() => a.exit, { what: 'the agent to exit', timeoutMs: 10_000 });
    }
    agents = [];
    await csi?.close();
    await fx.cleanup();
  });

  const startAgent = async (): Promise<CliProcess> => {
    const cluster = path.join(fx.base, 'cluster');
    await mkdir(path.join(cluster, 'manifests'), { recursive: true });
    const agent = CliProcess.start(['agent', '--root-dir', fx.root, '--node-name', 'node-1', '--cluster-dir', cluster, '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json', '--shutdown-grace-period', '5s']);
    agents.push(agent);
    return agent;
  };

  it('recover --yes while an agent runs: nothing done (exit 3, no call, nothing removed); once the agent is SIGKILLed it proceeds', { timeout: 120_000 }, async () => {
    const agent = await startAgent();
    await agent.logged('Starting nodevol agent', 60_000);
    const pid = agent.child.pid!;

    const refused = await nodevol(['recover', '--yes', ...args]).done;
    assert.equal(refused.status, 3, `${refused.stdout}\n${refused.stderr}`);
    assert.match(refused.stderr, new RegExp(`^nodevol recover: --root-dir .*: nodevol agent \\(pid ${pid}, since [^)]+\\) holds .*: one nodevol agent or recover --yes acts on a root dir at a time; nothing done`));
    assert.equal(refused.stdout, '');
    assert.deepEqual(calls, [], 'no call to the driver');
    assert.ok(existsSync(globalMount) && existsSync(path.join(path.dirname(globalMount), 'vol_data.json')), 'nothing removed');

    // The dry run changes nothing either way; it says that --yes would do nothing now.
    const dry = await nodevol(['recover', ...args]).done;
    assert.equal(dry.status, 0, dry.stderr);
    assert.match(dry.stderr, new RegExp(`note: nodevol agent \\(pid ${pid}, since [^)]+\\) holds .*: with --yes, recover would do nothing now \\(exit 3\\)`));

    agent.child.kill('SIGKILL');
    await waitFor(() => agent.exit, { what: 'the SIGKILLed agent to exit', timeoutMs: 10_000 });
    const act = await nodevol(['recover', '--yes', ...args]).done;
    assert.equal(act.status, 0, `${act.stdout}\n${act.stderr}`);
    assert.deepEqual(calls, ['NodeUnstageVolume vol-1']);
    assert.ok(!existsSync(path.dirname(globalMount)), 'recovered once the agent was gone');
  });

  it('while recover --yes runs, a second recover --yes does nothing (exit 3) and an agent does not start (exit 2)', { timeout: 120_000 }, async () => {
    holdUnstage = true;
    const first = nodevol(['recover', '--yes', ...args]);
    await waitFor(() => calls.length > 0 || undefined, { what: 'the first recover to call NodeUnstageVolume', timeoutMs: 60_000 });
    const pid = first.child.pid!;

    const second = await nodevol(['recover', '--yes', ...args]).done;
    assert.equal(second.status, 3, `${second.stdout}\n${second.stderr}`);
    assert.match(second.stderr, new RegExp(`nodevol recover --yes \\(pid ${pid}, since [^)]+\\) holds `));

    const agent = await startAgent();
    const exit = await waitFor(() => agent.exit, { what: 'the agent to refuse to start', timeoutMs: 60_000 });
    assert.equal(exit.code, 2, agent.stderrLines.join('\n'));
    assert.match(agent.stderrLines.join('\n'), new RegExp(`^nodevol agent: --root-dir .*: nodevol recover --yes \\(pid ${pid}, since [^)]+\\) holds .*: one nodevol agent or recover --yes acts on a root dir at a time$`, 'm'));

    releaseUnstage();
    const done = await first.done;
    assert.equal(done.status, 0, `${done.stdout}\n${done.stderr}`);
    assert.deepEqual(calls, ['NodeUnstageVolume vol-1'], 'only the first recover called the driver');
    assert.ok(!existsSync(path.dirname(globalMount)));

    const next = await startAgent();
    await next.logged('Starting nodevol agent', 60_000);
    // SIGTERM ends the agent within its grace period + 2 s whatever it was doing (docs/security.md).
    const stopped = await next.stop(20_000).catch((err: unknown) => {
      throw new Error(`${String(err)}\n--- agent stderr ---\n${next.stderrLines.join('\n')}`);
    });
    assert.equal(stopped.code, 0, 'the agent starts once recover is done');
  });
});
