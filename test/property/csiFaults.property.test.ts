// Property tests for the one CSI fault model (src/csi/faults.ts), as a faults file of
// `nodevol mock-driver --faults FILE` an operator writes (YAML or JSON) and as the simulator
// writes rules back into scenarios: no crash (only MockFaultsError, naming the file); rules
// round-trip through their written form.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';
import { stringify } from 'yaml';

import { CSI_FAULT_METHODS, csiFaultSchema, formatFaultDuration, MAX_FAULT_DURATION_MS, writtenFault, type CsiFault } from '../../src/csi/faults.js';
import { MockFaultsError, parseFaults } from '../../src/mockdriver/faults.js';
import { GrpcStatus, type GrpcStatusName } from '../../src/ports/csi.js';
import { bound, runs } from './runs.js';

const FILE = '/etc/mock/faults.yaml';
const CODE_NAMES = Object.keys(GrpcStatus).filter((n) => n !== 'OK') as GrpcStatusName[];

interface FileRule {
  readonly method: CsiFault['method'];
  readonly volumeId?: string;
  readonly delay?: string;
  readonly clientTimeout?: string;
  readonly code?: GrpcStatusName | number;
  readonly afterEffect?: boolean;
  readonly times?: number;
  readonly hang?: boolean;
  readonly exit?: boolean;
}

const durationMs = fc.oneof(fc.integer({ min: 0, max: MAX_FAULT_DURATION_MS }), fc.integer({ min: 0, max: 1440 }).map((m) => m * 60_000));
/** A duration as a user writes it: any unit that divides it. */
const durationText = durationMs.chain((ms) =>
  fc.constantFrom(...(['ms', 's', 'm', 'h'] as const).filter((u) => ms % { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[u] === 0)).map((u) => `${ms / { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[u]}${u}`),
);

/** A valid rule as a file holds it (code by name or number). */
const rule: fc.Arbitrary<FileRule> = fc
  .record(
    {
      method: fc.constantFrom(...CSI_FAULT_METHODS),
      volumeId: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 16 }),
      delay: durationText,
      clientTimeout: durationText,
      code: fc.oneof(fc.constantFrom(...CODE_NAMES), fc.integer({ min: 1, max: 16 })),
      afterEffect: fc.boolean(),
      times: fc.integer({ min: 1, max: 1_000_000 }),
      hang: fc.boolean(),
      exit: fc.boolean(),
    },
    { requiredKeys: ['method'] },
  )
  .filter((r) => r.delay !== undefined || r.code !== undefined || r.hang === true || r.exit === true || r.clientTimeout !== undefined)
  .filter((r) => r.afterEffect !== true || r.code !== undefined);

const MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const ms = (text: string): number => {
  const m = /^(\d+)(ms|s|m|h)$/.exec(text);
  return Number(m?.[1]) * (MS[m?.[2] ?? ''] ?? NaN);
};

function expected(r: FileRule): CsiFault {
  const out: { -readonly [K in keyof CsiFault]: CsiFault[K] } = { method: r.method };
  if (r.volumeId !== undefined) out.volumeId = r.volumeId;
  if (r.delay !== undefined) out.delayMs = ms(r.delay);
  if (r.hang === true) out.hang = true;
  if (r.code !== undefined) out.code = typeof r.code === 'string' ? GrpcStatus[r.code] : r.code;
  if (r.afterEffect === true) out.afterEffect = true;
  if (r.clientTimeout !== undefined) out.clientTimeoutMs = ms(r.clientTimeout);
  if (r.exit === true) out.exit = true;
  if (r.times !== undefined) out.times = r.times;
  return out;
}

/** Anything YAML can say where a rule or a field is expected. */
const junk = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('NodeStageVolume', 'OK', -1, 0, 17, 1.5, '25h', '3', '2 s', '', true, null));
const badRule = fc.oneof(
  fc.dictionary(fc.constantFrom('method', 'volumeId', 'delay', 'delayMs', 'volume', 'code', 'afterEffect', 'times', 'hang', 'exit', 'clientTimeout', 'other'), junk, { maxKeys: 5 }),
  rule.chain((r) => fc.tuple(fc.constantFrom('method', 'volumeId', 'delay', 'code', 'times', 'hang', 'extra'), junk).map(([k, v]) => ({ ...r, [k]: v }))),
  junk,
);

describe('CSI fault rules: properties', () => {
  it('valid rules written as YAML or JSON parse back to the same rules, codes as numbers, durations in ms', bound(), () => {
    fc.assert(
      fc.property(fc.array(rule, { maxLength: 6 }), fc.boolean(), (rules, json) => {
        const doc = { faults: rules };
        const text = json ? JSON.stringify(doc) : stringify(doc);
        assert.deepEqual(parseFaults(text, FILE), rules.map(expected));
      }),
      runs(),
    );
  });

  it('a rule written back (scenarios, faults files) reads as the same rule', bound(), () => {
    fc.assert(
      fc.property(rule, (r) => {
        const f = expected(r);
        assert.deepEqual(csiFaultSchema.parse(writtenFault(f)), f);
      }),
      runs(),
    );
  });

  it('durations are written in the largest exact unit', () => {
    assert.equal(formatFaultDuration(180_000), '3m');
    assert.equal(formatFaultDuration(1500), '1500ms');
    assert.equal(formatFaultDuration(2000), '2s');
    assert.equal(formatFaultDuration(0), '0ms');
  });

  it('any text: a list of valid rules or a MockFaultsError naming the file, never another error', bound(), () => {
    const text = fc.oneof(
      fc.array(fc.oneof(rule, badRule), { maxLength: 5 }).chain((rules) => fc.boolean().map((json) => (json ? JSON.stringify({ faults: rules }) : stringify({ faults: rules })))),
      junk.map((j) => stringify(j)),
      fc.string({ unit: 'binary', maxLength: 80 }),
      fc.array(fc.constantFrom('faults:\n', '  - ', 'method: ', 'NodeStageVolume\n', 'code: ', '&a ', '*a', '{', '[', '\t', '"', 'hang: true\n', 'delay: 2s\n'), { maxLength: 12 }).map((p) => p.join('')),
    );
    fc.assert(
      fc.property(text, (t) => {
        try {
          for (const r of parseFaults(t, FILE)) {
            assert.ok(CSI_FAULT_METHODS.includes(r.method));
            assert.ok(r.delayMs !== undefined || r.code !== undefined || r.hang === true || r.exit === true || r.clientTimeoutMs !== undefined);
            if (r.code !== undefined) assert.ok(Number.isInteger(r.code) && r.code >= 1 && r.code <= 16);
            for (const d of [r.delayMs, r.clientTimeoutMs]) if (d !== undefined) assert.ok(Number.isInteger(d) && d >= 0 && d <= MAX_FAULT_DURATION_MS);
          }
        } catch (err) {
          assert.ok(err instanceof MockFaultsError, `unexpected ${String(err)}`);
          assert.ok(err.message.startsWith(`${FILE}: `), err.message);
        }
      }),
      runs(),
    );
  });
});
