/**
 * The removal paths nodevol has, each as a race case: a tree under a root dir, a canary tree
 * outside it with the same names, the pairs of paths a racer swaps (a directory of the tree and a
 * symlink to the canary's twin), and the removal itself, made with the adapters each program
 * ships with (the agent's, recover's and the mock driver's file systems). Not named *.test.ts.
 */
import { existsSync, lstatSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';

import { NodeMounter } from '../../../src/adapters/node/nodeMounter.js';
import { GrpcCsiClient } from '../../../src/adapters/grpc/client.js';
import { agentFileSystem } from '../../../src/cli/agentCommand.js';
import { recoverFileSystem } from '../../../src/cli/recoverCommand.js';
import { FeatureGate } from '../../../src/features/features.js';
import { OrphanedPodDirsCleaner } from '../../../src/kubelet/orphanedPodDirs.js';
import { KubeletLayout } from '../../../src/layout/layout.js';
import { startMockDriver, type MockDriver } from '../../../src/mockdriver/mockDriver.js';
import { mockBackingPaths } from '../../../src/mockdriver/volumes.js';
import type { CsiNodeClient } from '../../../src/ports/csi.js';
import type { FileSystem } from '../../../src/ports/fs.js';
import { discardLogger } from '../../../src/ports/logger.js';
import { unreachableCluster, type ClusterView } from '../../../src/ports/cluster.js';
import { CsiAttacher } from '../../../src/volume/csi/csiAttacher.js';
import { cleanupOrphanDeviceFiles } from '../../../src/volume/csi/csiBlock.js';
import { removeMountDir } from '../../../src/volume/csi/csiUtil.js';
import { unmapBlockVolume } from '../../../src/volume/util/blockMapping.js';
import type { VolumeHost } from '../../../src/volume/volumeHost.js';
import { FakeClock } from '../fakeClock.js';

/** One run's directories: `root` is a real path; `canary` and `swap` lie outside it. */
export interface RaceDirs {
  readonly base: string;
  readonly root: string;
  readonly canary: string;
  /** Where the symlinks to the canary wait to be swapped in. */
  readonly swap: string;
}

export interface RaceCase {
  readonly name: string;
  readonly what: string;
  /** Lays out the tree and the canary; returns the pairs to swap (tree dir, symlink to its canary twin). */
  setup(d: RaceDirs): Promise<RaceRun>;
}

export interface RaceRun {
  readonly pairs: readonly (readonly [string, string])[];
  /** One removal attempt; failures are expected under the race and only counted. */
  remove(): Promise<void>;
  /** After the racers stopped: a problem with what is left under the root, or undefined. */
  settle?(): Promise<string | undefined>;
  close?(): Promise<void>;
}

const POD = '7c3e1e0a-6f2b-4d7e-9a51-3b4f0c2d8e11';
const DRIVER = 'race.csi.nodevol.io';
const HANDLE = 'vol-race-1';

/** A directory `dir` and its canary twin `canary/<name>`, with the symlink `swap/<name>` to the twin. */
function twin(d: RaceDirs, dir: string, name: string, fill: (dir: string, side: 'tree' | 'canary') => void): readonly [string, string] {
  mkdirSync(dir, { recursive: true });
  fill(dir, 'tree');
  const canaryDir = path.join(d.canary, name);
  mkdirSync(canaryDir, { recursive: true });
  fill(canaryDir, 'canary');
  const link = path.join(d.swap, name);
  symlinkSync(canaryDir, link);
  return [dir, link];
}

function files(n: number): (dir: string, side: string) => void {
  return (dir, side) => {
    for (let i = 0; i < n; i++) writeFileSync(path.join(dir, `f${String(i).padStart(4, '0')}`), `${side} ${i}\n`);
  };
}

function emptyDirs(width: number, depth: number): (dir: string) => void {
  return (dir) => {
    for (let i = 0; i < width; i++) {
      let p = path.join(dir, `d${i}`);
      for (let j = 0; j < depth; j++) p = path.join(p, `e${j}`);
      mkdirSync(p, { recursive: true });
    }
  };
}

const noPods: ClusterView = { ...unreachableCluster, listPods: () => Promise.resolve([]) };

/** The orphaned pod dir sweep as the agent runs it: its file system, the real mount table. */
function agentSweep(d: RaceDirs): OrphanedPodDirsCleaner {
  const fs = agentFileSystem(d.root, path.join(d.base, 'cluster'));
  return new OrphanedPodDirsCleaner({
    fs,
    layout: new KubeletLayout(d.root),
    realRootDir: d.root,
    mounter: new NodeMounter({ fs, logger: discardLogger }),
    cluster: noPods,
    logger: discardLogger,
    sourcesReady: () => true,
    knownPodUIDs: () => [],
    podsWithVolumesInActualState: () => new Set(),
  });
}

/** A VolumeHost over the agent's file system and the real mount table, with one fake driver. */
function agentHost(d: RaceDirs, fs: FileSystem = agentFileSystem(d.root, path.join(d.base, 'cluster'))): VolumeHost {
  const client: CsiNodeClient = {
    nodeGetCapabilities: () => Promise.resolve(['STAGE_UNSTAGE_VOLUME']),
    nodeStageVolume: () => Promise.reject(new Error('not used')),
    nodePublishVolume: () => Promise.reject(new Error('not used')),
    nodeUnstageVolume: () => Promise.resolve(),
    nodeUnpublishVolume: () => Promise.resolve(),
  };
  return {
    layout: new KubeletLayout(d.root),
    realRootDir: d.root,
    fs,
    features: FeatureGate.of({}),
    logger: discardLogger,
    clock: new FakeClock(),
    mounter: new NodeMounter({ fs, logger: discardLogger }),
    csiDrivers: { client: (n) => (n === DRIVER ? client : undefined) },
    cluster: unreachableCluster,
    nodeName: 'race-node',
  };
}

function volumeData(extra: Record<string, string>): string {
  return JSON.stringify({ driverName: DRIVER, volumeHandle: HANDLE, specVolID: 'pv-race', nodeName: 'race-node', volumeLifecycleMode: 'Persistent', attachmentID: 'a', ...extra });
}

export const RACE_CASES: readonly RaceCase[] = [
  {
    name: 'sweep-files',
    what: 'the orphaned pod dir sweep unlinking 1,000 files of containers/app while it is swapped with a symlink to an outside dir of the same names',
    setup(d) {
      return Promise.resolve(sweepRun(d, {}, (podDir) => [twin(d, path.join(podDir, 'containers', 'app'), 'app', files(1000))]));
    },
  },
  {
    name: 'sweep-descend',
    what: 'the sweep descending containers/app and a nested volumes/kubernetes.io~empty-dir/cache/sub of empty dirs while each flips with a symlink to outside empty dirs',
    setup(d) {
      return Promise.resolve(
        sweepRun(d, { symlinkMayStayUnder: 'volumes' }, (podDir) => [
          twin(d, path.join(podDir, 'containers', 'app'), 'app', emptyDirs(40, 3)),
          twin(d, path.join(podDir, 'volumes', 'kubernetes.io~empty-dir', 'cache', 'sub'), 'sub', emptyDirs(40, 3)),
        ]),
      );
    },
  },
  {
    name: 'pod-volume-dir',
    what: "removeMountDir of a CSI pod volume (TearDown's last step: rmdir mount, unlink vol_data.json, rmdir the dir) while the volume dir flips with a symlink",
    setup(d) {
      const host = agentHost(d);
      const volDir = host.layout.csiPodVolumeDir(POD, 'pv-race');
      const pair = twin(d, volDir, 'pv-race', (dir, side) => {
        mkdirSync(path.join(dir, 'mount'));
        writeFileSync(path.join(dir, 'vol_data.json'), volumeData({ side }));
      });
      return Promise.resolve({ pairs: [pair], remove: () => removeMountDir(host, path.join(volDir, 'mount')) });
    },
  },
  {
    name: 'staging-dir',
    what: "UnmountDevice's removal of globalmount, the global vol_data.json and the volume dir (after NodeUnstageVolume) while the volume dir flips with a symlink",
    setup(d) {
      const host = agentHost(d);
      const volDir = host.layout.csiVolumeDir(DRIVER, HANDLE);
      const pair = twin(d, volDir, 'global', (dir) => {
        mkdirSync(path.join(dir, 'globalmount'));
        writeFileSync(path.join(dir, 'vol_data.json'), volumeData({}));
      });
      const attacher = new CsiAttacher(host);
      return Promise.resolve({ pairs: [pair], remove: () => attacher.unmountDevice(path.join(volDir, 'globalmount')) });
    },
  },
  {
    name: 'block-files',
    what: 'UnmapBlockVolume and cleanupOrphanDeviceFiles of a raw block volume (pod link, dev/<pod>, publish/, staging/, the volume dir) while volumeDevices/<spec> flips with a symlink',
    setup(d) {
      const host = agentHost(d);
      const spec = 'pv-block';
      const layout = host.layout;
      mkdirSync(layout.csiBlockPublishDir(spec), { recursive: true });
      mkdirSync(layout.csiBlockStagingPath(spec), { recursive: true });
      const linkDir = path.join(d.root, 'pods', POD, 'volumeDevices', 'kubernetes.io~csi');
      mkdirSync(linkDir, { recursive: true });
      symlinkSync('/dev/null', path.join(linkDir, 'pv-block'));
      const pair = twin(d, layout.csiBlockVolumeDir(spec), 'block', (dir, side) => {
        mkdirSync(path.join(dir, 'data'));
        writeFileSync(path.join(dir, 'data', 'vol_data.json'), volumeData({ side }));
        mkdirSync(path.join(dir, 'dev'));
        writeFileSync(path.join(dir, 'dev', POD), '');
      });
      return Promise.resolve({
        pairs: [pair],
        async remove() {
          await unmapBlockVolume(host, layout.csiGlobalMapPath(spec), { dir: linkDir, name: 'pv-block' }, POD);
          await cleanupOrphanDeviceFiles(host, spec);
        },
      });
    },
  },
  {
    name: 'recover-removal',
    what: "recover's removeMountDir of a global mount (its file system, beneath --root-dir) while the volume dir flips with a symlink",
    setup(d) {
      const host = agentHost(d, recoverFileSystem(d.root));
      const volDir = host.layout.csiVolumeDir(DRIVER, HANDLE);
      const pair = twin(d, volDir, 'global', (dir, side) => {
        mkdirSync(path.join(dir, 'globalmount'));
        writeFileSync(path.join(dir, 'vol_data.json'), volumeData({ side }));
      });
      return Promise.resolve({ pairs: [pair], remove: () => removeMountDir(host, path.join(volDir, 'globalmount')) });
    },
  },
  {
    name: 'mock-driver-delete',
    what: "the mock driver's DeleteVolume removing a volume's backing tree (200 files) under its state dir while that tree flips with a symlink",
    async setup(d) {
      const stateDir = path.join(d.base, 'state');
      const endpoint = `unix://${path.join(d.base, 'csi.sock')}`;
      const driver: MockDriver = await startMockDriver({ endpoint, stateDir, nodeId: 'race-node', driverName: DRIVER, allowedRoots: [d.root] });
      const client = new GrpcCsiClient(endpoint);
      const created = await client.controller.createVolume({ name: 'race', volumeCapabilities: [{ mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } }] });
      const id = created.volume?.volumeId ?? '';
      const pair = twin(d, mockBackingPaths(stateDir, id).dir, 'backing', files(200));
      return {
        pairs: [pair],
        async remove() {
          await client.controller.deleteVolume({ volumeId: id });
        },
        async close() {
          client.close();
          await driver.stop();
        },
      };
    },
  },
  {
    name: 'adapter-changes',
    what: 'every kind of change the agent file system makes (unlink, rmdir, writeFile, rename, mkdir -p, symlink) below a directory that flips with a symlink',
    setup(d) {
      const fs = agentFileSystem(d.root, path.join(d.base, 'cluster'));
      const dir = path.join(d.root, 'plugins', 'kubernetes.io', 'csi', DRIVER);
      const pair = twin(d, dir, 'plugin', (p, side) => {
        files(50)(p, side);
        emptyDirs(20, 1)(p);
        writeFileSync(path.join(p, 'x'), side);
      });
      let i = 0;
      return Promise.resolve({
        pairs: [pair],
        async remove() {
          const n = i++;
          const attempts: Promise<unknown>[] = [
            fs.unlink(path.join(dir, `f${String(n % 50).padStart(4, '0')}`)),
            fs.rmdir(path.join(dir, `d${n % 20}`, 'e0')),
            fs.writeFile(path.join(dir, 'f0001'), new TextEncoder().encode('overwritten')),
            fs.writeFile(path.join(dir, `new${n}`), new TextEncoder().encode('new')),
            fs.rename(path.join(dir, 'x'), path.join(dir, 'y')),
            fs.rename(path.join(dir, 'y'), path.join(dir, 'x')),
            fs.mkdir(path.join(dir, `made${n}`, 'below'), { recursive: true, mode: 0o750 }),
            fs.symlink('/etc', path.join(dir, `link${n}`)),
          ];
          const results = await Promise.allSettled(attempts);
          const failed = results.find((r) => r.status === 'rejected');
          if (failed !== undefined) throw failed.reason;
        },
      });
    },
  },
];

