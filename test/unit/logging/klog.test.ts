// klog text and JSON formats, verbosity.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { createKlogLogger, preciseWallClock, type LoggingFormat } from '../../../src/logging/klog.js';
import { NODEVOL_BIN } from '../../support/cliProcess.js';

function logger(format: LoggingFormat, verbosity: number) {
  const lines: string[] = [];
  const log = createKlogLogger({ format, verbosity, sink: (l) => lines.push(l), nowMs: () => Date.UTC(2026, 10, 29, 9, 5, 7, 123) + 0.456, pid: 42 });
  return { log, lines };
}

describe('klog logger', () => {
  it('writes the klog text header, quoted message and key/value pairs', () => {
    const { log, lines } = logger('text', 0);
    log.info('Volume reconstruction finished', { volumeName: 'kubernetes.io/csi/d^h', count: 3 });
    assert.equal(lines.length, 1);
    assert.match(lines[0] ?? '', /^I1129 09:05:07\.123456 {6}42 klog\.test\.js:\d+\] "Volume reconstruction finished" volumeName="kubernetes.io\/csi\/d\^h" count=3$/);
  });

  it('writes errors with E and err=', () => {
    const { log, lines } = logger('text', 0);
    log.error(new Error('boom'), 'Could not construct volume information', { podName: 'p' });
    assert.match(lines[0] ?? '', /^E1129 .*\] "Could not construct volume information" err="boom" podName="p"$/);
  });

  it('drops info lines above the verbosity and keeps them at or below it', () => {
    const { log, lines } = logger('text', 2);
    log.v(2).info('shown');
    log.v(4).info('hidden');
    log.v(4).warning('warnings are not verbosity-gated');
    assert.equal(lines.length, 2);
    assert.equal(log.enabled(2), true);
    assert.equal(log.enabled(3), false);
  });

  it('writes JSON with ts in epoch milliseconds, caller, msg, v and the values', () => {
    const { log, lines } = logger('json', 4);
    log.v(4).info('Skipping a CSI global directory', { path: '/x', reason: 'no-globalmount' });
    log.error(new Error('bad'), 'failed');
    assert.match(lines[0] ?? '', /^\{"ts":1795943107123\.456,"caller":"klog\.test\.js:\d+","msg":/);
    const a = JSON.parse(lines[0] ?? '') as Record<string, unknown>;
    assert.equal(a['ts'], Date.UTC(2026, 10, 29, 9, 5, 7, 123) + 0.456);
    assert.match(String(a['caller']), /^klog\.test\.js:\d+$/);
    assert.equal(a['msg'], 'Skipping a CSI global directory');
    assert.equal(a['v'], 4);
    assert.equal(a['path'], '/x');
    const b = JSON.parse(lines[1] ?? '') as Record<string, unknown>;
    assert.equal(b['err'], 'bad');
    assert.equal('v' in b, false);
  });
});

describe('klog header microseconds', () => {
  it('carries a sub-millisecond part from the wall clock used by every command', async () => {
    const { preciseWallClockMs } = await import('../../../src/logging/klog.js');
    const samples: number[] = [];
    for (let i = 0; i < 2000; i++) samples.push(preciseWallClockMs());
    // Within a millisecond of Date.now(), never going backwards by more than the re-anchoring step.
    const now = Date.now();
    for (const t of samples) assert.ok(Math.abs(t - now) < 5_000);
    assert.ok(samples.some((t) => t % 1 !== 0), 'some sample has a fraction of a millisecond');
    const lines: string[] = [];
    const log = createKlogLogger({ format: 'text', verbosity: 0, sink: (l) => lines.push(l), nowMs: preciseWallClockMs, pid: 1 });
    for (let i = 0; i < 50; i++) log.info('x');
    assert.ok(lines.some((l) => !/^I\d{4} \d\d:\d\d:\d\d\.\d{3}000 /.test(l)), 'not every header ends in 000');
  });
});

describe('klog time: real microseconds, ts always a float', () => {
  /** A node whose true time is `origin + mono`; Date.now() is that rounded down, plus `step`. */
  function fakeNode(origin: number) {
    const state = { mono: 0, step: 0 };
    const clock = preciseWallClock({ wallMs: () => Math.floor(origin + state.mono) + state.step, monoMs: () => state.mono, originMs: origin });
    return { state, clock };
  }

  it('reads the true time to the microsecond from the monotonic clock and its origin, never a whole millisecond', () => {
    const { state, clock } = fakeNode(1764407107000.427);
    for (const mono of [0, 0.25, 0.573, 1.001, 17.5, 1000.999]) {
      state.mono = mono;
      const t = clock();
      assert.ok(Math.abs(t - (1764407107000.427 + mono)) < 1e-6, `${t} at ${mono}`);
    }
  });

  it('follows a wall clock step to its millisecond, keeping the sub-millisecond part (not .000)', () => {
    const { state, clock } = fakeNode(1764407107000.427);
    state.mono = 10.2;
    clock();
    state.step = 3_600_000; // an hour forward
    state.mono = 11.3;
    const t = clock();
    assert.equal(Math.floor(t), Math.floor(1764407107000.427 + 11.3) + 3_600_000);
    assert.ok(Math.abs((t % 1) - ((1764407107000.427 + 11.3) % 1)) < 1e-6, `fraction of ${t}`);
    state.step = -7_200_000; // two hours back
    state.mono = 12.05;
    const back = clock();
    assert.equal(Math.floor(back), Math.floor(1764407107000.427 + 12.05) - 7_200_000);
    assert.notEqual(back % 1, 0);
  });

  it('the CLI\'s klog headers carry real microseconds, and every JSON ts has its three decimals', () => {
    const REPO = path.resolve(import.meta.dirname, '..', '..', '..', '..');
    const args = (format: string): string[] => [
      NODEVOL_BIN, 'audit', '--root-dir', path.join(REPO, 'examples', 'node', 'kubelet'), '--mountinfo', path.join(REPO, 'examples', 'node', 'mountinfo'),
      '--mountinfo-root-dir', '/var/lib/kubelet', '-v', '5', '--logging-format', format,
    ];
    const headers: string[] = [];
    const json: string[] = [];
    for (let i = 0; i < 3; i++) {
      headers.push(...spawnSync(process.execPath, args('text'), { encoding: 'utf8', timeout: 60_000 }).stderr.split('\n').filter((l) => /^[IWE]\d{4} /.test(l)));
      json.push(...spawnSync(process.execPath, args('json'), { encoding: 'utf8', timeout: 60_000 }).stderr.split('\n').filter((l) => l.startsWith('{')));
    }
    assert.ok(headers.length >= 9 && json.length >= 9, `${headers.length} text, ${json.length} JSON lines`);
    // A whole millisecond is one line in a thousand: more than one in these lines is the old anchoring.
    const whole = headers.filter((l) => /^.\d{4} \d\d:\d\d:\d\d\.\d{3}000 /.test(l));
    assert.ok(whole.length <= 1, `${whole.length} of ${headers.length} headers end in 000:\n${whole.join('\n')}`);
    for (const l of json) assert.match(l, /^\{"ts":\d{13}\.\d{3},"caller":/);
  });
});
