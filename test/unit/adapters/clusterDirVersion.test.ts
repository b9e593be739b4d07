// ClusterDirView.objectsVersion (what lets the populator skip pods it already resolved): the same
// value while the manifests do not change, a new one once a manifest changed - and the getters
// answer from the snapshot that version names.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ClusterDirView } from '../../../src/adapters/node/clusterDir.js';
import { waitFor } from '../../support/e2e/waitFor.js';

const POD = (name: string, claim: string): string => `apiVersion: v1
kind: Pod
metadata: { name: ${name}, namespace: default }
spec:
  nodeName: node-1
  containers: [{ name: app, image: pause }]
  volumes: [{ name: data, persistentVolumeClaim: { claimName: ${claim} } }]
`;
const PVC = (name: string, volume: string): string => `apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: ${name}, namespace: default }
spec: { volumeName: ${volume} }
`;

describe('ClusterDirView objectsVersion', () => {
  it('stays while nothing changes and moves once a manifest changed (watching)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodevol-clusterdir-version-'));
    const view = new ClusterDirView({ dir, nodeName: 'node-1', watch: true });
    try {
      mkdirSync(join(dir, 'manifests'));
      writeFileSync(join(dir, 'manifests', 'pod.yaml'), POD('web', 'data'));
      writeFileSync(join(dir, 'manifests', 'pvc.yaml'), PVC('data', 'pv-1'));
      writeFileSync(join(dir, 'node-status.json'), JSON.stringify({ volumesAttached: [], volumesInUse: [] }));

      const first = await view.listPods();
      const v1 = view.objectsVersion();
      const again = await view.listPods();
      assert.equal(view.objectsVersion(), v1, 'nothing changed: the same version');
      assert.equal(again[0], first[0], 'and the same Pod object');

      writeFileSync(join(dir, 'manifests', 'pvc.yaml'), PVC('data', 'pv-2'));
      await waitFor(
        async () => {
          await view.listPods();
          return view.objectsVersion() !== v1;
        },
        { what: 'a changed manifest to give a new version', timeoutMs: 5_000, intervalMs: 10 },
      );
      assert.equal((await view.getPersistentVolumeClaim('default', 'data'))?.volumeName, 'pv-2', 'the new version answers with the new claim');
    } finally {
      view.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stays when not watching and a full pass finds nothing changed; moves once a file changed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodevol-clusterdir-version-'));
    const view = new ClusterDirView({ dir, nodeName: 'node-1' });
    try {
      mkdirSync(join(dir, 'manifests'));
      writeFileSync(join(dir, 'manifests', 'pod.yaml'), POD('web', 'data'));
      writeFileSync(join(dir, 'node-status.json'), JSON.stringify({ volumesAttached: [], volumesInUse: [] }));
      await view.listPods();
      const v1 = view.objectsVersion();
      await view.listPods();
      assert.equal(view.objectsVersion(), v1, 'every file read from the cache: the same snapshot');
      writeFileSync(join(dir, 'manifests', 'pod.yaml'), POD('web', 'other-claim'));
      await view.listPods();
      assert.notEqual(view.objectsVersion(), v1);
    } finally {
      view.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('ClusterDirView change signal (what lets an idle agent sleep)', () => {
  function clusterDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'nodevol-clusterdir-signal-'));
    mkdirSync(join(dir, 'manifests'));
    writeFileSync(join(dir, 'manifests', 'pod.yaml'), POD('web', 'data'));
    writeFileSync(join(dir, 'manifests', 'pvc.yaml'), PVC('data', 'pv-1'));
    writeFileSync(join(dir, 'node-status.json'), JSON.stringify({ volumesAttached: [], volumesInUse: [] }));
    return dir;
  }

  it('signals every change once a pass started its watches: a manifest edited, added or removed, node-status.json rewritten', async () => {
    const dir = clusterDir();
    const view = new ClusterDirView({ dir, nodeName: 'node-1', watch: true });
    let events = 0;
    view.onChange(() => events++);
    try {
      assert.equal(view.signalsEveryChange(), false, 'nothing is watched before the first pass');
      await view.listPods();
      assert.equal(view.signalsEveryChange(), true);
      for (const change of [
        () => writeFileSync(join(dir, 'manifests', 'pvc.yaml'), PVC('data', 'pv-2')),
        () => writeFileSync(join(dir, 'manifests', 'other.yaml'), PVC('other', 'pv-3')),
        () => rmSync(join(dir, 'manifests', 'other.yaml')),
        () => writeFileSync(join(dir, 'node-status.json'), JSON.stringify({ volumesAttached: [], volumesInUse: ['x'] })),
      ]) {
        const before = events;
        change();
        await waitFor(() => Promise.resolve(events > before), { what: 'a change signal', timeoutMs: 5_000, intervalMs: 5 });
      }
      view.close();
      assert.equal(view.signalsEveryChange(), false, 'closed: nothing is watched');
    } finally {
      view.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('follows a symlinked manifest to its new target after it is replaced (ln -sfn): an edit there is signalled', async () => {
    const dir = clusterDir();
    const targets = mkdtempSync(join(tmpdir(), 'nodevol-clusterdir-targets-'));
    const view = new ClusterDirView({ dir, nodeName: 'node-1', watch: true });
    let events = 0;
    view.onChange(() => events++);
    try {
      writeFileSync(join(targets, 'a.yaml'), PVC('other', 'pv-a'));
      writeFileSync(join(targets, 'b.yaml'), PVC('other', 'pv-b'));
      symlinkSync(join(targets, 'a.yaml'), join(dir, 'manifests', 'other.yaml'));
      await view.listPods();
      assert.equal(view.signalsEveryChange(), true);
      // ln -sfn: a new link renamed over the old one.
      symlinkSync(join(targets, 'b.yaml'), join(dir, 'manifests', '.other.tmp'));
      renameSync(join(dir, 'manifests', '.other.tmp'), join(dir, 'manifests', 'other.yaml'));
      await waitFor(async () => {
        await view.listPods();
        return (await view.getPersistentVolumeClaim('default', 'other'))?.volumeName === 'pv-b';
      }, { what: 'the new target read', timeoutMs: 5_000, intervalMs: 10 });
      assert.equal(view.signalsEveryChange(), true, 'the new target is watched');
      const before = events;
      writeFileSync(join(targets, 'b.yaml'), PVC('other', 'pv-c'));
      await waitFor(() => Promise.resolve(events > before), { what: 'an edit of the new target signalled', timeoutMs: 5_000, intervalMs: 5 });
    } finally {
      view.close();
      rmSync(dir, { recursive: true, force: true });
      rmSync(targets, { recursive: true, force: true });
    }
  });

  it('never claims to signal without watch, nor while a symlinked manifest\'s target cannot be watched', async () => {
    const dir = clusterDir();
    const plain = new ClusterDirView({ dir, nodeName: 'node-1' });
    const watching = new ClusterDirView({ dir, nodeName: 'node-1', watch: true });
    try {
      await plain.listPods();
      assert.equal(plain.signalsEveryChange(), false);
      symlinkSync(join(dir, 'no-such-target.yaml'), join(dir, 'manifests', 'dangling.yaml'));
      await watching.listPods().catch(() => undefined); // the dangling link is a problem of its own
      assert.equal(watching.signalsEveryChange(), false);
    } finally {
      plain.close();
      watching.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
