// The mutation run's scripts (scripts/mutate/): the shards of the scope, the killers' order, the
// log-text ignorer and the score. The run itself (StrykerJS over the engine) is `npm run mutate`.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';

import { killerFiles, SCOPE, shardFiles, strykerConfig, tsFiles } from '../../../scripts/mutate/config.js';
import { isLogCall, sourceOfTestFile } from '../../../scripts/mutate/plugins.js';
import { folderOf, formatScore, killerOf, scoreOf } from '../../../scripts/mutate/score.js';

const root = process.cwd();

describe('mutate: the scope in shards', () => {
  it('the shards together hold every file of the scope once, whatever their count', () => {
    const all = tsFiles(root, SCOPE);
    assert.ok(all.length > 50, `the engine's files: ${all.length}`);
    for (const count of [1, 3, 16]) {
      const shards = Array.from({ length: count }, (_, i) => shardFiles(root, i, count));
      assert.deepEqual(shards.flat().sort(), [...all].sort(), `${count} shards`);
    }
  });

  it('a shard is the same slice each time, and a bad index is an error naming the option', () => {
    assert.deepEqual(shardFiles(root, 2, 16), shardFiles(root, 2, 16));
    assert.throws(() => shardFiles(root, 16, 16), /--shard: want I\/N with 0 <= I < N, got 16\/16/);
    assert.throws(() => shardFiles(root, 0, 0), /--shard/);
  });

  it('the killers: the unit tests of the scope first, the CLI-bundle test left out, the explorer files last', () => {
    const files = killerFiles(root);
    assert.ok(files.every((f) => f.startsWith('dist/test/') && f.endsWith('.js')));
    assert.ok(!files.includes('dist/test/unit/fidelity/logs.test.js'));
    assert.ok(files.includes('dist/test/unit/agent/runtimeStop.test.js'));
    assert.ok(files.slice(-4).every((f) => f.startsWith('dist/test/mutation/')));
  });

  it('a survivor slowed to twice its dry-run time by a loaded machine is not counted as a timeout', () => {
    const c = strykerConfig(root);
    const limit = (dryRunMs: number): number => (c['timeoutMS'] as number) + (c['timeoutFactor'] as number) * dryRunMs;
    // The four explorer files of a survivor: about 51 s in a quiet dry run.
    assert.ok(limit(51_000) > 2 * 51_000, `limit ${limit(51_000)} ms`);
  });
});

describe('mutate: the log-text ignorer', () => {
  const id = (name: string): object => ({ type: 'Identifier', name });
  const member = (object: object, name: string): object => ({ type: 'MemberExpression', object, property: id(name), computed: false });
  const call = (callee: object): object => ({ type: 'CallExpression', callee });

  it('leaves out the arguments of log.info / logger.error / this.log.v(2).info / x.log.warning', () => {
    assert.equal(isLogCall(call(member(id('log'), 'info'))), true);
    assert.equal(isLogCall(call(member(id('logger'), 'error'))), true);
    assert.equal(isLogCall(call(member(call(member(member({ type: 'ThisExpression' }, 'log'), 'v')), 'info'))), true);
    assert.equal(isLogCall(call(member(member(id('host'), 'log'), 'warning'))), true);
  });

  it('keeps every other call: errors thrown, console, a method named info on something else, computed members', () => {
    assert.equal(isLogCall(call(member(id('console'), 'info'))), false);
    assert.equal(isLogCall(call(member(id('log'), 'debug'))), false);
    assert.equal(isLogCall(call(member(id('events'), 'error'))), false);
    assert.equal(isLogCall({ type: 'CallExpression', callee: { type: 'MemberExpression', object: id('log'), property: id('info'), computed: true } }), false);
    assert.equal(isLogCall({ type: 'NewExpression', callee: id('Error') }), false);
    assert.equal(isLogCall(undefined), false);
  });
});

