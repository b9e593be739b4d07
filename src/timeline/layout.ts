/**
 * Places trace events on a timeline: columns per step, lanes per kind of actor, and runs drawn
 * one above the other on the same columns.
 *
 * The x axis is logical time: within a step, every distinct instant at which something starts
 * or ends gets its own slot, in order. A run spends milliseconds in one step and two minutes of
 * backoff in the next; drawn to scale, one of them would be a hair and the other a desert. The
 * real times stay in every item's tooltip. A step's column is as wide as the busiest run needs,
 * so that step N starts at the same x in every run.
 */
import type { CrashEvent, ReconstructEvent, TraceEvent, TraceRun, ViolationEvent } from '../trace/events.js';
import { analyzeInUse, volumeHandle, type InUseState, type InUseVerdict } from './inUse.js';

/** Pixels per slot. */
export const SLOT_PX = 28;
/** Empty room at the start of each column. */
export const COLUMN_PAD_PX = 10;
/** Smallest column. */
export const MIN_COLUMN_PX = 150;
/** Widest a column grows for its label alone (a longer label takes more lines: the header grows). */
export const MAX_LABEL_COLUMN_PX = 360;
/** Lines a column's label aims for before the column is widened. */
const HEAD_TARGET_LINES = 3;
/** Room after the last column, for the labels of the last items. */
export const TAIL_PX = 220;

export type LaneId = 'operations' | 'csi' | 'files' | 'mounts' | 'status' | 'logs';

/**
 * The lanes, in the order drawn: the one that decides safety first. The file lane is drawn
 * collapsed (a tick per change; the report expands it on demand): the mkdirs and writes of a
 * mount are many and say little next to the CSI calls and the mount table.
 */
export const LANES: readonly { readonly id: LaneId; readonly title: string; readonly collapsed?: boolean }[] = [
  { id: 'status', title: 'node.status: volumesInUse vs volumesAttached' },
  { id: 'operations', title: 'volume manager: found at start, operations' },
  { id: 'csi', title: 'CSI calls (at the driver)' },
  { id: 'mounts', title: 'mount table' },
  { id: 'files', title: 'files under the root dir', collapsed: true },
  { id: 'logs', title: 'errors and warnings logged' },
];

/**
 * One colour each: ok succeeded; error failed (or an error logged); pending no answer yet;
 * added created or mounted; removed removed or unmounted; lost gone with a reboot; warn a
 * warning logged; reason what reconstruction found at start; mixed a collapsed lane's box of
 * changes of several kinds; and for volumesInUse against volumesAttached (see inUse.ts): in-use,
 * not-yet, unsafe (dropped while staged), safe (dropped after unstage).
 */
export type Tone = 'ok' | 'error' | 'pending' | 'added' | 'removed' | 'lost' | 'warn' | 'reason' | 'mixed' | InUseState;

export interface TimelineItem {
  readonly x: number;
  readonly width: number;
  readonly label: string;
  readonly tone: Tone;
  /** Every detail, for the tooltip. */
  readonly tip: string;
  /**
   * A routine call (NodeGetCapabilities, which precedes nearly every call): drawn muted, and the
   * ones at one instant merged into one box ("GetCaps ×6") whose tooltip lists them.
   */
  readonly minor?: boolean;
}

export interface LaneLayout {
  readonly id: LaneId;
  readonly title: string;
  /** Drawn collapsed until asked (one row of ticks). */
  readonly collapsed: boolean;
  /** Items packed so that none overlaps another in its row. */
  readonly rows: readonly (readonly TimelineItem[])[];
  /**
   * For a collapsed lane, the one row drawn until it is opened: the items that lie within a
   * label's width of each other merged into one labelled box ("5 changes").
   */
  readonly summary: readonly TimelineItem[];
}

export interface ColumnLayout {
  readonly index: number;
  readonly label: string;
  readonly x: number;
  readonly width: number;
}

