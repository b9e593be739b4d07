/** Test helper: VolumeHosts and audit inputs over a NodeFixture, with real files and a fake clock. */
import { NodeFileSystem } from '../../src/adapters/node/nodeFs.js';
import type { AuditInput } from '../../src/audit/audit.js';
import { FeatureGate } from '../../src/features/features.js';
import type { FileSystem } from '../../src/ports/fs.js';
import type { Logger } from '../../src/ports/logger.js';
import { discardLogger } from '../../src/ports/logger.js';
import { MountTableSnapshot } from '../../src/mount/mountRefs.js';
import { ReadOnlyMounter } from '../../src/mount/readOnlyMounter.js';
import { noCsiDrivers } from '../../src/ports/csi.js';
import { unreachableCluster } from '../../src/ports/cluster.js';
import type { VolumeHost } from '../../src/volume/volumeHost.js';
import { FakeClock } from './fakeClock.js';
import type { NodeFixture } from './nodeFixture.js';

export function gates(on: boolean): FeatureGate {
  return FeatureGate.of({ CSIGlobalMountReconstruction: on });
}

/** A logger that records every line (message and values) for assertions. */
export class RecordingLogger implements Logger {
  readonly lines: { level: number; severity: 'I' | 'W' | 'E'; msg: string; values: Readonly<Record<string, unknown>> }[];
  constructor(
    private readonly level = 0,
    lines?: RecordingLogger['lines'],
  ) {
    this.lines = lines ?? [];
  }
  info(msg: string, values: Readonly<Record<string, unknown>> = {}): void {
    this.lines.push({ level: this.level, severity: 'I', msg, values });
  }
  warning(msg: string, values: Readonly<Record<string, unknown>> = {}): void {
    this.lines.push({ level: this.level, severity: 'W', msg, values });
  }
  error(err: unknown, msg: string, values: Readonly<Record<string, unknown>> = {}): void {
    this.lines.push({ level: this.level, severity: 'E', msg, values: { ...values, err } });
  }
  v(level: number): Logger {
    return new RecordingLogger(level, this.lines);
  }
  enabled(): boolean {
    return true;
  }
  messages(): string[] {
    return this.lines.map((l) => l.msg);
  }
}

/**
 * A recorder whose V(n) lines are enabled only up to `verbosity` (kubelet's -v). It records every
 * line it is handed, enabled or not, so a line built while its level is off shows up (the
 * simulation's logger also records every info line it is given).
 */
export class VerbosityRecorder extends RecordingLogger {
  constructor(
    private readonly verbosity: number,
    level = 0,
    lines?: RecordingLogger['lines'],
  ) {
    super(level, lines);
  }
  override v(level: number): RecordingLogger {
    return new VerbosityRecorder(this.verbosity, level, this.lines);
  }
  override enabled(level?: number): boolean {
    return (level ?? 0) <= this.verbosity;
  }
}

export interface HostOptions {
  readonly gateOn: boolean;
  readonly fs?: FileSystem;
  readonly logger?: Logger;
  /** Mount table text; default the fixture's. */
  readonly mountInfo?: string;
}

export function volumeHost(fx: NodeFixture, o: HostOptions): VolumeHost {
  const text = o.mountInfo ?? fx.mountInfo();
  const fs = o.fs ?? new NodeFileSystem();
  return {
    layout: fx.layout,
    realRootDir: fx.root,
    fs,
    features: gates(o.gateOn),
    logger: o.logger ?? discardLogger,
    clock: new FakeClock({ autoAdvance: true }),
    mounter: new ReadOnlyMounter(fs, () => Promise.resolve(MountTableSnapshot.parse(text, { strict: true }))),
    csiDrivers: noCsiDrivers,
    cluster: unreachableCluster,
    nodeName: 'node-1',
  };
}

export function auditInput(fx: NodeFixture, o: HostOptions): AuditInput {
  return {
    fs: o.fs ?? new NodeFileSystem(),
    layout: fx.layout,
    realRootDir: fx.root,
    features: gates(o.gateOn),
    logger: o.logger ?? discardLogger,
    clock: new FakeClock({ autoAdvance: true }),
    mountTable: MountTableSnapshot.parse(o.mountInfo ?? fx.mountInfo(), { strict: false }),
    nowMs: Date.UTC(2026, 10, 29, 12, 0, 0),
  };
}
