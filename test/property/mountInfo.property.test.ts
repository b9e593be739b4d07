// Property tests for the mountinfo parser (untrusted input: /proc/self/mountinfo or a file given
// with --mountinfo). Runs ~1,000 cases per property in `npm test`, more in `npm run fuzz`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { escapeMountPath, MountInfoParseError, parseMountInfo, unescapeMountPath, type MountInfoEntry } from '../../src/mount/mountInfo.js';
import { bound, runs } from './runs.js';

/** Whitespace as Go's strings.Fields sees it; the kernel escapes only space, tab, LF and "\". */
const GO_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

/** A field without whitespace (what strings.Fields can give back). */
const token = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }).filter((s) => !GO_SPACE.test(s));
/** A path as the kernel has it: any characters but Go's other spaces (those the kernel leaves raw). */
const rawPath = fc
  .array(fc.oneof(fc.constantFrom('/', ' ', '\t', '\n', '\\', '\\040', 'a', 'é', '日本', '😀'), token), { minLength: 1, maxLength: 8 })
  .map((parts) => `/${parts.join('')}`)
  .filter((p) => !GO_SPACE.test(p.replace(/[ \t\n]/g, '')));
const option = token.filter((s) => !s.includes(',') && !s.includes('"'));
const optionalField = token.filter((s) => s !== '-');

/** An entry as rendered: every field but the line number. */
type Line = Omit<MountInfoEntry, 'line'>;

const line: fc.Arbitrary<Line> = fc.record({
  id: fc.nat({ max: 1_000_000 }),
  parentId: fc.nat({ max: 1_000_000 }),
  major: fc.nat({ max: 4095 }),
  minor: fc.nat({ max: 1_048_575 }),
  root: rawPath,
  mountPoint: rawPath,
  mountOptions: fc.array(option, { minLength: 1, maxLength: 4 }),
  optionalFields: fc.array(optionalField, { maxLength: 3 }),
  fsType: option,
  source: token,
  superOptions: fc.array(option, { minLength: 1, maxLength: 4 }),
});

/** The line the kernel writes for `l` (paths escaped). */
function render(l: Line): string {
  return [
    l.id, l.parentId, `${l.major}:${l.minor}`, escapeMountPath(l.root), escapeMountPath(l.mountPoint), l.mountOptions.join(','),
    ...l.optionalFields, '-', l.fsType, l.source, l.superOptions.join(','),
  ].join(' ');
}

function comparable(e: MountInfoEntry): Omit<MountInfoEntry, 'line'> {
  return Object.fromEntries(Object.entries(e).filter(([k]) => k !== 'line')) as Omit<MountInfoEntry, 'line'>;
}

/** Text shaped like mountinfo, with damage: cut lines, stray separators, odd whitespace, junk. */
const damagedText = fc
  .array(
    fc.oneof(
      line.map(render),
      line.map(render).chain((s) => fc.nat({ max: s.length }).map((n) => s.slice(0, n))),
      fc.string({ unit: 'binary', maxLength: 60 }),
      fc.constantFrom('', ' ', '-', ' - ', '\t', '\r', '\u00a0', '1 2 3:4 / / rw - ext4 /dev/x rw', '1 2 x:y / / rw - a b c', '99999999999999999999 1 1:1 / / rw - a b c'),
    ),
    { maxLength: 12 },
  )
  .map((lines) => lines.join('\n'));

