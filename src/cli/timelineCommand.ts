/**
 * `nodevol timeline FILE…`: draws trace files (`nodevol agent --trace`) as the timeline report,
 * one run per file, one above the other; without --html, as narrated text side by side.
 */
import * as path from 'node:path';
import { Command, Option } from 'commander';
import type { TraceEvent, TraceRun } from '../trace/events.js';
import { renderTimelineHtml } from '../timeline/html.js';
import { renderSideBySide } from '../timeline/terminal.js';
import { parseTraceFile } from '../trace/traceFile.js';
import { addHelpAfter, examples } from './flags.js';
import { terminalColumns } from './terminal.js';
import { isAgentStart } from '../trace/agentLife.js';
import { writeFileSync } from 'node:fs';
import { NodeFileSystem } from '../adapters/node/nodeFs.js';

/** Largest trace file read. */
export const MAX_TRACE_FILE_BYTES = 256 * 1024 * 1024;

export const EXIT_TIMELINE_OK = 0;
export const EXIT_TIMELINE_USAGE = 2;

interface TimelineFlags {
  html?: string;
  title?: string;
  output: 'text' | 'json';
}

export function timelineCommand(setExitCode: (code: number) => void): Command {
  const cmd = new Command('timeline')
    .description('Draw trace files written by `nodevol agent --trace` as a timeline: one run per file, one above the other.')
    .argument('<file...>', 'trace files (JSON lines)')
    .option('--html <out>', 'write the self-contained HTML report here instead of printing text')
    .option('--title <title>', 'title of the report')
    .addOption(new Option('-o, --output <format>', 'what to print without --html').choices(['text', 'json']).default('text'));
  addHelpAfter(
    cmd,
    '\nExit codes: 0 drawn; 2 a file could not be read or is not a trace (the message names file, line and field).\n' +
      examples([
        ['On the node: record what the agent does', 'nodevol agent --root-dir /tmp/node/root --node-name node-1 --cluster-dir /tmp/node/cluster --trace /tmp/node/trace.jsonl'],
        ['Draw it as a self-contained HTML report', 'nodevol timeline /tmp/node/trace.jsonl --html trace.html'],
        ['Two runs side by side in the terminal', 'nodevol timeline before.jsonl after.jsonl'],
      ]),
  );
  return cmd.action(async (files: string[], flags: TimelineFlags) => {
    setExitCode(await timeline(files, flags));
  });
}

async function timeline(files: readonly string[], flags: TimelineFlags): Promise<number> {
  // The FileSystem port's bounded read: non-blocking, regular files only, at most the size limit.
  const fs = new NodeFileSystem();
  const runs: TraceRun[] = [];
  for (const file of files) {
    try {
      const text = new TextDecoder().decode(await fs.readFile(path.resolve(file), MAX_TRACE_FILE_BYTES));
      const events = numberSteps(parseTraceFile(text, file));
      if (assumesStartStatus(events)) {
        process.stderr.write(
          `nodevol timeline: ${file}: from an older nodevol agent, which did not read node.status at start: volumesInUse before each life's first write is assumed empty, not read\n`,
        );
      }
      runs.push({ label: path.basename(file), events });
    } catch (err) {
      process.stderr.write(`nodevol timeline: ${err instanceof Error ? err.message : String(err)}\n`);
      return EXIT_TIMELINE_USAGE;
    }
  }
  if (flags.html !== undefined) {
    const html = renderTimelineHtml({ title: flags.title ?? `nodevol timeline: ${files.map((f) => path.basename(f)).join(', ')}`, runs });
    try {
      writeFileSync(flags.html, html);
    } catch (err) {
      process.stderr.write(`nodevol timeline: --html ${flags.html}: ${err instanceof Error ? err.message : String(err)}\n`);
      return EXIT_TIMELINE_USAGE;
    }
    process.stderr.write(`nodevol timeline: wrote ${flags.html} (${Buffer.byteLength(html)} bytes)\n`);
    return EXIT_TIMELINE_OK;
  }
  process.stdout.write(flags.output === 'json' ? `${JSON.stringify(runs, null, 2)}\n` : renderSideBySide(runs, { width: terminalColumns(120) }));
  return EXIT_TIMELINE_OK;
}

/**
 * Whether an agent trace predates the read of node.status at start: its status lines say neither
 * 'read' nor 'written', and the first of each life carried an assumed empty volumesInUse.
 */
function assumesStartStatus(events: readonly TraceEvent[]): boolean {
  return events.some(isAgentStart) && events.some((e) => e.kind === 'status' && e.source === undefined);
}

/** Steps numbered in file order: each agent life (and each appended run) becomes a column. */
function numberSteps(events: readonly TraceEvent[]): TraceEvent[] {
  let n = 0;
  return events.map((e) => (e.kind === 'step' ? { ...e, index: n++ } : e));
}
