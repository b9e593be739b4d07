// Property tests for simulator scenario files (`nodevol explore --scenario FILE`, YAML a user
// writes). No crash: only ScenarioError with one line naming the file and a line number;
// scenarios round-trip; every pod or volume name the simulator puts in a path is one segment.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';
import { stringify } from 'yaml';

import { MAX_SCENARIO_BYTES, parseScenario, ScenarioError, type ScenarioInput } from '../../src/sim/scenario.js';
import { bound, runs } from './runs.js';

const FILE = 'scenarios/generated.yaml';
const dnsName = fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,10}[a-z0-9])?$/);
const hostile = fc.constantFrom('..', '.', 'a/b', '/etc', '', 'A', 'x y', '-a', '\u0000');
const duration = fc.tuple(fc.nat({ max: 100_000 }), fc.constantFrom('ms', 's', 'm')).map(([n, u]) => `${n}${u}`);

/** A valid scenario (names unique, references resolved), in the shape the file holds. */
const scenario: fc.Arbitrary<ScenarioInput> = fc
  .record({
    name: dnsName,
    driver: dnsName,
    volumes: fc.uniqueArray(dnsName, { maxLength: 4 }),
    pods: fc.uniqueArray(dnsName, { maxLength: 4 }),
  })
  .chain(({ name, driver, volumes, pods }) => {
    const step = fc.oneof(
      fc.constant<ScenarioInput['steps'] extends (infer S)[] | undefined ? S : never>({ wait: 'converged' }),
      duration.map((d) => ({ advance: d })),
      fc.constantFrom('restart' as const, 'reboot' as const, 'clearFaults' as const),
      ...(pods.length > 0 ? [fc.constantFrom(...pods).map((p) => ({ addPod: p })), fc.constantFrom(...pods).map((p) => ({ deletePod: p }))] : []),
      fc.record({ method: fc.constantFrom('NodeStageVolume' as const, 'NodeUnstageVolume' as const, 'NodePublishVolume' as const, 'NodeUnpublishVolume' as const), code: fc.constantFrom('UNAVAILABLE', 'INTERNAL'), times: fc.integer({ min: 1, max: 5 }) }).map((f) => ({ fault: f })),
      ...(pods.length > 0 && volumes.length > 0 ? [fc.tuple(fc.constantFrom(...pods), fc.constantFrom(...volumes)).map(([pod, volume]) => ({ deleteFile: { pod, volume } }))] : []),
      // A read error on a pod's own volume (pod i has volume i mod n).
      ...(pods.length > 0 && volumes.length > 0
        ? [
            fc
              .tuple(fc.nat({ max: pods.length - 1 }), fc.constantFrom('EIO' as const, 'EACCES' as const), fc.integer({ min: 1, max: 1000 }))
              .map(([i, code, times]) => ({ readError: { pod: pods[i] ?? '', volume: volumes[i % volumes.length] ?? '', code, times } })),
          ]
        : []),
    );
    return fc.record({
      name: fc.constant(name),
      drivers: fc.constant([{ name: driver }]),
      volumes: fc.constant(volumes.map((v) => ({ name: v, handle: `h-${v}` }))),
      pods: volumes.length === 0 ? fc.constant(pods.map((uid) => ({ uid }))) : fc.constant(pods.map((uid, i) => ({ uid, volumes: [volumes[i % volumes.length] ?? ''] }))),
      steps: fc.array(step, { maxLength: 8 }),
    });
  });

/** A valid scenario with one field replaced by junk. */
const broken = fc.tuple(scenario, fc.constantFrom('name', 'drivers', 'volumes', 'pods', 'steps', 'extra'), fc.oneof(fc.jsonValue({ maxDepth: 2 }), hostile)).map(([s, k, v]) => ({ ...s, [k]: v }));

function assertScenarioError(err: unknown): void {
  assert.ok(err instanceof ScenarioError, `unexpected ${String(err)}`);
  assert.match(err.message, new RegExp(`^${FILE.replace(/[.]/g, '\\.')}(:\\d+)?: `));
  assert.equal(err.message.includes('\n'), false, 'one line');
}

