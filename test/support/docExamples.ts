/**
 * Test helper: the example outputs and example commands of the documentation, as pure functions
 * over texts (test/cli/docExamples.cli.test.ts runs them; test/unit/docs/docExamples.test.ts
 * feeds them broken cases).
 *
 * An example output is a fenced block right under an HTML comment that says how it is produced:
 *
 *     <!-- doc-example: nodevol audit --root-dir examples/node/kubelet -->
 *     ```
 *     (exactly what the command prints on stdout)
 *     ```
 *
 * or, without a command, a transcript: each `$ command` line is run and followed by what it
 * prints (`$ echo $?` prints the previous command's exit code). Words before the colon set
 * options: `fixture=NAME` runs it over a test fixture whose directory the commands and the output
 * call `$F`; `slow` runs it only when asked (`npm run docs:examples`). Commands run from the
 * repository's root, whose path the output calls `$PWD`. `npm run docs:examples` rewrites every
 * marked block with what its command prints now.
 */

/** A fenced code block of a markdown file. */
export interface FencedBlock {
  /** The info string after the opening fence (`sh`, `json`, '' for none). */
  readonly info: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The lines between the fences, joined with '\n' (no trailing newline). */
  readonly body: string;
  /** Offsets of the body in the file's text: [start, end), end at the closing fence's line. */
  readonly bodyStart: number;
  readonly bodyEnd: number;
  /** The line right above the opening fence ('' for the first line). */
  readonly above: string;
}

/** Every fenced block of `markdown` (``` or ~~~ fences, closed by the same or a longer fence). */
export function fencedBlocks(markdown: string): FencedBlock[] {
  const blocks: FencedBlock[] = [];
  const lines = markdown.split('\n');
  let offset = 0;
  let open: { marker: string; info: string; line: number; bodyStart: number; above: string } | undefined;
  lines.forEach((line, i) => {
    const lineStart = offset;
    offset += line.length + 1;
    const m = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    if (m === null) return;
    const marker = m[1]!;
    if (open === undefined) {
      open = { marker, info: m[2]!.trim(), line: i + 1, bodyStart: offset, above: i === 0 ? '' : lines[i - 1]! };
      return;
    }
    if (marker[0] === open.marker[0] && marker.length >= open.marker.length && m[2]!.trim() === '') {
      const bodyEnd = Math.max(open.bodyStart, lineStart);
      blocks.push({ info: open.info, line: open.line, body: markdown.slice(open.bodyStart, bodyEnd).replace(/\n$/, ''), bodyStart: open.bodyStart, bodyEnd, above: open.above });
      open = undefined;
    }
  });
  return blocks;
}

/** What a `<!-- doc-example … -->` comment says. */
export interface ExampleMarker {
  /** The command whose stdout the block is; undefined: the block is a transcript. */
  readonly command?: string;
  readonly fixture?: string;
  readonly slow: boolean;
}

const MARKER = /^\s*<!-- doc-example((?:\s+[a-z]+(?:=[\w-]+)?)*)\s*(?::\s*(.*?))?\s*-->\s*$/;

/** The marker on `line`, or undefined when the line is no marker; a malformed one throws. */
export function parseMarker(line: string): ExampleMarker | undefined {
  if (!line.includes('<!-- doc-example')) return undefined;
  const m = MARKER.exec(line);
  if (m === null) throw new Error(`malformed doc-example marker (want <!-- doc-example [fixture=NAME] [slow][: COMMAND] -->): ${line}`);
  let fixture: string | undefined;
  let slow = false;
  for (const word of (m[1] ?? '').trim().split(/\s+/).filter((w) => w !== '')) {
    const [key, value] = word.split('=');
    if (key === 'fixture' && value !== undefined) fixture = value;
    else if (key === 'slow' && value === undefined) slow = true;
    else throw new Error(`doc-example marker: unknown option ${word}`);
  }
  const command = m[2] === undefined || m[2] === '' ? undefined : m[2];
  return { slow, ...(command === undefined ? {} : { command }), ...(fixture === undefined ? {} : { fixture }) };
}

