/**
 * The mock driver's Identity service: GetPluginInfo (the driver name and nodevol's version),
 * GetPluginCapabilities (a controller service, online volume expansion) and Probe (always ready).
 */
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import type { IdentityHandlers } from '../adapters/grpc/server.js';
import type { Dispatch } from './callPipeline.js';

let cachedVersion: string | undefined;

/** nodevol's version from the package.json above this module ('0.0.0' when none is found). */
export function packageVersion(): string {
  if (cachedVersion !== undefined) return cachedVersion;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(dir, 'package.json');
    if (existsSync(candidate)) {
      try {
        const pkg = JSON.parse(readFileSync(candidate, 'utf8')) as { name?: unknown; version?: unknown };
        if (pkg.name === 'nodevol' && typeof pkg.version === 'string') {
          cachedVersion = pkg.version;
          return cachedVersion;
        }
      } catch {
        // not ours; keep walking up
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  cachedVersion = '0.0.0';
  return cachedVersion;
}

export class MockIdentityServer {
  constructor(private readonly info: { readonly driverName: string; readonly vendorVersion?: string }) {}

  handlers(dispatch: Dispatch): IdentityHandlers {
    return {
      getPluginInfo: (req) => dispatch('GetPluginInfo', req, '', () => Promise.resolve({ name: this.info.driverName, vendorVersion: this.info.vendorVersion ?? packageVersion() })),
      getPluginCapabilities: (req) =>
        dispatch('GetPluginCapabilities', req, '', () => Promise.resolve({ capabilities: [{ service: { type: 'CONTROLLER_SERVICE' } }, { volumeExpansion: { type: 'ONLINE' } }] })),
      probe: (req) => dispatch('Probe', req, '', () => Promise.resolve({ ready: { value: true } })),
    };
  }
}
