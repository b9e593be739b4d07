/**
 * MountInfoSource adapters: the live /proc/self/mountinfo (with the kernel release, so the
 * consistent-read rule can apply) or a captured file.
 *
 * Bounded in memory: at most MAX_MOUNTINFO_BYTES are read and at most MAX_MOUNTINFO_LINES lines
 * are accepted (a parsed line costs far more than its bytes: a table of millions of short lines
 * would exhaust the heap). A FIFO, socket or device is refused by name (the FileSystem port
 * opens non-blocking and reads only regular files), and the read is bounded in time.
 */
import { release } from 'node:os';
import type { FileSystem } from '../../ports/fs.js';
import type { MountInfoSource } from '../../mount/mountTable.js';
import { NodeFileSystem } from './nodeFs.js';

export const LIVE_MOUNTINFO = '/proc/self/mountinfo';
/** Bound on the bytes read from a mount table: far above any real node's (~200 bytes a line). */
export const MAX_MOUNTINFO_BYTES = 32 * 1024 * 1024;
/** Bound on its lines: a node with 10,000 pods and several mounts each stays well below. */
export const MAX_MOUNTINFO_LINES = 200_000;

const NEWLINE = '\n';

/** `fs`: how the file is read (the audit passes its synchronous reader); same bounds either way. */
export function mountInfoFileSource(file: string, fs: FileSystem = new NodeFileSystem()): MountInfoSource {
  const live = file === LIVE_MOUNTINFO || file === '/proc/mounts' || file.startsWith('/proc/');
  return {
    name: file,
    kernelRelease: live ? release() : undefined,
    read: async () => {
      const bytes = await fs.readFile(file, MAX_MOUNTINFO_BYTES);
      // Decoded first (bounded by the byte cap), then the lines counted with the string's own
      // indexOf, far cheaper per call than Buffer#indexOf; nothing is split before the count.
      const text = new TextDecoder().decode(bytes);
      let lines = 0;
      for (let i = text.indexOf(NEWLINE); i !== -1; i = text.indexOf(NEWLINE, i + 1)) {
        if (++lines > MAX_MOUNTINFO_LINES) {
          throw new Error(`mount table ${file} has more than ${MAX_MOUNTINFO_LINES} lines; refusing to parse it (the limit bounds memory; a real node's is far smaller)`);
        }
      }
      return text;
    },
  };
}
