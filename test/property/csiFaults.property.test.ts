// Property tests for the mock driver's faults file (`nodevol mock-driver --faults FILE`, YAML or
// JSON an operator writes). No crash: only MockFaultsError, naming the file; rules round-trip.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';
import { stringify } from 'yaml';

import { MAX_FAULT_DELAY_MS, MOCK_RPC_METHODS, MockFaultsError, parseFaults, type MockFaultRule } from '../../src/csi/mock/faults.js';
import { GrpcStatus, type GrpcStatusName } from '../../src/host/csi.js';
import { bound, runs } from './runs.js';

const FILE = '/etc/mock/faults.yaml';
const CODE_NAMES = Object.keys(GrpcStatus).filter((n) => n !== 'OK') as GrpcStatusName[];

interface FileRule {
  readonly method: MockFaultRule['method'];
  readonly volumeId?: string;
  readonly delayMs?: number;
  readonly code?: GrpcStatusName | number;
  readonly afterEffect?: boolean;
  readonly times?: number;
  readonly hang?: boolean;
  readonly exit?: boolean;
}

/** A valid rule as a file holds it (code by name or number) and as parseFaults returns it. */
const rule: fc.Arbitrary<FileRule> = fc
  .record(
    {
      method: fc.constantFrom(...MOCK_RPC_METHODS),
      volumeId: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 16 }),
      delayMs: fc.integer({ min: 0, max: MAX_FAULT_DELAY_MS }),
      code: fc.oneof(fc.constantFrom(...CODE_NAMES), fc.integer({ min: 1, max: 16 })),
      afterEffect: fc.boolean(),
      times: fc.integer({ min: 1, max: 1_000_000 }),
      hang: fc.boolean(),
      exit: fc.boolean(),
    },
    { requiredKeys: ['method'] },
  )
  .filter((r) => r.delayMs !== undefined || r.code !== undefined || r.hang === true || r.exit === true)
  .filter((r) => r.afterEffect !== true || r.code !== undefined);

function expected(r: FileRule): MockFaultRule {
  const out: { -readonly [K in keyof MockFaultRule]: MockFaultRule[K] } = { method: r.method };
  if (r.volumeId !== undefined) out.volumeId = r.volumeId;
  if (r.delayMs !== undefined) out.delayMs = r.delayMs;
  if (r.code !== undefined) out.code = typeof r.code === 'string' ? GrpcStatus[r.code] : r.code;
  if (r.afterEffect === true) out.afterEffect = true;
  if (r.times !== undefined) out.times = r.times;
  if (r.hang === true) out.hang = true;
  if (r.exit === true) out.exit = true;
  return out;
}

/** Anything YAML can say where a rule or a field is expected. */
const junk = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('NodeStageVolume', 'OK', -1, 0, 17, 1.5, MAX_FAULT_DELAY_MS + 1, '', true, null));
const badRule = fc.oneof(
  fc.dictionary(fc.constantFrom('method', 'volumeId', 'delayMs', 'code', 'afterEffect', 'times', 'hang', 'exit', 'other'), junk, { maxKeys: 5 }),
  rule.chain((r) => fc.tuple(fc.constantFrom('method', 'volumeId', 'delayMs', 'code', 'times', 'hang', 'extra'), junk).map(([k, v]) => ({ ...r, [k]: v }))),
  junk,
);

describe('mock driver faults file: properties', () => {
  it('valid rules written as YAML or JSON parse back to the same rules, codes as numbers', bound(), () => {
    fc.assert(
      fc.property(fc.array(rule, { maxLength: 6 }), fc.boolean(), (rules, json) => {
        const doc = { faults: rules };
        const text = json ? JSON.stringify(doc) : stringify(doc);
        assert.deepEqual(parseFaults(text, FILE), rules.map(expected));
      }),
      runs(),
    );
  });

  it('any text: a list of valid rules or a MockFaultsError naming the file, never another error', bound(), () => {
    const text = fc.oneof(
      fc.array(fc.oneof(rule, badRule), { maxLength: 5 }).chain((rules) => fc.boolean().map((json) => (json ? JSON.stringify({ faults: rules }) : stringify({ faults: rules })))),
      junk.map((j) => stringify(j)),
      fc.string({ unit: 'binary', maxLength: 80 }),
      fc.array(fc.constantFrom('faults:\n', '  - ', 'method: ', 'NodeStageVolume\n', 'code: ', '&a ', '*a', '{', '[', '\t', '"', 'hang: true\n'), { maxLength: 12 }).map((p) => p.join('')),
    );
    fc.assert(
      fc.property(text, (t) => {
        try {
          for (const r of parseFaults(t, FILE)) {
            assert.ok(MOCK_RPC_METHODS.includes(r.method));
            assert.ok(r.delayMs !== undefined || r.code !== undefined || r.hang === true || r.exit === true);
            if (r.code !== undefined) assert.ok(Number.isInteger(r.code) && r.code >= 1 && r.code <= 16);
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
