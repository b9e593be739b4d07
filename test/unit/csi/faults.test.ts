// The one CSI fault model (src/csi/faults.ts): how a rule is written and read, and how rules are
// matched to calls, as the simulator, the fake driver and `nodevol mock-driver` all use it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CsiFaultBook, csiFaultSchema, describeCsiFault, formatFaultDuration, parseFaultDuration, writtenFault, type CsiFault } from '../../../src/csi/faults.js';
import { GrpcStatus } from '../../../src/ports/csi.js';

const issues = (v: unknown): string[] => {
  const r = csiFaultSchema.safeParse(v);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('a fault rule as written', () => {
  it('reads durations and code names into ms and numbers, and writes them back the same', () => {
    const f = csiFaultSchema.parse({ method: 'NodeUnstageVolume', volumeId: 'vol-1', delay: '3m', clientTimeout: '2m', code: 'UNAVAILABLE', afterEffect: true, times: 2 });
    assert.deepEqual(f, { method: 'NodeUnstageVolume', volumeId: 'vol-1', delayMs: 180_000, code: GrpcStatus.UNAVAILABLE, afterEffect: true, clientTimeoutMs: 120_000, times: 2 });
    assert.deepEqual(writtenFault(f), { method: 'NodeUnstageVolume', volumeId: 'vol-1', delay: '3m', code: 'UNAVAILABLE', afterEffect: true, clientTimeout: '2m', times: 2 });
    assert.equal(describeCsiFault(f), 'NodeUnstageVolume volume=vol-1 delay=3m code=UNAVAILABLE after the effect clientTimeout=2m times=2');
  });

  it('refuses the keys of earlier vocabularies with the key to use, and unknown keys by name', () => {
    assert.deepEqual(issues({ method: 'NodeStageVolume', volume: 'vol-1', code: 14 }), ['volume: unknown key: use volumeId (the volume handle)']);
    assert.deepEqual(issues({ method: 'NodeStageVolume', delayMs: 5 }), ['delayMs: unknown key: use delay (a duration such as 500ms)', ': a rule needs at least one of delay, code, hang: true, hang: forever, exit: true, clientTimeout']);
    assert.deepEqual(issues({ method: 'NodeStageVolume', code: 14, timeoutKeepRunning: true }), ['timeoutKeepRunning: unknown key: use delay: 3m with clientTimeout: 2m']);
    assert.match(issues({ method: 'NodeStageVolume', code: 14, tims: 1 })[0] ?? '', /^tims: unknown key \(a rule has method, volumeId, /);
  });

  it('a duration is digits and one unit, at most a day', () => {
    assert.equal(parseFaultDuration('500ms'), 500);
    assert.equal(parseFaultDuration('2s'), 2000);
    assert.equal(parseFaultDuration('1h'), 3_600_000);
    for (const bad of ['2', '2 s', '1.5s', '-1s', '1m30s', '']) assert.equal(parseFaultDuration(bad), undefined, bad);
    assert.match(issues({ method: 'Probe', delay: '25h' })[0] ?? '', /^delay: must be a duration of at most 24h/);
    assert.equal(formatFaultDuration(90_000), '90s');
  });

  it('hang: forever reads as a hang that is forever and is written back so; clear() keeps only the rules it is told to', () => {
    const rule = csiFaultSchema.parse({ method: 'NodeStageVolume', volumeId: 'v', hang: 'forever' });
    assert.deepEqual(rule, { method: 'NodeStageVolume', volumeId: 'v', hang: true, forever: true });
    assert.deepEqual(writtenFault(rule), { method: 'NodeStageVolume', volumeId: 'v', hang: 'forever' });
    assert.equal(describeCsiFault(rule), 'NodeStageVolume volume=v hang forever');
    assert.match(issues({ method: 'Probe', hang: 'sometimes' })[0] ?? '', /^hang: /);
    const book = new CsiFaultBook();
    book.add(rule);
    book.add({ method: 'NodeStageVolume', hang: true });
    book.clear((r) => r.forever === true);
    assert.deepEqual(book.rules().map((r) => r.rule), [rule]);
    book.clear();
    assert.equal(book.size, 0);
  });

  it('needs something to do, and afterEffect needs a code', () => {
    assert.deepEqual(issues({ method: 'Probe' }), [': a rule needs at least one of delay, code, hang: true, hang: forever, exit: true, clientTimeout']);
    assert.deepEqual(issues({ method: 'Probe', delay: '1s', afterEffect: true }), ['afterEffect: afterEffect needs a code']);
  });
});

describe('CsiFaultBook: matching rules to calls', () => {
  const unavailable = (over: Partial<CsiFault> = {}): CsiFault => ({ method: 'NodeStageVolume', code: GrpcStatus.UNAVAILABLE, ...over });

  it('the first rule with times left that matches the method and volume applies, and counts down', () => {
    const book = new CsiFaultBook();
    book.add(unavailable({ volumeId: 'a', times: 2 }));
    book.add(unavailable({ code: GrpcStatus.ABORTED, times: 1 }));
    assert.equal(book.take('NodeStageVolume', 'b')?.code, GrpcStatus.ABORTED, 'the rule for a does not match b');
    assert.equal(book.take('NodeStageVolume', 'b'), undefined, 'used up');
    assert.equal(book.take('NodeUnstageVolume', 'a'), undefined, 'another method');
    assert.equal(book.take('NodeStageVolume', 'a')?.code, GrpcStatus.UNAVAILABLE);
    assert.equal(book.take('NodeStageVolume', 'a')?.code, GrpcStatus.UNAVAILABLE);
    assert.equal(book.take('NodeStageVolume', 'a'), undefined);
    assert.equal(book.size, 0);
  });

  it('a handle removes its rule and tells how many calls it still applies to', () => {
    const book = new CsiFaultBook();
    const h = book.add(unavailable({ times: 3 }));
    book.take('NodeStageVolume', 'x');
    assert.equal(h.remaining(), 2);
    h.remove();
    assert.equal(h.remaining(), 0);
    assert.equal(book.take('NodeStageVolume', 'x'), undefined);
  });

  it('a file read again keeps the counters of the rules it still holds, so appending a rule re-arms none', () => {
    const book = new CsiFaultBook();
    const first = unavailable({ times: 1 });
    book.replace([first]);
    assert.ok(book.take('NodeStageVolume', 'x'));
    const second: CsiFault = { method: 'NodeUnstageVolume', hang: true, times: 1 };
    book.replace([first, second]);
    assert.equal(book.take('NodeStageVolume', 'x'), undefined, 'the first rule stays used up');
    assert.equal(book.take('NodeUnstageVolume', 'x')?.hang, true);
    book.replace([unavailable({ times: 2 })]);
    assert.equal(book.take('NodeStageVolume', 'x')?.times, 2, 'a changed rule starts afresh');
    book.clear();
    assert.equal(book.take('NodeStageVolume', 'x'), undefined);
  });
});
