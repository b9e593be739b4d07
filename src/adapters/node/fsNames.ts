/**
 * Path strings and the bytes the kernel sees. Names that are not UTF-8 are neither dropped nor
 * mangled: each byte that does not decode is carried in the path string as the lone surrogate
 * U+DC00+byte ("surrogateescape", as Python does) and turned back into that byte when the path is
 * handed to the kernel; escapeUndecodable (ports/fs.ts) renders it as `\xNN` for messages.
 */
const UNDECODABLE = /[\uDC80-\uDCFF]/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A path for node:fs: the string itself, or its bytes when it carries undecodable bytes. */
export function fsPath(p: string): string | Buffer {
  if (!UNDECODABLE.test(p)) return p;
  const parts: Buffer[] = [];
  for (const ch of p) {
    const cp = ch.codePointAt(0) ?? 0;
    parts.push(cp >= 0xdc80 && cp <= 0xdcff ? Buffer.of(cp - 0xdc00) : Buffer.from(ch, 'utf8'));
  }
  return Buffer.concat(parts);
}

/** Bytes from the kernel as a path string: UTF-8, each undecodable byte as U+DC00+byte. */
export function decodeFsName(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    let out = '';
    let i = 0;
    while (i < bytes.length) {
      const lead = bytes[i] ?? 0;
      const len = lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
      if (len > 0 && i + len <= bytes.length) {
        try {
          out += utf8.decode(bytes.subarray(i, i + len));
          i += len;
          continue;
        } catch {
          // not a valid sequence: escape the lead byte below
        }
      }
      out += String.fromCharCode(0xdc00 + lead);
      i += 1;
    }
    return out;
  }
}
