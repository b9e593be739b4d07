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
 * Where the fields of a line parsed in place lie in the text (see {@link locateLineInPlace}),
 * numbers already read. Slots of a Float64Array, one row per line.
 */
const AT_ID = 0;
const AT_PARENT = 1;
const AT_MAJOR = 2;
const AT_MINOR = 3;
const AT_E2 = 4;
const AT_E3 = 5;
const AT_E4 = 6;
const AT_E5 = 7;
const AT_SEP = 8;
const AT_F1 = 9;
const AT_F2 = 10;
const AT_F3 = 11;
const AT_LINE = 12;
const ROW = 13;

/**
 * The common line, located in place: text[start, end) holds one line of fields separated by
 * single spaces, its numbers plain digits, a "-" field after the sixth and at least three fields
 * after it. Writes where its fields lie into `out` at `row` and returns true; nothing is
 * allocated. False for anything else (an error, a sign, an empty field...): the general path,
 * which follows strings.Fields and strconv.Atoi to the letter, decides such a line. Both give
 * the same entry for every line this accepts (property-tested).
 */
function locateLineInPlace(text: string, start: number, end: number, find: InPlaceSearches, out: Float64Array, row: number): boolean {
  const space = find.space;
  // The ends of fields 0..5; each field must be non-empty (no doubled space).
  const e0 = space.from(start);
  if (e0 <= start || e0 >= end) return false;
  const e1 = space.from(e0 + 1);
  if (e1 <= e0 + 1 || e1 >= end) return false;
  const e2 = space.from(e1 + 1);
  if (e2 <= e1 + 1 || e2 >= end) return false;
  const e3 = space.from(e2 + 1);
  if (e3 <= e2 + 1 || e3 >= end) return false;
  const e4 = space.from(e3 + 1);
  if (e4 <= e3 + 1 || e4 >= end) return false;
  const e5 = space.from(e4 + 1);
  if (e5 <= e4 + 1 || e5 >= end) return false;

  const id = plainDigits(text, start, e0);
  const parentId = plainDigits(text, e0 + 1, e1);
  let colon = -1;
  for (let i = e1 + 1; i < e2; i++) {
    if (text.charCodeAt(i) === 58 /* : */) {
      colon = i;
      break;
    }
  }
  if (id < 0 || parentId < 0 || colon < 0) return false;
  // A second colon is not a digit: the minor number check refuses it.
  const major = plainDigits(text, e1 + 1, colon);
  const minor = plainDigits(text, colon + 1, e2);
  if (major < 0 || minor < 0) return false;

  // The first "-" field from the seventh on: " - " starting at the end of the sixth field or later.
  const sep = find.separator.from(e5);
  if (sep < 0 || sep + 3 >= end) return false;
  // Optional fields text[e5 + 1, sep): none may be empty (no leading, trailing or doubled space).
  if (sep > e5) {
    if (sep === e5 + 1) return false;
    let previous = 32;
    for (let i = e5 + 1; i < sep; i++) {
      const c = text.charCodeAt(i);
      if (c === 32 && previous === 32) return false;
      previous = c;
    }
    if (previous === 32) return false;
  }
  const f0 = sep + 3;
  const f1 = space.from(f0);
  if (f1 <= f0 || f1 >= end) return false;
  const f2 = space.from(f1 + 1);
  if (f2 <= f1 + 1 || f2 >= end) return false;
  let f3 = space.from(f2 + 1);
  if (f3 < 0 || f3 > end) f3 = end;
  if (f3 === f2 + 1) return false;
  const at = row * ROW;
  out[at + AT_ID] = id;
  out[at + AT_PARENT] = parentId;
  out[at + AT_MAJOR] = major;
  out[at + AT_MINOR] = minor;
  out[at + AT_E2] = e2;
  out[at + AT_E3] = e3;
  out[at + AT_E4] = e4;
  out[at + AT_E5] = e5;
  out[at + AT_SEP] = sep;
  out[at + AT_F1] = f1;
  out[at + AT_F2] = f2;
  out[at + AT_F3] = f3;
  return true;
}

/** The entry of a line {@link locateLineInPlace} located at `row` of `at`. */
function buildLocated(text: string, at: Float64Array, row: number, lineNo: number, options: OptionLists): MountInfoEntry {
  const r = row * ROW;
  const e5 = at[r + AT_E5] ?? 0;
  const sep = at[r + AT_SEP] ?? 0;
  const f1 = at[r + AT_F1] ?? 0;
  const f2 = at[r + AT_F2] ?? 0;
  return {
    id: at[r + AT_ID] ?? 0,
    parentId: at[r + AT_PARENT] ?? 0,
    major: at[r + AT_MAJOR] ?? 0,
    minor: at[r + AT_MINOR] ?? 0,
    root: text.slice((at[r + AT_E2] ?? 0) + 1, at[r + AT_E3]),
    mountPoint: text.slice((at[r + AT_E3] ?? 0) + 1, at[r + AT_E4]),
    mountOptions: options.of(text.slice((at[r + AT_E4] ?? 0) + 1, e5)),
    optionalFields: sep > e5 ? text.slice(e5 + 1, sep).split(' ') : NO_FIELDS,
    fsType: text.slice(sep + 3, f1),
    source: text.slice(f1 + 1, f2),
    superOptions: options.of(text.slice(f2 + 1, at[r + AT_F3])),
    line: lineNo,
  };
}

