// klog's caller through the source maps the build writes: a frame of the running JavaScript
// resolves to the TypeScript file and line; anything without a readable map keeps its own.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { sourceMappedCallerResolver } from '../../../src/adapters/node/sourceMapCaller.js';
import { createKlogLogger } from '../../../src/logging/klog.js';

const TS_SOURCE = path.resolve(import.meta.dirname, '..', '..', '..', '..', 'test', 'unit', 'adapters', 'sourceMapCaller.test.ts');
const tsLineOf = (marker: string): number => readFileSync(TS_SOURCE, 'utf8').split('\n').findIndex((l) => l.includes(marker) && !l.includes('tsLineOf')) + 1;

/** file, line, column of the frame that called this. */
function here(): [string, number, number] {
  const frame = new Error().stack?.split('\n')[2] ?? '';
  const m = /\(?((?:file:\/\/)?[^\s()]+):(\d+):(\d+)\)?$/.exec(frame);
  assert.ok(m !== null, frame);
  return [m[1] ?? '', Number(m[2]), Number(m[3])];
}

describe('sourceMappedCallerResolver', () => {
  it('a frame of this compiled test resolves to this .ts file at the line of the call', () => {
    const resolve = sourceMappedCallerResolver();
    const [file, line, column] = here(); // MARK-HERE
    assert.match(file, /sourceMapCaller\.test\.js$/);
    assert.equal(resolve(file, line, column), `sourceMapCaller.test.ts:${tsLineOf('MARK-HERE')}`);
  });

  it('klog with the resolver: the JSON caller names the .ts line of the logging call', () => {
    const lines: string[] = [];
    const log = createKlogLogger({ format: 'json', verbosity: 0, sink: (l) => lines.push(l), nowMs: () => 0, pid: 1, resolveCaller: sourceMappedCallerResolver() });
    log.info('hello'); // MARK-LOG
    log.v(0).info('again'); // MARK-LOG-2
    assert.deepEqual(
      lines.map((l) => (JSON.parse(l) as { caller: string }).caller),
      [`sourceMapCaller.test.ts:${tsLineOf('MARK-LOG')}`, `sourceMapCaller.test.ts:${tsLineOf('MARK-LOG-2')}`],
    );
  });

  it('no map, a FIFO or a non-JavaScript file: undefined (klog keeps the generated file:line), never a hang', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nodevol-srcmap-'));
    try {
      const resolve = sourceMappedCallerResolver();
      writeFileSync(path.join(dir, 'plain.js'), 'x\n');
      assert.equal(resolve(path.join(dir, 'plain.js'), 1, 1), undefined);
      writeFileSync(path.join(dir, 'fifo.js'), 'x\n');
      execFileSync('mkfifo', [path.join(dir, 'fifo.js.map')]);
      assert.equal(resolve(path.join(dir, 'fifo.js'), 1, 1), undefined);
      writeFileSync(path.join(dir, 'bad.js'), 'x\n');
      writeFileSync(path.join(dir, 'bad.js.map'), '{not json');
      assert.equal(resolve(path.join(dir, 'bad.js'), 1, 1), undefined);
      assert.equal(resolve('node:internal/timers', 1, 1), undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
