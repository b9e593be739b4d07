/**
 * `vol_data.json`: the small JSON object kubelet's CSI plugin keeps beside a pod volume's mount
 * dir, beside a global (staging) mount dir and in a raw block volume's data dir (reference §3).
 *
 * The writer produces exactly the bytes kubelet writes (a Go streaming JSON encoder over a
 * string-to-string map, Go >= 1.22); the reader accepts exactly what kubelet's reader accepts (a
 * Go streaming JSON decoder reading ONE value into a string-to-string map), including its odd
 * corners: trailing bytes after the first value are ignored and a bare `null` is an empty map.
 *
 * All file access goes through the FileSystem port.
 */
import { posix } from 'node:path';
import { errorCode, errorMessage, isNotExist, type FileSystem } from '../../host/fs.js';

export const VOL_DATA_FILE_NAME = 'vol_data.json';
/** Largest vol_data.json we read. kubelet's files are a few hundred bytes. */
export const MAX_VOL_DATA_BYTES = 64 * 1024;

/** kubelet's volDataKey names */
export const volDataKey = {
  specVolID: 'specVolID',
  volHandle: 'volumeHandle',
  driverName: 'driverName',
  nodeName: 'nodeName',
  attachmentID: 'attachmentID',
  volumeLifecycleMode: 'volumeLifecycleMode',
  seLinuxMountContext: 'seLinuxMountContext',
} as const;

/**
 * The decoded content of a vol_data.json. Decoded records are frozen plain objects whose keys are
 * own data properties (a `__proto__` key is an ordinary own key); test presence with Object.hasOwn.
 */
export type VolumeData = Readonly<Record<string, string>>;

export type VolumeDataErrorKind = 'not-found' | 'too-large' | 'empty' | 'syntax' | 'type' | 'io' | 'outside-root';

/** Why a vol_data.json could not be read (or written). */
export class VolumeDataError extends Error {
  override readonly name = 'VolumeDataError';
  /** The path the error concerns (as given by the caller). */
  readonly path: string;
  /** The JSON member the error concerns, for a 'type' error on a member value. */
  readonly field?: string;
  readonly kind: VolumeDataErrorKind;

  constructor(kind: VolumeDataErrorKind, path: string, message: string, options?: { field?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.path = path;
    if (options?.field !== undefined) this.field = options.field;
  }
}

/** Whether `err` says that the vol_data.json (or, for a raw port error, the path) does not exist. */
export function isVolumeDataNotFound(err: unknown): boolean {
  if (err instanceof VolumeDataError) return err.kind === 'not-found';
  return isNotExist(err);
}

// ---------------------------------------------------------------------------------------------
// Encoder
// ---------------------------------------------------------------------------------------------

const HEX = '0123456789abcdef';

/** Compares two strings by Unicode code point (= UTF-8 byte order); lone surrogates count as their code unit value. */
function compareCodePoints(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const ca = a.codePointAt(i) ?? 0;
    const cb = b.codePointAt(j) ?? 0;
    if (ca !== cb) return ca < cb ? -1 : 1;
    i += ca > 0xffff ? 2 : 1;
    j += cb > 0xffff ? 2 : 1;
  }
  const restA = a.length - i;
  const restB = b.length - j;
  return restA === restB ? 0 : restA < restB ? -1 : 1;
}

function pushAscii(out: number[], s: string): void {
  for (let k = 0; k < s.length; k++) out.push(s.charCodeAt(k));
}

function pushUnicodeEscape(out: number[], unit: number): void {
  pushAscii(out, '\\u');
  out.push(
    HEX.charCodeAt((unit >> 12) & 0xf),
    HEX.charCodeAt((unit >> 8) & 0xf),
    HEX.charCodeAt((unit >> 4) & 0xf),
    HEX.charCodeAt(unit & 0xf),
  );
}

function pushUtf8(out: number[], cp: number): void {
  if (cp < 0x80) {
    out.push(cp);
  } else if (cp < 0x800) {
    out.push(0xc0 | (cp >> 6), 0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f));
  } else {
    out.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3f), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f));
  }
}

