// `nodevol recover` as a process, without a driver call: it will not run without the cluster's
// view, rejects a malformed --csi-endpoint, and -o json prints the journal lines of the plan
// (through the --csi-endpoint given, not the conventional socket).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { list, node } from '../support/clusterObjects.js';
import { NODEVOL_BIN } from '../support/cliProcess.js';
import { NodeFixture } from '../support/nodeFixture.js';

const DRIVER = 'ebs.csi.example.com';

function nodevol(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  const env = { ...process.env };
  delete env['KUBERNETES_SERVICE_HOST'];
  const r = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', timeout: 60_000, env });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('nodevol recover (process)', () => {
  let fx: NodeFixture;
  let server: Server | undefined;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    server?.close();
    await fx.cleanup();
  });

  it('without the cluster\'s view it refuses to run (exit 2) and touches nothing', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const r = nodevol(['recover', '--yes', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo()]);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /the cluster's view is required/);
    assert.ok(existsSync(gm));
  });

  it('a malformed --csi-endpoint exits 2 naming it', () => {
    const r = nodevol(['recover', '--root-dir', fx.root, '--csi-endpoint', 'tcp://1.2.3.4:5']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--csi-endpoint "tcp:\/\/1\.2\.3\.4:5": want DRIVER=unix:\/\/\/abs\/csi\.sock/);
  });

  it('-o json prints the planned journal lines, through the --csi-endpoint given', async () => {
    const gm = await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1', mounted: false });
    const sock = path.join(fx.base, 'elsewhere.sock');
    server = createServer();
    await new Promise<void>((resolve) => server!.listen(sock, resolve));
    const clusterFile = path.join(fx.base, 'cluster.json');
    await writeFile(clusterFile, JSON.stringify(list([node('node-1')])));
    const r = nodevol(['recover', '--root-dir', fx.root, '--mountinfo', await fx.writeMountInfo(), '--cluster-state', clusterFile, '--node-name', 'node-1', '--csi-endpoint', `${DRIVER}=unix://${sock}`, '-o', 'json']);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { action: string; outcome: string; endpoint?: string; path?: string });
    assert.deepEqual(lines.map((l) => `${l.action} ${l.outcome}`), ['NodeUnstageVolume planned', 'rmdir planned', 'unlink planned', 'rmdir planned']);
    assert.equal(lines[0]?.endpoint, `unix://${sock}`);
    assert.equal(lines[0]?.path, gm);
    assert.ok(existsSync(gm));
  });
});
