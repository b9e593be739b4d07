/**
 * The path every call to the mock driver takes, whichever server it is for: a number and a log
 * line, a refusal while the driver stops, the per-volume lock, the fault rules, the work itself,
 * then a journal line and a log line for the answer.
 *
 * Concurrency: one call at a time per volume id. A call for a volume that has a call in flight
 * (including one a delay or hang fault holds) answers ABORTED at once, as drivers built on
 * csi-lib-utils' VolumeLocks do ("an operation with the given volume ID … already exists"); it
 * consumes no fault rule and is journaled. Calls for other volumes proceed concurrently.
 *
 * Faults (faults.ts) apply when a call arrives, after the ABORTED check: exit (the process exits
 * with {@link EXIT_FAULT_CODE}), hang (held until the driver stops, then UNAVAILABLE), delay,
 * then code. A delayed call still does its work after the delay even if its client gave up.
 */
import { errorMessage } from '../ports/fs.js';
import type { Clock } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import { GrpcStatus, grpcStatusName } from '../ports/csi.js';
import type { CsiStatusError } from '../adapters/grpc/server.js';
import { VolumeLocks } from '../csi/nodeStateMachine.js';
import { describeCsiFault, type CsiFault } from '../csi/faults.js';
import type { MockFaultBook, MockRpcMethod } from './faults.js';
import { redactSecrets, type JournalError, type MockJournal } from './journal.js';
import { status, statusError } from './status.js';

/** The exit code of a process an exit fault ends. */
export const EXIT_FAULT_CODE = 3;

/**
 * Runs one call's `effect` through the pipeline. `volumeId` names the volume the call is for
 * ('' for none); `lock: false` for calls that only read (they take no volume lock).
 */
export type Dispatch = <T extends object>(method: MockRpcMethod, request: object, volumeId: string, effect: () => Promise<T>, options?: { readonly lock?: boolean }) => Promise<T>;

export interface MockCallPipelineOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly faults: MockFaultBook;
  readonly journal: MockJournal;
  /** What an exit fault calls. When it returns (in-process tests), the call is never answered until the driver stops. */
  readonly exit: (code: number) => void;
  /** Aborted when the driver stops: held calls fail UNAVAILABLE, new calls are refused. */
  readonly stopping: AbortSignal;
}

export class MockCallPipeline {
  readonly #o: MockCallPipelineOptions;
  /** Volume ids with a call in flight. */
  readonly #busy = new VolumeLocks();
  #seq = 0;

  constructor(options: MockCallPipelineOptions) {
    this.#o = options;
  }

