/**
 * Test helper: the documentation checks of test/unit/docs/, as pure functions over texts, so that
 * each can be fed a broken case. No network: links to other sites are not followed.
 *
 * - {@link checkLinks}: every relative link resolves to a file, every `#anchor` to a heading of
 *   its target, slugged as GitHub slugs headings ({@link githubSlug}).
 * - {@link checkFlagsDocumented}: every flag (and fixed choice) of a command is in its page.
 * - {@link checkNamesInTables}: every name (metrics) is in a table row of a page.
 * - {@link checkExitCodesDocumented}: every exit code is a row of a page's exit code table.
 * - {@link findOutsideCitations}: no text cites a document that is not in the repository.
 */
import { readdirSync } from 'node:fs';
import * as path from 'node:path';

/** README.md, ARCHITECTURE.md, CONTRIBUTING.md and every markdown file under docs/. */
export function documentationFiles(root: string): string[] {
  const files = ['README.md', 'ARCHITECTURE.md', 'CONTRIBUTING.md'].map((f) => path.join(root, f));
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && e.name.endsWith('.md')) files.push(p);
    }
  };
  walk(path.join(root, 'docs'));
  return files.sort();
}

export interface Problem {
  readonly file: string;
  readonly line?: number;
  readonly message: string;
}

export function formatProblems(problems: readonly Problem[]): string {
  return problems.map((p) => `${p.file}${p.line === undefined ? '' : `:${p.line}`}: ${p.message}`).join('\n');
}

/** The lines of `markdown` with fenced code blocks blanked (kept as '' so line numbers hold). */
export function proseLines(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split('\n').map((line) => {
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (m !== null) {
      const marker = m[1]!;
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      return '';
    }
    return fence === undefined ? line : '';
  });
}

/** A line with its inline code spans blanked (their text cannot be a link). */
function withoutCodeSpans(line: string): string {
  return line.replace(/(`+)[\s\S]*?\1/g, (s) => ' '.repeat(s.length));
}

/**
 * GitHub's heading anchor (the algorithm of github-slugger): the rendered text lower-cased, every
 * character that is not a letter, a mark, a number, a connector (`_`), a space or a hyphen
 * removed, then each space made a hyphen.
 */
export function githubSlug(headingText: string): string {
  return headingText
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The text GitHub renders for a heading's markdown: code spans, links and HTML tags unwrapped. */
function renderedHeadingText(markdown: string): string {
  return markdown
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/(`+)([\s\S]*?)\1/g, '$2')
    .replace(/<[^>]+>/g, '')
    .trim();
}

/** Every anchor a markdown document has: its ATX headings' slugs (duplicates numbered) and `<a id|name>`. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  // github-slugger: a slug already taken gets -1, -2, … counted per original slug.
  const occurrences = new Map<string, number>();
  for (const line of proseLines(markdown)) {
    const h = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (h !== null) {
      const base = githubSlug(renderedHeadingText(h[1]!));
      let slug = base;
      while (occurrences.has(slug)) {
        const n = occurrences.get(base)! + 1;
        occurrences.set(base, n);
        slug = `${base}-${n}`;
      }
      occurrences.set(slug, 0);
      anchors.add(slug);
    }
    for (const a of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(a[1]!);
  }
  return anchors;
}

export interface Link {
  readonly line: number;
  readonly target: string;
}

/** The link targets of a markdown document: inline links and images, and reference definitions. */
export function linksOf(markdown: string): Link[] {
  const links: Link[] = [];
  proseLines(markdown).forEach((raw, i) => {
    const line = withoutCodeSpans(raw);
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ line: i + 1, target: m[1]! });
    const def = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(line);
    if (def !== null) links.push({ line: i + 1, target: def[1]! });
  });
  return links;
}

/** What {@link checkLinks} needs to know of the repository. */
export interface DocTree {
  /** 'file', 'dir', or undefined when nothing is at `absPath`. */
  kind(absPath: string): 'file' | 'dir' | undefined;
  /** The text of a markdown file (only asked for files `kind` called 'file'). */
  read(absPath: string): string;
}

/**
 * Every relative link of `files` (absolute paths of markdown files) must name a file or a
 * directory that exists, and every `#anchor` a heading of the markdown file it points into (the
 * same file for a bare `#anchor`). Links with a scheme (`https:`, `mailto:`) are not followed.
 */
