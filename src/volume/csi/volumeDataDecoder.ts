/**
 * The vol_data.json reader's decoding: what kubelet's Go code accepts with
 * json.NewDecoder(f).Decode(&map[string]string), byte for byte. A reader of the FIRST JSON value
 * that follows Go's scanner for syntax (what is accepted, what is an error and its message, where
 * the value ends: trailing bytes are ignored) and Go's unquoting for strings (invalid UTF-8 and
 * lone surrogate escapes become U+FFFD), then Go's rules for the map (null is {}, a null member is
 * "", any other non-string is a type error naming the field). Pure: no I/O.
 */
import { VolumeDataError, type VolumeData } from './volumeDataError.js';

const HEX = '0123456789abcdef';

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
      // Go's scanner.go quoteChar quotes string(c): the byte as the code point U+00XX. strconv.Quote
      // writes the printable ones as they are (a byte order mark's 0xef is 'ï') and the C1
      // controls, the no-break space and the soft hyphen as \u00XX; below 0x20 and 0x7f, \xXX.
      if (c > 0xa0 && c <= 0xff && c !== 0xad) return `'${String.fromCharCode(c)}'`;
      if (c >= 0x80 && c <= 0xff) return `'\\u00${HEX.charAt(c >> 4)}${HEX.charAt(c & 0xf)}'`;
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

/**
 * Decodes a vol_data.json exactly as {@link decodeVolumeDataGo} does (same result, same error),
 * faster for what kubelet writes: when the bytes are plain (all ASCII, no backslash escape),
 * V8's JSON.parse reads them and the result is checked against Go's rules for the map; anything
 * else (escapes, non-ASCII bytes, trailing bytes, an error of any kind, a non-string member) goes
 * to the Go-compatible decoder, which then makes the result or the error.
 *
 * Why the two agree on plain input: with ASCII only there is no UTF-8 repair to differ on, and
 * with no backslash no lone surrogate escape; JSON.parse and Go's scanner accept the same grammar
 * (RFC 8259: same whitespace, numbers, literals; control bytes refused in strings), and a success
 * of JSON.parse means the whole text is the one value, so Go's "first value only" reads the same
 * value. Duplicate keys: the last value wins at the first key's position in both (JSON.parse's
 * object and the decoder's Map then Object.fromEntries). Both define "__proto__" as an own key.
 * A property test (test/property) checks the two decoders agree on arbitrary bytes.
 */
export function decodeVolumeData(bytes: Uint8Array, path: string): VolumeData {
  return decodePlain(bytes) ?? decodeVolumeDataGo(bytes, path);
}

/** The fast path: the decoded record, or undefined when the Go-compatible decoder must decide. */
function decodePlain(bytes: Uint8Array): VolumeData | undefined {
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i] ?? 0;
    if (c >= 0x80 || c === 0x5c) return undefined;
  }
  let value: unknown;
  try {
    value = JSON.parse(asciiDecoder.decode(bytes));
  } catch {
    return undefined;
  }
  if (value === null) return Object.freeze({});
  if (typeof value !== 'object' || Array.isArray(value)) return undefined;
  const record = value as Record<string, unknown>;
  for (const key in record) {
    const member = record[key];
    if (typeof member === 'string') continue;
    if (member !== null) return undefined;
    record[key] = '';
  }
  return Object.freeze(record as VolumeData);
}

/** Decode like Go's json.NewDecoder(f).Decode(&map[string]string): leading whitespace ok; ONLY the first JSON value is read and anything after it is ignored (even garbage); empty or whitespace-only -> kind 'empty' ("EOF"); truncated value -> 'syntax' ("unexpected EOF"); invalid JSON -> 'syntax' with position; `null` -> {} (success!); a top-level non-object (array, string, number, bool) -> 'type'; a member value that is a number/bool/object/array -> 'type' naming the field (e.g. field "driverName": expected a string, got number); a member value null -> "" ; duplicate keys -> last wins; invalid UTF-8 bytes -> U+FFFD; lone surrogate escapes -> U+FFFD. Errors name `path` (given for messages) and the field when there is one. */
export function decodeVolumeDataGo(bytes: Uint8Array, path: string): VolumeData {
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
