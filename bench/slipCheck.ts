/**
 * One slip (bench/slipList.ts) against one check, in a temporary copy of the tree: the worktree is
 * never modified.
 *
 * The copy holds the built tree (dist/), the sources, the tests' own files and the scenarios, with
 * node_modules linked. The slip is applied to the copy's source file, and that one file is
 * transpiled (TypeScript's transpileModule with tsconfig.json's options) over its compiled JS in
 * the copy's dist/: a second or so instead of a whole tsc. Before that, the unmodified source is
 * transpiled the same way and must give exactly the JS dist/ holds, so a stale dist/ (or a
 * transpile that differs from tsc's) is refused rather than measured.
 *
 * Checks (each run in a child process inside the copy, so every import is the slipped one):
 * - `builtins`: every built-in scenario with every gate on (AllAlpha), explored at depth 1, both
 *   crash kinds, at most `crashPoints` crash points (sampled by seed, as the mutation killers
 *   do); stops at the first run that breaks an invariant.
 * - `generated`: generated medium workloads seed 1..`workloads`, every gate on, each explored as
 *   `nodevol explore --generate` does (depth 1, both crash kinds, 12 crash points); stops at the
 *   first run that breaks an invariant (the explorer's onResult ends the exploration).
 * - `unit`: the unit tests of the touched folder (test/unit/<the source file's folder>, the
 *   deepest that exists, with its subfolders).
 */
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { applySlip, slipById, type Slip } from './slipList.js';

export type CheckName = 'builtins' | 'generated' | 'unit';
export const CHECKS: readonly CheckName[] = ['builtins', 'generated', 'unit'];

export interface CheckOutcome {
  readonly slip: number;
  readonly check: CheckName;
  /** caught: a violation or a failing test; missed: all clean; not run: over the time budget. */
  readonly result: 'caught' | 'missed' | 'not run';
  /** What caught it (scenario or workload seed and invariant, or the failing tests), or why not run. */
  readonly by: string;
  readonly wallMs: number;
}

/** The repository root this module belongs to (dist/bench/slipCheck.js → ../..). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** What the copy holds besides dist/ (tests read some files from the source tree, e.g. fixtures). */
const COPIED = ['src', 'test', 'bench', 'scripts', 'scenarios', 'proto', 'docs', 'examples', 'deploy', 'package.json', 'tsconfig.json'];

function compilerOptions(root: string): ts.CompilerOptions {
  const configPath = path.join(root, 'tsconfig.json');
  const read = ts.readConfigFile(configPath, (p) => readFileSync(p, 'utf8'));
  if (read.error !== undefined) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, '\n'));
  const options = ts.parseJsonConfigFileContent(read.config, ts.sys, root).options;
  // NodeNext picks ESM from package.json's "type": "module", which transpileModule cannot see.
  return { ...options, module: ts.ModuleKind.ES2022, moduleResolution: ts.ModuleResolutionKind.Bundler };
}

/** The JS tsc emits for `source` (a file of the tree), the source map comment dropped. */
export function transpile(root: string, file: string, source: string): string {
  const out = ts.transpileModule(source, { compilerOptions: compilerOptions(root), fileName: path.join(root, file) });
  return dropMapComment(out.outputText);
}

function dropMapComment(js: string): string {
  return js.replace(/\n\/\/# sourceMappingURL=.*\s*$/, '\n');
}

/** dist/ path of a source file (src/a/b.ts → dist/src/a/b.js). */
export function compiledPath(file: string): string {
  return path.join('dist', file.replace(/\.ts$/, '.js'));
}

/**
 * A temporary copy of the tree at `root` with `slip` applied (undefined: none, the baseline).
 * Returns the copy's directory; the caller removes it.
 */
export function prepareTree(slip: Slip | undefined, root = REPO_ROOT): string {
  const dir = mkdtempSync(path.join(tmpdir(), `nodevol-slip-${slip?.id ?? 0}-`));
  for (const entry of [...COPIED, 'dist']) {
    const from = path.join(root, entry);
    if (existsSync(from)) cpSync(from, path.join(dir, entry), { recursive: true, filter: (p) => !p.endsWith('.tsbuildinfo') });
  }
  symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
  if (slip === undefined) return dir;
  const original = readFileSync(path.join(root, slip.file), 'utf8');
  const compiled = path.join(dir, compiledPath(slip.file));
  if (transpile(root, slip.file, original) !== dropMapComment(readFileSync(compiled, 'utf8'))) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`${compiledPath(slip.file)} is not what ${slip.file} compiles to: run \`npx tsc -p tsconfig.json\` first`);
  }
  const slipped = applySlip(slip, original);
  writeFileSync(path.join(dir, slip.file), slipped);
  writeFileSync(compiled, transpile(dir, slip.file, slipped));
  return dir;
}

