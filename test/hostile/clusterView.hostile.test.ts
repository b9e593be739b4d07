/**
 * A partial cluster view, and an idle one (docs/security.md, docs/reference/agent.md): a cluster view that is not complete never removes a
 * pod, its last good state survives a restart, a deleted pod never comes back, the store
 * forgets what is gone, and an unchanged file is parsed once.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { MemFs } from '../../src/adapters/memory/memFs.js';
import { ClusterDirView, FULL_PASS_INTERVAL_MS, LAST_GOOD_DIR_NAME, type ClusterDirLimits } from '../../src/adapters/node/clusterDir.js';
import { NodeFileSystem } from '../../src/adapters/node/nodeFs.js';
import type { FileSystem } from '../../src/ports/fs.js';
import { waitFor } from '../support/e2e/waitFor.js';
import { FaultyFs } from '../support/faultyFs.js';

const DIR = '/srv/cluster';
const MANIFESTS = `${DIR}/manifests`;
const STORE = `${DIR}/${LAST_GOOD_DIR_NAME}`;
const enc = new TextEncoder();

function pod(name: string, pad = ''): string {
  return `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: default, uid: uid-${name}}\nspec:\n  nodeName: node-1\n  volumes: [{name: data, persistentVolumeClaim: {claimName: c-${name}}}]\n${pad}`;
}

async function freshCluster(files: Record<string, string>): Promise<MemFs> {
  const fs = MemFs.create();
  await fs.mkdir(MANIFESTS, { recursive: true, mode: 0o755 });
  await fs.writeFile(`${DIR}/node-status.json`, enc.encode('{"volumesAttached": [], "volumesInUse": []}'));
  for (const [name, text] of Object.entries(files)) await fs.writeFile(`${MANIFESTS}/${name}`, enc.encode(text));
  return fs;
}

function view(fs: FileSystem, limits?: ClusterDirLimits): ClusterDirView {
  return new ClusterDirView({ dir: DIR, nodeName: 'node-1', fs, ...(limits !== undefined ? { limits } : {}) });
}

async function names(v: ClusterDirView): Promise<string[]> {
  return (await v.listPods()).map((p) => p.name).sort();
}

describe('hostile cluster dir: a partial view never removes a pod', () => {
  it('more files than the file limit: the pods in the unread files keep their last good contents', async () => {
    const fs = await freshCluster({ 'z-running.yaml': pod('running') });
    const v = view(fs, { maxFiles: 3 });
    assert.deepEqual(await names(v), ['running']);
    // 4 more files sort before it: it is now past the limit and not read.
    for (const n of ['a', 'b', 'c', 'd']) await fs.writeFile(`${MANIFESTS}/${n}.yaml`, enc.encode(pod(n)));
    assert.deepEqual(await names(v), ['a', 'b', 'c', 'running'], 'the running pod does not look deleted');
    assert.ok(v.problems().some((p) => /5 manifest files, more than the limit of 3/.test(p.message)));
    assert.ok(v.problems().some((p) => /z-running\.yaml: not read: the limit of 3 manifest files was reached; using its last good contents/.test(p.message)));
    // A restart keeps it too.
    assert.deepEqual(await names(view(fs, { maxFiles: 3 })), ['a', 'b', 'c', 'running']);
  });

  it('more YAML documents than the document limit: the pods in the unread files keep their last good contents', async () => {
    const fs = await freshCluster({ 'z.yaml': pod('running') });
    const v = view(fs, { maxDocuments: 4 });
    assert.deepEqual(await names(v), ['running']);
    await fs.writeFile(`${MANIFESTS}/a.yaml`, enc.encode([1, 2, 3, 4].map((i) => pod(`p${i}`)).join('---\n')));
    assert.deepEqual(await names(v), ['p1', 'p2', 'p3', 'p4', 'running']);
    assert.ok(v.problems().some((p) => /z\.yaml: not read: the limit of 4 YAML documents was reached; using its last good contents/.test(p.message)), JSON.stringify(v.problems()));
  });

  it('after a restart, a manifest with a typo keeps the pods of its last good contents (persisted)', async () => {
    const fs = await freshCluster({ 'web.yaml': pod('web') });
    assert.deepEqual(await names(view(fs)), ['web']);
    await fs.writeFile(`${MANIFESTS}/web.yaml`, enc.encode('apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n'));
    const restarted = view(fs);
    assert.deepEqual(await names(restarted), ['web'], 'a new process still sees the running pod');
    assert.ok(restarted.problems().some((p) => /web\.yaml: it has problems; using its last good contents/.test(p.message)));
  });

  it('after a restart, a manifest grown over the size limit keeps the pods of its last good contents', async () => {
    const fs = await freshCluster({ 'web.yaml': pod('web') });
    assert.deepEqual(await names(view(fs, { maxFileBytes: 4096 })), ['web']);
    await fs.writeFile(`${MANIFESTS}/web.yaml`, enc.encode(pod('web', `# ${'x'.repeat(8192)}\n`)));
    const restarted = view(fs, { maxFileBytes: 4096 });
    assert.deepEqual(await names(restarted), ['web']);
    assert.ok(restarted.problems().some((p) => /refused: larger than the limit of 4096 bytes; using its last good contents/.test(p.message)));
  });

  it('an unreadable manifest keeps its last good contents', async () => {
    const mem = await freshCluster({ 'web.yaml': pod('web') });
    const fs = new FaultyFs(mem);
    const v = view(fs);
    assert.deepEqual(await names(v), ['web']);
    await mem.writeFile(`${MANIFESTS}/web.yaml`, enc.encode(pod('web', '# changed\n')));
    fs.failOn('readFile', `${MANIFESTS}/web.yaml`, 'EACCES');
    assert.deepEqual(await names(v), ['web']);
  });

  it('with no last good store yet (first start), an incomplete view rejects instead of dropping pods', async () => {
    const fs = await freshCluster({ 'a.yaml': pod('a'), 'b.yaml': 'kind: Pod\nmetadata: [broken\n' });
    await assert.rejects(view(fs).listPods(), /the view is incomplete and there is no last good copy to stand in .*b\.yaml; nothing is mounted or unmounted/);
    await fs.writeFile(`${MANIFESTS}/b.yaml`, enc.encode(pod('b')));
    assert.deepEqual(await names(view(fs)), ['a', 'b']);
    assert.equal((await fs.lstat(STORE)).type, 'directory');
    assert.deepEqual((await fs.readdir(STORE)).map((e) => e.name).sort(), ['a.yaml', 'b.yaml']);
  });
});

describe('hostile cluster dir: deletions', () => {
  it('a deleted pod is not resurrected by a later broken file of the same name, now or after a restart', async () => {
    const fs = await freshCluster({ 'pod.yaml': pod('web'), 'other.yaml': pod('other') });
    const v = view(fs);
    assert.deepEqual(await names(v), ['other', 'web']);
    await fs.unlink(`${MANIFESTS}/pod.yaml`);
    assert.deepEqual(await names(v), ['other'], 'deleted');
    await fs.writeFile(`${MANIFESTS}/pod.yaml`, enc.encode('apiVersion: v1\nkind: Pod\nmetadata: [broken\n'));
    assert.deepEqual(await names(v), ['other'], 'not resurrected');
    assert.deepEqual(await names(view(fs)), ['other'], 'not resurrected after a restart either');
  });

  it('the last good store forgets files that are really gone, in memory and on disk', async () => {
    const fs = await freshCluster({});
    const v = view(fs);
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 20; i++) await fs.writeFile(`${MANIFESTS}/p${round}-${i}.yaml`, enc.encode(pod(`p${round}-${i}`, `# ${'y'.repeat(1000)}\n`)));
      assert.equal((await v.listPods()).length, 20);
      assert.equal((await fs.readdir(STORE)).length, 20);
      for (let i = 0; i < 20; i++) await fs.unlink(`${MANIFESTS}/p${round}-${i}.yaml`);
      assert.deepEqual(await names(v), []);
      assert.deepEqual(await fs.readdir(STORE), [], 'no copy of a file that is gone');
    }
  });

  it('a temp file a crash left in the last good store is removed at the next start', async () => {
    const fs = await freshCluster({ 'a.yaml': pod('a') });
    assert.deepEqual(await names(view(fs)), ['a']);
    await fs.writeFile(`${STORE}/.a.yaml.0123456789ab.tmp`, enc.encode('half a cop'));
    assert.deepEqual(await names(view(fs)), ['a']);
    assert.deepEqual((await fs.readdir(STORE)).map((e) => e.name), ['a.yaml']);
  });

  it('a dangling symlink is not a deletion: it keeps its last good contents', async () => {
    const fs = await freshCluster({});
    await fs.mkdir('/data', { recursive: true, mode: 0o755 });
    await fs.writeFile('/data/web.yaml', enc.encode(pod('web')));
    await fs.symlink('/data/web.yaml', `${MANIFESTS}/web.yaml`);
    const v = view(fs);
    assert.deepEqual(await names(v), ['web']);
    await fs.unlink('/data/web.yaml');
    assert.deepEqual(await names(v), ['web']);
  });
});

describe('cluster dir: costs nothing when nothing changes', () => {
  it('an unchanged manifest or node-status.json is read once; a changed one is read again, once', async () => {
    const mem = await freshCluster({ 'a.yaml': pod('a'), 'b.yaml': pod('b') });
    const fs = new FaultyFs(mem);
    const v = view(fs);
    const reads = (): string[] => fs.calls.filter((c) => c.startsWith('readFile '));
    assert.deepEqual(await names(v), ['a', 'b']);
    assert.deepEqual(reads().sort(), [`readFile ${MANIFESTS}/a.yaml`, `readFile ${MANIFESTS}/b.yaml`, `readFile ${DIR}/node-status.json`]);
    fs.calls.length = 0;
    for (let i = 0; i < 5; i++) await v.listPods();
    assert.deepEqual(reads(), [], 'nothing re-read');
    await mem.writeFile(`${MANIFESTS}/b.yaml`, enc.encode(pod('b', '# edited\n')));
    await v.listPods();
    await v.listPods();
    assert.deepEqual(reads(), [`readFile ${MANIFESTS}/b.yaml`]);
  });
});

describe('cluster dir with watch: an unchanged dir costs no syscall per manifest', () => {
  it('no stat or read while nothing changes; a change is seen at the next pass; a full pass at least every 10 s', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodevol-watch-'));
    let now = 0;
    const fs = new FaultyFs(new NodeFileSystem());
    const v = new ClusterDirView({ dir, nodeName: 'node-1', fs, watch: true, now: () => now });
    try {
      mkdirSync(join(dir, 'manifests'));
      for (const n of ['a', 'b', 'c']) writeFileSync(join(dir, 'manifests', `${n}.yaml`), pod(n));
      writeFileSync(join(dir, 'node-status.json'), '{}');
      assert.deepEqual(await names(v), ['a', 'b', 'c']);
      fs.calls.length = 0;
      for (let i = 0; i < 20; i++) await v.listPods();
      const perManifest = fs.calls.filter((c) => c.includes('/manifests'));
      assert.deepEqual(perManifest, [], 'no readdir, stat or read of the manifests while nothing changed');
      writeFileSync(join(dir, 'manifests', 'd.yaml'), pod('d'));
      await waitUntil(async () => (await names(v)).includes('d'), 'the new manifest to be seen');
      fs.calls.length = 0;
      now += FULL_PASS_INTERVAL_MS;
      await v.listPods();
      assert.equal(fs.calls.filter((c) => c.startsWith('stat ') && c.includes('/manifests/')).length, 4, 'a full pass stats every manifest');
      assert.equal(fs.calls.filter((c) => c.startsWith('readFile ') && c.includes('/manifests/')).length, 0, 'and reads none that did not change');
    } finally {
      v.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** Waits (bounded: 5 s) until `cond` holds: inotify events are asynchronous. */
