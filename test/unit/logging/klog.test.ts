// klog text and JSON formats, verbosity.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createKlogLogger, type LoggingFormat } from '../../../src/logging/klog.js';

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