export interface MarkerLayout {
  /** Where the crash happened: its line is drawn just left of it (CRASH_LINE_PX), in the gap before the slot. */
  readonly x: number;
  readonly t: number;
  readonly crash: CrashEvent['crash'];
  readonly tip: string;
}

export interface ViolationLayout {
  /** Unique in the document: the anchor the violation list links to. */
  readonly id: string;
  readonly x: number;
  readonly stepIndex: number;
  readonly stepLabel: string;
  readonly invariant: string;
  readonly message: string;
  readonly t: number;
}

export interface RunLayout {
  readonly label: string;
  readonly summary: string | undefined;
  /** What the run did with volumesInUse: the report's headline for it. */
  readonly verdict: InUseVerdict;
  readonly lanes: readonly LaneLayout[];
  readonly markers: readonly MarkerLayout[];
  readonly violations: readonly ViolationLayout[];
}

export interface TimelineLayout {
  readonly columns: readonly ColumnLayout[];
  readonly width: number;
  readonly runs: readonly RunLayout[];
}

interface StepInfo {
  readonly index: number;
  readonly label: string;
  readonly t: number;
}

/** Per run: which step every instant belongs to, and its slot inside that step. */
class RunClock {
  readonly steps: StepInfo[];
  /** step index -> sorted distinct instants in it */
  readonly slots = new Map<number, number[]>();
  readonly lastT: number;

  constructor(events: readonly TraceEvent[]) {
    this.steps = events
      .filter((e): e is Extract<TraceEvent, { kind: 'step' }> => e.kind === 'step')
      .map((e) => ({ index: e.index, label: e.label, t: e.t }))
      .sort((a, b) => a.t - b.t || a.index - b.index);
    const instants = new Set<number>();
    let last = 0;
    for (const e of events) {
      instants.add(e.t);
      last = Math.max(last, e.t);
      if ((e.kind === 'csi' || e.kind === 'operation') && e.end !== undefined) {
        instants.add(e.end);
        last = Math.max(last, e.end);
      }
    }
    this.lastT = last;
    for (const t of [...instants].sort((a, b) => a - b)) {
      const step = this.stepOf(t);
      const list = this.slots.get(step);
      if (list === undefined) this.slots.set(step, [t]);
      else list.push(t);
    }
  }

  /** The index of the step running at `t` (the first step for anything before it). */
  stepOf(t: number): number {
    let current = this.steps[0]?.index ?? 0;
    for (const s of this.steps) {
      if (s.t <= t) current = s.index;
      else break;
    }
    return current;
  }

  slotCount(step: number): number {
    return this.slots.get(step)?.length ?? 0;
  }

  /** Room added before a slot of a step (px), so that a label left of a crash line ends before it. */
  readonly extra = new Map<number, Map<number, number>>();

  addExtra(step: number, slot: number, px: number): void {
    const m = this.extra.get(step) ?? new Map<number, number>();
    m.set(slot, (m.get(slot) ?? 0) + px);
    this.extra.set(step, m);
  }

  /** The room added before `slot` of `step` and before every earlier slot of it. */
  extraBefore(step: number, slot: number): number {
    let sum = 0;
    for (const [s, px] of this.extra.get(step) ?? []) if (s <= slot) sum += px;
    return sum;
  }

  extraTotal(step: number): number {
    let sum = 0;
    for (const px of this.extra.get(step)?.values() ?? []) sum += px;
    return sum;
  }

  /** Slot of `t` inside its step (binary search in the sorted instants). */
  slotOf(t: number): { step: number; slot: number } {
    const step = this.stepOf(t);
    const list = this.slots.get(step) ?? [];
    let lo = 0;
    let hi = list.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((list[mid] ?? 0) < t) lo = mid + 1;
      else hi = mid;
    }
    return { step, slot: Math.max(0, lo) };
  }
}

/** Width of a crash line, drawn in the gap before the crash's slot. */
export const CRASH_LINE_PX = 3;
/** Room kept between a label and a crash line to its right. */
const LINE_GAP_PX = 6;
/** Passes that make room for labels before crash lines (each pass settles every line it sees). */
const MAX_ROOM_PASSES = 8;

