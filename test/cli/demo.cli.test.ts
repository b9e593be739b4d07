// `nodevol demo` as a new user runs it: no root, no node; both timelines printed, the report written.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { spawnSync } from 'node:child_process';
import { NODEVOL_BIN } from '../support/cliProcess.js';

function runNodevol(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): { status: number | null; stdout: string; stderr: string } {
  // A fixed width: the output wraps at $COLUMNS, which the environment may set.
  const r = spawnSync(process.execPath, [NODEVOL_BIN, ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, COLUMNS: '140' }, ...options });
  if (r.error !== undefined) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('nodevol demo', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-demo-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('plays story 1 with the gate off (the bug) and on (the fix), side by side, and writes the report', async () => {
    const html = path.join(dir, 'demo.html');
    const r = runNodevol(['demo', '--html', html]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^step +CSIGlobalMountReconstruction=false +CSIGlobalMountReconstruction=true$/m);
    assert.match(r.stdout, /── node reboots: every mount gone ──/);
    assert.match(r.stdout, /→ the attach\/detach controller may now\s+detach it/);
    // One verdict per run, as the report's headlines say it.
    assert.match(r.stdout, /^CSIGlobalMountReconstruction=false: vol-1 dropped from volumesInUse while staged → another node may\s+attach it; violated in-use-reported, converges\.$/m);
    assert.match(r.stdout, /^CSIGlobalMountReconstruction=true: vol-1 unstaged first, then dropped from volumesInUse: safe; no\s+invariant violated\.$/m);
    // Next to the gate-on "safe": what the gate alone still leaves (the explorer's finding) and the gate that closes it.
    const flat = r.stdout.replace(/\s+/g, ' ');
    assert.match(flat, /no invariant violated\. Safe here only: explored with the gate alone, kep-story-1 breaks converges \([^)]*\); CSIListGlobalVolumesWithoutStagingDir closes it\./);
    assert.match(flat, /Find every crash point on your own: nodevol explore --scenario kep-story-1 --feature-gates CSIGlobalMountReconstruction=true/);
    const report = await readFile(html, 'utf8');
    // The report's headline card of the gate-on run says the same line; the gate-off card has none.
    const cards = report.split('<article class="verdict').slice(1);
    assert.equal(cards.length, 2);
    assert.doesNotMatch(cards[0]!, /class="note"/);
    assert.match(cards[1]!, /<p class="headline hl-safe">[^<]*<\/p>\n<p class="note">Safe here only: explored with the gate alone, kep-story-1 breaks converges [^<]*CSIListGlobalVolumesWithoutStagingDir closes it\.<\/p>/);
    assert.equal(report.match(/<section class="run"/g)?.length, 2);
    assert.match(report, /data-violation="in-use-reported"/);
    assert.ok((await stat(html)).size < 500 * 1024, 'the story-1 report stays under 500 KB');
  });

  it('without --html writes the report to a new temp dir and prints its path, never into the working directory', async () => {
    const cwd = await mkdtemp(path.join(dir, 'cwd-'));
    const temp = await mkdtemp(path.join(dir, 'tmp-'));
    const env = { ...process.env, COLUMNS: '140', TMPDIR: temp };
    const r = runNodevol(['demo'], { cwd, env });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(await readdir(cwd), []);
    // The path may be wrapped onto its own line (a long TMPDIR, as in the unprivileged run).
    const printed = /The timeline report is in\s+(\S+):\s+open it/.exec(r.stdout)?.[1];
    assert.ok(printed !== undefined, r.stdout);
    assert.match(printed, new RegExp(`^${temp.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}/nodevol-demo-[^/]+/nodevol-demo\\.html$`));
    assert.match(await readFile(printed, 'utf8'), /data-violation="in-use-reported"/);
    // With -o json, stdout is the JSON alone: the path goes to stderr.
    const j = runNodevol(['demo', '-o', 'json'], { cwd, env });
    assert.equal(j.status, 0, j.stderr);
    JSON.parse(j.stdout);
    const path2 = /^nodevol demo: the timeline report is in (\S+)$/m.exec(j.stderr)?.[1];
    assert.ok(path2 !== undefined && path2 !== printed && (await stat(path2)).size > 0, j.stderr);
    assert.deepEqual(await readdir(cwd), []);
  });

  it('-o json prints both runs\' trace events; --no-html writes nothing', async () => {
    const cwd = await mkdtemp(path.join(dir, 'cwd-'));
    const temp = await mkdtemp(path.join(dir, 'tmp-'));
    const r = runNodevol(['demo', '-o', 'json', '--no-html'], { cwd, env: { ...process.env, TMPDIR: temp } });
    assert.deepEqual([...(await readdir(cwd)), ...(await readdir(temp))], []);
    assert.equal(r.stderr, '');
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { scenario: string; runs: { label: string; events: { kind: string }[] }[] };
    assert.equal(out.scenario, 'kep-story-1-drain-reboot');
    assert.deepEqual(out.runs.map((x) => x.label), ['CSIGlobalMountReconstruction=false', 'CSIGlobalMountReconstruction=true']);
    for (const run of out.runs) for (const kind of ['step', 'operation', 'csi', 'status', 'crash', 'file', 'mount']) assert.ok(run.events.some((e) => e.kind === kind), `${run.label}: no ${kind}`);
  });

  it('wraps every line at the terminal width, between words', () => {
    for (const columns of ['60', '200']) {
      const r = runNodevol(['demo', '--no-html'], { env: { ...process.env, COLUMNS: columns } });
      assert.equal(r.status, 0, r.stderr);
      for (const line of r.stdout.split('\n')) assert.ok(line.length <= Number(columns), `COLUMNS=${columns}: ${line.length}: ${line}`);
      // No word cut in two: every word of the narration is whole on some line.
      assert.match(r.stdout, /\bNodeUnstageVolume\b/);
      assert.match(r.stdout, /\bin-use-reported\b/);
    }
  });

  it('--scenario kep-story-2 ends naming kep-story-2, never kep-story-1, with its own gap line', () => {
    const r = runNodevol(['demo', '--scenario', 'kep-story-2', '--no-html']);
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /kep-story-1/);
    const flat = r.stdout.replace(/\s+/g, ' ');
    assert.match(flat, /Safe here only: explored with the gate alone, kep-story-2 breaks no-unstage-in-use, converges; CSIUnpublishBeforeUnstageAfterReconstruction and CSIListGlobalVolumesWithoutStagingDir close them\./);
    assert.match(flat, /Find every crash point on your own: nodevol explore --scenario kep-story-2 --feature-gates CSIGlobalMountReconstruction=true/);
  });

  it('--help: its examples show what the gate alone leaves, and the gate that closes it', () => {
    const r = runNodevol(['demo', '--help'], { env: { ...process.env, COLUMNS: '200' } });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^ {2}# Not every crash is safe with the KEP's gate alone: converges breaks; CSIListGlobalVolumesWithoutStagingDir closes it$/m);
    assert.match(r.stdout, /^ {2}nodevol explore --scenario kep-story-1 --feature-gates CSIGlobalMountReconstruction=true$/m);
    assert.match(r.stdout, /^ {2}nodevol explore --scenario kep-story-1 --feature-gates CSIGlobalMountReconstruction=true --feature-gates CSIListGlobalVolumesWithoutStagingDir=true$/m);
  });

  it('an unknown scenario exits 2 with one line', () => {
    for (const command of ['demo', 'explore']) {
      const r = runNodevol([command, '--scenario', 'no-such-story', ...(command === 'demo' ? ['--no-html'] : [])]);
      assert.equal(r.status, 2);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      // Under 200 characters: the 18 built-in names are in explore --help, not in the message.
      assert.equal(r.stderr, `nodevol ${command}: unknown scenario "no-such-story": nodevol explore --help lists the built-in ones; or give a scenario file\n`);
    }
  });
});
