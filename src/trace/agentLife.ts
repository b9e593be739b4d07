/**
 * How an agent life shows in a trace file (`nodevol agent --trace`): each life begins with a
 * `step` line whose label starts with {@link AGENT_STARTED_PREFIX} and names the process and the
 * boot; a clean stop ends it with a `log` line starting with {@link AGENT_STOPPED_MESSAGE}. A
 * life without the stop line was killed: the next life reads the end of the file
 * ({@link lastAgentLife}) and records a `restart` (same boot) or a `reboot` (another boot id).
 */
import type { LogEvent, StepEvent, TraceEvent } from './events.js';

/** The message of the line a clean stop writes last. */
export const AGENT_STOPPED_MESSAGE = 'nodevol agent stopped';
/** The start of the label of the step line each agent life begins with. */
export const AGENT_STARTED_PREFIX = 'agent started';

/** The step line an agent life begins with. */
export function agentStartedStep(t: number, life: { readonly pid: number; readonly bootId: string; readonly gates: string }): StepEvent {
  return { kind: 'step', t, index: 0, label: `${AGENT_STARTED_PREFIX}: pid ${life.pid}, boot ${life.bootId}, ${life.gates}` };
}

/** The log line a clean stop writes last. */
export function agentStoppedLine(t: number, reason: string): LogEvent {
  return { kind: 'log', t, severity: 'I', message: `${AGENT_STOPPED_MESSAGE} (${reason})` };
}

/** Whether an event is the first line of an agent life. */
export function isAgentStart(e: TraceEvent): boolean {
  return e.kind === 'step' && e.label.startsWith(AGENT_STARTED_PREFIX);
}

/**
 * What the end of an existing trace file says about the last agent life in it: the label of its
 * start line, the boot it named, and whether it stopped cleanly. Undefined for an empty file.
 * A torn last line (the writer died mid-line) is no stop line; unreadable lines are skipped.
 */
export function lastAgentLife(tail: string): { label: string; bootId: string | undefined; stopped: boolean } | undefined {
  const lines = tail.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) return undefined;
  let stopped = false;
  try {
    const last = JSON.parse(lines[lines.length - 1] ?? '') as { kind?: unknown; message?: unknown };
    stopped = last.kind === 'log' && typeof last.message === 'string' && last.message.startsWith(AGENT_STOPPED_MESSAGE);
  } catch {
    // a torn last line: the writer died mid-line
  }
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      const e = JSON.parse(lines[i] ?? '') as { kind?: unknown; label?: unknown };
      if (e.kind === 'step' && typeof e.label === 'string' && e.label.startsWith(AGENT_STARTED_PREFIX)) {
        const boot = /boot ([0-9a-f-]+)/.exec(e.label)?.[1];
        return { label: e.label, bootId: boot, stopped };
      }
    } catch {
      // skip
    }
  }
  return { label: 'unknown', bootId: undefined, stopped };
}
