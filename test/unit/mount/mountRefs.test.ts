import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { FsError } from '../../../src/ports/fs.js';
import { MountInfoParseError } from '../../../src/mount/mountInfo.js';
import {
  getMountRefs,
  getReliableMountRefs,
  hasMountRefs,
  isCorruptedMount,
  MountTableSnapshot,
  readMountTableSnapshot,
} from '../../../src/mount/mountRefs.js';
import { InconsistentReadError } from '../../../src/mount/mountTable.js';
import { MemFs } from '../../../src/adapters/memory/memFs.js';
import { FakeClock } from '../../support/fakeClock.js';
import { FaultyFs } from '../../support/faultyFs.js';

const K = '/var/lib/kubelet';
const GLOBAL = `${K}/plugins/kubernetes.io/csi/ebs.csi.example.com/4e29aa01861d/globalmount`;
const POD = `${K}/pods/6f1c0000-4e5f/volumes/kubernetes.io~csi/pvc-3f2a9e0f/mount`;
const POD2 = `${K}/pods/7a2d0000-1b2c/volumes/kubernetes.io~csi/pvc-3f2a9e0f/mount`;
const SUBPATH = `${K}/pods/6f1c0000-4e5f/volume-subpaths/pvc-3f2a9e0f/app/0`;

const ROOT_LINE = '1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw';
const KUBELET_LINE = `29 1 8:1 ${K} ${K} rw,relatime shared:2 - ext4 /dev/sda1 rw`;
const GLOBAL_LINE = `612 29 259:3 / ${GLOBAL} rw,relatime shared:301 - ext4 /dev/nvme1n1 rw`;
const POD_LINE = `640 29 259:3 / ${POD} rw,relatime shared:301 - ext4 /dev/nvme1n1 rw`;

function table(...lines: string[]): MountTableSnapshot {
  return MountTableSnapshot.parse(`${lines.join('\n')}\n`);
}

const EXAMPLE = table(ROOT_LINE, KUBELET_LINE, GLOBAL_LINE, POD_LINE);

describe('MountTableSnapshot.searchMountPoints', () => {
  const cases: { name: string; snapshot: MountTableSnapshot; path: string; want: string[] }[] = [
    { name: 'the global mount is referenced by the pod mount of the same device and root', snapshot: EXAMPLE, path: GLOBAL, want: [POD] },
    { name: 'the pod mount is referenced by the global mount', snapshot: EXAMPLE, path: POD, want: [GLOBAL] },
    {
      name: 'every other mount of the same device and root is returned, in file order',
      snapshot: table(ROOT_LINE, KUBELET_LINE, GLOBAL_LINE, POD_LINE, `641 29 259:3 / ${POD2} rw - ext4 /dev/nvme1n1 rw`),
      path: GLOBAL,
      want: [POD, POD2],
    },
    {
      name: 'a bind mount of a subdirectory (different root) is not a reference',
      snapshot: table(ROOT_LINE, KUBELET_LINE, GLOBAL_LINE, `650 29 259:3 /app ${SUBPATH} rw - ext4 /dev/nvme1n1 rw`),
      path: GLOBAL,
      want: [],
    },
    {
      name: 'a path below a mount point is matched with the root extended by the rest of the path',
      snapshot: table(ROOT_LINE, KUBELET_LINE, GLOBAL_LINE, `650 29 259:3 /app ${SUBPATH} rw - ext4 /dev/nvme1n1 rw`),
      path: `${GLOBAL}/app`,
      want: [SUBPATH],
    },
    {
      name: 'the same root on another device is not a reference',
      snapshot: table(ROOT_LINE, KUBELET_LINE, GLOBAL_LINE, `640 29 259:4 / ${POD} rw - ext4 /dev/nvme2n1 rw`),
      path: GLOBAL,
      want: [],
    },
    {
      name: 'an over-mount wins: the last entry for a mount point decides the device',
      snapshot: table(
        ROOT_LINE, KUBELET_LINE, GLOBAL_LINE, POD_LINE,
        `700 612 259:9 / ${GLOBAL} rw - ext4 /dev/nvme9n1 rw`,
        `701 29 259:9 / /mnt/other rw - ext4 /dev/nvme9n1 rw`,
      ),
      path: GLOBAL,
      want: ['/mnt/other'],
    },
    {
      name: 'a plain directory refers to the other mounts of the filesystem subtree containing it',
      snapshot: table(ROOT_LINE, KUBELET_LINE, `800 1 8:1 ${K}/data /mnt/bind rw - ext4 /dev/sda1 rw`),
      path: `${K}/data`,
      want: ['/mnt/bind'],
    },
    {
      name: 'a path containing a space never matches the kernel-escaped mount point',
      snapshot: table(ROOT_LINE, KUBELET_LINE, `900 29 259:5 / ${K}/my\\040vol rw - ext4 /dev/x rw`, `901 29 259:5 / /mnt/copy rw - ext4 /dev/x rw`),
      path: `${K}/my vol`,
      want: [],
    },
    {
      name: 'the escaped spelling of a path with a space does match (verbatim comparison)',
      snapshot: table(ROOT_LINE, KUBELET_LINE, `900 29 259:5 / ${K}/my\\040vol rw - ext4 /dev/x rw`, `901 29 259:5 / /mnt/copy rw - ext4 /dev/x rw`),
      path: `${K}/my\\040vol`,
      want: ['/mnt/copy'],
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(c.snapshot.searchMountPoints(c.path), c.want));
  }

  it('throws when no entry contains the path', () => {
    const snap = table(KUBELET_LINE, GLOBAL_LINE);
    assert.throws(() => snap.searchMountPoints('/etc/hosts'), /^Error: failed to get root path and major:minor for \/etc\/hosts$/);
  });
});

