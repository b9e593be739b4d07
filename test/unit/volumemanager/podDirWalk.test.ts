// Reconstruction's walk of <root>/pods (getVolumesFromPodDir) reads the pod directories
// concurrently and still reports every candidate and problem in name order, as a walk one
// directory at a time: the same answer, with several readdirs in flight.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import type { DirEntry, FileSystem } from '../../../src/ports/fs.js';
import { discardLogger } from '../../../src/ports/logger.js';
import { KubeletLayout } from '../../../src/layout/layout.js';
import { mapConcurrently } from '../../../src/ports/concurrency.js';
import { getVolumesFromPodDir } from '../../../src/volumemanager/reconciler/podVolumes.js';

const ROOT = '/var/lib/kubelet';

/** A MemFs whose readdirs answer after a turn of the event loop, counting how many are in flight. */
function slowReaddirs(fs: MemFs): { fs: FileSystem; maxInFlight: () => number } {
  let inFlight = 0;
  let max = 0;
  const wrapped = new Proxy(fs, {
    get(target, prop, receiver): unknown {
      if (prop === 'readdir') {
        return async (p: string): Promise<DirEntry[]> => {
          inFlight++;
          max = Math.max(max, inFlight);
          try {
            await new Promise((resolve) => setImmediate(resolve));
            return await target.readdir(p);
          } finally {
            inFlight--;
          }
        };
      }
      const v: unknown = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as FileSystem;
  return { fs: wrapped, maxInFlight: () => max };
}

describe('getVolumesFromPodDir', () => {
  it('reads pod directories concurrently and reports candidates and problems in name order', async () => {
    const mem = MemFs.create();
    const mk = (p: string): Promise<void> => mem.mkdir(p, { recursive: true, mode: 0o750 });
    const uids = Array.from({ length: 40 }, (_, i) => `pod-${String(39 - i).padStart(2, '0')}`);
    for (const uid of uids) {
      await mk(`${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/pv-b`);
      await mk(`${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/pv-a`);
    }
    // A pod whose volumes dir is a file: a problem, in its place in the order.
    await mk(`${ROOT}/pods/pod-05x`);
    await mem.writeFile(`${ROOT}/pods/pod-05x/volumes`, new Uint8Array());
    const { fs, maxInFlight } = slowReaddirs(mem);
    const walk = await getVolumesFromPodDir(fs, new KubeletLayout(ROOT), discardLogger);

    const sorted = [...uids].sort();
    assert.deepEqual(
      walk.volumes.map((v) => `${v.podName}/${v.volumeSpecName}`),
      sorted.flatMap((uid) => [`${uid}/pv-a`, `${uid}/pv-b`]),
    );
    assert.ok(walk.volumes.every((v) => v.pluginName === 'kubernetes.io/csi' && v.volumeMode === 'Filesystem'));
    assert.deepEqual(
      walk.problems.map((p) => p.path),
      [`${ROOT}/pods/pod-05x/volumes`],
    );
    assert.ok(maxInFlight() > 1, `readdirs in flight at once: ${maxInFlight()}`);
  });
});

describe('mapConcurrently', () => {
  it('keeps the order of the items, never runs more than the limit at once, and rejects with the first error', async () => {
    let inFlight = 0;
    let max = 0;
    const out = await mapConcurrently([5, 1, 4, 2, 3, 0, 6], 3, async (x, i) => {
      inFlight++;
      max = Math.max(max, inFlight);
      for (let k = 0; k < x; k++) await new Promise((resolve) => setImmediate(resolve));
      inFlight--;
      return `${i}:${x}`;
    });
    assert.deepEqual(out, ['0:5', '1:1', '2:4', '3:2', '4:3', '5:0', '6:6']);
    assert.equal(max, 3);
    await assert.rejects(
      mapConcurrently([1, 2], 2, (x) => (x === 2 ? Promise.reject(new Error('boom')) : Promise.resolve(x))),
      /boom/,
    );
  });
});
