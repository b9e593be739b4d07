#!/usr/bin/env node
// Thin launcher. `npm run build` (run by `npm ci` via `prepare`) compiles the CLI to dist/src/
// and bundles it into one file, dist/bundle/cli/main.cjs, with a V8 code cache beside it
// (scripts/bundle.ts: fewer files to load and less to compile at start-up, ARCHITECTURE.md "Start-up"). The
// bundle is used when it is there; without it (a tsc-only build), or with NODEVOL_BUNDLE=0, the
// compiled modules in dist/src/ run instead: the same code either way.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as vm from 'node:vm';

// A reader that goes away (`nodevol explore --help | head -3`) ends the output, not the process
// in a stack trace: the process ends at once with status 141, as a Go program (kubectl, kubelet)
// killed by SIGPIPE does in a shell. Any other write error stays fatal.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(141);
    throw err;
  });
}

/**
 * Runs the CommonJS bundle as node's own loader would (the same wrapper function and arguments,
 * and one more: the launcher's import()), compiled with its code cache when there is one that V8
 * accepts. Returns its exports, the compiled script (to record a cache from) and the cache's
 * header line.
 */
function loadBundle(file, scriptName = file) {
  const source = readFileSync(file, 'utf8');
  // The cache is used only when it names this build (scripts/bundle.ts: V8 itself compares the
  // source's length only): its first line is the bundle's, the rest V8's data.
  const header = /^\/\/ nodevol bundle \S+\n/.exec(source)?.[0] ?? '// nodevol bundle (none)\n';
  let cachedData;
  try {
    const cache = readFileSync(`${file}.cache`);
    if (cache.subarray(0, header.length).toString('latin1') === header) cachedData = cache.subarray(header.length);
  } catch {
    cachedData = undefined; // no cache: compile as usual
  }
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname, __nodevolImport) {\n${source}\n})`, {
    filename: scriptName,
    lineOffset: -1, // the wrapper's line: stack traces give the bundle's own line numbers
    cachedData,
  });
  const module = { exports: {} };
  // The bundle's import() of the packages it loads on demand (prom-client, yaml, the Kubernetes
  // client): code compiled from a code cache cannot call import() itself on Node 20
  // (src/adapters/node/importExternal.ts). From here, bare names resolve in the package's node_modules.
  const importExternal = (specifier) => import(specifier);
  script.runInThisContext()(module.exports, createRequire(file), module, file, path.dirname(file), importExternal);
  return { exports: module.exports, script, header };
}

const bundleFile = fileURLToPath(new URL('../dist/bundle/cli/main.cjs', import.meta.url));
const useBundle = process.env.NODEVOL_BUNDLE !== '0' && existsSync(bundleFile);
// node maps stack traces (--enable-source-maps) and coverage (NODE_V8_COVERAGE) only for code
// its loaders load: then the bundle is required as usual, without the code cache.
const nodeLoadsBundle = useBundle && (process.sourceMapsEnabled || (process.env.NODE_V8_COVERAGE ?? '') !== '');
// Build time only (scripts/codeCache.ts): the cache is recorded under the path the bundle will
// run from (V8 keeps that name in the cache: code compiled from it is named by it), given in
// NODEVOL_CODE_CACHE_SCRIPT_NAME while the bundle is elsewhere (the image's, while it is built).
const cacheFile = `${bundleFile}.cache`;
const recording = process.env.NODEVOL_CODE_CACHE_OUT === cacheFile;
const scriptName = recording && process.env.NODEVOL_CODE_CACHE_SCRIPT_NAME ? process.env.NODEVOL_CODE_CACHE_SCRIPT_NAME : bundleFile;
const bundle = useBundle && !nodeLoadsBundle ? loadBundle(bundleFile, scriptName) : undefined;
const { main, runsOnce } = bundle?.exports ?? (nodeLoadsBundle ? createRequire(import.meta.url)(bundleFile) : await import('../dist/src/cli/main.js'));

const argv = process.argv.slice(2);
process.exitCode = await main(argv);
// Build time only (scripts/codeCache.ts): the code cache, with every function this command ran,
// written beside the bundle (nowhere else) through a new temporary file.
if (bundle !== undefined && recording) {
  const temp = `${cacheFile}.${process.pid}.tmp`;
  writeFileSync(temp, Buffer.concat([Buffer.from(bundle.header, 'latin1'), bundle.script.createCachedData()]), { flag: 'wx', mode: 0o644 });
  renameSync(temp, cacheFile);
}
// A one-shot command (help, version, a single audit) has handed all it prints to stdout and
// stderr by now. End as soon as both have flushed it (a pipe may still hold queued output),
// sparing the heap's pending work and teardown; long-running commands end when nothing is left
// to run.
if (runsOnce(argv)) {
  let unflushed = 2;
  // A write error is the stream's 'error' handler's to settle (EPIPE ends with 141, above).
  const flushed = (err) => {
    if (err === undefined || err === null) {
      if (--unflushed === 0) process.exit();
    }
  };
  process.stdout.write('', flushed);
  process.stderr.write('', flushed);
}
