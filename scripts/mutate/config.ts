/**
 * The mutation run's configuration (`npm run mutate`; stryker.config.mjs loads it from dist/):
 * the scope (the engine), the killers in the order they run (cheapest first), the mutators left
 * out, and the split of the scope into shards. docs/benchmarks.md ("Mutation score") explains
 * each choice.
 */
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/** The engine: what is mutated. */
export const SCOPE: readonly string[] = ['src/volume', 'src/volumemanager', 'src/operationexecutor', 'src/nodevol', 'src/agent/runtime.ts', 'src/kubelet'];

/** The unit tests of the scope, run first (in this order, each folder's files sorted). */
export const UNIT_TESTS: readonly string[] = ['test/unit/nodevol', 'test/unit/operationexecutor', 'test/unit/volume', 'test/unit/volumemanager', 'test/unit/kubelet', 'test/unit/agent/runtimeIdle.test.ts', 'test/unit/agent/runtimeStop.test.ts', 'test/unit/agent/runtimeHealth.test.ts', 'test/unit/fidelity'];

/** Unit tests that are not killers: they run the built CLI bundle, which the mutation run does not build. */
export const NOT_KILLERS: readonly string[] = ['test/unit/fidelity/logs.test.ts'];

/** The explorer's killers (test/mutation/), after the unit tests: cheapest first. */
export const EXPLORER_KILLERS: readonly string[] = [
  'test/mutation/scenariosAllGates.mutation.ts',
  'test/mutation/scenariosKepOnly.mutation.ts',
  'test/mutation/workloadsAllGates.mutation.ts',
  'test/mutation/workloadsKepOnly.mutation.ts',
];

/** The TypeScript files under `entries` (files or folders, relative to `root`), sorted, `/`-separated. */
export function tsFiles(root: string, entries: readonly string[], suffix = '.ts'): string[] {
  const out: string[] = [];
  for (const entry of entries) {
    const full = path.join(root, entry);
    if (statSync(full).isFile()) {
      out.push(entry);
      continue;
    }
    const found = readdirSync(full, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith(suffix) && !f.endsWith('.d.ts'))
      .map((f) => path.posix.join(entry, f.split(path.sep).join('/')))
      .sort();
    out.push(...found);
  }
  return out;
}

/** The killers as the built files the tap runner runs, in order. */
export function killerFiles(root: string): string[] {
  const toDist = (f: string): string => path.posix.join('dist', f.replace(/\.ts$/, '.js'));
  return [...tsFiles(root, UNIT_TESTS, '.test.ts').filter((f) => !NOT_KILLERS.includes(f)), ...EXPLORER_KILLERS].map(toDist);
}

/**
 * Shard `index` of `count` of the scope's files: the files, largest first (ties by path), each
 * go to the shard with the fewest bytes so far (ties: the lowest index). Deterministic for a
 * given tree; the shards together hold every file once.
 */
export function shardFiles(root: string, index: number, count: number): string[] {
  if (!Number.isInteger(count) || count < 1 || !Number.isInteger(index) || index < 0 || index >= count) throw new Error(`--shard: want I/N with 0 <= I < N, got ${index}/${count}`);
  const files = tsFiles(root, SCOPE).map((f) => ({ f, size: statSync(path.join(root, f)).size }));
  files.sort((a, b) => b.size - a.size || (a.f < b.f ? -1 : 1));
  const load = new Array<number>(count).fill(0);
  const shards: string[][] = Array.from({ length: count }, () => []);
  for (const { f, size } of files) {
    let best = 0;
    for (let i = 1; i < count; i++) if ((load[i] ?? 0) < (load[best] ?? 0)) best = i;
    load[best] = (load[best] ?? 0) + size;
    shards[best]?.push(f);
  }
  return (shards[index] ?? []).sort();
}

/** Where a run writes its reports and incremental file. */
export function reportDir(shard?: { index: number; count: number }): string {
  return shard === undefined ? 'reports/mutation' : `reports/mutation/shard-${shard.index}-of-${shard.count}`;
}

/** The scope as StrykerJS `mutate` globs. */
export const SCOPE_GLOBS: readonly string[] = SCOPE.map((s) => (s.endsWith('.ts') ? s : `${s}/**/*.ts`));

/** The StrykerJS options (stryker.config.mjs exports them; `npm run mutate` overrides mutate and the report paths). */
export function strykerConfig(root = process.cwd()): Record<string, unknown> {
  const dir = reportDir();
  return {
    packageManager: 'npm',
    plugins: ['@stryker-mutator/*', './dist/scripts/mutate/plugins.js'],
    mutate: [...SCOPE_GLOBS],
    // Type-check each mutant (a mutant that does not compile is not a test's business) ...
    checkers: ['typescript'],
    tsconfigFile: 'tsconfig.json',
    // ... then transpile the mutated tree (type-checked already) with esbuild: a second.
    // (The sandbox is under .stryker-tmp/ of the checkout: modules resolve from the checkout's node_modules.)
    buildCommand: `${path.resolve(root, 'node_modules/.bin/esbuild')} src/**/*.ts test/**/*.ts --outdir=dist --outbase=. --platform=node --format=esm --log-level=warning`,
    testRunner: 'ordered-tap',
    tap: { testFiles: killerFiles(root), nodeArgs: ['--test-reporter=tap', '-r', '{{hookFile}}', '{{testFile}}'], forceBail: true },
    coverageAnalysis: 'perTest',
    ignorers: ['log-text'],
    incremental: true,
    incrementalFile: `${dir}/stryker-incremental.json`,
    reporters: ['clear-text', 'progress', 'json', 'html'],
    jsonReporter: { fileName: `${dir}/mutation.json` },
    htmlReporter: { fileName: `${dir}/mutation.html` },
    ignorePatterns: ['dist', 'reports', '.git'],
    // A mutant's time limit is timeoutMS + timeoutFactor x the dry run's time of the files that
    // reach it. On a loaded machine a survivor's four explorer files (about 51 s in a quiet dry
    // run) can take twice that, and StrykerJS's default factor (1.5) then counts the survivor
    // as a timeout, a kill: 3 keeps a slowed survivor a survivor, at the price of a real hang
    // (rare: a loop that never ends) costing twice as long.
    timeoutMS: 10000,
    timeoutFactor: 3,
    concurrency: 2,
    tempDirName: '.stryker-tmp',
  };
}
