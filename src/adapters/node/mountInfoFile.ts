/**
 * MountInfoSource adapters: the live /proc/self/mountinfo (with the kernel release, so the
 * consistent-read rule can apply) or a captured file.
 */
import { release } from 'node:os';
import type { MountInfoSource } from '../../mount/mountTable.js';
import { NodeFileSystem } from './nodeFs.js';

export const LIVE_MOUNTINFO = '/proc/self/mountinfo';
/** Bound on what is read from a mount table: far above any real node's. */
export const MAX_MOUNTINFO_BYTES = 64 * 1024 * 1024;

export function mountInfoFileSource(file: string): MountInfoSource {
  const fs = new NodeFileSystem();
  const live = file === LIVE_MOUNTINFO || file === '/proc/mounts' || file.startsWith('/proc/');
  return {
    name: file,
    kernelRelease: live ? release() : undefined,
    read: async () => new TextDecoder().decode(await fs.readFile(file, MAX_MOUNTINFO_BYTES)),
  };
}
