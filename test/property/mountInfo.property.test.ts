// Property tests for the mountinfo parser (untrusted input: /proc/self/mountinfo or a file given
// with --mountinfo). Runs ~1,000 cases per property in `npm test`, more in `npm run fuzz`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { escapeMountPath, MountInfoParseError, parseMountInfo, ScannedMountInfo, unescapeMountPath, type MountInfoEntry } from '../../src/mount/mountInfo.js';
import { MountTableSnapshot } from '../../src/mount/mountRefs.js';
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

/** What `fn` returns, or the message of what it throws (the two must agree on both). */
function outcome<T>(fn: () => T): { value: T } | { error: string } {
  try {
    return { value: fn() };
  } catch (err) {
    return { error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
  }
}

/** Texts for the scanned table: damaged ones, and clean ones whose lines share paths and devices. */
const sharedPath = fc.constantFrom('/', '/a', '/a/b', '/a/b c', '/var/lib/kubelet/pods/p/volumes', '/a/b/c');
const sharedLine = line.chain((l) =>
  fc.record({ mountPoint: sharedPath, root: sharedPath, major: fc.nat({ max: 2 }), minor: fc.nat({ max: 2 }) }).map((o) => render({ ...l, ...o })),
);
const scanText = fc.oneof(
  damagedText,
  fc.array(fc.oneof({ weight: 4, arbitrary: sharedLine }, { weight: 1, arbitrary: line.map(render) }), { maxLength: 12 }).map((ls) => ls.join('\n')),
);

describe('the scanned mount table (entries built on demand) against the eager parse', () => {
  it('same entries, problems, mount points and device numbers, in any order of building; same strict error', bound(), () => {
    fc.assert(
      fc.property(scanText, fc.boolean(), fc.array(fc.nat({ max: 20 }), { maxLength: 12 }), (text, otherSpace, order) => {
        // A vertical tab sends every line through the general path, in both.
        const t = otherSpace ? `${text}\n\v` : text;
        const eager = parseMountInfo(t, { strict: false });
        const scanned = ScannedMountInfo.scan(t, { strict: false });
        assert.deepEqual(scanned.problems, eager.problems);
        assert.equal(scanned.count, eager.entries.length);
        for (const i of order) assert.deepEqual(scanned.entry(i), eager.entries[i]);
        for (let i = 0; i < eager.entries.length; i++) {
          assert.equal(scanned.mountPoint(i), eager.entries[i]?.mountPoint);
          assert.equal(scanned.major(i), eager.entries[i]?.major);
          assert.equal(scanned.minor(i), eager.entries[i]?.minor);
        }
        assert.deepEqual(scanned.entries(), eager.entries);
        const strictEager = outcome(() => parseMountInfo(t, { source: 'm' }).entries);
        const strictScanned = outcome(() => ScannedMountInfo.scan(t, { source: 'm' }).entries());
        assert.deepEqual(strictScanned, strictEager);
      }),
      runs(),
    );
  });

  it('a snapshot of the scanned table answers every query as the eager snapshot does', bound(), () => {
    const probe = fc.oneof(sharedPath, fc.constantFrom('/a/b/c/d', '/x', '/a/b\\040c', '/var/lib/kubelet/pods/p/volumes/v', '/a/'));
    fc.assert(
      fc.property(scanText, fc.array(probe, { minLength: 1, maxLength: 6 }), (text, paths) => {
        const eager = MountTableSnapshot.parse(text, { strict: false });
        const lazy = MountTableSnapshot.scan(text, { strict: false });
        for (const p of paths) {
          assert.deepEqual(lazy.findMountFor(p), eager.findMountFor(p));
          assert.deepEqual(outcome(() => lazy.searchMountPoints(p)), outcome(() => eager.searchMountPoints(p)));
          assert.equal(lazy.isMountPoint(p), eager.isMountPoint(p));
          assert.deepEqual(lazy.mountsUnder(p), eager.mountsUnder(p));
          assert.equal(lazy.hasMountPointStartingWith(`${p}/`), eager.entries.some((e) => e.mountPoint.startsWith(`${p}/`)));
        }
        assert.deepEqual(lazy.entries, eager.entries);
        assert.deepEqual(lazy.problems, eager.problems);
      }),
      runs(),
    );
  });
});
