/**
 * The `nodevol` command line. Flags follow kubelet (`--root-dir`, `--feature-gates`, `-v`,
 * `--logging-format`) and kubectl (`-o`). Exit codes: 0 ok, 1 problem found (audit), 2 could not
 * run (bad flags, unreadable inputs).
 */
import { Command, CommanderError } from 'commander';
import { agentCommand } from './agentCommand.js';
import { auditCommand } from './auditCommand.js';
import { exploreCommand } from './exploreCommand.js';
import { mockDriverCommand } from './mockDriverCommand.js';

export const EXIT_USAGE = 2;

export function buildProgram(setExitCode: (code: number) => void): Command {
  const program = new Command('nodevol')
    .description(
      'A kubelet-compatible CSI volume manager with KEP-6058 global mount reconstruction.\n' +
        'Finds (and, as an agent, recovers) CSI volumes kubelet loses track of after a restart or reboot.',
    )
    .version('0.1.0')
    .showHelpAfterError()
    .exitOverride();
  program.addCommand(auditCommand(setExitCode));
  program.addCommand(agentCommand(setExitCode));
  program.addCommand(mockDriverCommand(setExitCode));
  program.addCommand(exploreCommand(setExitCode));
  program.addHelpText(
    'after',
    '\nExit codes: 0 ok; 1 the audit found orphaned volumes or failed reconstructions; 2 could not run.\nSee README.md for every flag, output field and metric.',
  );
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
