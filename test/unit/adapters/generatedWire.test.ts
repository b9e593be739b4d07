// The typed wire code in src/adapters/grpc/generated/ is what `npm run gen:proto`
// (@grpc/proto-loader's proto-loader-gen-types) makes of proto/csi/v1/csi.proto today: this test
// regenerates it into a temp dir with the same options and compares every file, so a .proto
// change without a regeneration (or a hand edit of a generated file) fails CI.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

// This file runs from dist/test/unit/adapters/: the repo root is four levels up.
const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const GENERATED = path.join(REPO_ROOT, 'src', 'adapters', 'grpc', 'generated');

async function files(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const rel = path.posix.join(prefix, e.name);
    if (e.isDirectory()) out.push(...(await files(path.join(dir, e.name), rel)));
    else out.push(rel);
  }
  return out.sort();
}

/** The gen:proto script's command line, with the output dir replaced. */
function genArgs(outDir: string): string[] {
  const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const script = pkg.scripts['gen:proto'];
  assert.ok(script !== undefined, 'package.json has a gen:proto script');
  const command = script.split('&&').map((s) => s.trim()).find((s) => s.startsWith('proto-loader-gen-types '));
  assert.ok(command !== undefined, `gen:proto runs proto-loader-gen-types: ${script}`);
  const args = command.split(/\s+/).slice(1);
  const o = args.indexOf('-O');
  assert.ok(o >= 0 && args[o + 1] === 'src/adapters/grpc/generated', 'gen:proto writes src/adapters/grpc/generated');
  args[o + 1] = outDir;
  return args;
}

describe('generated wire types', () => {
  it('src/adapters/grpc/generated is exactly what npm run gen:proto makes of proto/ (regenerate and commit when this fails)', async () => {
    const out = await mkdtemp(path.join(tmpdir(), 'nodevol-gen-'));
    try {
      const bin = path.join(REPO_ROOT, 'node_modules', '@grpc', 'proto-loader', 'build', 'bin', 'proto-loader-gen-types.js');
      const r = spawnSync(process.execPath, [bin, ...genArgs(out)], { cwd: REPO_ROOT, encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 0, r.stderr);
      const want = await files(out);
      assert.ok(want.includes('csi/v1/NodeStageVolumeRequest.ts'));
      assert.deepEqual(await files(GENERATED), want, 'the same files');
      for (const f of want) {
        assert.equal(await readFile(path.join(GENERATED, f), 'utf8'), await readFile(path.join(out, f), 'utf8'), `${f} is out of date: run npm run gen:proto`);
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
});
