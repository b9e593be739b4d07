/**
 * `nodevol completion bash|zsh`: a shell completion script generated from the command tree
 * itself (commands, their long flags, and the values of flags with fixed choices), so it never
 * lags behind a new flag.
 */
import { Command, Argument, type Option } from 'commander';
import { addHelpAfter, examples } from './flags.js';

interface CommandInfo {
  readonly name: string;
  /** Fixed values of its positional arguments (e.g. completion's shell). */
  readonly words: readonly string[];
  readonly description: string;
  readonly flags: readonly { readonly long: string; readonly description: string; readonly takesValue: boolean; readonly choices: readonly string[] }[];
}

function describeTree(root: Command): CommandInfo[] {
  return root.commands
    .filter((c) => c.name() !== 'help')
    .map((c) => ({
      name: c.name(),
      description: c.summary() || (c.description().split('\n')[0] ?? ''),
      words: c.registeredArguments.flatMap((a) => a.argChoices ?? []),
      flags: [
        ...c.options.map((o: Option) => ({
          long: o.long ?? o.short ?? '',
          description: o.description,
          takesValue: o.required || o.optional,
          choices: o.argChoices ?? [],
        })),
        { long: '--help', description: 'display help', takesValue: false, choices: [] },
      ].filter((f) => f.long !== ''),
    }));
}

/** Single-quoted for a shell: every ' closed, escaped, reopened. */
function sq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function bashCompletion(root: Command): string {
  const cmds = describeTree(root);
  const lines = [
    '# nodevol bash completion. Load it with: source <(nodevol completion bash)',
    '_nodevol() {',
    '  local cur prev sub',
    '  cur="${COMP_WORDS[COMP_CWORD]}"',
    '  prev="${COMP_WORDS[COMP_CWORD-1]}"',
    '  sub="${COMP_WORDS[1]}"',
    '  if [ "$COMP_CWORD" -eq 1 ]; then',
    `    COMPREPLY=( $(compgen -W ${sq(cmds.map((c) => c.name).join(' '))} -- "$cur") )`,
    '    return 0',
    '  fi',
    '  case "$sub" in',
  ];
  for (const c of cmds) {
    lines.push(`    ${c.name})`);
    lines.push('      case "$prev" in');
    for (const f of c.flags.filter((x) => x.choices.length > 0)) {
      lines.push(`        ${f.long}|-o) COMPREPLY=( $(compgen -W ${sq(f.choices.join(' '))} -- "$cur") ); return 0 ;;`);
    }
    const valued = c.flags.filter((x) => x.takesValue && x.choices.length === 0).map((x) => x.long);
    if (valued.length > 0) lines.push(`        ${valued.join('|')}) COMPREPLY=( $(compgen -f -- "$cur") ); return 0 ;;`);
    lines.push('      esac');
    lines.push(`      COMPREPLY=( $(compgen -W ${sq([...c.words, ...c.flags.map((f) => f.long)].join(' '))} -- "$cur") )`);
    lines.push('      ;;');
  }
  lines.push('  esac', '  return 0', '}', 'complete -o default -F _nodevol nodevol', '');
  return lines.join('\n');
}

/** zsh _arguments spec text: no brackets or colons inside a description. */
function zshDesc(s: string): string {
  return s.replace(/[[\]:'\\]/g, ' ').replace(/\s+/g, ' ').trim();
}

export function zshCompletion(root: Command): string {
  const cmds = describeTree(root);
  const lines = [
    '#compdef nodevol',
    '# nodevol zsh completion. Load it with: source <(nodevol completion zsh)',
    '_nodevol() {',
    '  local -a commands',
    `  commands=(${cmds.map((c) => sq(`${c.name}:${zshDesc(c.description)}`)).join(' ')})`,
    '  if (( CURRENT == 2 )); then',
    "    _describe 'command' commands",
    '    return',
    '  fi',
    '  case $words[2] in',
  ];
  for (const c of cmds) {
    const specs = c.flags.map((f) => {
      const value = f.choices.length > 0 ? `:value:(${f.choices.join(' ')})` : f.takesValue ? ':value:_files' : '';
      return sq(`${f.long}[${zshDesc(f.description)}]${value}`);
    });
    const words = c.words.length > 0 ? ` ${sq(`1:value:(${c.words.join(' ')})`)}` : '';
    lines.push(`    ${c.name}) _arguments ${specs.join(' ')}${words} ;;`);
  }
  lines.push('  esac', '}', 'if [ "$funcstack[1]" = "_nodevol" ]; then _nodevol "$@"; else compdef _nodevol nodevol; fi', '');
  return lines.join('\n');
}

export function completionCommand(root: () => Command): Command {
  const cmd = new Command('completion')
    .description('Print a shell completion script for bash or zsh.')
    .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh']));
  addHelpAfter(
    cmd,
    examples([
      ['Load completion into the current bash', 'source <(nodevol completion bash)'],
      ['Install it for zsh', 'nodevol completion zsh > "${fpath[1]}/_nodevol"'],
    ]),
  );
  cmd.action((shell: 'bash' | 'zsh') => {
    process.stdout.write(shell === 'bash' ? bashCompletion(root()) : zshCompletion(root()));
  });
  return cmd;
}
