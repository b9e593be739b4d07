// The kubelet copy (src/volume, src/volumemanager, src/operationexecutor) names no nodevol gate,
// not even in a comment: the only gate it may ask about is kubelet's own (KEP-6058's
// CSIGlobalMountReconstruction); nodevol's gates act through the hooks in src/nodevol/.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';

import { CSIGlobalMountReconstruction, knownFeatures } from '../../../src/features/features.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const KUBELET_COPY = ['src/volume', 'src/volumemanager', 'src/operationexecutor'];

async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await sourceFiles(p)));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Every `name` of `gates` that `text` contains, with its line number. */
function gateMentions(text: string, gates: readonly string[]): string[] {
  const hits: string[] = [];
  text.split('\n').forEach((line, i) => {
    for (const g of gates) if (line.includes(g)) hits.push(`${i + 1}: ${g}`);
  });
  return hits;
}

describe('the kubelet copy names no nodevol gate', () => {
  const nodevolGates = knownFeatures()
    .map(([name]) => name)
    .filter((name) => name !== CSIGlobalMountReconstruction);

  it('knows the nodevol gates (the registry is not empty, and CSIGlobalMountReconstruction is not among them)', () => {
    assert.ok(nodevolGates.length >= 7, `only ${nodevolGates.length} gates`);
    assert.ok(nodevolGates.includes('CSIKeepUncertainMountOnFinalError'));
  });

  it('finds a gate name in a line, comments included (the check can fail)', () => {
    assert.deepEqual(gateMentions('a\n// see CSIRetryReconstructionCleanup\n', nodevolGates), ['2: CSIRetryReconstructionCleanup']);
    assert.deepEqual(gateMentions(`if (gates.enabled(${CSIGlobalMountReconstruction}))`, nodevolGates), []);
  });

  for (const folder of KUBELET_COPY) {
    it(`${folder}: no nodevol gate name in any source file, code or comment`, async () => {
      const files = await sourceFiles(path.join(REPO_ROOT, folder));
      assert.ok(files.length > 0, `no sources under ${folder}`);
      const found: string[] = [];
      for (const f of files) for (const hit of gateMentions(await readFile(f, 'utf8'), nodevolGates)) found.push(`${path.relative(REPO_ROOT, f)}:${hit}`);
      assert.deepEqual(found, []);
    });
  }
});
