/**
 * VolumeHost: what the node gives a volume plugin (pkg/volume/plugins.go VolumeHost), reduced to
 * nodevol's ports. Plugins reach files, the mount table, gates, logs and time only through it.
 * Of the gates, only kubelet's own can be asked (KubeletFeatureGate): nodevol's act through the
 * hooks the kubelet copy declares (volume/csi/csiHooks.ts and the like).
 */
import type { CsiDriverRegistry } from '../ports/csi.js';
import type { KubeletFeatureGate } from '../features/features.js';
import type { Clock } from '../ports/clock.js';
import type { ClusterView } from '../ports/cluster.js';
import type { FileSystem } from '../ports/fs.js';
import type { Logger } from '../ports/logger.js';
import type { KubeletLayout } from '../layout/layout.js';
import type { Mounter } from '../ports/mounter.js';

export interface VolumeHost {
  readonly layout: KubeletLayout;
  /**
   * The root dir with every symlink resolved. Paths read from the mount table are real paths, and
   * nothing outside this directory is ever read or written.
   */
  readonly realRootDir: string;
  readonly fs: FileSystem;
  readonly features: KubeletFeatureGate;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Mount checks, bind mounts, and fresh snapshots of the mount table. */
  readonly mounter: Mounter;
  /** The CSI drivers registered on this node. */
  readonly csiDrivers: CsiDriverRegistry;
  /** The API server's view (CSIDriver objects for CanAttach). */
  readonly cluster: ClusterView;
  readonly nodeName: string;
}
