/**
 * `npm run explore:swarm`: a long search over generated workloads (`nodevol explore --generate`,
 * as a whole process, on every core), then the same with the KEP-6058 gate alone to show the
 * explorer finds on its own the classes the built-in scenarios hold. Prints runs/s, the
 * violations per invariant and the shrunk cases (their files in a temp dir). Exit 1 when the
 * search with every gate on found anything.
 *
 *   BENCH_SWARM_WORKLOADS  workloads with every gate on (default 2000)
 *   BENCH_SWARM_KEP        workloads with the KEP-6058 gate alone (default 300; 0: skip)
 *   BENCH_SWARM_SEED       first workload (default 1)
 *   BENCH_SWARM_SIZE       small | medium | large (default medium)
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import { EVERY_GATE } from './exploreCost.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = path.resolve(here, '../../bin/nodevol.js');
const env = (name: string, fallback: string): string => process.env[name] ?? fallback;
const seed = env('BENCH_SWARM_SEED', '1');
const size = env('BENCH_SWARM_SIZE', 'medium');

function search(label: string, count: string, gates: Readonly<Record<string, boolean>>): number {
  const out = mkdtempSync(path.join(tmpdir(), 'nodevol-swarm-'));
  const gateText = Object.entries(gates)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(',');
  console.log(`== ${label}: nodevol explore --generate ${count} --seed ${seed} --size ${size} --feature-gates ${gateText} --shrink 2 --out ${out}`);
  const r = spawnSync(process.execPath, [bin, 'explore', '--generate', count, '--seed', seed, '--size', size, '--feature-gates', gateText, '--shrink', '2', '--out', out], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (r.status !== 0 && r.status !== 1) throw new Error(`nodevol explore --generate exited ${String(r.status)}`);
  return r.status;
}

const every = search('every gate on', env('BENCH_SWARM_WORKLOADS', '2000'), EVERY_GATE);
const kepCount = env('BENCH_SWARM_KEP', '300');
if (kepCount !== '0') search('the KEP-6058 gate alone', kepCount, { CSIGlobalMountReconstruction: true });
process.exitCode = every === 0 ? 0 : 1;
