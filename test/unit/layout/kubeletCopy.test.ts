// The kubelet copy (src/volume, src/operationexecutor, src/volumemanager) holds kubelet's
// decisions only: no nodevol gate is named there, not even in a comment; the only gate it asks
// about is KEP-6058's (CSIGlobalMountReconstruction); it imports nothing of src/nodevol/, where
// nodevol's gates implement the hooks it declares (ARCHITECTURE.md, "The kubelet copy and
// nodevol's gates"). The names come from the gate registry, so a new gate is covered unedited.
// Each check is also fed a text that breaks it, to show that it can fail.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { CSIGlobalMountReconstruction, CSIKeepUncertainMountOnFinalError, FeatureGate, knownFeatures, type KubeletFeatureGate } from '../../../src/features/features.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const COPY_FOLDERS = ['src/volume', 'src/operationexecutor', 'src/volumemanager'];

/** nodevol's gate names, deprecated aliases included: every gate but KEP-6058's and its alias. */
const NODEVOL_NAMES = knownFeatures()
  .filter(([name, spec]) => name !== CSIGlobalMountReconstruction && spec.aliasOf !== CSIGlobalMountReconstruction)
  .map(([name]) => name);

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.posix.join(dir, e.name);
    if (e.isDirectory()) return tsFiles(rel);
    return e.isFile() && e.name.endsWith('.ts') ? [rel] : [];
  });
}

/** `file:line: why` for each line of `text` that breaks the rule. */
function problems(file: string, text: string): string[] {
  return text.split('\n').flatMap((line, i) => {
    const at = `${file}:${i + 1}`;
    const found: string[] = [];
    for (const name of NODEVOL_NAMES) if (line.includes(name)) found.push(`${at}: names nodevol's gate ${name}`);
    for (const m of line.matchAll(/features\.enabled\(([^)]*)\)/g)) {
      if (m[1] !== CSIGlobalMountReconstruction) found.push(`${at}: asks a gate other than ${CSIGlobalMountReconstruction}: ${m[0]}`);
    }
    for (const m of line.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)) {
      if (m[1]?.includes('/nodevol/') === true) found.push(`${at}: imports ${m[1]}`);
    }
    return found;
  });
}

describe('the kubelet copy names no nodevol gate', () => {
  it('the registry has nodevol gates to look for (six live ones, the retired one and the deprecated alias)', () => {
    assert.ok(NODEVOL_NAMES.length >= 8, NODEVOL_NAMES.join(', '));
    assert.ok(NODEVOL_NAMES.includes(CSIKeepUncertainMountOnFinalError));
    assert.ok(!NODEVOL_NAMES.includes(CSIGlobalMountReconstruction));
  });

  it('no file of volume/, operationexecutor/, volumemanager/ names one, asks one, or imports src/nodevol/', () => {
    const files = COPY_FOLDERS.flatMap(tsFiles);
    for (const f of ['src/volume/csi/csiAttacher.ts', 'src/operationexecutor/operationGenerator.ts', 'src/volumemanager/reconciler/reconstruct.ts']) assert.ok(files.includes(f), `${f} not walked`);
    const found = files.flatMap((f) => problems(f, readFileSync(path.join(REPO_ROOT, f), 'utf8')));
    assert.deepEqual(found, []);
  });

  it('fails on a text that names a gate, asks one, or imports a policy', () => {
    const text = [
      '// with CSIDurableBlockVolumePaths the staging dir is fsynced',
      'if (host.features.enabled(CSIDurableBlockVolumePaths)) await fsync();',
      'if (host.features.enabled(CSIGlobalMountReconstruction)) list();',
      "import { hooks } from '../../nodevol/durableBlockVolumePaths/index.js';",
    ].join('\n');
    assert.deepEqual(problems('src/volume/csi/fixture.ts', text), [
      "src/volume/csi/fixture.ts:1: names nodevol's gate CSIDurableBlockVolumePaths",
      "src/volume/csi/fixture.ts:2: names nodevol's gate CSIDurableBlockVolumePaths",
      `src/volume/csi/fixture.ts:2: asks a gate other than ${CSIGlobalMountReconstruction}: features.enabled(CSIDurableBlockVolumePaths)`,
      'src/volume/csi/fixture.ts:4: imports ../../nodevol/durableBlockVolumePaths/index.js',
    ]);
  });

  it("the copy's view of the gates (KubeletFeatureGate) answers KEP-6058's gate only: asking another does not compile", () => {
    const gates: KubeletFeatureGate = FeatureGate.of({ CSIGlobalMountReconstruction: true, CSIKeepUncertainMountOnFinalError: true });
    assert.equal(gates.enabled(CSIGlobalMountReconstruction), true);
    // @ts-expect-error nodevol's gates act through hooks; the kubelet copy cannot ask about them
    assert.equal(gates.enabled(CSIKeepUncertainMountOnFinalError), true);
  });
});
