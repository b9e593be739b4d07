/**
 * How many cases each property test runs. `npm test` runs ~1,000 per property; `npm run fuzz`
 * sets NODEVOL_PROPERTY_RUNS (default there 100,000; any count can be given). A failing run
 * prints fast-check's seed and path; NODEVOL_PROPERTY_SEED replays it.
 */
import type { Parameters } from 'fast-check';

const DEFAULT_RUNS = 1000;

function positiveInt(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return n;
}

/** Cases per property asked for (NODEVOL_PROPERTY_RUNS), if any. */
const ASKED_RUNS = positiveInt('NODEVOL_PROPERTY_RUNS');

/** Cases per property for this run. */
export const PROPERTY_RUNS = ASKED_RUNS ?? DEFAULT_RUNS;

/**
 * fast-check parameters. In `npm test` a property whose cases are slow (building a file tree,
 * 10,000-deep nesting) runs `weight` x the default count; a count asked for with
 * NODEVOL_PROPERTY_RUNS (`npm run fuzz`) applies to every property in full.
 */
export function runs<T>(weight = 1): Parameters<T> {
  const seed = positiveInt('NODEVOL_PROPERTY_SEED');
  return {
    numRuns: ASKED_RUNS ?? Math.max(1, Math.round(DEFAULT_RUNS * weight)),
    ...(seed !== undefined ? { seed } : {}),
    endOnFailure: true,
  };
}

/**
 * node:test options bounding a property's wall time: no case may hang. Generous (the machine is
 * shared), scaled with the run count: 60 s per 1,000 cases, at least 2 minutes.
 */
export function bound(weight = 1): { timeout: number } {
  const cases = ASKED_RUNS ?? DEFAULT_RUNS * weight;
  return { timeout: Math.max(120_000, Math.ceil(cases / 1000) * 60_000) };
}
