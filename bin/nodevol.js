#!/usr/bin/env node
// Thin launcher. `npm run build` (run by `npm ci` via `prepare`) compiles the CLI to dist/src/
// and bundles it into dist/bundle/cli/ (scripts/bundle.ts: fewer files to load at start-up,
// README "Speed"). The bundle is used when it is there; without it (a tsc-only build), or with
// NODEVOL_BUNDLE=0, the compiled modules in dist/src/ run instead: the same code either way.
import { existsSync } from 'node:fs';

// A reader that goes away (`nodevol explore --help | head -3`) ends the output, not the process
// in a stack trace: the process ends at once with status 141, as a Go program (kubectl, kubelet)
// killed by SIGPIPE does in a shell. Any other write error stays fatal.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(141);
    throw err;
  });
}

const bundle = new URL('../dist/bundle/cli/main.js', import.meta.url);
const useBundle = process.env.NODEVOL_BUNDLE !== '0' && existsSync(bundle);
const { main, runsOnce } = await import(useBundle ? bundle.href : '../dist/src/cli/main.js');

const argv = process.argv.slice(2);
process.exitCode = await main(argv);
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