/** test/unit/<folder of `file` below src/>, the deepest that exists (src/volume/csi/x.ts → test/unit/volume/csi). */
export function unitDirOf(file: string, root = REPO_ROOT): string {
  const parts = path.dirname(file).split('/').slice(1);
  for (let n = parts.length; n > 0; n--) {
    const dir = path.join('test', 'unit', ...parts.slice(0, n));
    if (existsSync(path.join(root, dir)) && statSync(path.join(root, dir)).isDirectory()) return dir;
  }
  throw new Error(`no unit test folder for ${file}`);
}

/** The compiled unit test files below `dir` (a test/unit folder), relative to `root`, sorted. */
export function unitTestFiles(dir: string, root = REPO_ROOT): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(path.join(root, d), { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.test.js')) out.push(p);
    }
  };
  walk(path.join('dist', dir));
  return out.sort();
}

export interface RunOptions {
  /** Wall-time budget of the check; past it the child is ended and the check is "not run". */
  readonly budgetMs: number;
  readonly crashPoints: number;
  /** Generated workloads firstWorkload..workloads. */
  readonly firstWorkload: number;
  readonly workloads: number;
  /** Only these built-in scenarios (default: every one). */
  readonly scenarios?: readonly string[];
  /** Progress lines of the child (a seed or scenario done). */
  readonly onProgress?: (line: string) => void;
  /** Keep the temporary tree (its path is printed). */
  readonly keep?: boolean;
}