/**
 * Lays out the runs on shared columns. Runs should share their step list (same scenario).
 *
 * No label is crossed by a crash line: a label that starts before a line and would reach it
 * (a call with no answer, cut by the reboot) gets room, the line moving right: at the end of the
 * previous column when the crash is the first instant of its step (so every run moves with it),
 * else before the crash's slot in that run.
 */
export function layoutTimeline(runs: readonly TraceRun[]): TimelineLayout {
  const clocks = runs.map((r) => new RunClock(r.events));
  const columnRoom = new Map<number, number>();
  let layout = placeRuns(runs, clocks, columnRoom);
  for (let pass = 0; pass < MAX_ROOM_PASSES; pass++) {
    let moved = false;
    // Room at the end of a shared column: the most any run needs (they all move with it).
    const columnNeed = new Map<number, number>();
    for (const [i, run] of layout.runs.entries()) {
      const clock = clocks[i];
      if (clock === undefined) continue;
      for (const m of run.markers) {
        const lineLeft = m.x - CRASH_LINE_PX;
        let need = 0;
        for (const lane of run.lanes) {
          for (const item of [...lane.rows.flat(), ...lane.summary]) {
            if (item.x >= m.x) continue;
            need = Math.max(need, Math.ceil(item.x + textWidth(item.label) + LINE_GAP_PX - lineLeft));
          }
        }
        if (need <= 0) continue;
        const { step, slot } = clock.slotOf(m.t);
        const previous = layout.columns.filter((c) => c.index < step).at(-1);
        if (slot === 0 && previous !== undefined) columnNeed.set(previous.index, Math.max(need, columnNeed.get(previous.index) ?? 0));
        else clock.addExtra(step, slot, need);
        moved = true;
      }
    }
    for (const [index, need] of columnNeed) columnRoom.set(index, (columnRoom.get(index) ?? 0) + need);
    if (!moved) break;
    layout = placeRuns(runs, clocks, columnRoom);
  }
  return layout;
}

function placeRuns(runs: readonly TraceRun[], clocks: readonly RunClock[], columnRoom: ReadonlyMap<number, number>): TimelineLayout {
  const stepLabels = new Map<number, string>();
  for (const c of clocks) for (const s of c.steps) if (!stepLabels.has(s.index)) stepLabels.set(s.index, s.label);
  if (stepLabels.size === 0) stepLabels.set(0, 'run');
  const columns: ColumnLayout[] = [];
  let x = 0;
  for (const index of [...stepLabels.keys()].sort((a, b) => a - b)) {
    const label = stepLabels.get(index) ?? `step ${index}`;
    const forSlots = Math.max(0, ...clocks.map((c) => COLUMN_PAD_PX * 2 + (c.slotCount(index) + 1) * SLOT_PX + c.extraTotal(index)));
    // A long label widens its column up to a point, then takes more lines: never cut.
    const forLabel = Math.min(MAX_LABEL_COLUMN_PX, Math.ceil((label.length * HEAD_CHAR_PX) / HEAD_TARGET_LINES) + HEAD_LABEL_PAD_PX);
    const width = Math.max(MIN_COLUMN_PX, forSlots, forLabel) + (columnRoom.get(index) ?? 0);
    columns.push({ index, label, x, width });
    x += width;
  }
  const columnX = new Map(columns.map((c) => [c.index, c.x]));
  const layouts = runs.map((run, i) => layoutRun(run, clocks[i] ?? new RunClock([]), columnX, columns, i));
  // Room after the last column for the labels of what happens last, however long they are.
  let width = x + TAIL_PX;
  for (const run of layouts) for (const lane of run.lanes) for (const item of [...lane.rows.flat(), ...lane.summary]) width = Math.max(width, Math.ceil(item.x + Math.max(item.width, textWidth(item.label)) + LINE_GAP_PX));
  return { columns, width, runs: layouts };
}

