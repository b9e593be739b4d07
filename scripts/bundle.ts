/**
 * Bundles the compiled CLI (dist/src/cli/main.js, tsc's output) into dist/bundle/cli/ with
 * esbuild; run by `npm run build` after tsc. bin/nodevol.js loads the bundle when it is there.
 *
 * Why: a process that imports ~150 small ES modules spends much of its start-up resolving,
 * reading and linking them; `nodevol audit` and `nodevol --help` are short processes whose
 * start-up is most of their time (README, Speed). The bundle is the same compiled code in a few
 * files.
 *
 * What stays as it was:
 * - Each command is still loaded only when it runs: the dynamic `import()`s of the command
 *   modules become separate chunks (code splitting), so `audit` and `--help` load no agent,
 *   mock driver or simulator code.
 * - Every package except commander stays external, imported from node_modules at run time as
 *   before: gRPC, prom-client, YAML, zod and the Kubernetes client load only where they did
 *   (the lazy-loading test runs against the bundle), and files they read next to themselves
 *   are where they expect.
 * - dist/bundle/cli/ is as deep below the package root as dist/src/cli/, so the paths the code
 *   derives from `import.meta.url` (package.json, proto/, scenarios/) resolve the same.
 *
 *   node dist/scripts/bundle.js
 */
import { build, type Plugin } from 'esbuild';
import { readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';

/** The package root: dist/scripts/ → ../.. */
const ROOT = path.resolve(import.meta.dirname, '..', '..');
export const BUNDLE_DIR = path.join(ROOT, 'dist', 'bundle', 'cli');
const ENTRY = path.join(ROOT, 'dist', 'src', 'cli', 'main.js');

/** Packages bundled in: commander is on every command's start-up path and has no files of its own to read. */
const BUNDLED_PACKAGES: ReadonlySet<string> = new Set(['commander']);

/**
 * commander requires node:child_process as it loads, for subcommands that are separate
 * executables, which nodevol never declares. Loading it (with net, dgram and the streams) cost
 * every command ~2 ms of start-up: commander gets a stand-in that loads the real module on its
 * first use. Nothing else is affected (only commander's own import is redirected).
 */
const lazyChildProcessForCommander: Plugin = {
  name: 'lazy-child-process-for-commander',
  setup(b) {
    const commanderDir = `${path.sep}node_modules${path.sep}commander${path.sep}`;
    b.onResolve({ filter: /^(node:)?child_process$/ }, (args) =>
      args.importer.includes(commanderDir) ? { path: 'child_process', namespace: 'nodevol-lazy' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'nodevol-lazy' }, () => ({
      contents: "let real; module.exports = new Proxy({}, { get: (_, key) => (real ??= require('node:child_process'))[key] });",
      loader: 'js',
    }));
  },
};

function externalPackages(): string[] {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  const deps = Object.keys(pkg.dependencies ?? {}).filter((d) => !BUNDLED_PACKAGES.has(d));
  // A package and every file below it (`yaml`, `yaml/util`, ...).
  return deps.flatMap((d) => [d, `${d}/*`]);
}

async function bundle(): Promise<void> {
  rmSync(BUNDLE_DIR, { recursive: true, force: true });
  const result = await build({
    entryPoints: { main: ENTRY },
    outdir: BUNDLE_DIR,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: externalPackages(),
    // commander is CommonJS and calls require() for node's built-in modules: give the ES module
    // bundle a real require.
    banner: { js: "import { createRequire as __nodevolCreateRequire } from 'node:module';\nconst require = __nodevolCreateRequire(import.meta.url);" },
    chunkNames: 'chunk-[hash]',
    sourcemap: 'linked',
    // Whitespace and syntax only: names stay as written, so stack traces and class names read the same.
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    logLevel: 'warning',
    metafile: true,
    plugins: [lazyChildProcessForCommander],
  });
  if (result.errors.length > 0) throw new Error(`bundle: ${result.errors.length} errors`);
  const outputs = Object.entries(result.metafile.outputs).filter(([f]) => f.endsWith('.js'));
  const bytes = outputs.reduce((n, [, o]) => n + o.bytes, 0);
  console.log(`bundle: ${outputs.length} files, ${Math.round(bytes / 1024)} KiB in ${path.relative(ROOT, BUNDLE_DIR)}/`);
}

bundle().catch((err: unknown) => {
  console.error('bundle failed:', err);
  process.exitCode = 1;
});