/** Appends `s` as a JSON string the way Go's encoder does with HTML escaping on. */
function pushGoString(out: number[], s: string): void {
  out.push(0x22);
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c < 0x80) {
      switch (c) {
        case 0x22: pushAscii(out, '\\"'); break;
        case 0x5c: pushAscii(out, '\\\\'); break;
        case 0x08: pushAscii(out, '\\b'); break;
        case 0x0c: pushAscii(out, '\\f'); break;
        case 0x0a: pushAscii(out, '\\n'); break;
        case 0x0d: pushAscii(out, '\\r'); break;
        case 0x09: pushAscii(out, '\\t'); break;
        case 0x3c: case 0x3e: case 0x26: pushUnicodeEscape(out, c); break;
        default:
          if (c < 0x20) pushUnicodeEscape(out, c);
          else out.push(c);
      }
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = k + 1 < s.length ? s.charCodeAt(k + 1) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        pushUtf8(out, 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00));
        k++;
      } else {
        // A lone surrogate has no UTF-8 form: Go writes the replacement character, escaped.
        pushUnicodeEscape(out, 0xfffd);
      }
      continue;
    }
    if (c === 0x2028 || c === 0x2029) {
      pushUnicodeEscape(out, c);
      continue;
    }
    pushUtf8(out, c);
  }
  out.push(0x22);
}

/** Bytes Go's json.NewEncoder(f).Encode(map[string]string) writes: compact, keys sorted by UTF-8 byte order (= code point order, NOT JS UTF-16 order), trailing "\n". String escaping exactly as Go with HTML escaping on: `"` -> \" , `\` -> \\ , \n \r \t -> \n \r \t , \b -> \b and \f -> \f (Go >= 1.22), other bytes < 0x20 -> \u00XX lowercase hex, `<` `>` `&` -> \u003c \u003e \u0026, U+2028/U+2029 -> \u2028 \u2029, DEL (0x7f) raw, other non-ASCII raw UTF-8, a lone surrogate (invalid UTF-8) -> \ufffd. Keys are escaped by the same rules. */
export function encodeVolumeData(data: VolumeData): Uint8Array {
  const keys = Object.keys(data).sort(compareCodePoints);
  const out: number[] = [0x7b];
  let first = true;
  for (const key of keys) {
    const value: unknown = data[key];
    if (typeof value !== 'string') {
      throw new TypeError(`vol_data.json value for key ${JSON.stringify(key)} must be a string, got ${typeof value}`);
    }
    if (!first) out.push(0x2c);
    first = false;
    pushGoString(out, key);
    out.push(0x3a);
    pushGoString(out, value);
  }
  out.push(0x7d, 0x0a);
  return Uint8Array.from(out);
}

// ---------------------------------------------------------------------------------------------
// Decoder
// ---------------------------------------------------------------------------------------------

/** Go's encoding/json scanner nesting limit. */
const MAX_NESTING_DEPTH = 10000;

/** Decodes runs of ASCII bytes (UTF-8 decoding of ASCII is the identity). */
const asciiDecoder = new TextDecoder();

/** Internal: the input ended inside the first value. */
class UnexpectedEof extends Error {}

/** Internal: the first value is not valid JSON. */
class SyntaxFault extends Error {
  constructor(readonly offset: number, message: string) {
    super(message);
  }
}

