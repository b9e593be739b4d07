// The command reference (docs/reference/) documents what the code has: every flag and fixed choice
// of every command (walked in the real commander program, src/cli/main.ts buildProgram), every
// metric the code registers (the Prometheus adapters and `nodevol audit -o prom`), every exit code
// constant (EXIT_* exports), every feature gate with its proof scenarios (docs/feature-gates.md),
// and ARCHITECTURE.md's layers are those of .dependency-cruiser.cjs. Each check is also fed a
// broken page, so that it is known to fail.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';

import type { Command } from 'commander';
import { Registry } from 'prom-client';

import { buildProgram } from '../../../src/cli/main.js';
import { renderProm, renderPromFailure, type FullAuditReport } from '../../../src/cli/auditOutput.js';
import { knownFeatures } from '../../../src/features/features.js';
import { GATE_PROOFS } from '../../../src/sim/gateProofs.js';
import {
  checkExitCodesDocumented,
  checkFlagsDocumented,
  checkGatesDocumented,
  checkNamesInTables,
  cruiserLayerNames,
  exitCodesOf,
  formatProblems,
  layerTableNames,
  type CommandSpec,
} from '../../support/docs.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const REFERENCE = path.join(REPO_ROOT, 'docs', 'reference');
const read = (rel: string): string => readFileSync(path.join(REPO_ROOT, rel), 'utf8');

/** The page of a command: docs/reference/<words joined by ->.md; the program's own is the index. */
function pageOf(command: string): { file: string; text: string | undefined } {
  const file = command === '' ? 'docs/reference/README.md' : `docs/reference/${command.split(' ').join('-')}.md`;
  const abs = path.join(REPO_ROOT, file);
  return { file, text: existsSync(abs) ? readFileSync(abs, 'utf8') : undefined };
}

/** Every command of the program with every spelling of its flags and their fixed choices. */
function commandSpecs(cmd: Command, name = ''): CommandSpec[] {
  const own: CommandSpec = {
    name,
    flags: cmd.options.flatMap((o) => [o.short, o.long].filter((f): f is string => f !== undefined)),
    choices: [...cmd.options.flatMap((o) => o.argChoices ?? []), ...cmd.registeredArguments.flatMap((a) => a.argChoices ?? [])],
  };
  return [own, ...cmd.commands.flatMap((c) => commandSpecs(c, name === '' ? c.name() : `${name} ${c.name()}`))];
}

async function allCommands(): Promise<CommandSpec[]> {
  // `completion` is the one command line that loads every command with all its flags.
  return commandSpecs(await buildProgram(() => undefined, ['completion']));
}

/** The metric names each Prometheus adapter registers: every exported create…Metrics, called on a fresh registry. */
async function adapterMetricNames(): Promise<Set<string>> {
  const dir = path.join(REPO_ROOT, 'dist', 'src', 'adapters', 'prometheus');
  const names = new Set<string>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.js'))) {
    const mod = (await import(pathToFileURL(path.join(dir, file)).href)) as Record<string, unknown>;
    const factories = Object.entries(mod).filter(([k, v]) => /^create\w*Metrics$/.test(k) && typeof v === 'function');
    assert.ok(factories.length > 0, `src/adapters/prometheus/${file}: no create…Metrics export: how does the check find its metrics?`);
    for (const [, factory] of factories) {
      const registry = new Registry();
      (factory as (r: Registry) => unknown)(registry);
      for (const m of await registry.getMetricsAsJSON()) names.add(m.name);
    }
  }
  return names;
}

/** A report with every optional section, so that `-o prom` registers every gauge it can. */
const FULL_REPORT: FullAuditReport = {
  rootDir: '/var/lib/kubelet',
  featureGates: { CSIGlobalMountReconstruction: false },
  volumes: [],
  failed: [],
  skipped: [],
  undescribed: [],
  summary: { volumes: 0, tracked: 0, recovered: 0, orphaned: 0, failed: 0, skipped: 0, undescribed: 0, stuck: 0 },
  mountTableProblems: [],
  timestamp: '2026-12-01T00:00:00.000Z',
  stuckOperations: { source: '/var/lib/kubelet/nodevol/stuck-operations.json', writtenAt: null, findings: [], stale: 0 },
  cluster: { source: 'cluster.json', nodeName: 'node-1', volumesInUse: [], volumesAttached: [], pods: {}, wantedBy: {}, findings: [] },
};

