// Go's %q of a string (strconv.Quote), as the copy's error texts print it: each expectation is what
// Go prints for the same string.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { goQuote } from '../../../../src/volume/util/goText.js';

describe('goQuote: Go\'s %q of a string', () => {
  const rows: readonly [string, string, string][] = [
    ['printable ASCII as is', 'Persistent', '"Persistent"'],
    ['the empty string', '', '""'],
    ['a quote and a backslash escaped', 'a"b\\c', '"a\\"b\\\\c"'],
    ['the named escapes', '\u0007\b\f\n\r\t\u000b', '"\\a\\b\\f\\n\\r\\t\\v"'],
    ['other C0 controls and DEL as \\x', '\u0000\u0001\u001b\u001f\u007f', '"\\x00\\x01\\x1b\\x1f\\x7f"'],
    ['C1 controls as \\u', '\u0080\u0085\u009f', '"\\u0080\\u0085\\u009f"'],
    ['the no-break space and the soft hyphen as \\u', '\u00a0\u00ad', '"\\u00a0\\u00ad"'],
    ['other spaces and the line and paragraph separators as \\u', '\u2003\u2028\u2029\u3000', '"\\u2003\\u2028\\u2029\\u3000"'],
    ['printable non-ASCII as is, astral too', 'é☺日本\u{1F600}', '"é☺日本\u{1F600}"'],
    ['the ASCII space as is', 'a b', '"a b"'],
    ['a lone surrogate becomes U+FFFD, as it would in Go\'s UTF-8', 'a\ud800b', '"a\ufffdb"'],
    ['so does the last one, U+DFFF; U+E000, just above the range, is printed as it is', '\udfff\ue000', '"\ufffd\ue000"'],
  ];
  for (const [name, input, want] of rows) {
    it(name, () => assert.equal(goQuote(input), want));
  }
});