describe('MountTableSnapshot.findMountFor', () => {
  it('returns the deepest containing mount', () => {
    assert.equal(EXAMPLE.findMountFor(`${GLOBAL}/a/b`)?.id, 612);
    assert.equal(EXAMPLE.findMountFor(`${K}/pods`)?.id, 29);
    assert.equal(EXAMPLE.findMountFor('/etc')?.id, 1);
  });

  it('returns the last entry when a mount point is mounted twice', () => {
    const snap = table(ROOT_LINE, KUBELET_LINE, GLOBAL_LINE, `700 612 259:9 / ${GLOBAL} rw - ext4 /dev/x rw`);
    assert.equal(snap.findMountFor(GLOBAL)?.id, 700);
  });

  it('prefers a later mount of an ancestor over an earlier mount of the path itself', () => {
    const snap = table(ROOT_LINE, GLOBAL_LINE, `29 1 8:7 ${K} ${K} rw - ext4 /dev/sdz rw`);
    assert.equal(snap.findMountFor(GLOBAL)?.id, 29);
  });

  it('does not take a sibling with a common prefix for an ancestor', () => {
    const snap = table(ROOT_LINE, `50 1 8:2 / /data rw - ext4 /dev/sdb rw`);
    assert.equal(snap.findMountFor('/database/x')?.id, 1);
  });

  it('ignores a trailing slash and dot segments in the query', () => {
    assert.equal(EXAMPLE.findMountFor(`${GLOBAL}/`)?.id, 612);
    assert.equal(EXAMPLE.findMountFor(`${GLOBAL}/./x/..`)?.id, 612);
  });

  it('returns undefined when nothing contains the path', () => {
    assert.equal(table(GLOBAL_LINE).findMountFor('/etc'), undefined);
  });
});

