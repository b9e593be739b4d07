// Reconstruction's walk of <root>/pods (getVolumesFromPodDir) reads the pod directories
// concurrently and still reports every candidate and problem in name order, as a walk one
// directory at a time: the same answer, with several readdirs in flight. Then the walk outcome
// by outcome: what it lists and in which order, what it refuses to follow (and the problem and
// log line each refusal gives), which candidates it marks as reached through verified real
// directories, and what it logs at each verbosity.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import type { DirEntry, FileSystem } from '../../../src/ports/fs.js';
import { discardLogger, type Logger } from '../../../src/ports/logger.js';
import { KubeletLayout } from '../../../src/layout/layout.js';
import { mapConcurrently } from '../../../src/ports/concurrency.js';
import { getVolumesFromPodDir, type PodDirWalk } from '../../../src/volumemanager/reconciler/podVolumes.js';
import { RecordingLogger, VerbosityRecorder } from '../../support/hosts.js';

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

/** A FileSystem over `fs` whose readdirs answer in reverse name order (or as `listings` says, by path). */
function listingFs(fs: MemFs, listings: Readonly<Record<string, DirEntry[]>> = {}): FileSystem {
  return new Proxy(fs, {
    get(target, prop, receiver): unknown {
      if (prop === 'readdir') {
        return async (p: string): Promise<DirEntry[]> => {
          const given = listings[p];
          if (given !== undefined) return given.map((e) => ({ ...e }));
          return (await target.readdir(p)).sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : 0));
        };
      }
      const v: unknown = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** The recorded lines with an error's text in place of the error. */
function lines(logger: RecordingLogger): { level: number; severity: string; msg: string; values: Record<string, unknown> }[] {
  return logger.lines.map(({ level, severity, msg, values }) => ({ level, severity, msg, values: 'err' in values ? { ...values, err: values['err'] instanceof Error ? values['err'].message : values['err'] } : { ...values } }));
}

const PODS = `${ROOT}/pods`;
const CSI = 'kubernetes.io~csi';

describe('getVolumesFromPodDir: order, refusals and confinement', () => {
  const mkFs = async (dirs: string[]): Promise<MemFs> => {
    const mem = MemFs.create();
    for (const d of dirs) await mem.mkdir(d, { recursive: true, mode: 0o750 });
    return mem;
  };
  const walk = (fs: FileSystem, logger: Logger = discardLogger, realRootDir?: string): Promise<PodDirWalk> => getVolumesFromPodDir(fs, new KubeletLayout(ROOT), logger, realRootDir);

  it('lists pods, plugins and volumes in name order when readdir answers in reverse order', async () => {
    const dirs: string[] = [];
    for (const pod of ['pod-a', 'pod-b', 'pod-c']) {
      for (const pv of ['pv-a', 'pv-b', 'pv-c']) dirs.push(`${PODS}/${pod}/volumes/${CSI}/${pv}`, `${PODS}/${pod}/volumes/example.com~x/${pv}`);
      dirs.push(`${PODS}/${pod}/volumeDevices/${CSI}/blk-a`, `${PODS}/${pod}/volumeDevices/${CSI}/blk-b`);
    }
    const got = await walk(listingFs(await mkFs(dirs)));
    const want = ['pod-a', 'pod-b', 'pod-c'].flatMap((pod) => [
      ...['pv-a', 'pv-b', 'pv-c'].map((pv) => `${PODS}/${pod}/volumes/example.com~x/${pv}`),
      ...['pv-a', 'pv-b', 'pv-c'].map((pv) => `${PODS}/${pod}/volumes/${CSI}/${pv}`),
      `${PODS}/${pod}/volumeDevices/${CSI}/blk-a`,
      `${PODS}/${pod}/volumeDevices/${CSI}/blk-b`,
    ]);
    assert.deepEqual(
      got.volumes.map((v) => v.volumePath),
      want,
    );
    assert.deepEqual(got.problems, []);
  });

  it('keeps the listing order of entries a listing repeats under one name (a broken FUSE file system can)', async () => {
    const pluginDir = `${PODS}/pod-a/volumes/${CSI}`;
    const mem = await mkFs([pluginDir]);
    const fs = listingFs(mem, {
      [pluginDir]: [
        { name: 'pv', type: 'directory' },
        { name: 'pv', type: 'file' },
        { name: 'pv', type: 'symlink' },
      ],
    });
    const got = await walk(fs);
    assert.deepEqual(
      got.volumes.map((v) => `${v.volumeSpecName}:${v.entryType}`),
      ['pv:directory', 'pv:file', 'pv:symlink'],
    );
  });

  it('marks only directory candidates reached from a pods dir inside the root dir as parentsVerified, and none without a real root dir', async () => {
    const pluginDir = `${PODS}/pod-a/volumes/${CSI}`;
    const mem = await mkFs([`${pluginDir}/pv-dir`, `${ROOT}/elsewhere`]);
    await mem.writeFile(`${pluginDir}/pv-file`, new Uint8Array());
    await mem.symlink(`${ROOT}/elsewhere`, `${pluginDir}/pv-link`);
    const confined = await walk(mem, discardLogger, ROOT);
    assert.deepEqual(
      confined.volumes.map((v) => [v.volumeSpecName, v.entryType, v.parentsVerified]),
      [
        ['pv-dir', 'directory', true],
        ['pv-file', 'file', false],
        ['pv-link', 'symlink', false],
      ],
    );
    const unconfined = await walk(mem);
    assert.deepEqual(
      unconfined.volumes.map((v) => [v.volumeSpecName, v.entryType, v.parentsVerified]),
      [
        ['pv-dir', 'directory', false],
        ['pv-file', 'file', false],
        ['pv-link', 'symlink', false],
      ],
    );
  });

  it('refuses a pods dir that resolves outside the root dir: no candidate, one problem naming it, one error line', async () => {
    const mem = await mkFs([`/elsewhere/pods/pod-x/volumes/${CSI}/pv-x`, ROOT]);
    await mem.symlink('/elsewhere/pods', PODS);
    const logger = new RecordingLogger();
    const got = await walk(mem, logger, ROOT);
    const error = `${PODS} resolves outside the root dir ${ROOT}; not followed`;
    assert.deepEqual(got, { volumes: [], problems: [{ path: PODS, error }] });
    assert.deepEqual(lines(logger), [{ level: 0, severity: 'E', msg: 'Could not read directory', values: { path: PODS, err: error } }]);
  });

  it('walks only the directories of pods/ and of volumes/: a file or a symlink there is neither read nor a problem', async () => {
    const mem = await mkFs([`${PODS}/pod-a/volumes/${CSI}/pv-a`, `${ROOT}/other-pod/volumes/${CSI}/pv-other`]);
    await mem.writeFile(`${PODS}/not-a-pod`, new Uint8Array());
    await mem.symlink(`${ROOT}/other-pod`, `${PODS}/pod-link`);
    await mem.writeFile(`${PODS}/pod-a/volumes/stray-file`, new Uint8Array());
    const logger = new RecordingLogger();
    const got = await walk(mem, logger);
    assert.deepEqual(
      got.volumes.map((v) => v.volumePath),
      [`${PODS}/pod-a/volumes/${CSI}/pv-a`],
    );
    assert.deepEqual(got.problems, []);
    assert.deepEqual(
      lines(logger).filter((l) => l.severity === 'E'),
      [],
    );
  });

  it('refuses a symlinked plugin dir: a problem and an error line naming it, none of its volumes a candidate', async () => {
    const mem = await mkFs([`${PODS}/pod-a/volumes/${CSI}/pv-a`, `${ROOT}/plugin-elsewhere/pv-hidden`]);
    await mem.symlink(`${ROOT}/plugin-elsewhere`, `${PODS}/pod-a/volumes/example.com~linked`);
    const logger = new RecordingLogger();
    const got = await walk(mem, logger, ROOT);
    const pluginDir = `${PODS}/pod-a/volumes/example.com~linked`;
    const error = `${pluginDir} is a symlink; not followed`;
    assert.deepEqual(
      got.volumes.map((v) => v.volumePath),
      [`${PODS}/pod-a/volumes/${CSI}/pv-a`],
    );
    assert.deepEqual(got.problems, [{ path: pluginDir, error }]);
    assert.deepEqual(
      lines(logger).filter((l) => l.severity === 'E'),
      [{ level: 0, severity: 'E', msg: 'Could not read volume plugin directory', values: { volumePluginPath: pluginDir, err: error } }],
    );
  });

  it('refuses a volumes or volumeDevices dir that is not a directory: a problem saying what it is, and a V(4) line for a symlink only', async () => {
    const mem = await mkFs([`${PODS}/pod-f`, `${PODS}/pod-s`, `${ROOT}/devices-elsewhere/${CSI}/blk-hidden`]);
    await mem.writeFile(`${PODS}/pod-f/volumes`, new Uint8Array());
    await mem.symlink(`${ROOT}/devices-elsewhere`, `${PODS}/pod-s/volumeDevices`);
    const logger = new VerbosityRecorder(3);
    const got = await walk(mem, logger);
    assert.deepEqual(got, {
      volumes: [],
      problems: [
        { path: `${PODS}/pod-f/volumes`, error: `${PODS}/pod-f/volumes is a file, not a directory; not followed` },
        { path: `${PODS}/pod-s/volumeDevices`, error: `${PODS}/pod-s/volumeDevices is a symlink, not a directory; not followed` },
      ],
    });
    assert.deepEqual(lines(logger), [{ level: 4, severity: 'I', msg: 'Not following a symlinked volumes directory', values: { path: `${PODS}/pod-s/volumeDevices` } }]);
  });

  it('logs each candidate at V(4) and V(5) only when that verbosity is on', async () => {
    const mem = await mkFs([`${PODS}/pod-a/volumes/${CSI}/pv-a`]);
    const volumePath = `${PODS}/pod-a/volumes/${CSI}/pv-a`;
    const atV4 = { level: 4, severity: 'I', msg: 'Get volume from pod directory', values: { path: PODS, volume: volumePath } };
    const atV5 = { level: 5, severity: 'I', msg: 'Volume path from volume plugin directory', values: { podName: 'pod-a', volumePath } };
    const logged = async (verbosity: number): Promise<unknown[]> => {
      const logger = new VerbosityRecorder(verbosity);
      assert.equal((await walk(mem, logger)).volumes.length, 1);
      return lines(logger);
    };
    assert.deepEqual(await logged(3), []);
    assert.deepEqual(await logged(4), [atV4]);
    assert.deepEqual(await logged(5), [atV5, atV4]);
  });
});