export function checkLinks(files: readonly string[], tree: DocTree, root: string): Problem[] {
  const problems: Problem[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchorsAt = (file: string): Set<string> => {
    let a = anchorCache.get(file);
    if (a === undefined) {
      a = anchorsOf(tree.read(file));
      anchorCache.set(file, a);
    }
    return a;
  };
  for (const file of files) {
    const rel = path.relative(root, file);
    for (const link of linksOf(tree.read(file))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) continue;
      const hash = link.target.indexOf('#');
      const pathPart = decodeURIComponent(hash < 0 ? link.target : link.target.slice(0, hash));
      const anchor = hash < 0 ? undefined : decodeURIComponent(link.target.slice(hash + 1));
      if (pathPart.startsWith('/')) {
        problems.push({ file: rel, line: link.line, message: `${link.target}: an absolute path; link relative to the file` });
        continue;
      }
      const target = pathPart === '' ? file : path.resolve(path.dirname(file), pathPart);
      const kind = tree.kind(target);
      if (kind === undefined) {
        problems.push({ file: rel, line: link.line, message: `${link.target}: no such file or directory (${path.relative(root, target)})` });
        continue;
      }
      if (anchor === undefined) continue;
      if (kind !== 'file' || !target.endsWith('.md')) {
        problems.push({ file: rel, line: link.line, message: `${link.target}: an anchor into something that is not a markdown file` });
        continue;
      }
      if (!anchorsAt(target).has(anchor)) {
        problems.push({ file: rel, line: link.line, message: `${link.target}: no heading with the anchor #${anchor} in ${path.relative(root, target)}` });
      }
    }
  }
  return problems;
}

/** Whether `token` stands alone in `text` (not part of a longer flag or word). */
export function hasToken(text: string, token: string): boolean {
  const escaped = token.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^\\w-])${escaped}(?![\\w-])`).test(text);
}

/** The table rows of a markdown document (lines that start with `|`), code blocks excluded. */
export function tableRows(markdown: string): string[] {
  return proseLines(markdown).filter((l) => /^ {0,3}\|/.test(l));
}

/** One command as the documentation check sees it: its flags and their fixed choices. */
export interface CommandSpec {
  /** The command's words after `nodevol` ('' for the program itself). */
  readonly name: string;
  /** Every spelling of every flag: `--root-dir`, `-o`, `--output`, `--no-headers`. */
  readonly flags: readonly string[];
  /** The fixed values a flag or an argument takes (`table`, `json`, `bash`). */
  readonly choices: readonly string[];
}

/**
 * Every flag of each command must be in a table row of its page, and every fixed choice somewhere
 * in that page. `pages` maps the command name to its page's path and text (text undefined: no
 * page).
 */
export function checkFlagsDocumented(commands: readonly CommandSpec[], pages: ReadonlyMap<string, { readonly file: string; readonly text: string | undefined }>): Problem[] {
  const problems: Problem[] = [];
  for (const cmd of commands) {
    const page = pages.get(cmd.name);
    const label = cmd.name === '' ? 'nodevol' : `nodevol ${cmd.name}`;
    if (page === undefined || page.text === undefined) {
      problems.push({ file: page?.file ?? `docs/reference/${cmd.name}.md`, message: `${label} has no reference page` });
      continue;
    }
    const rows = tableRows(page.text).join('\n');
    for (const flag of cmd.flags) {
      if (!rows.split('\n').some((row) => hasToken(row, flag))) problems.push({ file: page.file, message: `${label} ${flag}: not in a table row of its page` });
    }
    for (const choice of cmd.choices) {
      if (!hasToken(proseLines(page.text).join('\n'), choice)) problems.push({ file: page.file, message: `${label}: the choice ${choice} is not in its page` });
    }
  }
  return problems;
}

/** Every name must be in a table row of `text` (metric names: the metrics tables). */
export function checkNamesInTables(names: Iterable<string>, file: string, text: string, what: string): Problem[] {
  const rows = tableRows(text);
  return [...names].filter((n) => !rows.some((row) => hasToken(row, n))).map((n) => ({ file, message: `${what} ${n}: not in a table row` }));
}

/** The codes of the exit code table(s) of a page: first cells of the table under a heading "Exit codes". */
export function exitCodesOf(markdown: string): Set<number> {
  const codes = new Set<number>();
  let inSection = false;
  for (const line of proseLines(markdown)) {
    const h = /^ {0,3}(#{1,6})[ \t]+(.*)$/.exec(line);
    if (h !== null) {
      inSection = /exit codes?/i.test(h[2]!);
      continue;
    }
    if (!inSection) continue;
    const row = /^ {0,3}\|\s*(\d+)\s*\|/.exec(line);
    if (row !== null) codes.add(Number(row[1]));
  }
  return codes;
}

/** Each constant's code must be in the exit code table of each of its pages. */
export function checkExitCodesDocumented(
  constants: readonly { readonly name: string; readonly value: number; readonly pages: readonly { readonly file: string; readonly text: string }[] }[],
): Problem[] {
  const problems: Problem[] = [];
  for (const c of constants) {
    for (const page of c.pages) {
      if (!exitCodesOf(page.text).has(c.value)) problems.push({ file: page.file, message: `${c.name} = ${c.value}: not a row of the page's "Exit codes" table` });
    }
  }
  return problems;
}