/** Runs one check of one slip (0: the unmodified tree) in a temporary copy of the tree. */
export async function checkSlip(id: number, check: CheckName, o: RunOptions): Promise<CheckOutcome> {
  const slip = id === 0 ? undefined : slipById(id);
  const started = performance.now();
  const dir = prepareTree(slip);
  try {
    const args =
      check === 'unit'
        ? ['--test', '--test-concurrency=1', '--test-reporter=tap', ...unitTestFiles(unitDirOf(slip?.file ?? 'src/agent/runtime.ts', dir), dir)]
        : [
            compiledPath('bench/slipCheck.ts'),
            '--child',
            check,
            '--crash-points',
            String(o.crashPoints),
            '--first-workload',
            String(o.firstWorkload),
            '--workloads',
            String(o.workloads),
            ...(o.scenarios === undefined ? [] : ['--scenarios', o.scenarios.join(',')]),
          ];
    const r = await runChild(dir, args, o);
    const wallMs = performance.now() - started;
    if (r.timedOut) return { slip: id, check, result: 'not run', by: `over the ${Math.round(o.budgetMs / 1000)} s budget${r.last === '' ? '' : ` (${r.last} clean)`}`, wallMs };
    if (check === 'unit') {
      const failed = failedTests(r.stdout);
      return r.code === 0 ? { slip: id, check, result: 'missed', by: '', wallMs } : { slip: id, check, result: 'caught', by: failed.slice(0, 2).join('; ') || `exit ${r.code}`, wallMs };
    }
    const answer = r.stdout.split('\n').find((l) => l.startsWith('RESULT '));
    if (answer === undefined) throw new Error(`slip ${id} ${check}: the check gave no result (exit ${r.code}): ${r.stderr.slice(-2000)}`);
    const parsed = JSON.parse(answer.slice('RESULT '.length)) as { caught: boolean; by: string };
    return { slip: id, check, result: parsed.caught ? 'caught' : 'missed', by: parsed.by, wallMs };
  } finally {
    if (o.keep === true) console.error(`slip ${id}: tree kept at ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

/** The innermost failing tests of a TAP stream (the first `not ok` lines that have no failing subtest listed before them). */
export function failedTests(tap: string): string[] {
  const out: string[] = [];
  let last = -1;
  for (const line of tap.split('\n')) {
    const m = /^(\s*)not ok \d+ - (.*)$/.exec(line);
    if (m === null) continue;
    const depth = (m[1] ?? '').length;
    // A parent is reported after its subtests, less indented: keep only the first (innermost) one of a chain.
    if (last === -1 || depth >= last) out.push((m[2] ?? '').trim());
    last = depth;
  }
  return out;
}

function runChild(cwd: string, args: readonly string[], o: RunOptions): Promise<{ code: number | null; stdout: string; stderr: string; timedOut: boolean; last: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let last = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, o.budgetMs);
    child.stdout.on('data', (d: Buffer) => {
      const text = d.toString();
      stdout += text;
      for (const line of text.split('\n')) {
        if (!line.startsWith('DONE ')) continue;
        last = line.slice('DONE '.length);
        o.onProgress?.(last);
      }
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut, last });
    });
  });
}

// ---------------------------------------------------------------- the child: runs inside the copy

class Caught extends Error {
  constructor(readonly by: string) {
    super(by);
  }
}

async function childMain(check: 'builtins' | 'generated', crashPoints: number, firstWorkload: number, workloads: number, scenarios: readonly string[] | undefined): Promise<void> {
  // Imported here: in the child these are the copy's (slipped) modules.
  const { FeatureGate } = await import('../src/features/features.js');
  const { explore } = await import('../src/sim/explorer.js');
  const { builtinScenarioNames, loadBuiltinScenario } = await import('../src/sim/scenario.js');
  const { generateScenario } = await import('../src/sim/generate.js');
  const { DEFAULT_MAX_CRASH_POINTS } = await import('../src/sim/swarm.js');
  const gates = FeatureGate.parse(['AllAlpha=true']).gate;
  const cases =
    check === 'builtins'
      ? (scenarios ?? builtinScenarioNames()).map((name) => ({ label: name, scenario: loadBuiltinScenario(name), seed: 1, max: crashPoints }))
      : Array.from({ length: Math.max(0, workloads - firstWorkload + 1) }, (_, i) => firstWorkload + i).map((seed) => ({
          label: `workload ${seed}`,
          scenario: generateScenario(seed, 'medium'),
          seed,
          max: DEFAULT_MAX_CRASH_POINTS,
        }));
  for (const c of cases) {
    try {
      await explore({
        scenario: c.scenario,
        gates,
        crash: 'both',
        depth: 1,
        faults: false,
        seed: c.seed,
        runs: 1,
        ...(c.max > 0 ? { maxCrashPoints: c.max } : {}),
        shrink: false,
        replayCommand: () => '',
        onResult: (r) => {
          const v = r.violations[0];
          if (v !== undefined) throw new Caught(`${c.label}: ${v.invariant}`);
        },
      });
    } catch (err) {
      if (!(err instanceof Caught)) throw err;
      console.log(`RESULT ${JSON.stringify({ caught: true, by: err.by })}`);
      return;
    }
    console.log(`DONE ${c.label}`);
  }
  console.log(`RESULT ${JSON.stringify({ caught: false, by: '' })}`);
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url) && process.argv[2] === '--child') {
  const arg = (name: string, dflt: number): number => {
    const i = process.argv.indexOf(name);
    return i === -1 ? dflt : Number(process.argv[i + 1]);
  };
  const check = process.argv[3];
  if (check !== 'builtins' && check !== 'generated') throw new Error(`slipCheck --child: unknown check ${String(check)}`);
  const named = process.argv.indexOf('--scenarios');
  const scenarios = named === -1 ? undefined : (process.argv[named + 1] ?? '').split(',');
  await childMain(check, arg('--crash-points', 12), arg('--first-workload', 1), arg('--workloads', 200), scenarios);
}