/**
 * `symlinkMayStayUnder: 'volumes'`: the racer may leave its symlink inside `volumes/`, which
 * kubelet's directories-only removal of `volumes/` refuses ("not a directory"): the pod dir is then
 * kept, as kubelet keeps it, and only that reason is accepted.
 */
function sweepRun(d: RaceDirs, o: { readonly symlinkMayStayUnder?: 'volumes' }, layoutTree: (podDir: string) => (readonly [string, string])[]): RaceRun {
  const cleaner = agentSweep(d);
  const podDir = path.join(d.root, 'pods', POD);
  const pairs = layoutTree(podDir);
  return {
    pairs,
    async remove() {
      await cleaner.cleanupOrphanedPodDirs();
    },
    async settle() {
      const result = await cleaner.cleanupOrphanedPodDirs();
      if (!existsSync(podDir)) return undefined;
      const volumes = path.join(podDir, 'volumes');
      const kept = result.kept.map((k) => k.reason);
      if (o.symlinkMayStayUnder === 'volumes' && kept.length === 1 && kept[0]?.startsWith(`cannot delete ${volumes}/`) === true && kept[0].endsWith(': not a directory')) {
        const left = kept[0].slice('cannot delete '.length, -': not a directory'.length);
        if (lstatSync(left).isSymbolicLink()) return undefined;
      }
      return `the pod dir is still there once the race is over: ${JSON.stringify(result.kept)}`;
    },
  };
}
