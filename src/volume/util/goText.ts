/**
 * Go's `%q` of a string (fmt's verb, which is strconv.Quote), for the error texts the copy repeats
 * byte for byte: csi_plugin.go's unsupported volume mode and the node affinity validation's
 * field.Invalid values. JSON.stringify agrees with it on printable text but not on control
 * characters (Go writes `\a`, `\v` and `\x01`, JSON writes `\u0007`, `\u000b` and `\u0001`), DEL
 * and the C1 controls (Go escapes them, JSON does not), the soft hyphen, every space but the ASCII
 * one (unicode.IsPrint accepts no other), or a lone surrogate (a Go string holds UTF-8, where one
 * becomes U+FFFD, printed as is).
 *
 * Other code points Go's unicode.IsPrint rejects (unassigned ones, format characters such as U+200B)
 * are written as they are here: their tables are not ours to copy, and no text this project quotes
 * is expected to hold one.
 */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0;
    out += quoteRune(cp, ch);
  }
  return `${out}"`;
}

function quoteRune(cp: number, ch: string): string {
  switch (cp) {
    case 0x07: return '\\a';
    case 0x08: return '\\b';
    case 0x0c: return '\\f';
    case 0x0a: return '\\n';
    case 0x0d: return '\\r';
    case 0x09: return '\\t';
    case 0x0b: return '\\v';
    case 0x22: return '\\"';
    case 0x5c: return '\\\\';
    default:
  }
  if (cp < 0x20 || cp === 0x7f) return `\\x${hex(cp, 2)}`;
  if ((cp >= 0x80 && cp <= 0x9f) || cp === 0xad || UNPRINTED_SPACES.has(cp)) return `\\u${hex(cp, 4)}`;
  if (cp >= 0xd800 && cp <= 0xdfff) return '\ufffd';
  return ch;
}

/** Unicode's space separators (Zs) but U+0020, and the line and paragraph separators (Zl, Zp). */
const UNPRINTED_SPACES: ReadonlySet<number> = new Set([
  0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
  0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}