/** One command of a transcript: the command line and the output the document shows for it. */
export interface TranscriptStep {
  readonly command: string;
  readonly output: string;
}

/** The `$ command` lines of a transcript, each with the lines under it (a line ending `\` goes on). */
export function transcriptSteps(body: string): TranscriptStep[] {
  const steps: { command: string; output: string[] }[] = [];
  const lines = body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('$ ')) {
      let command = line.slice(2);
      while (command.endsWith('\\') && i + 1 < lines.length) command = `${command.slice(0, -1).trimEnd()} ${lines[++i]!.trim()}`;
      steps.push({ command, output: [] });
    } else if (steps.length === 0) throw new Error(`a transcript starts with a "$ " command line, not: ${line}`);
    else steps[steps.length - 1]!.output.push(line);
  }
  return steps.map((s) => ({ command: s.command, output: s.output.join('\n') }));
}

/** A transcript's text from its steps. */
export function transcriptText(steps: readonly TranscriptStep[]): string {
  return steps.map((s) => (s.output === '' ? `$ ${s.command}` : `$ ${s.command}\n${s.output}`)).join('\n');
}

/**
 * What varies from run to run and machine to machine, and is compared as a placeholder: the
 * explorer's timings and the Node.js version and platform of `nodevol version`.
 */
const VARYING: readonly RegExp[] = [
  /\d+(?:\.\d+)? s \(cpu \d+(?:\.\d+)? s\) {2}\d+(?:\.\d+)? runs\/s/g,
  /explored in \d+(?:\.\d+)? s \(cpu \d+(?:\.\d+)? s\): \d+(?:\.\d+)? runs\/s, \d+(?:\.\d+)? per cpu-second(?:; shrunk in \d+(?:\.\d+)? s)?/g,
  /Node\.js v\d+\.\d+\.\d+ \([\w-]+\/[\w-]+\)/g,
  /"nodeVersion": "v\d+\.\d+\.\d+"/g,
  /"platform": "[\w-]+\/[\w-]+"/g,
];

/** `text` with every varying part replaced by ⟨varies⟩. */
export function maskVarying(text: string): string {
  return VARYING.reduce((t, re) => t.replace(re, '⟨varies⟩'), text);
}

/** Whether the documented text and the text the command printed are the same but for what varies. */
export function sameOutput(documented: string, printed: string): boolean {
  return maskVarying(documented.replace(/\n+$/, '')) === maskVarying(printed.replace(/\n+$/, ''));
}

/** A command line split into words as a POSIX shell would, for the commands of this documentation. */
export interface ShellCommand {
  readonly words: readonly string[];
  /** The text it came from (its line, continuations joined). */
  readonly text: string;
}

/**
 * The simple commands of a shell script, each as its words: comments dropped, `\` continuations
 * joined, quotes removed, `$NAME`/`${NAME}` expanded from the script's own assignments (others kept
 * as written), `;`, `&&`, `||`, `|` and newlines separating commands, redirections dropped with
 * their target, and the commands inside `<(…)` and `$(…)` listed as commands of their own. Enough
 * for the examples of this repository, not a shell.
 */
export function shellCommands(script: string): ShellCommand[] {
  const vars = new Map<string, string>();
  const out: ShellCommand[] = [];
  const joined = script.replace(/\\\n\s*/g, ' ');
  for (const text of splitTopLevel(joined)) {
    const { words, inner } = wordsOf(text, vars);
    for (const i of inner) out.push(...shellCommands(i));
    // Leading assignments: alone, they set a variable; before a command, its environment.
    let k = 0;
    while (k < words.length && /^[A-Za-z_]\w*=/.test(words[k]!)) k++;
    if (k === words.length) {
      for (const w of words) vars.set(w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1));
      continue;
    }
    out.push({ words: words.slice(k), text: text.trim() });
  }
  return out;
}

