/**
 * Bundles the compiled CLI (dist/src/cli/main.js, tsc's output) into one CommonJS file,
 * dist/bundle/cli/main.cjs, with esbuild, then records a V8 code cache for it
 * (main.cjs.cache); run by `npm run build` after tsc. bin/nodevol.js loads the bundle, with the
 * cache, when it is there.
 *
 * Why: `nodevol audit` and `nodevol --help` are short processes whose start-up is much of their
 * time (ARCHITECTURE.md, "Start-up: the CLI bundle"; docs/benchmarks.md). A process that imports ~150 small ES modules spends much of it
 * resolving, reading and linking them; one file removes that. And V8 compiles every function the
 * first time it runs; Node 20 keeps no compiled code for ES modules, but a classic script can be
 * compiled from a code cache: the bytecode of every function an audit ran, recorded here by
 * running `nodevol audit` once on examples/node (scripts/codeCache.ts: the same bytes from every
 * build of the same bundle in the same place). The cache is V8's own format, checked by V8
 * against the source and the node build and flags; when it does not match (another node, other
 * flags), V8 rejects it and compiles as usual: the same code either way.
 *
 * What stays as it was:
 * - Each command's code still runs only when that command runs: esbuild keeps the dynamic
 *   `import()`s of the command modules lazy (their bodies run on first import).
 * - Every package except commander stays external, loaded from node_modules at run time as
 *   before: gRPC, prom-client, YAML and zod load only where they did
 *   (the lazy-loading test runs against the bundle), and files they read next to themselves
 *   are where they expect.
 * - dist/bundle/cli/ is as deep below the package root as dist/src/cli/, so the paths the code
 *   derives from `import.meta.url` (package.json, proto/, scenarios/) resolve the same: it is
 *   defined as the bundle's own file URL.
 *
 *   node dist/scripts/bundle.js
 */
import { build, type Plugin } from 'esbuild';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';

import { codeCacheFile, recordCodeCache } from './codeCache.js';

/** The package root: dist/scripts/ → ../.. */
const ROOT = path.resolve(import.meta.dirname, '..', '..');
export const BUNDLE_DIR = path.join(ROOT, 'dist', 'bundle', 'cli');
const BUNDLE_FILE = path.join(BUNDLE_DIR, 'main.cjs');
/** Where bin/nodevol.js looks for the code cache, and where NODEVOL_CODE_CACHE_OUT has it written. */
const CODE_CACHE_FILE = codeCacheFile(ROOT);
/**
 * The bundle's first line names it by the sha256 of its text (written over this placeholder,
 * which has the same length, so the source map stays right); bin/nodevol.js writes that line at
 * the head of the code cache and uses a cache only with the same line. V8's own check of a cache
 * against its source compares the source's length, not its text: a cache left from another
 * build of the same length would be taken.
 */
const BUILD_ID_PLACEHOLDER = '0'.repeat(64);
/** The node the code cache is recorded on: an audit of it runs the audit's code. */
const TRAINING_NODE = path.join(ROOT, 'examples', 'node');
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
    outExtension: { '.js': '.cjs' },
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    external: externalPackages(),
    // The ES modules' import.meta becomes the bundle file's own URL (see the header). The banner
    // comes first in the file, so it carries the strict mode directive ES modules had: after a
    // statement, esbuild's own "use strict" would be an expression and the bundle sloppy.
    define: { 'import.meta.url': '__nodevolImportMetaUrl' },
    banner: { js: `// nodevol bundle ${BUILD_ID_PLACEHOLDER}\n'use strict';\nconst __nodevolImportMetaUrl = require('node:url').pathToFileURL(__filename).href;` },
    sourcemap: 'linked',
    // The map is read back at run time for klog's caller (src/adapters/node/sourceMapCaller.ts),
    // once, at the first line logged: without the sources' text it is a third of the size and
    // parses in about half the time. File names and lines are all a caller (or a debugger's
    // stack trace) needs; the sources are not shipped anyway.
    sourcesContent: false,
    // Whitespace and syntax only: names stay as written, so stack traces and class names read the same.
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    logLevel: 'warning',
    metafile: true,
    plugins: [lazyChildProcessForCommander],
  });
  if (result.errors.length > 0) throw new Error(`bundle: ${result.errors.length} errors`);
  // import() of a package in code compiled from the code cache fails on Node 20: such imports go
  // through importExternal (src/adapters/node/importExternal.ts). A new one would fail only when
  // the cache is used, which a test through dist/src/ or a rejected cache would never see.
  const direct = Object.entries(result.metafile.inputs).flatMap(([file, input]) =>
    input.imports.filter((i) => i.kind === 'dynamic-import' && i.external === true).map((i) => `${file}: import('${i.path}')`),
  );
  if (direct.length > 0) throw new Error(`bundle: import() of a package outside importExternal (src/adapters/node/importExternal.ts): ${direct.join(', ')}`);
  const text = readFileSync(BUNDLE_FILE, 'utf8');
  const at = text.indexOf(BUILD_ID_PLACEHOLDER);
  if (at < 0) throw new Error(`bundle: no build id placeholder in ${BUNDLE_FILE}`);
  const id = createHash('sha256').update(text).digest('hex');
  writeFileSync(BUNDLE_FILE, text.slice(0, at) + id + text.slice(at + id.length));
  const bytes = Object.entries(result.metafile.outputs).reduce((n, [f, o]) => (f.endsWith('.cjs') ? n + o.bytes : n), 0);
  console.log(`bundle: ${Math.round(bytes / 1024)} KiB in ${path.relative(ROOT, BUNDLE_FILE)}`);
  recordBuildCodeCache();
}

/** The code cache (scripts/codeCache.ts), recorded by this node where the bundle is. */
function recordBuildCodeCache(): void {
  if (!existsSync(TRAINING_NODE)) {
    console.log(`bundle: no code cache (${path.relative(ROOT, TRAINING_NODE)} is missing); the bundle is compiled at each start`);
    return;
  }
  const bytes = recordCodeCache({ node: process.execPath, packageDir: ROOT, trainingNode: TRAINING_NODE });
  console.log(`bundle: code cache ${Math.round(bytes / 1024)} KiB in ${path.relative(ROOT, CODE_CACHE_FILE)}`);
}

bundle().catch((err: unknown) => {
  console.error('bundle failed:', err);
  process.exitCode = 1;
});
