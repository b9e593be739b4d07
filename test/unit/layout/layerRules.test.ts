// The layer rules of .dependency-cruiser.cjs (run by `npm run lint`) reject what they claim to:
// a fixture tree with one import per rule is cruised with the project's own configuration.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..', '..');
const CRUISER = path.join(REPO_ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

/** file -> its source; every import is relative or a node built-in. */
const FIXTURE: Readonly<Record<string, string>> = {
  'src/api/core.ts': 'export type Pod = { name: string };\n',
  'src/ports/fs.ts': "import type { Pod } from '../api/core.js';\nexport type P = Pod;\n",
  'src/ports/clock.ts': "import type { Spec } from '../volume/spec.js';\nexport type S = Spec;\n",
  'src/volume/spec.ts': "import type { P } from '../ports/fs.js';\nexport type Spec = P;\n",
  'src/volume/upward.ts': "import { run } from '../cli/main.js';\nexport const r = run;\n",
  'src/volume/world.ts': "import { readFileSync } from 'node:fs';\nexport const f = readFileSync;\n",
  'src/volumemanager/cache/asw.ts': "import { pass } from '../reconciler/reconciler.js';\nexport const p = pass;\n",
  'src/volumemanager/reconciler/reconciler.ts': "import type { Spec } from '../../volume/spec.js';\nexport const pass = (s?: Spec): Spec | undefined => s;\n",
  'src/operationexecutor/a.ts': "import { b } from './b.js';\nexport const a = (): number => b();\n",
  'src/operationexecutor/b.ts': "import { a } from './a.js';\nexport const b = (): number => a();\n",
  'src/adapters/node/fsAdapter.ts': "import { readFileSync } from 'node:fs';\nimport type { P } from '../../ports/fs.js';\nexport const x: [typeof readFileSync, P | undefined] = [readFileSync, undefined];\n",
  // The two inversions the layout once needed exceptions for: the Mounter port handing out the
  // snapshot class of mount/, and the API server adapter reusing the audit's object schemas.
  'src/mount/mountRefs.ts': "import type { P } from '../ports/fs.js';\nexport class MountTableSnapshot { p?: P; }\n",
  'src/ports/mounter.ts': "import type { MountTableSnapshot } from '../mount/mountRefs.js';\nexport type T = MountTableSnapshot;\n",
  'src/audit/clusterState.ts': "import type { Pod } from '../api/core.js';\nexport const schemas: Pod[] = [];\n",
  'src/adapters/node/clusterApi.ts': "import { schemas } from '../../audit/clusterState.js';\nexport const s = schemas;\n",
  'src/api/clusterObjects.ts': "import type { P } from '../ports/fs.js';\nexport type O = P;\n",
  'src/cli/main.ts': "import type { Spec } from '../volume/spec.js';\nimport { x } from '../adapters/node/fsAdapter.js';\nexport const run = (s?: Spec): unknown => [s, x];\n",
  // A folder inside another layer's folder is its own layer: the CSI plugin may use the plugin
  // framework, the framework may not use the plugin.
  'src/volume/csi/csiPlugin.ts': "import type { Spec } from '../spec.js';\nexport const plugin = (s?: Spec): Spec | undefined => s;\n",
  'src/volume/plugins.ts': "import { plugin } from './csi/csiPlugin.js';\nexport const p = plugin;\n",
  // The mock driver is a program over the adapters, not over the engine.
  'src/mockdriver/mockDriver.ts': "import { x } from '../adapters/node/fsAdapter.js';\nimport { pass } from '../volumemanager/reconciler/reconciler.js';\nexport const m = [x, pass];\n",
  'src/mockdriver/volumeId.ts': "export const id = (n: string): string => n;\n",
  'src/sim/generate.ts': "import { id } from '../mockdriver/volumeId.js';\nexport const g = id;\n",
  // The trace formats sit below the reports that draw them.
  'src/timeline/html.ts': "import type { E } from '../trace/events.js';\nexport const render = (e?: E): unknown => e;\n",
  'src/timeline/layout.ts': 'export const width = 80;\n',
  'src/trace/events.ts': "import { width } from '../timeline/layout.js';\nexport type E = { t: number };\nexport const w = width;\n",
  // nodevol's gates implement the hooks the kubelet copy declares; the copy never imports them.
  'src/nodevol/gate/index.ts': "import type { Spec } from '../../volume/spec.js';\nexport const hook = (s?: Spec): Spec | undefined => s;\n",
  'src/volume/csi/hooked.ts': "import { hook } from '../../nodevol/gate/index.js';\nexport const h = hook;\n",
  'src/agent/node.ts': "import { hook } from '../nodevol/gate/index.js';\nexport const n = hook;\n",
  // kubelet/ is engine code inside the node layer; agent/ is not.
  'src/kubelet/housekeeping.ts': "import { readdirSync } from 'node:fs';\nexport const h = readdirSync;\n",
  'src/agent/httpServer.ts': "import { createServer } from 'node:http';\nexport const s = createServer;\n",
};

interface Violation {
  readonly from: string;
  readonly to: string;
  readonly rule: { readonly name: string };
}

describe('layer rules (.dependency-cruiser.cjs)', () => {
  let dir = '';
  let violations: readonly Violation[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'nodevol-layers-'));
    for (const [file, text] of Object.entries(FIXTURE)) {
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      writeFileSync(path.join(dir, file), text);
    }
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }));
    const run = promisify(execFile);
    const { stdout } = await run(process.execPath, [CRUISER, 'src', '--config', path.join(REPO_ROOT, '.dependency-cruiser.cjs'), '--output-type', 'json'], { cwd: dir, maxBuffer: 16 * 1024 * 1024 }).catch(
      // depcruise exits non-zero when it finds violations (this fixture has some): keep its report.
      (err: unknown) => ({ stdout: typeof err === 'object' && err !== null && 'stdout' in err && typeof err.stdout === 'string' ? err.stdout : '' }),
    );
    violations = (JSON.parse(stdout) as { summary: { violations: Violation[] } }).summary.violations;
  });

  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const cases: readonly { name: string; from: string; to: string; rule: string }[] = [
    { name: 'a lower layer importing a higher one is refused (volume -> cli)', from: 'src/volume/upward.ts', to: 'src/cli/main.ts', rule: 'not-in-allowed' },
    { name: 'the ports importing the engine is refused (ports -> volume)', from: 'src/ports/clock.ts', to: 'src/volume/spec.ts', rule: 'not-in-allowed' },
    { name: 'the Mounter port importing the mount table implementation is refused (ports -> mount)', from: 'src/ports/mounter.ts', to: 'src/mount/mountRefs.ts', rule: 'not-in-allowed' },
    { name: 'an adapter importing the audit is refused (adapters -> node)', from: 'src/adapters/node/clusterApi.ts', to: 'src/audit/clusterState.ts', rule: 'not-in-allowed' },
    { name: 'the object types importing the ports is refused (api imports nothing of ours)', from: 'src/api/clusterObjects.ts', to: 'src/ports/fs.ts', rule: 'not-in-allowed' },
    { name: 'engine code importing node:fs is refused', from: 'src/volume/world.ts', to: 'fs', rule: 'engine-uses-ports' },
    { name: "the volume manager's caches importing the reconciler is refused", from: 'src/volumemanager/cache/asw.ts', to: 'src/volumemanager/reconciler/reconciler.ts', rule: 'volumemanager-cache-is-bottom' },
    { name: 'an import cycle is refused', from: 'src/operationexecutor/a.ts', to: 'src/operationexecutor/b.ts', rule: 'no-circular' },
    { name: 'the plugin framework importing the CSI plugin nested in its folder is refused (volume -> volume/csi)', from: 'src/volume/plugins.ts', to: 'src/volume/csi/csiPlugin.ts', rule: 'not-in-allowed' },
    { name: 'the mock driver importing the engine is refused (mockdriver -> volumemanager)', from: 'src/mockdriver/mockDriver.ts', to: 'src/volumemanager/reconciler/reconciler.ts', rule: 'not-in-allowed' },
    { name: 'the trace format importing the report is refused (trace -> timeline)', from: 'src/trace/events.ts', to: 'src/timeline/layout.ts', rule: 'not-in-allowed' },
    { name: 'kubelet/ (engine in the node layer) importing node:fs is refused', from: 'src/kubelet/housekeeping.ts', to: 'fs', rule: 'engine-uses-ports' },
    { name: "the kubelet copy importing nodevol's gates is refused (volume/csi -> nodevol)", from: 'src/volume/csi/hooked.ts', to: 'src/nodevol/gate/index.ts', rule: 'not-in-allowed' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const hit = violations.filter((v) => v.from === c.from && v.to.replace(/^node:/, '') === c.to && v.rule.name === c.rule);
      assert.equal(hit.length, 1, `expected ${c.rule} for ${c.from} -> ${c.to}; got ${JSON.stringify(violations.map((v) => [v.from, v.to, v.rule.name]))}`);
    });
  }

  it('downward imports, adapters using node:fs and the cli wiring adapters are allowed', () => {
    const allowed = [
      'src/ports/fs.ts',
      'src/mount/mountRefs.ts',
      'src/audit/clusterState.ts',
      'src/volume/spec.ts',
      'src/volume/csi/csiPlugin.ts',
      'src/adapters/node/fsAdapter.ts',
      'src/cli/main.ts',
      'src/volumemanager/reconciler/reconciler.ts',
      'src/sim/generate.ts',
      'src/timeline/html.ts',
      'src/agent/httpServer.ts',
      'src/nodevol/gate/index.ts',
      'src/agent/node.ts',
    ];
    assert.deepEqual(violations.filter((v) => allowed.includes(v.from)), []);
    // The mock driver's import of an adapter is allowed; only its import of the engine is not.
    assert.deepEqual(violations.filter((v) => v.from === 'src/mockdriver/mockDriver.ts').map((v) => v.to), ['src/volumemanager/reconciler/reconciler.ts']);
  });

  it('has no exceptions: every allowed rule is a whole layer, made of folders', () => {
    type Paths = { path?: string; pathNot?: string };
    const config = createRequire(import.meta.url)(path.join(REPO_ROOT, '.dependency-cruiser.cjs')) as {
      allowed: readonly { comment: string; from: Paths; to: Paths }[];
    };
    // One rule for npm packages, one per layer ("<layer> may import: ...").
    const extra = config.allowed.filter((r) => !/^(npm packages and node built-ins|[A-Za-z]+ may import: itself)/.test(r.comment));
    assert.deepEqual(extra.map((r) => r.comment), [], 'an allowed rule that is not a whole layer: an exception to the layer rules');
    assert.ok(config.allowed.every((r) => !/EXCEPTION/i.test(r.comment)), 'no rule is an exception');
    // Every path of a layer rule is a list of folders under src/: no file, no lookahead.
    const folderList = /^\^src\/\((?:[a-z]+(?:\/[a-z]+)?)(?:\|[a-z]+(?:\/[a-z]+)?)*\)\/$/i;
    const notFolders = config.allowed
      .filter((r) => r.comment.includes(' may import: '))
      .flatMap((r) => [r.from.path, r.from.pathNot, r.to.path, r.to.pathNot].filter((p): p is string => p !== undefined && !folderList.test(p)).map((p) => `${r.comment}: ${p}`));
    assert.deepEqual(notFolders, [], 'a layer rule whose path is not a list of folders');
  });
});
