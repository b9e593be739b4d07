/** Flag helpers shared by every command, kubelet style. */
import { Command, Help, InvalidArgumentError, Option } from 'commander';
import type { Logger } from '../ports/logger.js';
import { sourceMappedCallerResolver } from '../adapters/node/sourceMapCaller.js';
import { createKlogLogger, preciseWallClockMs, type LoggingFormat } from '../logging/klog.js';
import { terminalColumns } from './terminal.js';

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

/** `--scenario NAME` not built in: one short line (`nodevol explore --help` lists the names; the list made it 460 characters). */
export function unknownScenario(name: string): string {
  return `unknown scenario ${JSON.stringify(name)}: nodevol explore --help lists the built-in ones; or give a scenario file`;
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

/** The width help is wrapped at: $COLUMNS, else the terminal's, else 80 (commander's default). */
export function helpWidth(error = false): number {
  return terminalColumns(80, error ? process.stderr : process.stdout);
}

/**
 * Help wraps once, at the terminal's width: descriptions are single paragraphs in the source
 * (no hard newlines), commander wraps them and the option table at {@link helpWidth}, and text
 * added with {@link addHelpAfter} is wrapped the same way. When the flags leave too little room
 * for a description column (or for its longest word), a description goes under its flag instead
 * of running past the width.
 */
export function wrapHelpAtTerminalWidth(root: Command): void {
  const visit = (cmd: Command): void => {
    cmd.configureOutput({ getOutHelpWidth: () => helpWidth(false), getErrHelpWidth: () => helpWidth(true) });
    cmd.configureHelp({ ...cmd.configureHelp(), formatItem: formatItemWithin, optionDescription: optionDescriptionDefaultOnce });
    for (const sub of cmd.commands) visit(sub);
  };
  visit(root);
}

/**
 * An option's help description with its default said once: commander appends `(default: …)` to
 * every option with a default value, which repeats a default the description already states
 * (`act (default: print the plan …) (default: false)`) and prints the internal value of a boolean
 * flag that is off unless given (`(default: false)`) or of a repeatable flag given no value
 * (`(default: [])`). Those three print no `default:` of commander's; the choices stay.
 */
export function optionDescriptionDefaultOnce(this: Help, option: Option): string {
  const value: unknown = option.defaultValue;
  const redundant =
    value === false || (Array.isArray(value) && value.length === 0) || (value !== undefined && /\bdefault\b/i.test(option.description));
  if (!redundant) return Help.prototype.optionDescription.call(this, option);
  const shown = Object.assign(Object.create(Object.getPrototypeOf(option) as object) as Option, option, { defaultValue: undefined, defaultValueDescription: undefined });
  return Help.prototype.optionDescription.call(this, shown);
}

/** Indent of a description put under its flag. */
const UNDER_INDENT = 6;

function formatItemWithin(this: Help, term: string, termWidth: number, description: string, helper: Help): string {
  const width = helper.helpWidth ?? 80;
  const column = width - termWidth - 4;
  const longestWord = Math.max(0, ...description.split(/\s+/).map((w) => helper.displayWidth(w)));
  if (description === '' || (column >= helper.minWidthToWrap && longestWord <= column)) return Help.prototype.formatItem.call(this, term, termWidth, description, helper);
  const under = helper
    .boxWrap(description, width - UNDER_INDENT)
    .split('\n')
    .map((l) => `${' '.repeat(UNDER_INDENT)}${l}`);
  return [`  ${term}`, ...under].join('\n');
}

/** Appends `text` after a command's help (exit codes, notes, examples), wrapped by {@link wrapHelpText}. */
export function addHelpAfter(cmd: Command, text: string): Command {
  return cmd.addHelpText('after', (context) => wrapHelpText(text.replace(/\n+$/, ''), helpWidth(context.error)));
}

/**
 * Wraps help text at `width` between words, keeping its line structure: a line that starts at
 * column 0 is a paragraph; an indented `0  ...`, `-  ...` or `#  ...` line is a list item or an
 * example's comment and continues under its text (a comment as another `#` line); any other
 * indented line is a command and continues with a trailing backslash, as a shell reads it. A
 * word longer than a line stays whole.
 */
export function wrapHelpText(text: string, width: number): string {
  return text
    .split('\n')
    .flatMap((line) => {
      if (line.length <= width) return [line];
      const lead = /^ */.exec(line)?.[0] ?? '';
      if (lead === '') return wrapWords(line, width, '', '');
      const item = /^ +(?:\d+|[-*]) +/.exec(line)?.[0];
      if (item !== undefined) return wrapWords(line, width, item, ' '.repeat(item.length));
      if (line.startsWith(`${lead}# `)) return wrapWords(line, width, `${lead}# `, `${lead}# `);
      // A command: continued with a backslash, as a shell reads it (one it already ends with stays last).
      const continued = / \\$/.test(line);
      const pieces = wrapWords(continued ? line.slice(0, -2) : line, width - 2, lead, `${lead}  `);
      return pieces.map((l, i) => (i < pieces.length - 1 || continued ? `${l} \\` : l));
    })
    .join('\n');
}

/** `line` after its `head` (kept as it is), wrapped between words; continuation lines start with `continuation`. */
function wrapWords(line: string, width: number, head: string, continuation: string): string[] {
  const out: string[] = [];
  let current = head;
  let empty = true;
  for (const word of line.slice(head.length).split(/ +/).filter((w) => w !== '')) {
    if (empty) {
      current += word;
      empty = false;
    } else if (current.length + 1 + word.length <= width) current += ` ${word}`;
    else {
      out.push(current);
      current = continuation + word;
    }
  }
  out.push(current);
  return out;
}