describe('MountTableSnapshot.isMountPoint and mountsUnder', () => {
  const snap = table(
    ROOT_LINE, KUBELET_LINE, GLOBAL_LINE, POD_LINE,
    `900 29 259:5 / ${K}/my\\040vol rw - ext4 /dev/x rw`,
    `901 29 259:6 / /mnt/gone\\040(deleted) rw - nfs srv:/e rw`,
  );
  const cases: [string, boolean][] = [
    [GLOBAL, true],
    [`${GLOBAL}/`, true],
    [POD, true],
    [`${K}/my vol`, true],
    [`${K}/my\\040vol`, false],
    ['/mnt/gone', true],
    [`${K}/pods`, false],
    ['/', true],
  ];
  for (const [path, want] of cases) {
    it(`isMountPoint(${JSON.stringify(path)}) is ${want}`, () => assert.equal(snap.isMountPoint(path), want));
  }

  it('mountsUnder lists the mount points at or below a directory, decoded for display', () => {
    assert.deepEqual(snap.mountsUnder(K), [K, GLOBAL, POD, `${K}/my vol`]);
    assert.deepEqual(snap.mountsUnder(`${K}/pods`), [POD]);
    assert.deepEqual(snap.mountsUnder(`${K}/pod`), []);
    assert.equal(snap.mountsUnder('/').length, 6);
  });

  it('keeps the problems of a non-strict parse', () => {
    const s = MountTableSnapshot.parse(`${ROOT_LINE}\nbroken\n`, { strict: false });
    assert.equal(s.entries.length, 1);
    assert.deepEqual(s.problems.map((p) => p.line), [2]);
  });
});

/** MemFs behind FaultyFs: real path walking and symlinks, per-path failures and a call log. */
class PathFs extends FaultyFs {
  private constructor(readonly mem: MemFs) {
    super(mem);
  }
  static async of(dirs: readonly string[] = [], links: readonly (readonly [string, string])[] = []): Promise<PathFs> {
    const mem = MemFs.create();
    for (const d of dirs) await mem.mkdir(d, { recursive: true, mode: 0o755 });
    for (const [link, target] of links) {
      await mem.mkdir(link.slice(0, link.lastIndexOf('/')) || '/', { recursive: true, mode: 0o755 });
      await mem.symlink(target, link);
    }
    return new PathFs(mem);
  }
  callCount(method: string): number {
    return this.calls.filter((c) => c.startsWith(`${method} `)).length;
  }
}

function fsWithExamplePaths(links: readonly (readonly [string, string])[] = []): Promise<PathFs> {
  return PathFs.of([GLOBAL, POD, POD2], links);
}

describe('getMountRefs', () => {
  it('returns the other mounts of an existing mount point', async () => {
    assert.deepEqual(await getMountRefs(await fsWithExamplePaths(), EXAMPLE, GLOBAL), [POD]);
  });

  it('returns no refs for a path that does not exist', async () => {
    assert.deepEqual(await getMountRefs(await PathFs.of(), EXAMPLE, GLOBAL), []);
  });

  const corrupted = ['EIO', 'EACCES', 'ENOTCONN', 'ESTALE', 'EHOSTDOWN', 'EWOULDBLOCK', 'EAGAIN', 'ENODEV'];
  for (const code of corrupted) {
    it(`treats ${code} from stat as a corrupted mount with no refs`, async () => {
      const fs = (await fsWithExamplePaths()).failOn('stat', GLOBAL, code);
      assert.deepEqual(await getMountRefs(fs, EXAMPLE, GLOBAL), []);
      assert.equal(fs.callCount('realpath'), 0);
    });
  }

  it('returns no refs for any other stat failure too, as mount-utils PathExists reports it as absent', async () => {
    const fs = (await fsWithExamplePaths()).failOn('stat', GLOBAL, 'ENOTDIR');
    assert.deepEqual(await getMountRefs(fs, EXAMPLE, GLOBAL), []);
  });

  it('rethrows a stat failure that carries no errno code', async () => {
    const fs = await fsWithExamplePaths();
    fs.stat = () => Promise.reject(new TypeError('bug'));
    await assert.rejects(getMountRefs(fs, EXAMPLE, GLOBAL), TypeError);
  });

  it('rethrows a realpath failure', async () => {
    const fs = (await fsWithExamplePaths()).failOn('realpath', GLOBAL, 'EPERM');
    await assert.rejects(getMountRefs(fs, EXAMPLE, GLOBAL), (err: unknown) => err instanceof FsError && err.code === 'EPERM');
  });

  it('resolves a symlinked path with realpath before searching', async () => {
    const fs = await fsWithExamplePaths([['/srv/link', `${K}/plugins/kubernetes.io/csi/ebs.csi.example.com/4e29aa01861d`]]);
    assert.deepEqual(await getMountRefs(fs, EXAMPLE, '/srv/link/globalmount'), [POD]);
  });

  it('resolves a relative symlink the same way', async () => {
    const fs = await fsWithExamplePaths([[`${K}/g`, 'plugins/kubernetes.io/csi/ebs.csi.example.com/4e29aa01861d/globalmount']]);
    assert.deepEqual(await getMountRefs(fs, EXAMPLE, `${K}/g`), [POD]);
  });

  it('passes the search error through when no entry contains the path', async () => {
    const fs = await PathFs.of(['/etc']);
    await assert.rejects(getMountRefs(fs, table(GLOBAL_LINE), '/etc'), /failed to get root path and major:minor for \/etc/);
  });

  it('never matches a path with a space, even though it is mounted', async () => {
    const snap = table(ROOT_LINE, KUBELET_LINE, `900 29 259:5 / ${K}/my\\040vol rw - ext4 /dev/x rw`, `901 29 259:5 / /mnt/copy rw - ext4 /dev/x rw`);
    const fs = await PathFs.of([`${K}/my vol`]);
    assert.deepEqual(await getMountRefs(fs, snap, `${K}/my vol`), []);
    assert.equal(snap.isMountPoint(`${K}/my vol`), true);
  });
});

