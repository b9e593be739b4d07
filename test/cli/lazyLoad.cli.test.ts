// Each command loads only what it needs: `nodevol audit` and `nodevol --help` run with gRPC,
// prom-client and the YAML parser made impossible to load; a node-only audit without zod too.
// Every case runs twice: through the bundle bin/nodevol.js loads (dist/bundle/cli/main.cjs, built
// by `npm run build`), and with NODEVOL_BUNDLE=0 through the compiled modules in dist/src/.
// The guard sees both ways a package is loaded: import (an ES module resolve hook) and require
// (the CommonJS loader, which the bundle uses); a file under dist/ that imports or requires
// anything is reported as loaded.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { requestedCommand, runsOnce } from '../../src/cli/main.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
const BIN = path.join(REPO_ROOT, 'bin', 'nodevol.js');
const BUNDLE = path.join(REPO_ROOT, 'dist', 'bundle', 'cli', 'main.cjs');
const FORBIDDEN = /\/node_modules\/(@grpc\/grpc-js|@grpc\/proto-loader|prom-client|yaml)\//;

let dir = '';
let guard = '';

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'nodevol-lazy-'));
  const hooks = path.join(dir, 'hooks.mjs');
  await writeFile(
    hooks,
    `export async function resolve(specifier, context, next) {
       const r = await next(specifier, context);
       if (${FORBIDDEN.toString()}.test(r.url)) throw new Error('forbidden import: ' + r.url);
       if (process.env.NODEVOL_TEST_NO_ZOD === '1' && r.url.includes('/node_modules/zod/')) throw new Error('forbidden import: ' + r.url);
       if (r.url.includes('/dist/')) process.stderr.write('loaded: ' + r.url + '\\n');
       return r;
     }\n`,
  );
  guard = path.join(dir, 'guard.mjs');
  await writeFile(
    guard,
    `import { createRequire, register } from 'node:module';
     import { pathToFileURL } from 'node:url';
     register(${JSON.stringify(pathToFileURL(hooks).href)});
     const Module = createRequire(import.meta.url)('node:module');
     const load = Module._load;
     Module._load = function (request, parent, isMain) {
       const from = parent?.filename ?? '';
       if (from.includes('/dist/')) process.stderr.write('loaded: ' + pathToFileURL(from).href + '\\n');
       const file = Module._resolveFilename(request, parent, isMain);
       if (${FORBIDDEN.toString()}.test(file)) throw new Error('forbidden import: ' + file);
       if (process.env.NODEVOL_TEST_NO_ZOD === '1' && file.includes('/node_modules/zod/')) throw new Error('forbidden import: ' + file);
       return load.call(this, request, parent, isMain);
     };\n`,
  );
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** How bin/nodevol.js runs the CLI: the bundle (the default when built) or the compiled modules. */
type Build = 'bundle' | 'modules';
const BUILDS: readonly Build[] = ['bundle', 'modules'];

function guarded(build: Build, args: readonly string[], env: NodeJS.ProcessEnv = process.env) {
  const r = spawnSync(process.execPath, ['--import', guard, BIN, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...env, NODEVOL_BUNDLE: build === 'bundle' ? '1' : '0' },
  });
  if (r.error !== undefined) throw r.error;
  // What ran is what was asked for: every nodevol module from the bundle, or none from it.
  const loaded = [...r.stderr.matchAll(/^loaded: (.*)$/gm)].map((m) => m[1] ?? '');
  assert.ok(loaded.length > 0, r.stderr);
  for (const url of loaded) assert.match(url, build === 'bundle' ? /\/dist\/bundle\/cli\// : /\/dist\/src\//, `${build}: ${url}`);
  return r;
}

for (const build of BUILDS) describe(`lazy loading per command (${build})`, () => {
  it('finds the command in argv, also behind `help`', () => {
    assert.ok(existsSync(BUNDLE), `${BUNDLE} is built by npm run build`);
    assert.equal(requestedCommand(['--help']), undefined);
    assert.equal(requestedCommand(['audit', '-o', 'json']), 'audit');
    assert.equal(requestedCommand(['help', 'agent']), 'agent');
  });

  it('only one-shot commands are ended at once by the launcher (runsOnce)', () => {
    for (const argv of [['--help'], ['--version'], ['version'], ['completion', 'bash'], ['audit', '-o', 'json'], ['help', 'audit']]) {
      assert.equal(runsOnce(argv), true, argv.join(' '));
    }
    for (const argv of [['agent'], ['mock-driver'], ['audit', '--interval', '5m'], ['audit', '--interval=5m'], ['explore'], ['demo'], ['recover'], ['timeline']]) {
      assert.equal(runsOnce(argv), false, argv.join(' '));
    }
  });

  it('the guard works: the mock driver cannot even show its help without gRPC', () => {
    const r = guarded(build, ['mock-driver', '--help']);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /forbidden import: .*grpc/);
  });

  it('--help lists every command without loading any of them', () => {
    const r = guarded(build, ['--help']);
    assert.equal(r.status, 0, r.stderr);
    for (const name of ['audit', 'agent', 'mock-driver']) assert.match(r.stdout, new RegExp(`\\n {2}${name} `));
  });

  /** An empty node: a root dir with pods/ and a one-line mount table. */
  async function emptyNode(name: string): Promise<{ root: string; mountinfo: string }> {
    const root = path.join(dir, name);
    const mountinfo = path.join(dir, `${name}.mountinfo`);
    await writeFile(mountinfo, '1 0 8:1 / / rw - ext4 /dev/sda1 rw\n');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(path.join(root, 'pods'), { recursive: true });
    return { root, mountinfo };
  }

  it('audit runs a whole audit (table and json) without gRPC, prom-client or YAML', async () => {
    const { root, mountinfo } = await emptyNode('root');
    for (const o of ['table', 'json']) {
      const r = guarded(build, ['audit', '--root-dir', root, '--mountinfo', mountinfo, '-o', o]);
      assert.equal(r.status, 0, r.stderr);
    }
  });

  it('a node-only audit does not load zod (the cluster state schemas load with a cluster source only)', async () => {
    const { root, mountinfo } = await emptyNode('root-zod');
    const env = { ...process.env, NODEVOL_TEST_NO_ZOD: '1' };
    const r = guarded(build, ['audit', '--root-dir', root, '--mountinfo', mountinfo, '-o', 'json'], env);
    assert.equal(r.status, 0, r.stderr);
    const state = path.join(dir, 'cluster.json');
    await writeFile(state, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [] }));
    const withCluster = guarded(build, ['audit', '--root-dir', root, '--mountinfo', mountinfo, '--cluster-state', state, '--node-name', 'n'], env);
    assert.match(withCluster.stderr, /forbidden import: .*zod/, 'the guard sees zod once a cluster source is given');
  });
});
