/**
 * The timeline as text: runs side by side, one row block per step, each cell a few narrated lines
 * (the CSI calls and their answers, what volumesInUse became, crashes, violations and what the
 * attach/detach controller may do about them). For `nodevol demo` and for a terminal without a
 * browser.
 */
import type { TraceEvent, TraceRun } from './events.js';

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
      case 'log':
        if (e.message.startsWith('Global mount with no pod directory')) add(e.t, 'global mount registered as uncertain (KEP-6058)');
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

/** Runs side by side, steps as row blocks, aligned. */
export function renderSideBySide(runs: readonly TraceRun[], options: TerminalOptions = {}): string {
  const width = Math.max(60, options.width ?? 120);
  const steps = mergeSteps(runs.map((r) => stepsOf(r.events)));
  const stories = runs.map(narrate);
  const stepCol = Math.min(28, Math.max(12, ...steps.map((s) => s.label.length + 3)));
  const gap = 2;
  const cellWidth = Math.floor((width - stepCol - gap * runs.length) / Math.max(1, runs.length));
  const paint = (text: string, code: string): string => (options.color === true ? `\u001b[${code}m${text}\u001b[0m` : text);
  const lines: string[] = [];
  lines.push((pad('step', stepCol) + runs.map((r) => ' '.repeat(gap) + pad(paint(clip(r.label, cellWidth), '1'), cellWidth, clip(r.label, cellWidth).length)).join('')).trimEnd());
  lines.push('─'.repeat(Math.min(width, stepCol + runs.length * (cellWidth + gap))));
  for (const step of steps) {
    const cells = stories.map((s) => (s.get(step.index) ?? []).flatMap((l) => wrap(l, cellWidth)));
    const height = Math.max(1, ...cells.map((c) => c.length));
    const stepLines = wrap(`${step.index + 1} ${step.label}`, stepCol - 1);
    for (let i = 0; i < Math.max(height, stepLines.length); i++) {
      let row = pad(stepLines[i] ?? '', stepCol);
      for (const cell of cells) {
        const text = cell[i] ?? '';
        const tone = text.startsWith('✗') ? '31' : text.startsWith('→') ? '33' : text.startsWith('──') ? '35' : '';
        row += ' '.repeat(gap) + pad(tone === '' ? text : paint(text, tone), cellWidth, text.length);
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
  return `[${list.map((n) => n.slice(n.lastIndexOf('^') + 1)).join(', ')}]`;
}

function wrap(text: string, width: number): string[] {
  if (text.length <= width) return [text];
  const out: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line === '') line = word;
    else if (line.length + 1 + word.length <= width) line += ` ${word}`;
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

function clip(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

/** Pads to `width` visible columns; `visible` is the printed length when `s` holds escapes. */
function pad(s: string, width: number, visible = s.length): string {
  return visible >= width ? s : s + ' '.repeat(width - visible);
}
