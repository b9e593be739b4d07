/** Flag helpers shared by every command, kubelet style. */
import { Command, InvalidArgumentError, Option } from 'commander';

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