describe('mutate: the killers under their source names', () => {
  // StrykerJS's incremental mode finds each test file among the project's files, where dist/ is not.
  it('names every killer by its TypeScript source, which exists, and leaves other names alone', () => {
    const root = new URL('../../../../', import.meta.url).pathname;
    for (const built of killerFiles(root)) {
      const source = sourceOfTestFile(built);
      assert.match(source, /^test\/.*\.ts$/, built);
      assert.ok(existsSync(path.join(root, source)), `${built} -> ${source}`);
    }
    assert.equal(sourceOfTestFile('dist/test/unit/volume/a.test.js'), 'test/unit/volume/a.test.ts');
    assert.equal(sourceOfTestFile('/ci/nodevol/dist/test/mutation/x.mutation.js'), '/ci/nodevol/test/mutation/x.mutation.ts');
    assert.equal(sourceOfTestFile('dist/src/volume/plugins.js'), 'dist/src/volume/plugins.js');
    assert.equal(sourceOfTestFile('test/unit/a.test.ts'), 'test/unit/a.test.ts');
    assert.equal(sourceOfTestFile('mydist/test/a.test.js'), 'mydist/test/a.test.js');
  });
});

describe('mutate: the score', () => {
  it('per folder and per first killer; ignored and uncompiled mutants are not counted in the score', () => {
    const mutant = (status: string, killedBy?: string): object => ({ status, mutatorName: 'ConditionalExpression', location: { start: { line: 7 } }, replacement: 'true', ...(killedBy === undefined ? {} : { killedBy: [killedBy] }) });
    const report = {
      files: {
        'src/volumemanager/reconciler/reconstruct.ts': { mutants: [mutant('Killed', 'dist/test/unit/volumemanager/reconstruct.test.js'), mutant('Killed', 'dist/test/mutation/scenariosAllGates.mutation.js'), mutant('Survived'), mutant('Ignored'), mutant('CompileError')] },
        'src/agent/runtime.ts': { mutants: [mutant('Timeout'), mutant('NoCoverage')] },
      },
    };
    const s = scoreOf([report]);
    assert.deepEqual(s.total, { killed: 2, timeout: 1, survived: 1, noCoverage: 1, ignored: 1, invalid: 1 });
    assert.deepEqual([...s.killers].sort(), [['scenariosAllGates', 1], ['unit: test/unit/volumemanager', 1]]);
    assert.deepEqual(s.survivors.map((v) => `${v.status} ${v.file}:${v.line}`), ['Survived src/volumemanager/reconciler/reconstruct.ts:7', 'NoCoverage src/agent/runtime.ts:7']);
    const text = formatScore(s);
    assert.match(text, /\| src\/volumemanager\/reconciler \| 3 \| 2 \| 0 \| 1 \| 0 \| 1 \| 1 \| \*\*66\.7 %\*\* \|/);
    assert.match(text, /\| src\/agent\/runtime\.ts \| 2 \| 0 \| 1 \| 0 \| 1 \| 0 \| 0 \| \*\*50\.0 %\*\* \|/);
    assert.match(text, /\| all \| 5 \| 2 \| 1 \| 1 \| 1 \| 1 \| 1 \| \*\*60\.0 %\*\* \|/);
  });

  it('a file several reports measured counts once, from the last report (the newest)', () => {
    const m = (status: string): object => ({ status, mutatorName: 'BlockStatement', location: { start: { line: 3 } } });
    const older = { files: { 'src/volume/a.ts': { mutants: [m('Survived'), m('Survived')] }, 'src/volume/b.ts': { mutants: [m('Killed')] } } };
    const newer = { files: { 'src/volume/a.ts': { mutants: [m('Killed'), m('Survived')] } } };
    const s = scoreOf([older, newer]);
    assert.deepEqual(s.total, { killed: 2, timeout: 0, survived: 1, noCoverage: 0, ignored: 0, invalid: 0 });
    assert.deepEqual(s.survivors.map((v) => v.file), ['src/volume/a.ts']);
    assert.deepEqual(scoreOf([newer, older]).total, { killed: 1, timeout: 0, survived: 2, noCoverage: 0, ignored: 0, invalid: 0 });
  });

  it('folders: two levels for volume/ and volumemanager/, the file for agent/runtime.ts', () => {
    assert.equal(folderOf('src/volume/csi/csiMounter.ts'), 'src/volume/csi');
    assert.equal(folderOf('src/volumemanager/cache/actualStateOfWorld.ts'), 'src/volumemanager/cache');
    assert.equal(folderOf('src/operationexecutor/operationGenerator.ts'), 'src/operationexecutor');
    assert.equal(folderOf('src/agent/runtime.ts'), 'src/agent/runtime.ts');
    assert.equal(killerOf('dist/test/unit/nodevol/registry.test.js'), 'unit: test/unit/nodevol');
  });
});
