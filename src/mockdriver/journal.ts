/**
 * The mock driver's call journal (`--journal FILE`): one JSON object per line, appended in the
 * order the lines are produced, each written out (appendFile: open, write, close) before the call
 * it describes is answered, so a test that got an answer finds its line.
 *
 * Lines:
 *  - a completed call: {time, seq, method, volumeId, request, response, error, durationMs};
 *  - a call a fault holds, when it arrives: {time, seq, method, volumeId, phase: "held", fault: "delay" | "hang"};
 *  - a call an exit fault ends the process on: {time, seq, method, volumeId, phase: "exit", fault: "exit"};
 *  - a call a clientTimeoutMs fault answered DEADLINE_EXCEEDED while it keeps running at the
 *    driver: {time, seq, method, volumeId, phase: "timedOut", fault: "clientTimeout"} (its
 *    completed-call line follows when the work is done).
 * `seq` numbers calls in order of arrival (from 1, per driver start); `time` is ISO-8601 with
 * milliseconds, UTC; `volumeId` is '' for calls about no volume. Every `secrets` map in a request
 * has its values replaced by {@link REDACTED}.
 */
import { promises as fsp } from 'node:fs';

import type { Logger } from '../ports/logger.js';

/** What a secret's value is replaced with (csi-lib-utils' protosanitizer uses the same text). */
export const REDACTED = '***stripped***';

export interface JournalError {
  readonly code: number;
  readonly name: string;
  readonly message: string;
}

export interface JournalCallLine {
  readonly time: string;
  readonly seq: number;
  readonly method: string;
  readonly volumeId: string;
  readonly request: unknown;
  readonly response: unknown;
  readonly error: JournalError | null;
  readonly durationMs: number;
}

export interface JournalPhaseLine {
  readonly time: string;
  readonly seq: number;
  readonly method: string;
  readonly volumeId: string;
  readonly phase: 'held' | 'exit' | 'timedOut';
  readonly fault: 'delay' | 'hang' | 'exit' | 'clientTimeout';
}

export type JournalLine = JournalCallLine | JournalPhaseLine;

/** A copy of a request with every `secrets` map's values replaced (at any depth). */
export function redactSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactSecrets);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (k === 'secrets' && typeof v === 'object' && v !== null && !Array.isArray(v)) {
      out[k] = Object.fromEntries(Object.keys(v).map((name) => [name, REDACTED]));
    } else {
      out[k] = redactSecrets(v);
    }
  }
  return out;
}

/** Appends journal lines to a file; a driver without --journal gets one that writes nothing. */
export class MockJournal {
  readonly file: string | undefined;
  readonly #logger: Logger;
  #chain: Promise<unknown> = Promise.resolve();
  #failed = false;
  readonly #observer: ((line: JournalLine) => void) | undefined;

  constructor(file: string | undefined, logger: Logger, observer?: (line: JournalLine) => void) {
    this.file = file;
    this.#logger = logger;
    this.#observer = observer;
  }

  /** Appends one line; resolves once it is written. Never rejects (a failure is logged once). */
  write(line: JournalLine): Promise<void> {
    this.#observer?.(line);
    const file = this.file;
    if (file === undefined) return Promise.resolve();
    const text = `${JSON.stringify(line)}\n`;
    const run = this.#chain.then(async () => {
      try {
        await fsp.appendFile(file, text, { encoding: 'utf8', mode: 0o644 });
        this.#failed = false;
      } catch (err) {
        if (!this.#failed) this.#logger.error(err, 'Cannot append to the journal', { file });
        this.#failed = true;
      }
    });
    this.#chain = run;
    return run;
  }

  /** Resolves when every line written so far is out. */
  flush(): Promise<void> {
    return this.#chain.then(() => undefined);
  }
}