  readonly dispatch: Dispatch = async <T extends object>(
    method: MockRpcMethod,
    request: object,
    volumeId: string,
    effect: () => Promise<T>,
    options: { readonly lock?: boolean } = {},
  ): Promise<T> => {
    const lockId = options.lock === false ? '' : volumeId;
    const seq = ++this.#seq;
    const started = this.#o.clock.nowMs();
    const log = this.#o.logger.v(4);
    if (log.enabled(4)) log.info('GRPC call', { seq, method, volumeId, request: redactSecrets(request) });

    const complete = async (response: T | null, error: CsiStatusError | null): Promise<void> => {
      const durationMs = Math.round((this.#o.clock.nowMs() - started) * 1000) / 1000;
      const journalError: JournalError | null =
        error === null ? null : { code: error.code, name: grpcStatusName(error.code), message: error.details };
      await this.#o.journal.write({
        time: new Date().toISOString(),
        seq,
        method,
        volumeId,
        request: redactSecrets(request),
        response,
        error: journalError,
        durationMs,
      });
      if (error === null) {
        this.#o.logger.v(3).info('GRPC response', { seq, method, volumeId, durationMs });
      } else if (error.code === GrpcStatus.INTERNAL || error.code === GrpcStatus.UNKNOWN) {
        this.#o.logger.error(error.details, 'GRPC error', { seq, method, volumeId, code: grpcStatusName(error.code), durationMs });
      } else {
        this.#o.logger.v(2).info('GRPC error', { seq, method, volumeId, code: grpcStatusName(error.code), err: error.details, durationMs });
      }
    };

    if (this.#o.stopping.aborted) {
      const err = status(GrpcStatus.UNAVAILABLE, 'the mock driver is stopping');
      await complete(null, err);
      throw err;
    }
    const busy = this.#busy.acquire(lockId);
    if (busy !== undefined) {
      const err = status(busy.code, busy.details);
      await complete(null, err);
      throw err;
    }
    let rule: CsiFault | undefined;
    try {
      await this.#o.faults.refresh();
      rule = this.#o.faults.take(method, volumeId);
      // The rule's counter is on disk before the call goes on: a driver killed or exiting now
      // does not apply it again once it is back.
      if (rule !== undefined) await this.#o.faults.saved();
    } catch (err) {
      this.#busy.release(lockId);
      throw err;
    }
    if (rule !== undefined) this.#o.logger.info('Injecting a fault', { seq, method, volumeId, fault: describeCsiFault(rule) });
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.#busy.release(lockId);
    };
    const work = (async (): Promise<T> => {
      try {
        if (rule?.exit === true) {
          await this.#o.journal.write({ time: new Date().toISOString(), seq, method, volumeId, phase: 'exit', fault: 'exit' });
          this.#o.logger.warning('Exiting on an injected fault', { seq, method, volumeId, exitCode: EXIT_FAULT_CODE });
          this.#o.exit(EXIT_FAULT_CODE);
          // In-process, exit returns: the call stays unanswered, as if the process were gone.
          await this.#heldUntilStop();
        }
        let response: T;
        try {
          response = await this.#faulted(seq, method, volumeId, rule, effect);
        } catch (err) {
          const error = statusError(err);
          release();
          await complete(null, error);
          throw error;
        }
        // The work is done (and durable): the volume is free before the journal line says so.
        release();
        await complete(response, null);
        return response;
      } finally {
        release();
      }
    })();
    const clientTimeoutMs = rule?.clientTimeoutMs;
    if (clientTimeoutMs === undefined) return work;
    // The client gives up; the driver carries on with `work` (the volume stays busy until it is done).
    work.catch(() => undefined);
    await this.#sleep(clientTimeoutMs);
    await this.#o.journal.write({ time: new Date().toISOString(), seq, method, volumeId, phase: 'timedOut', fault: 'clientTimeout' });
    throw status(GrpcStatus.DEADLINE_EXCEEDED, `context deadline exceeded after ${clientTimeoutMs} ms (the driver carries on)`);
  };

  /** Applies hang, delay and code of a rule around the effect. */
  async #faulted<T>(seq: number, method: MockRpcMethod, volumeId: string, rule: CsiFault | undefined, effect: () => Promise<T>): Promise<T> {
    if (rule?.hang === true) {
      await this.#o.journal.write({ time: new Date().toISOString(), seq, method, volumeId, phase: 'held', fault: 'hang' });
      await this.#heldUntilStop();
    }
    if (rule?.delayMs !== undefined && rule.delayMs > 0) {
      // The sleep starts before the "held" line is produced, so whoever sees the line can move the clock.
      const sleeping = this.#sleep(rule.delayMs);
      sleeping.catch(() => undefined);
      await this.#o.journal.write({ time: new Date().toISOString(), seq, method, volumeId, phase: 'held', fault: 'delay' });
      await sleeping;
    }
    const code = rule?.code;
    if (code === undefined) return effect();
    const name = grpcStatusName(code);
    if (rule?.afterEffect !== true) throw status(code, `injected ${name}`);
    try {
      await effect();
    } catch (err) {
      throw status(code, `injected ${name} after the effect failed: ${errorMessage(err)}`);
    }
    throw status(code, `injected ${name} after the effect`);
  }

  /** Never resolves; rejects with UNAVAILABLE when the driver stops. */
  #heldUntilStop(): Promise<never> {
    return new Promise<never>((_resolve, reject) => {
      const fail = (): void => reject(status(GrpcStatus.UNAVAILABLE, 'the mock driver stopped while the call was held'));
      if (this.#o.stopping.aborted) fail();
      else this.#o.stopping.addEventListener('abort', fail, { once: true });
    });
  }

  /** Waits `ms` on the driver's clock; rejects with UNAVAILABLE when the driver stops first. */
  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const signal = this.#o.stopping;
      const onAbort = (): void => reject(status(GrpcStatus.UNAVAILABLE, 'the mock driver stopped while the call was delayed'));
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
      void this.#o.clock.sleep(ms).then(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }
}
