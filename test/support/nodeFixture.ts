/**
 * Test helper: writes real kubelet layouts (vol_data.json with the bytes kubelet writes) into a temporary root dir
 * and builds the matching mount table as mountinfo text. Nothing is mounted: the mount table is
 * text the tests hand to the code under test.
 */
import { mkdtemp, mkdir, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { KubeletLayout } from '../../src/layout/layout.js';
import { getAttachmentName, makeEphemeralVolumeHandle, sha256Hex } from '../../src/layout/names.js';
import { encodeVolumeData, type VolumeData } from '../../src/volume/csi/volumeData.js';

export interface MountLine {
  readonly mountPoint: string;
  readonly root: string;
  /** "major:minor" */
  readonly dev: string;
  readonly fsType?: string;
  readonly source?: string;
}

/** What to put in a vol_data.json: data to encode, raw bytes, or nothing at all. */
export type FileContent = { readonly data: VolumeData } | { readonly raw: string | Uint8Array } | 'absent';

export interface StageOptions {
  readonly driver: string;
  readonly handle: string;
  /** Written as specVolID unless `legacyFile` is set. */
  readonly specVolID?: string;
  /** A global file from before KEP-6058: only driverName and volumeHandle. */
  readonly legacyFile?: boolean;
  /** Put globalmount in the mount table (default true). */
  readonly mounted?: boolean;
  /** Override the file's content entirely. */
  readonly file?: FileContent;
  /** Override the directory name (default sha256(handle)). */
  readonly dirName?: string;
  /** Override the driver directory name (default `driver`). */
  readonly driverDir?: string;
  /** Create globalmount/ (default true). */
  readonly globalMountDir?: boolean;
}

export interface PodVolumeOptions {
  readonly uid: string;
  readonly specName: string;
  readonly driver: string;
  /** Persistent handle; ignored for ephemeral (synthesised). */
  readonly handle?: string;
  readonly ephemeral?: boolean;
  readonly nodeName?: string;
  /** Override the pod-local file. */
  readonly file?: FileContent;
  /** Bind mount the pod's mount/ from this global mount path (same dev/root); undefined = no mount. */
  readonly boundFrom?: string;
}

export interface BlockOptions {
  readonly specName: string;
  readonly driver: string;
  readonly handle: string;
  /** Create volumeDevices/staging/<spec> (default true). */
  readonly staged?: boolean;
  readonly file?: FileContent;
  readonly nodeName?: string;
  /** Directory name override (default escaped spec name). */
  readonly dirName?: string;
}

export class NodeFixture {
  readonly layout: KubeletLayout;
  private readonly mounts: MountLine[] = [];
  private nextDev = 1;

  private constructor(
    /** The temporary directory holding the root dir (removed by cleanup). */
    readonly base: string,
    readonly root: string,
  ) {
    this.layout = new KubeletLayout(root);
  }

  static async create(): Promise<NodeFixture> {
    const base = await realpath(await mkdtemp(path.join(tmpdir(), 'nodevol-fixture-')));
    const root = path.join(base, 'kubelet');
    await mkdir(root);
    return new NodeFixture(base, root);
  }

  async cleanup(): Promise<void> {
    await rm(this.base, { recursive: true, force: true });
  }

  /** A filesystem CSI volume staged the way MountDevice leaves it; returns the globalmount path. */
  async stage(o: StageOptions): Promise<string> {
    const driverDir = path.join(this.layout.csiPluginDir(), o.driverDir ?? o.driver);
    const volDir = path.join(driverDir, o.dirName ?? sha256Hex(o.handle));
    const globalMount = path.join(volDir, 'globalmount');
    if (o.globalMountDir ?? true) await mkdir(globalMount, { recursive: true, mode: 0o750 });
    else await mkdir(volDir, { recursive: true, mode: 0o750 });
    const data: Record<string, string> = { driverName: o.driver, volumeHandle: o.handle };
    if (o.legacyFile !== true) {
      data['specVolID'] = o.specVolID ?? `pv-${o.handle}`;
      data['volumeLifecycleMode'] = 'Persistent';
    }
    await this.writeContent(path.join(volDir, 'vol_data.json'), o.file ?? { data });
    if (o.mounted ?? true) this.mount({ mountPoint: globalMount, root: '/', dev: this.newDev() });
    return globalMount;
  }

  /** A pod's CSI filesystem volume directory as SetUp leaves it; returns the pod volume dir. */
  async podVolume(o: PodVolumeOptions): Promise<string> {
    const dir = this.layout.csiPodVolumeDir(o.uid, o.specName);
    await mkdir(path.join(dir, 'mount'), { recursive: true, mode: 0o750 });
    const nodeName = o.nodeName ?? 'node-1';
    const handle = o.ephemeral === true ? makeEphemeralVolumeHandle(o.uid, o.specName) : (o.handle ?? '');
    const data = {
      attachmentID: getAttachmentName(handle, o.driver, nodeName),
      driverName: o.driver,
      nodeName,
      specVolID: o.specName,
      volumeHandle: handle,
      volumeLifecycleMode: o.ephemeral === true ? 'Ephemeral' : 'Persistent',
    };
    await this.writeContent(path.join(dir, 'vol_data.json'), o.file ?? { data });
    if (o.boundFrom !== undefined) {
      const src = this.mounts.find((m) => m.mountPoint === o.boundFrom);
      if (src === undefined) throw new Error(`fixture: ${o.boundFrom} is not mounted`);
      this.mount({ mountPoint: path.join(dir, 'mount'), root: src.root, dev: src.dev });
    }
    return dir;
  }

  /** A raw block volume staged the way SetUpDevice leaves it; returns the per-volume dir. */
  async stageBlock(o: BlockOptions): Promise<string> {
    const volDir = o.dirName === undefined ? this.layout.csiBlockVolumeDir(o.specName) : path.join(this.layout.csiBlockDir(), o.dirName);
    await mkdir(path.join(volDir, 'data'), { recursive: true, mode: 0o750 });
    const nodeName = o.nodeName ?? 'node-1';
    const data = {
      attachmentID: getAttachmentName(o.handle, o.driver, nodeName),
      driverName: o.driver,
      nodeName,
      specVolID: o.specName,
      volumeHandle: o.handle,
    };
    await this.writeContent(path.join(volDir, 'data', 'vol_data.json'), o.file ?? { data });
    if (o.staged ?? true) {
      const staging = this.layout.csiBlockStagingPath(o.specName);
      await mkdir(staging, { recursive: true, mode: 0o750 });
      this.mount({ mountPoint: path.join(staging, 'device'), root: '/backing/file', dev: this.newDev() });
    }
    return volDir;
  }

  /** The pod side of a block volume: the device symlink under pods/<uid>/volumeDevices. */
  async podBlockVolume(uid: string, specName: string): Promise<string> {
    const { dir, name } = this.layout.csiPodDeviceMapPath(uid, specName);
    await mkdir(dir, { recursive: true });
    const link = path.join(dir, name);
    await symlink(path.join(this.layout.csiGlobalMapPath(specName), uid), link);
    return link;
  }

  /** Writes bytes at a path relative to the root dir, creating parents. */
  async writeRaw(rel: string, content: string | Uint8Array): Promise<string> {
    const p = path.join(this.root, rel);
    await mkdir(path.dirname(p), { recursive: true });
    await writeFile(p, content);
    return p;
  }

  async mkdirRel(rel: string): Promise<string> {
    const p = path.join(this.root, rel);
    await mkdir(p, { recursive: true });
    return p;
  }

  /** Adds a mount table line (at the end, or before every other line with `first`). */
  mount(m: MountLine, options: { first?: boolean } = {}): void {
    if (options.first === true) this.mounts.unshift(m);
    else this.mounts.push(m);
  }

  /** The mount line at `mountPoint`, if any. */
  mountAt(mountPoint: string): MountLine | undefined {
    return this.mounts.find((m) => m.mountPoint === mountPoint);
  }

  unmountAll(): void {
    this.mounts.length = 0;
  }

  newDev(): string {
    return `259:${this.nextDev++}`;
  }

  /** The mount table as /proc/self/mountinfo text: a root fs line, then every mount in order. */
  mountInfo(): string {
    const lines = ['22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw'];
    let id = 600;
    for (const m of this.mounts) {
      const mp = m.mountPoint.replaceAll('\\', '\\134').replaceAll(' ', '\\040').replaceAll('\t', '\\011').replaceAll('\n', '\\012');
      lines.push(`${id++} 22 ${m.dev} ${m.root} ${mp} rw,relatime shared:${id} - ${m.fsType ?? 'ext4'} ${m.source ?? '/dev/nvme1n1'} rw`);
    }
    return `${lines.join('\n')}\n`;
  }

  /** Writes the mount table next to the root dir and returns its path. */
  async writeMountInfo(): Promise<string> {
    const p = path.join(this.base, 'mountinfo');
    await writeFile(p, this.mountInfo());
    return p;
  }

  private async writeContent(p: string, content: FileContent): Promise<void> {
    if (content === 'absent') return;
    await writeFile(p, 'data' in content ? encodeVolumeData(content.data) : content.raw);
  }
}
