/**
 * The `nodevol` command line. Flags follow kubelet (`--root-dir`, `--feature-gates`, `-v`,
 * `--logging-format`) and kubectl (`-o`). Exit codes: 0 ok, 1 problem found (audit), 2 could not
 * run (bad flags, unreadable inputs).
 */
import { Command, CommanderError } from 'commander';
import { agentCommand } from './agentCommand.js';
import { auditCommand } from './auditCommand.js';
import { mockDriverCommand } from './mockDriverCommand.js';
import { addOwnedElsewhereExamples } from './commandExamples.js';
import { completionCommand } from './completionCommand.js';
import { examples, reportAllMissingRequired } from './flags.js';
import { recoverCommand } from './recoverCommand.js';
import { nodevolVersion, versionCommand } from './versionCommand.js';

export const EXIT_USAGE = 2;

export function buildProgram(setExitCode: (code: number) => void): Command {
  const program = new Command('nodevol')
    .description(
      'A kubelet-compatible CSI volume manager with KEP-6058 global mount reconstruction.\n' +
        'Finds (and, as an agent, recovers) CSI volumes kubelet loses track of after a restart or reboot.',
    )
    .version(nodevolVersion())
    .showHelpAfterError()
    .exitOverride();
  program.addCommand(auditCommand(setExitCode));
  program.addCommand(agentCommand(setExitCode));
  program.addCommand(mockDriverCommand(setExitCode));
  program.addCommand(recoverCommand(setExitCode));
  program.addCommand(versionCommand());
  program.addCommand(completionCommand(() => program));
  program.addHelpText(
    'after',
    '\nExit codes: 0 ok; 1 the audit found orphaned volumes or failed reconstructions; 2 could not run.\nSee README.md for every flag, output field and metric.\n' +
      examples([
        ['What will kubelet lose on this node?', 'nodevol audit'],
        ['What would recover do? (dry run)', 'nodevol recover --cluster-state cluster.json'],
        ['Help on one command', 'nodevol audit --help'],
      ]),
  );
  addOwnedElsewhereExamples(program);
  reportAllMissingRequired(program);
  return program;
}

/** Runs the CLI and resolves to the process exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  let exitCode = 0;
  const program = buildProgram((code) => {
    exitCode = code;
  });
  for (const cmd of program.commands) cmd.exitOverride();
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return 0;
      return EXIT_USAGE;
    }
    process.stderr.write(`nodevol: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT_USAGE;
  }
  return exitCode;
}
