// Hostile input (docs/security.md): control characters in the audit's table output. A driver
// directory name or a directory under the CSI plugin dir can hold escape sequences and
// newlines; printed raw they recolour the terminal, move the cursor, or forge whole rows
// ("orphaned" turned "tracked"). The table escapes them as kubectl does (a cell is cut at the
// first line break and marked "...", ESC shown as ^[) and shows every other control character
// as \xNN. The JSON output keeps the bytes exactly.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { NodeFixture } from '../support/nodeFixture.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');

/** A driver name that forges a "tracked" row and recolours the terminal when printed raw. */
const EVIL_DRIVER = 'evil.csi\u001b[32m\nFORGED   tracked   fake.csi   vol-x   Filesystem   pod-x   mounted\u001b[0m';
/** A skipped directory whose name rewrites the line with a carriage return, a bell and a C1 CSI. */
const EVIL_DIR = 'x\rSKIPPED-NOTHING\u0007\u009b2J';

function run(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('the audit table escapes control characters (rows cannot be forged)', () => {
  let fx: NodeFixture;
  beforeEach(async () => {
    fx = await NodeFixture.create();
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('a driver name with ESC and a newline is one escaped row, and a skipped dir name is escaped too', async () => {
    await fx.stage({ driver: EVIL_DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    await fx.mkdirRel(`plugins/kubernetes.io/csi/${EVIL_DRIVER}/${EVIL_DIR}/globalmount`);
    const mountinfo = await fx.writeMountInfo();
    const r = run(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '-o', 'table']);
    assert.equal(r.status, 1, r.stderr);
    for (const bad of ['\u001b', '\r', '\u0007', '\u009b']) assert.ok(!r.stdout.includes(bad), `${JSON.stringify(bad)} printed raw: ${JSON.stringify(r.stdout)}`);
    const lines = r.stdout.split('\n');
    assert.ok(!lines.some((l) => l.startsWith('FORGED')), `a forged row: ${JSON.stringify(lines)}`);
    assert.equal(lines.filter((l) => /^(tracked|recovered|orphaned) /.test(l)).length, 1, `exactly one volume row: ${JSON.stringify(lines)}`);
    assert.match(r.stdout, /\norphaned +recovered +evil\.csi\^\[\[32m\.\.\. +vol-1 /);
    assert.ok(r.stdout.includes('x\\rSKIPPED-NOTHING\\x07\\x9b2J'), JSON.stringify(r.stdout));
  });

  it('-o json keeps the names byte for byte', async () => {
    await fx.stage({ driver: EVIL_DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const mountinfo = await fx.writeMountInfo();
    const r = run(['audit', '--root-dir', fx.root, '--mountinfo', mountinfo, '-o', 'json']);
    const report = JSON.parse(r.stdout) as { volumes: { driver: string }[] };
    assert.equal(report.volumes[0]?.driver, EVIL_DRIVER);
  });
});