/** Horizontal padding of a column label, the step number's badge included. */
const HEAD_LABEL_PAD_PX = 36;
/** About the width of a character of the 12px header font. */
const HEAD_CHAR_PX = 7;

function layoutRun(run: TraceRun, clock: RunClock, columnX: ReadonlyMap<number, number>, columns: readonly ColumnLayout[], runIndex: number): RunLayout {
  const xOf = (t: number): number => {
    const { step, slot } = clock.slotOf(t);
    return (columnX.get(step) ?? 0) + COLUMN_PAD_PX + slot * SLOT_PX + clock.extraBefore(step, slot);
  };
  const endX = xOf(clock.lastT) + SLOT_PX;
  // A call or an operation that never answered ends at the crash that killed its caller, before its line.
  const crashTimes = run.events.filter((e) => e.kind === 'crash').map((e) => e.t).sort((a, b) => a - b);
  /** The right edge of the box of a span from `start` to `end` (undefined: no answer). */
  const spanEnd = (start: number, end: number | undefined): number => {
    if (end !== undefined) return xOf(end) + SLOT_PX - 4;
    const crash = crashTimes.find((t) => t > start);
    return crash === undefined ? endX + SLOT_PX - 4 : xOf(crash) - CRASH_LINE_PX - 2;
  };
  const spanWidth = (start: number, end: number | undefined): number => Math.max(SLOT_PX - 4, spanEnd(start, end) - xOf(start));
  const items = new Map<LaneId, TimelineItem[]>(LANES.map((l) => [l.id, []]));
  const push = (lane: LaneId, item: TimelineItem): void => {
    items.get(lane)?.push(item);
  };
  const markers: MarkerLayout[] = [];
  const violations: ViolationLayout[] = [];
  const statuses = run.events.filter((e): e is Extract<TraceEvent, { kind: 'status' }> => e.kind === 'status');
  const inUse = analyzeInUse(run.events);

  for (const e of run.events) {
    switch (e.kind) {
      case 'step':
        break;
      case 'csi': {
        const x0 = xOf(e.t);
        const answered = e.end !== undefined;
        // NodeGetCapabilities precedes nearly every call: a muted box, merged per instant.
        const minor = e.method === 'NodeGetCapabilities' && answered && e.outcome === 'OK';
        push('csi', {
          x: x0,
          width: spanWidth(e.t, e.end),
          label: minor ? ROUTINE_LABEL : `${shortMethod(e.method)}${e.volumeId === '' ? '' : ` ${shortId(e.volumeId)}`}${answered ? (e.outcome === 'OK' ? '' : ` → ${e.outcome}`) : ' (no answer)'}`,
          ...(minor ? { minor } : {}),
          tone: !answered ? 'pending' : e.outcome === 'OK' ? 'ok' : 'error',
          tip: [
            `${e.method} volume ${e.volumeId || '-'}`,
            `sent at ${ms(e.t)}, ${answered ? `answered at ${ms(e.end)} (${ms(e.end - e.t)})` : 'no answer recorded'}`,
            `outcome: ${e.outcome}${e.details === undefined || e.details === '' ? '' : ` — ${e.details}`}`,
            ...(e.request === undefined ? [] : [`request: ${clip(JSON.stringify(e.request), 600)}`]),
          ].join('\n'),
        });
        break;
      }
      case 'operation': {
        const failed = e.error !== undefined;
        push('operations', {
          x: xOf(e.t),
          width: spanWidth(e.t, e.end),
          label: `${e.name} ${shortVolume(e.volumeName)}${failed ? ' ✗' : e.end === undefined ? ' …' : ''}`,
          tone: e.end === undefined ? 'pending' : failed ? 'error' : 'ok',
          tip: [
            `${e.name} volume ${e.volumeName}${e.podName === '' ? '' : ` pod ${e.podName}`}`,
            `started at ${ms(e.t)}, ${e.end === undefined ? 'never finished' : `finished at ${ms(e.end)} (${ms(e.end - e.t)})`}`,
            ...(failed ? [`error: ${clip(e.error, 600)}`] : []),
          ].join('\n'),
        });
        break;
      }
      case 'file':
        push('files', {
          x: xOf(e.t),
          width: SLOT_PX - 4,
          label: `${fileVerb(e.action)} ${shortPath(e.path)}`,
          tone: e.action === 'remove' || e.action === 'rmdir' ? 'removed' : e.action === 'lost' ? 'lost' : 'added',
          tip: `${e.action} ${e.path} at ${ms(e.t)}`,
        });
        break;
      case 'mount':
        push('mounts', {
          x: xOf(e.t),
          width: SLOT_PX - 4,
          label: `${e.action === 'mount' ? '+' : '−'} ${shortPath(e.target)}`,
          tone: e.action === 'mount' ? 'added' : e.action === 'lost' ? 'lost' : 'removed',
          tip: `${e.action} ${e.target}${e.source === undefined ? '' : ` (source ${e.source})`} at ${ms(e.t)}`,
        });
        break;
      case 'status': {
        const next = statuses[statuses.indexOf(e) + 1];
        const x0 = xOf(e.t);
        const x1 = next === undefined ? endX : xOf(next.t);
        const a = inUse.statuses.get(e);
        const state = a?.state ?? 'in-use';
        const lists = `in use: ${list(e.volumesInUse)} · attached: ${e.volumesAttached === undefined ? '?' : list(e.volumesAttached)}`;
        push('status', {
          x: x0,
          width: Math.max(SLOT_PX - 4, x1 - x0 - 2),
          label: a === undefined || a.label === '' ? lists : `${a.label} · ${lists}`,
          tone: state,
          tip: [
            `at ${ms(e.t)}${e.source === undefined ? '' : e.source === 'read' ? ', as read by the agent' : ', as written by the agent'}`,
            `volumesInUse: ${e.volumesInUse.join(', ') || '(none)'}`,
            `volumesAttached: ${e.volumesAttached === undefined ? '(not read yet)' : e.volumesAttached.join(', ') || '(none)'}`,
            ...(a === undefined ? [] : [a.note]),
          ].join('\n'),
        });
        break;
      }
      case 'reconstruct': {
        // Why the volume manager holds a volume it did not mount in this life: drawn with its
        // operations, where the NodeUnstageVolume it leads to follows.
        push('operations', {
          x: xOf(e.t),
          width: SLOT_PX - 4,
          label: reconstructLabel(e),
          tone: 'reason',
          tip: reconstructTip(e, ms(e.t)),
        });
        break;
      }
      case 'log':
        if (e.severity === 'I') break;
        push('logs', {
          x: xOf(e.t),
          width: SLOT_PX - 4,
          label: `${e.severity} ${clip(e.message, 60)}`,
          tone: e.severity === 'E' ? 'error' : 'warn',
          tip: `${e.severity} at ${ms(e.t)}: ${e.message}`,
        });
        break;
      case 'crash':
        markers.push({ x: xOf(e.t), t: e.t, crash: e.crash, tip: `${e.crash === 'reboot' ? 'node reboot' : 'kubelet restart (kill -9)'} at ${ms(e.t)}${e.detail === undefined ? '' : `: ${e.detail}`}` });
        break;
      case 'violation':
        violations.push(violationLayout(e, xOf(e.t), clock, columns, runIndex, violations.length));
        break;
      default: {
        const unreachable: never = e;
        return unreachable;
      }
    }
  }
  return {
    label: run.label,
    summary: run.summary,
    verdict: inUse.verdict,
    lanes: LANES.map((l) => {
      const laneItems = mergeMinor(items.get(l.id) ?? []);
      return { id: l.id, title: l.title, collapsed: l.collapsed === true, rows: packRows(laneItems), summary: l.collapsed === true ? summarize(laneItems) : [] };
    }),
    markers,
    violations,
  };
}

