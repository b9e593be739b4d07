// The documentation cannot drift from the program (test/support/docExamples.ts says how a block
// is marked):
// - every example output in README.md and docs/ is what its command prints now, run as a
//   process from the repository's root (a block marked `slow` only with NODEVOL_DOC_EXAMPLES=all
//   or =write; `npm run docs:examples` runs this file with =write, which rewrites the blocks);
// - every fenced block with no language, and every transcript, carries a marker;
// - every `nodevol` command of a shell block (README.md, CONTRIBUTING.md, docs/) and of every
//   command's --help examples runs as written (test/support/exampleCheck.ts);
// - what the documented commands print is messages under 200 characters, tables aside.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import { claim, csiDriver, list, node, persistentVolume, pod, volumeAttachment } from '../support/clusterObjects.js';
import { NODEVOL_BIN } from '../support/cliProcess.js';
import {
  fencedBlocks,
  helpExampleCommands,
  nodevolArgs,
  parseMarker,
  sameOutput,
  shellCommands,
  transcriptSteps,
  transcriptText,
  type ExampleMarker,
  type FencedBlock,
} from '../support/docExamples.js';
import { documentationFiles, formatProblems, proseLines, type Problem } from '../support/docs.js';
import { whyNotRunnable } from '../support/exampleCheck.js';
import { NodeFixture } from '../support/nodeFixture.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const MODE = process.env['NODEVOL_DOC_EXAMPLES'] ?? '';
const WRITE = MODE === 'write';
const RUN_SLOW = WRITE || MODE === 'all';

/** The files whose example outputs are checked: README.md and docs/ (ARCHITECTURE.md and CONTRIBUTING.md show none). */
const OUTPUT_FILES = documentationFiles(REPO_ROOT).filter((f) => f === path.join(REPO_ROOT, 'README.md') || f.startsWith(path.join(REPO_ROOT, 'docs') + path.sep));
const rel = (f: string): string => path.relative(REPO_ROOT, f);

interface Marked {
  readonly file: string;
  readonly block: FencedBlock;
  readonly marker: ExampleMarker;
}

async function markedBlocks(): Promise<{ marked: Marked[]; problems: Problem[] }> {
  const marked: Marked[] = [];
  const problems: Problem[] = [];
  for (const file of OUTPUT_FILES) {
    const text = await readFile(file, 'utf8');
    const blocks = fencedBlocks(text);
    // Markers in prose only: one shown inside a code block is an example of a marker.
    proseLines(text).forEach((line, i) => {
      let marker: ExampleMarker | undefined;
      try {
        marker = parseMarker(line);
      } catch (err) {
        problems.push({ file: rel(file), line: i + 1, message: (err as Error).message });
        return;
      }
      if (marker === undefined) return;
      const block = blocks.find((b) => b.line === i + 2);
      if (block === undefined) problems.push({ file: rel(file), line: i + 1, message: 'a doc-example marker must be the line right above its fenced block' });
      else marked.push({ file, block, marker });
    });
    for (const b of blocks) {
      if (marked.some((m) => m.file === file && m.block === b)) continue;
      if (b.info === '') problems.push({ file: rel(file), line: b.line, message: 'a fenced block with no language is an output: mark it <!-- doc-example: COMMAND -->, or give it a language' });
      else if (b.body.startsWith('$ ')) problems.push({ file: rel(file), line: b.line, message: 'a transcript ("$ command" lines) no test runs: mark it <!-- doc-example -->' });
    }
  }
  return { marked, problems };
}

/** Where a fixture's commands run: `$F` in them and in their output. */
interface Fixture {
  readonly dir: string;
  close(): Promise<void>;
}

const DRIVER = 'ebs.csi.example.com';
const NAME = (handle: string): string => `kubernetes.io/csi/${DRIVER}^${handle}`;

const FIXTURES: Readonly<Record<string, () => Promise<Fixture>>> = {
  /** An empty directory. */
  empty: async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nodevol-doc-'));
    return { dir, close: () => rm(dir, { recursive: true, force: true }) };
  },
  /**
   * KEP-6058 story 1 after the kubelet restart (as test/cli/auditCluster.cli.test.ts): vol-1 staged
   * with no pod directory, attached to node-1 and gone from volumesInUse; vol-2 used by pod
   * default/app. $F/kubelet, $F/mountinfo, $F/cluster.json, and a unix socket listening where the
   * driver's would be ($F/kubelet/plugins/ebs.csi.example.com/csi.sock).
   */
  'cluster-story-1': async () => {
    const fx = await NodeFixture.create();
    await fx.stage({ driver: DRIVER, handle: 'vol-1', specVolID: 'pv-1' });
    const gm2 = await fx.stage({ driver: DRIVER, handle: 'vol-2', specVolID: 'pv-2' });
    await fx.podVolume({ uid: 'uid-app', specName: 'pv-2', driver: DRIVER, handle: 'vol-2', boundFrom: gm2 });
    await fx.writeMountInfo();
    const cluster = [
      node('node-1', { volumesAttached: [NAME('vol-1'), NAME('vol-2')], volumesInUse: [NAME('vol-2')] }),
      pod('app', { nodeName: 'node-1', claims: ['data-2'], uid: 'uid-app' }),
      persistentVolume('pv-1', DRIVER, 'vol-1'),
      persistentVolume('pv-2', DRIVER, 'vol-2', { namespace: 'default', name: 'data-2' }),
      claim('data-2', 'pv-2'),
      volumeAttachment(DRIVER, 'vol-1', 'pv-1', 'node-1'),
      volumeAttachment(DRIVER, 'vol-2', 'pv-2', 'node-1'),
      csiDriver(DRIVER),
    ];
    await writeFile(path.join(fx.base, 'cluster.json'), JSON.stringify(list(cluster)));
    const socketDir = path.join(fx.root, 'plugins', DRIVER);
    await mkdir(socketDir, { recursive: true });
    const server: Server = createServer((s) => s.destroy());
    await new Promise<void>((resolve) => server.listen(path.join(socketDir, 'csi.sock'), resolve));
    return {
      dir: fx.base,
      close: async () => {
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await fx.cleanup();
      },
    };
  },
};

interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs one documented command line (`$F` is the fixture's dir) from the repository's root. */
function run(command: string, fixtureDir: string | undefined): Promise<Ran> {
  const [cmd, ...more] = shellCommands(command);
  if (cmd === undefined || more.length > 0) throw new Error(`one command per line, not: ${command}`);
  const args = nodevolArgs(cmd.words);
  if (args === undefined) throw new Error(`only nodevol commands run here, not: ${command}`);
  const argv = args.map((a) => (fixtureDir === undefined ? a : a.split('$F').join(fixtureDir)));
  const env: NodeJS.ProcessEnv = { ...process.env, COLUMNS: '100', NO_COLOR: '1', TZ: 'UTC' };
  delete env['KUBERNETES_SERVICE_HOST'];
  delete env['NODE_NAME'];
  delete env['FORCE_COLOR'];
  return new Promise((resolve) => {
    execFile(process.execPath, [NODEVOL_BIN, ...argv], { cwd: REPO_ROOT, env, timeout: 600_000, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

/** What a run printed, as the documentation shows it: the fixture's dir as $F, the repository as $PWD. */
function shown(text: string, fixtureDir: string | undefined): string {
  let t = text.replace(/\n+$/, '');
  if (fixtureDir !== undefined) t = t.split(fixtureDir).join('$F');
  return t.split(`${REPO_ROOT}/`).join('$PWD/');
}

/** The output of a marked block as printed now, and every stdout and stderr line printed on the way. */
async function produce(m: Marked): Promise<{ text: string; printed: string[] }> {
  const fixture = m.marker.fixture === undefined ? undefined : await FIXTURES[m.marker.fixture]?.();
  if (m.marker.fixture !== undefined && fixture === undefined) throw new Error(`${rel(m.file)}:${m.block.line}: no fixture ${m.marker.fixture} (FIXTURES in ${rel(import.meta.filename)})`);
  const printed: string[] = [];
  try {
    if (m.marker.command !== undefined) {
      const r = await run(m.marker.command, fixture?.dir);
      printed.push(r.stdout, r.stderr);
      return { text: shown(r.stdout, fixture?.dir), printed };
    }
    const steps = [];
    let last: Ran | undefined;
    for (const step of transcriptSteps(m.block.body)) {
      if (step.command === 'echo $?') {
        steps.push({ command: step.command, output: String(last?.code ?? '') });
        continue;
      }
      last = await run(step.command, fixture?.dir);
      printed.push(last.stdout, last.stderr);
      steps.push({ command: step.command, output: shown(last.stdout, fixture?.dir) });
    }
    return { text: transcriptText(steps), printed };
  } finally {
    await fixture?.close();
  }
}

/**
 * Lines printed that are messages under the 200-character rule, over 200 characters now and left
 * so with the reason: each a sentence of code this work does not own. Remove an entry once its
 * lines are short.
 */
const LONG_FOR_NOW: readonly { readonly line: RegExp; readonly why: string }[] = [
  { line: /^ {2}(?:at-risk|attached-elsewhere|pod-gone): /, why: "CLUSTER FINDINGS reasons: src/audit/clusterFindings.ts's sentences, each naming a staging path" },
  { line: /^kubernetes\.io\/csi\/\S+: would /, why: "recover's plan: one line per action, each naming its path (src/cli/recoverCommand.ts)" },
];

/** The lines of an output that are messages: not a table's (a header row of capitals, columns two spaces apart, to the next blank line). */
function messageLines(output: string): string[] {
  const out: string[] = [];
  let inTable = false;
  for (const line of output.split('\n')) {
    if (/^[A-Z][A-Z -]*$/.test(line) && /\S {2,}\S/.test(line)) inTable = true;
    if (line.trim() === '') inTable = false;
    if (!inTable && !LONG_FOR_NOW.some((l) => l.line.test(line))) out.push(line);
  }
  return out;
}

describe('documentation: every example output is what its command prints', () => {
  const rewrites = new Map<string, { start: number; end: number; text: string }[]>();
  after(async () => {
    for (const [file, edits] of rewrites) {
      let text = await readFile(file, 'utf8');
      for (const e of [...edits].sort((a, b) => b.start - a.start)) text = text.slice(0, e.start) + e.text + text.slice(e.end);
      await writeFile(file, text);
    }
  });

  it('every marker sits on its block, and no output or transcript goes unmarked', async () => {
    const { marked, problems } = await markedBlocks();
    assert.deepEqual(problems, [], formatProblems(problems));
    assert.ok(marked.length >= 7, `only ${marked.length} marked blocks`);
  });

  it('each marked block is what its command prints now (messages under 200 characters, tables aside)', async (t) => {
    const { marked } = await markedBlocks();
    const problems: Problem[] = [];
    for (const m of marked) {
      const where = { file: rel(m.file), line: m.block.line };
      if (m.marker.slow && !RUN_SLOW) {
        t.diagnostic(`slow, not run (NODEVOL_DOC_EXAMPLES=all runs it): ${where.file}:${where.line}`);
        continue;
      }
      const { text, printed } = await produce(m);
      if (!sameOutput(m.block.body, text)) {
        if (WRITE) {
          const edits = rewrites.get(m.file) ?? [];
          edits.push({ start: m.block.bodyStart, end: m.block.bodyEnd, text: text === '' ? '' : `${text}\n` });
          rewrites.set(m.file, edits);
        } else problems.push({ ...where, message: `the block differs from what its command prints now (npm run docs:examples rewrites it):\n${text}` });
      }
      for (const line of printed.flatMap(messageLines)) {
        if (line.length >= 200) problems.push({ ...where, message: `a message of ${line.length} characters (at most 199, tables aside): ${line}` });
      }
    }
    assert.deepEqual(problems, [], formatProblems(problems));
  });
});

describe('documentation and --help: every example nodevol command runs as written', () => {
  it('the check refuses a placeholder, an unknown flag or gate, a missing scenario, a bad duration', async () => {
    for (const [args, why] of [
      [['explore', '--generate', '100', '--feature-gates', 'CSIGlobalMountReconstruction=true,...'], /\.\.\./],
      [['audit', '--no-such-flag'], /unknown option '--no-such-flag'/],
      [['explore', '--scenario', 'no-such-story'], /no such built-in scenario/],
      [['demo', '--scenario', 'scenarios/none.yaml', '--no-html'], /no such file/],
      [['audit', '--interval', 'soon'], /invalid duration/],
      [['explore', '--scenario', 'kep-story-1', '--plan', 'crash:sometime'], /./],
    ] as const) {
      const problem = await whyNotRunnable(args, REPO_ROOT);
      assert.ok(problem !== undefined && why.test(problem), `${args.join(' ')}: ${String(problem)}`);
    }
    assert.equal(await whyNotRunnable(['explore', '--generate', '100', '--feature-gates', 'AllAlpha=true'], REPO_ROOT), undefined);
  });

  it('every nodevol command of a shell block of README.md, CONTRIBUTING.md and docs/', async () => {
    const problems: Problem[] = [];
    let checked = 0;
    for (const file of documentationFiles(REPO_ROOT)) {
      for (const b of fencedBlocks(await readFile(file, 'utf8'))) {
        if (!['sh', 'bash', 'shell', 'console'].includes(b.info)) continue;
        for (const cmd of shellCommands(b.body)) {
          const args = nodevolArgs(cmd.words);
          if (args === undefined) continue;
          checked++;
          const why = await whyNotRunnable(args, REPO_ROOT);
          if (why !== undefined) problems.push({ file: rel(file), line: b.line, message: `${cmd.text}: ${why}` });
        }
      }
    }
    assert.ok(checked >= 30, `only ${checked} commands found`);
    assert.deepEqual(problems, [], formatProblems(problems));
  });

  it("every example of every command's --help", async () => {
    const problems: string[] = [];
    let checked = 0;
    for (const command of ['', 'audit', 'agent', 'mock-driver', 'demo', 'explore', 'recover', 'timeline', 'version', 'completion']) {
      const r = spawnSync(process.execPath, [NODEVOL_BIN, ...(command === '' ? [] : [command]), '--help'], { encoding: 'utf8', env: { ...process.env, COLUMNS: '1000' }, timeout: 60_000 });
      assert.equal(r.status, 0, r.stderr);
      for (const script of helpExampleCommands(r.stdout)) {
        for (const cmd of shellCommands(script)) {
          const args = nodevolArgs(cmd.words);
          if (args === undefined) continue;
          checked++;
          const why = await whyNotRunnable(args, REPO_ROOT);
          if (why !== undefined) problems.push(`nodevol ${command} --help: ${cmd.text}: ${why}`);
        }
      }
    }
    assert.ok(checked >= 25, `only ${checked} commands found`);
    assert.deepEqual(problems, []);
  });
});
