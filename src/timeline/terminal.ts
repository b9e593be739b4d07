/**
 * The timeline as text: runs side by side, one row block per step, each cell a few narrated lines
 * (the CSI calls and their answers, what volumesInUse became, crashes, violations and what the
 * attach/detach controller may do about them). For `nodevol demo` and for a terminal without a
 * browser.
 */
import type { TraceEvent, TraceRun } from '../trace/events.js';

export interface TerminalOptions {
  /** Total width in columns (default 120). */
  readonly width?: number;
  /** Colour with ANSI escapes (default false). */
  readonly color?: boolean;
}

interface Step {
  readonly index: number;
  readonly label: string;
}

/** Narrated lines per step for one run. */
export function narrate(run: TraceRun): Map<number, string[]> {
  const steps = stepsOf(run.events);
  const out = new Map<number, string[]>(steps.map((s) => [s.index, []]));
  const stepAt = (t: number): number => {
    let current = steps[0]?.index ?? 0;
    for (const s of stepsWithTime(run.events)) if (s.t <= t) current = s.index;
    return current;
  };
  const add = (t: number, line: string): void => {
    const k = stepAt(t);
    const list = out.get(k);
    if (list === undefined) out.set(k, [line]);
    else list.push(line);
  };
  // volumesInUse is told once per step, and again whenever it changes.
  let lastInUse: string | undefined;
  let lastStep: number | undefined;
  for (const e of [...run.events].sort((a, b) => a.t - b.t)) {
    if (stepAt(e.t) !== lastStep) {
      lastStep = stepAt(e.t);
      lastInUse = undefined;
    }
    switch (e.kind) {
      case 'csi':
        if (e.method === 'NodeGetCapabilities') break;
        add(e.t, `${e.method.replace(/^Node/, '')} ${e.end === undefined ? '… no answer' : e.outcome === 'OK' ? '✓' : `✗ ${e.outcome}`}`);
        break;
      case 'status': {
        const inUse = names(e.volumesInUse);
        if (inUse === lastInUse) break;
        lastInUse = inUse;
        add(e.t, `volumesInUse = ${inUse}`);
        break;
      }
      case 'crash':
        add(e.t, e.crash === 'reboot' ? '── node reboots: every mount gone ──' : '── kubelet killed and restarted ──');
        break;
      case 'violation':
        add(e.t, `✗ ${e.invariant}: ${e.message}`);
        if (e.invariant === 'in-use-reported') add(e.t, '→ the attach/detach controller may now detach it and attach it to another node while it is still staged here');
        break;
      case 'reconstruct':
        add(
          e.t,
          e.found === 'global-listing'
            ? `${shortName(e.volumeName)} found by the global listing → uncertain, kept in volumesInUse`
            : e.found === 'pod-directory'
              ? `${shortName(e.volumeName)} found in a pod directory → uncertain`
              : `✗ pod volume dir ${e.volumeName} not reconstructed`,
        );
        break;
      case 'log':
        break;
      case 'file':
        if (e.action === 'rmdir' && e.path.endsWith('/globalmount')) add(e.t, 'staging dir removed');
        break;
      case 'step':
      case 'operation':
      case 'mount':
        break;
      default: {
        const unreachable: never = e;
        return unreachable;
      }
    }
  }
  for (const [k, lines] of out) out.set(k, collapse(lines));
  return out;
}

/** Narrower than this, runs are told one after the other rather than side by side. */
const MIN_CELL = 28;

/**
 * Runs side by side, steps as row blocks, aligned; every line at most `width` columns, wrapped
 * between words (a comma-separated list, such as an agent's gates, also after its commas). A step
 * label too long for the step column is told on its own lines above its block; a terminal too
 * narrow for the runs side by side gets them one after the other.
 */
