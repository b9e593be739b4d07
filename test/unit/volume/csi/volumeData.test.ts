import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { posix } from 'node:path';
import { FsError, overrideFileSystem, type DirEntry, type FileStat, type FileSystem, type WriteFileOptions } from '../../../../src/ports/fs.js';
import { MemFs as AdapterMemFs } from '../../../../src/adapters/memory/memFs.js';
import {
  MAX_VOL_DATA_BYTES,
  VOL_DATA_FILE_NAME,
  VOL_DATA_TEMP_FILE_NAME,
  VolumeDataError,
  decodeVolumeData,
  decodeVolumeDataGo,
  encodeVolumeData,
  findInterruptedVolumeDataWrite,
  isVolumeDataNotFound,
  loadVolumeData,
  saveVolumeData,
  volDataKey,
  type VolumeData,
} from '../../../../src/volume/csi/volumeData.js';
import { compareCodePoints } from '../../../../src/volume/csi/volumeDataEncoder.js';

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

const utf8 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'utf8'));
const text = (b: Uint8Array): string => Buffer.from(b).toString('utf8');
const bytes = (...parts: (string | number[])[]): Uint8Array =>
  new Uint8Array(Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p)))));

function decodeError(input: Uint8Array | string, path = '/p/vol_data.json'): VolumeDataError {
  const data = typeof input === 'string' ? utf8(input) : input;
  try {
    decodeVolumeData(data, path);
  } catch (err) {
    assert.ok(err instanceof VolumeDataError, `expected a VolumeDataError, got ${String(err)}`);
    assert.equal(err.path, path);
    return err;
  }
  assert.fail(`decoding ${JSON.stringify(text(data))} should have failed`);
}

function decode(input: Uint8Array | string): VolumeData {
  return decodeVolumeData(typeof input === 'string' ? utf8(input) : input, '/p/vol_data.json');
}

const ATTACH_ID = 'csi-e4af04f900afc5314bbcec517ca6a0c1bdf261fbf7f26ed62d3c14e8a79cb915';
const PV = 'pvc-3f2a9c1e-7b44-4d1a-9e2f-5a6b7c8d9e0f';

// ---------------------------------------------------------------------------------------------
// a minimal Map-backed FileSystem fake
// ---------------------------------------------------------------------------------------------

type Op = 'readFile' | 'writeFile' | 'rename' | 'fsyncDir' | 'unlink' | 'realpath';

class MemFs implements FileSystem {
  readonly files = new Map<string, Uint8Array>();
  readonly dirs = new Set<string>(['/']);
  readonly symlinks = new Map<string, string>();
  readonly calls: string[] = [];
  readonly writeOptions: (WriteFileOptions | undefined)[] = [];
  /** Inject a failure: the next call of `op` (optionally only for `path`) rejects with `code`. */
  readonly failures: { op: Op; code: string; path?: string }[] = [];

  mkdirp(path: string): void {
    let p = '';
    for (const part of path.split('/').filter(Boolean)) {
      p += `/${part}`;
      this.dirs.add(p);
    }
  }

  put(path: string, content: Uint8Array | string): void {
    this.mkdirp(posix.dirname(path));
    this.files.set(path, typeof content === 'string' ? utf8(content) : content);
  }

  private maybeFail(op: Op, path: string): void {
    const i = this.failures.findIndex((f) => f.op === op && (f.path === undefined || f.path === path));
    if (i >= 0) {
      const f = this.failures[i];
      this.failures.splice(i, 1);
      if (f !== undefined) throw new FsError(f.code, path, op);
    }
  }

  private exists(path: string): boolean {
    return this.files.has(path) || this.dirs.has(path) || this.symlinks.has(path);
  }

  readdir(path: string): Promise<DirEntry[]> {
    return Promise.reject(new FsError('ENOSYS', path, 'readdir'));
  }
  lstat(path: string): Promise<FileStat> {
    return Promise.reject(new FsError('ENOSYS', path, 'lstat'));
  }
  stat(path: string): Promise<FileStat> {
    return Promise.reject(new FsError('ENOSYS', path, 'stat'));
  }

