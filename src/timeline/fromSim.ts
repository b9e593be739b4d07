/**
 * A simulator run as timeline events: the same lanes a real node's trace fills. Columns are the
 * scenario's actions (a fault, a pod deleted or added, a file deleted), the crashes and each new
 * engine life; a CSI call is paired from the step that sent it to the step its answer reached
 * the engine; an invariant is shown where it was first seen, with how often it was seen again.
 */
import type { TraceStep } from '../trace/simTrace.js';
import type { TraceEvent, TraceRun } from '../trace/events.js';

export interface SimRunInput {
  readonly label: string;
  readonly summary?: string;
  readonly trace: readonly TraceStep[];
  readonly violations: readonly SimViolation[];
}

/** An invariant violation as the simulator records it (a run's, or a trace's). */
interface SimViolation {
  readonly invariant: string;
  readonly step: number;
  readonly message: string;
}

export function simRunToTrace(input: SimRunInput): TraceRun {
  const events: TraceEvent[] = [];
  let column = 0;
  events.push({ kind: 'step', t: 0, index: column++, label: 'start: pods mounted' });
  const sent = new Map<number, { t: number; method: string; volumeId: string; request: unknown; index: number }>();
  let inUse = '';
  let attached = '';
  /** The engine life whose node status was last shown. */
  let statusLife = 0;
  const stepTime = new Map<number, number>();
  for (const s of input.trace) {
    stepTime.set(s.step, s.timeMs);
    const t = s.timeMs;
    switch (s.event.kind) {
      case 'scenario':
        events.push({ kind: 'step', t, index: column++, label: scenarioLabel(s.event.label) });
        break;
      case 'crash': {
        const crash = s.event.label.startsWith('reboot') ? 'reboot' : 'restart';
        events.push({ kind: 'step', t, index: column++, label: crash });
        events.push({ kind: 'crash', t, crash, detail: s.event.label });
        break;
      }
      case 'start':
        if (s.life > 1 && s.event.label.includes('starts')) events.push({ kind: 'step', t, index: column++, label: `kubelet starts again (life ${s.life})` });
        break;
      case 'csi-send':
        if (s.csi !== undefined) {
          const index = events.length;
          events.push({ kind: 'csi', t, method: s.csi.method, volumeId: s.csi.volumeId, outcome: 'sent', request: s.csi.request });
          sent.set(s.csi.seq, { t, method: s.csi.method, volumeId: s.csi.volumeId, request: s.csi.request, index });
        }
        break;
      case 'csi-reply':
        if (s.csi !== undefined) {
          const out = sent.get(s.csi.seq);
          if (out !== undefined) {
            events[out.index] = { kind: 'csi', t: out.t, end: t, method: out.method, volumeId: out.volumeId, outcome: s.csi.code ?? 'UNKNOWN', request: out.request };
            sent.delete(s.csi.seq);
          }
        }
        break;
      case 'port-call':
      case 'timer':
        break;
      default: {
        const unreachable: never = s.event.kind;
        return unreachable;
      }
    }
    for (const op of s.operations ?? []) {
      events.push({
        kind: 'operation',
        t: op.startMs,
        end: t,
        name: op.name,
        volumeName: op.volumeName,
        podName: op.podName,
        ...(op.error === undefined ? {} : { error: op.error }),
      });
    }
    for (const r of s.reconstructed ?? []) events.push({ kind: 'reconstruct', t, ...r });
    const lost = s.event.kind === 'crash';
    for (const p of s.fs?.added ?? []) events.push({ kind: 'file', t, action: p.endsWith('/') ? 'mkdir' : 'write', path: trimSlash(p) });
    for (const p of s.fs?.removed ?? []) events.push({ kind: 'file', t, action: lost ? 'lost' : p.endsWith('/') ? 'rmdir' : 'remove', path: trimSlash(p) });
    for (const p of s.mounts?.added ?? []) events.push({ kind: 'mount', t, action: 'mount', target: p });
    for (const p of s.mounts?.removed ?? []) events.push({ kind: 'mount', t, action: lost ? 'lost' : 'unmount', target: p });
    const nowInUse = s.volumesInUse.join('\n');
    const nowAttached = s.volumesAttached.join('\n');
    // A 'start' step sits between two engine lives: the node status shown there is no write. A
    // new life shows the status it finds, changed or not.
    const newLife = s.life !== statusLife;
    if (s.life > 0 && s.event.kind !== 'start' && (newLife || nowInUse !== inUse || nowAttached !== attached)) {
      statusLife = s.life;
      inUse = nowInUse;
      attached = nowAttached;
      events.push({ kind: 'status', t, volumesInUse: [...s.volumesInUse], volumesAttached: [...s.volumesAttached] });
    }
  }
  // The first sighting of each invariant, with how often it was seen again.
  const byInvariant = new Map<string, { first: SimViolation; count: number }>();
  for (const v of input.violations) {
    const seen = byInvariant.get(v.invariant);
    if (seen === undefined) byInvariant.set(v.invariant, { first: v, count: 1 });
    else seen.count++;
  }
  for (const { first, count } of byInvariant.values()) {
    events.push({
      kind: 'violation',
      t: stepTime.get(first.step) ?? 0,
      invariant: first.invariant,
      message: count > 1 ? `${first.message} (seen ${count} times)` : first.message,
    });
  }
  events.sort((a, b) => a.t - b.t);
  return { label: input.label, ...(input.summary === undefined ? {} : { summary: input.summary }), events };
}

/** The scenario step's JSON label as words: `deletePod pod-a`, `fault NodeUnstageVolume vol-1 delay 60s`. */
function scenarioLabel(label: string): string {
  let step: unknown;
  try {
    step = JSON.parse(label);
  } catch {
    return label;
  }
  if (typeof step !== 'object' || step === null) return label;
  const { kind, ...rest } = step as Record<string, unknown>;
  const words = Object.values(rest).map((v) =>
    typeof v === 'object' && v !== null
      ? Object.entries(v as Record<string, unknown>)
          .filter(([k]) => k !== 'times')
          .map(([k, x]) => (k === 'method' || k === 'volume' || k === 'volumeId' ? String(x) : k === 'delayMs' && typeof x === 'number' ? `delay ${seconds(x)}` : `${k} ${String(x)}`))
          .join(' ')
      : String(v),
  );
  return [typeof kind === 'string' ? kind : 'step', ...words].join(' ');
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

function trimSlash(p: string): string {
  return p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p;
}
