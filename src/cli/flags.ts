/** Flag helpers shared by every command, kubelet style. */
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Logger } from '../host/logger.js';
import { createKlogLogger, preciseWallClockMs, type LoggingFormat } from '../logging/klog.js';

export function parseVerbosity(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a non-negative integer');
  return Number(value);
}

/** Collects repeated `--feature-gates` flags (later values win per gate). */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** `-v N` and `--logging-format text|json`. */
export function addLoggingOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('-v, --v <level>', 'log verbosity (klog -v)').argParser(parseVerbosity).default(0))
    .addOption(new Option('--logging-format <format>', 'log format on stderr').choices(['text', 'json']).default('text'));
}

/** The klog logger every command writes to stderr, from `-v` and `--logging-format`. */
export function stderrLogger(flags: { readonly v: number; readonly loggingFormat: LoggingFormat }): Logger {
  return createKlogLogger({
    format: flags.loggingFormat,
    verbosity: flags.v,
    sink: (line) => process.stderr.write(`${line}\n`),
    nowMs: preciseWallClockMs,
    pid: process.pid,
  });
}
