/**
 * `nodevol demo`: KEP-6058 story 1 (a drain, then a reboot while NodeUnstageVolume is still
 * running) played in the simulator twice, gate off and gate on, on the real engine; printed as a
 * narrated side-by-side timeline and written as the HTML timeline report: to a new temp dir
 * unless --html names the file, never into the working tree unasked. No root, no kubelet, no
 * file touched but the report.
 */
import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Command, Option } from 'commander';
import { FeatureGate } from '../features/features.js';
import { errorMessage } from '../ports/fs.js';
import { loadBuiltinScenario, loadScenarioFile, ScenarioError, type Scenario } from '../sim/scenario.js';
import { simulate } from '../sim/simulation.js';
import type { TraceRun } from '../trace/events.js';
import { simRunToTrace } from '../timeline/fromSim.js';
import { analyzeInUse } from '../timeline/inUse.js';
import { renderTimelineHtml } from '../timeline/html.js';
import { renderSideBySide } from '../timeline/terminal.js';
import { addHelpAfter, examples } from './flags.js';
import { newTempDir } from './tempDir.js';
import { terminalColumns } from './terminal.js';

export const DEMO_SCENARIO = 'kep-story-1-drain-reboot';
/** The report's file name in the temp dir it is written to by default. */
export const DEMO_HTML_NAME = 'nodevol-demo.html';
const GATE = 'CSIGlobalMountReconstruction';

interface DemoFlags {
  scenario: string;
  /** undefined: a new temp dir; false: --no-html. */
  html: string | false | undefined;
  seed: number;
  output: 'text' | 'json';
}

export function demoCommand(setExitCode: (code: number) => void): Command {
  const cmd = new Command('demo')
    .description(
      'See the bug and the fix in a second: KEP-6058 story 1 (drain, then a reboot while NodeUnstageVolume runs) ' +
        'played in the simulator on the real engine, with CSIGlobalMountReconstruction off and on, side by side.',
    )
    .option('--scenario <name|file>', 'a built-in scenario name or a scenario file', DEMO_SCENARIO)
    .option('--html <file>', `write the HTML timeline report here (default: ${DEMO_HTML_NAME} in a new temp dir, whose path is printed)`)
    .option('--no-html', 'write no HTML report')
    .option('--seed <n>', 'seed of the scheduler', (v) => Number.parseInt(v, 10), 1)
    .addOption(new Option('-o, --output <format>', 'text: the narrated timeline; json: the traces').choices(['text', 'json']).default('text'));
  addHelpAfter(
    cmd,
    '\nExit codes: 0 played (the gate-off run is expected to show the bug); 2 could not run (bad scenario, report not writable).\n' +
      examples([
        ['The bug and the fix, in the terminal and as an HTML report in a new temp dir', 'nodevol demo'],
        ['Another scenario, report elsewhere', 'nodevol demo --scenario kep-story-2 --html /tmp/story2.html'],
        ['The traces as JSON', 'nodevol demo -o json --no-html'],
      ]),
  );
  cmd.action(async (flags: DemoFlags) => {
    setExitCode(await demo(flags));
  });
  return cmd;
}

async function demo(flags: DemoFlags): Promise<number> {
  const fail = (msg: string): number => {
    process.stderr.write(`nodevol demo: ${msg}\n`);
    return 2;
  };
  let scenario: Scenario;
  try {
    scenario = /[/.]/.test(flags.scenario) ? loadScenarioFile(flags.scenario) : loadBuiltinScenario(flags.scenario);
  } catch (err) {
    if (err instanceof ScenarioError) return fail(err.message);
    return fail(errorMessage(err));
  }
  if (!Number.isSafeInteger(flags.seed) || flags.seed < 0) return fail('--seed must be a non-negative integer');

  const runs: TraceRun[] = [];
  const outcomes: { gate: boolean; violations: string[] }[] = [];
  for (const on of [false, true]) {
    const gates = FeatureGate.of({ ...scenario.featureGates, [GATE]: on });
    const result = await simulate({ scenario, gates, seed: flags.seed, fullTrace: true });
    const invariants = [...new Set(result.violations.map((v) => v.invariant))];
    outcomes.push({ gate: on, violations: invariants });
    runs.push(
      simRunToTrace({
        label: `${GATE}=${String(on)}`,
        ...(invariants.length === 0 ? { summary: result.endReason === 'converged' ? 'Every volume ends where it should.' : `The run ended: ${result.endReason}.` } : {}),
        trace: result.trace,
        violations: result.violations,
      }),
    );
  }

  let report: string | undefined;
  if (flags.html !== false) {
    const html = renderTimelineHtml({
      title: `nodevol demo: ${scenario.name}`,
      subtitle: `${scenario.description} Below, gate off above gate on: the same steps in the same columns.`.trim(),
      runs,
    });
    try {
      report = flags.html ?? path.join(newTempDir('nodevol-demo-', ', or pass --html FILE or --no-html'), DEMO_HTML_NAME);
    } catch (err) {
      return fail(`the HTML report: ${errorMessage(err)}`);
    }
    try {
      writeFileSync(report, html);
    } catch (err) {
      return fail(flags.html === undefined ? `writing the HTML report ${report}: ${errorMessage(err)}` : `--html ${flags.html}: ${errorMessage(err)}`);
    }
  }

  if (flags.output === 'json') {
    process.stdout.write(`${JSON.stringify({ scenario: scenario.name, seed: flags.seed, runs }, null, 2)}\n`);
    // stdout is the JSON: the report's path goes to stderr.
    if (report !== undefined) process.stderr.write(`nodevol demo: the timeline report is in ${report}\n`);
    return 0;
  }
  // The narrated timeline takes the terminal's width (up to 160); prose, up to 100 columns.
  const width = Math.min(terminalColumns(120), 160);
  const prose = (text: string): string => wrapText(text, Math.min(width, 100));
  const verdicts = outcomes.map((o, i) => {
    const headline = runs[i] === undefined ? '' : `${analyzeInUse(runs[i].events).verdict.headline}; `;
    return prose(`${GATE}=${String(o.gate)}: ${headline}${o.violations.length === 0 ? 'no invariant violated' : `violated ${o.violations.join(', ')}`}.`);
  });
  const lines = [
    prose(`nodevol demo: ${scenario.name} (seed ${flags.seed}), the real volume manager in the simulator`),
    ...(scenario.description === '' ? [] : [prose(scenario.description)]),
    '',
    renderSideBySide(runs, { width, color: process.stdout.isTTY && process.env['NO_COLOR'] === undefined }),
    ...verdicts,
    ...(report === undefined ? [] : [prose(`The timeline report is in ${report}: open it in a browser (it loads nothing from the network).`)]),
    prose('Find every crash point on your own: nodevol explore --scenario kep-story-1 --crash both'),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  return 0;
}

function wrapText(text: string, width: number): string {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter((w) => w !== '')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      out.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') out.push(line);
  return out.join('\n');
}
