// Property tests for vol_data.json (untrusted input: any file under the root dir). The decoder is
// checked against a MODEL: JSON.parse of the same text plus Go's rules for
// json.NewDecoder(f).Decode(&map[string]string) (first value only, null -> {}, a null member ->
// "", a non-string member or a non-object value -> a type error naming the first such field,
// lone surrogates -> U+FFFD, nesting deeper than 10,000 -> a syntax error).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { MemFs } from '../../src/adapters/memory/memFs.js';
import { resolvesInsideRoot } from '../../src/layout/confinement.js';
import { decodeVolumeData, encodeVolumeData, loadVolumeData, VolumeDataError, type VolumeData } from '../../src/volume/csi/volumeData.js';
import { bound, runs } from './runs.js';

const utf8 = new TextEncoder();
const JSON_SPACE = fc.constantFrom('', ' ', '\n', '\t', '\r\n', '  \n ');

/** What Go's decoder makes of a JS string it reads back: each lone surrogate becomes U+FFFD. */
function goString(s: string): string {
  return s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
}

type Outcome = { readonly ok: Record<string, string> } | { readonly error: VolumeDataError['kind']; readonly field?: string };

/** The model: JSON.parse plus Go's rules. `value` is what JSON.parse returns for the first value. */
function model(value: unknown): Outcome {
  if (value === null) return { ok: {} };
  if (typeof value !== 'object' || Array.isArray(value)) return { error: 'type' };
  const ok: Record<string, string> = {};
  // defineProperty: a "__proto__" key is an ordinary own key, as in JSON.parse and the decoder.
  const set = (key: string, v: string): void => {
    Object.defineProperty(ok, goString(key), { value: v, enumerable: true, writable: true, configurable: true });
  };
  for (const [key, member] of Object.entries(value as Record<string, unknown>)) {
    if (typeof member === 'string') set(key, goString(member));
    else if (member === null) set(key, '');
    else return { error: 'type', field: goString(key) };
  }
  return { ok };
}

function outcome(bytes: Uint8Array): Outcome {
  try {
    return { ok: { ...decodeVolumeData(bytes, '/root/vol_data.json') } };
  } catch (err) {
    assert.ok(err instanceof VolumeDataError, `decodeVolumeData threw a non-VolumeDataError: ${String(err)}`);
    assert.equal(err.path, '/root/vol_data.json');
    assert.ok(err.message.includes('/root/vol_data.json'), err.message);
    return err.field === undefined ? { error: err.kind } : { error: err.kind, field: err.field };
  }
}

/** JSON values whose objects are mostly string maps (the interesting case) but anything can appear. */
const member = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);
const document = fc.oneof(
  { weight: 6, arbitrary: fc.dictionary(fc.string({ unit: 'binary', maxLength: 12 }), member, { maxKeys: 8 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

/** Any well-formed string: every code point, no lone surrogate. */
const wellFormed = (maxLength: number): fc.Arbitrary<string> => fc.string({ unit: 'binary', maxLength }).filter((s) => goString(s) === s);
/** Any string map, keys and values over all of Unicode. */
const stringMap = fc.dictionary(wellFormed(16), wellFormed(24), { maxKeys: 10 });
/** The same with lone surrogates allowed. */
const anyStringMap = fc.dictionary(fc.string({ unit: 'binary', maxLength: 16 }), fc.string({ unit: 'binary', maxLength: 24 }), { maxKeys: 10 });

describe('vol_data.json: properties', () => {
  it('decoding any JSON text (leading space, trailing bytes after a separator) agrees with JSON.parse plus Go\'s rules', bound(), () => {
    fc.assert(
      fc.property(document, JSON_SPACE, JSON_SPACE, fc.uint8Array({ maxLength: 16 }), (value, before, sep, trailing) => {
        const text = JSON.stringify(value);
        const bytes = Uint8Array.from([...utf8.encode(`${before}${text}`), ...(sep === '' ? [] : utf8.encode(sep)), ...(sep === '' ? [] : trailing)]);
        assert.deepEqual(outcome(bytes), model(JSON.parse(text)));
      }),
      runs(),
    );
  });

  it('a lone surrogate in a value is written as \\ufffd and read back as U+FFFD', bound(), () => {
    fc.assert(
      fc.property(wellFormed(8), fc.string({ unit: 'binary', maxLength: 24 }), (key, value) => {
        assert.deepEqual(outcome(encodeVolumeData({ [key]: value })), model({ [key]: value }));
      }),
      runs(),
    );
  });

  it('encode then decode gives the map back; the bytes are JSON with keys in code point order and a final newline', bound(), () => {
    fc.assert(
      fc.property(stringMap, (data) => {
        const bytes = encodeVolumeData(data);
        const expected = model(data);
        assert.deepEqual(outcome(bytes), expected);
        const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
        assert.ok(text.endsWith('}\n'));
        const parsed = JSON.parse(text) as Record<string, string>;
        assert.deepEqual(parsed, 'ok' in expected ? expected.ok : undefined);
        const keys = [...text.matchAll(/(?:^\{|,)("(?:[^"\\]|\\.)*"):/g)].map((m) => JSON.parse(m[1] ?? '""') as string);
        const byCodePoint = [...keys].sort((a, b) => {
          // Code points, not graphemes: the order Go sorts map keys in (UTF-8 bytes).
          const x = Array.from(a, (c) => c.codePointAt(0) ?? 0);
          const y = Array.from(b, (c) => c.codePointAt(0) ?? 0);
          for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0);
          return x.length - y.length;
        });
        assert.deepEqual(keys, byCodePoint);
      }),
      runs(),
    );
  });

  it('every cut of an encoded file is refused as empty or a syntax error, never read as a smaller map', bound(), () => {
    fc.assert(
      fc.property(stringMap.filter((m) => Object.keys(m).length > 0), fc.nat(), (data, at) => {
        const bytes = encodeVolumeData(data);
        const cut = at % (bytes.length - 1); // strictly before the closing brace
        const o = outcome(bytes.subarray(0, cut));
        assert.ok('error' in o && (o.error === 'empty' || o.error === 'syntax'), JSON.stringify(o));
      }),
      runs(),
    );
  });

  it('any bytes (and any damage to a real file) give a VolumeData of strings or a VolumeDataError, never anything else', bound(), () => {
    const damaged = fc.tuple(anyStringMap, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 })).map(([data, flips]) => {
      const bytes = Uint8Array.from(encodeVolumeData(data));
      for (const [at, b] of flips) if (bytes.length > 0) bytes[at % bytes.length] = b;
      return bytes;
    });
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 64 }), damaged), (bytes) => {
        const o = outcome(bytes);
        if ('ok' in o) for (const v of Object.values(o.ok)) assert.equal(typeof v, 'string');
      }),
      runs(),
    );
  });

  it('nesting deeper than Go\'s 10,000 levels is a syntax error; up to it, a type error naming the field', bound(0.05), () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_050 }), fc.constantFrom('[', '{"k":'), (depth, open) => {
        const close = open === '[' ? ']' : '}';
        const inner = open === '[' ? '' : '""';
        const o = outcome(utf8.encode(`{"a":${open.repeat(depth)}${inner}${close.repeat(depth)}}`));
        if (depth + 1 > 10_000) assert.equal('error' in o && o.error, 'syntax');
        else assert.deepEqual(o, { error: 'type', field: 'a' });
      }),
      runs(0.05),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Root confinement: loadVolumeData with rootDir never returns the bytes of a file outside it.

