// Scenario text for the scenario-file tests: the smallest valid scenario to build on, and the
// one-line error a bad one gets.
import assert from 'node:assert/strict';
import { parseScenario, ScenarioError } from '../../src/sim/scenario.js';

/** One driver, one volume, one pod using it; no steps (a test appends its own `steps:`). */
export const MINIMAL_SCENARIO = `name: t
drivers:
  - name: csi.example.com
volumes:
  - name: pv-1
    handle: vol-1
pods:
  - uid: pod-a
    volumes: [pv-1]
`;

/** The ScenarioError's message for `text` parsed as x.yaml; fails the test if it parses. */
export function scenarioErrorOf(text: string): string {
  try {
    parseScenario(text, 'x.yaml');
  } catch (err) {
    assert.ok(err instanceof ScenarioError, `not a ScenarioError: ${String(err)}`);
    return err.message;
  }
  throw new Error('the scenario parsed; an error was expected');
}