describe('scenario files: properties', () => {
  it('a valid scenario written as YAML parses back with the same names, pods and steps', bound(), () => {
    fc.assert(
      fc.property(scenario, (input) => {
        const s = parseScenario(stringify(input), FILE);
        assert.equal(s.name, input.name);
        assert.deepEqual(s.volumes.map((v) => v.name), (input.volumes ?? []).map((v) => v.name));
        assert.deepEqual(s.pods.map((p) => p.uid), (input.pods ?? []).map((p) => p.uid));
        assert.equal(s.steps.length, (input.steps ?? []).length);
        (input.steps ?? []).forEach((raw, i) => {
          if (typeof raw !== 'object' || !('readError' in raw)) return;
          assert.deepEqual(s.steps[i], { kind: 'readError', ...raw.readError });
        });
        for (const name of [...s.volumes.map((v) => v.name), ...s.pods.map((p) => p.uid)]) {
          assert.ok(!name.includes('/') && name !== '.' && name !== '..' && name !== '', `${JSON.stringify(name)} is not one path segment`);
        }
      }),
      runs(0.5),
    );
  });

  it('broken scenarios and any text give a Scenario or a one-line ScenarioError naming the file, never another error', bound(), () => {
    const text = fc.oneof(
      broken.map((b) => stringify(b)),
      fc.string({ unit: 'binary', maxLength: 120 }),
      fc.array(fc.constantFrom('name: x\n', 'drivers:\n', '  - name: d\n', 'steps:\n', '  - ', 'wait: converged\n', 'advance: 5x\n', '&a ', '*a', '[', '{', '\t', '---\n'), { maxLength: 14 }).map((p) => p.join('')),
    );
    fc.assert(
      fc.property(text, (t) => {
        try {
          const s = parseScenario(t, FILE);
          for (const p of s.pods) assert.ok(!p.uid.includes('/'));
        } catch (err) {
          assertScenarioError(err);
        }
      }),
      runs(0.5),
    );
  });

  it('a readError step with a bad field is refused naming steps[i].readError and that field', bound(), () => {
    const bad = fc.oneof(
      fc.record({ field: fc.constant('code'), value: fc.oneof(fc.constantFrom('ENOENT', 'eio', '', 'EIO '), fc.integer()) }),
      fc.record({ field: fc.constant('times'), value: fc.oneof(fc.constantFrom(0, -1, 1.5, 1001, '3'), fc.constant(null)) }),
      fc.record({ field: fc.constant('pod'), value: fc.oneof(hostile, fc.constant('pod-z')) }),
      fc.record({ field: fc.constant('volume'), value: fc.oneof(hostile, fc.constant('pv-z')) }),
      fc.record({ field: fc.constant('extra'), value: fc.jsonValue({ maxDepth: 1 }) }),
    );
    fc.assert(
      fc.property(bad, fc.nat({ max: 3 }), ({ field, value }, at) => {
        const step = { readError: { pod: 'pod-a', volume: 'pv-1', code: 'EIO', times: 2, [field]: value } };
        const steps = [...Array.from({ length: at }, () => ({ wait: 'converged' })), step];
        const input = { name: 'x', drivers: [{ name: 'd' }], volumes: [{ name: 'pv-1' }, { name: 'pv-2' }], pods: [{ uid: 'pod-a', volumes: ['pv-1'] }, { uid: 'pod-b', volumes: ['pv-2'] }], steps };
        assert.throws(() => parseScenario(stringify(input), FILE), (err: unknown) => {
          assertScenarioError(err);
          const want = field === 'extra' ? `steps\\[${at}\\]\\.readError: ` : `steps\\[${at}\\]\\.readError\\.${field}: `;
          assert.match((err as Error).message, new RegExp(`^${FILE.replace(/[.]/g, '\\.')}:\\d+: ${want}`));
          return true;
        });
      }),
      runs(0.5),
    );
  });

  it('an alias to no anchor is a ScenarioError (it was a ReferenceError escaping parseScenario)', () => {
    for (const t of ['*a', 'name: x\nsteps: *s\n']) {
      assert.throws(() => parseScenario(t, FILE), (err: unknown) => {
        assertScenarioError(err);
        return true;
      });
    }
  });

  it('a file over the size limit is refused before it is parsed', bound(0.01), () => {
    fc.assert(
      fc.property(fc.nat({ max: 1000 }), (extra) => {
        assert.throws(() => parseScenario(`name: x\n#${'a'.repeat(MAX_SCENARIO_BYTES + extra)}`, FILE), (err: unknown) => {
          assertScenarioError(err);
          return true;
        });
      }),
      runs(0.01),
    );
  });
});
