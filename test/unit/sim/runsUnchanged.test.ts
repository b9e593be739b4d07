// What the explorer finds must not depend on how fast the simulator runs: a change made for speed
// (the scheduler, the drain after each event, the hashes, the in-memory filesystem) keeps every
// run exactly as it was. This pins a few explorations: how many runs, crash points and distinct
// states, which invariants broke in how many runs, and one hash over every run's trace hash,
// final world state, steps and end (so one changed interleaving anywhere shows).
//
// To re-pin after a change that is meant to change runs (a new generator draw, an engine fix, a
// new check), run
//   npx tsc -p tsconfig.json && NODEVOL_REPIN=1 node --test dist/test/unit/sim/runsUnchanged.test.js
// and paste the table it prints over PINNED below; say in the commit why the runs changed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FeatureGate } from '../../../src/features/features.js';
import { explore, type ExploreOptions } from '../../../src/sim/explorer.js';
import { generateScenario } from '../../../src/sim/generate.js';
import { fnv1a, RunningHash } from '../../../src/sim/prng.js';
import { loadBuiltinScenario } from '../../../src/sim/scenario.js';

interface Pin {
  readonly runs: number;
  readonly crashPoints: number;
  readonly states: number;
  /** invariant:runs, in the report's order. */
  readonly violations: string;
  /** fnv1a over every run's "traceHash finalState steps endReason", in order. */
  readonly hash: string;
}

interface Case {
  readonly name: string;
  readonly options: () => Omit<ExploreOptions, 'replayCommand' | 'onResult' | 'shrink'>;
}

const KEP_ONLY = ['CSIGlobalMountReconstruction=true'];
const EVERY_GATE = ['AllAlpha=true'];

const CASES: readonly Case[] = [
  {
    name: 'kep-story-2, both crash kinds, KEP-6058 only',
    options: () => ({ scenario: loadBuiltinScenario('kep-story-2'), gates: FeatureGate.parse(KEP_ONLY).gate, crash: 'both', depth: 1, faults: false, seed: 1, runs: 1, maxCrashPoints: 16 }),
  },
  {
    name: 'generated medium workload 2, every gate on',
    options: () => ({ scenario: generateScenario(2, 'medium'), gates: FeatureGate.parse(EVERY_GATE).gate, crash: 'both', depth: 1, faults: false, seed: 2, runs: 1, maxCrashPoints: 12 }),
  },
  {
    name: 'generated medium workload 6, KEP-6058 only',
    options: () => ({ scenario: generateScenario(6, 'medium'), gates: FeatureGate.parse(KEP_ONLY).gate, crash: 'both', depth: 1, faults: false, seed: 6, runs: 1, maxCrashPoints: 8 }),
  },
];

// The pins, one table: regenerate as the header says. The generated workloads depend on the
// generator's draws, so a change to generate.ts re-pins them.
const PINNED: Readonly<Record<string, Pin>> = {
  'kep-story-2, both crash kinds, KEP-6058 only': { runs: 17, crashPoints: 616, states: 25, violations: 'no-unstage-in-use:1,converges:1', hash: 'c03975e3' },
  'generated medium workload 2, every gate on': { runs: 13, crashPoints: 2602, states: 168, violations: '', hash: '65cb207e' },
  'generated medium workload 6, KEP-6058 only': { runs: 9, crashPoints: 14446, states: 131, violations: 'converges:9', hash: '137d0433' },
};

async function pinOf(c: Case): Promise<Pin> {
  const lines: string[] = [];
  const report = await explore({
    ...c.options(),
    shrink: false,
    replayCommand: () => '',
    onResult: (r) => lines.push(`${r.traceHash} ${r.finalState} ${r.steps} ${r.endReason}`),
  });
  return {
    runs: report.runs,
    crashPoints: report.crashPoints,
    states: report.states,
    violations: report.violations.map((v) => `${v.invariant}:${v.runs}`).join(','),
    hash: fnv1a(lines.join('\n')),
  };
}

describe('the explorer finds what it found (speed changes keep every run)', () => {
  const got: Record<string, Pin> = {};
  for (const c of CASES) {
    it(c.name, async () => {
      const pin = await pinOf(c);
      got[c.name] = pin;
      if (process.env['NODEVOL_REPIN'] === '1') return;
      assert.deepEqual(pin, PINNED[c.name], `runs changed; if on purpose, re-pin (see the header): ${JSON.stringify(pin)}`);
    });
  }
  it('prints the table when re-pinning', () => {
    if (process.env['NODEVOL_REPIN'] !== '1') return;
    const rows = Object.entries(got).map(([name, p]) => `  '${name}': { runs: ${p.runs}, crashPoints: ${p.crashPoints}, states: ${p.states}, violations: '${p.violations}', hash: '${p.hash}' },`);
    console.log(`const PINNED: Readonly<Record<string, Pin>> = {\n${rows.join('\n')}\n};`);
  });
});

describe('RunningHash', () => {
  it('add3, add3n and addCall hash exactly what add hashes of the joined text', () => {
    const numbers = [0, 7, 10, 99, 100, 1234567, 2 ** 40, 1.5, -3];
    for (const n of numbers) {
      for (const [b, c] of [['timer', 'reconciler'], ['', ''], ['port-call', 'fs.lstat #12 é']]) {
        const a = new RunningHash();
        a.add('x');
        a.add(`${n}|${b}|${c}`);
        const b3 = new RunningHash();
        b3.add('x');
        b3.add3(n, b ?? '', c ?? '');
        assert.equal(b3.hex(), a.hex(), `add3(${n}, ${b}, ${c})`);
        for (const seq of numbers) {
          const joinedSeq = new RunningHash();
          joinedSeq.add(`${n}|${b}|${c}${seq}`);
          const b3n = new RunningHash();
          b3n.add3n(n, b ?? '', c ?? '', seq);
          assert.equal(b3n.hex(), joinedSeq.hex(), `add3n(${n}, ${b}, ${c}, ${seq})`);
        }
        const call = new RunningHash();
        call.addCall(n, 'fs', b ?? '', c ?? '', 'ENOENT');
        const joined = new RunningHash();
        joined.add(`${n}|fs.${b}|${c}|ENOENT`);
        assert.equal(call.hex(), joined.hex(), `addCall(${n}, ${b}, ${c})`);
      }
    }
  });
});