const ROOT = '/root';
const NAMES = ['a', 'b', 'vol_data.json'] as const;
type Node = { readonly kind: 'file'; readonly inside: boolean } | { readonly kind: 'dir' } | { readonly kind: 'link'; readonly target: string };

const linkTarget = fc.constantFrom(
  '/outside', '/outside/vol_data.json', '/root', '/root/a', '/root/a/vol_data.json', '..', '../..', '../../outside',
  '../outside/vol_data.json', 'a', 'b/vol_data.json', '/', '/root/b', 'vol_data.json', '/root/a/b/../../../outside',
);
const tree = fc.array(
  fc.tuple(
    fc.constantFrom(...NAMES),
    fc.constantFrom(...NAMES),
    fc.oneof(fc.constant<Node>({ kind: 'dir' }), fc.constant<Node>({ kind: 'file', inside: true }), linkTarget.map((target): Node => ({ kind: 'link', target }))),
  ),
  { maxLength: 8 },
);

async function build(entries: readonly [string, string, Node][]): Promise<MemFs> {
  const fs = new MemFs();
  await fs.mkdir(`${ROOT}/a/b`, { recursive: true, mode: 0o755 });
  await fs.mkdir('/outside', { recursive: true, mode: 0o755 });
  await fs.writeFile('/outside/vol_data.json', encodeVolumeData({ where: 'outside' }));
  for (const [dir, name, node] of entries) {
    const p = `${ROOT}/${dir === 'vol_data.json' ? 'a' : dir}/${name}`;
    try {
      if (node.kind === 'dir') await fs.mkdir(p, { recursive: true, mode: 0o755 });
      else if (node.kind === 'file') await fs.writeFile(p, encodeVolumeData({ where: 'inside' }));
      else await fs.symlink(node.target, p);
    } catch {
      // the parent is a file or a link, or the name is taken: the tree is just different
    }
  }
  return fs;
}

describe('vol_data.json: root confinement property', () => {
  it('with rootDir, whatever the symlinks under it, a file outside the root dir is never read', bound(0.3), async () => {
    await fc.assert(
      fc.asyncProperty(tree, fc.constantFrom('a', 'b', 'a/b', 'b/a', 'a/vol_data.json'), fc.boolean(), async (entries, dir, parentsVerified) => {
        const fs = await build(entries);
        const p = dir.endsWith('vol_data.json') ? `${ROOT}/${dir}` : `${ROOT}/${dir}/vol_data.json`;
        // parentsVerified is the caller's promise that the directory resolves inside the root
        // dir: a walker makes it only after checking, as here.
        const verified = parentsVerified && (await resolvesInsideRoot(fs, p.slice(0, p.lastIndexOf('/')), ROOT));
        try {
          const data: VolumeData = await loadVolumeData(fs, p, { rootDir: ROOT, ...(verified ? { parentsVerified: true } : {}) });
          assert.notEqual(data['where'], 'outside', `${p} was read from outside the root dir`);
        } catch (err) {
          assert.ok(err instanceof VolumeDataError, `unexpected ${String(err)}`);
        }
      }),
      runs(0.3),
    );
  });
});