export function renderSideBySide(runs: readonly TraceRun[], options: TerminalOptions = {}): string {
  const width = Math.max(40, options.width ?? 120);
  const steps = mergeSteps(runs.map((r) => stepsOf(r.events)));
  const stories = runs.map(narrate);
  const paint = (text: string, code: string): string => (options.color === true ? `\u001b[${code}m${text}\u001b[0m` : text);
  const tone = (text: string): string => (text.startsWith('✗') ? '31' : text.startsWith('→') ? '33' : text.startsWith('──') ? '35' : '');
  const painted = (text: string): string => (tone(text) === '' ? text : paint(text, tone(text)));
  const stepCol = Math.min(28, Math.max(12, ...steps.map((s) => `${s.index + 1} ${s.label}`.length + 2)));
  const gap = 2;
  const cellWidth = Math.floor((width - stepCol - gap * runs.length) / Math.max(1, runs.length));
  const lines: string[] = [];

  if (cellWidth < MIN_CELL) {
    // One run after the other, each step's lines under it, indented.
    for (const [r, run] of runs.entries()) {
      for (const l of wrap(run.label, width)) lines.push(paint(l, '1'));
      for (const step of steps) {
        lines.push(...wrap(`${step.index + 1} ${step.label}`, width));
        for (const text of stories[r]?.get(step.index) ?? []) for (const l of wrap(text, width - 4)) lines.push(`    ${painted(l)}`.trimEnd());
      }
      lines.push('');
    }
    return `${lines.join('\n')}\n`;
  }

  lines.push((pad('step', stepCol) + runs.map((r) => ' '.repeat(gap) + pad(paint(clip(r.label, cellWidth), '1'), cellWidth, clip(r.label, cellWidth).length)).join('')).trimEnd());
  lines.push('─'.repeat(Math.min(width, stepCol + runs.length * (cellWidth + gap))));
  for (const step of steps) {
    const cells = stories.map((s) => (s.get(step.index) ?? []).flatMap((l) => wrap(l, cellWidth)));
    const height = Math.max(1, ...cells.map((c) => c.length));
    const label = `${step.index + 1} ${step.label}`;
    let stepLines = wrap(label, stepCol - 1);
    if (stepLines.length > Math.max(3, height) || brokeAWord(label, stepCol - 1)) {
      // Too long for the step column: on its own lines, the whole width.
      lines.push(...wrap(label, width));
      stepLines = [];
    }
    for (let i = 0; i < Math.max(height, stepLines.length); i++) {
      let row = pad(stepLines[i] ?? '', stepCol);
      for (const cell of cells) {
        const text = cell[i] ?? '';
        row += ' '.repeat(gap) + pad(painted(text), cellWidth, text.length);
      }
      lines.push(row.trimEnd());
    }
    lines.push('');
  }
  return `${lines.join('\n')}\n`;
}

function stepsWithTime(events: readonly TraceEvent[]): { index: number; t: number }[] {
  return events
    .filter((e): e is Extract<TraceEvent, { kind: 'step' }> => e.kind === 'step')
    .map((e) => ({ index: e.index, t: e.t }))
    .sort((a, b) => a.t - b.t);
}

function stepsOf(events: readonly TraceEvent[]): Step[] {
  const steps = events
    .filter((e): e is Extract<TraceEvent, { kind: 'step' }> => e.kind === 'step')
    .map((e) => ({ index: e.index, label: e.label }));
  return steps.length === 0 ? [{ index: 0, label: 'run' }] : steps;
}

function mergeSteps(lists: readonly Step[][]): Step[] {
  const byIndex = new Map<number, Step>();
  for (const list of lists) for (const s of list) if (!byIndex.has(s.index)) byIndex.set(s.index, s);
  return [...byIndex.values()].sort((a, b) => a.index - b.index);
}

/** Repeated identical lines become one with a count ("UnstageVolume ✗ INTERNAL ×8"). */
function collapse(lines: readonly string[]): string[] {
  const out: string[] = [];
  let last: string | undefined;
  let count = 0;
  const flush = (): void => {
    if (last !== undefined) out.push(count > 1 ? `${last} ×${count}` : last);
  };
  for (const l of lines) {
    if (l === last) count++;
    else {
      flush();
      last = l;
      count = 1;
    }
  }
  flush();
  return out;
}

function names(list: readonly string[]): string {
  if (list.length === 0) return '[]';
  return `[${list.map(shortName).join(', ')}]`;
}

/** A unique volume name's handle (`kubernetes.io/csi/<driver>^<handle>` → `<handle>`). */
function shortName(name: string): string {
  return name.slice(name.lastIndexOf('^') + 1);
}

/**
 * The pieces a line may break between: words (the space before each kept as its separator), and
 * the parts of a comma-separated list (broken after a comma, with no separator).
 */
function pieces(text: string): { sep: string; word: string }[] {
  const out: { sep: string; word: string }[] = [];
  for (const [i, word] of text.split(' ').entries()) {
    for (const [j, part] of word.split(/(?<=,)(?=.)/).entries()) out.push({ sep: i === 0 && j === 0 ? '' : j === 0 ? ' ' : '', word: part });
  }
  return out;
}

/**
 * Greedy wrap at `width` columns between the pieces above; continuation lines are indented by
 * two. A piece wider than a line is cut, the one case where a word breaks.
 */
export function wrap(text: string, width: number): string[] {
  if (text.length <= width) return [text];
  const out: string[] = [];
  let line = '';
  for (const { sep, word } of pieces(text)) {
    if (line === '') line = word;
    else if (line.length + sep.length + word.length <= width) line += sep + word;
    else {
      out.push(line);
      line = `  ${word}`;
    }
    while (line.length > width) {
      out.push(line.slice(0, width));
      line = `  ${line.slice(width)}`;
    }
  }
  if (line !== '') out.push(line);
  return out;
}

/** Whether wrapping `text` at `width` has to cut a word. */
function brokeAWord(text: string, width: number): boolean {
  return pieces(text).some((p, i) => p.word.length + (i === 0 ? 0 : 2) > width);
}

function clip(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

/** Pads to `width` visible columns; `visible` is the printed length when `s` holds escapes. */
function pad(s: string, width: number, visible = s.length): string {
  return visible >= width ? s : s + ' '.repeat(width - visible);
}
