// The CLI bundle as bin/nodevol.js loads it (scripts/bundle.ts): one CommonJS file that keeps
// the ES modules' strict mode, and a code cache this node accepts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import * as vm from 'node:vm';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BUNDLE = path.join(REPO_ROOT, 'dist', 'bundle', 'cli', 'main.cjs');

/** The bundle compiled the way bin/nodevol.js compiles it. */
function compile(cachedData?: Buffer): vm.Script {
  const source = readFileSync(BUNDLE, 'utf8');
  return new vm.Script(`(function (exports, require, module, __filename, __dirname, __nodevolImport) {\n${source}\n})`, { filename: BUNDLE, lineOffset: -1, ...(cachedData !== undefined ? { cachedData } : {}) });
}

describe('the CLI bundle', () => {
  it('runs in strict mode, as the ES modules it is made of did', () => {
    const source = readFileSync(BUNDLE, 'utf8');
    const prologue = /^\/\/ nodevol bundle \S+\n'use strict';\n/.exec(source)?.[0];
    assert.ok(prologue !== undefined, 'the build id, then the directive as the first statement (a statement before it would make it an expression)');
    // Sloppy mode would let an assignment to an undeclared name create a global: strict throws.
    const probe = new vm.Script(`(function () {\n${prologue}undeclaredByTheBundle = 1;\n})`);
    assert.throws(() => (probe.runInThisContext() as () => void)(), ReferenceError);
  });

  it('has a code cache of this very build that V8 accepts on this node', () => {
    const cache = readFileSync(`${BUNDLE}.cache`);
    const header = /^\/\/ nodevol bundle \S+\n/.exec(readFileSync(BUNDLE, 'utf8'))?.[0] ?? '';
    assert.equal(cache.subarray(0, header.length).toString('latin1'), header, 'the cache names the bundle it was recorded from');
    const script = compile(cache.subarray(header.length));
    assert.equal(script.cachedDataRejected, false, 'a rejected cache costs every start its compile time');
  });
});