/** "vol-1: global listing → uncertain": how reconstruction found the volume, and what it made of it. */
function reconstructLabel(e: ReconstructEvent): string {
  switch (e.found) {
    case 'global-listing':
      return `${shortVolume(e.volumeName)}: global listing → uncertain`;
    case 'pod-directory':
      return `${shortVolume(e.volumeName)}: pod dir${e.podName === undefined ? '' : ` ${shortPod(e.podName)}`} → uncertain`;
    case 'failed':
      return `✗ ${shortVolume(e.volumeName)}: pod dir${e.podName === undefined ? '' : ` ${shortPod(e.podName)}`} not reconstructed`;
    default: {
      const unreachable: never = e.found;
      return unreachable;
    }
  }
}

function reconstructTip(e: ReconstructEvent, at: string): string {
  const uncertain = 'The volume manager added it to its actual state as uncertain: it stays in volumesInUse, and it is unmounted (NodeUnstageVolume) unless a pod wants it again.';
  switch (e.found) {
    case 'global-listing':
      return [
        `reconstruction at ${at}: the CSI plugin listed the global mount of ${e.volumeName}, which no pod directory names (CSIGlobalMountReconstruction)`,
        ...(e.detail === undefined ? [] : [`global mount: ${e.detail}`]),
        uncertain,
      ].join('\n');
    case 'pod-directory':
      return [`reconstruction at ${at}: the volume directory of pod ${e.podName ?? '?'} names ${e.volumeName}`, uncertain].join('\n');
    case 'failed':
      return [
        `reconstruction at ${at}: the volume directory ${e.volumeName} of pod ${e.podName ?? '?'} could not be reconstructed`,
        ...(e.detail === undefined ? [] : [`error: ${clip(e.detail, 600)}`]),
        'The volume manager does not know this volume from it: it only cleans up the directory.',
      ].join('\n');
    default: {
      const unreachable: never = e.found;
      return unreachable;
    }
  }
}