/** Renders a byte the way Go's scanner quotes it in "invalid character ..." messages. */
function quoteByte(c: number): string {
  if (c === 0x27) return "'\\''";
  if (c === 0x22) return `'"'`;
  switch (c) {
    case 0x0a: return "'\\n'";
    case 0x0d: return "'\\r'";
    case 0x09: return "'\\t'";
    case 0x5c: return "'\\\\'";
    default:
      if (c >= 0x20 && c < 0x7f) return `'${String.fromCharCode(c)}'`;
      return `'\\x${HEX.charAt(c >> 4)}${HEX.charAt(c & 0xf)}'`;
  }
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

type JsonKind = 'object' | 'array' | 'string' | 'number' | 'bool' | 'null';

function kindOfFirstByte(c: number): JsonKind | undefined {
  if (c === 0x7b) return 'object';
  if (c === 0x5b) return 'array';
  if (c === 0x22) return 'string';
  if (c === 0x2d || isDigit(c)) return 'number';
  if (c === 0x74 || c === 0x66) return 'bool';
  if (c === 0x6e) return 'null';
  return undefined;
}

/**
 * A byte-level reader of the first JSON value of a buffer, following Go's scanner for syntax
 * (what is accepted, what is an error, where the value ends) and Go's unquoting for strings.
 */
class FirstValueReader {
  private pos = 0;

  constructor(private readonly bytes: Uint8Array) {}

  private fail(context: string): never {
    const c = this.bytes[this.pos] ?? 0;
    throw new SyntaxFault(this.pos, `invalid character ${quoteByte(c)} ${context}`);
  }

  /** The byte at the cursor; the input must not end here. */
  private need(): number {
    const c = this.bytes[this.pos];
    if (c === undefined) throw new UnexpectedEof();
    return c;
  }

  skipSpace(): void {
    const b = this.bytes;
    while (this.pos < b.length && isSpace(b[this.pos] ?? 0)) this.pos++;
  }

  atEnd(): boolean {
    return this.pos >= this.bytes.length;
  }

  peek(): number {
    return this.need();
  }

  /** Consumes `true`, `false` or `null` starting at the cursor. */
  scanLiteral(): void {
    const first = this.need();
    const word = first === 0x74 ? 'true' : first === 0x66 ? 'false' : 'null';
    this.pos++;
    for (let k = 1; k < word.length; k++) {
      const c = this.need();
      if (c !== word.charCodeAt(k)) this.fail(`in literal ${word} (expecting '${word.charAt(k)}')`);
      this.pos++;
    }
  }

  /** Consumes a number starting at the cursor; it ends at the first byte that cannot continue it. */
  scanNumber(): void {
    const b = this.bytes;
    if (b[this.pos] === 0x2d) {
      this.pos++;
      if (!isDigit(this.need())) this.fail('in numeric literal');
    }
    if (this.need() === 0x30) {
      this.pos++;
    } else {
      while (this.pos < b.length && isDigit(b[this.pos] ?? 0)) this.pos++;
    }
    if (b[this.pos] === 0x2e) {
      this.pos++;
      if (!isDigit(this.need())) this.fail('after decimal point in numeric literal');
      while (this.pos < b.length && isDigit(b[this.pos] ?? 0)) this.pos++;
    }
    if (b[this.pos] === 0x65 || b[this.pos] === 0x45) {
      this.pos++;
      const sign = this.need();
      if (sign === 0x2b || sign === 0x2d) this.pos++;
      if (!isDigit(this.need())) this.fail('in exponent of numeric literal');
      while (this.pos < b.length && isDigit(b[this.pos] ?? 0)) this.pos++;
    }
  }

  private readHex4(): number {
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const h = hexValue(this.need());
      if (h < 0) this.fail('in \\u hexadecimal character escape');
      v = (v << 4) | h;
      this.pos++;
    }
    return v;
  }

  /** A `\uXXXX` at the cursor, if there is a complete one, without consuming it. */
  private peekUnicodeEscape(): number | undefined {
    const b = this.bytes;
    const p = this.pos;
    if (b[p] !== 0x5c || b[p + 1] !== 0x75) return undefined;
    let v = 0;
    for (let k = 2; k < 6; k++) {
      const h = hexValue(b[p + k] ?? -1);
      if (h < 0) return undefined;
      v = (v << 4) | h;
    }
    return v;
  }

  /**
   * Consumes a string at the cursor and returns its value: escapes resolved, a lone surrogate
   * escape and every byte of an invalid UTF-8 sequence replaced by U+FFFD (Go's unquote).
   */
  readString(decode: boolean): string {
    const b = this.bytes;
    this.pos++; // opening quote
    let out = '';
    // Start of the current run of plain ASCII bytes (no escapes), copied in one piece.
    let runStart = this.pos;
    const flushRun = (): void => {
      if (decode && this.pos > runStart) out += asciiDecoder.decode(b.subarray(runStart, this.pos));
    };
    for (;;) {
      const c = this.need();
      if (c === 0x22) {
        flushRun();
        this.pos++;
        return out;
      }
      if (c < 0x20) this.fail('in string literal');
      if (c < 0x80 && c !== 0x5c) {
        this.pos++;
        continue;
      }
      flushRun();
      if (c === 0x5c) {
        out += this.readEscape(decode);
      } else {
        // Non-ASCII: one UTF-8 sequence with Go's rules (invalid => U+FFFD, advance one byte).
        const [cp, size] = decodeUtf8(b, this.pos);
        if (decode) out += String.fromCodePoint(cp);
        this.pos += size;
      }
      runStart = this.pos;
    }
  }

  /** Consumes the escape sequence at the cursor (a backslash) and returns what it stands for. */
  private readEscape(decode: boolean): string {
    this.pos++;
    const e = this.need();
    let unit: number;
    switch (e) {
      case 0x22: case 0x5c: case 0x2f: unit = e; break;
      case 0x62: unit = 0x08; break;
      case 0x66: unit = 0x0c; break;
      case 0x6e: unit = 0x0a; break;
      case 0x72: unit = 0x0d; break;
      case 0x74: unit = 0x09; break;
      case 0x75: {
        this.pos++;
        unit = this.readHex4();
        if (unit >= 0xd800 && unit <= 0xdfff) {
          const low = this.peekUnicodeEscape();
          if (unit <= 0xdbff && low !== undefined && low >= 0xdc00 && low <= 0xdfff) {
            this.pos += 6;
            return decode ? String.fromCharCode(unit, low) : '';
          }
          unit = 0xfffd; // a lone surrogate
        }
        return decode ? String.fromCharCode(unit) : '';
      }
      default:
        return this.fail('in string escape code');
    }
    this.pos++;
    return decode ? String.fromCharCode(unit) : '';
  }

  /**
   * Consumes one complete value of any kind at the cursor, checking its syntax; `depth` is the
   * nesting depth of the container holding it. Iterative, so deep nesting cannot overflow the stack.
   */
  skipValue(depth: number): void {
    const stack: number[] = []; // 0x7b for objects, 0x5b for arrays
    for (;;) {
      // Expecting a value.
      this.skipSpace();
      const c = this.need();
      const kind = kindOfFirstByte(c);
      switch (kind) {
        case 'object': case 'array': {
          stack.push(c);
          if (depth + stack.length > MAX_NESTING_DEPTH) this.fail('exceeded max depth');
          this.pos++;
          this.skipSpace();
          if (this.need() !== (kind === 'object' ? 0x7d : 0x5d)) {
            if (kind === 'object') this.scanKeyAndColon(false);
            continue; // now expecting the first member's value
          }
          this.pos++;
          stack.pop();
          break;
        }
        case 'string': this.readString(false); break;
        case 'number': this.scanNumber(); break;
        case 'bool': case 'null': this.scanLiteral(); break;
        case undefined: this.fail('looking for beginning of value');
      }
      // A value ended: close containers until one expects another value.
      if (!this.afterValue(stack)) return;
    }
  }

  /**
   * After a value inside the containers of `stack` (innermost last): consumes separators and
   * closing brackets. Returns true when another value is expected, false when the stack emptied.
   */
  private afterValue(stack: number[]): boolean {
    for (;;) {
      const top = stack[stack.length - 1];
      if (top === undefined) return false;
      this.skipSpace();
      const d = this.need();
      if (d === 0x2c) {
        this.pos++;
        if (top === 0x7b) {
          this.skipSpace();
          this.scanKeyAndColon(false);
        }
        return true;
      }
      if (d === (top === 0x7b ? 0x7d : 0x5d)) {
        this.pos++;
        stack.pop();
        continue;
      }
      this.fail(top === 0x7b ? 'after object key:value pair' : 'after array element');
    }
  }

  /** Consumes `"key"` and the `:` after it, returning the decoded key. Cursor at the key's first byte. */
  scanKeyAndColon(decode = true): string {
    if (this.need() !== 0x22) this.fail('looking for beginning of object key string');
    const key = this.readString(decode);
    this.skipSpace();
    if (this.need() !== 0x3a) this.fail('after object key');
    this.pos++;
    return key;
  }

  /** Consumes the separator after a member of the top-level object; false when the object ended. */
  nextMember(): boolean {
    this.skipSpace();
    const d = this.need();
    if (d === 0x2c) {
      this.pos++;
      this.skipSpace();
      return true;
    }
    if (d === 0x7d) {
      this.pos++;
      return false;
    }
    return this.fail('after object key:value pair');
  }

  /** Consumes `{` and reports whether the object has members (false for `{}`). */
  openObject(): boolean {
    this.pos++;
    this.skipSpace();
    if (this.need() === 0x7d) {
      this.pos++;
      return false;
    }
    return true;
  }

  failBeginValue(): never {
    return this.fail('looking for beginning of value');
  }
}