describe('isCorruptedMount', () => {
  it('recognises the corrupted-mount codes and nothing else', () => {
    assert.equal(isCorruptedMount(new FsError('ESTALE', '/x', 'stat')), true);
    assert.equal(isCorruptedMount(new FsError('ENOENT', '/x', 'stat')), false);
    assert.equal(isCorruptedMount(new Error('EIO')), false);
  });
});

describe('hasMountRefs', () => {
  const cases: { name: string; mountPath: string; refs: string[]; want: boolean }[] = [
    { name: 'no refs means no references', mountPath: GLOBAL, refs: [], want: false },
    { name: 'a pod bind mount counts as a reference', mountPath: GLOBAL, refs: [POD], want: true },
    {
      name: 'the same plugin directory seen under another root does not count',
      mountPath: GLOBAL,
      refs: [`/rootfs${GLOBAL}`, `/var/lib/kubelet-alt/plugins/kubernetes.io/csi/ebs.csi.example.com/4e29aa01861d/globalmount`],
      want: false,
    },
    { name: 'one pod ref among plugin refs is enough', mountPath: GLOBAL, refs: [`/rootfs${GLOBAL}`, POD], want: true },
    {
      name: 'a ref under a different plugin directory counts',
      mountPath: GLOBAL,
      refs: [`${K}/plugins/kubernetes.io/csi/other.example.com/ffff/globalmount`],
      want: true,
    },
    { name: 'without the plugins marker the whole path must be contained', mountPath: '/mnt/disk', refs: ['/host/mnt/disk'], want: false },
    { name: 'without the plugins marker any other path counts', mountPath: '/mnt/disk', refs: ['/mnt/other'], want: true },
  ];
  for (const c of cases) it(c.name, () => assert.equal(hasMountRefs(c.mountPath, c.refs), c.want));
});

/** Virtual time that each sleep() moves forward by itself. */
function sleepingClock(): FakeClock {
  return new FakeClock({ autoAdvance: true });
}

