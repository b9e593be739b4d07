// `nodevol timeline` as a process: trace files in, the report or the narrated text out.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { storyOneRuns } from '../support/timelineFixture.js';
import { traceLine } from '../../src/trace/traceFile.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');

function nodevol(args: readonly string[], columns = '140'): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, COLUMNS: columns } });
  if (r.error !== undefined) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('nodevol timeline', () => {
  let dir: string;
  let off: string;
  let on: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-timeline-cli-'));
    const [a, b] = storyOneRuns();
    off = path.join(dir, 'gate-off.jsonl');
    on = path.join(dir, 'gate-on.jsonl');
    await writeFile(off, a!.events.map(traceLine).join(''));
    await writeFile(on, b!.events.map(traceLine).join(''));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('--html writes one self-contained report with a run per file', async () => {
    const out = path.join(dir, 'report.html');
    const r = nodevol(['timeline', off, on, '--html', out]);
    assert.equal(r.status, 0, r.stderr);
    const html = await readFile(out, 'utf8');
    assert.equal(html.match(/<section class="run"/g)?.length, 2);
    assert.match(html, /<h2>gate-off\.jsonl<\/h2>/);
    assert.match(html, /data-violation="in-use-reported"/);
    // The size it reports is the file's, in bytes (the report holds ✓, ✗ and →: not its length in characters).
    const reported = /^nodevol timeline: wrote .* \((\d+) bytes\)$/m.exec(r.stderr)?.[1];
    assert.equal(Number(reported), (await stat(out)).size, r.stderr);
    assert.notEqual(html.length, (await stat(out)).size);
  });

  it('without --html prints the runs side by side', () => {
    const r = nodevol(['timeline', off, on]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^step +gate-off\.jsonl +gate-on\.jsonl$/m);
    assert.match(r.stdout, /── node reboots: every mount gone ──/);
  });

  it('wraps at the terminal width between words: an agent\'s gate list breaks after its commas, never inside a name', async () => {
    const gates = ['CSIDurableBlockVolumePaths', 'CSIGlobalMountReconstruction', 'CSIKeepListedVolumeOnStageFailure', 'CSIListGlobalVolumesWithoutStagingDir', 'CSIUnpublishBeforeUnstageAfterReconstruction'];
    const file = path.join(dir, 'agent.jsonl');
    await writeFile(
      file,
      [
        traceLine({ kind: 'step', t: 0, index: 0, label: `agent started: pid 7, boot 597e9134-36d0-4597-ae2e-fbe96e0038d8, ${gates.map((g) => `${g}=true`).join(',')}` }),
        traceLine({ kind: 'status', t: 1, volumesInUse: [], volumesAttached: [], source: 'read' }),
      ].join(''),
    );
    for (const columns of [60, 100, 200]) {
      const r = nodevol(['timeline', file, file], String(columns));
      assert.equal(r.status, 0, r.stderr);
      const lines = r.stdout.split('\n');
      for (const l of lines) assert.ok(l.length <= columns, `COLUMNS=${columns}: ${l}`);
      for (const g of gates) assert.ok(lines.some((l) => l.includes(`${g}=true`)), `COLUMNS=${columns}: ${g} cut:\n${r.stdout}`);
      assert.ok(lines.some((l) => l.includes('597e9134-36d0-4597-ae2e-fbe96e0038d8')), r.stdout);
    }
  });

  it('a bad line exits 2 with one message naming the file, the line and the field', async () => {
    const bad = path.join(dir, 'bad.jsonl');
    await writeFile(bad, `${traceLine({ kind: 'step', t: 0, index: 0, label: 'a' })}{"kind":"csi","t":"soon","method":"x","volumeId":"","outcome":"OK"}\n`);
    const r = nodevol(['timeline', bad]);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, new RegExp(`^nodevol timeline: ${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:2: field t: `));
  });

  it('a trace of an older agent is drawn, with a warning that its volumesInUse at start was assumed', async () => {
    const old = path.join(dir, 'old-agent.jsonl');
    const VOL = 'kubernetes.io/csi/d^vol-1';
    await writeFile(
      old,
      [
        traceLine({ kind: 'step', t: 0, index: 0, label: 'agent started: pid 7, boot 1111-aaaa, CSIGlobalMountReconstruction=true' }),
        traceLine({ kind: 'status', t: 1, volumesInUse: [], volumesAttached: [VOL] }),
      ].join(''),
    );
    const r = nodevol(['timeline', old]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /older nodevol agent.*assumed empty, not read/);
    // A trace of today's agent says where each list came from: no warning.
    const now = path.join(dir, 'new-agent.jsonl');
    await writeFile(
      now,
      [
        traceLine({ kind: 'step', t: 0, index: 0, label: 'agent started: pid 8, boot 1111-aaaa, CSIGlobalMountReconstruction=true' }),
        traceLine({ kind: 'status', t: 1, volumesInUse: [VOL], volumesAttached: [VOL], source: 'read' }),
      ].join(''),
    );
    const n = nodevol(['timeline', now]);
    assert.equal(n.status, 0, n.stderr);
    assert.equal(n.stderr, '');
  });

  it('a FIFO is refused at once, not waited on', () => {
    const fifo = path.join(dir, 'fifo');
    const mk = spawnSync('mkfifo', [fifo]);
    if (mk.status !== 0) return;
    const r = nodevol(['timeline', fifo]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /not a regular file/);
  });

  it('--help has examples and the exit codes', () => {
    const r = nodevol(['timeline', '--help']);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /Examples:/);
    assert.match(r.stdout, /Exit codes: 0/);
  });
});
