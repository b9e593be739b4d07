/**
 * The `nodevol` command line. Flags follow kubelet (`--root-dir`, `--feature-gates`, `-v`,
 * `--logging-format`) and kubectl (`-o`). Exit codes: 0 ok, 1 problem found (audit), 2 could not
 * run (bad flags, unreadable inputs).
 *
 * Each command's module is imported only when that command runs: `nodevol audit` and
 * `nodevol --help` load no gRPC, no prom-client and no YAML parser (the agent's and the mock
 * driver's imports cost more start-up time than the audit's whole walk of a small node).
 */
import { Command, CommanderError } from 'commander';
import { addOwnedElsewhereExamples } from './commandExamples.js';
import { addHelpAfter, examples, reportAllMissingRequired, wrapHelpAtTerminalWidth } from './flags.js';
import { nodevolVersion } from './versionCommand.js';

export const EXIT_USAGE = 2;

type CommandFactory = (setExitCode: (code: number) => void, program: Command) => Command;

interface CommandEntry {
  readonly name: string;
  /** The line `nodevol --help` shows; the command's own --help shows its full description. */
  readonly summary: string;
  /** Imports the command's module. */
  readonly load: () => Promise<CommandFactory>;
}

/** Every command, in help order. Add a command here with a lazy `load`. */
const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'audit',
    summary: 'Read-only check of a node: which CSI volumes kubelet tracks, recovers, or will lose (orphaned).',
    load: async () => (await import('./auditCommand.js')).auditCommand,
  },
  {
    name: 'agent',
    summary: 'Run the volume manager: reconstruct, then mount, unmount and unstage CSI volumes.',
    load: async () => (await import('./agentCommand.js')).agentCommand,
  },
  {
    name: 'mock-driver',
    summary: 'Run a mock CSI driver (hostpath-like, real bind mounts) for node e2e tests.',
    load: async () => (await import('./mockDriverCommand.js')).mockDriverCommand,
  },
  {
    name: 'demo',
    summary: 'See the bug and the fix: KEP-6058 story 1 in the simulator, gate off and on, side by side (no root).',
    load: async () => (await import('./demoCommand.js')).demoCommand,
  },
  {
    name: 'explore',
    summary: 'Crash and reboot the real engine at every step of a scenario in the simulator; check the safety invariants.',
    load: async () => (await import('./exploreCommand.js')).exploreCommand,
  },
  {
    name: 'recover',
    summary: 'Unstage the volumes the audit calls orphaned, through their driver (dry run unless --yes).',
    load: async () => (await import('./recoverCommand.js')).recoverCommand,
  },
  {
    name: 'timeline',
    summary: 'Draw trace files (nodevol agent --trace) as a timeline: HTML report or text.',
    load: async () => (await import('./timelineCommand.js')).timelineCommand,
  },
  {
    name: 'version',
    summary: 'Print the nodevol version.',
    load: async () => (await import('./versionCommand.js')).versionCommand,
  },
  {
    name: 'completion',
    summary: 'Print a bash or zsh completion script.',
    load: async () => {
      const { completionCommand } = await import('./completionCommand.js');
      return (_setExitCode, program) => completionCommand(() => program);
    },
  },
];

/** The command `argv` runs (or asks help for: `nodevol help audit`); undefined for top-level flags only. */
export function requestedCommand(argv: readonly string[]): string | undefined {
  const positional = argv.filter((a) => !a.startsWith('-'));
  return positional[0] === 'help' ? positional[1] : positional[0];
}

/**
 * Whether the command `argv` runs is done, output written, when {@link main} resolves: the
 * launcher then ends the process at once rather than wait for V8's pending heap work and its
 * teardown (about 5 ms of a `nodevol audit` run; docs/benchmarks.md). True for help, version,
 * completion and a single audit. A command that serves or keeps running (the agent, the mock
 * driver, `audit --interval`) ends the usual way, once nothing is left to run.
 */
export function runsOnce(argv: readonly string[]): boolean {
  const command = requestedCommand(argv);
  if (command === undefined || command === 'version' || command === 'completion') return true;
  return command === 'audit' && !argv.some((a) => a === '--interval' || a.startsWith('--interval='));
}

/**
 * The program with every command: the one `argv` names is loaded for real, the others are
 * stand-ins that carry only their name and summary (enough for the top-level help).
 */
export async function buildProgram(setExitCode: (code: number) => void, argv: readonly string[] = []): Promise<Command> {
  const program = new Command('nodevol')
    .description(
      'A kubelet-compatible CSI volume manager with KEP-6058 global mount reconstruction. ' +
        'Finds (and, as an agent, recovers) CSI volumes kubelet loses track of after a restart or reboot.',
    )
    .version(nodevolVersion())
    .showHelpAfterError()
    .exitOverride();
  const wanted = requestedCommand(argv);
  // Completion describes every flag of every command: it is the one command that loads them all.
  const loadAll = wanted === 'completion';
  for (const entry of COMMANDS) {
    const cmd =
      entry.name === wanted || loadAll ? (await entry.load())(setExitCode, program) : new Command(entry.name).description(entry.summary);
    program.addCommand(cmd.summary(entry.summary));
  }
  addHelpAfter(
    program,
    '\nExit codes: 0 ok; 1 the audit found orphaned volumes or failed reconstructions; 2 could not run.\nSee docs/reference/ for every flag, output field and metric.\n' +
      examples([
        ['What will kubelet lose on this node?', 'nodevol audit'],
        ['What would recover do? (dry run)', 'nodevol recover --cluster-state cluster.json'],
        ['Help on one command', 'nodevol audit --help'],
      ]),
  );
  addOwnedElsewhereExamples(program);
  reportAllMissingRequired(program);
  wrapHelpAtTerminalWidth(program);
  return program;
}

/** Runs the CLI and resolves to the process exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  let exitCode = 0;
  const program = await buildProgram((code) => {
    exitCode = code;
  }, argv);
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

/**
 * A worker thread of `nodevol explore --generate`, started from the CLI bundle (the bundle holds
 * no separate worker script): serves the swarm's tasks.
 */
export async function runSwarmWorker(): Promise<void> {
  const { serveSwarmTasks } = await import('../sim/swarmWorker.js');
  serveSwarmTasks();
}