describe('getReliableMountRefs', () => {
  it('returns at once when the first read is consistent', async () => {
    const clock = sleepingClock();
    let loads = 0;
    const refs = await getReliableMountRefs(await fsWithExamplePaths(), () => {
      loads++;
      return Promise.resolve(EXAMPLE);
    }, clock, GLOBAL);
    assert.deepEqual(refs, [POD]);
    assert.equal(loads, 1);
    assert.equal(clock.sleeps.length, 0);
  });

  it('retries every 10 ms through inconsistent reads until one succeeds', async () => {
    const clock = sleepingClock();
    let loads = 0;
    const refs = await getReliableMountRefs(await fsWithExamplePaths(), () => {
      loads++;
      return loads <= 3 ? Promise.reject(new InconsistentReadError('/proc/self/mountinfo', 10)) : Promise.resolve(EXAMPLE);
    }, clock, GLOBAL);
    assert.deepEqual(refs, [POD]);
    assert.equal(loads, 4);
    assert.equal(clock.sleeps.length, 3);
    assert.equal(clock.nowMs(), 30);
  });

  it('gives up after 60 s of clock time with the last InconsistentReadError', async () => {
    const clock = sleepingClock();
    let loads = 0;
    let last: InconsistentReadError | undefined;
    await assert.rejects(
      getReliableMountRefs(await fsWithExamplePaths(), () => {
        loads++;
        last = new InconsistentReadError('/proc/self/mountinfo', 10);
        return Promise.reject(last);
      }, clock, GLOBAL),
      (err: unknown) => err === last,
    );
    assert.equal(clock.nowMs(), 60_000);
    assert.equal(loads, 6001);
  });

  it('returns any other error at once', async () => {
    const clock = sleepingClock();
    let loads = 0;
    await assert.rejects(
      getReliableMountRefs(await fsWithExamplePaths(), () => {
        loads++;
        return Promise.reject(new MountInfoParseError('/proc/self/mountinfo', 3, 'x', 'wrong number of fields'));
      }, clock, GLOBAL),
      MountInfoParseError,
    );
    assert.equal(loads, 1);
    assert.equal(clock.sleeps.length, 0);
  });

  it('does not read the table for a path that does not exist', async () => {
    let loads = 0;
    const refs = await getReliableMountRefs(await PathFs.of(), () => {
      loads++;
      return Promise.resolve(EXAMPLE);
    }, sleepingClock(), GLOBAL);
    assert.deepEqual(refs, []);
    assert.equal(loads, 0);
  });

  it('works with readMountTableSnapshot as the loader', async () => {
    const source = { name: '/proc/self/mountinfo', kernelRelease: '5.4.0-150-generic', read: () => Promise.resolve(`${ROOT_LINE}\n${KUBELET_LINE}\n${GLOBAL_LINE}\n${POD_LINE}\n`) };
    const refs = await getReliableMountRefs(await fsWithExamplePaths(), () => readMountTableSnapshot(source), sleepingClock(), POD);
    assert.deepEqual(refs, [GLOBAL]);
  });
});

describe('snapshot reuse on a large table', () => {
  it('answers 1,000 lookups on a 10,000-line table from one parse', async () => {
    const volumes = 5000;
    const lines = [ROOT_LINE, KUBELET_LINE];
    const globalOf = (i: number): string => `${K}/plugins/kubernetes.io/csi/d.example.com/h${i}/globalmount`;
    const podOf = (i: number): string => `${K}/pods/uid-${i}/volumes/kubernetes.io~csi/pv-${i}/mount`;
    for (let i = 0; i < volumes; i++) {
      lines.push(`${1000 + 2 * i} 29 259:${i} / ${globalOf(i)} rw,relatime shared:${i} - ext4 /dev/v${i} rw`);
      lines.push(`${1001 + 2 * i} 29 259:${i} / ${podOf(i)} rw,relatime shared:${i} - ext4 /dev/v${i} rw`);
    }
    lines.length = 10_000;
    const text = `${lines.join('\n')}\n`;
    let loads = 0;
    const load = (): Promise<MountTableSnapshot> => {
      loads++;
      return Promise.resolve(MountTableSnapshot.parse(text));
    };
    const picked = Array.from({ length: 1000 }, (_, n) => (n * 4987) % (volumes - 1));
    const fs = await PathFs.of(picked.map(globalOf));

    const snapshot = await load();
    assert.equal(snapshot.entries.length, 10_000);
    for (const i of picked) {
      assert.deepEqual(await getMountRefs(fs, snapshot, globalOf(i)), [podOf(i)]);
    }
    assert.equal(loads, 1);
    assert.equal(fs.callCount('realpath'), 1000);
  });
});