/** A pod UID is shown by its first 8 characters; a short name whole. */
function shortPod(name: string): string {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(name) ? name.slice(0, 8) : clip(name, 24);
}

function violationLayout(e: ViolationEvent, x: number, clock: RunClock, columns: readonly ColumnLayout[], runIndex: number, n: number): ViolationLayout {
  const stepIndex = clock.stepOf(e.t);
  return {
    id: `v-${runIndex}-${n}`,
    x,
    stepIndex,
    stepLabel: columns.find((c) => c.index === stepIndex)?.label ?? `step ${stepIndex}`,
    invariant: e.invariant,
    message: e.message,
    t: e.t,
  };
}

/** The label of a routine NodeGetCapabilities call. */
export const ROUTINE_LABEL = 'GetCaps';

/** Minor items at the same x become one box that counts them ("GetCaps ×6"), its tooltip listing them. */
function mergeMinor(items: readonly TimelineItem[]): TimelineItem[] {
  const out: TimelineItem[] = [];
  const atX = new Map<number, { index: number; tips: string[] }>();
  for (const item of items) {
    if (item.minor !== true) {
      out.push(item);
      continue;
    }
    const seen = atX.get(item.x);
    if (seen === undefined) {
      atX.set(item.x, { index: out.length, tips: [item.tip] });
      out.push(item);
    } else {
      seen.tips.push(item.tip);
      const first = out[seen.index];
      if (first !== undefined) out[seen.index] = { ...first, label: `${ROUTINE_LABEL} ×${seen.tips.length}`, tip: `${seen.tips.length} calls at this instant:\n${seen.tips.join('\n\n')}` };
    }
  }
  return out;
}

/** Tooltip lines listed for a merged box of a collapsed lane. */
const SUMMARY_TIPS = 30;

/**
 * A collapsed lane's row: from left to right, each box takes the items that start before its
 * label ends ("1 change", "12 changes"); a box is drawn in its items' tone when they share one.
 */
