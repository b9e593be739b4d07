/**
 * The trace file: one JSON object per line, each a {@link TraceEvent} (`nodevol agent --trace`
 * appends them; every agent life starts with a `step` line). Reading validates every line and
 * stops at the first bad one with an error naming the file, the line and the field.
 */
import { z } from 'zod';
import type { TraceEvent } from './events.js';

/** The most lines read from one trace file. */
export const MAX_TRACE_LINES = 1_000_000;

const t = z.number().finite().nonnegative();
const end = t.optional();
const str = z.string().max(64 * 1024);

const eventSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('step'), t, index: z.number().int().nonnegative(), label: str }).strict(),
  z
    .object({
      kind: z.literal('csi'),
      t,
      end,
      method: str,
      volumeId: str,
      outcome: str,
      details: str.optional(),
      request: z.unknown().optional(),
    })
    .strict(),
  z.object({ kind: z.literal('operation'), t, end, name: str, volumeName: str, podName: str, error: str.optional() }).strict(),
  z.object({ kind: z.literal('file'), t, action: z.enum(['write', 'remove', 'mkdir', 'rmdir', 'rename', 'lost']), path: str }).strict(),
  z.object({ kind: z.literal('mount'), t, action: z.enum(['mount', 'unmount', 'lost']), target: str, source: str.optional() }).strict(),
  z.object({ kind: z.literal('status'), t, volumesInUse: z.array(str), volumesAttached: z.array(str).optional(), source: z.enum(['read', 'written']).optional() }).strict(),
  z.object({ kind: z.literal('crash'), t, crash: z.enum(['restart', 'reboot']), detail: str.optional() }).strict(),
  z.object({ kind: z.literal('violation'), t, invariant: str, message: str }).strict(),
  z
    .object({ kind: z.literal('reconstruct'), t, found: z.enum(['global-listing', 'pod-directory', 'failed']), volumeName: str, podName: str.optional(), detail: str.optional() })
    .strict(),
  z.object({ kind: z.literal('log'), t, severity: z.enum(['I', 'W', 'E']), message: str }).strict(),
]);

export class TraceFileError extends Error {
  override readonly name = 'TraceFileError';
}

/** One line of the trace file for `event` (with its newline). */
export function traceLine(event: TraceEvent): string {
  return `${JSON.stringify(event)}\n`;
}

/** Every event of a trace file's text; throws {@link TraceFileError} naming file, line and field. */
export function parseTraceFile(text: string, file: string): TraceEvent[] {
  const events: TraceEvent[] = [];
  const lines = text.split('\n');
  if (lines.length > MAX_TRACE_LINES + 1) throw new TraceFileError(`${file}: more than ${MAX_TRACE_LINES} lines`);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line.trim() === '') continue;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (err) {
      throw new TraceFileError(`${file}:${i + 1}: not JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
    const parsed = eventSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue === undefined || issue.path.length === 0 ? '' : ` field ${issue.path.join('.')}:`;
      throw new TraceFileError(`${file}:${i + 1}:${field} ${issue?.message ?? 'not a trace event'}`);
    }
    events.push(parsed.data);
  }
  return events;
}