  realpath(path: string): Promise<string> {
    this.calls.push(`realpath ${path}`);
    try {
      this.maybeFail('realpath', path);
      let pending = path.split('/').filter(Boolean);
      let resolved = '';
      let hops = 0;
      while (pending.length > 0) {
        const [part, ...rest] = pending;
        pending = rest;
        if (part === undefined || part === '.') continue;
        if (part === '..') {
          resolved = posix.dirname(resolved || '/') === '/' ? '' : posix.dirname(resolved);
          continue;
        }
        const next = `${resolved}/${part}`;
        const target = this.symlinks.get(next);
        if (target !== undefined) {
          if (++hops > 40) throw new FsError('ELOOP', path, 'realpath');
          const abs = target.startsWith('/') ? target : `${resolved}/${target}`;
          pending = [...abs.split('/').filter(Boolean), ...pending];
          resolved = '';
          continue;
        }
        if (!this.exists(next)) throw new FsError('ENOENT', path, 'realpath');
        resolved = next;
      }
      return Promise.resolve(resolved || '/');
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  async readFile(path: string, maxBytes: number): Promise<Uint8Array> {
    this.calls.push(`readFile ${path}`);
    this.maybeFail('readFile', path);
    const real = await this.realpath(path);
    this.calls.pop(); // the internal realpath is not a caller's call
    if (this.dirs.has(real)) throw new FsError('EISDIR', path, 'read');
    const data = this.files.get(real);
    if (data === undefined) throw new FsError('ENOENT', path, 'open');
    if (data.length > maxBytes) throw new FsError('EFBIG', path, 'read');
    return data;
  }

  mkdir(path: string): Promise<void> {
    this.mkdirp(path);
    return Promise.resolve();
  }

  writeFile(path: string, data: Uint8Array, options?: WriteFileOptions): Promise<void> {
    this.calls.push(`writeFile ${path}`);
    this.writeOptions.push(options);
    try {
      if (!this.dirs.has(posix.dirname(path))) throw new FsError('ENOENT', path, 'open');
      this.maybeFail('writeFile', path);
      this.files.set(path, Uint8Array.from(data));
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  rename(from: string, to: string): Promise<void> {
    this.calls.push(`rename ${from} ${to}`);
    try {
      this.maybeFail('rename', from);
      const data = this.files.get(from);
      if (data === undefined) throw new FsError('ENOENT', from, 'rename');
      this.files.delete(from);
      this.files.set(to, data);
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  fsyncDir(path: string): Promise<void> {
    this.calls.push(`fsyncDir ${path}`);
    try {
      this.maybeFail('fsyncDir', path);
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  rmdir(path: string): Promise<void> {
    this.dirs.delete(path);
    return Promise.resolve();
  }

  unlink(path: string): Promise<void> {
    this.calls.push(`unlink ${path}`);
    if (!this.files.delete(path)) return Promise.reject(new FsError('ENOENT', path, 'unlink'));
    return Promise.resolve();
  }
  symlink(_target: string, path: string): Promise<void> {
    return Promise.reject(new FsError('ENOSYS', path, 'symlink'));
  }
  readlink(path: string): Promise<string> {
    return Promise.reject(new FsError('ENOSYS', path, 'readlink'));
  }
}

// ---------------------------------------------------------------------------------------------
// encoder
// ---------------------------------------------------------------------------------------------

void describe('encodeVolumeData: kubelet bytes (csi_util.go saveVolumeData)', () => {
  void it('persistent pod-local file', () => {
    const data: VolumeData = {
      specVolID: PV,
      volumeHandle: 'vol-0a1b2c3d',
      driverName: 'ebs.csi.example.com',
      nodeName: 'node-1',
      volumeLifecycleMode: 'Persistent',
      attachmentID: ATTACH_ID,
    };
    assert.equal(
      text(encodeVolumeData(data)),
      `{"attachmentID":"${ATTACH_ID}","driverName":"ebs.csi.example.com","nodeName":"node-1","specVolID":"${PV}","volumeHandle":"vol-0a1b2c3d","volumeLifecycleMode":"Persistent"}\n`,
    );
  });

  void it('pod-local file with SELinux context (key order)', () => {
    const data: VolumeData = {
      [volDataKey.volumeLifecycleMode]: 'Persistent',
      [volDataKey.seLinuxMountContext]: 'system_u:object_r:container_file_t:s0:c1,c2',
      [volDataKey.specVolID]: PV,
      [volDataKey.volHandle]: 'vol-0a1b2c3d',
      [volDataKey.driverName]: 'ebs.csi.example.com',
      [volDataKey.nodeName]: 'node-1',
      [volDataKey.attachmentID]: ATTACH_ID,
    };
    assert.equal(
      text(encodeVolumeData(data)),
      `{"attachmentID":"${ATTACH_ID}","driverName":"ebs.csi.example.com","nodeName":"node-1","seLinuxMountContext":"system_u:object_r:container_file_t:s0:c1,c2","specVolID":"${PV}","volumeHandle":"vol-0a1b2c3d","volumeLifecycleMode":"Persistent"}\n`,
    );
  });

  void it('pod-local file of an inline ephemeral volume', () => {
    const data: VolumeData = {
      volumeLifecycleMode: 'Ephemeral',
      specVolID: 'scratch',
      volumeHandle: 'csi-ed4878c91b1ceb4d55c576134c6920d196ccdbeedf97e4867136ec9da20c1a7c',
      nodeName: 'node-1',
      driverName: 'inline.csi.example.com',
      attachmentID: 'csi-e0f9df12df4ab5756fc779e4790239bbb90b193026f349f51e1c7844f2e80ea0',
    };
    assert.equal(
      text(encodeVolumeData(data)),
      '{"attachmentID":"csi-e0f9df12df4ab5756fc779e4790239bbb90b193026f349f51e1c7844f2e80ea0","driverName":"inline.csi.example.com","nodeName":"node-1","specVolID":"scratch","volumeHandle":"csi-ed4878c91b1ceb4d55c576134c6920d196ccdbeedf97e4867136ec9da20c1a7c","volumeLifecycleMode":"Ephemeral"}\n',
    );
  });

  void it('global file, upstream and with KEP-6058 fields', () => {
    assert.equal(
      text(encodeVolumeData({ volumeHandle: 'vol-0a1b2c3d', driverName: 'ebs.csi.example.com' })),
      '{"driverName":"ebs.csi.example.com","volumeHandle":"vol-0a1b2c3d"}\n',
    );
    assert.equal(
      text(encodeVolumeData({ volumeLifecycleMode: 'Persistent', volumeHandle: 'vol-0a1b2c3d', specVolID: PV, driverName: 'ebs.csi.example.com' })),
      `{"driverName":"ebs.csi.example.com","specVolID":"${PV}","volumeHandle":"vol-0a1b2c3d","volumeLifecycleMode":"Persistent"}\n`,
    );
  });

  void it('block file', () => {
    const data: VolumeData = {
      volumeHandle: 'vol-0a1b2c3d',
      specVolID: 'pvc-9b8a7c6d',
      nodeName: 'node-1',
      driverName: 'ebs.csi.example.com',
      attachmentID: ATTACH_ID,
    };
    assert.equal(
      text(encodeVolumeData(data)),
      `{"attachmentID":"${ATTACH_ID}","driverName":"ebs.csi.example.com","nodeName":"node-1","specVolID":"pvc-9b8a7c6d","volumeHandle":"vol-0a1b2c3d"}\n`,
    );
  });

  void it('empty map is {} plus newline', () => {
    assert.deepEqual(encodeVolumeData({}), utf8('{}\n'));
  });

  void it('odd keys from TestSaveVolumeData: sorted by raw key bytes, escaped after sorting', () => {
    // "&" (0x26) < "_" (0x5f): the raw key decides the order, not the escaped "\u0026".
    assert.equal(
      text(encodeVolumeData({ _key1: 'v1', '&key1': 'v2', key2: 'v3' })),
      '{"\\u0026key1":"v2","_key1":"v1","key2":"v3"}\n',
    );
    // Uppercase sorts before underscore before lowercase, numeric-looking keys are not special.
    assert.equal(
      text(encodeVolumeData({ b: '1', _: '2', A: '3', '10': '4', '9': '5' })),
      '{"10":"4","9":"5","A":"3","_":"2","b":"1"}\n',
    );
  });

  void it('sorts keys by code point (UTF-8 byte order), not by UTF-16 code unit', () => {
    const astral = '\u{10000}'; // UTF-16 D800 DC00: JS sort would put it before U+FFFF
    const emoji = '\u{1F600}'; // UTF-16 D83D DE00: JS sort would put it before U+E000
    const data: VolumeData = { [astral]: 'a', '\uffff': 'b', [emoji]: 'c', '\ue000': 'd', z: 'e' };
    assert.deepEqual(Object.keys(data).sort(), ['z', astral, emoji, '\ue000', '\uffff']); // the trap
    assert.deepEqual(
      encodeVolumeData(data),
      bytes('{"z":"e","', [0xee, 0x80, 0x80], '":"d","', [0xef, 0xbf, 0xbf], '":"b","', [0xf0, 0x90, 0x80, 0x80], '":"a","', [0xf0, 0x9f, 0x98, 0x80], '":"c"}\n'),
    );
    // A key that is a prefix of another sorts first.
    assert.equal(text(encodeVolumeData({ ab: '2', a: '1' })), '{"a":"1","ab":"2"}\n');
  });

  void it('escapes every class exactly like Go (>= 1.22) with HTML escaping', () => {
    const cases: [string, Uint8Array][] = [
      ['"', utf8('"\\""')],
      ['\\', utf8('"\\\\"')],
      ['\n\r\t', utf8('"\\n\\r\\t"')],
      ['\b\f', utf8('"\\b\\f"')],
      ['\u0000\u0001\u000b\u001b\u001f', utf8('"\\u0000\\u0001\\u000b\\u001b\\u001f"')],
      ['<>&', utf8('"\\u003c\\u003e\\u0026"')],
      ['\u2028\u2029', utf8('"\\u2028\\u2029"')],
      ['\u007f', bytes('"', [0x7f], '"')],
      ['/ \'', utf8('"/ \'"')],
      ['é€\ufffd', bytes('"', [0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xef, 0xbf, 0xbd], '"')],
      ['\u{1F600}', bytes('"', [0xf0, 0x9f, 0x98, 0x80], '"')],
      ['\ud800', utf8('"\\ufffd"')],
      ['a\udc00b', utf8('"a\\ufffdb"')],
      ['\udc00\ud800', utf8('"\\ufffd\\ufffd"')],
      ['\ud83dx', utf8('"\\ufffdx"')],
    ];
    for (const [value, quoted] of cases) {
      const expected = bytes('{"k":', [...quoted], '}\n');
      assert.deepEqual(encodeVolumeData({ k: value }), expected, `value ${JSON.stringify(value)}`);
      // Keys follow the same rules.
      const expectedKey = bytes('{', [...quoted], ':"v"}\n');
      assert.deepEqual(encodeVolumeData({ [value]: 'v' }), expectedKey, `key ${JSON.stringify(value)}`);
    }
  });

  void it('rejects a non-string value at runtime, naming the key and the type', () => {
    const bad = { a: 1 } as unknown as VolumeData;
    assert.throws(() => encodeVolumeData(bad), { name: 'TypeError', message: 'vol_data.json value for key "a" must be a string, got number' });
  });

  // Go's encoding/json writes a string as UTF-8 (invalid sequences as \ufffd); the bytes at each
  // UTF-8 length boundary and at each surrogate boundary, as Go writes them.
  void it('UTF-8 length and surrogate boundaries are written like Go', () => {
    const cases: [string, Uint8Array][] = [
      ['\u0080', bytes('"', [0xc2, 0x80], '"')],
      ['\u07ff', bytes('"', [0xdf, 0xbf], '"')],
      ['\u0800', bytes('"', [0xe0, 0xa0, 0x80], '"')],
      ['\ud7ff', bytes('"', [0xed, 0x9f, 0xbf], '"')],
      ['\ue000', bytes('"', [0xee, 0x80, 0x80], '"')],
      // lone surrogates at the ends of the ranges
      ['\udbff', utf8('"\\ufffd"')],
      ['\udfff', utf8('"\\ufffd"')],
      ['a\udfff', utf8('"a\\ufffd"')],
      // two low surrogates, a high surrogate followed by a non-surrogate above the low range
      ['\udc00\udc00', utf8('"\\ufffd\\ufffd"')],
      ['\udfff\udc00', utf8('"\\ufffd\\ufffd"')],
      ['\ud800\ue000', bytes('"\\ufffd', [0xee, 0x80, 0x80], '"')],
      // valid pairs at the ends of the ranges
      ['\ud800\udc00', bytes('"', [0xf0, 0x90, 0x80, 0x80], '"')],
      ['\ud800\udfff', bytes('"', [0xf0, 0x90, 0x8f, 0xbf], '"')],
      ['\udbff\udc00', bytes('"', [0xf4, 0x8f, 0xb0, 0x80], '"')],
      ['\udbff\udfff', bytes('"', [0xf4, 0x8f, 0xbf, 0xbf], '"')],
    ];
    for (const [value, quoted] of cases) {
      assert.deepEqual(encodeVolumeData({ k: value }), bytes('{"k":', [...quoted], '}\n'), `value ${JSON.stringify(value)}`);
    }
  });

  // Go sorts map keys by their UTF-8 bytes, which is code point order; both argument orders.
  void it('compareCodePoints: code point order, a prefix first, equal strings equal', () => {
    const less: [string, string][] = [
      ['a', 'ab'],
      ['', 'a'],
      ['\u{10000}a', '\u{10000}b'],
      ['\u{1F600}', '\u{1F600}\u0000'],
      ['\uffffa', '\uffffb'],
      ['\uffff', '\u{10000}'],
    ];
    for (const [a, b] of less) {
      assert.ok(compareCodePoints(a, b) < 0, `${JSON.stringify(a)} < ${JSON.stringify(b)}`);
      assert.ok(compareCodePoints(b, a) > 0, `${JSON.stringify(b)} > ${JSON.stringify(a)}`);
    }
    for (const s of ['', 'a', '\u{10000}x', '\ud800']) assert.equal(compareCodePoints(s, s), 0, JSON.stringify(s));
  });
});

// ---------------------------------------------------------------------------------------------
// decoder
// ---------------------------------------------------------------------------------------------

void describe('decodeVolumeData: Go json.Decoder semantics', () => {
  void it('round-trips every encoded example', () => {
    const samples: VolumeData[] = [
      {},
      { driverName: 'ebs.csi.example.com', volumeHandle: 'vol-0a1b2c3d' },
      { specVolID: PV, attachmentID: ATTACH_ID, seLinuxMountContext: 'system_u:object_r:container_file_t:s0:c1,c2' },
      { _key1: 'v1', '&key1': 'v2' },
      { 'k"\\\n<>&\u2028': 'v\b\f\u0001\u007f é \u{1F600} \uffff \u2029 / \'' },
      { '\u{10000}': 'a', '\uffff': 'b' },
    ];
    for (const sample of samples) {
      assert.deepEqual(decode(encodeVolumeData(sample)), sample);
    }
  });

  void it('turns lone surrogates into U+FFFD through a round trip', () => {
    assert.deepEqual(decode(encodeVolumeData({ a: 'x\ud800y', ['\udc00']: 'z' })), { a: 'x\ufffdy', '\ufffd': 'z' });
  });

  void it('returns a frozen plain record', () => {
    const data = decode('{"driverName":"d"}');
    assert.ok(Object.isFrozen(data));
    assert.equal(Object.getPrototypeOf(data), Object.prototype);
    assert.deepStrictEqual(data, { driverName: 'd' });
  });

  void it('accepts leading whitespace and ignores whatever follows the first value', () => {
    assert.deepEqual(decode(' \t\r\n{"a":"b"}'), { a: 'b' });
    assert.deepEqual(decode('{"a":"b"}\n'), { a: 'b' });
    assert.deepEqual(decode('{"a":"b"} garbage {{{ "'), { a: 'b' });
    assert.deepEqual(decode('{"a":"b"}{"c":"d"}'), { a: 'b' });
    assert.deepEqual(decode(bytes('{"a":"b"}', [0xff, 0x00])), { a: 'b' });
    assert.deepEqual(decode('null trailing'), {});
    assert.deepEqual(decode('nullx'), {});
  });

  void it('null is an empty record, not an error', () => {
    assert.deepEqual(decode('null'), {});
    assert.deepEqual(decode('  null  '), {});
  });

  void it('empty or whitespace-only input is EOF', () => {
    for (const input of ['', ' ', '\n\t\r ']) {
      const err = decodeError(input);
      assert.equal(err.kind, 'empty');
      assert.match(err.message, /\bEOF\b/);
      assert.doesNotMatch(err.message, /unexpected EOF/);
    }
  });

  void it('a truncated value is "unexpected EOF"', () => {
    for (const input of ['{', '{"a"', '{"a":', '{"a":"b', '{"a":"b"', '{"a":"b",', '{"a":"b\\', '{"a":"\\u00', '{"a":[1,', '{"a":{"b":1}',
      '{"a":1', '{"a":tr', 'n', 'nul', '[1,2', '"abc', '-', '1.', '1e', '1e+', 'tru', '{"a":"b"   ']) {
      const err = decodeError(input);
      assert.equal(err.kind, 'syntax', input);
      assert.match(err.message, /unexpected EOF/, input);
    }
  });

  void it('invalid JSON is a syntax error with its position', () => {
    const cases: [string | Uint8Array, RegExp][] = [
      ['x', /invalid character 'x' looking for beginning of value at byte offset 0/],
      ['  }', /invalid character '}' looking for beginning of value at byte offset 2/],
      ['{"a":"b",}', /invalid character '}' looking for beginning of object key string at byte offset 9/],
      ["{'a':'b'}", /invalid character '\\'' looking for beginning of object key string at byte offset 1/],
      ['{"a" "b"}', /invalid character '"' after object key at byte offset 5/],
      ['{"a":"b" "c":"d"}', /after object key:value pair at byte offset 9/],
      ['{"a":}', /invalid character '}' looking for beginning of value at byte offset 5/],
      ['{"a":01}', /invalid character '1' after object key:value pair at byte offset 6/],
      ['{"a":1.x}', /after decimal point in numeric literal/],
      ['{"a":-x}', /in numeric literal/],
      ['{"a":1ex}', /in exponent of numeric literal/],
      ['{"a":tru}', /in literal true \(expecting 'e'\)/],
      ['{"a":nulL}', /in literal null \(expecting 'l'\)/],
      ['{"a":"\\x"}', /in string escape code/],
      ['{"a":"\\u12g4"}', /in \\u hexadecimal character escape/],
      ['{"a":"b\nc"}', /invalid character '\\n' in string literal at byte offset 7/],
      [bytes('{"a":"', [0x01], '"}'), /in string literal/],
      ['{"a":[1,]}', /looking for beginning of value/],
      ['{"a":[1 2]}', /after array element/],
      ['{"a":{"b":1,}}', /looking for beginning of object key string/],
      // A UTF-8 byte order mark: Go quotes the byte as the character of that code point (scanner.go
      // quoteChar converts the byte to a rune before strconv.Quote), the familiar 'ï'.
      [bytes([0xef, 0xbb, 0xbf], '{}'), /invalid character 'ï' looking for beginning of value at byte offset 0/],
      // Code points strconv.Quote does not print (C1 controls, no-break space, soft hyphen): \u escapes.
      [bytes([0x80], '{}'), /invalid character '\\u0080' looking for beginning of value/],
      [bytes([0x9f], '{}'), /invalid character '\\u009f' looking for beginning of value/],
      [bytes([0xa0], '{}'), /invalid character '\\u00a0' looking for beginning of value/],
      [bytes([0xad], '{}'), /invalid character '\\u00ad' looking for beginning of value/],
      [bytes([0xe9], '{}'), /invalid character 'é' looking for beginning of value/],
      // The printable edges: U+00A1 and U+00FF, the last byte, as they are.
      [bytes([0xa1], '{}'), /invalid character '¡' looking for beginning of value/],
      [bytes([0xff], '{}'), /invalid character 'ÿ' looking for beginning of value/],
      [bytes([0x7f], '{}'), /invalid character '\\x7f' looking for beginning of value/],
      [bytes([0x1f], '{}'), /invalid character '\\x1f' looking for beginning of value/],
      ['[1,]', /looking for beginning of value/],
      ['-x', /in numeric literal/],
      ['nulx', /in literal null \(expecting 'l'\)/],
    ];
    for (const [input, pattern] of cases) {
      const err = decodeError(input);
      assert.equal(err.kind, 'syntax', text(typeof input === 'string' ? utf8(input) : input));
      assert.match(err.message, pattern);
      assert.equal(err.field, undefined);
    }
  });

  void it('a syntax error anywhere in the first value wins over an earlier type error', () => {
    assert.equal(decodeError('{"a":1,"b":}').kind, 'syntax');
    assert.equal(decodeError('{"a":1,"b":"c"').kind, 'syntax');
    assert.equal(decodeError('[1,2').kind, 'syntax');
  });

  void it('a top-level array, string, number or bool is a type error', () => {
    for (const [input, kind] of [['[]', 'array'], ['[1,{"a":[]}]', 'array'], ['"s"', 'string'], ['123', 'number'], ['-1.5e3', 'number'],
      ['true', 'bool'], ['false', 'bool'], ['1x', 'number'], ['"s"{}', 'string']] as const) {
      const err = decodeError(input);
      assert.equal(err.kind, 'type', input);
      assert.equal(err.field, undefined);
      assert.match(err.message, new RegExp(`expected a JSON object, got ${kind}`));
    }
  });

  void it('a member value that is not a string is a type error naming the field', () => {
    for (const [value, kind] of [['12', 'number'], ['-0.5E+2', 'number'], ['true', 'bool'], ['false', 'bool'], ['{"x":"y"}', 'object'], ['["x"]', 'array'], ['{}', 'object'], ['[]', 'array']] as const) {
      const err = decodeError(`{"volumeHandle":"h","driverName":${value}}`);
      assert.equal(err.kind, 'type', value);
      assert.equal(err.field, 'driverName');
      assert.match(err.message, new RegExp(`field "driverName": expected a string, got ${kind}`));
      assert.match(err.message, /\/p\/vol_data\.json/);
    }
  });

  void it('reports the first type error', () => {
    const err = decodeError('{"a":1,"b":true,"c":"ok"}');
    assert.equal(err.field, 'a');
  });

  void it('a member value null becomes ""', () => {
    assert.deepEqual(decode('{"a":null,"b":"x"}'), { a: '', b: 'x' });
    assert.deepEqual(decode('{"a":"x","a":null}'), { a: '' });
  });

  void it('duplicate keys: the last one wins', () => {
    assert.deepEqual(decode('{"driverName":"a","volumeHandle":"h","driverName":"b"}'), { driverName: 'b', volumeHandle: 'h' });
  });

  void it('decodes escapes, including surrogate pairs, and replaces lone surrogates', () => {
    assert.deepEqual(decode('{"a":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u0041\\u2028"}'), { a: '"\\/\b\f\n\r\t\u00e9A\u2028' });
    assert.deepEqual(decode('{"a":"\\ud83d\\ude00","b":"\\uD83D\\uDE00"}'), { a: '\u{1F600}', b: '\u{1F600}' });
    assert.deepEqual(decode('{"a":"\\ud800"}'), { a: '\ufffd' });
    assert.deepEqual(decode('{"a":"\\udc00x"}'), { a: '\ufffdx' });
    assert.deepEqual(decode('{"a":"\\ud800\\u0041"}'), { a: '\ufffdA' });
    assert.deepEqual(decode('{"a":"\\ud800\\ud800\\udc00"}'), { a: '\ufffd\u{10000}' });
    assert.deepEqual(decode('{"a":"\\udc00\\ud800"}'), { a: '\ufffd\ufffd' });
    assert.deepEqual(decode('{"\\ud800k":"v"}'), { '\ufffdk': 'v' });
    assert.deepEqual(decode('{"a":"\\ud800\\""}'), { a: '\ufffd"' });
  });

  void it('replaces invalid UTF-8 bytes one by one, like Go', () => {
    const input = bytes(
      '{"a":"x',
      [0xff], // never valid
      [0xe2, 0x82], 'A', // truncated 3-byte sequence: two replacements
      [0xed, 0xa0, 0x80], // UTF-8 encoded surrogate: three
      [0xc0, 0xaf], // overlong: two
      [0xf4, 0x90, 0x80, 0x80], // above U+10FFFF: four
      [0xf0, 0x9f, 0x98, 0x80], // valid U+1F600
      [0xc3, 0xa9], // valid é
      '","k', [0x80], '":"v"}',
    );
    assert.deepEqual(decode(input), {
      a: `x\ufffd${'\ufffd'.repeat(2)}A${'\ufffd'.repeat(3)}${'\ufffd'.repeat(2)}${'\ufffd'.repeat(4)}\u{1F600}é`,
      'k\ufffd': 'v',
    });
  });

  void it('handles a __proto__ key safely', () => {
    const data = decode('{"__proto__":"x","constructor":"c","driverName":"d"}');
    assert.equal(Object.getPrototypeOf(data), Object.prototype);
    assert.ok(Object.hasOwn(data, '__proto__'));
    assert.equal(Object.getOwnPropertyDescriptor(data, '__proto__')?.value, 'x');
    assert.equal(data.constructor, 'c');
    assert.equal(data.driverName, 'd');
    assert.deepEqual(Object.keys(data).sort(), ['__proto__', 'constructor', 'driverName']);
    assert.equal(({} as Record<string, unknown>).x, undefined);
    // Round trip: the own __proto__ key is written back.
    assert.equal(text(encodeVolumeData(data)), '{"__proto__":"x","constructor":"c","driverName":"d"}\n');
    const viaNull = decode('{"__proto__":null}');
    assert.equal(Object.getOwnPropertyDescriptor(viaNull, '__proto__')?.value, '');
  });

  void it('enforces Go\'s nesting limit of 10000 (syntax, not type)', () => {
    // top-level object is depth 1; a member value nested k arrays deep reaches depth k + 1
    const nested = (k: number): string => `{"a":${'['.repeat(k)}${']'.repeat(k)}}`;
    assert.equal(decodeError(nested(9999)).kind, 'type');
    const err = decodeError(nested(10000));
    assert.equal(err.kind, 'syntax');
    assert.match(err.message, /exceeded max depth/);
    assert.equal(decodeError(`${'['.repeat(10000)}${']'.repeat(10000)}`).kind, 'type');
    assert.equal(decodeError(`${'['.repeat(10001)}${']'.repeat(10001)}`).kind, 'syntax');
  });
});

// The same outcomes through both entry points: decodeVolumeData (which may answer plain ASCII input
// itself) and decodeVolumeDataGo (the Go-compatible reader alone), so that each input also exercises
// the reader on what the fast path would otherwise answer. Behaviour followed: kubelet csi_util.go
// loadVolumeData, i.e. Go's json.NewDecoder(file).Decode(&map[string]string).
type DecodeOutcome = { data: VolumeData } | { error: string; kind: string; field?: string };

function outcomeOf(decoder: (b: Uint8Array, path: string) => VolumeData, input: Uint8Array): DecodeOutcome {
  try {
    return { data: { ...decoder(input, '/p/vol_data.json') } };
  } catch (err) {
    assert.ok(err instanceof VolumeDataError, `expected a VolumeDataError, got ${String(err)}`);
    return err.field === undefined ? { error: err.message, kind: err.kind } : { error: err.message, kind: err.kind, field: err.field };
  }
}

function assertOutcome(input: Uint8Array | string, expected: DecodeOutcome): void {
  const data = typeof input === 'string' ? utf8(input) : input;
  const label = JSON.stringify(text(data));
  assert.deepStrictEqual(outcomeOf(decodeVolumeData, data), expected, `decodeVolumeData ${label}`);
  assert.deepStrictEqual(outcomeOf(decodeVolumeDataGo, data), expected, `decodeVolumeDataGo ${label}`);
}

const failed = (detail: string): string => `failed to parse volume data file /p/vol_data.json: ${detail}`;

void describe('decodeVolumeData and decodeVolumeDataGo: inputs to decoded map or error text', () => {
  void it('decodes an empty object and a null member without the fast path too', () => {
    assertOutcome('{}', { data: {} });
    assertOutcome(' { \n} ', { data: {} });
    assertOutcome('{"a":null}', { data: { a: '' } });
    assertOutcome('{"a":"x","b":null,"c":"y"}', { data: { a: 'x', b: '', c: 'y' } });
  });

  void it('reads numbers with every digit and a signed exponent as numbers (a type error naming the field)', () => {
    for (const value of ['9', '19', '0.9', '-9', '1e-5', '2E-09', '1e+9', '90.5e-1']) {
      assertOutcome(`{"k":${value}}`, { error: failed('field "k": expected a string, got number'), kind: 'type', field: 'k' });
    }
    assertOutcome('9', { error: failed('expected a JSON object, got number'), kind: 'type' });
  });

  void it('reads \\u escapes with lower- and upper-case hex digits a-f and A-F', () => {
    assertOutcome('{"a":"\\u00a9\\u00A9\\u00aa\\u00AA\\u00ff\\u00FF\\u00Ff\\u0039"}', { data: { a: '\u00a9\u00a9\u00aa\u00aa\u00ff\u00ff\u00ff9' } });
  });

  void it('refuses the non-hex characters between 9 and A in a \\u escape', () => {
    for (const [ch, quoted] of [[':', "':'"], ['@', "'@'"], ['G', "'G'"], ['g', "'g'"], ['/', "'/'"]] as const) {
      assertOutcome(`{"a":"\\u00${ch}0"}`, { error: failed(`invalid character ${quoted} in \\u hexadecimal character escape at byte offset 10`), kind: 'syntax' });
    }
  });

  void it('pairs surrogate escapes only high-then-low; every other surrogate escape is U+FFFD', () => {
    const cases: [string, string][] = [
      ['\\udfff', '\ufffd'], // the last low surrogate, alone
      ['\\ue000', '\ue000'], // just above the surrogates: an ordinary character
      ['\\ud7ff', '\ud7ff'], // just below
      ['\\udc00\\udc00', '\ufffd\ufffd'], // low then low: no pair
      ['\\udbff\\udfff', '\u{10FFFF}'], // the last high with the last low
      ['\\ud800\\udfff', '\u{103FF}'],
      ['\\ud800\\ue000', '\ufffd\ue000'], // high then a non-surrogate above the range
      ['\\ud800\\udbff', '\ufffd\ufffd'], // high then high
      ['\\u0041\\udc00', 'A\ufffd'], // a non-surrogate never pairs
      ['\\ud800\\\\dc00', '\ufffd\\dc00'], // an escaped backslash, not a \u escape, follows
      ['\\ud800audc00', '\ufffdaudc00'], // plain text that is not an escape follows
      ['\\ud800\\nudc00', '\ufffd\nudc00'],
    ];
    for (const [escaped, value] of cases) {
      assertOutcome(`{"a":"${escaped}"}`, { data: { a: value } });
    }
  });

  void it('decodes UTF-8 at the edges of each sequence length and replaces invalid bytes one by one', () => {
    const cases: [number[], string][] = [
      [[0xc2, 0xa9], '\u00a9'], // the first valid 2-byte lead
      [[0xc2, 0x80], '\u0080'], // continuation byte 0x80 (payload 0)
      [[0xc1, 0xbf], '\ufffd\ufffd'], // overlong 2-byte
      [[0xc3, 0x41], '\ufffdA'], // a lead without its continuation
      [[0xdf, 0xbf], '\u07ff'],
      [[0xe0, 0xa0, 0x80], '\u0800'], // the first 3-byte lead with its smallest second byte
      [[0xe0, 0x80, 0x80], '\ufffd\ufffd\ufffd'], // overlong 3-byte
      [[0xe1, 0x80, 0x80], '\u1000'], // other 3-byte leads take 0x80 second and third bytes
      [[0xe1, 0x80, 0x41], '\ufffd\ufffdA'],
      [[0xef, 0xbf, 0xbf], '\uffff'],
      [[0xf0, 0x90, 0x80, 0x80], '\u{10000}'],
      [[0xf0, 0x80, 0x80, 0x80], '\ufffd'.repeat(4)], // overlong 4-byte
      [[0xf1, 0x80, 0x80, 0x80], '\u{40000}'], // other 4-byte leads take 0x80 continuation bytes
      [[0xf4, 0x8f, 0xbf, 0xbf], '\u{10FFFF}'],
      [[0xf5, 0x80, 0x80, 0x80], '\ufffd'.repeat(4)], // no 4-byte lead above 0xf4
      [[0xf8, 0x80], '\ufffd\ufffd'],
    ];
    for (const [seq, value] of cases) {
      assertOutcome(bytes('{"a":"', seq, '"}'), { data: { a: value } });
    }
  });

  void it('quotes the offending byte in a syntax error the way Go does', () => {
    const cases: [string | Uint8Array, string][] = [
      ['{"a":"b\rc"}', "invalid character '\\r' in string literal at byte offset 7"],
      ['{"a":"b\tc"}', "invalid character '\\t' in string literal at byte offset 7"],
      ['{"a":"b\nc"}', "invalid character '\\n' in string literal at byte offset 7"],
      [bytes('{"a":"', [0x01], '"}'), "invalid character '\\x01' in string literal at byte offset 6"],
      [bytes('{"a":"', [0x1f], '"}'), "invalid character '\\x1f' in string literal at byte offset 6"],
      ['{"a":\\}', "invalid character '\\\\' looking for beginning of value at byte offset 5"],
      ['{"a":tr ue}', "invalid character ' ' in literal true (expecting 'u') at byte offset 7"],
      ['{"a":~}', "invalid character '~' looking for beginning of value at byte offset 5"],
      [bytes('{"a":', [0x7f], '}'), "invalid character '\\x7f' looking for beginning of value at byte offset 5"],
      ['{"a":"b" \'}', "invalid character '\\'' after object key:value pair at byte offset 9"],
      ['{"a" x}', "invalid character 'x' after object key at byte offset 5"],
      ['"', 'unexpected EOF'],
    ];
    for (const [input, detail] of cases) {
      assertOutcome(input, { error: failed(detail), kind: 'syntax' });
    }
  });

  void it('names the container in an error after a nested member or element', () => {
    assertOutcome('{"a":{"b":1 "c":2}}', { error: failed("invalid character '\"' after object key:value pair at byte offset 12"), kind: 'syntax' });
    assertOutcome('{"a":[1 2]}', { error: failed("invalid character '2' after array element at byte offset 8"), kind: 'syntax' });
    assertOutcome('[{"b":"c",}]', { error: failed("invalid character '}' looking for beginning of object key string at byte offset 10"), kind: 'syntax' });
    assertOutcome('[1,[2]x]', { error: failed("invalid character 'x' after array element at byte offset 6"), kind: 'syntax' });
  });
});

// ---------------------------------------------------------------------------------------------
// loadVolumeData / saveVolumeData
// ---------------------------------------------------------------------------------------------

void describe('loadVolumeData', () => {
  const file = '/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc/vol_data.json';

  void it('reads and decodes through the port', async () => {
    const fs = new MemFs();
    fs.put(file, '{"driverName":"d","volumeHandle":"h"}\n');
    assert.deepEqual(await loadVolumeData(fs, file), { driverName: 'd', volumeHandle: 'h' });
  });

  void it('a missing file is not-found', async () => {
    const fs = new MemFs();
    const err = await loadVolumeData(fs, file).catch((e: unknown) => e);
    assert.ok(err instanceof VolumeDataError);
    assert.equal(err.kind, 'not-found');
    assert.equal(err.path, file);
    assert.ok(isVolumeDataNotFound(err));
    assert.ok(isVolumeDataNotFound(new FsError('ENOENT', file, 'open')));
    assert.ok(!isVolumeDataNotFound(new VolumeDataError('io', file, 'x')));
    assert.ok(!isVolumeDataNotFound(new Error('x')));
  });

  void it('refuses a 1 MiB file', async () => {
    const fs = new MemFs();
    fs.put(file, new Uint8Array(1024 * 1024).fill(0x20));
    const err = await loadVolumeData(fs, file).catch((e: unknown) => e);
    assert.ok(err instanceof VolumeDataError);
    assert.equal(err.kind, 'too-large');
    assert.match(err.message, new RegExp(String(MAX_VOL_DATA_BYTES)));
    assert.equal(MAX_VOL_DATA_BYTES, 65536);
  });

  void it('other read failures are io with the errno', async () => {
    const fs = new MemFs();
    fs.put(file, '{}');
    fs.failures.push({ op: 'readFile', code: 'EACCES' });
    const err = await loadVolumeData(fs, file).catch((e: unknown) => e);
    assert.ok(err instanceof VolumeDataError);
    assert.equal(err.kind, 'io');
    assert.match(err.message, /EACCES/);
    fs.mkdirp('/dir/vol_data.json');
    const isDir = await loadVolumeData(fs, '/dir/vol_data.json').catch((e: unknown) => e);
    assert.ok(isDir instanceof VolumeDataError && isDir.kind === 'io' && /EISDIR/.test(isDir.message));
  });

  void it('decode errors carry the path', async () => {
    const fs = new MemFs();
    fs.put(file, '');
    const err = await loadVolumeData(fs, file).catch((e: unknown) => e);
    assert.ok(err instanceof VolumeDataError);
    assert.equal(err.kind, 'empty');
    assert.equal(err.path, file);
    assert.match(err.message, new RegExp(file.replaceAll('.', '\\.')));
  });

  void describe('with rootDir', () => {
    const root = '/var/lib/kubelet';

    void it('reads a file inside the root, through symlinks that stay inside', async () => {
      const fs = new MemFs();
      fs.put(`${root}/real/vol_data.json`, '{"a":"b"}');
      fs.mkdirp(`${root}/pods`);
      fs.symlinks.set(`${root}/pods/link`, '../real');
      assert.deepEqual(await loadVolumeData(fs, `${root}/pods/link/vol_data.json`, { rootDir: root }), { a: 'b' });
      assert.ok(fs.calls.includes(`readFile ${root}/real/vol_data.json`), 'reads the checked path');
    });

    void it('accepts a root that is itself a symlink', async () => {
      const fs = new MemFs();
      fs.put('/data/kubelet/x/vol_data.json', '{"a":"b"}');
      fs.mkdirp('/var/lib');
      fs.symlinks.set(root, '/data/kubelet');
      assert.deepEqual(await loadVolumeData(fs, `${root}/x/vol_data.json`, { rootDir: root }), { a: 'b' });
    });

    void it('refuses a file that resolves outside the root', async () => {
      const fs = new MemFs();
      fs.put('/etc/secret.json', '{"a":"b"}');
      fs.mkdirp(`${root}/pods/u`);
      fs.symlinks.set(`${root}/pods/u/vol_data.json`, '/etc/secret.json');
      const path = `${root}/pods/u/vol_data.json`;
      const err = await loadVolumeData(fs, path, { rootDir: root }).catch((e: unknown) => e);
      assert.ok(err instanceof VolumeDataError);
      assert.equal(err.kind, 'outside-root');
      assert.equal(err.message, `refusing to read ${path}: it resolves to /etc/secret.json, outside the root dir ${root}`);
      assert.ok(!fs.calls.some((c) => c.startsWith('readFile')), 'nothing read');
    });

    void it('a sibling dir sharing the root as a string prefix is outside', async () => {
      const fs = new MemFs();
      fs.put(`${root}-evil/vol_data.json`, '{}');
      fs.mkdirp(root);
      const err = await loadVolumeData(fs, `${root}-evil/vol_data.json`, { rootDir: root }).catch((e: unknown) => e);
      assert.ok(err instanceof VolumeDataError && err.kind === 'outside-root');
    });

    void it('the root itself counts as inside; "/" as root accepts everything', async () => {
      const fs = new MemFs();
      fs.put('/srv/vol_data.json', '{"a":"b"}');
      assert.deepEqual(await loadVolumeData(fs, '/srv/vol_data.json', { rootDir: '/srv/vol_data.json' }), { a: 'b' });
      assert.deepEqual(await loadVolumeData(fs, '/srv/vol_data.json', { rootDir: '/' }), { a: 'b' });
    });

    void it('a symlink loop is io with a clear message', async () => {
      const fs = new MemFs();
      fs.mkdirp(`${root}/pods`);
      fs.symlinks.set(`${root}/pods/a`, `${root}/pods/b`);
      fs.symlinks.set(`${root}/pods/b`, `${root}/pods/a`);
      const err = await loadVolumeData(fs, `${root}/pods/a/vol_data.json`, { rootDir: root }).catch((e: unknown) => e);
      assert.ok(err instanceof VolumeDataError);
      assert.equal(err.kind, 'io');
      assert.match(err.message, /symbolic links \(ELOOP\)/);
      assert.ok(err.cause instanceof FsError);
    });

    void it('a missing file is not-found', async () => {
      const fs = new MemFs();
      fs.mkdirp(root);
      const err = await loadVolumeData(fs, `${root}/nope/vol_data.json`, { rootDir: root }).catch((e: unknown) => e);
      assert.ok(isVolumeDataNotFound(err));
    });
  });
});

void describe('saveVolumeData', () => {
  const dir = '/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc';
  const target = `${dir}/${VOL_DATA_FILE_NAME}`;
  const data: VolumeData = { volumeHandle: 'h', driverName: 'd', specVolID: 'pv-1', volumeLifecycleMode: 'Persistent' };
  const tempPattern = new RegExp(`^${dir.replaceAll('.', '\\.')}/vol_data\\.json\\.tmp$`);

  void it('writes a temp file, renames it onto vol_data.json, then fsyncs the dir', async () => {
    const fs = new MemFs();
    fs.mkdirp(dir);
    await saveVolumeData(fs, dir, data);
    assert.deepEqual(fs.files.get(target), encodeVolumeData(data));
    assert.equal(text(fs.files.get(target) ?? new Uint8Array()), '{"driverName":"d","specVolID":"pv-1","volumeHandle":"h","volumeLifecycleMode":"Persistent"}\n');
    assert.equal(fs.calls.length, 3);
    const [write, rename, sync] = fs.calls;
    const temp = write?.slice('writeFile '.length) ?? '';
    assert.match(temp, tempPattern);
    assert.equal(rename, `rename ${temp} ${target}`);
    assert.equal(sync, `fsyncDir ${dir}`);
    assert.deepEqual(fs.writeOptions, [{ mode: 0o644, fsync: true }]);
    assert.deepEqual([...fs.files.keys()], [target], 'no temp file left');
  });

  void it('replaces an existing file, with the same deterministic temp name each time', async () => {
    const fs = new MemFs();
    fs.put(target, '{"old":"x"}\n');
    await saveVolumeData(fs, dir, data);
    await saveVolumeData(fs, dir, { driverName: 'd2' });
    assert.equal(text(fs.files.get(target) ?? new Uint8Array()), '{"driverName":"d2"}\n');
    const temps = fs.calls.filter((c) => c.startsWith('writeFile '));
    assert.deepEqual(temps, [`writeFile ${target}.tmp`, `writeFile ${target}.tmp`]);
  });

  void it('removes the temp file and rethrows when the rename fails', async () => {
    const fs = new MemFs();
    fs.put(target, '{"old":"x"}\n');
    fs.failures.push({ op: 'rename', code: 'EIO' });
    const err = await saveVolumeData(fs, dir, data).catch((e: unknown) => e);
    assert.ok(err instanceof FsError && err.code === 'EIO');
    const temp = fs.calls[0]?.slice('writeFile '.length) ?? '';
    assert.match(temp, tempPattern);
    assert.deepEqual(fs.calls.slice(1), [`rename ${temp} ${target}`, `unlink ${temp}`]);
    assert.ok(!fs.files.has(temp));
    assert.equal(text(fs.files.get(target) ?? new Uint8Array()), '{"old":"x"}\n', 'old file untouched');
  });

  void it('rethrows a write failure and leaves no file behind', async () => {
    const fs = new MemFs();
    fs.mkdirp(dir);
    fs.failures.push({ op: 'writeFile', code: 'ENOSPC' });
    const err = await saveVolumeData(fs, dir, data).catch((e: unknown) => e);
    assert.ok(err instanceof FsError && err.code === 'ENOSPC');
    assert.equal(fs.files.size, 0);
    assert.ok(!fs.calls.some((c) => c.startsWith('rename')));
  });

  void it('rethrows when the dir does not exist', async () => {
    const fs = new MemFs();
    const err = await saveVolumeData(fs, '/missing', data).catch((e: unknown) => e);
    assert.ok(err instanceof FsError && err.code === 'ENOENT');
  });

  void it('rethrows an fsyncDir failure; the new file is already in place', async () => {
    const fs = new MemFs();
    fs.mkdirp(dir);
    fs.failures.push({ op: 'fsyncDir', code: 'EIO' });
    const err = await saveVolumeData(fs, dir, data).catch((e: unknown) => e);
    assert.ok(err instanceof FsError && err.code === 'EIO');
    assert.deepEqual(fs.files.get(target), encodeVolumeData(data));
    assert.ok(!fs.calls.some((c) => c.startsWith('unlink')));
  });

  void it('round-trips with loadVolumeData', async () => {
    const fs = new MemFs();
    fs.mkdirp(dir);
    const odd: VolumeData = { '&key1': 'v<1>', _key1: 'line\nbreak', '\u{1F600}': '\u2028' };
    await saveVolumeData(fs, dir, odd);
    assert.deepEqual(await loadVolumeData(fs, target, { rootDir: '/var/lib/kubelet' }), odd);
  });
});

// ---------------------------------------------------------------------------------------------
// loadVolumeData failures, exactly; findInterruptedVolumeDataWrite (over the memory adapter,
// which honours noFollow)
// ---------------------------------------------------------------------------------------------

/** `fs` with its readFile calls recorded as "readFile <path> noFollow=<bool>". */
function recordingReads(fs: FileSystem): { fs: FileSystem; reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    fs: overrideFileSystem(fs, {
      readFile: (p, maxBytes, options) => {
        reads.push(`readFile ${p} noFollow=${String(options?.noFollow === true)}`);
        return fs.readFile(p, maxBytes, options);
      },
    }),
  };
}

async function loadError(fs: FileSystem, path: string, options?: Parameters<typeof loadVolumeData>[2]): Promise<VolumeDataError> {
  const err = await loadVolumeData(fs, path, options).catch((e: unknown) => e);
  assert.ok(err instanceof VolumeDataError, `expected a VolumeDataError, got ${String(err)}`);
  return err;
}

void describe('loadVolumeData: the exact error of each failure, with the port error as cause', () => {
  const root = '/var/lib/kubelet';
  const path = `${root}/pods/u/volumes/kubernetes.io~csi/pv/vol_data.json`;

  void it('a file realpath failing with EACCES is io "failed to resolve volume data file <path>: EACCES"', async () => {
    const base = new AdapterMemFs();
    base.writeRaw(path, '{}');
    const cause = new FsError('EACCES', path, 'realpath');
    const fs = overrideFileSystem(base, { realpath: (p) => (p === path ? Promise.reject(cause) : base.realpath(p)) });
    const err = await loadError(fs, path, { rootDir: root });
    assert.equal(err.kind, 'io');
    assert.equal(err.path, path);
    assert.equal(err.message, `failed to resolve volume data file ${path}: EACCES`);
    assert.equal(err.cause, cause);
    assert.equal(err.name, 'VolumeDataError');
  });

  void it('a file realpath failing with no errno gives that error\'s message', async () => {
    const base = new AdapterMemFs();
    base.writeRaw(path, '{}');
    const fs = overrideFileSystem(base, { realpath: (p) => (p === path ? Promise.reject(new Error('stale handle')) : base.realpath(p)) });
    const err = await loadError(fs, path, { rootDir: root });
    assert.equal(err.message, `failed to resolve volume data file ${path}: stale handle`);
  });

  void it('a root dir whose realpath fails is io "failed to resolve root dir <root>: EACCES" about the root', async () => {
    const base = new AdapterMemFs();
    base.writeRaw(path, '{}');
    const cause = new FsError('EACCES', root, 'realpath');
    const fs = overrideFileSystem(base, { realpath: (p) => (p === root ? Promise.reject(cause) : base.realpath(p)) });
    const err = await loadError(fs, path, { rootDir: root });
    assert.equal(err.kind, 'io');
    assert.equal(err.path, root);
    assert.equal(err.message, `failed to resolve root dir ${root}: EACCES`);
    assert.equal(err.cause, cause);
  });

  void it('a missing file under a root dir is not-found "failed to open volume data file <path>: ENOENT …" with the realpath error as cause', async () => {
    const base = new AdapterMemFs();
    base.writeRaw(`${root}/other`, '');
    const err = await loadError(base, path, { rootDir: root });
    assert.equal(err.kind, 'not-found');
    assert.equal(err.message, `failed to open volume data file ${path}: ENOENT (no such file or directory)`);
    assert.ok(err.cause instanceof FsError && err.cause.code === 'ENOENT' && err.cause.syscall === 'realpath');
  });

  void it('without a root dir, parentsVerified changes nothing: one read that follows a symlinked vol_data.json', async () => {
    const base = new AdapterMemFs();
    base.writeRaw(`${root}/real/vol_data.json`, '{"a":"b"}');
    base.writeRaw(`${root}/link/keep`, '');
    await base.symlink(`${root}/real/vol_data.json`, `${root}/link/vol_data.json`);
    const { fs, reads } = recordingReads(base);
    assert.deepEqual(await loadVolumeData(fs, `${root}/link/vol_data.json`, { parentsVerified: true }), { a: 'b' });
    assert.deepEqual(reads, [`readFile ${root}/link/vol_data.json noFollow=false`]);
  });

  const readFailures: { name: string; err: Error; kind: string; message: string }[] = [
    {
      name: 'EFBIG is too-large "refusing to read volume data file <path>: it is larger than the limit of 65536 bytes"',
      err: new FsError('EFBIG', path, 'read'),
      kind: 'too-large',
      message: `refusing to read volume data file ${path}: it is larger than the limit of 65536 bytes`,
    },
    {
      name: 'ENOENT is not-found "failed to open volume data file <path>: ENOENT (no such file or directory)"',
      err: new FsError('ENOENT', path, 'open'),
      kind: 'not-found',
      message: `failed to open volume data file ${path}: ENOENT (no such file or directory)`,
    },
    {
      name: 'EACCES is io naming the errno alone',
      err: new FsError('EACCES', path, 'open', 'open: permission denied, whatever the port says'),
      kind: 'io',
      message: `failed to read volume data file ${path}: EACCES`,
    },
    {
      name: 'an error with no errno is io with its message',
      err: new Error('the disk went away'),
      kind: 'io',
      message: `failed to read volume data file ${path}: the disk went away`,
    },
    {
      name: 'EFTYPE (a FIFO) is io with the port\'s words',
      err: new FsError('EFTYPE', path, 'open', `${path} is a FIFO, not a regular file; refusing to read it`),
      kind: 'io',
      message: `failed to read volume data file ${path}: ${path} is a FIFO, not a regular file; refusing to read it`,
    },
    {
      name: 'ETIMEDOUT (a hung read) is io with the port\'s words',
      err: new FsError('ETIMEDOUT', path, 'read', `${path}: read did not finish within 10000 ms; abandoned`),
      kind: 'io',
      message: `failed to read volume data file ${path}: ${path}: read did not finish within 10000 ms; abandoned`,
    },
  ];
  for (const f of readFailures) {
    void it(`a read failing with ${f.name}, the port error as cause`, async () => {
      const base = new AdapterMemFs();
      base.writeRaw(path, '{}');
      const fs = overrideFileSystem(base, { readFile: () => Promise.reject(f.err) });
      const err = await loadError(fs, path);
      assert.equal(err.kind, f.kind);
      assert.equal(err.path, path);
      assert.equal(err.message, f.message);
      assert.equal(err.cause, f.err);
    });
  }
});

void describe('findInterruptedVolumeDataWrite', () => {
  const dir = '/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc';
  const tempPath = `${dir}/${VOL_DATA_TEMP_FILE_NAME}`;
  const complete = '{"driverName":"d","volumeHandle":"h"}\n';

  void it('no vol_data.json and a complete temp file: the temp path and its data', async () => {
    const fs = new AdapterMemFs();
    fs.writeRaw(tempPath, complete);
    assert.deepEqual(await findInterruptedVolumeDataWrite(fs, dir), { tempPath, data: { driverName: 'd', volumeHandle: 'h' } });
  });

  void it('a temp file of the encoding\'s length that differs in a byte (a space for the newline) is partial: data undefined', async () => {
    const fs = new AdapterMemFs();
    fs.writeRaw(tempPath, complete.replace('\n', ' '));
    assert.deepEqual(await findInterruptedVolumeDataWrite(fs, dir), { tempPath, data: undefined });
  });

  void it('a temp file holding the encoding and more bytes after it is not a complete write: data undefined', async () => {
    const fs = new AdapterMemFs();
    fs.writeRaw(tempPath, `${complete}{}`);
    assert.deepEqual(await findInterruptedVolumeDataWrite(fs, dir), { tempPath, data: undefined });
  });

  void it('a vol_data.json whose lstat fails with EACCES: undefined, the temp file is not looked at', async () => {
    const base = new AdapterMemFs();
    base.writeRaw(tempPath, complete);
    const fs = overrideFileSystem(base, {
      lstat: (p) => (p === `${dir}/${VOL_DATA_FILE_NAME}` ? Promise.reject(new FsError('EACCES', p, 'lstat')) : base.lstat(p)),
    });
    assert.equal(await findInterruptedVolumeDataWrite(fs, dir), undefined);
  });

  void it('a temp file swapped for a symlink after its lstat is not followed: data undefined', async () => {
    const base = new AdapterMemFs();
    base.writeRaw(tempPath, complete);
    base.writeRaw('/elsewhere/vol_data.json', complete);
    const fs = overrideFileSystem(base, {
      lstat: async (p) => {
        const st = await base.lstat(p);
        if (p === tempPath) {
          await base.unlink(tempPath);
          await base.symlink('/elsewhere/vol_data.json', tempPath);
        }
        return st;
      },
    });
    assert.deepEqual(await findInterruptedVolumeDataWrite(fs, dir), { tempPath, data: undefined });
  });
});
