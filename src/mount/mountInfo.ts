/**
 * Parser for /proc/self/mountinfo following kubelet's field rules (k8s.io/mount-utils
 * mount_helper_unix.go ParseMountInfo).
 *
 * Line layout (see proc(5)):
 *   [0] mount ID  [1] parent ID  [2] major:minor  [3] root  [4] mount point  [5] mount options
 *   [6..] optional fields, terminated by a literal "-"
 *   then: filesystem type, mount source, super options
 *
 * Like kubelet, the parser does NOT decode the kernel's octal escapes (\040 for a space, \011 tab,
 * \012 newline, \134 backslash): root and mount point stay verbatim, so every comparison made on
 * them is a comparison of escaped text. {@link unescapeMountPath} exists for display only.
 */

import type { MountInfoEntry, MountInfoProblem } from '../ports/mounter.js';

// The entry and problem types belong to the Mounter port (src/ports/mounter.ts); re-exported for the parser's callers.
export type { MountInfoEntry, MountInfoProblem };

export interface ParsedMountInfo {
  readonly entries: readonly MountInfoEntry[];
  readonly problems: readonly MountInfoProblem[];
}

export interface ParseMountInfoOptions {
  /** Throw on the first bad line, as kubelet does (default true). */
  readonly strict?: boolean;
  /** Name of the text's origin (file name), used in error messages. */
  readonly source?: string;
}

/** Default name used in messages when the caller does not say where the text came from. */
export const DEFAULT_MOUNTINFO_SOURCE = 'mountinfo';

const MAX_QUOTED_LINE = 200;

/**
 * A malformed mountinfo line, raised by strict parsing. The message reads
 * "<source>:<line>: <reason> in line \"<text>\"".
 */
export class MountInfoParseError extends Error {
  override readonly name = 'MountInfoParseError';
  constructor(
    /** Where the text came from (file name). */
    readonly source: string,
    /** 1-based line number of the bad line. */
    readonly line: number,
    /** The bad line itself. */
    readonly text: string,
    /** What is wrong with it. */
    readonly reason: string,
  ) {
    super(`${source}:${line}: ${reason} in line ${JSON.stringify(truncate(text, MAX_QUOTED_LINE))}`);
  }
}

