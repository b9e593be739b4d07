/**
 * `nodevol audit --interval D`: the audit as a long-running process (the DaemonSet's mode). It
 * audits every D and serves the last run's findings on /metrics as Prometheus gauges, so no
 * textfile collector is needed; /healthz says whether the last run completed within 2 × D.
 *
 * After a run that could not complete (unreadable root dir or mount table, cluster API error,
 * neither the pods dir nor the CSI plugin dir readable) /metrics serves
 * `nodevol_audit_last_run_success 0`, why (`nodevol_audit_last_run_failure_info{reason}`) and no
 * verdict at all: a stale or partial verdict would be a wrong one. SIGTERM and SIGINT stop it, aborting the run in progress (its API
 * requests are destroyed with their connections). A run that failed on an API answer with a
 * Retry-After longer than the interval puts the next run after it (bounded).
 */
import { Registry } from 'prom-client';
import { realClock } from '../adapters/node/clock.js';
import { parseBindAddress, startHttpServer } from '../agent/httpServer.js';
import { errorMessage } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import { EXIT_UNKNOWN } from '../audit/report.js';
import { requestTimeoutMs } from './auditCluster.js';
import { AuditRunFailure } from './auditFailure.js';
import { auditExitCode, collectAuditRun, nothingReadFailure, type AuditRunFlags } from './auditRun.js';
import { fullReport, renderProm, renderPromFailure } from './auditOutput.js';
import { parseDuration } from './duration.js';

/** The longest Retry-After the next run waits for; a longer one (or a huge one) is cut to this. */
export const MAX_RETRY_AFTER_WAIT_MS = 10 * 60_000;

/**
 * When the next run starts: after the interval, or after the API server's Retry-After when the
 * last run failed on an answer asking for longer (at most {@link MAX_RETRY_AFTER_WAIT_MS}).
 */
export function nextRunDelayMs(intervalMs: number, retryAfterMs: number | undefined): number {
  return retryAfterMs === undefined ? intervalMs : Math.max(intervalMs, Math.min(retryAfterMs, MAX_RETRY_AFTER_WAIT_MS));
}

function waitOrStop(ms: number, signal: AbortSignal): Promise<'tick' | 'stop'> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve('stop');
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve('stop');
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve('tick');
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** A registry whose exposition is the text of the last audit run. */
class LastRunRegistry extends Registry {
  text = '';
  override metrics(): Promise<string> {
    return Promise.resolve(this.text);
  }
}

export async function serveAudit(flags: AuditRunFlags, interval: string, bindAddress: string, logger: Logger): Promise<number> {
  let intervalMs: number;
  let bind;
  try {
    intervalMs = parseDuration(interval);
    if (intervalMs < 1000) throw new Error('must be at least 1s');
    bind = parseBindAddress(bindAddress);
    requestTimeoutMs(flags);
  } catch (err) {
    process.stderr.write(`nodevol audit: ${errorMessage(err)}\n`);
    return EXIT_UNKNOWN;
  }
  const registry = new LastRunRegistry();
  registry.text = await renderPromFailure(Date.now());
  // When the last audit completed, on the monotonic clock: a wall clock stepped by hours must not
  // make /healthz fail (or pass) the liveness probe.
  let lastCompletedMs: number | undefined;
  let http;
  try {
    http = await startHttpServer(bind, registry, {
      health: () => {
        if (lastCompletedMs === undefined) return { healthy: false, reason: 'no audit has completed yet' };
        const sinceMs = Math.round(realClock.nowMs() - lastCompletedMs);
        return sinceMs <= 2 * intervalMs
          ? { healthy: true }
          : { healthy: false, reason: `no audit has completed for ${sinceMs} ms (interval ${intervalMs} ms)` };
      },
      ready: () => lastCompletedMs !== undefined,
    });
  } catch (err) {
    process.stderr.write(`nodevol audit: --metrics-bind-address ${bindAddress}: ${errorMessage(err)}\n`);
    return EXIT_UNKNOWN;
  }
  logger.info('Audit serving metrics', { address: `${bind.host}:${http.port}`, interval });
  // The server keeps a rendering for a second: a new text is served from the next request on, so
  // no verdict older than the last run is ever served.
  const server = http;
  const publish = (text: string): void => {
    registry.text = text;
    server.metricsChanged();
  };

  // SIGTERM/SIGINT abort the run in progress too: its API requests are destroyed, not awaited.
  const stopping = new AbortController();
  const onSignal = (): void => stopping.abort(new Error('nodevol audit is stopping'));
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  try {
    for (;;) {
      let retryAfterMs: number | undefined;
      const run = await collectAuditRun(flags, logger, 'audit', {
        signal: stopping.signal,
        onRetryAfter: (ms) => {
          retryAfterMs = ms;
        },
      });
      if (stopping.signal.aborted) break;
      const failure = run instanceof AuditRunFailure ? run : nothingReadFailure(run, 'audit');
      if (failure !== undefined) {
        logger.error(new Error(failure.message), 'Audit could not run; serving no verdict', { reason: failure.reason });
        publish(await renderPromFailure(Date.now(), failure.reason));
      } else if (!(run instanceof AuditRunFailure)) {
        publish(await renderProm(fullReport(run.report, run.cluster)));
        lastCompletedMs = realClock.nowMs();
        logger.info('Audit finished', { exitCode: auditExitCode(run), volumes: run.report.summary.volumes, orphaned: run.report.summary.orphaned, findings: run.cluster?.findings.length ?? 0 });
      }
      const waitMs = nextRunDelayMs(intervalMs, retryAfterMs);
      if (waitMs > intervalMs) logger.info('The API server asked to be called again later (Retry-After): the next audit waits for it', { retryAfterMs, waitMs });
      if ((await waitOrStop(waitMs, stopping.signal)) === 'stop') break;
    }
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    await http.close();
  }
  return 0;
}
