/**
 * Test helper: whether an example `nodevol` command line would run as written, without running
 * it (an example may start an agent, serve for ever, or explore for minutes). The real program
 * parses the arguments (src/cli/main.ts buildProgram: every flag, choice and argument parser),
 * with the command's action replaced by the checks the action makes before it touches anything:
 * feature gates, built-in scenario names, replay plans, Go durations, and the repository's own
 * files the command names (scenarios/, examples/). Files a user makes (cluster.json, a trace) are
 * not looked for.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { CommanderError, type Command } from 'commander';
import { buildProgram } from '../../src/cli/main.js';
import { parseDuration } from '../../src/cli/duration.js';
import { FeatureGate } from '../../src/features/features.js';
import { parsePlan } from '../../src/sim/plan.js';
import { builtinScenarioNames } from '../../src/sim/scenario.js';

const DURATION_FLAGS = ['interval', 'timeout', 'requestTimeout', 'nodeStatusUpdateFrequency', 'shutdownGracePeriod'];

/** undefined when `args` (after `nodevol`) would run as written; else why not. */
export async function whyNotRunnable(args: readonly string[], repoRoot: string): Promise<string | undefined> {
  const program = await buildProgram(() => undefined, args);
  let problem: string | undefined;
  const quiet = (cmd: Command): void => {
    cmd.exitOverride().configureOutput({ writeOut: () => undefined, writeErr: () => undefined, outputError: (msg) => (problem ??= msg.trim()) });
    for (const sub of cmd.commands) quiet(sub);
  };
  quiet(program);
  for (const cmd of program.commands) {
    cmd.action((...actionArgs: unknown[]) => {
      const flags = actionArgs[actionArgs.length - 2] as Record<string, unknown>;
      const positional = actionArgs.slice(0, -2).flat().filter((a): a is string => typeof a === 'string');
      problem ??= checkAction(cmd.name(), flags, positional, repoRoot);
    });
  }
  try {
    await program.parseAsync([...args], { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.help' || err.code === 'commander.version') return undefined;
      return problem ?? err.message;
    }
    return err instanceof Error ? err.message : String(err);
  }
  return problem;
}

function checkAction(command: string, flags: Record<string, unknown>, positional: readonly string[], repoRoot: string): string | undefined {
  try {
    const gates = flags['featureGates'];
    if (Array.isArray(gates)) FeatureGate.parse(gates as string[]);
    const scenario = flags['scenario'];
    if (typeof scenario === 'string') {
      const isFile = command === 'demo' ? /[/.]/.test(scenario) : false;
      if (isFile) positionalFile(scenario, repoRoot);
      else if (!builtinScenarioNames().includes(scenario)) return `--scenario ${scenario}: no such built-in scenario`;
    }
    if (typeof flags['plan'] === 'string') parsePlan(flags['plan']);
    for (const f of DURATION_FLAGS) if (typeof flags[f] === 'string' && flags[f] !== '0') parseDuration(flags[f]);
    for (const p of positional) positionalFile(p, repoRoot);
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  return undefined;
}

/** A path into the repository's own scenarios/ or examples/ must exist there. */
function positionalFile(p: string, repoRoot: string): void {
  if (/^(?:\.\/)?(?:scenarios|examples)\//.test(p) && !existsSync(path.join(repoRoot, p))) throw new Error(`${p}: no such file in the repository`);
}