function summarize(items: readonly TimelineItem[]): TimelineItem[] {
  const sorted = [...items].sort((a, b) => a.x - b.x);
  const out: TimelineItem[] = [];
  let i = 0;
  while (i < sorted.length) {
    const first = sorted[i];
    if (first === undefined) break;
    let group = [first];
    // The box grows with its count: take items until the label, counting them, would end before the next.
    for (;;) {
      const next = sorted[i + group.length];
      if (next === undefined || next.x >= first.x + textWidth(changes(group.length + 1)) + 4) break;
      group = [...group, next];
    }
    const tone = group.every((g) => g.tone === first.tone) ? first.tone : 'mixed';
    const tips = group.slice(0, SUMMARY_TIPS).map((g) => g.tip);
    if (group.length > SUMMARY_TIPS) tips.push(`… and ${group.length - SUMMARY_TIPS} more (open the lane)`);
    out.push({ x: first.x, width: SLOT_PX - 4, label: changes(group.length), tone, tip: tips.join('\n') });
    i += group.length;
  }
  return out;
}

function changes(n: number): string {
  return `${n} change${n === 1 ? '' : 's'}`;
}

/** Greedy interval packing: each item goes to the first row where it does not overlap. */
function packRows(items: readonly TimelineItem[]): TimelineItem[][] {
  const rows: TimelineItem[][] = [];
  const rowEnds: number[] = [];
  for (const item of [...items].sort((a, b) => a.x - b.x)) {
    let row = rowEnds.findIndex((end) => end <= item.x);
    if (row < 0) {
      row = rows.length;
      rows.push([]);
      rowEnds.push(0);
    }
    rows[row]?.push(item);
    rowEnds[row] = item.x + Math.max(item.width, textWidth(item.label)) + 4;
  }
  return rows;
}

/**
 * Rough width of a label's box in the timeline's 11px font (text, padding and border), so that
 * labels do not run into each other or into a crash line; on the generous side (the browser test
 * measures the real boxes).
 */
export function textWidth(label: string): number {
  return label.length * 6.5 + 10;
}

function ms(t: number): string {
  if (t < 1000) return `${Math.round(t)} ms`;
  if (t < 120_000) return `${(t / 1000).toFixed(t < 10_000 ? 2 : 1)} s`;
  return `${(t / 60_000).toFixed(1)} min`;
}

function clip(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

function shortMethod(m: string): string {
  return m.startsWith('Node') ? m.slice(4) : m;
}

function shortId(id: string): string {
  return id === '' ? '' : clip(id, 18);
}

/** kubernetes.io/csi/<driver>^<handle> → <handle>; other names unchanged (clipped). */
function shortVolume(name: string): string {
  return clip(name.includes('^') ? volumeHandle(name) : name.slice(name.lastIndexOf('/') + 1), 24);
}

/**
 * The last two path components, which is what tells kubelet's paths apart; a SHA-256 directory
 * name (the global mount's) is shown by its first 8 digits, as git shows a commit. The tooltip
 * holds the whole path.
 */
function shortPath(p: string): string {
  const parts = p.split('/').filter((s) => s !== '');
  return parts
    .slice(-2)
    .map((c) => (/^[0-9a-f]{64}$/.test(c) ? c.slice(0, 8) : c))
    .join('/');
}

function fileVerb(a: FileEventAction): string {
  switch (a) {
    case 'write':
      return 'write';
    case 'remove':
      return 'rm';
    case 'mkdir':
      return 'mkdir';
    case 'rmdir':
      return 'rmdir';
    case 'rename':
      return 'rename';
    case 'lost':
      return 'lost';
    default: {
      const unreachable: never = a;
      return unreachable;
    }
  }
}
type FileEventAction = Extract<TraceEvent, { kind: 'file' }>['action'];

function list(names: readonly string[]): string {
  return names.length === 0 ? '∅' : names.map(shortVolume).join(', ');
}