describe('mountinfo parser: properties', () => {
  it('escapeMountPath then unescapeMountPath gives the path back', bound(), () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (p) => {
        assert.equal(unescapeMountPath(escapeMountPath(p)), p);
        assert.equal(/[ \t\n]/.test(escapeMountPath(p)), false);
      }),
      runs(),
    );
  });

  it('rendered lines parse back to the same entries, in order, with their line numbers', bound(), () => {
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 10 }), (lines) => {
        const { entries, problems } = parseMountInfo(`${lines.map(render).join('\n')}\n`);
        assert.deepEqual(problems, []);
        assert.deepEqual(entries.map((e) => e.line), lines.map((_, i) => i + 1));
        assert.deepEqual(entries.map(comparable), lines.map((l) => ({ ...l, root: escapeMountPath(l.root), mountPoint: escapeMountPath(l.mountPoint) })));
      }),
      runs(),
    );
  });

  it('the fast path and the general path agree: a line needing the general path changes no other entry', bound(), () => {
    fc.assert(
      fc.property(damagedText, (text) => {
        const plain = parseMountInfo(text, { strict: false });
        // A vertical tab anywhere sends every line through the general splitter.
        const general = parseMountInfo(`${text}\n\v`, { strict: false });
        assert.deepEqual(general.entries, plain.entries);
        assert.deepEqual(general.problems.slice(0, -1), plain.problems);
      }),
      runs(),
    );
  });

  it('the in-place parse of a common line agrees with the general path, whatever its spacing and number forms', bound(), () => {
    // Lines close to the common shape: numbers with signs, leading zeros or too many digits,
    // doubled, leading and trailing spaces, a "-" in odd places, fields missing after it.
    const number = fc.oneof(
      { weight: 4, arbitrary: fc.nat({ max: 99_999 }).map(String) },
      { weight: 2, arbitrary: fc.constantFrom('+7', '-7', '007', '0', '1234567890123456', '99999999999999', '', 'x1', '1:2') },
    );
    const sep = fc.constantFrom(' ', ' ', ' ', ' ', '  ');
    const field = fc.oneof({ weight: 4, arbitrary: token }, { weight: 1, arbitrary: fc.constantFrom('-', '/', 'rw,relatime', 'shared:1') });
    const roughLine = fc
      .tuple(
        fc.tuple(number, number, number, number),
        fc.array(field, { minLength: 2, maxLength: 4 }),
        fc.array(field, { maxLength: 3 }),
        fc.boolean(),
        fc.array(field, { maxLength: 5 }),
        fc.array(sep, { minLength: 16, maxLength: 16 }),
        fc.constantFrom('', '', '', ' ', '  '),
        fc.constantFrom('', '', ' '),
      )
      .map(([[id, parent, major, minor], head, optional, dash, tail, seps, lead, trail]) => {
        const fields = [id, parent, `${major}:${minor}`, ...head, ...optional, ...(dash ? ['-'] : []), ...tail];
        return lead + fields.map((f, i) => (i === 0 ? f : `${seps[i % seps.length] ?? ' '}${f}`)).join('') + trail;
      });
    fc.assert(
      fc.property(fc.array(fc.oneof(roughLine, line.map(render)), { minLength: 1, maxLength: 8 }), (lines) => {
        const text = lines.join('\n');
        const plain = parseMountInfo(text, { strict: false });
        const general = parseMountInfo(`${text}\n\v`, { strict: false });
        assert.deepEqual(plain.entries, general.entries);
        assert.deepEqual(plain.problems, general.problems.slice(0, -1));
      }),
      runs(),
    );
  });

  it('damaged text: strict parsing throws only MountInfoParseError naming the first bad line; lenient parsing never throws and accounts for every line', bound(), () => {
    fc.assert(
      fc.property(damagedText, (text) => {
        const lenient = parseMountInfo(text, { strict: false, source: '/proc/self/mountinfo' });
        const nonEmpty = text.split('\n').filter((l) => l !== '').length;
        assert.equal(lenient.entries.length + lenient.problems.length, nonEmpty);
        for (const e of lenient.entries) {
          assert.ok(Number.isSafeInteger(e.id) && Number.isSafeInteger(e.major) && Number.isSafeInteger(e.minor));
        }
        try {
          const strict = parseMountInfo(text, { source: '/proc/self/mountinfo' });
          assert.deepEqual(lenient.problems, []);
          assert.deepEqual(strict.entries, lenient.entries);
        } catch (err) {
          assert.ok(err instanceof MountInfoParseError, `unexpected ${String(err)}`);
          assert.equal(err.source, '/proc/self/mountinfo');
          assert.equal(err.line, lenient.problems[0]?.line);
          assert.ok(err.message.startsWith(`/proc/self/mountinfo:${err.line}: `));
        }
      }),
      runs(),
    );
  });
});
