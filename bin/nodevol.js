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
const { main } = await import(useBundle ? bundle.href : '../dist/src/cli/main.js');

process.exitCode = await main(process.argv.slice(2));
