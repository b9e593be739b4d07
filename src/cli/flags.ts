/** Flag helpers shared by every command, kubelet style. */
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Logger } from '../host/logger.js';
import { sourceMappedCallerResolver } from '../adapters/node/sourceMapCaller.js';
import { createKlogLogger, preciseWallClockMs, type LoggingFormat } from '../logging/klog.js';

/** klog's -v: a non-negative integer; `-v=4` (commander hands over "=4") is accepted as klog accepts it. */
export function parseVerbosity(value: string): number {
  const v = value.startsWith('=') ? value.slice(1) : value;
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError('must be a non-negative integer');
  return Number(v);
}

/**
 * Makes every command of the tree report all its missing required flags in one message
 * (commander stops at the first). Commander calls `missingMandatoryOptionValue` for the first
 * missing one it finds; the override names them all.
 */
export function reportAllMissingRequired(root: Command): void {
  const visit = (cmd: Command): void => {
    const patched = cmd as Command & { missingMandatoryOptionValue(option: Option): void };
    patched.missingMandatoryOptionValue = function (this: Command): void {
      const missing = this.options.filter((o) => o.mandatory && this.getOptionValue(o.attributeName()) === undefined).map((o) => `'${o.flags}'`);
      const message =
        missing.length === 1 ? `error: required option ${missing.join('')} not specified` : `error: required options ${missing.join(', ')} not specified`;
      this.error(message, { code: 'commander.missingMandatoryOptionValue' });
    };
    for (const sub of cmd.commands) visit(sub);
  };
  visit(root);
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
    // caller names the TypeScript file and line, not main.cjs:46 of the bundle.
    resolveCaller: sourceMappedCallerResolver(),
  });
}

/** An "Examples:" block for --help, kubectl style: a comment line, then the command(s), indented. */
export function examples(items: readonly (readonly [string, string])[]): string {
  const lines = ['', 'Examples:'];
  for (const [what, command] of items) {
    lines.push(`  # ${what}`);
    for (const l of command.split('\n')) lines.push(`  ${l}`);
    lines.push('');
  }
  return lines.join('\n');
}