/** One row of scratch space for the eager parse's located lines. */
function scratchRow(): Float64Array {
  return new Float64Array(ROW);
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
  const scratch = scratchRow();
  let lineNo = 0;
  for (let start = 0; start <= text.length; ) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    lineNo++;
    if (end > start) {
      const parsed =
        plainSpaces && locateLineInPlace(text, start, end, searches, scratch, 0)
          ? buildLocated(text, scratch, 0, lineNo, optionLists)
          : parseLine(text.slice(start, end), lineNo, split, optionLists);
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

/**
 * A mount table checked line by line exactly as {@link parseMountInfo} checks it (the same
 * errors, the same problems, the same strict throw), but whose entries are built only when asked
 * for: a look-up touches a few entries of a node's thousands. Each line's mount point and device
 * numbers are at hand at once (the indexes need them); `entry(i)` builds the i-th entry (the one
 * {@link parseMountInfo} gives at index i) on first use, and `entries()` all of them. The
 * property tests hold it to the eager parse's answers.
 */
export class ScannedMountInfo {
  readonly problems: readonly MountInfoProblem[];
  /** How many entries (good lines) the table has. */
  readonly count: number;
  readonly #text: string;
  /** Per entry: where its fields lie and its numbers (rows of {@link ROW} slots). */
  readonly #at: Float64Array;
  readonly #mountPoints: readonly string[];
  /** Entries built so far (by index); those of lines the general path decided are built at once. */
  readonly #built: (MountInfoEntry | undefined)[];
  readonly #options: OptionLists;
  #all: readonly MountInfoEntry[] | undefined;

  private constructor(text: string, at: Float64Array, mountPoints: string[], built: (MountInfoEntry | undefined)[], problems: MountInfoProblem[], options: OptionLists) {
    this.#text = text;
    this.#options = options;
    this.#at = at;
    this.#mountPoints = mountPoints;
    this.#built = built;
    this.problems = problems;
    this.count = mountPoints.length;
  }

  /** Scans `text` as {@link parseMountInfo} parses it (same options, same errors). */
  static scan(text: string, options?: ParseMountInfoOptions): ScannedMountInfo {
    const strict = options?.strict ?? true;
    const source = options?.source ?? DEFAULT_MOUNTINFO_SOURCE;
    const problems: MountInfoProblem[] = [];
    const plainSpaces = !hasOtherSpace(text);
    const generalOptions = new OptionLists();
    const split = plainSpaces ? splitFieldsOnSpaces : splitFields;
    const searches: InPlaceSearches = { space: new ForwardSearch(text, ' '), separator: new ForwardSearch(text, ' - ') };
    // One row per line at most, allocated once: growing a typed array as rows come (zero-filled
    // copies) took about a third of a cold scan of the bench node's 10,000 lines.
    let lines = 1;
    for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) lines++;
    const at = new Float64Array(ROW * lines);
    const mountPoints: string[] = [];
    const built: (MountInfoEntry | undefined)[] = [];
    let lineNo = 0;
    for (let start = 0; start <= text.length; ) {
      let end = text.indexOf('\n', start);
      if (end < 0) end = text.length;
      lineNo++;
      if (end > start) {
        const row = mountPoints.length;
        if (plainSpaces && locateLineInPlace(text, start, end, searches, at, row)) {
          at[row * ROW + AT_LINE] = lineNo;
          mountPoints.push(text.slice((at[row * ROW + AT_E3] ?? 0) + 1, at[row * ROW + AT_E4]));
          built.push(undefined);
        } else {
          const parsed = parseLine(text.slice(start, end), lineNo, split, generalOptions);
          if (typeof parsed === 'string') {
            const raw = text.slice(start, end);
            if (strict) throw new MountInfoParseError(source, lineNo, raw, parsed);
            problems.push({ line: lineNo, text: raw, error: parsed });
          } else {
            at[row * ROW + AT_MAJOR] = parsed.major;
            at[row * ROW + AT_MINOR] = parsed.minor;
            at[row * ROW + AT_LINE] = lineNo;
            mountPoints.push(parsed.mountPoint);
            built.push(parsed);
          }
        }
      }
      start = end + 1;
    }
    return new ScannedMountInfo(text, at, mountPoints, built, problems, generalOptions);
  }

  /** The i-th entry's mount point (verbatim), without building the entry. */
  mountPoint(i: number): string {
    return this.#mountPoints[i] ?? '';
  }

  /** The i-th entry's major device number, without building the entry. */
  major(i: number): number {
    return this.#at[i * ROW + AT_MAJOR] ?? 0;
  }

  /** The i-th entry's minor device number, without building the entry. */
  minor(i: number): number {
    return this.#at[i * ROW + AT_MINOR] ?? 0;
  }

  /** The i-th entry (built once); undefined past the end. */
  entry(i: number): MountInfoEntry | undefined {
    if (i < 0 || i >= this.count) return undefined;
    let e = this.#built[i];
    if (e === undefined) {
      e = buildLocated(this.#text, this.#at, i, this.#at[i * ROW + AT_LINE] ?? 0, this.#options);
      this.#built[i] = e;
    }
    return e;
  }

  /** Every entry, in file order: what {@link parseMountInfo} gives. */
  entries(): readonly MountInfoEntry[] {
    if (this.#all === undefined) {
      const all: MountInfoEntry[] = new Array<MountInfoEntry>(this.count);
      for (let i = 0; i < this.count; i++) all[i] = this.entry(i) as MountInfoEntry;
      this.#all = all;
    }
    return this.#all;
  }
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
