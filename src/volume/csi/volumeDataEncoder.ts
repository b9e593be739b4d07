/**
 * The vol_data.json writer's bytes: exactly what kubelet's Go code writes for a
 * map[string]string with json.NewEncoder(f).Encode (Go >= 1.22): compact, keys in UTF-8 byte
 * order, Go's string escaping with HTML escaping on, a final newline. Pure: no I/O.
 */
import type { VolumeData } from './volumeDataError.js';

const HEX = '0123456789abcdef';

/** Compares two strings by Unicode code point (= UTF-8 byte order, Go's map key order); lone surrogates count as their code unit value. */
export function compareCodePoints(a: string, b: string): number {
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

/** `s` as a JSON string literal exactly as Go's encoding/json writes it (HTML escaping on). */
export function goJsonString(s: string): string {
  const out: number[] = [];
  pushGoString(out, s);
  return new TextDecoder().decode(Uint8Array.from(out));
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
