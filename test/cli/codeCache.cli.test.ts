// The CLI bundle's V8 code cache (scripts/codeCache.ts), as the build and the image record it: the
// same bytes from every recording of the same bundle by the same node, wherever the package is,
// and recorded under the path the bundle will run from (V8 keeps the name a cache was recorded
// under: code compiled from it names that file in stack traces).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { codeCacheFile, recordCodeCache } from '../../scripts/codeCache.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const TRAINING_NODE = path.join(REPO_ROOT, 'examples', 'node');
const IMAGE_PATH = '/opt/nodevol/dist/bundle/cli/main.cjs';

/** A package directory holding what a recording needs: the launcher, package.json, the bundle and the dependencies. */
function packageCopy(parent: string, name: string): string {
  const dir = path.join(parent, name);
  mkdirSync(path.join(dir, 'dist', 'bundle', 'cli'), { recursive: true });
  mkdirSync(path.join(dir, 'bin'));
  copyFileSync(path.join(REPO_ROOT, 'bin', 'nodevol.js'), path.join(dir, 'bin', 'nodevol.js'));
  copyFileSync(path.join(REPO_ROOT, 'package.json'), path.join(dir, 'package.json'));
  copyFileSync(path.join(REPO_ROOT, 'dist', 'bundle', 'cli', 'main.cjs'), path.join(dir, 'dist', 'bundle', 'cli', 'main.cjs'));
  symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

/**
 * In a new process (a new V8 isolate, as a start is): compiles the bundle of `dir` with its cache
 * as bin/nodevol.js does, and runs it with a require that throws: the stack's first frame is the
 * bundle's first line, named as V8 names it.
 */
function frameThroughCache(dir: string): { rejected: boolean; frame: string } {
  const probe = `
const fs = require('node:fs'), vm = require('node:vm');
const file = process.argv[1];
const source = fs.readFileSync(file, 'utf8');
const header = /^\\/\\/ nodevol bundle \\S+\\n/.exec(source)[0];
const cache = fs.readFileSync(file + '.cache');
if (cache.subarray(0, header.length).toString('latin1') !== header) throw new Error('the cache names another bundle');
const script = new vm.Script('(function (exports, require, module, __filename, __dirname, __nodevolImport) {\\n' + source + '\\n})', { filename: file, lineOffset: -1, cachedData: cache.subarray(header.length) });
let frame = '';
try {
  script.runInThisContext()({}, () => { throw new Error('probe'); }, { exports: {} }, file, '', undefined);
} catch (err) {
  frame = err.stack.split('\\n').find((l) => l.includes('main.cjs')) ?? err.stack;
}
console.log(JSON.stringify({ rejected: script.cachedDataRejected, frame: frame.trim() }));
`;
  const r = spawnSync(process.execPath, ['-e', probe, path.join(dir, 'dist', 'bundle', 'cli', 'main.cjs')], { encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' } });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as { rejected: boolean; frame: string };
}

describe('the code cache of the CLI bundle', () => {
  let work = '';
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'nodevol-code-cache-'));
  });
  after(() => {
    rmSync(work, { recursive: true, force: true });
  });

  it('is the same bytes from two recordings in two places, under the name the bundle will run as', () => {
    const a = packageCopy(work, 'a');
    const b = packageCopy(work, 'a-longer-name-elsewhere');
    recordCodeCache({ node: process.execPath, packageDir: a, trainingNode: TRAINING_NODE, scriptName: IMAGE_PATH });
    recordCodeCache({ node: process.execPath, packageDir: b, trainingNode: TRAINING_NODE, scriptName: IMAGE_PATH });
    const first = readFileSync(codeCacheFile(a));
    const second = readFileSync(codeCacheFile(b));
    assert.ok(first.equals(second), `two recordings differ: ${first.length} and ${second.length} bytes`);
    assert.ok(!first.includes(work), 'the cache names the directory it was recorded in');
    // A third recording in the same place: the same bytes again.
    recordCodeCache({ node: process.execPath, packageDir: a, trainingNode: TRAINING_NODE, scriptName: IMAGE_PATH });
    assert.ok(readFileSync(codeCacheFile(a)).equals(first), 'a second recording in the same place differs');
  });

  it('is taken by V8, and code compiled from it is named as the bundle was when recorded', () => {
    const moved = packageCopy(work, 'for-the-image');
    recordCodeCache({ node: process.execPath, packageDir: moved, trainingNode: TRAINING_NODE, scriptName: IMAGE_PATH });
    const fromImageName = frameThroughCache(moved);
    assert.equal(fromImageName.rejected, false);
    assert.match(fromImageName.frame, new RegExp(`\\(?${IMAGE_PATH.replace(/\//g, '\\/').replace(/\./g, '\\.')}:\\d+:\\d+\\)?$`));

    const inPlace = packageCopy(work, 'in-place');
    recordCodeCache({ node: process.execPath, packageDir: inPlace, trainingNode: TRAINING_NODE });
    const fromOwnName = frameThroughCache(inPlace);
    assert.equal(fromOwnName.rejected, false);
    assert.ok(fromOwnName.frame.includes(path.join(inPlace, 'dist', 'bundle', 'cli', 'main.cjs:')), fromOwnName.frame);
  });
});