function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}...`;
}

/**
 * Whitespace as Go's unicode.IsSpace sees it (strings.Fields): the ASCII spaces, U+0085, U+00A0
 * and the Unicode White_Space characters. Unlike JavaScript's \s it excludes U+FEFF.
 */
const GO_SPACE_RUN = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

/** Whitespace other than the plain space and the line feed: the rare case, split the slow way. */
const GO_SPACE_OTHER_THAN_SP_LF_CHARS: readonly string[] = [
  '\t', '\v', '\f', '\r', '\u0085', '\u00a0', '\u1680',
  ...Array.from({ length: 11 }, (_, i) => String.fromCharCode(0x2000 + i)),
  '\u2028', '\u2029', '\u202f', '\u205f', '\u3000',
];

/** Whether `text` holds whitespace other than " " and "\n": one native indexOf scan per character. */
function hasOtherSpace(text: string): boolean {
  for (const c of GO_SPACE_OTHER_THAN_SP_LF_CHARS) if (text.includes(c)) return true;
  return false;
}

/** strings.Fields: split on runs of whitespace, no empty fields. */
function splitFields(line: string): string[] {
  return line.split(GO_SPACE_RUN).filter((f) => f !== '');
}

/**
 * strings.Fields for a line known to hold no whitespace but plain spaces: a native split on
 * " ", with the empty fields of doubled, leading or trailing spaces dropped.
 */
function splitFieldsOnSpaces(line: string): string[] {
  const fields = line.split(' ');
  return fields.includes('') ? fields.filter((f) => f !== '') : fields;
}

/** strconv.Atoi on a decimal string (optional sign), limited to safe integers. */
function parseInteger(s: string): number | undefined {
  const len = s.length;
  let i = 0;
  const first = s.charCodeAt(0);
  if (first === 43 /* + */ || first === 45 /* - */) i = 1;
  if (i >= len) return undefined;
  for (; i < len; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
  }
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Splits a comma-separated option list; a comma between double quotes does not separate
 * (SELinux `context="a:b:c1,c2"`). Empty items are dropped (strings.FieldsFunc semantics).
 */
export function splitMountOptions(s: string): string[] {
  if (!s.includes('"')) {
    // No quotes (the usual case): a native split, empty items dropped.
    const items = s.split(',');
    return items.includes('') ? items.filter((i) => i !== '') : items;
  }
  const out: string[] = [];
  let inQuotes = false;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '"') {
      inQuotes = !inQuotes;
    } else if (c === ',' && !inQuotes) {
      if (i > start) out.push(s.slice(start, i));
      start = i + 1;
    }
  }
  if (s.length > start) out.push(s.slice(start));
  return out;
}

const NO_FIELDS: readonly string[] = Object.freeze([]);

/**
 * Option lists of one parse, split once per distinct text: a node's thousands of mounts share a
 * handful of option strings ("rw,relatime"), and the entries are immutable, so they share lists.
 */
class OptionLists {
  readonly #byText = new Map<string, readonly string[]>();
  of(text: string): readonly string[] {
    let list = this.#byText.get(text);
    if (list === undefined) {
      list = Object.freeze(splitMountOptions(text));
      this.#byText.set(text, list);
    }
    return list;
  }
}

/**
 * Parses one non-empty line; returns the reason as a string when the line is malformed. Option
 * lists come from `options` (shared between entries with the same text).
 */
function parseLine(raw: string, lineNo: number, split: (line: string) => string[], options: OptionLists): MountInfoEntry | string {
  const fields = split(raw);
  if (fields.length < 10) {
    return `wrong number of fields (expected at least 10, got ${fields.length})`;
  }
  const [idText, parentText, majorMinor, root, mountPoint, mountOptions] = fields as [
    string, string, string, string, string, string, ...string[],
  ];
  const id = parseInteger(idText);
  if (id === undefined) return `mount ID ${JSON.stringify(idText)} is not an integer`;
  const parentId = parseInteger(parentText);
  if (parentId === undefined) return `parent ID ${JSON.stringify(parentText)} is not an integer`;

  const colon = majorMinor.indexOf(':');
  if (colon < 0 || majorMinor.indexOf(':', colon + 1) >= 0) {
    return `major:minor ${JSON.stringify(majorMinor)} does not have exactly two parts`;
  }
  const major = parseInteger(majorMinor.slice(0, colon));
  if (major === undefined) return `major device number in ${JSON.stringify(majorMinor)} is not an integer`;
  const minor = parseInteger(majorMinor.slice(colon + 1));
  if (minor === undefined) return `minor device number in ${JSON.stringify(majorMinor)} is not an integer`;

  let i = fields.indexOf('-', 6);
  if (i < 0) i = fields.length;
  const optionalFields = i === 6 ? NO_FIELDS : fields.slice(6, i);
  if (i >= fields.length) {
    return 'no "-" separator before the filesystem type, source and super options';
  }
  const after = fields.length - (i + 1);
  if (after < 3) {
    return `expected at least 3 fields after the "-" separator (filesystem type, source, super options), got ${after}`;
  }
  return {
    id,
    parentId,
    major,
    minor,
    root,
    mountPoint,
    mountOptions: options.of(mountOptions),
    optionalFields,
    fsType: fields[i + 1] ?? '',
    source: fields[i + 2] ?? '',
    superOptions: options.of(fields[i + 3] ?? ''),
    line: lineNo,
  };
}

/** Digits only, 1 to 15 of them (always a safe integer), in text[from, to): their value; else -1. */
function plainDigits(text: string, from: number, to: number): number {
  if (to <= from || to - from > 15) return -1;
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

/**
 * The next occurrence of `needle` at or after a position that only grows over a parse: no part of
 * the text is searched twice, so the in-place parse stays linear whatever the input (a line with
 * no space must not send every later search to the end of the text).
 */
class ForwardSearch {
  /** The last answer: -2 before the first search, -1 when nothing follows the last start. */
  #found = -2;
  constructor(
    private readonly text: string,
    private readonly needle: string,
  ) {}

  from(position: number): number {
    if (this.#found !== -1 && this.#found < position) this.#found = this.text.indexOf(this.needle, position);
    return this.#found;
  }
}

/** The searches one in-place parse shares across its lines. */
interface InPlaceSearches {
  readonly space: ForwardSearch;
  readonly separator: ForwardSearch;
}

/**
 * The common line, parsed in place: text[start, end) holds one line of fields separated by single
 * spaces, its numbers plain digits, a "-" field after the sixth and at least three fields after
 * it. Only the fields an entry keeps are cut out of the text; nothing else is allocated.
 * Undefined for anything else (an error, a sign, an empty field...): the general path, which
 * follows strings.Fields and strconv.Atoi to the letter, decides such a line. Both give the same
 * entry for every line this accepts (property-tested).
 */
function parseLineInPlace(text: string, start: number, end: number, lineNo: number, options: OptionLists, find: InPlaceSearches): MountInfoEntry | undefined {
  const space = find.space;
  // The ends of fields 0..5; each field must be non-empty (no doubled space).
  const e0 = space.from(start);
  if (e0 <= start || e0 >= end) return undefined;
  const e1 = space.from(e0 + 1);
  if (e1 <= e0 + 1 || e1 >= end) return undefined;
  const e2 = space.from(e1 + 1);
  if (e2 <= e1 + 1 || e2 >= end) return undefined;
  const e3 = space.from(e2 + 1);
  if (e3 <= e2 + 1 || e3 >= end) return undefined;
  const e4 = space.from(e3 + 1);
  if (e4 <= e3 + 1 || e4 >= end) return undefined;
  const e5 = space.from(e4 + 1);
  if (e5 <= e4 + 1 || e5 >= end) return undefined;

  const id = plainDigits(text, start, e0);
  const parentId = plainDigits(text, e0 + 1, e1);
  let colon = -1;
  for (let i = e1 + 1; i < e2; i++) {
    if (text.charCodeAt(i) === 58 /* : */) {
      colon = i;
      break;
    }
  }
  if (id < 0 || parentId < 0 || colon < 0) return undefined;
  // A second colon is not a digit: the minor number check refuses it.
  const major = plainDigits(text, e1 + 1, colon);
  const minor = plainDigits(text, colon + 1, e2);
  if (major < 0 || minor < 0) return undefined;

  // The first "-" field from the seventh on: " - " starting at the end of the sixth field or later.
  const sep = find.separator.from(e5);
  if (sep < 0 || sep + 3 >= end) return undefined;
  let optionalFields: readonly string[] = NO_FIELDS;
  if (sep > e5) {
    const list = text.slice(e5 + 1, sep).split(' ');
    if (list.includes('')) return undefined;
    optionalFields = list;
  }
  const f0 = sep + 3;
  const f1 = space.from(f0);
  if (f1 <= f0 || f1 >= end) return undefined;
  const f2 = space.from(f1 + 1);
  if (f2 <= f1 + 1 || f2 >= end) return undefined;
  let f3 = space.from(f2 + 1);
  if (f3 < 0 || f3 > end) f3 = end;
  if (f3 === f2 + 1) return undefined;
  return {
    id,
    parentId,
    major,
    minor,
    root: text.slice(e2 + 1, e3),
    mountPoint: text.slice(e3 + 1, e4),
    mountOptions: options.of(text.slice(e4 + 1, e5)),
    optionalFields,
    fsType: text.slice(f0, f1),
    source: text.slice(f1 + 1, f2),
    superOptions: options.of(text.slice(f2 + 1, f3)),
    line: lineNo,
  };
}

/**
 * Parses mountinfo text. Lines are split on "\n"; empty lines are skipped (a line of only
 * whitespace is not empty and is reported as having 0 fields, as in kubelet).
 *
 * strict (default true, kubelet's behaviour): throws {@link MountInfoParseError} on the first
 * bad line. strict=false: bad lines are collected in `problems` and parsing continues.
 */
export function parseMountInfo(text: string, options?: ParseMountInfoOptions): ParsedMountInfo {
  const strict = options?.strict ?? true;
  const source = options?.source ?? DEFAULT_MOUNTINFO_SOURCE;
  const entries: MountInfoEntry[] = [];
  const problems: MountInfoProblem[] = [];
  // One scan of the whole text decides whether every line can be split on plain spaces (the
  // usual case: each line is then parsed in place) rather than on runs of any Go whitespace.
  const plainSpaces = !hasOtherSpace(text);
  const optionLists = new OptionLists();
  const split = plainSpaces ? splitFieldsOnSpaces : splitFields;
  const searches: InPlaceSearches = { space: new ForwardSearch(text, ' '), separator: new ForwardSearch(text, ' - ') };
  let lineNo = 0;
  for (let start = 0; start <= text.length; ) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    lineNo++;
    if (end > start) {
      const parsed =
        (plainSpaces ? parseLineInPlace(text, start, end, lineNo, optionLists, searches) : undefined) ??
        parseLine(text.slice(start, end), lineNo, split, optionLists);
      if (typeof parsed === 'string') {
        const raw = text.slice(start, end);
        if (strict) throw new MountInfoParseError(source, lineNo, raw, parsed);
        problems.push({ line: lineNo, text: raw, error: parsed });
      } else {
        entries.push(parsed);
      }
    }
    start = end + 1;
  }
  return { entries, problems };
}

/** A three-digit octal escape whose value fits a byte (\000 .. \377). */
const OCTAL_ESCAPE = /\\([0-3][0-7]{2})/g;

/**
 * Decodes the kernel's octal escapes (\040, \011, \012, \134, any \ooo up to \377) for DISPLAY.
 * Escapes stand for bytes, so the result is re-decoded as UTF-8 (invalid sequences become U+FFFD).
 * Never use the result to match against mountinfo fields: kubelet compares escaped text.
 */
export function unescapeMountPath(p: string): string {
  if (!p.includes('\\')) return p;
  const encoder = new TextEncoder();
  const chunks: Uint8Array[] = [];
  let last = 0;
  for (const m of p.matchAll(OCTAL_ESCAPE)) {
    chunks.push(encoder.encode(p.slice(last, m.index)));
    chunks.push(Uint8Array.of(Number.parseInt(m[1] ?? '0', 8)));
    last = m.index + m[0].length;
  }
  chunks.push(encoder.encode(p.slice(last)));
  let size = 0;
  for (const c of chunks) size += c.length;
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.length;
  }
  return new TextDecoder('utf-8').decode(bytes);
}

const KERNEL_ESCAPES: Readonly<Record<string, string>> = {
  ' ': '\\040',
  '\t': '\\011',
  '\n': '\\012',
  '\\': '\\134',
};

/** What the kernel writes for a path in mountinfo: space, tab, newline, backslash -> \040 \011 \012 \134. */
export function escapeMountPath(p: string): string {
  return p.replace(/[ \t\n\\]/g, (c) => KERNEL_ESCAPES[c] ?? c);
}
