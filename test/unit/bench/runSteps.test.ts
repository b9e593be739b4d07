// `npm run bench` runs every step even when one fails, and fails at the end (bench/runSteps.ts).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const RUN_STEPS = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../../bench/runSteps.js');

function withScripts(bodies: Record<string, string>, fn: (dir: string) => void): void {
  const dir = mkdtempSync(path.join(tmpdir(), 'runsteps-'));
  try {
    for (const [name, body] of Object.entries(bodies)) writeFileSync(path.join(dir, name), body);
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const touch = (marker: string): string => `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran');`;

describe('bench/runSteps.ts', () => {
  it('a failed step does not stop the later ones; the run exits 1 and names the failed step', () => {
    withScripts({}, (dir) => {
      const later = path.join(dir, 'later.ran');
      writeFileSync(path.join(dir, 'fail.cjs'), 'process.exit(1);');
      writeFileSync(path.join(dir, 'ok.cjs'), touch(later));
      const r = spawnSync(process.execPath, [RUN_STEPS, path.join(dir, 'fail.cjs'), path.join(dir, 'ok.cjs')], { encoding: 'utf8' });
      assert.equal(r.status, 1);
      assert.equal(readFileSync(later, 'utf8'), 'ran');
      assert.match(r.stdout, /fail\.cjs: FAILED \(exit 1\)/);
      assert.match(r.stdout, /ok\.cjs: ok/);
      assert.match(r.stdout, /bench: 1 of 2 steps FAILED: .*fail\.cjs$/m);
    });
  });

  it('every step ok: exit 0', () => {
    withScripts({}, (dir) => {
      const a = path.join(dir, 'a.ran');
      const b = path.join(dir, 'b.ran');
      writeFileSync(path.join(dir, 'a.cjs'), touch(a));
      writeFileSync(path.join(dir, 'b.cjs'), touch(b));
      const r = spawnSync(process.execPath, [RUN_STEPS, path.join(dir, 'a.cjs'), path.join(dir, 'b.cjs')], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stdout + r.stderr);
      assert.ok(existsSync(a) && existsSync(b));
      assert.match(r.stdout, /bench: all 2 steps ok/);
    });
  });

  it('npm run bench runs its three steps through runSteps, not chained with && (a failed limit stopped the rest)', () => {
    const pkg = JSON.parse(readFileSync(path.join(path.dirname(RUN_STEPS), '../../package.json'), 'utf8')) as { scripts: Record<string, string> };
    const bench = pkg.scripts['bench'] ?? '';
    const [build, steps] = bench.split(' && ');
    assert.equal(build, 'npm run build');
    assert.equal(steps, 'node dist/bench/runSteps.js dist/bench/bench.js dist/bench/explore.js dist/bench/agentScale.js');
  });

  it('the last step failing fails the run too', () => {
    withScripts({ 'ok.cjs': '', 'fail.cjs': 'process.exitCode = 3;' }, (dir) => {
      const r = spawnSync(process.execPath, [RUN_STEPS, path.join(dir, 'ok.cjs'), path.join(dir, 'fail.cjs')], { encoding: 'utf8' });
      assert.equal(r.status, 1);
      assert.match(r.stdout, /fail\.cjs: FAILED \(exit 3\)/);
    });
  });
});