/** The script split at newlines, `;`, `&&`, `||` and `|` outside quotes and parentheses, comments dropped. */
function splitTopLevel(script: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quote: string | undefined;
  let depth = 0;
  for (let i = 0; i < script.length; i++) {
    const c = script[i]!;
    if (quote !== undefined) {
      current += c;
      if (c === quote) quote = undefined;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (depth === 0 && c === '#' && (current === '' || /\s$/.test(current))) {
      while (i + 1 < script.length && script[i + 1] !== '\n') i++;
      continue;
    } else if (depth === 0 && (c === '\n' || c === ';' || c === '|' || (c === '&' && script[i + 1] === '&'))) {
      if (c === '&' || (c === '|' && script[i + 1] === '|')) i++;
      parts.push(current);
      current = '';
      continue;
    }
    current += c;
  }
  parts.push(current);
  return parts.filter((p) => p.trim() !== '');
}

/** The words of one simple command, and the texts inside its `<(…)` and `$(…)`. */
function wordsOf(text: string, vars: ReadonlyMap<string, string>): { words: string[]; inner: string[] } {
  const words: string[] = [];
  const inner: string[] = [];
  let word: string | undefined;
  let skipNext = false;
  const expand = (s: string): string => s.replace(/\$\{(\w+)\}|\$([A-Za-z_]\w*)/g, (all, a: string | undefined, b: string | undefined) => vars.get(a ?? b ?? '') ?? all);
  const end = (): void => {
    if (word === undefined) return;
    if (skipNext) skipNext = false;
    else if (/^(?:\d?>>?|<|\d?>&\d)$/.test(word)) skipNext = !/&\d$/.test(word);
    else if (/^(?:\d?>>?|<)\S/.test(word)) {
      // a redirection and its target in one word (>file)
    } else words.push(word);
    word = undefined;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      end();
      continue;
    }
    if ((c === '<' || c === '$') && text[i + 1] === '(') {
      let depth = 1;
      let j = i + 2;
      while (j < text.length && depth > 0) {
        if (text[j] === '(') depth++;
        else if (text[j] === ')') depth--;
        j++;
      }
      inner.push(text.slice(i + 2, j - 1));
      word = `${word ?? ''}$(…)`;
      i = j - 1;
      continue;
    }
    if (c === "'") {
      const close = text.indexOf("'", i + 1);
      word = `${word ?? ''}${text.slice(i + 1, close < 0 ? text.length : close)}`;
      i = close < 0 ? text.length : close;
      continue;
    }
    if (c === '"') {
      const close = text.indexOf('"', i + 1);
      word = `${word ?? ''}${expand(text.slice(i + 1, close < 0 ? text.length : close))}`;
      i = close < 0 ? text.length : close;
      continue;
    }
    if (c === '$') {
      const m = /^\$\{(\w+)\}|^\$([A-Za-z_]\w*)/.exec(text.slice(i));
      if (m !== null) {
        word = `${word ?? ''}${expand(m[0])}`;
        i += m[0].length - 1;
        continue;
      }
    }
    word = `${word ?? ''}${c}`;
  }
  end();
  return { words, inner };
}

/** The arguments after `nodevol` when `words` run nodevol (`nodevol`, `npx nodevol`, `node bin/nodevol.js`, after `sudo`); else undefined. */
export function nodevolArgs(words: readonly string[]): string[] | undefined {
  let w = [...words];
  if (w[0] === 'sudo') w = w.slice(1);
  if (w[0] === 'npx') w = w.slice(1);
  if (w[0] === 'node' && /(^|\/)bin\/nodevol\.js$/.test(w[1] ?? '')) return w.slice(2);
  if (w[0] === 'nodevol' || /\/nodevol(\.js)?$/.test(w[0] ?? '')) return w.slice(1);
  return undefined;
}

/** The example commands of a `--help` text: the lines of its `Examples:` block that are not comments. */
export function helpExampleCommands(help: string): string[] {
  const at = help.indexOf('\nExamples:\n');
  if (at < 0) return [];
  const lines = help.slice(at + '\nExamples:\n'.length).split('\n');
  const script = lines
    .filter((l) => l.startsWith('  ') && !/^ {2}#/.test(l))
    .map((l) => l.slice(2))
    .join('\n');
  return script === '' ? [] : [script];
}
