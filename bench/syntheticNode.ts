/**
 * Bench helper: a synthetic kubelet node on disk (real files under a temporary root dir) and its
 * mount table as mountinfo text. The shape is a parameter: the classic bench node (250 pods x 4
 * CSI filesystem volumes, each bind mounted from its own staged global mount, 100 staged raw
 * block volumes, 10,000 mountinfo lines) and the scale node (100,000 pod volume dirs).
 *
 * Pod volume dirs are written with synchronous calls: the scale node has 100,000 of them, and
 * the fixture's one-await-at-a-time writes would take minutes to build it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path/posix';
import { POD_MOUNT_DIR_NAME } from '../src/layout/layout.js';
import { getAttachmentName, sha256Hex } from '../src/layout/names.js';
import type { NodeFixture } from '../test/support/nodeFixture.js';
import { encodeVolumeData, VOL_DATA_FILE_NAME } from '../src/volume/csi/volumeData.js';

export interface NodeShape {
  readonly pods: number;
  readonly volumesPerPod: number;
  /** Staged filesystem volumes; pod volume n uses global mount n % globalMounts. */
  readonly globalMounts: number;
  /** How many pod volumes (the first ones) are bind mounted from their global mount. */
  readonly mountedPodVolumes: number;
  readonly blockVolumes: number;
  /** Total mountinfo lines, filled up with container mounts. */
  readonly mountLines: number;
}

export const CLASSIC_NODE: NodeShape = { pods: 250, volumesPerPod: 4, globalMounts: 1000, mountedPodVolumes: 1000, blockVolumes: 100, mountLines: 10_000 };
export const SCALE_NODE: NodeShape = { pods: 25_000, volumesPerPod: 4, globalMounts: 1000, mountedPodVolumes: 1000, blockVolumes: 100, mountLines: 10_000 };

export const DRIVER = 'ebs.csi.aws.com';

export interface PodMount {
  /** <pod volume dir>/mount */
  readonly mountPath: string;
  /** The globalmount it is bind mounted from. */
  readonly globalMount: string;
}

export interface SyntheticNode {
  readonly shape: NodeShape;
  readonly podMounts: readonly PodMount[];
  /** volumeDevices/staging/<spec> of each block volume. */
  readonly blockStagingPaths: readonly string[];
  readonly mountInfo: string;
  readonly kubeletLines: number;
  readonly fillerLines: number;
}

function hex(seed: string): string {
  return sha256Hex(seed);
}

function uuid(seed: string): string {
  const h = hex(seed);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** One mount line that is not kubelet's: container rootfs overlays, sandbox shm, bind mounts, projected tmpfs. */
function addFiller(fx: NodeFixture, i: number): void {
  const id = hex(`container-${i}`);
  const dev = `0:${100 + i}`;
  const task = `/run/containerd/io.containerd.runtime.v2.task/k8s.io/${id}`;
  switch (i % 4) {
    case 0:
      fx.mount({ mountPoint: `${task}/rootfs`, root: '/', dev, fsType: 'overlay', source: 'overlay' });
      break;
    case 1:
      fx.mount({ mountPoint: `/run/containerd/io.containerd.grpc.v1.cri/sandboxes/${id}/shm`, root: '/', dev, fsType: 'tmpfs', source: 'shm' });
      break;
    case 2:
      fx.mount({ mountPoint: `${task}/rootfs/etc/hosts`, root: `/var/lib/kubelet/pods/${uuid(`filler-${i}`)}/etc-hosts`, dev: '8:1', fsType: 'ext4', source: '/dev/sda1' });
      break;
    default:
      fx.mount({
        mountPoint: path.join(fx.root, 'pods', uuid(`filler-${i}`), 'volumes/kubernetes.io~projected', `kube-api-access-${id.slice(0, 5)}`),
        root: '/',
        dev,
        fsType: 'tmpfs',
        source: 'tmpfs',
      });
  }
}

/** A pod's CSI filesystem volume dir as SetUp leaves it (mount/ and vol_data.json), written synchronously. */
function writePodVolume(fx: NodeFixture, uid: string, specName: string, handle: string): string {
  const dir = fx.layout.csiPodVolumeDir(uid, specName);
  mkdirSync(path.join(dir, POD_MOUNT_DIR_NAME), { recursive: true, mode: 0o750 });
  const data = {
    attachmentID: getAttachmentName(handle, DRIVER, 'node-1'),
    driverName: DRIVER,
    nodeName: 'node-1',
    specVolID: specName,
    volumeHandle: handle,
    volumeLifecycleMode: 'Persistent',
  };
  writeFileSync(path.join(dir, VOL_DATA_FILE_NAME), encodeVolumeData(data));
  return dir;
}

export async function buildNode(fx: NodeFixture, shape: NodeShape): Promise<SyntheticNode> {
  const podVolumes = shape.pods * shape.volumesPerPod;
  const kubeletLines = shape.globalMounts + Math.min(shape.mountedPodVolumes, podVolumes) + shape.blockVolumes;
  const fillerLines = shape.mountLines - 1 - kubeletLines; // mountInfo() adds the root fs line
  if (fillerLines < 0) throw new Error(`bench setup: ${shape.mountLines} mount lines cannot hold ${kubeletLines} kubelet mounts`);
  const fillerPerPod = Math.floor(fillerLines / shape.pods);
  let filler = 0;

  const globals: { handle: string; specName: string; globalMount: string }[] = [];
  for (let g = 0; g < shape.globalMounts; g++) {
    const handle = `vol-${hex(`handle-${g}`).slice(0, 17)}`;
    const specName = `pvc-${uuid(`pv-${g}`)}`;
    const globalMount = await fx.stage({ driver: DRIVER, handle, specVolID: specName });
    globals.push({ handle, specName, globalMount });
  }
  const podMounts: PodMount[] = [];
  for (let p = 0; p < shape.pods; p++) {
    // Container mounts interleave with kubelet's, as on a real node.
    for (let k = 0; k < fillerPerPod; k++) addFiller(fx, filler++);
    const uid = uuid(`pod-${p}`);
    for (let v = 0; v < shape.volumesPerPod; v++) {
      const n = p * shape.volumesPerPod + v;
      const g = globals[n % globals.length];
      if (g === undefined) throw new Error('bench setup: no global mounts');
      const dir = writePodVolume(fx, uid, g.specName, g.handle);
      if (n < shape.mountedPodVolumes) {
        const mountPath = path.join(dir, POD_MOUNT_DIR_NAME);
        const src = fx.mountAt(g.globalMount);
        if (src === undefined) throw new Error(`bench setup: ${g.globalMount} is not mounted`);
        fx.mount({ mountPoint: mountPath, root: src.root, dev: src.dev });
        podMounts.push({ mountPath, globalMount: g.globalMount });
      }
    }
  }
  const blockStagingPaths: string[] = [];
  for (let b = 0; b < shape.blockVolumes; b++) {
    const specName = `pvc-${uuid(`block-${b}`)}`;
    await fx.stageBlock({ specName, driver: DRIVER, handle: `vol-${hex(`block-handle-${b}`).slice(0, 17)}` });
    blockStagingPaths.push(fx.layout.csiBlockStagingPath(specName));
  }
  while (filler < fillerLines) addFiller(fx, filler++);

  const mountInfo = fx.mountInfo();
  const lines = mountInfo.split('\n').filter((l) => l !== '').length;
  if (lines !== shape.mountLines) throw new Error(`bench setup: mount table has ${lines} lines, expected ${shape.mountLines}`);
  return { shape, podMounts, blockStagingPaths, mountInfo, kubeletLines, fillerLines };
}
