// The mutation score and the survivors' table of docs/benchmarks.md, held to the ledger
// (scripts/mutate/argued.ts): a run that changes the survivors fails here until each new one is
// killed or argued in one line, and the score shown is the one `score.js` prints.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';

import { codeSpan, compareArgued, formatArguedRow, markedSection, parseArguedRows, survivorLines, WHY_MAX } from '../../../scripts/mutate/argued.js';
import { readLedger } from '../../../scripts/mutate/coverage.js';
import { formatScore, scoreOf, type Score } from '../../../scripts/mutate/score.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const DOC = 'docs/benchmarks.md';

function score(survivors: Score['survivors']): Score {
  return { folders: new Map(), killers: new Map(), total: { killed: 0, timeout: 0, survived: 0, noCoverage: 0, ignored: 0, invalid: 0 }, survivors };
}

const S = (file: string, line: number, mutator: string, replacement: string, status = 'Survived'): Score['survivors'][number] => ({ file, line, mutator, replacement, status });

describe('argued survivors: the table is made from the ledger', () => {
  it('shows a replacement as a code span a table cell keeps: pipes escaped, backticks fenced, long text cut', () => {
    assert.equal(codeSpan('false'), '`false`');
    assert.equal(codeSpan('a || b'), '`a \\|\\| b`');
    assert.equal(codeSpan('`${x}`'), '`` `${x}` ``');
    assert.equal(codeSpan(''), '` `');
    assert.equal(codeSpan('{\n  return;\n}'), '`{ return; }`');
    const long = codeSpan('x'.repeat(100));
    assert.equal(long.length, 2 + 48);
    assert.ok(long.endsWith('…`'));
  });

  it('groups the mutants of a line, counts the same one, marks those without coverage, and orders by file then line', () => {
    const lines = survivorLines(
      score([
        S('src/b.ts', 10, 'ConditionalExpression', 'false'),
        S('src/a.ts', 9, 'StringLiteral', '""', 'NoCoverage'),
        S('src/b.ts', 2, 'EqualityOperator', 'a <= b'),
        S('src/b.ts', 10, 'ConditionalExpression', 'false'),
        S('src/b.ts', 10, 'BlockStatement', '{}'),
      ]),
    );
    assert.deepEqual(
      lines.map((l) => [l.key, l.mutants]),
      [
        ['src/a.ts:9', 'StringLiteral `""`, no coverage'],
        ['src/b.ts:2', 'EqualityOperator `a <= b`'],
        ['src/b.ts:10', 'BlockStatement `{}`; ConditionalExpression `false` (×2)'],
      ],
    );
  });

  it('reads the rows, and refuses a table without its header, a row without a path:line, an empty why or one over the limit', () => {
    const head = '| line | mutants left | why no test can tell them from the code |\n|---|---|---|\n';
    const rows = parseArguedRows(`${head}| \`src/a.ts:9\` | StringLiteral \`a \\| b\` | the text is never read |\n`, 10, DOC);
    assert.deepEqual(rows, [{ key: 'src/a.ts:9', mutants: 'StringLiteral `a \\| b`', why: 'the text is never read', at: 12 }]);
    assert.throws(() => parseArguedRows('| `src/a.ts:9` | x | y |', 1, DOC), /docs\/benchmarks\.md:1: want the header/);
    assert.throws(() => parseArguedRows(`${head}| src/a.ts | x | y |`, 1, DOC), /benchmarks\.md:3: want \| `path:line`/);
    assert.throws(() => parseArguedRows(`${head}| \`src/a.ts:9\` | x |  |`, 1, DOC), /src\/a\.ts:9: the why is empty/);
    assert.throws(() => parseArguedRows(`${head}| \`src/a.ts:9\` | x | ${'w'.repeat(WHY_MAX + 1)} |`, 1, DOC), /over 240: one line/);
    assert.throws(() => parseArguedRows('', 1, DOC), /has no header/);
  });

  it('names the rows to add, to drop, to correct, twice over and out of order', () => {
    const want = survivorLines(score([S('src/a.ts', 1, 'BlockStatement', '{}'), S('src/a.ts', 5, 'BooleanLiteral', 'true')]));
    const row = (key: string, mutants: string, at: number): { key: string; mutants: string; why: string; at: number } => ({ key, mutants, why: 'w', at });
    assert.deepEqual(compareArgued(want, [row('src/a.ts:1', 'BlockStatement `{}`', 3), row('src/a.ts:5', 'BooleanLiteral `true`', 4)]), []);
    assert.deepEqual(compareArgued(want, [row('src/a.ts:1', 'BlockStatement `{}`', 3)]), [`add: ${formatArguedRow(want[1]!, '…')}`]);
    assert.deepEqual(compareArgued(want, [row('src/a.ts:1', 'BlockStatement `{}`', 3), row('src/a.ts:5', 'BooleanLiteral `true`', 4), row('src/a.ts:7', 'x', 5)]), [
      'line 5: drop src/a.ts:7: no mutant survives there in the ledger',
    ]);
    assert.deepEqual(compareArgued(want, [row('src/a.ts:1', 'BlockStatement `{}`', 3), row('src/a.ts:5', 'BooleanLiteral `false`', 4)]), [
      'line 4: src/a.ts:5: the mutants left are now: BooleanLiteral `true`',
    ]);
    assert.deepEqual(compareArgued(want, [row('src/a.ts:5', 'BooleanLiteral `true`', 3), row('src/a.ts:1', 'BlockStatement `{}`', 4)]), ['the rows are not in file and line order']);
    assert.deepEqual(compareArgued(want, [row('src/a.ts:1', 'BlockStatement `{}`', 3), row('src/a.ts:1', 'BlockStatement `{}`', 4), row('src/a.ts:5', 'BooleanLiteral `true`', 5)]), ['line 4: src/a.ts:1 has two rows']);
  });

  it('finds a marked section once, with the line it starts on', () => {
    assert.deepEqual(markedSection('a\n<!-- x: begin -->\nb\nc\n<!-- x: end -->\n', 'x', DOC), { text: 'b\nc', line: 3 });
    assert.throws(() => markedSection('<!-- x: begin -->\n', 'x', DOC), /want one section between/);
    assert.throws(() => markedSection('<!-- x: begin -->\n<!-- x: end -->\n<!-- x: begin -->\n', 'x', DOC), /appears twice/);
  });
});

describe(`${DOC}: the ledger's score and its survivors`, () => {
  const markdown = readFileSync(path.join(REPO_ROOT, DOC), 'utf8');
  const s = scoreOf(readLedger(path.join(REPO_ROOT, 'docs/mutation-results')));

  it('shows the score score.js prints over docs/mutation-results/*.json', () => {
    assert.equal(markedSection(markdown, 'mutation-score', DOC).text, formatScore(s));
  });

  it('argues every survivor of the ledger in one line, and no line the ledger no longer has', () => {
    const section = markedSection(markdown, 'survivors', DOC);
    const problems = compareArgued(survivorLines(s), parseArguedRows(section.text, section.line, DOC));
    assert.deepEqual(problems, [], `${DOC}'s survivors' table is not the ledger's:\n${problems.join('\n')}`);
  });
});
