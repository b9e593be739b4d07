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
import { builtinScenarioNames, loadBuiltinScenario, loadScenarioFile, ScenarioError, type Scenario } from '../sim/scenario.js';
import { simulate } from '../sim/simulation.js';
import type { TraceRun } from '../trace/events.js';
import { simRunToTrace } from '../timeline/fromSim.js';
import { analyzeInUse } from '../timeline/inUse.js';
import { renderTimelineHtml } from '../timeline/html.js';
import { renderSideBySide } from '../timeline/terminal.js';
import { addHelpAfter, examples, unknownScenario } from './flags.js';
import { newTempDir } from './tempDir.js';
import { terminalColumns } from './terminal.js';

export const DEMO_SCENARIO = 'kep-story-1-drain-reboot';
/** The report's file name in the temp dir it is written to by default. */
export const DEMO_HTML_NAME = 'nodevol-demo.html';
const GATE = 'CSIGlobalMountReconstruction';

/**
 * What KEP-6058's gate alone still leaves in a story when the explorer crashes it at every point
 * (the demo plays one crash), and the gates that close it: said next to the gate-on run's "safe".
 * From docs/explorer.md's matrix; test/unit/cli/demoGaps.test.ts runs each entry's explore.
 */
export interface GateAloneGap {
  /** The built-in scenario the explorer crashes at every point. */
  readonly scenario: string;
  /** The invariants it breaks with KEP-6058's gate alone. */
  readonly invariants: readonly string[];
  /** What happens, in a few words (left out where the line would reach 200 characters). */
  readonly what?: string;
  /** With these gates on as well, it breaks none. */
  readonly closedBy: readonly string[];
}

const STORY_1_GAP: GateAloneGap = {
  scenario: 'kep-story-1',
  invariants: ['converges'],
  what: 'a restart after globalmount/ is removed leaks the volume dir',
  closedBy: ['CSIListGlobalVolumesWithoutStagingDir'],
};

/** Built-in demo scenario → what the KEP's gate alone leaves in its story. */
export const KEP_GATE_ALONE_GAPS: Readonly<Record<string, GateAloneGap>> = {
  [DEMO_SCENARIO]: STORY_1_GAP,
  'kep-story-1': STORY_1_GAP,
  'kep-story-2': {
    scenario: 'kep-story-2',
    invariants: ['no-unstage-in-use', 'converges'],
    closedBy: ['CSIUnpublishBeforeUnstageAfterReconstruction', 'CSIListGlobalVolumesWithoutStagingDir'],
  },
};

/** The one line said next to the gate-on run's "safe" (under 200 characters). */
export function gateAloneGapLine(gap: GateAloneGap): string {
  const closes = gap.closedBy.length === 1 ? 'closes it' : 'close them';
  const what = gap.what === undefined ? '' : ` (${gap.what})`;
  return `Safe here only: explored with the gate alone, ${gap.scenario} breaks ${gap.invariants.join(', ')}${what}; ${gap.closedBy.join(' and ')} ${closes}.`;
}

/** The command that explores a demo's story at every crash point (the scripted story 1's is kep-story-1). */
function exploreCommandFor(scenario: string, isFile: boolean): string {
  if (isFile) return `nodevol explore ${scenario}`;
  return `nodevol explore --scenario ${KEP_GATE_ALONE_GAPS[scenario]?.scenario ?? scenario}`;
}

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
        ['The bug and the KEP\'s fix for one crash, in the terminal and as an HTML report in a new temp dir', 'nodevol demo'],
        [
          `Not every crash is safe with the KEP's gate alone: ${STORY_1_GAP.invariants.join(' and ')} breaks; ${STORY_1_GAP.closedBy.join(' and ')} closes it`,
          `nodevol explore --scenario ${STORY_1_GAP.scenario} --feature-gates ${GATE}=true\nnodevol explore --scenario ${STORY_1_GAP.scenario} ${[GATE, ...STORY_1_GAP.closedBy].map((g) => `--feature-gates ${g}=true`).join(' ')}`,
        ],
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
  const isFile = /[/.]/.test(flags.scenario);
  if (!isFile && !builtinScenarioNames().includes(flags.scenario)) return fail(unknownScenario(flags.scenario));
  try {
    scenario = isFile ? loadScenarioFile(flags.scenario) : loadBuiltinScenario(flags.scenario);
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

  const gap = isFile ? undefined : KEP_GATE_ALONE_GAPS[flags.scenario];
  const gapLine = gap === undefined ? undefined : gateAloneGapLine(gap);
  let report: string | undefined;
  if (flags.html !== false) {
    const html = renderTimelineHtml({
      title: `nodevol demo: ${scenario.name}`,
      subtitle: `${scenario.description} Below, gate off above gate on: the same steps in the same columns.`.trim(),
      runs,
      notes: [undefined, gapLine],
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
    ...(gapLine === undefined ? [] : [prose(gapLine)]),
    ...(report === undefined ? [] : [prose(`The timeline report is in ${report}: open it in a browser (it loads nothing from the network).`)]),
    prose(`Find every crash point on your own: ${exploreCommandFor(flags.scenario, isFile)} --feature-gates ${GATE}=true (or =false)`),
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
