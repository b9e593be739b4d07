// The vol_data.json decoder's JSON.parse fast path against the Go-compatible decoder alone: on any
// bytes the two give the same record (same keys, same order, same values, both frozen) or the same
// error (kind, message, field). The inputs lean towards what takes the fast path (plain ASCII
// JSON) and its edges: non-string members, null, duplicate keys, "__proto__", integer-like keys,
// trailing bytes, cuts, escapes, bytes >= 0x80, deep nesting.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { decodeVolumeData, decodeVolumeDataGo, VolumeDataError } from '../../src/volume/csi/volumeData.js';
import { bound, runs } from './runs.js';

const utf8 = new TextEncoder();
const PATH = '/root/pods/p/volumes/kubernetes.io~csi/v/vol_data.json';

type Outcome = { readonly ok: readonly (readonly [string, string])[]; readonly frozen: boolean } | { readonly error: string; readonly kind: string; readonly field?: string };

function outcome(decode: (b: Uint8Array, p: string) => Readonly<Record<string, string>>, bytes: Uint8Array): Outcome {
  try {
    const r = decode(bytes, PATH);
    assert.equal(Object.getPrototypeOf(r), Object.prototype);
    return { ok: Object.entries(r), frozen: Object.isFrozen(r) };
  } catch (err) {
    assert.ok(err instanceof VolumeDataError, `a non-VolumeDataError: ${String(err)}`);
    return err.field === undefined ? { error: err.message, kind: err.kind } : { error: err.message, kind: err.kind, field: err.field };
  }
}

function agree(bytes: Uint8Array): void {
  assert.deepEqual(outcome(decodeVolumeData, bytes), outcome(decodeVolumeDataGo, bytes), `input: ${JSON.stringify(new TextDecoder().decode(bytes))}`);
}

/** Keys and values mostly plain ASCII, sometimes anything. */
const asciiKey = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'X', 'Z', '0', '1', '9', '_', '-', '.', '/', '~', '^'), maxLength: 10 }) },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', '0', '1', '10', '4294967295', '-1', 'toString') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) },
);
const member = fc.oneof(
  { weight: 8, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
);
const space = fc.constantFrom('', ' ', '\n', '\t', '\r\n', '\f', '\v', '\u00a0');

/** An object written member by member (duplicates allowed), with any spacing. */
const objectText = fc
  .array(fc.tuple(asciiKey, member, space, space), { maxLength: 8 })
  .map((members) => `{${members.map(([k, v, a, b]) => `${a}${JSON.stringify(k)}${b}:${a}${JSON.stringify(v)}${b}`).join(',')}}`);
const text = fc.oneof(
  { weight: 6, arbitrary: objectText },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.constantFrom('null', 'true', '[]', '{}', '"x"', '1e5', '-0', '', ' ', '{"a":"b"}{', '{"a":"\\u00e9"}') },
);

describe('vol_data.json: the JSON.parse fast path decodes exactly as the Go-compatible decoder', () => {
  it('any JSON text with any spacing around it and any trailing bytes', bound(), () => {
    fc.assert(
      fc.property(space, text, space, fc.uint8Array({ maxLength: 8 }), (before, t, after, trailing) => {
        agree(utf8.encode(`${before}${t}${after}`));
        agree(Uint8Array.from([...utf8.encode(`${before}${t}${after}`), ...trailing]));
      }),
      runs(),
    );
  });

  it('every cut and every one-byte change of a plain file', bound(), () => {
    fc.assert(
      fc.property(objectText, fc.nat(), fc.integer({ min: 0, max: 255 }), (t, at, byte) => {
        const bytes = utf8.encode(t);
        const i = bytes.length === 0 ? 0 : at % bytes.length;
        agree(bytes.subarray(0, i));
        const changed = Uint8Array.from(bytes);
        if (changed.length > 0) changed[i] = byte;
        agree(changed);
      }),
      runs(),
    );
  });

  it('arbitrary bytes', bound(), () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), agree), runs());
  });

  it('nesting deeper than Go allows is the same syntax error through both', () => {
    agree(utf8.encode(`{"a":${'['.repeat(10_001)}${']'.repeat(10_001)}}`));
    agree(utf8.encode(`{"a":${'['.repeat(9_999)}${']'.repeat(9_999)}}`));
  });
});