/** The metric names of `nodevol audit -o prom` (after a run, and after a failed run), and any its source names. */
async function auditMetricNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const text of [await renderProm(FULL_REPORT), await renderPromFailure(0, 'mountinfo')]) {
    for (const m of text.matchAll(/^# TYPE (\S+) /gm)) names.add(m[1]!);
  }
  for (const m of read('src/cli/auditOutput.ts').matchAll(/name: '(nodevol_\w+)'/g)) names.add(m[1]!);
  return names;
}

/** Which command pages document an exit code constant, by its name. */
const EXIT_CODE_PAGES: readonly [RegExp, readonly string[]][] = [
  [/^EXIT_USAGE$/, ['audit', 'agent', 'mock-driver', 'explore', 'demo', 'timeline', 'recover', 'completion', 'version']],
  [/^EXIT_(OK|PROBLEM|UNKNOWN)$/, ['audit', 'recover']],
  [/^EXIT_AGENT_/, ['agent']],
  [/^EXIT_RECOVER_/, ['recover']],
  [/^EXIT_MOCK_DRIVER_|^EXIT_FAULT_CODE$/, ['mock-driver']],
  [/^EXIT_TIMELINE_/, ['timeline']],
  [/^EXPLORE_EXIT_/, ['explore']],
];

/** Every exported exit code constant of src/ (`export const …EXIT… = `), with its value from the build. */
async function exitCodeConstants(): Promise<{ name: string; value: number; source: string }[]> {
  const found: { name: string; value: number; source: string }[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const e of readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      if (e.isDirectory()) await walk(rel);
      else if (e.name.endsWith('.ts')) {
        const names = [...readFileSync(path.join(REPO_ROOT, rel), 'utf8').matchAll(/^export const (\w*EXIT\w*)\s*=/gm)].map((m) => m[1]!);
        if (names.length === 0) continue;
        const mod = (await import(pathToFileURL(path.join(REPO_ROOT, 'dist', rel.replace(/\.ts$/, '.js'))).href)) as Record<string, unknown>;
        for (const name of names) {
          const value = mod[name];
          assert.equal(typeof value, 'number', `${rel}: ${name} is not a number`);
          found.push({ name, value: value as number, source: rel });
        }
      }
    }
  };
  await walk('src');
  return found;
}

describe('docs/reference: every flag of every command', () => {
  it('each command has a page, with each flag in a table row and each fixed choice named', async () => {
    const commands = await allCommands();
    assert.ok(commands.length >= 10, `only ${commands.length} commands found`);
    assert.ok(commands.some((c) => c.name === 'audit' && c.flags.includes('--mountinfo-root-dir')), 'the audit is not fully loaded');
    const pages = new Map(commands.map((c) => [c.name, pageOf(c.name)]));
    const problems = checkFlagsDocumented(commands, pages);
    assert.deepEqual(problems, [], formatProblems(problems));
  });

  it('fails on a page that lacks a flag, a choice, or the page itself', () => {
    const commands: CommandSpec[] = [
      { name: 'audit', flags: ['--root-dir', '-o', '--output', '--no-headers'], choices: ['table', 'prom'] },
      { name: 'gone', flags: ['--x'], choices: [] },
    ];
    const page = '# audit\n\n| flag | meaning |\n|---|---|\n| `--root-dir DIR` | the root |\n| `-o, --output table` | output |\n\n`--no-headers` is only in prose.\n';
    const problems = checkFlagsDocumented(commands, new Map([['audit', { file: 'audit.md', text: page }], ['gone', { file: 'gone.md', text: undefined }]]));
    assert.deepEqual(problems.map((p) => p.message), [
      'nodevol audit --no-headers: not in a table row of its page',
      'nodevol audit: the choice prom is not in its page',
      'nodevol gone has no reference page',
    ]);
  });

  it('a flag is matched whole: --root-dir does not document --root', () => {
    const problems = checkFlagsDocumented([{ name: 'x', flags: ['--root'], choices: [] }], new Map([['x', { file: 'x.md', text: '| `--root-dir` | |\n' }]]));
    assert.equal(problems.length, 1);
  });
});

describe('docs/reference: every metric the code registers', () => {
  it("the agent's metrics (every Prometheus adapter) are in docs/reference/agent.md", async () => {
    const names = await adapterMetricNames();
    for (const n of ['reconstruct_volume_operations_total', 'storage_operation_duration_seconds', 'kubelet_orphan_pod_cleaned_volumes', 'volume_manager_stuck_operations']) {
      assert.ok(names.has(n), `${n} not found among ${[...names].join(', ')}`);
    }
    const problems = checkNamesInTables(names, 'docs/reference/agent.md', read('docs/reference/agent.md'), 'metric');
    assert.deepEqual(problems, [], formatProblems(problems));
  });

  it("the audit's -o prom metrics are in docs/reference/audit.md", async () => {
    const names = await auditMetricNames();
    for (const n of ['nodevol_audit_volumes', 'nodevol_audit_stuck_volumes', 'nodevol_audit_cluster_findings', 'nodevol_audit_last_run_success']) {
      assert.ok(names.has(n), `${n} not found among ${[...names].join(', ')}`);
    }
    const problems = checkNamesInTables(names, 'docs/reference/audit.md', read('docs/reference/audit.md'), 'metric');
    assert.deepEqual(problems, [], formatProblems(problems));
  });

  it('fails on a metric that is missing, or only in prose', () => {
    const page = '| metric | meaning |\n|---|---|\n| `nodevol_audit_volumes` | volumes |\n\nAlso nodevol_audit_prose.\n';
    const problems = checkNamesInTables(['nodevol_audit_volumes', 'nodevol_audit_prose', 'nodevol_audit_volumes_total'], 'audit.md', page, 'metric');
    assert.deepEqual(problems.map((p) => p.message), ['metric nodevol_audit_prose: not in a table row', 'metric nodevol_audit_volumes_total: not in a table row']);
  });
});

