// `nodevol agent --trace` as a process: each life's start, a clean stop, a kill -9 seen by the next
// life as a restart, and the file drawn by `nodevol timeline`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CliProcess, NODEVOL_BIN } from '../support/cliProcess.js';
import { waitFor } from '../support/e2e/waitFor.js';
import type { TraceEvent } from '../../src/trace/events.js';
import { parseTraceFile } from '../../src/trace/traceFile.js';

const VOL = 'kubernetes.io/csi/mock.csi.nodevol.io^vol-1';

describe('nodevol agent --trace', () => {
  let dir: string;
  let root: string;
  let cluster: string;
  let trace: string;
  const agent = (): CliProcess =>
    CliProcess.start(['agent', '--root-dir', root, '--node-name', 'node-1', '--cluster-dir', cluster, '--metrics-bind-address', '127.0.0.1:0', '--logging-format', 'json', '--shutdown-grace-period', '20s', '--trace', trace]);
  const lines = (): ReturnType<typeof parseTraceFile> => {
    let text = '';
    try {
      text = readFileSync(trace, 'utf8');
    } catch {
      // not written yet
    }
    return parseTraceFile(text, trace);
  };

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'nodevol-agent-trace-'));
    root = path.join(dir, 'root');
    cluster = path.join(dir, 'cluster');
    trace = path.join(dir, 'trace.jsonl');
    await mkdir(root);
    await mkdir(path.join(cluster, 'manifests'), { recursive: true });
    // The Node already reports a volume in use: each life's trace starts from it as read.
    await writeFile(path.join(cluster, 'node-status.json'), `${JSON.stringify({ volumesAttached: [{ name: VOL, devicePath: '' }], volumesInUse: [VOL] })}\n`);
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a clean stop writes the stop line; a kill -9 is recorded as a restart by the next life; timeline draws the lives', async () => {
    const first = agent();
    await first.logged('Starting nodevol agent', 60_000);
    // A clean stop ends as soon as the loops have stopped; the 20 s grace period (and the agent's own hard stop
    // 2 s later) only bounds it, so that a heavily loaded machine does not turn a slow clean stop into a hard one.
    assert.equal((await first.stop(30_000)).code, 0);
    const second = agent();
    await second.logged('Starting nodevol agent', 60_000);
    await waitFor(() => (lines().filter((e) => e.kind === 'step').length === 2 ? true : undefined), { what: 'the second life to start', timeoutMs: 60_000 });
    second.child.kill('SIGKILL');
    await waitFor(() => second.exit, { what: 'the killed agent to exit', timeoutMs: 30_000 });
    const third = agent();
    await third.logged('Starting nodevol agent', 60_000);
    assert.equal((await third.stop(30_000)).code, 0);

    const events = lines();
    assert.deepEqual(
      events.filter((e) => e.kind === 'step' || e.kind === 'crash' || (e.kind === 'log' && e.message.startsWith('nodevol agent stopped'))).map((e) => e.kind === 'crash' ? `crash ${e.crash}` : e.kind === 'log' ? e.message : 'start'),
      ['start', 'nodevol agent stopped (SIGTERM)', 'start', 'crash restart', 'start', 'nodevol agent stopped (SIGTERM)'],
    );

    // Every life records node.status as it read it before anything else, never an assumed
    // empty volumesInUse; a list recorded later was read or written, and says which.
    const lives = events.reduce<TraceEvent[][]>((acc, e) => {
      if (e.kind === 'step') acc.push([]);
      acc[acc.length - 1]?.push(e);
      return acc;
    }, []);
    assert.equal(lives.length, 3);
    for (const life of lives) {
      const statuses = life.filter((e) => e.kind === 'status');
      assert.ok(statuses.length > 0, 'each life reads node.status');
      assert.deepEqual(statuses[0], { ...statuses[0], source: 'read', volumesAttached: [VOL] });
      for (const s of statuses) assert.ok(s.source === 'read' || s.source === 'written', JSON.stringify(s));
    }
    const firstStatus = lives[0]?.find((e) => e.kind === 'status');
    assert.deepEqual(firstStatus?.kind === 'status' ? firstStatus.volumesInUse : undefined, [VOL]);

    const html = path.join(dir, 'trace.html');
    const r = spawnSync(process.execPath, [NODEVOL_BIN, 'timeline', trace, '--html', html], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    const page = await readFile(html, 'utf8');
    assert.equal(page.match(/class="col"/g)?.length, 3, 'one column per agent life');
    assert.equal(page.match(/class="crash restart"/g)?.length, 1);
  });
});
