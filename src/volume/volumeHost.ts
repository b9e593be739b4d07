/**
 * VolumeHost: what the node gives a volume plugin (pkg/volume/plugins.go VolumeHost), reduced to
 * nodevol's ports. Plugins reach files, the mount table, gates, logs and time only through it.
 */
import type { FeatureGate } from '../features/features.js';
import type { FileSystem } from '../host/fs.js';
import type { Logger } from '../host/logger.js';
import type { KubeletLayout } from '../layout/layout.js';
import type { MountTableSnapshot, SleepClock } from '../mount/mountRefs.js';

export interface VolumeHost {
  readonly layout: KubeletLayout;
  /**
   * The root dir with every symlink resolved. Paths read from the mount table are real paths, and
   * nothing outside this directory is ever read or written.
   */
  readonly realRootDir: string;
  readonly fs: FileSystem;
  readonly features: FeatureGate;
  readonly logger: Logger;
  readonly clock: SleepClock;
  /** A fresh, strictly parsed snapshot of the mount table (kubelet re-reads mountinfo on each call). */
  loadMountTable(): Promise<MountTableSnapshot>;
}
