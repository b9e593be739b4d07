/**
 * What the CLI bundle's V8 code cache saves at start-up (scripts/codeCache.ts): `nodevol audit
 * --help` and a real audit (`audit -o json` of examples/node) timed as whole processes, from two
 * copies of the package that differ only in the cache (one has none: V8 compiles the bundle
 * as it runs), interleaved round by round. Run after `npm run build`:
 *
 *   node dist/bench/startupCodeCache.js [ROUNDS]      (default 20)
 *
 * Prints, per command and copy, the median and mean wall time of ROUNDS spawns (after one
 * warm-up of each), and the median saving.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

import { recordCodeCache } from '../scripts/codeCache.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const EXAMPLE = path.join(ROOT, 'examples', 'node');

function packageCopy(parent: string, name: string): string {
  const dir = path.join(parent, name);
  mkdirSync(path.join(dir, 'dist', 'bundle', 'cli'), { recursive: true });
  mkdirSync(path.join(dir, 'bin'));
  copyFileSync(path.join(ROOT, 'bin', 'nodevol.js'), path.join(dir, 'bin', 'nodevol.js'));
  copyFileSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  for (const f of ['main.cjs', 'main.cjs.map']) copyFileSync(path.join(ROOT, 'dist', 'bundle', 'cli', f), path.join(dir, 'dist', 'bundle', 'cli', f));
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

const COMMANDS: readonly { readonly name: string; readonly args: readonly string[] }[] = [
  { name: 'audit --help', args: ['audit', '--help'] },
  {
    name: 'audit -o json (examples/node)',
    args: ['audit', '--root-dir', path.join(EXAMPLE, 'kubelet'), '--mountinfo', path.join(EXAMPLE, 'mountinfo'), '--mountinfo-root-dir', '/var/lib/kubelet', '-o', 'json'],
  },
];

function once(dir: string, args: readonly string[]): number {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, [path.join(dir, 'bin', 'nodevol.js'), ...args], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' } });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  // The example node has findings: exit 1.
  if (r.status !== 0 && r.status !== 1) throw new Error(`nodevol ${args.join(' ')} in ${dir}: exit ${String(r.status)}: ${r.stderr}`);
  return ms;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

function main(): void {
  const rounds = Number(process.argv[2] ?? '20');
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`ROUNDS: not a positive integer: ${process.argv[2] ?? ''}`);
  if (!existsSync(path.join(ROOT, 'dist', 'bundle', 'cli', 'main.cjs'))) throw new Error('no CLI bundle: run npm run build first');
  const work = mkdtempSync(path.join(tmpdir(), 'nodevol-startup-cache-'));
  try {
    const withCache = packageCopy(work, 'with-cache');
    recordCodeCache({ node: process.execPath, packageDir: withCache, trainingNode: EXAMPLE });
    const copies = [
      { name: 'with the code cache', dir: withCache },
      { name: 'without', dir: packageCopy(work, 'without') },
    ];
    const times = new Map<string, number[]>();
    for (const c of COMMANDS) for (const p of copies) once(p.dir, c.args); // warm-up: the page cache
    for (let i = 0; i < rounds; i++) {
      for (const c of COMMANDS) {
        for (const p of i % 2 === 0 ? copies : [...copies].reverse()) {
          const key = `${c.name}\t${p.name}`;
          times.set(key, [...(times.get(key) ?? []), once(p.dir, c.args)]);
        }
      }
    }
    console.log(`node ${process.version}, ${rounds} runs each, interleaved; wall ms`);
    for (const c of COMMANDS) {
      const w = times.get(`${c.name}\twith the code cache`) ?? [];
      const wo = times.get(`${c.name}\twithout`) ?? [];
      console.log(
        `${c.name}: with the code cache median ${median(w).toFixed(1)} (mean ${mean(w).toFixed(1)}), without median ${median(wo).toFixed(1)} (mean ${mean(wo).toFixed(1)}): the cache saves ${(median(wo) - median(w)).toFixed(1)} ms (${((1 - median(w) / median(wo)) * 100).toFixed(0)} %)`,
      );
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main();