describe('docs/reference: every exit code constant', () => {
  it("each EXIT_* constant's code is a row of the exit code table of its command's page", async () => {
    const constants = await exitCodeConstants();
    assert.ok(constants.some((c) => c.name === 'EXIT_PROBLEM' && c.value === 1), 'EXIT_PROBLEM not found');
    const unmapped = constants.filter((c) => !EXIT_CODE_PAGES.some(([re]) => re.test(c.name)));
    assert.deepEqual(unmapped, [], 'name the command pages of these constants in EXIT_CODE_PAGES');
    const problems = checkExitCodesDocumented(
      constants.map((c) => ({
        name: `${c.name} (${c.source})`,
        value: c.value,
        pages: EXIT_CODE_PAGES.find(([re]) => re.test(c.name))![1].map((cmd) => ({ file: pageOf(cmd).file, text: pageOf(cmd).text ?? '' })),
      })),
    );
    assert.deepEqual(problems, [], formatProblems(problems));
  });

  it('fails on a code that is missing from the table, or only outside the "Exit codes" section', () => {
    const page = '## Exit codes\n\n| code | meaning |\n|---|---|\n| 0 | stopped |\n| 2 | could not start |\n\n## Other\n\n| 3 | not an exit code table |\n';
    assert.deepEqual([...exitCodesOf(page)].sort(), [0, 2]);
    const problems = checkExitCodesDocumented([
      { name: 'EXIT_MOCK_DRIVER_OK', value: 0, pages: [{ file: 'mock-driver.md', text: page }] },
      { name: 'EXIT_FAULT_CODE', value: 3, pages: [{ file: 'mock-driver.md', text: page }] },
    ]);
    assert.deepEqual(problems.map((p) => p.message), ['EXIT_FAULT_CODE = 3: not a row of the page\'s "Exit codes" table']);
  });

  it('every command page has an exit code table', () => {
    for (const f of readdirSync(REFERENCE).filter((f) => f.endsWith('.md') && f !== 'README.md')) {
      assert.ok(exitCodesOf(readFileSync(path.join(REFERENCE, f), 'utf8')).size > 0, `docs/reference/${f}: no "Exit codes" table`);
    }
  });
});

describe('docs/feature-gates.md: every gate', () => {
  it('each gate has a row and a section, and each nodevol gate names its proof scenarios', () => {
    const gates = knownFeatures().map(([name]) => ({ name, proofs: GATE_PROOFS[name] ?? [] }));
    assert.ok(gates.length >= 8, `only ${gates.length} gates`);
    const problems = checkGatesDocumented(gates, 'docs/feature-gates.md', read('docs/feature-gates.md'));
    assert.deepEqual(problems, [], formatProblems(problems));
  });

  it('fails on a gate without a row, without a section, or without its proof', () => {
    const page = '| gate | what |\n|---|---|\n| `A` | a |\n\n## `A`\n\nProof: `scenario-a`.\n\n## `B`\n\nNo proof named.\n';
    const problems = checkGatesDocumented([{ name: 'A', proofs: ['scenario-a'] }, { name: 'B', proofs: ['scenario-b'] }, { name: 'C', proofs: [] }], 'g.md', page);
    assert.deepEqual(problems.map((p) => p.message), [
      'gate B: no row in a table',
      'gate B: its section does not name its proof scenario scenario-b',
      'gate C: no row in a table',
      'gate C: no section (a heading naming it)',
    ]);
  });
});

describe('ARCHITECTURE.md: the layers the lint enforces', () => {
  it('its layer table names the layers of .dependency-cruiser.cjs, in the same set', () => {
    const config = createRequire(import.meta.url)(path.join(REPO_ROOT, '.dependency-cruiser.cjs')) as { allowed?: { comment?: string }[] };
    const cruiser = cruiserLayerNames(config);
    assert.ok(cruiser.length > 0, ".dependency-cruiser.cjs: no allow rule commented '<layer> may import: …': update this test with the new format");
    const documented = layerTableNames(read('ARCHITECTURE.md'));
    assert.deepEqual([...documented].sort(), [...cruiser].sort(), "ARCHITECTURE.md's layer table and .dependency-cruiser.cjs name different layers: change both together");
  });

  it('fails when a layer is missing from the table', () => {
    const table = 'text\n\n| layer | folders | may import |\n|---|---|---|\n| api | `api/` | nothing |\n| `ports` | `ports/` | api |\n\nafter\n';
    assert.deepEqual(layerTableNames(table), ['api', 'ports']);
    const config = { allowed: [{ comment: 'npm packages' }, { comment: 'api may import: itself' }, { comment: 'ports may import: itself, api' }, { comment: 'cli may import: itself, ports, api' }] };
    assert.notDeepEqual(layerTableNames(table).sort(), cruiserLayerNames(config).sort());
  });
});