async function waitUntil(cond: () => Promise<boolean>, what: string): Promise<void> {
  await waitFor(cond, { what, timeoutMs: 5_000, intervalMs: 10 });
}

describe('hostile cluster dir on the real filesystem', () => {
  it('a manifest symlinked to a FIFO and a FIFO node-status.json are refused by name, never hang', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodevol-hostile-'));
    try {
      mkdirSync(join(dir, 'manifests'));
      writeFileSync(join(dir, 'manifests', 'a.yaml'), pod('a'));
      writeFileSync(join(dir, 'node-status.json'), '{}');
      const v = new ClusterDirView({ dir, nodeName: 'node-1' });
      assert.deepEqual((await v.listPods()).map((p) => p.name), ['a']);
      execFileSync('mkfifo', [join(dir, 'fifo')]);
      symlinkSync(join(dir, 'fifo'), join(dir, 'manifests', 'b.yaml'));
      assert.deepEqual((await v.listPods()).map((p) => p.name), ['a']);
      assert.ok(v.problems().some((p) => p.message.includes(`${join(dir, 'manifests', 'b.yaml')}: cannot read: `) && p.message.includes('is a FIFO, not a regular file')), JSON.stringify(v.problems()));
      rmSync(join(dir, 'node-status.json'));
      execFileSync('mkfifo', [join(dir, 'node-status.json')]);
      await assert.rejects(v.listPods(), /node-status\.json is a FIFO, not a regular file; refusing to read it/);
      assert.deepEqual(readdirSync(join(dir, LAST_GOOD_DIR_NAME)), ['a.yaml']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
