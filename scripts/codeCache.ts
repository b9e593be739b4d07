/**
 * Records the V8 code cache of the CLI bundle (dist/bundle/cli/main.cjs.cache): runs `nodevol
 * audit -o json` of examples/node through bin/nodevol.js with NODEVOL_CODE_CACHE_OUT set, and the
 * launcher writes the bytecode of every function the audit ran beside the bundle when the
 * command is done. Used by scripts/bundle.ts (the build) and scripts/image.ts (the image, with
 * the image's own node).
 *
 * The same bundle, node and training node give the same bytes (the image's digest depends on
 * them; test/cli/codeCache.cli.test.ts):
 * - V8 seeds its string hashes at random in every process, and the cache holds hash tables and
 *   strings laid out by those hashes: a recording of the same run differed every time (433,427
 *   to 433,459 bytes, four runs). `--random-seed` fixes the seed and `--predictable` runs V8 on
 *   one thread (no concurrent compiler or GC work, whose timing could change what is compiled
 *   or flushed). V8 leaves both flags out of the flag hash it checks a cache against, so a node
 *   run without them takes the cache (the build and the image check that it does).
 * - V8 keeps, in the cache, the file name the script was compiled under, and code compiled from
 *   the cache is named by it in stack traces (klog's caller reads them): the cache is recorded
 *   under the path the bundle will run from (`scriptName`: the image's
 *   /opt/nodevol/dist/bundle/cli/main.cjs, where the bundle is elsewhere while the image is
 *   built), so the builder's directory is neither in the bytes nor in the image's stack traces.
 * - No cache is there before (a cache that V8 takes would seed the new one with its functions),
 *   and the environment is only PATH and the launcher's two variables.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, realpathSync, rmSync, statSync } from 'node:fs';
import * as path from 'node:path';

export interface RecordCodeCacheOptions {
  /** The node binary that records the cache: V8 takes a cache only from its own build. */
  readonly node: string;
  /** The package directory: bin/nodevol.js and dist/bundle/cli/main.cjs below it. */
  readonly packageDir: string;
  /** The node audited (examples/node: kubelet/ and mountinfo, which names /var/lib/kubelet). */
  readonly trainingNode: string;
  /** The path the bundle will run from (default: where it is). */
  readonly scriptName?: string;
}

/** V8 flags of the recording only: both are outside the flag hash V8 checks a cache against. */
export const RECORDING_V8_FLAGS: readonly string[] = ['--predictable', '--random-seed=1'];

/** Where bin/nodevol.js looks for the code cache of a package directory. */
export function codeCacheFile(packageDir: string): string {
  return path.join(packageDir, 'dist', 'bundle', 'cli', 'main.cjs.cache');
}

/** Records the cache; returns its size in bytes. Throws with the launcher's stderr when it fails. */
export function recordCodeCache(o: RecordCodeCacheOptions): number {
  // The launcher knows its bundle by its real path, and writes only the cache beside it.
  const packageDir = realpathSync(o.packageDir);
  const out = codeCacheFile(packageDir);
  rmSync(out, { force: true });
  const run = spawnSync(
    o.node,
    [
      ...RECORDING_V8_FLAGS,
      path.join(packageDir, 'bin', 'nodevol.js'),
      'audit',
      '--root-dir',
      path.join(o.trainingNode, 'kubelet'),
      '--mountinfo',
      path.join(o.trainingNode, 'mountinfo'),
      '--mountinfo-root-dir',
      '/var/lib/kubelet',
      '-o',
      'json',
    ],
    {
      cwd: packageDir,
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        NODEVOL_BUNDLE: '1',
        NODEVOL_CODE_CACHE_OUT: out,
        ...(o.scriptName === undefined ? {} : { NODEVOL_CODE_CACHE_SCRIPT_NAME: o.scriptName }),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  // Exit 1: the example node has findings.
  if ((run.status !== 0 && run.status !== 1) || !existsSync(out)) {
    throw new Error(`recording the code cache failed (status ${String(run.status ?? run.signal)}): ${run.stderr.slice(-2000)}`);
  }
  return statSync(out).size;
}