/**
 * Citations of documents that are not in the repository: the reference and field notes the code
 * was written from, its sections (§), the seed articles, and issue numbers of a tracker the
 * repository does not carry. Upstream references (kubernetes#121937, csi_block.go) are public and
 * not matched.
 */
const OUTSIDE_CITATIONS: readonly { readonly re: RegExp; readonly what: string }[] = [
  { re: /§/, what: 'a section (§) of a document outside the repository' },
  { re: /\breference\s+(?:doc(?:ument)?\s+)?§?\d/i, what: 'the reference document' },
  { re: /kubelet-csi-reference/i, what: 'the reference document' },
  { re: /\bfield[ -]notes\b/i, what: 'the field notes' },
  { re: /\bmodels[ -]to[ -]follow\b/i, what: 'the models-to-follow document' },
  { re: /\bissues?\s+#?\d+/i, what: 'an issue number (the tracker is not in the repository: say the fact)' },
  { re: /\bseeds?\/|\.zh\.txt\b/i, what: 'a seed document' },
  // `<article>` and `</article>` are HTML elements, not citations.
  { re: /(?<![</])\barticle\b/i, what: 'an article outside the repository' },
  { re: /\/work\/shared\b/, what: 'a path outside the repository' },
];

/** Every line of `text` that cites a document outside the repository. */
export function findOutsideCitations(file: string, text: string): Problem[] {
  const problems: Problem[] = [];
  text.split('\n').forEach((line, i) => {
    for (const c of OUTSIDE_CITATIONS) {
      const m = c.re.exec(line);
      if (m !== null) problems.push({ file, line: i + 1, message: `cites ${c.what}: "${m[0]}" (state the fact, or cite docs/…)` });
    }
  });
  return problems;
}

/** The sections of a markdown document, split at headings of `level` or above: heading line → text. */
export function sections(markdown: string, level: number): { readonly heading: string; readonly text: string }[] {
  const out: { heading: string; text: string }[] = [];
  const lines = proseLines(markdown);
  const raw = markdown.split('\n');
  let current: { heading: string; lines: string[] } | undefined;
  lines.forEach((line, i) => {
    const h = /^ {0,3}(#{1,6})[ \t]+(.*)$/.exec(line);
    if (h !== null && h[1]!.length <= level) {
      if (current !== undefined) out.push({ heading: current.heading, text: current.lines.join('\n') });
      current = { heading: h[2]!, lines: [] };
      return;
    }
    current?.lines.push(raw[i]!);
  });
  if (current !== undefined) out.push({ heading: current.heading, text: current.lines.join('\n') });
  return out;
}

/**
 * Every gate must have a row in a table of the page and a section of its own (a heading naming it
 * in backticks) that names each of its proof scenarios.
 */
export function checkGatesDocumented(gates: readonly { readonly name: string; readonly proofs: readonly string[] }[], file: string, text: string): Problem[] {
  const problems: Problem[] = [];
  const rows = tableRows(text);
  const secs = sections(text, 6);
  for (const gate of gates) {
    if (!rows.some((row) => row.includes(`\`${gate.name}\``))) problems.push({ file, message: `gate ${gate.name}: no row in a table` });
    const own = secs.find((s) => s.heading.includes(`\`${gate.name}\``));
    if (own === undefined) {
      problems.push({ file, message: `gate ${gate.name}: no section (a heading naming it)` });
      continue;
    }
    for (const proof of gate.proofs) {
      if (!hasToken(own.text, proof)) problems.push({ file, message: `gate ${gate.name}: its section does not name its proof scenario ${proof}` });
    }
  }
  return problems;
}

/** The layer names of a table whose header row starts `| layer |` (ARCHITECTURE.md's layer table). */
export function layerTableNames(markdown: string): string[] {
  const names: string[] = [];
  let inTable = false;
  for (const line of proseLines(markdown)) {
    if (/^\|\s*layer\s*\|/i.test(line)) {
      inTable = true;
      continue;
    }
    if (!inTable) continue;
    if (!line.startsWith('|')) {
      if (names.length > 0) break;
      continue;
    }
    const cell = /^\|\s*([^|]*?)\s*\|/.exec(line)?.[1] ?? '';
    if (/^-+$/.test(cell.replace(/:/g, ''))) continue;
    names.push(cell.replace(/`/g, ''));
  }
  return names;
}

/** The layers of a dependency-cruiser configuration: its allow rules' comments `<layer> may import: …`. */
export function cruiserLayerNames(config: { readonly allowed?: readonly { readonly comment?: string }[] }): string[] {
  return (config.allowed ?? []).flatMap((rule) => {
    const m = /^(\w+) may import:/.exec(rule.comment ?? '');
    return m === null ? [] : [m[1]!];
  });
}