/** Decodes one UTF-8 sequence at `i` with Go's utf8.DecodeRune rules: invalid => [U+FFFD, 1]. */
function decodeUtf8(b: Uint8Array, i: number): [number, number] {
  const b0 = b[i] ?? 0;
  const cont = (k: number, lo = 0x80, hi = 0xbf): number => {
    const v = b[i + k];
    return v !== undefined && v >= lo && v <= hi ? v & 0x3f : -1;
  };
  if (b0 < 0x80) return [b0, 1];
  if (b0 < 0xc2) return [0xfffd, 1];
  if (b0 < 0xe0) {
    const c1 = cont(1);
    return c1 < 0 ? [0xfffd, 1] : [((b0 & 0x1f) << 6) | c1, 2];
  }
  if (b0 < 0xf0) {
    const c1 = cont(1, b0 === 0xe0 ? 0xa0 : 0x80, b0 === 0xed ? 0x9f : 0xbf);
    const c2 = c1 < 0 ? -1 : cont(2);
    return c2 < 0 ? [0xfffd, 1] : [((b0 & 0x0f) << 12) | (c1 << 6) | c2, 3];
  }
  if (b0 < 0xf5) {
    const c1 = cont(1, b0 === 0xf0 ? 0x90 : 0x80, b0 === 0xf4 ? 0x8f : 0xbf);
    const c2 = c1 < 0 ? -1 : cont(2);
    const c3 = c2 < 0 ? -1 : cont(3);
    return c3 < 0 ? [0xfffd, 1] : [((b0 & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3, 4];
  }
  return [0xfffd, 1];
}

function parseFailure(path: string, detail: string): string {
  return `failed to parse volume data file ${path}: ${detail}`;
}

/** A frozen plain object with `entries` as own enumerable data properties (safe for `__proto__`). */
function freezeRecord(entries: Map<string, string>): VolumeData {
  // Object.fromEntries defines own data properties (CreateDataProperty, never the __proto__
  // setter), in one fast step where a defineProperty per key made a slow dictionary object.
  return Object.freeze(Object.fromEntries(entries));
}

/** Decode like Go's json.NewDecoder(f).Decode(&map[string]string): leading whitespace ok; ONLY the first JSON value is read and anything after it is ignored (even garbage); empty or whitespace-only -> kind 'empty' ("EOF"); truncated value -> 'syntax' ("unexpected EOF"); invalid JSON -> 'syntax' with position; `null` -> {} (success!); a top-level non-object (array, string, number, bool) -> 'type'; a member value that is a number/bool/object/array -> 'type' naming the field (e.g. field "driverName": expected a string, got number); a member value null -> "" ; duplicate keys -> last wins; invalid UTF-8 bytes -> U+FFFD; lone surrogate escapes -> U+FFFD. Errors name `path` (given for messages) and the field when there is one. */
export function decodeVolumeData(bytes: Uint8Array, path: string): VolumeData {
  const reader = new FirstValueReader(bytes);
  reader.skipSpace();
  if (reader.atEnd()) {
    throw new VolumeDataError('empty', path, parseFailure(path, 'EOF (the file is empty)'));
  }
  const entries = new Map<string, string>();
  // Go reads the whole first value before decoding it, so a syntax error anywhere in the value
  // wins over a type error; only the first type error is reported.
  let typeError: { field?: string; detail: string } | undefined;
  try {
    const kind = kindOfFirstByte(reader.peek());
    switch (kind) {
      case undefined:
        reader.failBeginValue();
        break;
      case 'null':
        reader.scanLiteral();
        break;
      case 'array': case 'string': case 'number': case 'bool':
        reader.skipValue(0);
        typeError = { detail: `expected a JSON object, got ${kind}` };
        break;
      case 'object': {
        let more = reader.openObject();
        while (more) {
          const key = reader.scanKeyAndColon();
          reader.skipSpace();
          const valueKind = kindOfFirstByte(reader.peek());
          switch (valueKind) {
            case 'string':
              entries.set(key, reader.readString(true));
              break;
            case 'null':
              reader.scanLiteral();
              entries.set(key, '');
              break;
            case 'number': case 'bool': case 'object': case 'array':
              typeError ??= { field: key, detail: `field ${JSON.stringify(key)}: expected a string, got ${valueKind}` };
              reader.skipValue(1);
              break;
            case undefined:
              reader.failBeginValue();
          }
          more = reader.nextMember();
        }
        break;
      }
    }
  } catch (err) {
    if (err instanceof UnexpectedEof) {
      throw new VolumeDataError('syntax', path, parseFailure(path, 'unexpected EOF'));
    }
    if (err instanceof SyntaxFault) {
      throw new VolumeDataError('syntax', path, parseFailure(path, `${err.message} at byte offset ${err.offset}`));
    }
    throw err;
  }
  if (typeError !== undefined) {
    const options = typeError.field === undefined ? undefined : { field: typeError.field };
    throw new VolumeDataError('type', path, parseFailure(path, typeError.detail), options);
  }
  return freezeRecord(entries);
}

// ---------------------------------------------------------------------------------------------
// File access
// ---------------------------------------------------------------------------------------------

function isInside(real: string, root: string): boolean {
  if (real === root) return true;
  const prefix = root.endsWith('/') ? root : `${root}/`;
  return real.startsWith(prefix);
}

function realpathFailure(target: string, what: string, err: unknown): VolumeDataError {
  const code = errorCode(err);
  if (code === 'ELOOP') {
    return new VolumeDataError('io', target,
      `failed to resolve ${what} ${target}: too many levels of symbolic links (ELOOP)`, { cause: err });
  }
  return new VolumeDataError('io', target,
    `failed to resolve ${what} ${target}: ${code ?? errorMessage(err)}`, { cause: err });
}

export interface LoadVolumeDataOptions {
  /**
   * Refuse to read anything that resolves outside this directory: the file's real path (every
   * symlink resolved) must be inside the real path of `rootDir`.
   */
  readonly rootDir?: string;
  /**
   * The caller checked that the directory holding the file resolves inside the root dir (see
   * {@link resolvesInsideRoot}; once for a whole walk that follows no symlink below it). Then
   * only the file itself can be a symlink: it is opened with O_NOFOLLOW and resolved only when it
   * is one, which spares two realpath calls per file on the common path.
   */
  readonly parentsVerified?: boolean;
  /** `rootDir` is already a real path (every symlink resolved): spares a realpath per read. */
  readonly rootDirIsReal?: boolean;
}

/**
 * Whether `dir` resolves (every symlink followed) to `realRoot` or below it; false when it cannot
 * be resolved. Checking only that `dir` itself is not a symlink is not enough: any ancestor
 * between the root dir and `dir` (pods/, plugins/kubernetes.io/csi, ...) may be one.
 */
export async function resolvesInsideRoot(fs: FileSystem, dir: string, realRoot: string): Promise<boolean> {
  try {
    return isInside(await fs.realpath(dir), realRoot);
  } catch {
    return false;
  }
}

/**
 * Why `dir` may not be walked from inside the root dir, in words naming the cause, or undefined
 * when it resolves to `realRoot` or below it: a symlink loop is "too many levels of symbolic
 * links (ELOOP)", not an escape from the root dir.
 */
export async function rootEscapeReason(fs: FileSystem, dir: string, realRoot: string): Promise<string | undefined> {
  let real: string;
  try {
    real = await fs.realpath(dir);
  } catch (err) {
    const code = errorCode(err);
    if (code === 'ELOOP') return `${dir}: too many levels of symbolic links (ELOOP); not followed`;
    return `${dir} cannot be resolved: ${code ?? errorMessage(err)}; not followed`;
  }
  return isInside(real, realRoot) ? undefined : `${dir} resolves outside the root dir ${realRoot}; not followed`;
}

/**
 * Reads a vol_data.json through the FileSystem port (at most MAX_VOL_DATA_BYTES; EFBIG ->
 * 'too-large', ENOENT -> 'not-found', other -> 'io' with the errno) and decodes it. With
 * `rootDir`, a path resolving outside the root is refused with kind 'outside-root' and a
 * symlink loop gives 'io' naming ELOOP.
 */
export async function loadVolumeData(fs: FileSystem, path: string, options?: LoadVolumeDataOptions): Promise<VolumeData> {
  const rootDir = options?.rootDir;
  if (rootDir !== undefined && options?.parentsVerified === true) {
    try {
      return decodeVolumeData(await readBounded(fs, path, path, true), path);
    } catch (err) {
      // ELOOP under O_NOFOLLOW: the file itself is a symlink; resolve and check it below.
      if (errorCode(err) !== 'ELOOP') throw err;
    }
  }
  let readPath = path;
  if (rootDir !== undefined) {
    let realRoot: string;
    try {
      realRoot = options?.rootDirIsReal === true ? rootDir : await fs.realpath(rootDir);
    } catch (err) {
      throw realpathFailure(rootDir, 'root dir', err);
    }
    let real: string;
    try {
      real = await fs.realpath(path);
    } catch (err) {
      if (isNotExist(err)) {
        throw new VolumeDataError('not-found', path,
          `failed to open volume data file ${path}: ENOENT (no such file or directory)`, { cause: err });
      }
      throw realpathFailure(path, 'volume data file', err);
    }
    if (!isInside(real, realRoot)) {
      throw new VolumeDataError('outside-root', path,
        `refusing to read ${path}: it resolves to ${real}, outside the root dir ${realRoot}`);
    }
    // Read what was checked, not a path that could resolve differently.
    readPath = real;
  }
  return decodeVolumeData(await readBounded(fs, readPath, path, false), path);
}

async function readBounded(fs: FileSystem, readPath: string, path: string, noFollow: boolean): Promise<Uint8Array> {
  try {
    return await fs.readFile(readPath, MAX_VOL_DATA_BYTES, { noFollow });
  } catch (err) {
    if (noFollow && errorCode(err) === 'ELOOP') throw err;
    const code = errorCode(err);
    if (code === 'EFBIG') {
      throw new VolumeDataError('too-large', path,
        `refusing to read volume data file ${path}: it is larger than the limit of ${MAX_VOL_DATA_BYTES} bytes`, { cause: err });
    }
    if (code === 'ENOENT') {
      throw new VolumeDataError('not-found', path,
        `failed to open volume data file ${path}: ENOENT (no such file or directory)`, { cause: err });
    }
    // A FIFO, socket or device (refused unread) or a read that timed out: the port's words say which.
    const detail = code === undefined || code === 'EFTYPE' || code === 'ETIMEDOUT' ? errorMessage(err) : code;
    throw new VolumeDataError('io', path,
      `failed to read volume data file ${path}: ${detail}`, { cause: err });
  }
}

/** Per-process counter naming temp files (no clock or randomness in engine code). */
let tempCounter = 0;

/** Atomic and durable write (same bytes as kubelet, safer than its truncate-in-place): write `<dir>/.vol_data.json.tmp-<n>` with fs.writeFile(..., {mode: 0o644, fsync: true}), fs.rename onto `<dir>/vol_data.json`, then fs.fsyncDir(dir). On a failure after the temp file was written, try fs.unlink(temp) and rethrow. `dir` must exist (kubelet's caller creates it). */
export async function saveVolumeData(fs: FileSystem, dir: string, data: VolumeData): Promise<void> {
  const bytes = encodeVolumeData(data);
  tempCounter += 1;
  const temp = posix.join(dir, `.${VOL_DATA_FILE_NAME}.tmp-${tempCounter}`);
  const target = posix.join(dir, VOL_DATA_FILE_NAME);
  try {
    await fs.writeFile(temp, bytes, { mode: 0o644, fsync: true });
    await fs.rename(temp, target);
  } catch (err) {
    // The temp file may exist (fully or partly written): remove it, keep the original error.
    try {
      await fs.unlink(temp);
    } catch {
      // nothing to clean up, or cannot: the original error matters more
    }
    throw err;
  }
  await fs.fsyncDir(dir);
}
