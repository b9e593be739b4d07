/**
 * Every survivor of the ledger, argued in one line: docs/benchmarks.md keeps a table between
 * `<!-- survivors: begin -->` and `<!-- survivors: end -->`, one row per source line that has a
 * surviving (or not covered) mutant in the ledger's newest entry for its file, each with why no
 * test can tell the mutant from the code. The rows' first two columns are made from the ledger
 * (`argueRows`), so the table cannot drift from it: test/unit/mutate/argued.test.ts compares them,
 * and names the rows to add or drop when a run changes the survivors.
 *
 * Beside it, between `<!-- mutation-score: begin -->` and `<!-- mutation-score: end -->`, the
 * output of `node dist/scripts/mutate/score.js docs/mutation-results/*.json`, compared the same way.
 */
import type { Score } from './score.js';

/** The mutants of one source line left alive, as the table's first two columns show them. */
export interface SurvivorLine {
  /** `path:line`. */
  readonly key: string;
  readonly file: string;
  readonly line: number;
  /** The mutants, e.g. ``ConditionalExpression `false` (2); StringLiteral `""` (no coverage)``. */
  readonly mutants: string;
}

/** A row of the doc's table. */
export interface ArguedRow {
  readonly key: string;
  readonly mutants: string;
  readonly why: string;
  /** 1-based line in the markdown file. */
  readonly at: number;
}

const REPLACEMENT_SHOWN = 48;

/** `text` as a markdown code span that survives a table cell: a fence longer than any run of backticks inside, pipes escaped. */
export function codeSpan(text: string): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  const shown = oneLine.length > REPLACEMENT_SHOWN ? `${oneLine.slice(0, REPLACEMENT_SHOWN - 1)}…` : oneLine;
  const longest = Math.max(0, ...(shown.match(/`+/g) ?? []).map((r) => r.length));
  const fence = '`'.repeat(longest + 1);
  if (shown === '') return '` `';
  const pad = shown.startsWith('`') || shown.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${shown.replace(/\|/g, '\\|')}${pad}${fence}`;
}

/** The ledger's survivors grouped by source line, in file and line order. */
export function survivorLines(s: Score): SurvivorLine[] {
  const byLine = new Map<string, { file: string; line: number; counts: Map<string, number> }>();
  for (const v of s.survivors) {
    const key = `${v.file}:${v.line}`;
    const g = byLine.get(key) ?? { file: v.file, line: v.line, counts: new Map<string, number>() };
    byLine.set(key, g);
    const what = `${v.mutator} ${codeSpan(v.replacement)}${v.status === 'NoCoverage' ? ', no coverage' : ''}`;
    g.counts.set(what, (g.counts.get(what) ?? 0) + 1);
  }
  return [...byLine.entries()]
    .map(([key, g]) => ({
      key,
      file: g.file,
      line: g.line,
      mutants: [...g.counts.entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([what, n]) => (n === 1 ? what : `${what} (×${n})`))
        .join('; '),
    }))
    .sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line));
}

/** The text between `<!-- NAME: begin -->` and `<!-- NAME: end -->` in `markdown`, with the line it starts on. */
export function markedSection(markdown: string, name: string, where: string): { text: string; line: number } {
  const begin = `<!-- ${name}: begin -->`;
  const end = `<!-- ${name}: end -->`;
  const b = markdown.indexOf(begin);
  const e = markdown.indexOf(end);
  if (b < 0 || e < 0 || e < b) throw new Error(`${where}: want one section between ${begin} and ${end}`);
  if (markdown.indexOf(begin, b + 1) >= 0) throw new Error(`${where}: ${begin} appears twice`);
  const start = b + begin.length + 1;
  return { text: markdown.slice(start, e).replace(/\n$/, ''), line: markdown.slice(0, start).split('\n').length };
}

/** Splits a markdown table row into its cells, keeping `\|` inside a cell. */
function cells(row: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (let i = 1; i < row.length; i++) {
    const c = row.charAt(i);
    if (c === '\\' && row[i + 1] === '|') {
      cur += '\\|';
      i++;
    } else if (c === '|') {
      out.push(cur.trim());
      cur = '';
    } else cur += c;
  }
  return out;
}

const HEADER = '| line | mutants left | why no test can tell them from the code |';
const RULE = '|---|---|---|';
export const WHY_MAX = 240;

/** The rows of the survivors' table; a malformed row throws, naming its line. */
export function parseArguedRows(section: string, firstLine: number, where: string): ArguedRow[] {
  const lines = section.split('\n');
  const rows: ArguedRow[] = [];
  let seenHeader = false;
  lines.forEach((raw, i) => {
    const at = firstLine + i;
    const line = raw.trim();
    if (line === '') return;
    if (!seenHeader) {
      if (line !== HEADER) throw new Error(`${where}:${at}: want the header ${HEADER}`);
      seenHeader = true;
      return;
    }
    if (line === RULE) return;
    if (!line.startsWith('|') || !line.endsWith('|')) throw new Error(`${where}:${at}: not a table row`);
    const c = cells(line);
    const key = /^`([^`]+:\d+)`$/.exec(c[0] ?? '')?.[1];
    if (c.length !== 3 || key === undefined) throw new Error(`${where}:${at}: want | \`path:line\` | mutants | why |`);
    const why = c[2] ?? '';
    if (why === '') throw new Error(`${where}:${at}: ${key}: the why is empty`);
    if (why.length > WHY_MAX) throw new Error(`${where}:${at}: ${key}: the why is ${why.length} characters, over ${WHY_MAX}: one line`);
    rows.push({ key, mutants: c[1] ?? '', why, at });
  });
  if (!seenHeader) throw new Error(`${where}: the survivors' table has no header`);
  return rows;
}

/** A row as the table shows it. */
export function formatArguedRow(s: SurvivorLine, why: string): string {
  return `| \`${s.key}\` | ${s.mutants} | ${why} |`;
}

/** What the doc's table lacks, holds too many of, or shows wrongly, against the ledger's survivors. */
export function compareArgued(want: readonly SurvivorLine[], rows: readonly ArguedRow[]): string[] {
  const problems: string[] = [];
  const byKey = new Map<string, ArguedRow>();
  for (const r of rows) {
    if (byKey.has(r.key)) problems.push(`line ${r.at}: ${r.key} has two rows`);
    byKey.set(r.key, r);
  }
  const wanted = new Set(want.map((w) => w.key));
  for (const w of want) {
    const r = byKey.get(w.key);
    if (r === undefined) problems.push(`add: ${formatArguedRow(w, '…')}`);
    else if (r.mutants !== w.mutants) problems.push(`line ${r.at}: ${w.key}: the mutants left are now: ${w.mutants}`);
  }
  for (const r of rows) if (!wanted.has(r.key)) problems.push(`line ${r.at}: drop ${r.key}: no mutant survives there in the ledger`);
  const order = rows.map((r) => r.key);
  const sorted = want.map((w) => w.key).filter((k) => byKey.has(k));
  if (problems.length === 0 && order.join('\n') !== sorted.join('\n')) problems.push('the rows are not in file and line order');
  return problems;
}
