// Terminal escaping of table cells and free text (docs/security.md): kubectl's rules, plus every
// other control character.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { escapeCell, escapeText } from '../../../src/cli/terminal.js';

describe('terminal escaping', () => {
  const cells: [string, string][] = [
    ['a\u001b[31mb', 'a^[[31mb'],
    ['row\nforged', 'row...'],
    ['row\rforged', 'row...'],
    ['row\fforged', 'row...'],
    ['a\u0008\u007f\u0085b\tc', 'a\\x08\\x7f\\x85b\\tc'],
    ['abc\u202etxt.exe', 'abc\\u202etxt.exe'],
    ['plain-name_1.2/ünïcode', 'plain-name_1.2/ünïcode'],
  ];
  for (const [input, want] of cells) {
    it(`escapeCell(${JSON.stringify(input)}) = ${JSON.stringify(want)}`, () => assert.equal(escapeCell(input), want));
  }
  it('escapeText cuts nothing and escapes line breaks', () => {
    assert.equal(escapeText('line1\nline2\r\u001b\f'), 'line1\\nline2\\r^[\\f');
  });
});
