/**
 * Where the agent finds CSI drivers: `--csi-endpoint DRIVER=unix:///abs/csi.sock` entries, else
 * the conventional socket <root-dir>/plugins/<driver>/csi.sock when it exists (kubelet's plugin
 * registration dir layout). A driver with neither is "not registered": operations on its volumes
 * fail as transient and are retried, and the agent says so once in its log.
 *
 * The CSI driver registry port over gRPC clients and the socket files on disk: an adapter, wired
 * by `nodevol agent` (src/cli/agentCommand.ts) like the other real-node adapters.
 */
import { existsSync } from 'node:fs';
import type { CsiDriverRegistry, CsiNodeClient } from '../../ports/csi.js';
import type { GrpcCsiDriverRegistry } from './client.js';
import { unixEndpoint } from './endpoint.js';
import type { Logger } from '../../ports/logger.js';
import type { KubeletLayout } from '../../layout/layout.js';
import { isSafePathComponent } from '../../layout/names.js';

/** Parses one `--csi-endpoint` value: DRIVER=unix:///abs/path. */
export function parseCsiEndpointFlag(value: string): { driver: string; endpoint: string } {
  const eq = value.indexOf('=');
  if (eq <= 0 || eq === value.length - 1) {
    throw new Error(`invalid --csi-endpoint ${JSON.stringify(value)}: want DRIVER=unix:///absolute/path/csi.sock`);
  }
  return { driver: value.slice(0, eq), endpoint: value.slice(eq + 1) };
}

export class DiscoveringDriverRegistry implements CsiDriverRegistry {
  /** Drivers already reported missing (logged once each until they appear). */
  private readonly reportedMissing = new Set<string>();

  constructor(
    private readonly inner: GrpcCsiDriverRegistry,
    private readonly layout: KubeletLayout,
    private readonly logger: Logger,
  ) {}

  client(driverName: string): CsiNodeClient | undefined {
    const known = this.inner.client(driverName);
    if (known !== undefined) return known;
    const socket = isSafePathComponent(driverName) ? this.layout.driverSocketPath(driverName) : undefined;
    if (socket !== undefined && existsSync(socket)) {
      this.inner.register(driverName, unixEndpoint(socket));
      this.reportedMissing.delete(driverName);
      this.logger.info('Found CSI driver socket', { driver: driverName, endpoint: unixEndpoint(socket) });
      return this.inner.client(driverName);
    }
    if (!this.reportedMissing.has(driverName)) {
      this.reportedMissing.add(driverName);
      this.logger.error(undefined, 'CSI driver is not registered: no --csi-endpoint for it and no socket found; its volumes wait', {
        driver: driverName,
        expectedSocket: socket ?? '(driver name is not a valid path component)',
      });
    }
    return undefined;
  }
}
