// Every comment (and every other text of the repository) that cites a document cites one in the
// repository (docs/…, README.md, ARCHITECTURE.md) or says the fact itself: no section numbers or
// names of the research documents the code was written from, no seed articles, no issue numbers
// of a tracker the repository does not carry (test/support/docs.ts lists the patterns). Upstream references (kubernetes#121937, csi_block.go)
// are public and fine. The check is also fed each kind of citation, so that it is known to fail.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { documentationFiles, findOutsideCitations, formatProblems } from '../../support/docs.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');

/** Where code and its comments live, and the files that carry text a reader follows. */
const SCANNED_DIRS = ['src', 'test', 'bench', 'scripts', 'scenarios', 'deploy', 'examples', 'bin', '.ci'];
const SCANNED_FILES = ['.dependency-cruiser.cjs', 'eslint.config.js', 'package.json', 'tsconfig.json'];
const TEXT = /\.(ts|js|cjs|mjs|json|ya?ml|sh|md|txt)$|^[^.]+$/;
/**
 * Not scanned: the generated CSI wire types (upstream's csi.proto comments) and the checker's own
 * definition of what a citation looks like.
 */
const EXCLUDED = new Set(['src/adapters/grpc/generated', 'test/support/docs.ts']);

function scannedFiles(): string[] {
  const files: string[] = [...SCANNED_FILES];
  const walk = (rel: string): void => {
    if (EXCLUDED.has(rel)) return;
    for (const e of readdirSync(path.join(REPO_ROOT, rel), { withFileTypes: true })) {
      const child = path.posix.join(rel, e.name);
      if (EXCLUDED.has(child)) continue;
      if (e.isDirectory()) walk(child);
      else if (e.isFile() && TEXT.test(e.name)) files.push(child);
    }
  };
  for (const dir of SCANNED_DIRS) walk(dir);
  for (const doc of documentationFiles(REPO_ROOT)) files.push(path.relative(REPO_ROOT, doc));
  return files.sort();
}

describe('no citation of a document outside the repository', () => {
  it('in src, test, bench, scripts, scenarios, deploy, examples, bin, .ci and the documentation', () => {
    const files = scannedFiles();
    assert.ok(files.includes('src/cli/main.ts') && files.includes('docs/feature-gates.md'), 'the scan misses the code or the docs');
    const problems = files.flatMap((f) => findOutsideCitations(f, readFileSync(path.join(REPO_ROOT, f), 'utf8')));
    assert.deepEqual(problems, [], formatProblems(problems));
  });

  it('fails on each kind of citation, and passes upstream references', () => {
    // Built from pieces, so that this file itself does not cite anything.
    const sect = '\u00a7';
    const cited = [
      ` * Reconstruction (reconstruct.go; reference ${sect}8.2-8.6):`,
      `// CanAttach (${sect}6)`,
      ' * The CSI spec is the contract (field' + ' notes 4.4):',
      '// the copies-only getters (models-to' + '-follow "What to absorb" item 2).',
      '// Issue' + ' 8 item 3, "stuck is visible"',
      ' * (nodevol addition, iss' + 'ue 8 item 3)',
      '  The inline-volume art' + 'icle (se' + 'eds/inline-volume-orphans-after-restart.zh' + '.txt)',
    ].join('\n');
    const problems = findOutsideCitations('x.ts', cited);
    assert.deepEqual(
      [...new Set(problems.map((p) => p.line))],
      [1, 2, 3, 4, 5, 6, 7],
      formatProblems(problems),
    );
    const upstream = [
      '// drain + reboot while NodeUnstageVolume is in flight (kubernetes#121937, #101791)',
      '// pkg/volume/csi/csi_block.go SetUpDevice; csi_attacher_test.go; KEP-6058 Design Details item 5',
      "// see docs/feature-gates.md#csiunstagecompletesbeforerestage and README.md's demo",
      '// test/hostile/issue14-auditTableEscaping.test.ts (a file name)',
      '    return `<art' + 'icle class="verdict">…</art' + 'icle>`; // an HTML element',
    ].join('\n');
    assert.deepEqual(findOutsideCitations('y.ts', upstream), []);
  });
});
